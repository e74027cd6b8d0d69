//! The floors `lib.rs` promises: each folder of `proxy/src` says, in its
//! `mod.rs`, what it may import (a paragraph that opens with "May import:",
//! naming each allowed module as a `crate::` link; what follows "never" is
//! what it must not), and no file of the folder imports anything else of
//! the crate. `log/`, the ground floor, imports nothing of the crate.
//!
//! The crate root's log macros (`crate::info!` and the others) are every
//! floor's, as the runtime is.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The folders of `proxy/src`: its floors.
fn folders() -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(src())
        .expect("proxy/src")
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The paths a folder's `mod.rs` allows in its "May import:" paragraph
/// (each as its `::`-separated segments after `crate::`), up to the first
/// "never". `None` when the paragraph is missing.
fn allowed(folder: &str) -> Option<Vec<Vec<String>>> {
    let text = fs::read_to_string(src().join(folder).join("mod.rs")).ok()?;
    let mut paragraph = String::new();
    let mut inside = false;
    for line in text.lines() {
        let Some(doc) = line.strip_prefix("//!") else {
            if inside {
                break;
            }
            continue;
        };
        let doc = doc.trim();
        if doc.starts_with("May import:") {
            inside = true;
        } else if inside && doc.is_empty() {
            break;
        }
        if inside {
            paragraph.push(' ');
            paragraph.push_str(doc);
        }
    }
    if !inside {
        return None;
    }
    let cut = paragraph.find("never").or_else(|| paragraph.find("Never"));
    let granted = &paragraph[..cut.unwrap_or(paragraph.len())];
    Some(crate_paths(granted))
}

/// The paths named as `crate::a::b` in `code`, with `crate::{a, b::c}`
/// groups opened; a macro (`crate::info!`) is not a path.
fn crate_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `$crate::`, `my_crate::`
        }
        read_path(&code[at + "crate::".len()..], Vec::new(), &mut out);
    }
    out
}

/// Reads one path (or a `{...}` group of them) at the start of `rest`, each
/// after `prefix`, into `out`; returns what follows it.
fn read_path<'a>(rest: &'a str, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> &'a str {
    let mut path = prefix;
    let mut rest = rest;
    loop {
        if let Some(group) = rest.strip_prefix('{') {
            let mut inner = group;
            loop {
                inner = read_path(inner.trim_start(), path.clone(), out).trim_start();
                if let Some(after) = inner.strip_prefix(',') {
                    inner = after.trim_start();
                    if let Some(after) = inner.strip_prefix('}') {
                        return after; // a trailing comma
                    }
                    continue;
                }
                return inner.strip_prefix('}').unwrap_or(inner);
            }
        }
        let word: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[word.len()..];
        if word.is_empty() || rest.starts_with('!') {
            return rest; // a macro, or nothing
        }
        path.push(word);
        match rest.strip_prefix("::") {
            Some(next) => rest = next,
            None => {
                out.push(path);
                return rest;
            }
        }
    }
}

/// `code` without its comments (line comments, and the doc lines).
fn without_comments(text: &str) -> String {
    text.lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Is `path` under one of `grants` (segment by segment)?
fn granted(path: &[String], grants: &[Vec<String>]) -> bool {
    grants
        .iter()
        .any(|g| g.len() <= path.len() && g.iter().zip(path).all(|(a, b)| a == b))
}

#[test]
fn every_folder_says_what_it_may_import_and_imports_nothing_else() {
    let modules: BTreeSet<String> = folders().into_iter().collect();
    let mut wrong = Vec::new();
    for folder in folders() {
        let grants = match (folder.as_str(), allowed(&folder)) {
            ("log", None) => Vec::new(),
            (_, Some(grants)) => grants,
            (_, None) => {
                wrong.push(format!("{folder}/mod.rs has no \"May import:\" paragraph"));
                continue;
            }
        };
        let mut sources = Vec::new();
        files(&src().join(&folder), &mut sources);
        for file in sources {
            let text = fs::read_to_string(&file).expect("a source file");
            let code = without_comments(&text);
            for path in crate_paths(&code) {
                let top = &path[0];
                if top == &folder || !modules.contains(top) || granted(&path, &grants) {
                    continue;
                }
                let shown = file
                    .strip_prefix(src())
                    .unwrap_or(&file)
                    .display()
                    .to_string();
                wrong.push(format!("{shown} imports crate::{}", path.join("::")));
            }
        }
    }
    wrong.sort();
    wrong.dedup();
    assert!(
        wrong.is_empty(),
        "imports a floor does not allow:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_ground_floor_says_it_imports_nothing() {
    let text = fs::read_to_string(src().join("log").join("mod.rs")).expect("log/mod.rs");
    assert!(
        text.contains("imports\n//! nothing of the crate")
            || text.contains("imports nothing of the crate")
    );
}

#[test]
fn the_path_reader_opens_groups_and_skips_macros() {
    let code = "use crate::{conn::{machine, side::Side}, log};\ncrate::info!(\"x\"); crate::ops::admin::serve(x)";
    let paths: Vec<String> = crate_paths(code).iter().map(|p| p.join("::")).collect();
    assert_eq!(
        paths,
        [
            "conn::machine",
            "conn::side::Side",
            "log",
            "ops::admin::serve"
        ]
    );
}
