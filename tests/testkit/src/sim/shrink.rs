//! Shrinking a failing schedule: the bytes of a failing run, cut and
//! lowered for as long as the run still fails the same way (the same
//! promise broken), so that what is left is a short story of the bug.
//!
//! Any byte string is a valid schedule (a replay reads zeros past its
//! end, and zeros are the dull choices), so every cut is worth a try:
//! first whole chunks, large to small, then single bytes toward zero.
//! Each try is one run; the tries are bounded.

use std::cell::Cell;

use super::choices::Choices;
use super::{Config, Failure, Found, replay_line, run};

/// The most runs one shrink makes.
const TRIES: usize = 4_000;

/// `schedule` made as short and as dull as it can be while a run of it
/// still fails with `kind`.
pub fn shrink(schedule: &[u8], config: &Config, kind: &str) -> Vec<u8> {
    let mut best = schedule.to_vec();
    let tries = Cell::new(0);
    let fails = |candidate: &[u8]| {
        tries.set(tries.get() + 1);
        let failed = run(&mut Choices::given(candidate), config);
        failed.is_err_and(|f| f.violation.kind == kind)
    };
    loop {
        let before = best.clone();
        best = cut(best, &fails, &tries);
        best = lower(best, &fails, &tries);
        if best == before || tries.get() >= TRIES {
            break;
        }
    }
    // Zeros at the end are what a replay reads anyway.
    while best.last() == Some(&0) {
        best.pop();
    }
    best
}

/// Cuts whole chunks out, large to small, while the run still fails.
fn cut(mut best: Vec<u8>, fails: &impl Fn(&[u8]) -> bool, tries: &Cell<usize>) -> Vec<u8> {
    for size in [512, 128, 32, 8, 2, 1] {
        let mut at = 0;
        while at < best.len() && tries.get() < TRIES {
            let end = (at + size).min(best.len());
            let candidate = [&best[..at], &best[end..]].concat();
            if fails(&candidate) {
                best = candidate;
            } else {
                at += size;
            }
        }
    }
    best
}

/// Lowers chunks to zeros, then single bytes toward zero, while the run
/// still fails.
fn lower(mut best: Vec<u8>, fails: &impl Fn(&[u8]) -> bool, tries: &Cell<usize>) -> Vec<u8> {
    for size in [16, 4] {
        for at in (0..best.len()).step_by(size) {
            let end = (at + size).min(best.len());
            if tries.get() >= TRIES || best[at..end].iter().all(|&b| b == 0) {
                continue;
            }
            let mut candidate = best.clone();
            candidate[at..end].fill(0);
            if fails(&candidate) {
                best = candidate;
            }
        }
    }
    for at in 0..best.len() {
        for lower in [0, best[at] / 2, best[at].saturating_sub(1)] {
            if tries.get() >= TRIES || lower >= best[at] {
                continue;
            }
            let mut candidate = best.clone();
            candidate[at] = lower;
            if fails(&candidate) {
                best = candidate;
            }
        }
    }
    best
}

/// The hex form of a schedule, for a command line.
pub fn hex(schedule: &[u8]) -> String {
    schedule.iter().map(|b| format!("{b:02x}")).collect()
}

/// A schedule from its hex form.
pub fn from_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// A failure of `seed` (its run drew `used`), shrunk, with its replays.
pub fn found(seed: u64, failure: Failure, used: &[u8], config: &Config) -> Found {
    let schedule = shrink(used, config, failure.violation.kind);
    let shrunk_steps = match run(&mut Choices::given(&schedule), config) {
        Err(f) => f.step,
        Ok(report) => report.steps,
    };
    Found {
        seed,
        seed_steps: failure.step,
        replay: replay_line(&format!("--seed {seed}"), config),
        replay_shrunk: replay_line(&format!("--schedule {}", hex(&schedule)), config),
        schedule,
        shrunk_steps,
        failure,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_reads_back() {
        let bytes = [0u8, 1, 0xab, 0xff];
        assert_eq!(from_hex(&hex(&bytes)), Some(bytes.to_vec()));
        assert_eq!(from_hex("abc"), None);
        assert_eq!(from_hex("zz"), None);
        assert_eq!(from_hex(""), Some(vec![]));
    }
}
