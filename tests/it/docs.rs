//! The docs name only files that exist. Every source path that
//! `architecture/*.md` and `README.md` name — `src/…`, `tests/…`,
//! `benches/…`, `testkit/…`, `examples/…`, `fuzz/…`, `reference/…`,
//! `architecture/…`, with a known extension or as a folder ending in `/` — is
//! checked against the tree, and so is every file and folder the layout
//! drawing of `architecture/internals.md` names (`pending/` then `store.rs`
//! below it is `src/pending/store.rs`, and a folder entry's `mod.rs (…),
//! durable.rs` are its files).
//!
//! Paths of other repositories are told apart: one written after a `/` or a
//! word (`engine/src/workers/…`, the iii engine's) is not this repository's,
//! and [`ELSEWHERE`] lists, by hand, any other that must be named bare.

use std::collections::BTreeSet;
use std::path::Path;

/// The folders of this repository a doc may name a path under.
const ROOTS: &[&str] = &[
    "src/",
    "tests/",
    "benches/",
    "testkit/",
    "examples/",
    "fuzz/",
    "reference/",
    "architecture/",
];

/// The extensions of the files a doc may name.
const EXTENSIONS: &[&str] = &[
    ".rs", ".md", ".toml", ".yaml", ".yml", ".json", ".js", ".css", ".sh", ".txt",
];

/// Paths the docs name that belong to another repository, though written
/// bare like this one's. None today.
const ELSEWHERE: &[&str] = &[];

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn is_file_name(token: &str) -> bool {
    EXTENSIONS
        .iter()
        .any(|ext| token.len() > ext.len() && token.ends_with(ext))
}

/// A token as a path: without the punctuation around it in prose.
fn trim(token: &str) -> &str {
    token
        .trim_start_matches(['(', '[', '`', '"', '\''])
        .trim_end_matches([')', ']', '`', '"', '\'', ',', ';', ':', '.', '*'])
}

/// The paths under [`ROOTS`] a text names, each with the line it is on. A
/// path preceded by a word, a `/` or a `.` is another one's tail, and a
/// path with `…`, `*`, `<` or `{` in it is a pattern, not a file.
fn rooted_paths(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (line_no, line) in text.lines().enumerate() {
        for root in ROOTS {
            let mut from = 0;
            while let Some(at) = line[from..].find(root) {
                let start = from + at;
                from = start + root.len();
                let before = line[..start].chars().next_back();
                if before.is_some_and(|c| c.is_alphanumeric() || "_/.-~".contains(c)) {
                    continue;
                }
                let path: String = line[start..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || "_/.-…*<>{}".contains(*c))
                    .collect();
                let path = trim(&path).to_string();
                if path.contains(['…', '*', '<', '{']) {
                    continue;
                }
                if path.ends_with('/') || is_file_name(&path) {
                    found.push((line_no + 1, path));
                }
            }
        }
    }
    found
}

/// The paths of `src/` a text names without the `src/` (`pending/store.rs`,
/// as the tables of internals.md do): a word, a `/`, more, ending in `.rs`.
/// One that holds a `src/` of its own (`engine/src/workers/…`) is another
/// repository's.
fn src_relative_paths(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (line_no, line) in text.lines().enumerate() {
        for token in line.split(|c: char| c.is_whitespace() || c == '|') {
            let path = trim(token);
            let Some(first) = path.split('/').next() else {
                continue;
            };
            let plain = |part: &str| {
                !part.is_empty() && part.chars().all(|c| c.is_ascii_lowercase() || c == '_')
            };
            if !path.ends_with(".rs")
                || !path.contains('/')
                || !plain(first)
                || ROOTS.iter().any(|r| path.starts_with(r))
                || path.contains("/src/")
                || path.contains(['…', '*', '<', '{'])
            {
                continue;
            }
            found.push((line_no + 1, format!("src/{path}")));
        }
    }
    found
}

/// The paths the layout drawing of internals.md names: its entries (a name
/// at its indentation, under the nearest folder above it) and the files a
/// folder entry's description names.
fn drawn_paths(text: &str) -> Vec<(usize, String)> {
    let Some(start) = text.find("```\nsrc/\n") else {
        return Vec::new();
    };
    let block = &text[start + 4..];
    let block = &block[..block.find("```").unwrap_or(block.len())];
    let first_line = text[..start + 4].lines().count() + 1;
    // (indentation, folder path) of the folders above the current line.
    let mut folders: Vec<(usize, String)> = Vec::new();
    // The folder the current entry's description speaks of.
    let mut described = String::new();
    let mut found = Vec::new();
    for (i, line) in block.lines().enumerate() {
        let line_no = first_line + i;
        let indent = line.len() - line.trim_start().len();
        let tokens: Vec<&str> = line.split_whitespace().collect();
        // A folder entry has one name (what follows it is its description);
        // files may share a line (`page.rs http.rs`).
        let names = match tokens.first() {
            Some(first) if first.ends_with('/') => 1,
            _ => tokens.iter().take_while(|t| is_file_name(t)).count(),
        };
        let entry = indent < 16 && names > 0;
        if entry {
            folders.retain(|(at, _)| *at < indent);
            let parent = folders.last().map(|(_, f)| f.clone()).unwrap_or_default();
            described = parent.clone();
            for name in &tokens[..names] {
                let path = if ROOTS.iter().any(|r| name.starts_with(r)) || parent.is_empty() {
                    name.to_string()
                } else {
                    format!("{parent}{name}")
                };
                found.push((line_no, path.clone()));
                if path.ends_with('/') {
                    folders.push((indent, path.clone()));
                    described = path;
                }
            }
        }
        let description = if entry { &tokens[names..] } else { &tokens[..] };
        for token in description {
            let token = trim(token);
            if !is_file_name(token) || token.contains(['…', '*', '<', '{', ':']) {
                continue;
            }
            // Rooted paths are checked with the prose's.
            if ROOTS.iter().any(|r| token.starts_with(r)) {
                continue;
            }
            found.push((line_no, format!("{described}{token}")));
        }
    }
    found
}

fn docs() -> Vec<(String, String)> {
    let mut docs = vec![(
        "README.md".to_string(),
        std::fs::read_to_string(repo().join("README.md")).expect("README.md"),
    )];
    let mut pages: Vec<_> = std::fs::read_dir(repo().join("architecture"))
        .expect("architecture/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    for page in pages {
        let name = format!(
            "architecture/{}",
            page.file_name().and_then(|n| n.to_str()).unwrap_or("?")
        );
        docs.push((name, std::fs::read_to_string(&page).expect("a page")));
    }
    docs
}

#[test]
fn every_source_path_the_docs_name_exists() {
    let mut missing = BTreeSet::new();
    let mut checked = 0;
    for (doc, text) in docs() {
        let mut paths = rooted_paths(&text);
        if doc == "architecture/internals.md" {
            paths.extend(src_relative_paths(&text));
            let drawn = drawn_paths(&text);
            assert!(
                drawn.len() > 60,
                "the layout drawing was not read: {drawn:?}"
            );
            paths.extend(drawn);
        }
        for (line, path) in paths {
            if ELSEWHERE.contains(&path.as_str()) {
                continue;
            }
            checked += 1;
            if !repo().join(&path).exists() {
                missing.insert(format!("{doc}:{line}: {path}"));
            }
        }
    }
    assert!(checked > 100, "too few paths were read: {checked}");
    assert!(
        missing.is_empty(),
        "the docs name paths that do not exist:\n{}",
        missing.into_iter().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn the_reading_finds_paths_and_tells_other_repositories_apart() {
    let prose = "see `src/pending/store.rs`, (tests/it/), engine/src/workers/mod.rs, \
                 src/… and benches/micro.rs.";
    let found: Vec<String> = rooted_paths(prose).into_iter().map(|(_, p)| p).collect();
    assert_eq!(
        found,
        ["src/pending/store.rs", "tests/it/", "benches/micro.rs"],
        "{found:?}"
    );
    let table = "| `Revokes::known` | folders/revokes.rs | engine/src/workers/mod.rs, `pending/claim.rs`; src/x.rs |";
    let relative: Vec<String> = src_relative_paths(table)
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    assert_eq!(
        relative,
        ["src/folders/revokes.rs", "src/pending/claim.rs"],
        "{relative:?}"
    );
    let drawing = "```\nsrc/\n  lib.rs               the surface\n  settings/            cache.rs (pure), store.rs\n  pending/             held calls: mod.rs (the index), store.rs\n    claim.rs           a guard\n                       continued, naming announce.rs\n  page.rs http.rs      PURE: pages\ntests/it/            one binary (tests/it/docs.rs)\n```\n";
    let drawn: Vec<String> = drawn_paths(drawing).into_iter().map(|(_, p)| p).collect();
    assert_eq!(
        drawn,
        [
            "src/",
            "src/lib.rs",
            "src/settings/",
            "src/settings/cache.rs",
            "src/settings/store.rs",
            "src/pending/",
            "src/pending/mod.rs",
            "src/pending/store.rs",
            "src/pending/claim.rs",
            "src/pending/announce.rs",
            "src/page.rs",
            "src/http.rs",
            "tests/it/",
        ],
        "{drawn:?}"
    );
}
