//! The rooms `lib.rs` promises: each folder of `tools/src` (the bench's
//! report too) says, in its `mod.rs`, what it may import (a paragraph that
//! opens with "May import:", naming each allowed module as a `crate::`
//! link; what follows "never" is what it must not), and no file of the
//! folder imports anything else of the crate. Beside it, the two promises
//! about the crate as a whole: nothing of the product depends on it, and
//! each binary is a shim that calls its room.

use std::fs;
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The rooms under `dir`: every folder with a `mod.rs`, as its path of
/// module names from the crate root (`["bench", "report"]`).
fn rooms(dir: &Path, at: &[String], out: &mut Vec<Vec<String>>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() && path.join("mod.rs").is_file() {
            let mut room = at.to_vec();
            room.push(entry.file_name().to_string_lossy().into_owned());
            rooms(&path, &room, out);
            out.push(room);
        }
    }
}

/// The `.rs` files directly in a room's folder (a room inside it answers
/// for its own files).
fn own_files(room: &[String]) -> Vec<PathBuf> {
    let dir = room.iter().fold(src(), |d, name| d.join(name));
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .expect("a room's folder")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.sort();
    files
}

/// The paths a room's `mod.rs` allows in its "May import:" paragraph (each
/// as its segments after `crate::`), up to the first "never". `None` when
/// the paragraph is missing.
fn allowed(room: &[String]) -> Option<Vec<Vec<String>>> {
    let path = room
        .iter()
        .fold(src(), |d, name| d.join(name))
        .join("mod.rs");
    let text = fs::read_to_string(path).ok()?;
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
    Some(crate_paths(&paragraph[..cut.unwrap_or(paragraph.len())]))
}

/// The paths named as `crate::a::b` in `code`, with `crate::{a, b::c}`
/// groups opened; a macro (`crate::x!`) is not a path.
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
            return rest;
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

/// `text` without its comments (line comments, and the doc lines).
fn without_comments(text: &str) -> String {
    text.lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Is `path` under `prefix`, segment by segment?
fn under(path: &[String], prefix: &[String]) -> bool {
    prefix.len() <= path.len() && prefix.iter().zip(path).all(|(a, b)| a == b)
}

#[test]
fn every_room_says_what_it_may_import_and_imports_nothing_else() {
    let mut all = Vec::new();
    rooms(&src(), &[], &mut all);
    assert!(all.len() >= 7, "the rooms: {all:?}");
    let mut wrong = Vec::new();
    for room in &all {
        let Some(grants) = allowed(room) else {
            wrong.push(format!(
                "{}/mod.rs has no \"May import:\" paragraph",
                room.join("/")
            ));
            continue;
        };
        for file in own_files(room) {
            let text = fs::read_to_string(&file).expect("a source file");
            for path in crate_paths(&without_comments(&text)) {
                if under(&path, room) || grants.iter().any(|g| under(&path, g)) {
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
        "imports a room does not allow:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn nothing_of_the_product_depends_on_the_tools() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for krate in ["runtime", "proxy", "backend", "tests/testkit"] {
        let manifest = workspace.join(krate).join("Cargo.toml");
        let text = fs::read_to_string(&manifest).expect("a member's Cargo.toml");
        // Only the sections a build uses; a dev-dependency is a test's.
        let mut section = String::new();
        for line in text.lines() {
            let line = line.trim();
            if line.starts_with('[') {
                section = line.to_string();
            } else if matches!(section.as_str(), "[dependencies]" | "[build-dependencies]") {
                assert!(
                    !line.starts_with("tools"),
                    "{krate}/Cargo.toml depends on the tools: {line}"
                );
            }
        }
    }
}

#[test]
fn each_binary_is_a_shim_that_calls_its_room() {
    let bin = src().join("bin");
    let mut seen = 0;
    for entry in fs::read_dir(&bin).expect("tools/src/bin").flatten() {
        let path = entry.path();
        let text = fs::read_to_string(&path).expect("a binary's source");
        let code = without_comments(&text);
        let lines = code.lines().filter(|l| !l.trim().is_empty()).count();
        assert!(lines <= 6, "{}: {lines} lines of code", path.display());
        assert!(
            code.contains("tools::"),
            "{}: calls no room",
            path.display()
        );
        seen += 1;
    }
    assert!(
        seen >= 5,
        "the binaries: bench, loadgen, demo, cluster_client, race_load"
    );
}

#[test]
fn the_path_reader_opens_groups_and_skips_macros() {
    let code = "use crate::{load::{self, cli}, process::child::Spawn};\ncrate::x!(1); crate::bench::run(c)";
    let paths: Vec<String> = crate_paths(code).iter().map(|p| p.join("::")).collect();
    assert_eq!(
        paths,
        [
            "load::self",
            "load::cli",
            "process::child::Spawn",
            "bench::run"
        ]
    );
}
