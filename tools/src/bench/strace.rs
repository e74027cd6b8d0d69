//! What `strace -c` says: its summary table, read into a count of calls
//! and failed calls per system call, for the census (census.rs) to divide
//! by the requests it made.
//!
//! ```text
//! % time     seconds  usecs/call     calls    errors syscall
//! ------ ----------- ----------- --------- --------- ----------------
//!  15.92    1.504808          37     40000           sendto
//!  11.25    1.063744          53     20000     20000 connect
//! ------ ----------- ----------- --------- --------- ----------------
//! 100.00    9.452524          23    401453     20451 total
//! ```
//!
//! The errors column is blank for a call that never failed, so a row has
//! five fields or six; the name is always the last. The times are strace's
//! own view, slowed by the tracing itself, and are not kept.

use std::collections::BTreeMap;

/// How often one system call (or a group of them) was made, and failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Calls {
    /// Calls made.
    pub calls: u64,
    /// Calls that returned an error (for a non-blocking read: EAGAIN).
    pub errors: u64,
}

impl Calls {
    fn add(self, other: Calls) -> Calls {
        Calls {
            calls: self.calls + other.calls,
            errors: self.errors + other.errors,
        }
    }
}

/// One `strace -c` table: the calls per system call name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Every system call the table lists, by name.
    pub by_name: BTreeMap<String, Calls>,
}

impl Summary {
    /// Reads the table in `text` (the file `strace -c -o FILE` wrote). An
    /// error says what was wrong: no table at all, a row it cannot read, or
    /// a total that is not the sum of the rows (then the rows were misread).
    pub fn parse(text: &str) -> Result<Summary, String> {
        let mut lines = text.lines();
        lines
            .by_ref()
            .find(|l| l.contains("calls") && l.trim_end().ends_with("syscall"))
            .ok_or_else(|| format!("no strace -c table in {:?}", first_words(text)))?;
        let mut summary = Summary::default();
        let mut stated_total = None;
        for line in lines.map(str::trim).filter(|l| !l.is_empty()) {
            if line.starts_with("---") {
                continue;
            }
            let (name, calls) = row(line).ok_or_else(|| format!("not a strace row: {line:?}"))?;
            if name == "total" {
                stated_total = Some(calls);
            } else {
                let sum = summary.by_name.entry(name).or_default();
                *sum = sum.add(calls);
            }
        }
        match stated_total {
            Some(total) if total != summary.total() => Err(format!(
                "strace's total ({} calls, {} errors) is not the sum of its rows ({:?})",
                total.calls,
                total.errors,
                summary.total()
            )),
            _ => Ok(summary),
        }
    }

    /// Every call in the table.
    pub fn total(&self) -> Calls {
        self.by_name
            .values()
            .fold(Calls::default(), |a, &b| a.add(b))
    }

    /// The calls of one system call (none if the table does not list it).
    pub fn of(&self, name: &str) -> Calls {
        self.by_name.get(name).copied().unwrap_or_default()
    }

    /// The calls of a group of system calls (all the ways to read, say).
    pub fn of_all(&self, names: &[&str]) -> Calls {
        names
            .iter()
            .fold(Calls::default(), |sum, name| sum.add(self.of(name)))
    }
}

/// One row: `% time, seconds, usecs/call, calls, [errors], name`.
fn row(line: &str) -> Option<(String, Calls)> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let (name, numbers) = fields.split_last()?;
    let errors = match numbers.len() {
        4 => 0,
        5 => numbers[4].parse().ok()?,
        _ => return None,
    };
    // The first three (shares and times) must be numbers too, or this is
    // not a row of the table.
    for time in &numbers[..3] {
        time.parse::<f64>().ok()?;
    }
    let calls = numbers[3].parse().ok()?;
    Some((name.to_string(), Calls { calls, errors }))
}

/// The start of a text, on one line, for an error message.
fn first_words(text: &str) -> String {
    text.split_whitespace()
        .take(12)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `strace -c -f -p PID -o FILE` on our epoll proxy (one worker, three
    /// reply backends), 20,000 new connections from 64 clients, strace 6.1.
    const OURS_CONNECTIONS: &str = "\
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 15.92    1.504808          37     40000           sendto
 15.62    1.476675          36     40000           shutdown
 14.41    1.362548          17     80000           epoll_ctl
 13.76    1.300538          16     80000           recvfrom
 11.25    1.063744          53     20000     20000 connect
  9.97    0.942792          23     40000           close
  6.28    0.593794          14     40000           setsockopt
  4.68    0.442259          22     20000           socket
  4.38    0.414308          20     20451       451 accept4
  3.20    0.302136          15     20000           getsockopt
  0.52    0.048922          48      1002           epoll_wait
------ ----------- ----------- --------- --------- ----------------
100.00    9.452524          23    401453     20451 total
";

    #[test]
    fn a_real_summary_reads_with_and_without_errors() {
        let summary = Summary::parse(OURS_CONNECTIONS).unwrap();
        assert_eq!(summary.by_name.len(), 11);
        assert_eq!(
            summary.of("connect"),
            Calls {
                calls: 20000,
                errors: 20000
            }
        );
        assert_eq!(
            summary.of("sendto"),
            Calls {
                calls: 40000,
                errors: 0
            }
        );
        assert_eq!(summary.of("accept4").errors, 451);
        assert_eq!(
            summary.total(),
            Calls {
                calls: 401453,
                errors: 20451
            }
        );
        assert_eq!(summary.of("readv"), Calls::default());
        assert_eq!(summary.of_all(&["read", "recvfrom"]).calls, 80000);
    }

    #[test]
    fn an_empty_table_is_no_calls() {
        let text = "\
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
------ ----------- ----------- --------- --------- ----------------
100.00    0.000000           0         0           total
";
        assert_eq!(Summary::parse(text).unwrap().total(), Calls::default());
    }

    #[test]
    fn what_is_not_a_summary_says_so() {
        let e = Summary::parse("strace: attach: ptrace(PTRACE_SEIZE, 1): Operation not permitted")
            .unwrap_err();
        assert!(
            e.contains("no strace -c table") && e.contains("not permitted"),
            "{e}"
        );
        let bad_row = OURS_CONNECTIONS.replace("   40000           sendto", " lots sendto");
        assert!(
            Summary::parse(&bad_row)
                .unwrap_err()
                .contains("not a strace row")
        );
        let bad_total = OURS_CONNECTIONS.replace("401453", "401454");
        assert!(
            Summary::parse(&bad_total)
                .unwrap_err()
                .contains("not the sum")
        );
    }
}
