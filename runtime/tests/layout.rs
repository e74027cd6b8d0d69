//! The shape `lib.rs` promises: every file of `runtime/src` opens with a
//! `//!` saying what it holds, and no module reaches itself through its
//! `crate::` imports (imports run one way, floor by floor).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// Every module of `runtime/src` with the modules it names as `crate::x`
/// (in `use` lines and in paths), comments left out.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    for entry in fs::read_dir(&src).expect("runtime/src") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_some_and(|e| e == "rs") {
            let name = path.file_stem().expect("a file name");
            let text = fs::read_to_string(&path).expect("a source file");
            files.insert(name.to_string_lossy().into_owned(), text);
        }
    }
    let modules: BTreeSet<String> = files.keys().cloned().collect();
    files
        .iter()
        .map(|(name, text)| (name.clone(), named_modules(text, name, &modules)))
        .collect()
}

/// The modules of `modules` that `text` names as `crate::x` or inside a
/// `use crate::{x, ...}` group, outside comments, other than `own`.
fn named_modules(text: &str, own: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let code: String = text
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut named = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        let words = match rest.strip_prefix('{') {
            Some(group) => group.split('}').next().unwrap_or("").to_string(),
            None => rest.to_string(),
        };
        for part in words.split(',') {
            let word: String = part
                .trim()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if modules.contains(&word) && word != own {
                named.insert(word);
            }
            if !rest.starts_with('{') {
                break;
            }
        }
    }
    named
}

/// A chain of imports from `from` back to `from`, if there is one.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>, from: &str) -> Option<Vec<String>> {
    let mut stack = vec![vec![from.to_string()]];
    let mut seen = BTreeSet::new();
    while let Some(path) = stack.pop() {
        let last = path.last().expect("paths are never empty");
        for next in graph.get(last).into_iter().flatten() {
            if next == from {
                let mut found = path.clone();
                found.push(next.clone());
                return Some(found);
            }
            if seen.insert(next.clone()) {
                let mut longer = path.clone();
                longer.push(next.clone());
                stack.push(longer);
            }
        }
    }
    None
}

#[test]
fn no_module_reaches_itself_through_its_imports() {
    let graph = imports();
    assert!(graph.contains_key("task") && graph["task"].contains("waker"));
    for module in graph.keys() {
        if let Some(chain) = circle(&graph, module) {
            panic!("an import circle: {}", chain.join(" -> "));
        }
    }
}

#[test]
fn every_file_opens_with_a_module_doc() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for entry in fs::read_dir(&src).expect("runtime/src") {
        let path = entry.expect("a directory entry").path();
        let text = fs::read_to_string(&path).expect("a source file");
        assert!(
            text.starts_with("//!"),
            "{} does not open with a //! line",
            path.display()
        );
    }
}
