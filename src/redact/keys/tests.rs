use super::*;

/// The names of contract §4 (version 1), written here from the contract.
const V1_NAMES: [&str; 11] = [
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

/// The names §16 adds at least.
const V2_NAMES: [&str; 15] = [
    "password",
    "passwd",
    "pwd",
    "secret",
    "token",
    "api key",
    "access key",
    "auth",
    "authorization",
    "cookie",
    "set-cookie",
    "session token",
    "credential",
    "credentials",
    "client secret",
];

fn alternating_case(name: &str) -> String {
    name.chars()
        .enumerate()
        .map(|(i, c)| {
            if i % 2 == 0 {
                c.to_ascii_uppercase()
            } else {
                c
            }
        })
        .collect()
}

#[test]
fn every_version_1_name_in_every_case_and_suffix_form() {
    for name in V1_NAMES {
        for form in [
            name.to_owned(),
            name.to_ascii_uppercase(),
            alternating_case(name),
        ] {
            assert!(is_secret_key(&form), "{form}");
            assert!(is_secret_key(&format!("db_{form}")), "db_{form}");
            assert!(is_secret_key(&format!("A_B_{form}")), "A_B_{form}");
            assert!(is_secret_key(&format!("_{form}")), "_{form}");
            assert!(is_secret_key(&format!("x-{form}")), "x-{form}");
            assert!(is_secret_key(&format!("x.{form}")), "x.{form}");
            assert!(is_secret_key(&format!(" {form} ")), " {form} ");
            assert!(!is_secret_key(&format!("{form}_id")), "{form}_id");
            assert!(!is_secret_key(&format!("{form}_count")), "{form}_count");
        }
    }
}

#[test]
fn every_version_2_name_in_snake_kebab_camel_dotted_and_spaced_form() {
    for name in V2_NAMES {
        let words: Vec<&str> = name.split([' ', '-']).collect();
        let camel: String = words
            .iter()
            .enumerate()
            .map(|(i, w)| {
                if i == 0 {
                    (*w).to_owned()
                } else {
                    let mut c = w.chars();
                    c.next()
                        .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                        .unwrap_or_default()
                }
            })
            .collect();
        let pascal_kebab: String = words
            .iter()
            .map(|w| {
                let mut c = w.chars();
                c.next()
                    .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join("-");
        for form in [
            words.join("_"),
            words.join("-"),
            words.join("."),
            words.join(" "),
            words.join("_").to_ascii_uppercase(),
            camel.clone(),
            pascal_kebab.clone(),
            format!("my{}", pascal_kebab.replace('-', "")),
            format!("X-{pascal_kebab}"),
            format!("app.{}", words.join(".")),
        ] {
            assert!(is_secret_key(&form), "{name}: {form}");
        }
    }
}

#[test]
fn the_examples_of_the_contract_match() {
    for key in [
        "authToken",
        "X-Api-Key",
        "client.secret",
        "AWS_SECRET_ACCESS_KEY",
        "set-cookie",
        "Set-Cookie",
        "github_token",
        "GITHUB_TOKEN",
        "apiKey",
        "APIKey",
        "APIKEY",
        "x-auth-token",
        "Proxy-Authorization",
        "sessionToken",
        "SESSION_TOKEN",
        "clientSecret",
        "privateKey",
        "private-key",
        "credentials",
        "aws_credentials",
        "PGPASSWORD",
        "MYSQL_PWD",
        "authtoken",
        "csrftoken",
        "db.passwd",
        "AccountKey",
        "SharedAccessKey",
        "passphrase",
        "secrets",
        "passwords",
        "cookies",
        "id_token",
        "oauth_auth",
        "user_apikey",
        "my_secret",
        "xaccess_token",
        "s3Secret",
    ] {
        assert!(is_secret_key(key), "{key}");
    }
}

#[test]
fn look_alikes_are_not_secrets() {
    for key in [
        "",
        "_",
        "-",
        "tok",
        "tokens",
        "tokens_used",
        "max_tokens",
        "maxTokens",
        "prompt_tokens",
        "token_count",
        "token_type",
        "tokenizer",
        "tokenizer.json",
        "id_token_type",
        "author",
        "authors",
        "oauth",
        "authorized",
        "auth_mode",
        "authMode",
        "passage",
        "pass",
        "keyboard",
        "monkey",
        "hotkey",
        "key",
        "keys",
        "primary_key",
        "sort_key",
        "private",
        "private_key_id",
        "AWS_ACCESS_KEY_ID",
        "access",
        "api",
        "session",
        "session_id",
        "secret_name",
        "password_policy",
        "passwordless",
        "cookie_jar",
        "credential_id",
        "OLDPWD",
        "cwd",
    ] {
        assert!(!is_secret_key(key), "{key}");
    }
}

#[test]
fn the_harmless_keys_the_rule_accepts_are_documented_as_secret() {
    // The module docs list these as accepted false positives; if the rule
    // changes, the docs must change with it.
    for key in [
        "page_token",
        "nextPageToken",
        "PWD",
        "OAuth",
        "requires_auth",
        "is_secret",
        "GOOGLE_APPLICATION_CREDENTIALS",
    ] {
        assert!(is_secret_key(key), "{key}");
    }
}

#[test]
fn non_ascii_is_a_caseless_letter() {
    assert!(!is_secret_key("ＴＯＫＥＮ"));
    assert!(!is_secret_key("tökén"));
    // A clipped key ends in `…`, which is part of the last word.
    assert!(!is_secret_key("github_token…"));
    assert!(!is_secret_key("password…"));
    // Separated from the name, it is a word of its own.
    assert!(!is_secret_key("password_…"));
    assert!(is_secret_key("é_password"));
    assert!(is_secret_key("…_token"));
}

#[test]
fn word_starts_follow_case_digits_and_separators() {
    // A name inside a word does not count unless it may run together.
    assert!(!is_secret_key("xauth"));
    assert!(!is_secret_key("xapikey"));
    assert!(is_secret_key("xAuth"));
    assert!(is_secret_key("xApiKey"));
    assert!(is_secret_key("oauth2Token"));
    assert!(is_secret_key("v2_apiKey"));
    // Acronym runs: `HTTPAuth` is `HTTP Auth`, `OAUTH` one word.
    assert!(is_secret_key("HTTPAuth"));
    assert!(!is_secret_key("OAUTH"));
    // Run-together names count at the end of any word.
    assert!(is_secret_key("xtoken"));
    assert!(is_secret_key("dbpassword"));
    assert!(is_secret_key("topsecret"));
    assert!(!is_secret_key("xpwd"));
}

#[test]
fn very_long_keys_are_judged_by_their_end() {
    let long = "k".repeat(100_000);
    assert!(is_secret_key(&format!("{long}_token")));
    assert!(!is_secret_key(&format!("{long}_tokens")));
    assert!(is_secret_key(&format!("token{}", "_".repeat(100_000))));
}

#[test]
fn header_names_are_the_authorization_and_cookie_ones() {
    for key in [
        "Authorization",
        "Proxy-Authorization",
        "Cookie",
        "Set-Cookie",
        "cookies",
    ] {
        let name = secret_name(key).expect("secret");
        assert!(is_header_name(name), "{key}");
    }
    for key in ["X-Api-Key", "token", "password", "auth"] {
        let name = secret_name(key).expect("secret");
        assert!(!is_header_name(name), "{key}");
    }
}

#[test]
fn the_last_words_cover_every_name() {
    let words = last_words();
    for name in SECRET_NAMES {
        let last = name.rsplit(' ').next().expect("a word");
        assert!(words.contains(&last), "{name}");
    }
    assert!(
        words.windows(2).all(|w| w[0] < w[1]),
        "sorted, no duplicates"
    );
}

#[test]
fn rule_21_7_pass_passwd_secret_key_base_and_app_key_names() {
    for key in [
        "DB_PASS",
        "SMTP_PASS",
        "redis-pass",
        "mail.pass",
        "mailPass",
        "s3Pass",
        "DB_PASSWD",
        "SECRET_KEY_BASE",
        "secretKeyBase",
        "APP_KEY",
        "appKey",
        "DD_APP_KEY",
        "DB_PASS ",
    ] {
        assert!(is_secret_key(key), "{key}");
    }
    for key in [
        "pass",
        "PASS",
        "bypass",
        "compass",
        "MAILPASS",
        "passes",
        "pass_rate",
        "first pass",
        "password_policy",
        "app_key_id",
        "secret_key_base_path",
        "base",
        "key",
        "app",
    ] {
        assert!(!is_secret_key(key), "{key}");
    }
}

#[test]
fn rule_26_7_one_time_codes_pins_and_passcodes() {
    for key in [
        "otp",
        "OTP",
        "totp",
        "mfa_code",
        "mfaCode",
        "MFA-CODE",
        "pin",
        "PIN",
        "card_pin",
        "pin_code",
        "otpCode",
        "totp_code",
        "passcode",
        "vpn.passcode",
    ] {
        assert!(is_secret_key(key), "{key}");
    }
    for key in [
        "pin_memory",
        "pinned",
        "spin",
        "pins_total",
        "otp_release",
        "mfa_enabled",
        "mfa",
        "code",
        "passcode_length",
        "opinion",
        "topt",
    ] {
        assert!(!is_secret_key(key), "{key}");
    }
}
