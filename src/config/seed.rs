//! The `--config` seed file: YAML with the entry's fields, `${NAME}` and
//! `${NAME:default}` expanded from the environment. Used only when nothing is
//! stored yet (`architecture/contract.md` § Configuration).
//!
//! The YAML is read into a JSON value first, and that value goes through the
//! one configuration parser ([`ApprovalConfig::from_value`]), so a seed file
//! takes every shape the stored JSON takes (string or object rules, `args`
//! maps, examples) and is checked the same way. Parse errors never quote the
//! file (it may hold a secret).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{ApprovalConfig, ConfigError};

/// Why a `${NAME}` reference could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    /// `${` without a closing `}`.
    #[error("unterminated ${{ in {0:?}")]
    Unterminated(String),
    /// `${}` or `${:default}`.
    #[error("empty variable name in ${{}}")]
    EmptyName,
    /// `${NAME}` with `NAME` unset and no default.
    #[error("environment variable {0} is not set")]
    Unset(String),
}

/// Why a seed file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SeedError {
    /// The file could not be read.
    #[error("cannot read seed file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A `${NAME}` reference could not be expanded.
    #[error("seed file {}: {source}", path.display())]
    Env {
        /// The file.
        path: PathBuf,
        /// Why.
        source: EnvError,
    },
    /// The file is not YAML (or not YAML a JSON value can hold: a mapping
    /// key that is not a string, an anchor expanded past the budget).
    #[error("seed file {} is not valid YAML: {source}", path.display())]
    Yaml {
        /// The file.
        path: PathBuf,
        /// Why.
        source: Box<serde_saphyr::Error>,
    },
    /// The YAML does not have the entry's shape.
    #[error("seed file {}: {source}", path.display())]
    Shape {
        /// The file.
        path: PathBuf,
        /// Why.
        source: ConfigError,
    },
}

/// Expands `${NAME}` and `${NAME:default}` from the environment. An unset
/// variable without a default is an error naming it.
pub(crate) fn expand_env(
    text: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, EnvError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(EnvError::Unterminated(text.to_string()));
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(':') {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        if name.is_empty() {
            return Err(EnvError::EmptyName);
        }
        match (lookup(name), default) {
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => return Err(EnvError::Unset(name.to_string())),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Reads a `--config` seed file (YAML with the entry's fields, `${NAME}`
/// expanded) and returns it as the JSON the entry stores.
pub fn load_seed(path: &Path) -> Result<Value, SeedError> {
    let text = std::fs::read_to_string(path).map_err(|source| SeedError::Read {
        path: path.to_owned(),
        source,
    })?;
    let expanded =
        expand_env(&text, |n| std::env::var(n).ok()).map_err(|source| SeedError::Env {
            path: path.to_owned(),
            source,
        })?;
    let value = yaml_to_json(&expanded).map_err(|source| SeedError::Yaml {
        path: path.to_owned(),
        source,
    })?;
    let config = ApprovalConfig::checked(&value).map_err(|source| SeedError::Shape {
        path: path.to_owned(),
        source,
    })?;
    Ok(config.to_json())
}

/// A YAML document as a JSON value. Errors carry a position, never a
/// snippet of the text.
pub(crate) fn yaml_to_json(text: &str) -> Result<Value, Box<serde_saphyr::Error>> {
    let options = serde_saphyr::options! { with_snippet: false };
    serde_saphyr::from_str_with_options(text, options).map_err(Box::new)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn env_expansion() {
        let look = |n: &str| (n == "MODE").then(|| "auto".to_string());
        assert_eq!(expand_env("m: ${MODE}", look).unwrap(), "m: auto");
        assert_eq!(expand_env("m: ${NOPE:manual}", look).unwrap(), "m: manual");
        assert_eq!(
            expand_env("m: ${NOPE}", look),
            Err(EnvError::Unset("NOPE".into()))
        );
        assert!(expand_env("m: ${NOPE}", look)
            .unwrap_err()
            .to_string()
            .contains("NOPE"));
        assert!(matches!(
            expand_env("m: ${MODE", look),
            Err(EnvError::Unterminated(_))
        ));
        assert_eq!(expand_env("m: ${:x}", look), Err(EnvError::EmptyName));
        assert_eq!(expand_env("plain", look).unwrap(), "plain");
    }

    #[test]
    fn seed_file_is_yaml_with_env() {
        let dir = std::env::temp_dir().join(format!("ag-seed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("seed.yaml");
        std::fs::write(
            &path,
            "default_mode: ${AG_TEST_SEED_MODE:full}\ngrant_reask_limit: 1\n",
        )
        .unwrap();
        let v = load_seed(&path).unwrap();
        assert_eq!(v["default_mode"], "full");
        assert_eq!(v["grant_reask_limit"], 1);
        assert_eq!(v["rules"], json!(["!approval::*"]));
        std::fs::write(&path, "default_mod: auto\n").unwrap();
        assert!(matches!(load_seed(&path), Err(SeedError::Shape { .. })));
        std::fs::write(&path, "rules: [\"!approval::*\"\n").unwrap();
        assert!(matches!(load_seed(&path), Err(SeedError::Yaml { .. })));
        assert!(matches!(
            load_seed(&dir.join("absent.yaml")),
            Err(SeedError::Read { .. })
        ));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn rule_9_a_seed_takes_object_rules_with_args_maps() {
        let value = yaml_to_json(
            "rules:\n  - \"!approval::*\"\n  - function: shell::run\n    action: allow\n    args: { a: { matches: \"^ok\" } }\n",
        )
        .unwrap();
        let config = ApprovalConfig::from_value(&value).unwrap();
        assert_eq!(
            config.to_json()["rules"][1],
            json!({"function": "shell::run", "action": "allow", "args": {"a": {"matches": "^ok"}}})
        );
    }

    #[test]
    fn a_yaml_error_does_not_quote_the_file() {
        let secret = "0123456789abcdef0123456789abcdef-secret";
        let text = format!("links:\n  secret: {secret}\n  public_base_url: [unclosed\n");
        let err = yaml_to_json(&text).unwrap_err().to_string();
        assert!(!err.contains(secret), "{err}");
        let duplicate = format!("links:\n  secret: {secret}\n  secret: {secret}\n");
        let err = yaml_to_json(&duplicate).unwrap_err().to_string();
        assert!(!err.contains(secret), "{err}");
    }
}
