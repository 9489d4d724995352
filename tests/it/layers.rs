//! The house's layers: no import runs back up. A room is a top-level module
//! of `src/` (a folder counts as one room, like a file); an arrow is a
//! `crate::<room>` path in a room's code (tests excluded). An arrow runs back
//! up when, in the best order of the rooms found, it points to a room above
//! its own: only cycles of rooms force any.
//!
//! `cargo test --test it layers -- --nocapture` prints the count and every
//! such arrow; `LAYERS_SRC=<dir>` measures another tree (an older checkout's
//! `src/`), printing without asserting.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The room a file of `src/` belongs to.
fn room_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    Some(first.trim_end_matches(".rs").to_string())
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "tests") {
                continue;
            }
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "tests.rs")
        {
            out.push(path);
        }
    }
}

/// The rooms each room's code names with `crate::<room>`, with how often.
fn arrows(src: &Path) -> BTreeMap<(String, String), usize> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut arrows = BTreeMap::new();
    for file in files {
        let Some(from) = room_of(src, &file) else {
            continue;
        };
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        for line in text.lines() {
            let code = line.trim_start();
            if code.starts_with("#[cfg(test)]") {
                break;
            }
            if code.starts_with("//") {
                continue;
            }
            let mut rest = code;
            while let Some(at) = rest.find("crate::") {
                rest = &rest[at + "crate::".len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if name.is_empty() || name == from {
                    continue;
                }
                *arrows.entry((from.clone(), name)).or_insert(0) += 1;
            }
            // `use crate::{a, b::c}`: every name in the braces.
            if let Some(braced) = code.strip_prefix("use crate::{") {
                for part in braced.split([',', '}', ';']) {
                    let name: String = part
                        .trim()
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() && name != from && name != "self" {
                        *arrows.entry((from.clone(), name)).or_insert(0) += 1;
                    }
                }
            }
        }
    }
    arrows
}

/// The arrows that run back up. The rooms are put in an order that runs as
/// many arrows downwards as it can (the greedy ordering of Eades, Lin and
/// Smyth: rooms nothing imports go first, rooms that import nothing go last,
/// and otherwise the room with the most arrows out over arrows in); the
/// arrows that still point to an earlier room run back up. With no cycle of
/// rooms the count is zero; with one, at least one arrow of it is counted.
fn back_up(arrows: &BTreeMap<(String, String), usize>) -> Vec<(String, String, usize)> {
    let mut rooms: BTreeSet<&str> = BTreeSet::new();
    for (from, to) in arrows.keys() {
        rooms.insert(from);
        rooms.insert(to);
    }
    let live_out = |room: &str, left: &BTreeSet<&str>| {
        arrows
            .keys()
            .filter(|(f, t)| f == room && left.contains(t.as_str()))
            .count() as i64
    };
    let live_in = |room: &str, left: &BTreeSet<&str>| {
        arrows
            .keys()
            .filter(|(f, t)| t == room && left.contains(f.as_str()))
            .count() as i64
    };
    let (mut head, mut tail): (Vec<&str>, Vec<&str>) = (Vec::new(), Vec::new());
    let mut left = rooms.clone();
    while !left.is_empty() {
        if let Some(sink) = left.iter().copied().find(|r| live_out(r, &left) == 0) {
            tail.push(sink);
            left.remove(sink);
        } else if let Some(source) = left.iter().copied().find(|r| live_in(r, &left) == 0) {
            head.push(source);
            left.remove(source);
        } else if let Some(best) = left.iter().copied().max_by_key(|r| {
            (
                live_out(r, &left) - live_in(r, &left),
                std::cmp::Reverse(*r),
            )
        }) {
            head.push(best);
            left.remove(best);
        }
    }
    tail.reverse();
    let order: BTreeMap<&str, usize> = head
        .into_iter()
        .chain(tail)
        .enumerate()
        .map(|(i, r)| (r, i))
        .collect();
    arrows
        .iter()
        .filter(|((from, to), _)| order[from.as_str()] > order[to.as_str()])
        .map(|((from, to), n)| (from.clone(), to.clone(), *n))
        .collect()
}

#[test]
fn no_import_runs_back_up_the_layers() {
    let (src, measuring_other) = match std::env::var("LAYERS_SRC") {
        Ok(dir) => (PathBuf::from(dir), true),
        Err(_) => (Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), false),
    };
    let arrows = arrows(&src);
    assert!(arrows.len() > 20, "the house was not read: {arrows:?}");
    let back = back_up(&arrows);
    let imports: usize = back.iter().map(|(_, _, n)| n).sum();
    eprintln!(
        "{}: {} arrows between rooms, {} run back up ({} imports)",
        src.display(),
        arrows.len(),
        back.len(),
        imports
    );
    for (from, to, n) in &back {
        eprintln!("  {from} -> {to} ({n})");
    }
    if !measuring_other {
        assert!(back.is_empty(), "imports run back up: {back:?}");
    }
}

#[test]
fn the_measure_sees_a_cycle_and_a_clean_ladder() {
    let arrows = |pairs: &[(&str, &str, usize)]| {
        pairs
            .iter()
            .map(|(a, b, n)| ((a.to_string(), b.to_string()), *n))
            .collect::<BTreeMap<_, _>>()
    };
    let ladder = arrows(&[("top", "mid", 3), ("mid", "low", 2), ("top", "low", 1)]);
    assert!(back_up(&ladder).is_empty());
    let cycle = arrows(&[("top", "mid", 3), ("mid", "low", 2), ("low", "top", 1)]);
    assert_eq!(back_up(&cycle).len(), 1, "{:?}", back_up(&cycle));
    // A room that reaches up through a chain: one arrow is enough to count.
    let chain = arrows(&[
        ("top", "mid", 1),
        ("mid", "low", 1),
        ("low", "leaf", 1),
        ("leaf", "mid", 1),
        ("top", "leaf", 1),
    ]);
    assert_eq!(back_up(&chain).len(), 1, "{:?}", back_up(&chain));
    let pair = arrows(&[("a", "b", 5), ("b", "a", 2)]);
    assert_eq!(back_up(&pair), vec![("b".into(), "a".into(), 2)]);
    let two = arrows(&[("a", "b", 1), ("b", "a", 1), ("b", "c", 1), ("c", "b", 1)]);
    assert_eq!(back_up(&two).len(), 2);
}

/// The command model (`src/shell/`, contract §25) is a leaf: pure, at floor
/// 1, it imports nothing from the crate, so `policy/` and `redact/` can both
/// read it and it can never reach up into a verdict.
#[test]
fn the_command_model_is_a_leaf() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let arrows = arrows(&src);
    let out: Vec<&(String, String)> = arrows.keys().filter(|(from, _)| from == "shell").collect();
    assert!(out.is_empty(), "src/shell imports from the crate: {out:?}");
    let mut files = Vec::new();
    rust_files(&src.join("shell"), &mut files);
    assert!(
        files.len() >= 5,
        "the command model was not read: {files:?}"
    );
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        assert!(
            !text.contains("crate::"),
            "{} names a crate path",
            file.display()
        );
    }
}
