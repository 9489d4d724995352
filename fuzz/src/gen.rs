//! Builders of JSON values, keys, globs, regexes and function ids from fuzz
//! input. Each draws from an alphabet of meaningful pieces (secret key names,
//! glob and regex syntax, redaction markers) as well as raw text, so that the
//! interesting paths are reached in a few mutations.

use arbitrary::{Result, Unstructured};
use serde_json::{Map, Number, Value};

/// The secret names of contract §4.
pub const SECRET_NAMES: [&str; 11] = [
    "password",
    "token",
    "api_key",
    "apikey",
    "secret",
    "auth",
    "authorization",
    "access_key",
    "access_token",
    "refresh_token",
    "private_key",
];

/// Pieces of globs and function ids.
pub const GLOB_TOKENS: &[&str] = &[
    "*",
    "**",
    "?",
    "[",
    "]",
    "[!",
    "{",
    "}",
    ",",
    "\\",
    "!",
    "a",
    "b",
    "x",
    "::",
    "/",
    "-",
    "_",
    ".",
    " ",
    "approval::",
    "configuration::",
    "APPROVAL::",
    "shell::",
    "state::",
    "coder::",
    "exec",
    "get",
    "[a-z]",
    "{a,b}",
    "{,}",
    "[]]",
    "\u{e9}",
    "\u{200b}",
    "\u{0}",
    "**/",
    "/**",
];

/// Pieces of regexes.
pub const REGEX_TOKENS: &[&str] = &[
    "(",
    ")",
    "(?:",
    "|",
    "*",
    "+",
    "?",
    "{2}",
    "{2,5}",
    "{0,}",
    "{100}",
    "{1000}",
    "\\w",
    "\\d",
    "\\s",
    "\\b",
    ".",
    "^",
    "$",
    "[a-z]",
    "[^a]",
    "\\p{L}",
    "(?i)",
    "(?s)",
    "a",
    "b",
    "--force",
    "\\",
    "[",
    "]",
    "x*",
    "(a|aa)+",
    "\\x{10FFFF}",
];

/// Argument names and JSON Pointers.
pub const FIELDS: &[&str] = &[
    "cmd", "command", "path", "a", "/a", "/a/b", "/list/0", "/list/01", "/list/-", "/x~1y",
    "/t~0u", "/a~2", "~", "", "/", "//",
];

/// Strings with a meaning to the redactor.
const MARKERS: &[&str] = &[
    "<redacted>",
    "<max-depth>",
    "<+1 more>",
    "<+0 more>",
    "<+03 more>",
    "<+18446744073709551615 more>",
    "<truncated>",
    "\u{2026}",
];

/// An upper bound on the nodes one builder makes, copies included.
const NODE_BUDGET: usize = 60_000;

/// Builds values from fuzz input within a node budget.
pub struct Gen<'a, 'b> {
    /// The fuzz input.
    pub u: &'b mut Unstructured<'a>,
    nodes: usize,
}

impl<'a, 'b> Gen<'a, 'b> {
    /// A builder over `u`.
    pub fn new(u: &'b mut Unstructured<'a>) -> Self {
        Gen { u, nodes: 0 }
    }

    /// Text made of up to `max` pieces of `alphabet`, or raw text.
    pub fn tokens(&mut self, alphabet: &[&str], max: usize) -> Result<String> {
        if self.u.ratio(1, 8)? {
            return self.u.arbitrary::<String>();
        }
        let n = self.u.int_in_range(0..=max)?;
        let mut out = String::new();
        for _ in 0..n {
            out.push_str(self.u.choose(alphabet)?);
        }
        Ok(out)
    }

    /// A glob (or something close to one).
    pub fn glob(&mut self) -> Result<String> {
        self.tokens(GLOB_TOKENS, 8)
    }

    /// A function id: glob-ish text, so rules and entries match often.
    pub fn function_id(&mut self) -> Result<String> {
        self.tokens(GLOB_TOKENS, 6)
    }

    /// A regex (or something close to one).
    pub fn regex(&mut self) -> Result<String> {
        self.tokens(REGEX_TOKENS, 10)
    }

    /// An argument name or pointer.
    pub fn field(&mut self) -> Result<String> {
        if self.u.ratio(1, 6)? {
            return self.u.arbitrary::<String>();
        }
        Ok((*self.u.choose(FIELDS)?).to_owned())
    }

    /// `n` copies of `c` (`n` < 1100), optionally followed by `tail`.
    fn long(&mut self, tail: &str) -> Result<String> {
        let n = self.u.int_in_range(240..=1100)?;
        let c = *self
            .u
            .choose(&['a', 'k', '\u{1}', '"', '\u{e9}', '\u{1f980}', '\u{2026}'])?;
        let mut s: String = std::iter::repeat_n(c, n).collect();
        s.push_str(tail);
        Ok(s)
    }

    /// A string value.
    pub fn string(&mut self) -> Result<String> {
        Ok(match self.u.int_in_range(0..=4)? {
            0 => self.u.arbitrary::<String>()?,
            1 => self.long("")?,
            2 => (*self.u.choose(MARKERS)?).to_owned(),
            3 => self.tokens(GLOB_TOKENS, 4)?,
            _ => {
                let n: u8 = self.u.arbitrary()?;
                format!("<+{n} more>")
            }
        })
    }

    /// An object key: secret names in many spellings, markers, long keys.
    pub fn key(&mut self) -> Result<String> {
        Ok(match self.u.int_in_range(0..=6)? {
            0 => self.u.arbitrary::<String>()?,
            1 | 2 => {
                let name = *self.u.choose(&SECRET_NAMES)?;
                let spelled = match self.u.int_in_range(0..=2)? {
                    0 => name.to_owned(),
                    1 => name.to_ascii_uppercase(),
                    _ => name
                        .chars()
                        .enumerate()
                        .map(|(i, c)| {
                            if i % 2 == 0 {
                                c.to_ascii_uppercase()
                            } else {
                                c
                            }
                        })
                        .collect(),
                };
                let prefix = *self
                    .u
                    .choose(&["", "_", "db_", "X_", "x", "a-", "\u{e9}_"])?;
                let suffix = *self.u.choose(&["", "", "", "s", "_id", " "])?;
                format!("{prefix}{spelled}{suffix}")
            }
            3 => "<truncated>".to_owned(),
            4 => {
                let tail = *self.u.choose(&["", "a", "b", "_token", "\u{2026}"])?;
                self.long(tail)?
            }
            5 => (*self.u.choose(FIELDS)?).trim_start_matches('/').to_owned(),
            _ => (*self
                .u
                .choose(&["user", "cmd", "k", "working_dir", "tokens", "author"])?)
            .to_owned(),
        })
    }

    /// A scalar.
    pub fn leaf(&mut self) -> Result<Value> {
        self.nodes += 1;
        Ok(match self.u.int_in_range(0..=6)? {
            0 => Value::Null,
            1 => Value::Bool(self.u.arbitrary()?),
            2 => Value::from(self.u.arbitrary::<i64>()?),
            3 => Value::from(self.u.arbitrary::<u64>()?),
            4 => Number::from_f64(self.u.arbitrary()?).map_or(Value::Null, Value::Number),
            _ => Value::String(self.string()?),
        })
    }

    /// Any JSON value; containers only while `depth` is small and the node
    /// budget lasts.
    pub fn value(&mut self, depth: usize) -> Result<Value> {
        if depth >= 6 || self.nodes >= NODE_BUDGET || self.u.is_empty() {
            return self.leaf();
        }
        self.nodes += 1;
        match self.u.int_in_range(0..=9)? {
            0..=3 => self.leaf(),
            4 | 5 => {
                let n = self.u.int_in_range(0..=8)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.value(depth + 1)?);
                }
                Ok(Value::Array(items))
            }
            6 | 7 => {
                let n = self.u.int_in_range(0..=8)?;
                let mut map = Map::new();
                for _ in 0..n {
                    let k = self.key()?;
                    let v = self.value(depth + 1)?;
                    map.insert(k, v);
                }
                Ok(Value::Object(map))
            }
            8 => {
                // Many copies of one value: reaches the entry and byte budgets.
                let item = self.value(depth + 1)?;
                let cost = node_count(&item).max(1);
                let wanted = self.u.int_in_range(0..=600)?;
                let n = wanted.min(NODE_BUDGET.saturating_sub(self.nodes) / cost);
                self.nodes += n * cost;
                if self.u.ratio(1, 2)? {
                    Ok(Value::Array(vec![item; n]))
                } else {
                    let map = (0..n).map(|i| (format!("k{i:04}"), item.clone())).collect();
                    Ok(Value::Object(map))
                }
            }
            _ => {
                // A stack of containers: reaches the depth limit.
                let n = self.u.int_in_range(0..=80)?;
                let mut v = self.value(depth + 1)?;
                for i in 0..n {
                    v = if i % 2 == 0 {
                        Value::Array(vec![v])
                    } else {
                        let mut map = Map::new();
                        map.insert(self.key()?, v);
                        Value::Object(map)
                    };
                }
                self.nodes += n;
                Ok(v)
            }
        }
    }
}

/// Number of nodes in `v`.
pub fn node_count(v: &Value) -> usize {
    let mut n = 0;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        n += 1;
        match v {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.values()),
            _ => {}
        }
    }
    n
}
