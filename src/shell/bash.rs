//! Reading bash source: tree-sitter's bash grammar gives the structure, and
//! an explicit-stack walk (no recursion on the tree) finds every simple
//! command that can run, in every word context (§25.3). Whatever the
//! grammar does not read the way bash runs it is opaque.

use super::clock::Budget;
use std::cell::RefCell;

use tree_sitter::{Node, ParseOptions, ParseState, Parser, Tree, TreeCursor};

use super::argv::{Frame, Reading};
use super::kinds::{self, Field, Kind};
use super::word::{self, reduce};
use super::{Assignment, OpaqueWhy, Redirect, Via, Word, WordKind};

thread_local! {
    /// One parser per thread, reused (creating one costs more than a
    /// short parse).
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

/// The byte the parser sees in place of each byte of a non-ASCII
/// character. The grammar's external scanner passes code points to the C
/// library's `isdigit`, whose table a large code point reads out of bounds
/// (a crash on `{` followed by such a character); and the grammar's
/// whitespace is wider than bash's (no-break spaces split its words, not
/// bash's). Bash reads these bytes as ordinary word characters; so does
/// the grammar with `^`, which is not a name character (no assignment or
/// variable appears that bash would not see) and is special only inside
/// `${…}` and glob brackets, which are dynamic or globs anyway (`%`, `@`
/// and `+` are not neutral: the grammar reads `a%b` as an error). Byte
/// offsets are unchanged, and every word's text is taken from the original.
const NON_ASCII_STAND_IN: u8 = b'^';

/// Parse `text`, stopping when `budget` is spent. `None` when the parse did
/// not finish in time or the grammar could not be loaded.
fn parse(text: &str, budget: Budget) -> Option<Tree> {
    let ascii: Option<Vec<u8>> = (!text.is_ascii()).then(|| {
        text.bytes()
            .map(|b| if b.is_ascii() { b } else { NON_ASCII_STAND_IN })
            .collect()
    });
    PARSER.with(|cell| {
        let mut slot = cell.try_borrow_mut().ok()?;
        if slot.is_none() {
            let mut parser = Parser::new();
            parser
                .set_language(&tree_sitter_bash::LANGUAGE.into())
                .ok()?;
            *slot = Some(parser);
        }
        let parser = slot.as_mut()?;
        let bytes: &[u8] = ascii.as_deref().unwrap_or(text.as_bytes());
        let mut stop = |_: &ParseState| budget.spent();
        let options = ParseOptions::new().progress_callback(&mut stop);
        let tree = parser.parse_with_options(
            &mut |at: usize, _| bytes.get(at..).unwrap_or(&[]),
            None,
            Some(options),
        );
        if tree.is_none() {
            // A cancelled parse leaves state behind; the next parse starts
            // clean.
            parser.reset();
        }
        tree
    })
}

/// Words bash reserves: one in command position means the grammar read the
/// structure differently from bash (a misparse), so it is opaque.
const RESERVED: &[&str] = &[
    "{", "}", "then", "do", "done", "fi", "esac", "elif", "else", "in", "!", "[[", "]]",
    "function", "case", "if", "while", "until", "for", "select", "((", "))", ";;", "coproc",
];

/// The arithmetic comparison operators of `[[ … ]]`, whose operands bash
/// evaluates as arithmetic expressions.
const ARITHMETIC_TESTS: &[&str] = &["-eq", "-ne", "-lt", "-le", "-gt", "-ge"];

#[derive(Clone)]
struct Ctx {
    via: Vec<Via>,
    depth: u32,
    redirects: Vec<Redirect>,
    arithmetic: bool,
    test: bool,
}

/// One node to visit: its context, and whether its parent already read it
/// (an assignment of a command, a declaration's words).
struct Visit<'t> {
    node: Node<'t>,
    ctx: usize,
    consumed: bool,
}

/// Where a backslash-newline joins two parts of one word (`r\<newline>m`):
/// bash removes the pair before it reads words, the grammar splits the word
/// there. Single-quoted text is skipped; anywhere else it is taken to
/// matter, unless the command's words were joined across it
/// ([`join_words`]). The offsets of the backslashes.
fn continuations_inside_words(text: &str) -> Vec<usize> {
    let mut found = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut single = false;
    while i < bytes.len() {
        let b = bytes[i];
        if single {
            if b == b'\'' {
                single = false;
            }
            i += 1;
            continue;
        }
        match b {
            b'\'' => single = true,
            b'\\' => {
                if bytes.get(i + 1) == Some(&b'\n') {
                    let before = i.checked_sub(1).map(|p| bytes[p]);
                    let after = bytes.get(i + 2).copied();
                    let word =
                        |c: Option<u8>| c.is_some_and(|c| !c.is_ascii_whitespace() && c != b';');
                    if word(before) && word(after) {
                        found.push(i);
                    }
                }
                i += 2;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    found
}

/// The text between two word nodes of one command, read as bash reads it:
/// the grammar leaves backslash escapes out of its words there (`'rm'\ -f`
/// is one word to bash, `'r'\<newline>m` too). The escaped characters
/// before the first blank, whether there is a blank, and the escaped
/// characters after the last one. `None` for anything else.
fn gap_between_words(gap: &str) -> Option<(String, bool, String)> {
    let mut before = String::new();
    let mut after = String::new();
    let mut blank = false;
    let mut chars = gap.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\n') | None => {}
                Some(escaped) => {
                    if blank {
                        after.push(escaped);
                    } else {
                        before.push(escaped);
                    }
                }
            },
            ' ' | '\t' => {
                blank = true;
                after.clear();
            }
            _ => return None,
        }
    }
    Some((before, blank, after))
}

/// A command's words as bash splits them: two word nodes with no blank
/// between them are one word, and escaped characters between them belong
/// to their neighbours. Each joined backslash-newline is noted in
/// `handled`; a gap not understood is opaque.
fn join_words(
    reading: &mut Reading<'_>,
    pieces: Vec<(std::ops::Range<usize>, Word, bool)>,
    text: &str,
    handled: &mut Vec<usize>,
    here: &Frame,
) -> Vec<Word> {
    let mut words: Vec<Word> = Vec::with_capacity(pieces.len());
    let mut last_end: Option<usize> = None;
    for (range, mut word, follows_word) in pieces {
        let Some(end) = last_end.filter(|end| follows_word && *end <= range.start) else {
            last_end = Some(range.end);
            words.push(word);
            continue;
        };
        let gap = text.get(end..range.start).unwrap_or("");
        last_end = Some(range.end);
        if !gap.is_empty() && !gap.contains('\\') {
            words.push(word);
            continue;
        }
        // Two word nodes with nothing between them are one word to bash
        // (`'r'\m`: the grammar starts a word at the backslash).
        let Some((before, blank, after)) = gap_between_words(gap) else {
            reading.opaque(
                OpaqueWhy::Unread {
                    what: "an escape between words".into(),
                },
                here,
                here.span.clone(),
            );
            words.push(word);
            continue;
        };
        handled.extend(gap.match_indices("\\\n").map(|(at, _)| end + at));
        let Some(previous) = words.last_mut() else {
            words.push(word);
            continue;
        };
        previous.text.push_str(&before);
        if blank {
            word.text.insert_str(0, &after);
            words.push(word);
        } else {
            previous.text.push_str(&word.text);
            previous.kind = word::combine(previous.kind, word.kind);
            if let (Some(a), Some(b)) = (&previous.span, &word.span) {
                previous.span = Some(a.start..b.end);
            }
        }
    }
    words
}

#[cfg(test)]
thread_local! {
    /// Tests compare a reading of a value as given with its reading closed
    /// by a newline ([`closed`]).
    pub(super) static UNCLOSED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `text` with a newline after it, when that reads the same to bash: bash
/// ends a `-c` string, an `eval`'s words or a here-document fed to a shell
/// as if a newline followed its last line, except after a backslash (where
/// the newline would join a line continuation, `echo a\` prints `a\`), so
/// no text ending in one is closed. The grammar reaches the end of a value
/// whose last statement has no terminator through its error path, which
/// tries every symbol of the language: a three-stage pipeline at the end
/// of a value took 110 µs to parse instead of 9 µs with the newline.
/// Spans stay within `text`: the newline follows its last byte, and
/// `Reading::run` bounds a top-level value's spans by its length.
fn closed(text: &str) -> Option<String> {
    #[cfg(test)]
    if UNCLOSED.with(std::cell::Cell::get) {
        return None;
    }
    let open = !text.is_empty() && !text.ends_with('\n') && !text.ends_with('\\');
    open.then(|| {
        let mut closed = String::with_capacity(text.len() + 1);
        closed.push_str(text);
        closed.push('\n');
        closed
    })
}

/// Read `text` as bash into `reading`, under `frame`.
pub(super) fn walk(reading: &mut Reading<'_>, text: &str, frame: &Frame) {
    let continuations = if text.contains("\\\n") {
        continuations_inside_words(text)
    } else {
        Vec::new()
    };
    let mut handled: Vec<usize> = Vec::new();
    match closed(text) {
        Some(closed) => walk_tree(reading, &closed, frame, &mut handled),
        None => walk_tree(reading, text, frame, &mut handled),
    }
    if continuations.iter().any(|at| !handled.contains(at)) {
        reading.opaque(
            OpaqueWhy::Unread {
                what: "a line continuation inside a word".into(),
            },
            frame,
            frame.span.clone(),
        );
    }
}

/// The walk itself; `handled` collects the line continuations a command's
/// words were joined across.
fn walk_tree(reading: &mut Reading<'_>, text: &str, frame: &Frame, handled: &mut Vec<usize>) {
    if text.contains('\0') {
        // A `-c` string is a C string: bash never sees past a NUL, and what
        // another reader makes of it is not known.
        reading.opaque(
            OpaqueWhy::Unread {
                what: "a NUL byte".into(),
            },
            frame,
            frame.span.clone(),
        );
        reading.incomplete();
        return;
    }
    let Some(tree) = parse(text, reading.budget()) else {
        reading.opaque(OpaqueWhy::Budget, frame, frame.span.clone());
        reading.incomplete();
        return;
    };
    let root = tree.root_node();
    if root.has_error() {
        reading.opaque(OpaqueWhy::Parse, frame, frame.span.clone());
        reading.incomplete();
    }
    let mut ctxs = vec![Ctx {
        via: frame.via.clone(),
        depth: frame.depth,
        redirects: Vec::new(),
        arithmetic: false,
        test: false,
    }];
    let mut stack = vec![Visit {
        node: root,
        ctx: 0,
        consumed: false,
    }];
    let mut walk_cursor = root.walk();
    let mut visited = 0u32;
    let mut arithmetic_seen: Vec<usize> = Vec::new();
    while let Some(Visit {
        node,
        ctx,
        consumed,
    }) = stack.pop()
    {
        visited = visited.wrapping_add(1);
        if visited.is_multiple_of(128) && reading.over_budget() {
            reading.opaque(OpaqueWhy::Budget, frame, frame.span.clone());
            reading.incomplete();
            return;
        }
        if reading.stopped() {
            return;
        }
        let here = frame_at(frame, &ctxs[ctx], node);
        if !text.is_char_boundary(node.start_byte()) || !text.is_char_boundary(node.end_byte()) {
            reading.opaque(
                OpaqueWhy::Unread {
                    what: "a character split by the grammar".into(),
                },
                &here,
                here.span.clone(),
            );
            continue;
        }
        if node.is_error() || node.is_missing() {
            // Already counted by `has_error`; the rest of the tree is still
            // read for what it shows.
            continue;
        }
        if !node.is_named() {
            continue;
        }
        let mut push_children = true;
        let mut child_ctx = ctx;
        let kind = kinds::kind(node);
        match kind {
            Kind::String | Kind::TranslatedString => gaps(reading, node, text, &ctxs[ctx], &here),
            Kind::Program
            | Kind::List
            | Kind::Pipeline
            | Kind::Subshell
            | Kind::DoGroup
            | Kind::IfStatement
            | Kind::ElifClause
            | Kind::ElseClause
            | Kind::WhileStatement
            | Kind::CaseStatement
            | Kind::CaseItem
            | Kind::NegatedCommand
            | Kind::ForStatement
            | Kind::Concatenation
            | Kind::Array
            | Kind::CommandName
            | Kind::HerestringRedirect
            | Kind::FileRedirect
            | Kind::BinaryExpression
            | Kind::UnaryExpression
            | Kind::PostfixExpression
            | Kind::TernaryExpression
            | Kind::ParenthesizedExpression
            | Kind::BraceExpression => {
                if ctxs[ctx].test && kind == Kind::BinaryExpression {
                    test_arithmetic(reading, node, text, &here);
                }
                if ctxs[ctx].test && kind == Kind::UnaryExpression {
                    test_variable(reading, node, text, &here);
                }
            }
            Kind::Comment
            | Kind::HeredocStart
            | Kind::HeredocEnd
            | Kind::FileDescriptor
            | Kind::TestOperator
            | Kind::SpecialVariableName => push_children = false,
            Kind::RawString | Kind::AnsiCString => push_children = false,
            Kind::Number => {
                if ctxs[ctx].arithmetic && node.named_child_count() > 0 {
                    arithmetic(reading, &mut arithmetic_seen, &here);
                }
            }
            Kind::VariableName => {
                if ctxs[ctx].arithmetic && !consumed {
                    arithmetic(reading, &mut arithmetic_seen, &here);
                }
                push_children = false;
            }
            Kind::SimpleExpansion => {
                if ctxs[ctx].arithmetic {
                    arithmetic(reading, &mut arithmetic_seen, &here);
                }
                push_children = false;
            }
            Kind::StringContent | Kind::HeredocContent => push_children = false,
            Kind::Word | Kind::Regex | Kind::ExtglobPattern => {
                let raw = text.get(node.byte_range()).unwrap_or("");
                if ctxs[ctx].arithmetic && kind == Kind::Word && !arithmetic_literal(raw) {
                    arithmetic(reading, &mut arithmetic_seen, &here);
                }
                unread_substitutions(reading, raw, &ctxs[ctx], &here);
                push_children = false;
            }
            Kind::Command => {
                command(reading, node, text, &ctxs[ctx], &here, handled);
                push_consumed(&mut stack, &mut walk_cursor, node, ctx, true);
                push_children = false;
            }
            Kind::DeclarationCommand | Kind::UnsetCommand => {
                declaration(reading, node, text, &ctxs[ctx], &here);
                push_consumed(&mut stack, &mut walk_cursor, node, ctx, true);
                push_children = false;
            }
            Kind::VariableAssignments => {
                let mut assignments = Vec::new();
                let mut cursor = node.walk();
                for child in node.named_children(&mut cursor) {
                    if child.kind() == "variable_assignment" {
                        assignments.push(assignment(child, text, here.top));
                    }
                }
                reading.simple(Vec::new(), assignments, ctxs[ctx].redirects.clone(), &here);
                push_consumed(&mut stack, &mut walk_cursor, node, ctx, true);
                push_children = false;
            }
            Kind::VariableAssignment => {
                if !consumed {
                    let one = assignment(node, text, here.top);
                    reading.simple(Vec::new(), vec![one], ctxs[ctx].redirects.clone(), &here);
                }
                // The name's subscript and the value are read below.
                push_assignment(&mut stack, node, ctx);
                push_children = false;
            }
            Kind::Subscript => {
                let mut cursor = node.walk();
                let index = node.child_by_field_name("index");
                let mut pushed = Vec::new();
                for child in node.named_children(&mut cursor) {
                    let is_index = index.is_some_and(|i| i.id() == child.id());
                    if is_index && !subscript_literal(text.get(child.byte_range()).unwrap_or("")) {
                        let mut inner = ctxs[ctx].clone();
                        inner.arithmetic = true;
                        ctxs.push(inner);
                        pushed.push(Visit {
                            node: child,
                            ctx: ctxs.len() - 1,
                            consumed: false,
                        });
                    } else if !is_index {
                        pushed.push(Visit {
                            node: child,
                            ctx,
                            consumed: true,
                        });
                    }
                }
                stack.extend(pushed.into_iter().rev());
                push_children = false;
            }
            Kind::Expansion => {
                expansion(reading, node, text, &mut ctxs, ctx, &mut stack, &here);
                push_children = false;
            }
            Kind::ArithmeticExpansion | Kind::CStyleForStatement => {
                let mut inner = ctxs[ctx].clone();
                inner.arithmetic = true;
                if kind == Kind::CStyleForStatement {
                    // Its body is ordinary code: read it in the outer context.
                    if let Some(body) = node.child_by_field_name("body") {
                        stack.push(Visit {
                            node: body,
                            ctx,
                            consumed: false,
                        });
                    }
                    ctxs.push(inner);
                    let arith = ctxs.len() - 1;
                    let mut cursor = node.walk();
                    let body = node.child_by_field_name("body").map(|b| b.id());
                    let header: Vec<Node<'_>> = node
                        .named_children(&mut cursor)
                        .filter(|c| Some(c.id()) != body)
                        .collect();
                    for child in header.into_iter().rev() {
                        stack.push(Visit {
                            node: child,
                            ctx: arith,
                            consumed: false,
                        });
                    }
                    push_children = false;
                } else {
                    ctxs.push(inner);
                    child_ctx = ctxs.len() - 1;
                }
            }
            Kind::CompoundStatement => {
                let opens_arithmetic = node
                    .child(0)
                    .is_some_and(|c| !c.is_named() && c.kind() == "((");
                if opens_arithmetic {
                    let mut inner = ctxs[ctx].clone();
                    inner.arithmetic = true;
                    ctxs.push(inner);
                    child_ctx = ctxs.len() - 1;
                }
            }
            Kind::TestCommand => {
                test_command(reading, node, text, &ctxs[ctx], &here);
                let mut inner = ctxs[ctx].clone();
                inner.test = true;
                ctxs.push(inner);
                child_ctx = ctxs.len() - 1;
            }
            Kind::RedirectedStatement => {
                let mut redirects = Vec::new();
                let mut cursor = node.walk();
                let body = node.child_by_field_name("body");
                for child in node.named_children(&mut cursor) {
                    if Some(child.id()) != body.map(|b| b.id()) {
                        if let Some(r) = redirect(child, text, here.top) {
                            redirects.push(r);
                        }
                    }
                }
                let mut inner = ctxs[ctx].clone();
                inner.redirects.extend(redirects);
                ctxs.push(inner);
                let body_ctx = ctxs.len() - 1;
                let mut cursor = node.walk();
                let children: Vec<Node<'_>> = node.named_children(&mut cursor).collect();
                for child in children.into_iter().rev() {
                    let is_body = Some(child.id()) == body.map(|b| b.id());
                    stack.push(Visit {
                        node: child,
                        ctx: if is_body { body_ctx } else { ctx },
                        consumed: false,
                    });
                }
                push_children = false;
            }
            Kind::HeredocRedirect => {
                let quoted = node
                    .named_children(&mut node.walk())
                    .find(|c| c.kind() == "heredoc_start")
                    .and_then(|c| text.get(c.byte_range()))
                    .is_some_and(|s| s.contains(['\'', '"', '\\']));
                if node.child_by_field_name("argument").is_some() {
                    reading.opaque(
                        OpaqueWhy::Unread {
                            what: "an argument after a here-document".into(),
                        },
                        &here,
                        here.span.clone(),
                    );
                }
                let mut body_ctx = ctxs[ctx].clone();
                body_ctx.via.push(Via::HereDoc);
                ctxs.push(body_ctx);
                let body_ctx = ctxs.len() - 1;
                let mut cursor = node.walk();
                let children: Vec<Node<'_>> = node.named_children(&mut cursor).collect();
                for child in children.into_iter().rev() {
                    if child.kind() == "heredoc_body" {
                        if !quoted {
                            stack.push(Visit {
                                node: child,
                                ctx: body_ctx,
                                consumed: false,
                            });
                        }
                    } else {
                        stack.push(Visit {
                            node: child,
                            ctx,
                            consumed: false,
                        });
                    }
                }
                push_children = false;
            }
            Kind::HeredocBody => gaps(reading, node, text, &ctxs[ctx], &here),
            Kind::FunctionDefinition => {
                let name = node
                    .child_by_field_name("name")
                    .map(|n| reduce(n, text, false).text)
                    .unwrap_or_default();
                let mut redirects = Vec::new();
                let mut cursor = node.walk();
                for child in node.children_by_field_name("redirect", &mut cursor) {
                    if let Some(r) = redirect(child, text, here.top) {
                        redirects.push(r);
                    }
                }
                let mut inner = ctxs[ctx].clone();
                inner.via.push(Via::Function { name });
                inner.redirects.extend(redirects);
                ctxs.push(inner);
                child_ctx = ctxs.len() - 1;
            }
            Kind::CommandSubstitution | Kind::ProcessSubstitution => {
                let backtick = node.child(0).is_some_and(|c| c.kind() == "`");
                let via = if kind == Kind::ProcessSubstitution {
                    Via::ProcessSubstitution
                } else {
                    Via::Substitution
                };
                let mut inner = ctxs[ctx].clone();
                inner.via.push(via);
                inner.depth += 1;
                inner.arithmetic = false;
                inner.test = false;
                inner.redirects.clear();
                if inner.depth as usize > reading.max_nesting() {
                    reading.opaque(OpaqueWhy::TooDeep, &here, here.span.clone());
                    reading.incomplete();
                    push_children = false;
                } else if backtick {
                    // The grammar does not decode backslashes inside
                    // backticks (nested `\``); bash does, then reads the
                    // body: so do we.
                    let body = word::backtick_body(text.get(node.byte_range()).unwrap_or(""));
                    let nested = Frame {
                        via: inner.via,
                        depth: inner.depth,
                        span: here.span.clone(),
                        top: false,
                        speculative: here.speculative,
                    };
                    reading.nested_bash(body, nested);
                    push_children = false;
                } else {
                    ctxs.push(inner);
                    child_ctx = ctxs.len() - 1;
                }
            }
            Kind::Other => {
                reading.opaque(
                    OpaqueWhy::Unread {
                        what: format!("`{}`", node.kind()),
                    },
                    &here,
                    here.span.clone(),
                );
                push_children = false;
            }
        }
        if push_children {
            push_consumed(&mut stack, &mut walk_cursor, node, child_ctx, false);
        }
    }
}

/// Push `node`'s children; with `consumed`, its assignments were already
/// read by it (a command's leading assignments, a declaration's words), so
/// they are not statements of their own; their values are still read.
/// One cursor serves the whole walk and the children go straight onto the
/// stack (reversed in place): no allocation per node.
fn push_consumed<'t>(
    stack: &mut Vec<Visit<'t>>,
    cursor: &mut TreeCursor<'t>,
    node: Node<'t>,
    ctx: usize,
    consumed: bool,
) {
    let base = stack.len();
    for child in node.children(cursor) {
        stack.push(Visit {
            node: child,
            ctx,
            consumed: consumed && kinds::kind(child) == Kind::VariableAssignment,
        });
    }
    stack[base..].reverse();
}

/// Push an assignment's children: its name is not an arithmetic operand,
/// its value and any subscript are read as usual.
fn push_assignment<'t>(stack: &mut Vec<Visit<'t>>, node: Node<'t>, ctx: usize) {
    let name = node.child_by_field_name("name").map(|n| n.id());
    let mut cursor = node.walk();
    let children: Vec<Node<'t>> = node.children(&mut cursor).collect();
    for child in children.into_iter().rev() {
        let is_name = Some(child.id()) == name && kinds::kind(child) == Kind::VariableName;
        stack.push(Visit {
            node: child,
            ctx,
            consumed: is_name,
        });
    }
}

/// The frame of a command found at `node`.
fn frame_at(frame: &Frame, ctx: &Ctx, node: Node<'_>) -> Frame {
    Frame {
        via: ctx.via.clone(),
        depth: ctx.depth,
        span: if frame.top {
            node.byte_range()
        } else {
            frame.span.clone()
        },
        top: frame.top,
        speculative: frame.speculative,
    }
}

fn arithmetic(reading: &mut Reading<'_>, seen: &mut Vec<usize>, here: &Frame) {
    // One reason per place is enough.
    if seen.contains(&here.span.start) && here.top {
        return;
    }
    seen.push(here.span.start);
    reading.opaque(OpaqueWhy::Arithmetic, here, here.span.clone());
}

/// A literal that arithmetic reads as a number, not a variable.
fn arithmetic_literal(raw: &str) -> bool {
    let raw = raw.trim();
    !raw.is_empty()
        && raw
            .chars()
            .all(|c| c.is_ascii_hexdigit() || matches!(c, 'x' | 'X' | '#' | '@' | '*' | '_'))
        && raw.starts_with(|c: char| c.is_ascii_digit() || c == '@' || c == '*')
}

/// A subscript whose index needs no evaluation: a number, `@` or `*`.
fn subscript_literal(raw: &str) -> bool {
    let raw = raw.trim();
    raw == "@" || raw == "*" || (!raw.is_empty() && raw.chars().all(|c| c.is_ascii_digit()))
}

/// The text of a double-quoted string or an unquoted here-document body
/// outside the substitutions the grammar read: a backtick or `$(` there
/// was not read by it, but bash runs it.
fn gaps(reading: &mut Reading<'_>, node: Node<'_>, text: &str, ctx: &Ctx, here: &Frame) {
    let Some(raw) = text.get(node.byte_range()) else {
        return;
    };
    if !raw.contains('`') && !raw.contains("$(") && !raw.contains("$[") {
        return;
    }
    let mut rest = raw.as_bytes().to_vec();
    let base = node.start_byte();
    let mut cursor = node.walk();
    for child in node.named_children(&mut cursor) {
        if matches!(
            child.kind(),
            "command_substitution"
                | "process_substitution"
                | "expansion"
                | "simple_expansion"
                | "arithmetic_expansion"
        ) {
            for b in rest
                .iter_mut()
                .take(child.end_byte() - base)
                .skip(child.start_byte() - base)
            {
                *b = b' ';
            }
        }
    }
    let rest = String::from_utf8_lossy(&rest);
    unread_substitutions(reading, &rest, ctx, here);
}

/// Substitutions the grammar left inside a plain word: backtick bodies are
/// read as bash; a `$(` or `<(` it did not read is opaque.
fn unread_substitutions(reading: &mut Reading<'_>, raw: &str, ctx: &Ctx, here: &Frame) {
    if raw.contains('`') {
        match word::backtick_bodies(raw) {
            Ok(bodies) => {
                for body in bodies {
                    let mut via = ctx.via.clone();
                    via.push(Via::Substitution);
                    let nested = Frame {
                        via,
                        depth: ctx.depth + 1,
                        span: here.span.clone(),
                        top: false,
                        speculative: here.speculative,
                    };
                    reading.nested_bash(body, nested);
                }
            }
            Err(()) => {
                reading.opaque(OpaqueWhy::Parse, here, here.span.clone());
                reading.incomplete();
            }
        }
    }
    if has_unescaped(raw, "$(") || has_unescaped(raw, "$[") {
        reading.opaque(
            OpaqueWhy::Unread {
                what: "a substitution inside a word".into(),
            },
            here,
            here.span.clone(),
        );
    }
}

fn has_unescaped(raw: &str, needle: &str) -> bool {
    let bytes = raw.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            i += 2;
            continue;
        }
        if bytes[i..].starts_with(needle.as_bytes()) {
            return true;
        }
        i += 1;
    }
    false
}

fn command(
    reading: &mut Reading<'_>,
    node: Node<'_>,
    text: &str,
    ctx: &Ctx,
    here: &Frame,
    handled: &mut Vec<usize>,
) {
    // Each word with whether the node before it was a word too.
    let mut pieces: Vec<(std::ops::Range<usize>, Word, bool)> = Vec::new();
    let mut follows_word = false;
    let mut has_program = false;
    let mut assignments = Vec::new();
    let mut redirects = ctx.redirects.clone();
    // One cursor over the children: it knows each child's field, where
    // `field_name_for_child` would walk the children again for each.
    let mut cursor = node.walk();
    let mut more = cursor.goto_first_child();
    let mut index = 0u32;
    while more {
        let child = cursor.node();
        let field = kinds::field(&cursor);
        debug_assert_eq!(
            cursor
                .field_name()
                .filter(|f| ["name", "argument", "redirect"].contains(f)),
            node.field_name_for_child(index)
                .filter(|f| ["name", "argument", "redirect"].contains(f)),
            "the cursor reads a command's fields as field_name_for_child does"
        );
        index = index.wrapping_add(1);
        more = cursor.goto_next_sibling();
        match field {
            Some(Field::Name) => {
                has_program = pieces.is_empty();
                let word = reduce(child, text, here.top);
                pieces.push((child.byte_range(), word, follows_word));
                follows_word = true;
                continue;
            }
            Some(Field::Argument) => {
                let word = reduce(child, text, here.top);
                pieces.push((child.byte_range(), word, follows_word));
                follows_word = true;
                continue;
            }
            Some(Field::Redirect) => {
                if let Some(r) = redirect(child, text, here.top) {
                    redirects.push(r);
                }
            }
            None if kinds::kind(child) == Kind::VariableAssignment => {
                assignments.push(assignment(child, text, here.top))
            }
            None => {}
        }
        follows_word = false;
    }
    let mut words = join_words(reading, pieces, text, handled, here);
    let program = if has_program && !words.is_empty() {
        Some(words.remove(0))
    } else {
        None
    };
    if let Some(program) = program {
        if program.kind == WordKind::Literal && RESERVED.contains(&program.text.as_str()) {
            let raw = node
                .child_by_field_name("name")
                .and_then(|n| text.get(n.byte_range()))
                .unwrap_or("");
            // A quoted reserved word is an ordinary program name.
            if !raw.contains(['\'', '"', '\\']) {
                reading.opaque(
                    OpaqueWhy::Unread {
                        what: format!("`{}` in command position", program.text),
                    },
                    here,
                    here.span.clone(),
                );
            }
        }
        words.insert(0, program);
    }
    reading.simple(words, assignments, redirects, here);
}

fn declaration(reading: &mut Reading<'_>, node: Node<'_>, text: &str, ctx: &Ctx, here: &Frame) {
    let mut words = Vec::new();
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        if !child.is_named() {
            if words.is_empty() {
                if let Some(keyword) = text.get(child.byte_range()) {
                    let mut w = Word::literal(keyword);
                    w.span = here.top.then(|| child.byte_range());
                    words.push(w);
                }
            }
            continue;
        }
        match child.kind() {
            "variable_assignment" => {
                let a = assignment(child, text, here.top);
                let op = if text
                    .get(child.byte_range())
                    .is_some_and(|raw| raw[a.name.len().min(raw.len())..].starts_with("+="))
                {
                    "+="
                } else {
                    "="
                };
                words.push(Word {
                    text: format!("{}{op}{}", a.name, a.value.text),
                    kind: a.value.kind,
                    span: here.top.then(|| child.byte_range()),
                });
            }
            "comment" => {}
            _ => words.push(reduce(child, text, here.top)),
        }
    }
    reading.simple(words, Vec::new(), ctx.redirects.clone(), here);
}

fn assignment(node: Node<'_>, text: &str, top: bool) -> Assignment {
    let name = node
        .child_by_field_name("name")
        .and_then(|n| text.get(n.byte_range()))
        .unwrap_or("")
        .to_string();
    let value = match node.child_by_field_name("value") {
        Some(value) => reduce(value, text, top),
        None => Word {
            text: String::new(),
            kind: WordKind::Literal,
            span: None,
        },
    };
    Assignment { name, value }
}

fn redirect(node: Node<'_>, text: &str, top: bool) -> Option<Redirect> {
    let kind = node.kind();
    if !matches!(
        kind,
        "file_redirect" | "heredoc_redirect" | "herestring_redirect"
    ) {
        return None;
    }
    let mut op = String::new();
    let mut target = None;
    let mut cursor = node.walk();
    for (i, child) in node.children(&mut cursor).enumerate() {
        let field = u32::try_from(i)
            .ok()
            .and_then(|i| node.field_name_for_child(i));
        match (field, child.is_named(), child.kind()) {
            (Some("descriptor"), _, _) => op.push_str(text.get(child.byte_range()).unwrap_or("")),
            (_, false, token)
                if target.is_none()
                    && matches!(
                        token,
                        ">" | ">>"
                            | "<"
                            | ">&"
                            | "<&"
                            | "&>"
                            | "&>>"
                            | ">|"
                            | "<>"
                            | "<<"
                            | "<<-"
                            | "<<<"
                            | ">&-"
                            | "<&-"
                    ) =>
            {
                op.push_str(token)
            }
            (Some("destination"), _, _) | (_, true, _)
                if kind != "heredoc_redirect" && target.is_none() =>
            {
                target = Some(reduce(child, text, top));
            }
            _ => {}
        }
    }
    // A descriptor duplication names its descriptor in the operator.
    if op.ends_with(">&") || op.ends_with("<&") {
        if let Some(t) = &target {
            if t.kind == WordKind::Literal
                && (t.text == "-" || t.text.chars().all(|c| c.is_ascii_digit()))
            {
                op.push_str(&t.text);
                target = None;
            }
        }
    }
    Some(Redirect { op, target })
}

/// `${…}`: prompt expansion and indirection are opaque; a substring offset
/// or a subscript is arithmetic.
#[allow(clippy::too_many_arguments)]
fn expansion<'t>(
    reading: &mut Reading<'_>,
    node: Node<'t>,
    text: &str,
    ctxs: &mut Vec<Ctx>,
    ctx: usize,
    stack: &mut Vec<Visit<'t>>,
    here: &Frame,
) {
    let raw = text.get(node.byte_range()).unwrap_or("");
    let mut cursor = node.walk();
    let children: Vec<Node<'t>> = node.children(&mut cursor).collect();
    let tokens: Vec<&str> = children
        .iter()
        .filter(|c| !c.is_named())
        .map(|c| c.kind())
        .collect();
    if tokens.windows(2).any(|w| w == ["@", "P"]) || raw.contains("@P}") {
        reading.opaque(OpaqueWhy::PromptExpansion, here, here.span.clone());
    }
    if raw.starts_with("${!") && !(raw.ends_with("*}") || raw.ends_with("@}")) {
        reading.opaque(OpaqueWhy::Indirection, here, here.span.clone());
    }
    let mut arithmetic_ctx: Option<usize> = None;
    let mut named_seen = 0;
    let mut pushed = Vec::new();
    for child in &children {
        if !child.is_named() {
            // `${x:offset:length}`: after a bare `:` everything is
            // arithmetic.
            if child.kind() == ":" && named_seen > 0 && arithmetic_ctx.is_none() {
                let mut inner = ctxs[ctx].clone();
                inner.arithmetic = true;
                ctxs.push(inner);
                arithmetic_ctx = Some(ctxs.len() - 1);
            }
            continue;
        }
        named_seen += 1;
        let consumed = named_seen == 1 && child.kind() == "variable_name";
        pushed.push(Visit {
            node: *child,
            ctx: arithmetic_ctx.unwrap_or(ctx),
            consumed,
        });
    }
    if ctxs[ctx].arithmetic {
        // An expansion inside arithmetic: its value is evaluated.
        reading.opaque(OpaqueWhy::Arithmetic, here, here.span.clone());
    }
    stack.extend(pushed.into_iter().rev());
}

/// `[[ a -eq b ]]`: both operands are arithmetic expressions.
fn test_arithmetic(reading: &mut Reading<'_>, node: Node<'_>, text: &str, here: &Frame) {
    let Some(op) = node.child_by_field_name("operator") else {
        return;
    };
    let op = text.get(op.byte_range()).unwrap_or("");
    if !ARITHMETIC_TESTS.contains(&op) {
        return;
    }
    for side in ["left", "right"] {
        if let Some(operand) = node.child_by_field_name(side) {
            let raw = text.get(operand.byte_range()).unwrap_or("");
            if operand.kind() != "number" && !raw.chars().all(|c| c.is_ascii_digit()) {
                reading.opaque(OpaqueWhy::Arithmetic, here, here.span.clone());
                return;
            }
        }
    }
}

/// `[[ -v name[sub] ]]` evaluates the subscript.
fn test_variable(reading: &mut Reading<'_>, node: Node<'_>, text: &str, here: &Frame) {
    let raw = text.get(node.byte_range()).unwrap_or("");
    if raw.trim_start().starts_with("-v") && raw.contains('[') {
        reading.opaque(OpaqueWhy::Arithmetic, here, here.span.clone());
    }
}

/// `[ … ]` and `[[ … ]]` as the simple command bash runs (`[` is a builtin,
/// `[[` a keyword): its words, for rules that name it.
fn test_command(reading: &mut Reading<'_>, node: Node<'_>, text: &str, ctx: &Ctx, here: &Frame) {
    let mut words = Vec::new();
    let mut stack = vec![node];
    let mut first = true;
    while let Some(n) = stack.pop() {
        let wordlike = matches!(
            n.kind(),
            "word"
                | "string"
                | "raw_string"
                | "ansi_c_string"
                | "concatenation"
                | "simple_expansion"
                | "expansion"
                | "command_substitution"
                | "number"
                | "test_operator"
                | "regex"
                | "extglob_pattern"
                | "variable_name"
                | "translated_string"
                | "arithmetic_expansion"
                | "process_substitution"
        );
        if !first && (wordlike || n.child_count() == 0) {
            if wordlike {
                words.push(reduce(n, text, here.top));
            } else if let Some(token) = text.get(n.byte_range()) {
                let mut w = Word::literal(token);
                w.span = here.top.then(|| n.byte_range());
                words.push(w);
            }
            continue;
        }
        first = false;
        let mut cursor = n.walk();
        let children: Vec<Node<'_>> = n.children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
    }
    reading.simple(words, Vec::new(), ctx.redirects.clone(), here);
}
