//! Which layout an access-log line takes: HAProxy's `tcplog` (the
//! default), one JSON object, or a format of the operator's (`log-format`),
//! and the one call that writes a [`Record`] in it.
//!
//! The two fixed layouts are written by [`record`](super::record) itself;
//! an operator's is compiled once by [`custom`](super::custom) and renders
//! the same record. This file is where the three meet, so that neither of
//! those two needs the other's choice.

use std::sync::Arc;

use super::custom::{CustomFormat, FormatError, Needs};
use super::record::Record;

/// The layout of the lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Format {
    /// HAProxy's `option tcplog` (the default).
    Tcplog,
    /// One JSON object per line.
    Json,
    /// The operator's own, compiled once (`log-format "%ci %B"`).
    Custom(Arc<CustomFormat>),
}

impl Format {
    /// The formats that have a name, the default first.
    pub const NAMES: [&'static str; 2] = ["tcplog", "json"];

    /// The format named `word` (`tcplog`, `json`).
    pub fn named(word: &str) -> Option<Format> {
        match word {
            "tcplog" => Some(Format::Tcplog),
            "json" => Some(Format::Json),
            _ => None,
        }
    }

    /// A format of the operator's: `text` compiled.
    pub fn custom(text: &str) -> Result<Format, FormatError> {
        CustomFormat::compile(text).map(|f| Format::Custom(Arc::new(f)))
    }

    /// Its name: `tcplog`, `json`, or `custom`.
    pub fn name(&self) -> &'static str {
        match self {
            Format::Tcplog => "tcplog",
            Format::Json => "json",
            Format::Custom(_) => "custom",
        }
    }

    /// What a connection must gather for its line ([`Needs`]).
    pub fn needs(&self) -> Needs {
        match self {
            Format::Custom(custom) => custom.needs(),
            Format::Tcplog | Format::Json => Needs::default(),
        }
    }
}

impl Record<'_> {
    /// Appends the line in `format`, without its newline.
    pub fn write(&self, format: &Format, out: &mut String) {
        match format {
            Format::Tcplog => self.write_tcplog(out),
            Format::Json => self.write_json(out),
            Format::Custom(custom) => custom.write(self, out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_have_names_or_are_the_operators() {
        assert_eq!(Format::named("tcplog"), Some(Format::Tcplog));
        assert_eq!(Format::named("json"), Some(Format::Json));
        assert_eq!(Format::named("JSON"), None);
        let custom = Format::custom("%ci").expect("a format");
        assert_eq!(custom.name(), "custom");
        assert!(custom.needs() == Needs::default());
        assert_eq!(Format::Json.name(), "json");
    }
}
