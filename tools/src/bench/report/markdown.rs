//! Markdown for the report: a table, and the formats numbers take in it.
//!
//! Every cell is a string made here, so all tables read alike: rates with
//! thousands separators, milliseconds with one decimal below 100, ratios
//! with two, and "—" for what was not measured.

use std::fmt::Write as _;
use std::time::Duration;

use proxy::log::grouped::grouped;

use crate::load::LoadReport;

use super::charts::Chart;
use super::results::{Measured, Outcome};

/// A Markdown table.
pub(super) struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(super) fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub(super) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table; the first column left-aligned, the numbers right-aligned.
    pub(super) fn render(&self) -> String {
        let cell = |text: &str| text.replace('|', "\\|").replace('\n', " ");
        let mut out = String::new();
        let header: Vec<String> = self.header.iter().map(|h| cell(h)).collect();
        let _ = writeln!(out, "| {} |", header.join(" | "));
        let align: Vec<&str> = (0..self.header.len())
            .map(|i| if i == 0 { ":---" } else { "---:" })
            .collect();
        let _ = writeln!(out, "|{}|", align.join("|"));
        for row in &self.rows {
            let cells: Vec<String> = row.iter().map(|c| cell(c)).collect();
            let _ = writeln!(out, "| {} |", cells.join(" | "));
        }
        out
    }
}

/// A rate: `1,234` above a thousand, `123.4` below.
pub fn rate(value: f64) -> String {
    if !value.is_finite() {
        return "—".to_string();
    }
    if value >= 1000.0 {
        grouped(value.round() as u64)
    } else {
        format!("{value:.1}")
    }
}

pub(super) fn ms(d: Option<Duration>) -> String {
    d.map_or("—".to_string(), |d| {
        let ms = d.as_secs_f64() * 1000.0;
        if ms >= 100.0 {
            format!("{ms:.0}")
        } else {
            format!("{ms:.1}")
        }
    })
}

pub(super) fn ratio(value: Option<f64>, base: Option<f64>) -> Option<f64> {
    match (value, base) {
        (Some(v), Some(b)) if b > 0.0 && v.is_finite() => Some(v / b),
        _ => None,
    }
}

pub(super) fn show_ratio(r: Option<f64>) -> String {
    r.map_or("—".to_string(), |r| format!("{r:.2}"))
}

pub(super) fn percent(share: f64) -> String {
    format!("{:.0}%", share * 100.0)
}

pub(super) fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

/// The proxy-cost cells: CPU seconds and peak RSS.
pub(super) fn cost_cells<T>(m: &Measured<T>) -> [String; 2] {
    match &m.cost {
        Some(cost) => [format!("{:.2}", cost.cpu.as_secs_f64()), mib(cost.peak_kib)],
        None => ["—".to_string(), "—".to_string()],
    }
}

/// The notes under a table: why a row failed or was skipped, the first
/// error of a row with errors, anything else odd.
#[derive(Default)]
pub(super) struct Notes(pub(super) Vec<String>);

impl Notes {
    pub(super) fn outcome<T>(&mut self, label: &str, outcome: &Outcome<T>) {
        match outcome {
            Outcome::Failed(why) => self.0.push(format!("{label}: **failed**: {why}")),
            Outcome::Skipped(why) => self.0.push(format!("{label}: skipped: {why}")),
            Outcome::Done(m) => {
                if let Some(note) = &m.note {
                    self.0.push(format!("{label}: {note}"));
                }
            }
        }
    }

    pub(super) fn load(&mut self, label: &str, outcome: &Outcome<LoadReport>) {
        self.outcome(label, outcome);
        if let Some(m) = outcome.done() {
            if m.value.errors > 0 {
                self.0.push(format!(
                    "{label}: {} errors; the first: {}",
                    m.value.errors,
                    m.value.first_error.as_deref().unwrap_or("(not recorded)")
                ));
            }
        }
    }

    pub(super) fn render(&self) -> String {
        if self.0.is_empty() {
            return String::new();
        }
        let mut out = String::from("\n");
        for note in &self.0 {
            let _ = writeln!(out, "- {note}");
        }
        out
    }
}

/// Cells for a row that did not run.
pub(super) fn not_run<T>(outcome: &Outcome<T>) -> &'static str {
    match outcome {
        Outcome::Failed(_) => "failed",
        Outcome::Skipped(_) => "skipped",
        Outcome::Done(_) => "",
    }
}

/// The client-CPU cell: the load client's CPU as a share of one core.
pub(super) fn client_cell<T>(m: &Measured<T>) -> String {
    percent(m.client_load())
}

/// The sentence above a table of [`runs_cell`]s: `count` runs of each
/// `what`, and how to read a cell.
pub(super) fn runs_intro(count: usize, what: &str) -> String {
    format!(
        "The {count} runs of each {what}, in round order (the table above shows the median \
         one); in brackets, half their range over the median:\n"
    )
}

/// A rate's repeated runs in round order, and how far apart they are:
/// `23,100 / 24,000 / 22,800 (±2.6%)`, half the range over the median run;
/// `failed` for a run that did not finish (and then no spread).
pub(super) fn runs_cell(runs: &[Option<f64>]) -> String {
    if runs.is_empty() {
        return "—".to_string();
    }
    let shown: Vec<String> = runs
        .iter()
        .map(|r| r.map_or("failed".to_string(), rate))
        .collect();
    let mut cell = shown.join(" / ");
    let mut done: Vec<f64> = runs.iter().flatten().copied().collect();
    if done.len() < 2 || done.len() < runs.len() {
        return cell;
    }
    done.sort_by(f64::total_cmp);
    let middle = (done.len() - 1) / 2;
    if let (Some(low), Some(high), Some(&median)) = (done.first(), done.last(), done.get(middle)) {
        let spread = (high - low) / 2.0 / median;
        if median > 0.0 && spread.is_finite() {
            let _ = write!(cell, " (±{:.1}%)", spread * 100.0);
        }
    }
    cell
}

/// Replies per backend, as `67/66/67`.
pub(super) fn spread(report: &LoadReport) -> String {
    let counts: Vec<String> = report.per_backend.values().map(u64::to_string).collect();
    if counts.is_empty() {
        "—".to_string()
    } else {
        counts.join("/")
    }
}

/// The Markdown image of `chart`, whose file is written under `bench/`.
pub(super) fn embed(out: &mut String, chart: &Chart) {
    let _ = writeln!(out, "![{}](bench/{})\n", chart.alt, chart.file);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_escape_pipes_and_align_numbers() {
        let mut table = Table::new(&["mode", "req/s"]);
        table.row(vec!["a|b".to_string(), "1".to_string()]);
        assert_eq!(
            table.render(),
            "| mode | req/s |\n|:---|---:|\n| a\\|b | 1 |\n"
        );
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(rate(1234567.4), "1,234,567");
        assert_eq!(rate(1000.0), "1,000");
        assert_eq!(rate(999.94), "999.9");
        assert_eq!(rate(f64::INFINITY), "—");
        assert_eq!(ms(Some(Duration::from_micros(52_810))), "52.8");
        assert_eq!(ms(Some(Duration::from_millis(1600))), "1600");
        assert_eq!(ms(None), "—");
        assert_eq!(show_ratio(ratio(Some(3.0), Some(4.0))), "0.75");
        assert_eq!(show_ratio(ratio(Some(3.0), Some(0.0))), "—");
    }

    #[test]
    fn runs_show_in_round_order_with_their_spread() {
        let runs = [Some(23_100.0), Some(24_000.0), Some(22_800.0)];
        assert_eq!(runs_cell(&runs), "23,100 / 24,000 / 22,800 (±2.6%)");
        assert_eq!(
            runs_cell(&[Some(100.0), None, Some(90.0)]),
            "100.0 / failed / 90.0"
        );
        assert_eq!(runs_cell(&[Some(5.0)]), "5.0");
        assert_eq!(runs_cell(&[]), "—");
    }
}
