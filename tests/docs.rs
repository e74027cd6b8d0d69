//! The docs name what exists: every file, folder and Rust name a chapter
//! cites in its inline code spans is found in the workspace's sources, so
//! that a rename or a removal that forgets its chapter fails here.
//!
//! What counts as a citation: a span that is a path ending in `.rs` or
//! `/` (found from the repository's root, or from a crate's `src/`), and,
//! in any other span, each `::`-joined name and each CamelCase word (a
//! type or a variant), which must be defined somewhere: as a function,
//! type, trait, constant, module, field or variant. All-capital words
//! (`EPOLLIN`, `SO_LINGER`) are the kernel's, and plain words are prose.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The chapters held to it.
const CHAPTERS: &[&str] = &["docs/RELAY.md", "docs/CLUSTER.md"];

/// Where a short path (`conn/machine.rs`) may start from.
const ROOTS: &[&str] = &[
    "",
    "proxy/src",
    "runtime/src",
    "tests/testkit/src",
    "backend/src",
    "tools/src",
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The inline code spans of `text`, outside fenced blocks.
fn spans(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut parts = line.split('`');
        parts.next();
        while let (Some(code), Some(_)) = (parts.next(), parts.next()) {
            out.push(code.to_string());
        }
    }
    out
}

/// The names a span cites.
fn names(span: &str) -> Vec<String> {
    let words: Vec<&str> = span
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .filter(|w| !w.is_empty())
        .collect();
    let mut out = Vec::new();
    for word in words {
        let segments: Vec<&str> = word.split("::").filter(|s| !s.is_empty()).collect();
        let camel = |s: &str| {
            s.starts_with(|c: char| c.is_ascii_uppercase()) && s.chars().any(|c| c.is_lowercase())
        };
        if segments.len() > 1 {
            out.extend(segments.iter().map(|s| s.to_string()));
        } else if segments.len() == 1 && camel(segments[0]) {
            out.push(segments[0].to_string());
        }
    }
    out
}

/// Names defined outside the workspace that chapters use as words:
/// the crates, and std's.
const KNOWN: &[&str] = &[
    "proxy", "runtime", "testkit", "backend", "std", "Instant", "Duration", "Pending", "Ready",
    "Option", "Some", "None", "Result", "Ok", "Err", "Vec", "Box",
];

/// Every name `code` defines: after `fn`, `struct`, `enum`, `trait`,
/// `type`, `const`, `mod`, `static`; and a field (`name: T`) or a variant
/// (`Name,`, `Name {`, `Name(`) that opens a line.
fn definitions(code: &str) -> HashSet<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let forms = [
        "fn ", "struct ", "enum ", "trait ", "type ", "const ", "mod ", "static ",
    ];
    let mut out = HashSet::new();
    for line in code.lines() {
        for form in forms {
            for (at, _) in line.match_indices(form) {
                let name = ident(&line[at + form.len()..]);
                if !name.is_empty() {
                    out.insert(name);
                }
            }
        }
        let line = line
            .trim_start()
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub ");
        let name = ident(line);
        let rest = line[name.len()..].trim_start();
        let field = rest.starts_with(':') && !rest.starts_with("::");
        if !name.is_empty() && (field || rest.is_empty() || rest.starts_with([',', '{', '('])) {
            out.insert(name);
        }
    }
    out
}

#[test]
fn every_name_a_chapter_cites_exists() {
    let root = repo();
    let mut files = Vec::new();
    for dir in [
        "proxy/src",
        "runtime/src",
        "tests",
        "backend/src",
        "tools/src",
    ] {
        sources(&root.join(dir), &mut files);
    }
    let code: String = files
        .iter()
        .filter_map(|f| fs::read_to_string(f).ok())
        .collect::<Vec<_>>()
        .join("\n");
    let defined = definitions(&code);
    let mut missing = Vec::new();
    for chapter in CHAPTERS {
        let text = fs::read_to_string(root.join(chapter)).expect("the chapter");
        for span in spans(&text) {
            if span.ends_with(".rs") || span.ends_with('/') {
                if !ROOTS.iter().any(|r| root.join(r).join(&span).exists()) {
                    missing.push(format!("{chapter}: the path `{span}`"));
                }
                continue;
            }
            for name in names(&span) {
                if !defined.contains(&name) && !KNOWN.contains(&name.as_str()) {
                    missing.push(format!("{chapter}: `{name}` (in `{span}`)"));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "cited but not found:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_checker_tells_a_name_from_prose() {
    assert_eq!(names("Machine::on(Event, now)"), ["Machine", "on", "Event"]);
    assert_eq!(names("EPOLLIN | EPOLLRDHUP"), Vec::<String>::new());
    assert_eq!(names("timeout server-fin"), Vec::<String>::new());
    let code = "pub enum Flow {\n    Reading,\n    Done,\n}\nfn on_deadline(x: u8) {}\n";
    let defined = definitions(code);
    for name in ["Reading", "Done", "on_deadline", "Flow"] {
        assert!(defined.contains(name), "{name}");
    }
    assert!(!defined.contains("Read") && !defined.contains("on"));
    assert_eq!(spans("a `b` c\n```\n`d`\n```\n`e`"), ["b", "e"]);
}
