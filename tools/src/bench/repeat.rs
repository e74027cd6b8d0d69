//! A rate measured more than once, since one run on a shared machine
//! varies by a fifth from the next: every subject
//! [`Sizes::repetitions`](super::sizes::Sizes::repetitions) times,
//! interleaved, and of each subject's runs the one with the median rate.
//!
//! ```text
//!   round 1:  direct  epoll 1  epoll 2  haproxy 1  ...
//!   round 2:  direct  epoll 1  epoll 2  haproxy 1  ...
//!   round 3:  direct  epoll 1  epoll 2  haproxy 1  ...
//! ```
//!
//! Why interleaved: on a shared machine one 3-second run varies by some
//! ±15% from the next, and the machine drifts. Run one subject three
//! times, then the next, and the drift lands on whoever comes last; run
//! every subject once a round, and it spreads over all of them.
//!
//! Why the median run, whole: a row's latency percentiles and CPU belong
//! to the run whose rate it shows, so the row keeps that run's
//! [`Measured`], not a mean of numbers from different runs. With an even
//! count the lower of the two middle runs (the less flattering one).
//! A run that failed fails the row: a median of the runs that worked
//! would hide it. So does a run that finished with a wrong answer (a bulk
//! echo that came back altered, [`median_unless`]): the row is that run.

use super::report::results::{Measured, Outcome};

/// Which round a run belongs to: `number` of `of`, from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Round {
    /// This round, from 1.
    pub number: usize,
    /// How many rounds there are.
    pub of: usize,
}

impl Round {
    /// The first round (the one where what is measured once is measured).
    pub fn is_first(&self) -> bool {
        self.number == 1
    }

    /// `what` with the round, as `C connections (2/3)`; just `what` when
    /// there is one round.
    pub fn label(&self, what: &str) -> String {
        if self.of > 1 {
            format!("{what} ({}/{})", self.number, self.of)
        } else {
            what.to_string()
        }
    }
}

/// Runs `run` on every subject `rounds` times (at least once): round 1
/// runs each subject once, in order, then round 2, and so on. Returns
/// each subject's runs (in the order of `subjects`), in round order.
pub fn interleaved<S: Copy, R>(
    rounds: usize,
    subjects: &[S],
    mut run: impl FnMut(Round, S) -> R,
) -> Vec<Vec<R>> {
    let of = rounds.max(1);
    let mut runs: Vec<Vec<R>> = subjects.iter().map(|_| Vec::with_capacity(of)).collect();
    for number in 1..=of {
        let round = Round { number, of };
        for (own, &subject) in runs.iter_mut().zip(subjects) {
            own.push(run(round, subject));
        }
    }
    runs
}

/// One subject's runs of a rate reduced to one outcome: the run with the
/// median `rate`, or, if a run did not finish, the first failure (else
/// the first skip), saying which run it was. Also returns every run's
/// rate, in round order (None where it did not finish), for the report.
pub fn median<T>(
    runs: Vec<Outcome<T>>,
    rate: impl Fn(&T) -> f64,
) -> (Outcome<T>, Vec<Option<f64>>) {
    let rates: Vec<Option<f64>> = runs
        .iter()
        .map(|run| run.done().map(|m| rate(&m.value)))
        .collect();
    let count = runs.len();
    let which = |i: usize, why: String| {
        if count > 1 {
            format!("run {} of {count}: {why}", i + 1)
        } else {
            why
        }
    };
    let mut done: Vec<(f64, Measured<T>)> = Vec::new();
    let mut failed = None;
    let mut skipped = None;
    for (i, run) in runs.into_iter().enumerate() {
        match run {
            Outcome::Done(m) => done.push((rate(&m.value), m)),
            Outcome::Failed(why) => {
                failed.get_or_insert_with(|| which(i, why));
            }
            Outcome::Skipped(why) => {
                skipped.get_or_insert_with(|| which(i, why));
            }
        }
    }
    let outcome = match (failed, skipped) {
        (Some(why), _) => Outcome::Failed(why),
        (None, Some(why)) => Outcome::Skipped(why),
        (None, None) => median_of(done),
    };
    (outcome, rates)
}

/// [`median`], except that a run that finished `spoiled` (its answer was
/// wrong, though it had one) is the row, whole, with a note saying which
/// run it was: its numbers are then the reason the row is wrong, not a
/// rate to pick among. A failed run still comes first, as in [`median`].
pub fn median_unless<T>(
    runs: Vec<Outcome<T>>,
    rate: impl Fn(&T) -> f64,
    spoiled: impl Fn(&T) -> bool,
) -> (Outcome<T>, Vec<Option<f64>>) {
    let failed = runs.iter().any(|r| matches!(r, Outcome::Failed(_)));
    let first_spoiled = runs
        .iter()
        .position(|r| r.done().is_some_and(|m| spoiled(&m.value)));
    let (Some(i), false) = (first_spoiled, failed) else {
        return median(runs, rate);
    };
    let rates = runs
        .iter()
        .map(|run| run.done().map(|m| rate(&m.value)))
        .collect();
    let count = runs.len();
    let mut runs = runs;
    let mut kept = runs.swap_remove(i);
    if let (Outcome::Done(m), true) = (&mut kept, count > 1) {
        let which = format!("run {} of {count} is the row: its answer was wrong", i + 1);
        m.note = Some(match m.note.take() {
            Some(note) => format!("{which}; {note}"),
            None => which,
        });
    }
    (kept, rates)
}

/// The run with the median rate (the lower middle one of an even count).
fn median_of<T>(mut done: Vec<(f64, Measured<T>)>) -> Outcome<T> {
    done.sort_by(|a, b| a.0.total_cmp(&b.0));
    let middle = done.len().saturating_sub(1) / 2;
    match done.into_iter().nth(middle) {
        Some((_, m)) => Outcome::Done(m),
        None => Outcome::Failed("no run".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A finished run of `rate`; its client CPU says which run it was.
    fn run(rate: f64, tag: u64) -> Outcome<f64> {
        Outcome::Done(Measured {
            value: rate,
            cost: None,
            client_cpu: Duration::from_millis(tag),
            wall: Duration::from_secs(3),
            segments: None,
            machine: None,
            note: None,
        })
    }

    /// The kept run's rate and tag.
    fn kept(outcome: &Outcome<f64>) -> Option<(f64, u64)> {
        let m = outcome.done()?;
        Some((m.value, m.client_cpu.as_millis() as u64))
    }

    #[test]
    fn rounds_run_every_subject_once_before_the_next_round() {
        let mut order = Vec::new();
        let runs = interleaved(3, &['a', 'b'], |round, subject| {
            order.push((round.number, subject));
            format!("{subject}{}", round.number)
        });
        assert_eq!(
            order,
            [(1, 'a'), (1, 'b'), (2, 'a'), (2, 'b'), (3, 'a'), (3, 'b')]
        );
        assert_eq!(runs, [["a1", "a2", "a3"], ["b1", "b2", "b3"]]);
        let once = interleaved(0, &['a'], |round, _| round);
        assert_eq!(once, [[Round { number: 1, of: 1 }]]);
    }

    #[test]
    fn labels_show_the_round_only_when_there_are_several() {
        let second = Round { number: 2, of: 3 };
        assert_eq!(second.label("C connections"), "C connections (2/3)");
        assert!(!second.is_first());
        assert_eq!(Round { number: 1, of: 1 }.label("C idle"), "C idle");
    }

    #[test]
    fn an_odd_count_keeps_the_middle_run_whole() {
        let (outcome, rates) = median(vec![run(30.0, 1), run(10.0, 2), run(20.0, 3)], |r| *r);
        assert_eq!(kept(&outcome), Some((20.0, 3)));
        assert_eq!(rates, [Some(30.0), Some(10.0), Some(20.0)]);
        let (one, _) = median(vec![run(5.0, 7)], |r| *r);
        assert_eq!(kept(&one), Some((5.0, 7)));
    }

    #[test]
    fn an_even_count_keeps_the_lower_middle_run() {
        let runs = vec![run(40.0, 1), run(10.0, 2), run(30.0, 3), run(20.0, 4)];
        let (outcome, _) = median(runs, |r| *r);
        assert_eq!(kept(&outcome), Some((20.0, 4)));
        let (two, _) = median(vec![run(9.0, 1), run(8.0, 2)], |r| *r);
        assert_eq!(kept(&two), Some((8.0, 2)));
    }

    #[test]
    fn a_spoiled_run_is_the_row_and_says_which() {
        let odd = |r: &f64| r.fract() != 0.0;
        let runs = vec![run(30.0, 1), run(10.5, 2), run(20.0, 3)];
        let (outcome, rates) = median_unless(runs, |r| *r, odd);
        assert_eq!(kept(&outcome), Some((10.5, 2)));
        let note = outcome.done().and_then(|m| m.note.clone());
        assert_eq!(
            note.as_deref(),
            Some("run 2 of 3 is the row: its answer was wrong")
        );
        assert_eq!(rates, [Some(30.0), Some(10.5), Some(20.0)]);
        let fine = vec![run(30.0, 1), run(10.0, 2), run(20.0, 3)];
        let (outcome, _) = median_unless(fine, |r| *r, odd);
        assert_eq!(kept(&outcome), Some((20.0, 3)));
        assert_eq!(outcome.done().and_then(|m| m.note.clone()), None);
        let alone = median_unless(vec![run(1.5, 4)], |r| *r, odd).0;
        assert_eq!(
            alone.done().and_then(|m| m.note.clone()),
            None,
            "one run needs no number"
        );
        let failed = vec![run(1.5, 1), Outcome::Failed("reset".to_string())];
        let (outcome, _) = median_unless(failed, |r| *r, odd);
        assert!(matches!(outcome, Outcome::Failed(why) if why == "run 2 of 2: reset"));
    }

    #[test]
    fn a_failed_run_fails_the_row_and_says_which() {
        let runs = vec![
            run(30.0, 1),
            Outcome::Skipped("not today".to_string()),
            Outcome::Failed("refused".to_string()),
        ];
        let (outcome, rates) = median(runs, |r| *r);
        match outcome {
            Outcome::Failed(why) => assert_eq!(why, "run 3 of 3: refused"),
            other => panic!("not a failure: {other:?}"),
        }
        assert_eq!(rates, [Some(30.0), None, None]);
        let (alone, _) = median(vec![Outcome::<f64>::Failed("refused".to_string())], |r| *r);
        assert!(matches!(alone, Outcome::Failed(why) if why == "refused"));
        let (none, rates) = median(Vec::<Outcome<f64>>::new(), |r| *r);
        assert!(matches!(none, Outcome::Failed(_)));
        assert!(rates.is_empty());
    }
}
