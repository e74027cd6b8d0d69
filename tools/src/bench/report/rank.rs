//! Can a few runs tell two subjects apart? A rank test on their runs.
//!
//! Each compared rate is measured in a handful of interleaved runs per
//! subject (repeat.rs), and on a shared machine one run differs from the
//! next by more than the proxies differ from one another. Two medians
//! then say "ahead" or "behind" on a coin toss. This file asks the runs
//! themselves, with the rank-sum (Mann-Whitney) test in its exact form:
//!
//! ```text
//!   U      = pairs (ours, theirs) where ours is faster, ties half
//!   shuffle: if the labels did not matter, every way of calling n of the
//!            n + m runs "ours" would be as likely as the one measured
//!   p      = share of those ways whose U is at least the measured U
//!   ahead  when p < 0.05; behind when the same holds the other way round;
//!   level  otherwise: these runs cannot tell the two apart
//! ```
//!
//! Why exact, by enumeration: with 5 runs each there are 252 ways, and
//! counting them is plainer than a normal approximation that needs more
//! runs than we have. It also handles ties (equal rates) without a
//! correction. Why one-sided, each way: the question is "is ours faster"
//! (or "slower"), not "are they different". The smallest p that 5 runs
//! against 5 can give is 1/252, when every run of one beats every run of
//! the other; so "ahead" needs nearly that: U of at least 21 of 25 pairs.

/// The significance each one-sided test asks for.
pub const ALPHA: f64 = 0.05;

/// The most runs, both subjects together, that the test enumerates
/// (2^20 ways to label them): far more than a benchmark run measures.
const MOST_RUNS: usize = 20;

/// Fewest runs per subject for a verdict: with 2 against 2, p is never
/// below 1/6 and the test could only ever say "level".
const FEWEST_RUNS: usize = 3;

/// What the runs say of ours against theirs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Ours is better: fewer than [`ALPHA`] of the labelings do as well.
    Ahead,
    /// The runs cannot tell them apart.
    Level,
    /// Ours is worse, by the same test the other way round.
    Behind,
}

impl Verdict {
    /// The word the report shows.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Ahead => "ahead",
            Verdict::Level => "level",
            Verdict::Behind => "behind",
        }
    }
}

/// The verdict on `ours` against `theirs` (every run's value of a rate,
/// or of a cost when `higher_is_better` is false). None when either has
/// fewer than `FEWEST_RUNS` runs or both more than `MOST_RUNS`.
pub fn verdict(ours: &[f64], theirs: &[f64], higher_is_better: bool) -> Option<Verdict> {
    let (better, worse) = if higher_is_better {
        (ours, theirs)
    } else {
        (theirs, ours)
    };
    if better.len().min(worse.len()) < FEWEST_RUNS {
        return None;
    }
    if p_at_least(better, worse)? < ALPHA {
        Some(Verdict::Ahead)
    } else if p_at_least(worse, better)? < ALPHA {
        Some(Verdict::Behind)
    } else {
        Some(Verdict::Level)
    }
}

/// The exact one-sided p of the rank-sum test: of every way to label
/// `a.len()` of the pooled runs as `a`, the share whose U is at least
/// the measured one. None past [`MOST_RUNS`].
fn p_at_least(a: &[f64], b: &[f64]) -> Option<f64> {
    let pooled: Vec<f64> = a.iter().chain(b).copied().collect();
    if pooled.len() > MOST_RUNS {
        return None;
    }
    let measured = u_statistic(a, b);
    let (mut ways, mut as_large) = (0u32, 0u32);
    for mask in 0u32..(1 << pooled.len()) {
        if mask.count_ones() as usize != a.len() {
            continue;
        }
        let (mut left, mut right) = (Vec::new(), Vec::new());
        for (i, &run) in pooled.iter().enumerate() {
            if mask & (1 << i) != 0 {
                left.push(run);
            } else {
                right.push(run);
            }
        }
        ways += 1;
        if u_statistic(&left, &right) >= measured {
            as_large += 1;
        }
    }
    Some(f64::from(as_large) / f64::from(ways))
}

/// Twice the Mann-Whitney U of `a` over `b`: 2 for each pair where a's
/// run is larger, 1 for each tie.
fn u_statistic(a: &[f64], b: &[f64]) -> u32 {
    a.iter()
        .flat_map(|x| b.iter().map(move |y| x.total_cmp(y)))
        .map(|order| match order {
            std::cmp::Ordering::Greater => 2,
            std::cmp::Ordering::Equal => 1,
            std::cmp::Ordering::Less => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_run_faster_is_ahead_at_one_in_252() {
        let ours = [11.0, 12.0, 13.0, 14.0, 15.0];
        let theirs = [1.0, 2.0, 3.0, 4.0, 5.0];
        let p = p_at_least(&ours, &theirs).unwrap();
        assert!((p - 1.0 / 252.0).abs() < 1e-12, "{p}");
        assert_eq!(verdict(&ours, &theirs, true), Some(Verdict::Ahead));
        assert_eq!(verdict(&theirs, &ours, true), Some(Verdict::Behind));
    }

    #[test]
    fn overlapping_runs_are_level() {
        // The shape of a real two-thread row: medians 10% apart, runs
        // spread ±25% around them.
        let ours = [33_471.0, 18_826.0, 30_248.0, 30_267.0, 35_101.0];
        let theirs = [20_069.0, 43_392.0, 31_381.0, 36_849.0, 38_370.0];
        assert_eq!(verdict(&ours, &theirs, true), Some(Verdict::Level));
        assert_eq!(verdict(&theirs, &ours, true), Some(Verdict::Level));
    }

    #[test]
    fn ahead_takes_21_of_25_pairs() {
        let ours = [4.5, 12.0, 13.0, 14.0, 15.0];
        // U = 24 of 25: 2 of 252 labelings do as well.
        let theirs = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(u_statistic(&ours, &theirs), 2 * 24);
        assert_eq!(verdict(&ours, &theirs, true), Some(Verdict::Ahead));
        // U = 21: 12 of 252 (p 0.048), still ahead.
        let theirs = [1.0, 2.0, 3.0, 4.8, 13.5];
        assert_eq!(u_statistic(&ours, &theirs), 2 * 21);
        assert_eq!(verdict(&ours, &theirs, true), Some(Verdict::Ahead));
        // U = 20: 19 of 252 (p 0.075), level.
        let theirs = [1.0, 2.0, 3.0, 12.5, 13.5];
        assert_eq!(u_statistic(&ours, &theirs), 2 * 20);
        assert_eq!(verdict(&ours, &theirs, true), Some(Verdict::Level));
    }

    #[test]
    fn identical_runs_are_level_and_ties_count_half() {
        let same = [7.0, 7.0, 7.0];
        assert_eq!(u_statistic(&same, &same), 9);
        assert_eq!(verdict(&same, &same, true), Some(Verdict::Level));
    }

    #[test]
    fn a_cost_is_ahead_when_lower() {
        let ours = [1.0, 1.1, 1.2];
        let theirs = [2.0, 2.1, 2.2];
        // 3 against 3: 1 of 20 labelings, p 0.05, not below it.
        assert_eq!(verdict(&ours, &theirs, false), Some(Verdict::Level));
        let ours = [1.0, 1.1, 1.2, 1.3];
        let theirs = [2.0, 2.1, 2.2, 2.3];
        assert_eq!(verdict(&ours, &theirs, false), Some(Verdict::Ahead));
        assert_eq!(verdict(&ours, &theirs, true), Some(Verdict::Behind));
    }

    #[test]
    fn too_few_or_too_many_runs_give_no_verdict() {
        assert_eq!(verdict(&[1.0, 2.0], &[3.0, 4.0, 5.0], true), None);
        let many = [1.0; 11];
        assert_eq!(verdict(&many, &many, true), None);
    }
}
