//! A strict parser of the Prometheus text exposition format 0.0.4, for
//! tests and tooling: the proxy writes the format and never reads it.
//!
//! It accepts the subset the proxy's registry
//! (`proxy::ops::metrics::exposition::Registry::render`) writes and rejects anything else, so that a test parsing a scrape
//! checks the output as well as reading it. Every line is one of:
//!
//! ```text
//! # HELP name text with \\ and \n escaped
//! # TYPE name counter|gauge
//! name value
//! name{label="value",other="with \\ \" \n escaped"} value
//! ```
//!
//! and the rules are the format's: valid metric and label names (no
//! label name starting with `__`), at most one HELP and one TYPE per
//! name, the TYPE before the first sample of its name, each name's lines
//! in one group, no series twice, values that parse as floats (`NaN`,
//! `+Inf`, `-Inf` included), and a line feed at the end of the last
//! line. Stricter than the format: every sample needs a TYPE line (and
//! every TYPE at least a name), a single space separates the parts,
//! there are no timestamps, no empty lines, no other comments, no empty
//! `{}`, and a counter is never negative.
//!
//! ```
//! use testkit::prometheus::{parse, Kind};
//! let text = "# TYPE up gauge\nup{job=\"proxy\"} 1\n";
//! let exposition = parse(text).expect("valid");
//! assert_eq!(exposition.value("up", &[("job", "proxy")]), Some(1.0));
//! assert_eq!(exposition.family("up").map(|f| f.kind), Some(Kind::Gauge));
//! ```

use std::collections::{HashMap, HashSet};
use std::fmt;

/// A family's type (only those the proxy writes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `# TYPE name counter`
    Counter,
    /// `# TYPE name gauge`
    Gauge,
}

/// One line `name{labels} value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The metric name.
    pub name: String,
    /// The labels in the order written, values unescaped.
    pub labels: Vec<(String, String)>,
    /// The value.
    pub value: f64,
}

impl Sample {
    /// The value of label `name`, if the sample has it.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(label, _)| label == name)
            .map(|(_, value)| value.as_str())
    }
}

/// A metric name with its HELP, TYPE and samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// The metric name.
    pub name: String,
    /// The HELP text, unescaped, if there was one.
    pub help: Option<String>,
    /// The TYPE.
    pub kind: Kind,
    /// The samples in the order written.
    pub samples: Vec<Sample>,
}

/// A whole parsed text, families in the order written.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Exposition {
    /// Every family.
    pub families: Vec<Family>,
}

impl Exposition {
    /// The family named `name`.
    pub fn family(&self, name: &str) -> Option<&Family> {
        self.families.iter().find(|f| f.name == name)
    }

    /// The value of the sample `name` with exactly the label set
    /// `labels` (in any order).
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let family = self.family(name)?;
        let sample = family.samples.iter().find(|s| {
            s.labels.len() == labels.len() && labels.iter().all(|&(k, v)| s.label(k) == Some(v))
        })?;
        Some(sample.value)
    }

    /// Every sample of every family.
    pub fn samples(&self) -> impl Iterator<Item = &Sample> + '_ {
        self.families.iter().flat_map(|f| f.samples.iter())
    }
}

/// Why a text is not valid, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// The line, counted from 1.
    pub line: usize,
    /// What is wrong with it.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for ParseError {}

/// A family while it is being read: its TYPE may not be known yet.
struct Partial {
    name: String,
    help: Option<String>,
    kind: Option<Kind>,
    samples: Vec<Sample>,
}

/// Parses a whole exposition (module docs for what is accepted).
pub fn parse(text: &str) -> Result<Exposition, ParseError> {
    let lines = split_lines(text)?;
    let mut reading = Reading::default();
    for (i, &line) in lines.iter().enumerate() {
        let n = i + 1;
        let (name, what) = classify(n, line)?;
        if !is_metric_name(name) {
            return Err(error(n, &format!("{name:?} is not a valid metric name")));
        }
        let index = reading.family_of(n, name)?;
        reading.add(n, index, what)?;
    }
    reading.finish(lines.len())
}

/// The lines of `text`, which must end with a line feed. (`str::lines`
/// would also split at "\r\n", hiding a carriage return.)
fn split_lines(text: &str) -> Result<Vec<&str>, ParseError> {
    match text.strip_suffix('\n') {
        Some(body) => Ok(body.split('\n').collect()),
        None if text.is_empty() => Ok(Vec::new()),
        None => {
            let line = text.split('\n').count();
            Err(error(line, "the last line does not end with a line feed"))
        }
    }
}

/// What line `n` is, and the metric name it is about.
fn classify(n: usize, line: &str) -> Result<(&str, Line), ParseError> {
    if line.contains('\r') {
        return Err(error(n, "a carriage return (lines end with \\n alone)"));
    }
    if let Some(rest) = line.strip_prefix("# HELP ") {
        let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
        let help = unescape_help(help).map_err(|e| error(n, &e))?;
        return Ok((name, Line::Help(help)));
    }
    if let Some(rest) = line.strip_prefix("# TYPE ") {
        let (name, kind) = rest
            .split_once(' ')
            .ok_or_else(|| error(n, "a TYPE line without a type"))?;
        let kind = match kind {
            "counter" => Kind::Counter,
            "gauge" => Kind::Gauge,
            other => return Err(error(n, &format!("unknown type {other:?}"))),
        };
        return Ok((name, Line::Type(kind)));
    }
    if line.starts_with('#') {
        return Err(error(n, "a comment other than # HELP or # TYPE"));
    }
    if line.is_empty() {
        return Err(error(n, "an empty line"));
    }
    let sample = parse_sample(line).map_err(|e| error(n, &e))?;
    let name = line.split(['{', ' ']).next().unwrap_or_default();
    Ok((name, Line::Sample(sample)))
}

/// The families read so far, and every series seen (none may come twice).
#[derive(Default)]
struct Reading {
    families: Vec<Partial>,
    by_name: HashMap<String, usize>,
    series: HashSet<(String, Vec<(String, String)>)>,
}

impl Reading {
    /// The family line `n` belongs to: the last one, or a new one. A name
    /// seen before but not last has had its group already.
    fn family_of(&mut self, n: usize, name: &str) -> Result<usize, ParseError> {
        match self.by_name.get(name) {
            Some(&index) if index + 1 == self.families.len() => Ok(index),
            Some(_) => Err(error(
                n,
                &format!("the lines of {name} are not all in one group"),
            )),
            None => {
                self.by_name.insert(name.to_string(), self.families.len());
                self.families.push(Partial {
                    name: name.to_string(),
                    help: None,
                    kind: None,
                    samples: Vec::new(),
                });
                Ok(self.families.len() - 1)
            }
        }
    }

    /// Line `n` into family `index`, by the format's rules.
    fn add(&mut self, n: usize, index: usize, what: Line) -> Result<(), ParseError> {
        let family = &mut self.families[index];
        let name = &family.name;
        match what {
            Line::Help(_) if family.help.is_some() => {
                Err(error(n, &format!("a second HELP for {name}")))
            }
            Line::Type(_) if family.kind.is_some() => {
                Err(error(n, &format!("a second TYPE for {name}")))
            }
            Line::Help(_) | Line::Type(_) if !family.samples.is_empty() => {
                Err(error(n, &format!("HELP or TYPE after samples of {name}")))
            }
            Line::Help(help) => {
                family.help = Some(help);
                Ok(())
            }
            Line::Type(kind) => {
                family.kind = Some(kind);
                Ok(())
            }
            Line::Sample(sample) => {
                let Some(kind) = family.kind else {
                    return Err(error(n, &format!("a sample of {name} before its TYPE")));
                };
                if kind == Kind::Counter && (sample.value.is_nan() || sample.value < 0.0) {
                    return Err(error(n, "a counter must not be negative or NaN"));
                }
                let mut labels = sample.labels.clone();
                labels.sort();
                if !self.series.insert((sample.name.clone(), labels)) {
                    return Err(error(n, "the same series a second time"));
                }
                family.samples.push(sample);
                Ok(())
            }
        }
    }

    /// Every family, each with its TYPE.
    fn finish(self, last: usize) -> Result<Exposition, ParseError> {
        self.families
            .into_iter()
            .map(|f| match f.kind {
                Some(kind) => Ok(Family {
                    name: f.name,
                    help: f.help,
                    kind,
                    samples: f.samples,
                }),
                None => Err(error(last, &format!("{} has no TYPE line", f.name))),
            })
            .collect::<Result<_, _>>()
            .map(|families| Exposition { families })
    }
}

enum Line {
    Help(String),
    Type(Kind),
    Sample(Sample),
}

fn error(line: usize, message: &str) -> ParseError {
    ParseError {
        line,
        message: message.to_string(),
    }
}

/// `[a-zA-Z_:][a-zA-Z0-9_:]*`
pub fn is_metric_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_' || b == b':')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':')
}

/// `[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__` (reserved).
pub fn is_label_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !name.starts_with("__")
}

/// A HELP text: `\\` and `\n` are its only escapes.
fn unescape_help(text: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\\') => out.push('\\'),
                Some('n') => out.push('\n'),
                other => return Err(format!("bad escape \\{other:?} in HELP text")),
            },
            c => out.push(c),
        }
    }
    Ok(out)
}

/// `name value` or `name{label="value",...} value`.
fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line.find(['{', ' ']).ok_or("a sample without a value")?;
    let name = &line[..name_end];
    let mut rest = &line[name_end..];
    let mut labels: Vec<(String, String)> = Vec::new();
    if let Some(after_brace) = rest.strip_prefix('{') {
        rest = after_brace;
        if rest.starts_with('}') {
            return Err("an empty label set {} (write the name alone)".into());
        }
        loop {
            let (label, after) = rest.split_once("=\"").ok_or("a label without =\"")?;
            if !is_label_name(label) {
                return Err(format!("{label:?} is not a valid label name"));
            }
            if labels.iter().any(|(l, _)| l == label) {
                return Err(format!("label {label} twice"));
            }
            let (value, after) = label_value(after)?;
            labels.push((label.to_string(), value));
            match after.as_bytes().first() {
                Some(b',') => rest = &after[1..],
                Some(b'}') => {
                    rest = &after[1..];
                    break;
                }
                _ => return Err("a label not followed by , or }".into()),
            }
        }
    }
    let value = rest
        .strip_prefix(' ')
        .ok_or("no single space before the value")?;
    let value = parse_value(value).ok_or_else(|| format!("{value:?} is not a value"))?;
    Ok(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// A label value up to its closing quote, unescaped; and what follows.
fn label_value(text: &str) -> Result<(String, &str), String> {
    let mut value = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((value, &text[i + 1..])),
            '\\' => match chars.next() {
                Some((_, '\\')) => value.push('\\'),
                Some((_, '"')) => value.push('"'),
                Some((_, 'n')) => value.push('\n'),
                other => return Err(format!("bad escape in a label value: {other:?}")),
            },
            '\n' => return Err("a raw line feed in a label value".into()),
            c => value.push(c),
        }
    }
    Err("a label value without its closing quote".into())
}

/// A float as Go's `ParseFloat` reads it, plus the format's `NaN`,
/// `+Inf` and `-Inf`; nothing else (no `inf`, no spaces, no timestamp).
fn parse_value(text: &str) -> Option<f64> {
    match text {
        "NaN" => Some(f64::NAN),
        "+Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        _ if !text.is_empty()
            && text
                .bytes()
                .all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b)) =>
        {
            text.parse().ok()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{Kind as TextKind, parse};
    use proxy::ops::metrics::counters::{Active, add, inc};
    use proxy::ops::metrics::exposition::Registry;
    use proxy::policy::check::{Status, Verdict};
    use proxy::policy::health::{Check, HealthBoard};
    use std::net::SocketAddr;
    use std::sync::Arc;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    /// Two frontends of two backends each; the second backend of `db` is
    /// checked.
    fn registry(workers: usize) -> (Arc<Registry>, Vec<Arc<HealthBoard>>) {
        let check = Some(Check {
            inter: Duration::from_secs(1),
            fall: 1,
            rise: 1,
            timeout: Duration::from_secs(1),
        });
        let web = vec![addr(9001), addr(9002)];
        let db = vec![addr(9101), addr(9102)];
        let web_board = Arc::new(HealthBoard::new("web", &[(web[0], None), (web[1], None)]));
        let db_board = Arc::new(HealthBoard::new("db", &[(db[0], None), (db[1], check)]));
        let frontends = [
            ("web".to_string(), web, web_board.clone()),
            ("db".to_string(), db, db_board.clone()),
        ];
        (
            Registry::new(&frontends, workers),
            vec![web_board, db_board],
        )
    }

    #[test]
    fn render_sums_the_workers_and_parses() {
        let (registry, boards) = registry(2);
        assert_eq!(registry.workers(), 2);
        // Worker 0: three web clients, one still open, on backend 1.
        let w0 = registry.worker(0, 0);
        for _ in 0..3 {
            inc(&w0.connections);
        }
        let _open = Active::new(&w0.active);
        add(&w0.bytes_in, 100);
        add(&w0.bytes_out, 2000);
        inc(&w0.backends[1].connections);
        let _to_backend = Active::new(&w0.backends[1].active);
        add(&w0.backends[1].bytes_in, 100);
        add(&w0.backends[1].bytes_out, 2000);
        // Worker 1: two web clients, one retried after backend 0 refused;
        // a closed connection leaves the gauge where it was.
        let w1 = registry.worker(1, 0);
        add(&w1.connections, 2);
        drop(Active::new(&w1.active));
        inc(&w1.retries);
        inc(&w1.backends[0].connect_errors);
        add(&w1.bytes_in, 5);
        inc(&w1.accept_errors);
        // db, on both workers.
        inc(&registry.worker(0, 1).denied);
        inc(&registry.worker(1, 1).denied);
        inc(&registry.worker(1, 1).queue_timeouts);
        inc(&registry.worker(1, 1).timeouts);
        inc(&registry.worker(0, 1).connect_errors);
        // Health: db's checked backend failed a check (fall 1: down) and
        // web's backend 0 is up (never checked).
        let refused = || Verdict::failed(Status::L4Con, "connection refused");
        boards[1].check_result(1, refused(), Duration::from_millis(2));
        boards[1].check_result(1, refused(), Duration::from_millis(250));

        let text = registry.render();
        let metrics = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let web = [("frontend", "web")];
        let db = [("frontend", "db")];
        let expect = [
            ("proxy_frontend_connections_total", &web, 5.0),
            ("proxy_frontend_active_connections", &web, 1.0),
            ("proxy_frontend_bytes_in_total", &web, 105.0),
            ("proxy_frontend_bytes_out_total", &web, 2000.0),
            ("proxy_frontend_retries_total", &web, 1.0),
            ("proxy_accept_errors_total", &web, 1.0),
            ("proxy_frontend_connect_errors_total", &web, 0.0),
            ("proxy_frontend_connect_errors_total", &db, 1.0),
            ("proxy_frontend_denied_total", &db, 2.0),
            ("proxy_frontend_queue_timeouts_total", &db, 1.0),
            ("proxy_frontend_timeouts_total", &db, 1.0),
            ("proxy_frontend_connections_total", &db, 0.0),
        ];
        for (name, labels, value) in expect {
            assert_eq!(
                metrics.value(name, labels),
                Some(value),
                "{name} {labels:?}"
            );
        }
        // An unnamed backend: its group is its frontend, its name its address.
        let backend = |f: &'static str, b: &'static str| {
            [("frontend", f), ("backend", b), ("group", f), ("server", b)]
        };
        let expect = [
            (
                "proxy_backend_connections_total",
                backend("web", "127.0.0.1:9002"),
                1.0,
            ),
            (
                "proxy_backend_active_connections",
                backend("web", "127.0.0.1:9002"),
                1.0,
            ),
            (
                "proxy_backend_bytes_in_total",
                backend("web", "127.0.0.1:9002"),
                100.0,
            ),
            (
                "proxy_backend_bytes_out_total",
                backend("web", "127.0.0.1:9002"),
                2000.0,
            ),
            (
                "proxy_backend_connect_errors_total",
                backend("web", "127.0.0.1:9001"),
                1.0,
            ),
            (
                "proxy_backend_connections_total",
                backend("web", "127.0.0.1:9001"),
                0.0,
            ),
            ("proxy_backend_up", backend("web", "127.0.0.1:9001"), 1.0),
            ("proxy_backend_up", backend("db", "127.0.0.1:9102"), 0.0),
            (
                "proxy_backend_check_failures_total",
                backend("db", "127.0.0.1:9102"),
                2.0,
            ),
            (
                "proxy_backend_check_successes_total",
                backend("db", "127.0.0.1:9102"),
                0.0,
            ),
            (
                "proxy_backend_check_failures_total",
                backend("db", "127.0.0.1:9101"),
                0.0,
            ),
            (
                "proxy_backend_check_duration_seconds",
                backend("db", "127.0.0.1:9102"),
                0.25,
            ),
        ];
        for (name, labels, value) in expect {
            assert_eq!(
                metrics.value(name, &labels),
                Some(value),
                "{name} {labels:?}"
            );
        }
        // Every family has its help, and the kinds are right.
        for family in &metrics.families {
            assert!(family.name.starts_with("proxy_"), "{}", family.name);
            assert!(family.help.as_deref().is_some_and(|h| !h.is_empty()));
            let counter = family.name.ends_with("_total");
            assert_eq!(family.kind == TextKind::Counter, counter, "{}", family.name);
        }
        // 2 frontends x 14 families, 4 backends x 11 families, the one
        // checked backend's last check: 7 statuses and its duration, and
        // each backend's admin state (one series per state: 3) and weight.
        let labelled = metrics.samples().filter(|s| !s.labels.is_empty()).count();
        assert_eq!(labelled, 2 * 14 + 4 * 11 + 7 + 1 + 4 * (3 + 1));
    }

    #[test]
    fn process_figures_come_from_proc() {
        let (registry, _boards) = registry(1);
        let metrics = parse(&registry.render()).expect("parses");
        let value = |name| metrics.value(name, &[]).unwrap_or_else(|| panic!("{name}"));
        assert!(
            value("proxy_process_open_fds") >= 3.0,
            "stdin, stdout, stderr"
        );
        assert!(value("proxy_process_max_fds") >= value("proxy_process_open_fds"));
        assert!(value("proxy_process_resident_memory_bytes") > 1e5);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("after 1970")
            .as_secs_f64();
        let started = value("proxy_process_start_time_seconds");
        // This test process started a little while ago (allowing for a
        // tick of rounding and a slow machine).
        assert!(
            started <= now + 1.0 && started > now - 3600.0,
            "{started} vs {now}"
        );
        assert!(value("proxy_process_cpu_seconds_total") >= 0.0);
    }

    #[test]
    fn label_values_and_help_texts_are_escaped() {
        let name = "a \"quoted\" \\ name\nwith a line feed";
        let board = Arc::new(HealthBoard::new(name, &[(addr(1), None)]));
        let frontends = [(name.to_string(), vec![addr(1)], board)];
        let text = Registry::new(&frontends, 1).render();
        assert!(
            text.contains(r#"{frontend="a \"quoted\" \\ name\nwith a line feed"}"#),
            "{text}"
        );
        let metrics = parse(&text).expect("parses");
        let labels = [("frontend", name)];
        assert_eq!(
            metrics.value("proxy_frontend_connections_total", &labels),
            Some(0.0)
        );
    }

    #[test]
    fn an_empty_registry_renders_only_the_process() {
        let text = Registry::new(&[], 4).render();
        let metrics = parse(&text).expect("parses");
        assert!(
            metrics
                .families
                .iter()
                .all(|f| f.name.starts_with("proxy_process_"))
        );
    }

    #[test]
    fn concurrent_workers_lose_no_count() {
        let (registry, _boards) = registry(4);
        let threads: Vec<_> = (0..4)
            .map(|w| {
                let counters = registry.worker(w, 0);
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        inc(&counters.connections);
                        add(&counters.backends[w % 2].bytes_in, 3);
                    }
                })
            })
            .collect();
        // Scrapes while they count: always parseable.
        for _ in 0..20 {
            parse(&registry.render()).expect("parses mid-count");
        }
        for t in threads {
            t.join().expect("a worker");
        }
        let metrics = parse(&registry.render()).expect("parses");
        let web = [("frontend", "web")];
        let connections = metrics.value("proxy_frontend_connections_total", &web);
        assert_eq!(connections, Some(40_000.0));
        let b0 = [
            ("frontend", "web"),
            ("backend", "127.0.0.1:9001"),
            ("group", "web"),
            ("server", "127.0.0.1:9001"),
        ];
        assert_eq!(
            metrics.value("proxy_backend_bytes_in_total", &b0),
            Some(60_000.0)
        );
    }

    /// The parser is strict: each of these is one rule broken.
    #[test]
    fn the_parser_rejects_what_the_format_forbids() {
        let bad = [
            ("no final line feed", "# TYPE a gauge\na 1"),
            ("sample without TYPE", "a 1\n"),
            ("TYPE after sample", "# TYPE a gauge\na 1\n# TYPE a gauge\n"),
            ("HELP after sample", "# TYPE a gauge\na 1\n# HELP a late\n"),
            ("two HELPs", "# HELP a x\n# HELP a y\n# TYPE a gauge\n"),
            ("unknown type", "# TYPE a histogram\n"),
            ("bad metric name", "# TYPE 1a gauge\n1a 1\n"),
            ("bad label name", "# TYPE a gauge\na{1x=\"v\"} 1\n"),
            ("reserved label name", "# TYPE a gauge\na{__x=\"v\"} 1\n"),
            ("unquoted label", "# TYPE a gauge\na{x=v} 1\n"),
            ("unterminated value", "# TYPE a gauge\na{x=\"v} 1\n"),
            ("bad escape", "# TYPE a gauge\na{x=\"\\t\"} 1\n"),
            ("space in labels", "# TYPE a gauge\na{x=\"v\", y=\"w\"} 1\n"),
            ("trailing comma", "# TYPE a gauge\na{x=\"v\",} 1\n"),
            ("empty braces", "# TYPE a gauge\na{} 1\n"),
            ("duplicate label", "# TYPE a gauge\na{x=\"v\",x=\"w\"} 1\n"),
            (
                "duplicate series",
                "# TYPE a gauge\na{x=\"v\"} 1\na{x=\"v\"} 2\n",
            ),
            ("not a float", "# TYPE a gauge\na one\n"),
            ("rust's inf", "# TYPE a gauge\na inf\n"),
            ("two spaces", "# TYPE a gauge\na  1\n"),
            ("a timestamp", "# TYPE a gauge\na 1 1700000000000\n"),
            ("no value", "# TYPE a gauge\na\n"),
            ("negative counter", "# TYPE a_total counter\na_total -1\n"),
            ("split group", "# TYPE a gauge\n# TYPE b gauge\na 1\n"),
            ("other comment", "# just a comment\n"),
            ("empty line", "# TYPE a gauge\n\na 1\n"),
            ("carriage return", "# TYPE a gauge\r\na 1\r\n"),
            ("HELP without TYPE", "# HELP a x\n"),
            ("bad help escape", "# HELP a \\x\n# TYPE a gauge\n"),
        ];
        for (why, text) in bad {
            assert!(parse(text).is_err(), "accepted ({why}): {text:?}");
        }
    }

    #[test]
    fn the_parser_reads_what_the_format_allows() {
        let text = "# HELP a_total Help with \\\\ and \\n.\n\
                    # TYPE a_total counter\n\
                    a_total{x=\"q\\\"uote\",y=\"\"} 1.5e3\n\
                    a_total{x=\"other\"} 0\n\
                    # TYPE b gauge\n\
                    b -Inf\n\
                    # TYPE c:d gauge\n\
                    c:d NaN\n";
        let metrics = parse(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(metrics.families.len(), 3);
        let a = metrics.family("a_total").expect("a");
        assert_eq!(a.help.as_deref(), Some("Help with \\ and \n."));
        assert_eq!(a.samples[0].label("x"), Some("q\"uote"));
        assert_eq!(
            metrics.value("a_total", &[("y", ""), ("x", "q\"uote")]),
            Some(1500.0)
        );
        assert_eq!(
            metrics.value("a_total", &[("x", "q\"uote")]),
            None,
            "exact label set"
        );
        assert_eq!(metrics.value("b", &[]), Some(f64::NEG_INFINITY));
        assert!(metrics.value("c:d", &[]).is_some_and(f64::is_nan));
        assert_eq!(parse(""), Ok(Default::default()));
    }
}
