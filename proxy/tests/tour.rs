//! The two tours of the proxy crate, the diagram in `proxy/src/lib.rs` and
//! the `proxy/` row of README.md, list exactly the files there are: every
//! folder of `proxy/src` (as `name/`) and every file but `mod.rs`, `lib.rs`
//! and `main.rs` (as its name without `.rs`), as many times as the tree has
//! it (`connection` is a file in three folders, so each tour says it three
//! times), and nothing else.
//!
//! A tour that misses a new file, or still names a removed one, fails here
//! with the names to add or to take out.
//!
//! - In the diagram, a name is any word between the first and the last `│`
//!   of a line (the words right of the box are its floors' labels); the
//!   entry line, which names `lib.rs` itself, is left out.
//! - In README's row, a name is any `code span` that is a plain name, with
//!   or without its trailing `/`.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

type Names = BTreeMap<String, usize>;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every folder and file name under `dir`, counted.
fn tree(dir: &Path, names: &mut Names) {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            *names.entry(format!("{name}/")).or_default() += 1;
            tree(&path, names);
        } else if let Some(stem) = name.strip_suffix(".rs") {
            if !matches!(stem, "mod" | "lib" | "main") {
                *names.entry(stem.to_string()).or_default() += 1;
            }
        }
    }
}

/// A plain module name: lowercase letters, digits and `_`, maybe ending in `/`.
fn is_name(word: &str) -> bool {
    let bare = word.strip_suffix('/').unwrap_or(word);
    !bare.is_empty()
        && bare.starts_with(|c: char| c.is_ascii_lowercase())
        && bare
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// The names in `lib.rs`'s diagram.
fn diagram() -> Names {
    let text = fs::read_to_string(crate_dir().join("src/lib.rs")).expect("proxy/src/lib.rs");
    let start = text
        .find("## The tour")
        .expect("lib.rs has a section \"## The tour\"");
    let mut names = Names::new();
    let mut inside = false;
    for line in text[start..].lines() {
        let line = line.trim_start_matches("//!");
        if line.trim() == "```text" {
            inside = true;
            continue;
        }
        if !inside {
            continue;
        }
        if line.trim() == "```" {
            break;
        }
        let (Some(first), Some(last)) = (line.find('│'), line.rfind('│')) else {
            continue;
        };
        if last <= first || line.contains("lib.rs") {
            continue;
        }
        let cells = line[first..last].replace(['│', '(', ')', ',', ':', ';'], " ");
        for word in cells.split_whitespace().filter(|w| is_name(w)) {
            *names.entry(word.to_string()).or_default() += 1;
        }
    }
    names
}

/// The names in README.md's `proxy/` row.
fn readme() -> Names {
    let path = crate_dir().join("../README.md");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let row = text
        .lines()
        .find(|l| l.starts_with("| `proxy/` |"))
        .expect("README.md has a row for `proxy/` in its table of folders");
    let after_first_cell = &row["| `proxy/` |".len()..];
    let mut names = Names::new();
    for (i, span) in after_first_cell.split('`').enumerate() {
        if i % 2 == 1 && is_name(span) {
            *names.entry(span.to_string()).or_default() += 1;
        }
    }
    names
}

/// What `tour` lacks and what it has too many of, against the tree.
fn differences(tour: &Names, tree: &Names) -> (Vec<String>, Vec<String>) {
    let mut missing = Vec::new();
    let mut extra = Vec::new();
    for (name, &count) in tree {
        let told = tour.get(name).copied().unwrap_or(0);
        if told < count {
            missing.push(format!("{name} (told {told} of {count} times)"));
        }
    }
    for (name, &told) in tour {
        let count = tree.get(name).copied().unwrap_or(0);
        if told > count {
            extra.push(format!("{name} (told {told} times, the tree has {count})"));
        }
    }
    (missing, extra)
}

fn check(which: &str, tour: Names) {
    let mut files = Names::new();
    tree(&crate_dir().join("src"), &mut files);
    let (missing, extra) = differences(&tour, &files);
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{which} no longer lists exactly the files of proxy/src.\n  add: {}\n  take out: {}",
        missing.join(", "),
        extra.join(", "),
    );
}

#[test]
fn the_diagram_in_lib_rs_lists_exactly_the_files() {
    check("The diagram in proxy/src/lib.rs", diagram());
}

#[test]
fn the_readme_row_lists_exactly_the_files() {
    check("README.md's `proxy/` row", readme());
}

#[test]
fn a_tour_that_misses_a_file_or_names_a_gone_one_is_told_which() {
    let tree: Names = [("epoll/", 1), ("worker", 1), ("connection", 2)]
        .map(|(n, c)| (n.to_string(), c))
        .into();
    let tour: Names = [("epoll/", 1), ("connection", 1), ("gone", 1)]
        .map(|(n, c)| (n.to_string(), c))
        .into();
    let (missing, extra) = differences(&tour, &tree);
    assert_eq!(
        missing,
        [
            "connection (told 1 of 2 times)",
            "worker (told 0 of 1 times)"
        ]
    );
    assert_eq!(extra, ["gone (told 1 times, the tree has 0)"]);
}
