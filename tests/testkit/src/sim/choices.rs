//! Where every decision of a simulated run comes from: a byte string,
//! drawn from a seeded generator or given whole (a replay, a shrunk
//! schedule, a fuzzer's input). The same bytes make the same run, so a
//! failure is a seed, or a short hex string, that anyone can run again.
//!
//! Zeros are the dull choice: a rare event (a reset, a stop, a short read)
//! happens only on a high draw, so a schedule shrunk toward zeros keeps
//! only what its failure needs. A replay that runs out of bytes reads
//! zeros from then on.

/// A seeded generator (SplitMix64): small, fast, and the same everywhere.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[derive(Debug, Clone)]
enum Source {
    Seeded {
        rng: SplitMix64,
        spare: u64,
        left: u8,
    },
    Given {
        bytes: Vec<u8>,
        at: usize,
    },
}

/// The decisions of one run, and a record of every byte used.
#[derive(Debug, Clone)]
pub struct Choices {
    source: Source,
    used: Vec<u8>,
}

impl Choices {
    /// Decisions drawn from `seed`.
    pub fn seeded(seed: u64) -> Choices {
        let rng = SplitMix64(seed);
        Choices {
            source: Source::Seeded {
                rng,
                spare: 0,
                left: 0,
            },
            used: Vec::new(),
        }
    }

    /// Decisions read from `bytes`, then zeros.
    pub fn given(bytes: &[u8]) -> Choices {
        Choices {
            source: Source::Given {
                bytes: bytes.to_vec(),
                at: 0,
            },
            used: Vec::new(),
        }
    }

    /// Whether a given string has been read to its end.
    pub fn exhausted(&self) -> bool {
        matches!(&self.source, Source::Given { bytes, at } if *at >= bytes.len())
    }

    /// Every byte drawn so far: the run's schedule.
    pub fn used(&self) -> &[u8] {
        &self.used
    }

    fn byte(&mut self) -> u8 {
        let byte = match &mut self.source {
            Source::Seeded { rng, spare, left } => {
                if *left == 0 {
                    (*spare, *left) = (rng.next(), 8);
                }
                *left -= 1;
                let byte = *spare as u8;
                *spare >>= 8;
                byte
            }
            Source::Given { bytes, at } => {
                let byte = bytes.get(*at).copied().unwrap_or(0);
                *at += 1;
                byte
            }
        };
        self.used.push(byte);
        byte
    }

    /// A number below `n` (0 if `n` is 0 or 1), from as few bytes as `n`
    /// needs.
    pub fn below(&mut self, n: u32) -> u32 {
        if n <= 1 {
            return 0;
        }
        let width = if n <= 0x100 {
            1
        } else if n <= 0x1_0000 {
            2
        } else {
            4
        };
        let mut value = 0u32;
        for _ in 0..width {
            value = value << 8 | u32::from(self.byte());
        }
        value % n
    }

    /// A number in `low..=high`.
    pub fn between(&mut self, low: u32, high: u32) -> u32 {
        low + self.below(high.saturating_sub(low) + 1)
    }

    /// True `percent` times in a hundred: on the highest draws, so that
    /// zeros never choose the rare event.
    pub fn chance(&mut self, percent: u32) -> bool {
        self.below(100) >= 100 - percent.min(100)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_the_same_decisions_and_a_record_replays_them() {
        let mut a = Choices::seeded(7);
        let drawn: Vec<u32> = (0..50).map(|i| a.below(10 + i * 300)).collect();
        let mut b = Choices::seeded(7);
        assert_eq!(
            drawn,
            (0..50).map(|i| b.below(10 + i * 300)).collect::<Vec<_>>()
        );
        let mut replay = Choices::given(a.used());
        assert_eq!(
            drawn,
            (0..50)
                .map(|i| replay.below(10 + i * 300))
                .collect::<Vec<_>>()
        );
        assert!(replay.exhausted());
        assert_eq!(replay.below(1000), 0, "zeros after the end");
    }

    #[test]
    fn zeros_never_choose_the_rare_event() {
        let mut zeros = Choices::given(&[]);
        assert!(!zeros.chance(99));
        assert_eq!(zeros.between(3, 9), 3);
        let mut ones = Choices::given(&[99]);
        assert!(ones.chance(1));
    }
}
