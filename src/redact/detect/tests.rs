use super::*;

/// `text` after detection.
fn redacted(text: &str) -> String {
    apply(text, &scan(text, true)).text
}

/// Asserts that `input` becomes `output`, and that `output` is stable.
#[track_caller]
fn check(input: &str, output: &str) {
    assert_eq!(redacted(input), output, "input: {input:?}");
    assert_eq!(redacted(output), output, "second pass of {output:?}");
}

#[track_caller]
fn unchanged(input: &str) {
    let found = scan(input, true);
    assert!(found.spans.is_empty(), "{input:?}: {:?}", found.spans);
}

#[test]
fn private_key_blocks_go_whole() {
    let block = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpFAKE\nabc==\n-----END RSA PRIVATE KEY-----";
    check(
        &format!("cat > k <<EOF\n{block}\nEOF\nchmod 600 k"),
        "cat > k <<EOF\n<redacted>\nEOF\nchmod 600 k",
    );
    check(
        "x -----BEGIN OPENSSH PRIVATE KEY-----\\nb3Bl\\n-----END OPENSSH PRIVATE KEY----- y",
        "x <redacted> y",
    );
    check(
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQO\n-----END PGP PRIVATE KEY BLOCK-----",
        "<redacted>",
    );
    // Without its end line, to the end of the text.
    check(
        "printf '%s' \"-----BEGIN PRIVATE KEY-----\nMIIEvQFAKE and more",
        "printf '%s' \"<redacted>",
    );
    // Public keys and certificates stay.
    unchanged("-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----");
    unchanged("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----");
}

#[test]
fn url_userinfo_loses_its_password_only() {
    check(
        "psql postgres://app:s3cret@db/prod -c 'select 1'",
        "psql postgres://app:<redacted>@db/prod -c 'select 1'",
    );
    check(
        "redis-cli -u redis://:pw0rd@cache:6379/0",
        "redis-cli -u redis://:<redacted>@cache:6379/0",
    );
    check(
        "https://u:p%40ss@example.com/a?b=c",
        "https://u:<redacted>@example.com/a?b=c",
    );
    unchanged("https://user@example.com/repo.git");
    unchanged("http://localhost:8080/health");
    unchanged("https://example.com/path?page=2");
    unchanged("git@github.com:org/repo.git");
    unchanged("http://host:8080/a@b");
    // An empty password has nothing to hide.
    unchanged("ftp://anonymous:@files.example.com/");
}

#[test]
fn user_flags_lose_the_password() {
    check(
        "curl -u admin:hunter22 https://x",
        "curl -u admin:<redacted> https://x",
    );
    check(
        "curl --user 'deploy:two words' https://x",
        "curl --user 'deploy:<redacted>' https://x",
    );
    check(
        "curl --user=bob:pw123 https://x",
        "curl --user=bob:<redacted> https://x",
    );
    // uid:gid, no colon, a URL, inside a word: not a password.
    unchanged("docker run -u 1000:1000 image");
    unchanged("git push -u origin main");
    unchanged("sort -u names.txt");
    unchanged("redis-cli -u redis://cache:6379");
    unchanged("x-u user:pass");
}

#[test]
fn auth_schemes_lose_the_credential() {
    check(
        "curl -H 'Authorization: Bearer abc.def-ghi_123' x",
        "curl -H 'Authorization: Bearer <redacted>' x",
    );
    check(
        "bearer 0123456789abcdef rejected",
        "bearer <redacted> rejected",
    );
    check("Basic dXNlcjpwYXNz", "Basic <redacted>");
    check("BASIC abcdefghijklmnopqrstu end", "BASIC <redacted> end");
    // Prose.
    unchanged("Bearer tokens are described in RFC 6750.");
    unchanged("Basic usage: run it");
    unchanged("Basic authentication is weak");
    unchanged("the bearer of this letter");
    unchanged("Basic JavaScript course");
    unchanged("Basic concepts");
    unchanged("Bearer $TOKEN");
    unchanged("curl -H \"Authorization: Bearer $TOKEN\" x");
    unchanged("export GITHUB_TOKEN=$(gh auth token)");
}

#[test]
fn jwts_go_whole() {
    let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlLXZhbHVl";
    check(
        &format!("x-session: {jwt}; next"),
        "x-session: <redacted>; next",
    );
    check(&format!("({jwt})"), "(<redacted>)");
    // Unsigned, empty signature.
    check("eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.", "<redacted>");
    unchanged("eyJhbGciOiJIUzI1NiJ9 alone");
    unchanged("xeyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig");
}

#[test]
fn provider_tokens_go_whole_and_to_the_end_of_their_word() {
    check(
        "git remote add o https://ghp_FAKE0123456789abcdefghijklmnopqrstuv@github.com/o/r",
        "git remote add o https://<redacted>@github.com/o/r",
    );
    check("key AKIAFAKE0EXAMPLE0KEY.", "key <redacted>.");
    // Longer than the format says: still all of it.
    check("AKIAFAKE0EXAMPLE0KEYMORE0123 x", "<redacted> x");
    check("AKIAFAKE0EXAMPLE0KEYlower_tail x", "<redacted> x");
    // Not at a word start.
    unchanged("xAKIAFAKE0EXAMPLE0KEY");
    unchanged("task-1234567890abcdef1234567890abcdef1234");
    // Too short.
    unchanged("ghp_short");
    unchanged("AKIA is the prefix");
}

#[test]
fn webhooks_keep_their_host() {
    check(
        "https://hooks.slack.com/services/T00000000/B00000000/FAKEfakeFAKEfakeFAKEfake x",
        "https://hooks.slack.com/services/<redacted> x",
    );
}

#[test]
fn tokens_found_by_their_middle_include_what_comes_before() {
    check(
        "az login -p abc8Q~FAKEfakeFAKEfakeFAKEfakeFAKEfake12 --tenant t",
        "az login -p <redacted> --tenant t",
    );
    check(
        "https://api.telegram.org/bot123456789:AAFAKEfakeFAKEfakeFAKEfakeFAKEfake012/send",
        "https://api.telegram.org/bot<redacted>/send",
    );
    // Too few characters before the distinctive part.
    unchanged("8Q~FAKEfakeFAKEfakeFAKEfakeFAKEfake12");
    unchanged("v:AFAKEfakeFAKEfakeFAKEfakeFAKEfake012");
}

#[test]
fn assignments_lose_their_value() {
    check(
        "export GITHUB_TOKEN=abc123 && gh pr list",
        "export GITHUB_TOKEN=<redacted> && gh pr list",
    );
    check(
        "password: hunter2\nuser: bob",
        "password: <redacted>\nuser: bob",
    );
    check(
        "DB_PASSWORD='two words' npm run m",
        "DB_PASSWORD='<redacted>' npm run m",
    );
    check(r#"api_key = "k 1""#, r#"api_key = "<redacted>""#);
    check(
        r#"{"client_secret":"s1","client_id":"c"}"#,
        r#"{"client_secret":"<redacted>","client_id":"c"}"#,
    );
    check(
        r#"-d "{\"password\":\"pw\",\"u\":\"b\"}""#,
        r#"-d "{\"password\":\"<redacted>\",\"u\":\"b\"}""#,
    );
    check("password := \"go\"", "password := \"<redacted>\"");
    check(":password => 'rb'", ":password => '<redacted>'");
    check("?access_token=abc&x=1", "?access_token=<redacted>&x=1");
    check("Use API key: k123 now", "Use API key: <redacted> now");
    check(
        "my session token: t0k now",
        "my session token: <redacted> now",
    );
    check("PGPASSWORD=pw psql", "PGPASSWORD=<redacted> psql");
    check("$env:API_KEY = \"ps\"", "$env:API_KEY = \"<redacted>\"");
    // Unclosed quote: to the end.
    check("TOKEN='abc def", "TOKEN='<redacted>");
    // Quoted placeholders are replaced too; a quoted marker stays itself.
    check("token: \"<your token>\"", "token: \"<redacted>\"");
}

#[test]
fn assignments_that_are_not_secret_or_not_assignments_stay() {
    unchanged("max_tokens=512");
    unchanged("git log --author=me");
    unchanged("auth_mode=oauth");
    unchanged("monkey=banana");
    unchanged("if token == expected {}");
    unchanged("token::new()");
    unchanged("let key = map.get(&id);");
    unchanged("primary_key: id");
    unchanged("docker run -v $PWD:/src image");
    unchanged("echo ${TOKEN:-default}");
    unchanged("password:");
    unchanged("token: <your token here>");
    unchanged("TOKEN=$(cat /run/secrets/t)");
    unchanged("token = ;");
    unchanged("ls tokenizer.json");
}

#[test]
fn header_values_run_to_the_end_of_the_line_and_keep_the_scheme() {
    check(
        "Authorization: token ghp_x y\nHost: h",
        "Authorization: token <redacted>\nHost: h",
    );
    check(
        "Authorization: Api-Token dt0c01.abc def\r\n",
        "Authorization: Api-Token <redacted>\r\n",
    );
    check("Authorization: opaque", "Authorization: <redacted>");
    check(
        "-H 'Cookie: sid=abc; theme=dark' -H 'X: y'",
        "-H 'Cookie: <redacted>' -H 'X: y'",
    );
    check(
        "Set-Cookie: auth=abc; Path=/; HttpOnly\nnext",
        "Set-Cookie: <redacted>\nnext",
    );
    check(
        r#"{"Authorization": "Bearer abc.def"}"#,
        r#"{"Authorization": "Bearer <redacted>"}"#,
    );
    unchanged("Authorization: Bearer <redacted>");
    unchanged("Cookie: <redacted>");
}

#[test]
fn secret_flags_lose_their_value() {
    check(
        "vercel --token abc123 --prod",
        "vercel --token <redacted> --prod",
    );
    check(
        "gcloud --client-secret \"a b\" -q",
        "gcloud --client-secret \"<redacted>\" -q",
    );
    check("mysql --password  pw db", "mysql --password  <redacted> db");
    check("x --api-key=k1 y", "x --api-key=<redacted> y");
    // A following flag is not a value; a name that is not secret is no flag.
    unchanged("x --no-password --verbose");
    unchanged("x --token-file /run/t");
    unchanged("x --max-tokens 512");
    unchanged("x --auth-mode login");
}

#[test]
fn overlapping_findings_merge_into_one_marker() {
    check(
        "TOKEN=ghp_FAKE0123456789abcdefghijklmnopqrstuv",
        "TOKEN=<redacted>",
    );
    check(
        "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig",
        "Authorization: Bearer <redacted>",
    );
    check(
        "PASSWORD=x-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY----- after",
        "PASSWORD=<redacted> after",
    );
}

#[test]
fn guards_cover_each_construct_from_its_start() {
    let text = "a TOKEN=xyz b";
    let found = scan(text, true);
    assert_eq!(found.spans, vec![8..11]);
    assert_eq!(found.guards, vec![2..11]);
    let applied = apply(text, &found);
    assert_eq!(applied.text, "a TOKEN=<redacted> b");
    assert_eq!(applied.guards, vec![2..18]);
    // A kept value still guards its construct.
    let found = scan("Authorization: Bearer <redacted>", true);
    assert!(found.spans.is_empty());
    assert_eq!(found.guards, vec![0..32]);
    // Guards map across earlier replacements.
    let text = "ghp_FAKE0123456789abcdefghijklmnopqrstuv k=1 password=pw";
    let applied = apply(text, &scan(text, true));
    assert_eq!(applied.text, "<redacted> k=1 password=<redacted>");
    assert_eq!(applied.guards, vec![0..10, 15..34]);
}

#[test]
fn non_ascii_text_is_scanned_like_ascii() {
    check(
        "déployer avec TOKEN=abc123 — ça marche ✓",
        "déployer avec TOKEN=<redacted> — ça marche ✓",
    );
    check(
        "日本語 password: 秘密の値 続き",
        "日本語 password: <redacted> 続き",
    );
    check("token=abc…tail", "token=<redacted>…tail");
}

#[test]
fn every_provider_pattern_compiles_into_the_detector() {
    // Forces the combined pattern; a broken entry panics here first.
    assert!(DETECTORS.kinds.len() > PROVIDERS.len());
    let names: Vec<&str> = provider_names().collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), names.len(), "provider names are unique");
}

#[test]
fn rule_21_7_netrc_passwords_go() {
    check(
        "machine api.example.com login bob password hunter22",
        "machine api.example.com login bob password <redacted>",
    );
    check(
        "machine github.com\n  login bob\n  password ghp_x0\nmachine b login c password 'two words'",
        "machine github.com\n  login bob\n  password <redacted>\nmachine b login c password '<redacted>'",
    );
    // The value runs to the quote (an escape inside it goes too).
    check(
        "printf 'machine h password pw\\n' >> ~/.netrc",
        "printf 'machine h password <redacted>' >> ~/.netrc",
    );
    check(
        "default login anonymous password me@example.com",
        "default login anonymous password <redacted>",
    );
    check("default password pw x", "default password <redacted> x");
    // Prose with the word `password` is no netrc entry.
    unchanged("Reset the password for the staging user");
    unchanged("the password policy is strict");
    unchanged("mypassword is not a keyword");
    unchanged("open the login page password field");
    unchanged("login bob password pw");
}

#[test]
fn rule_21_7_short_secret_flags_of_known_commands_go_in_a_command_line() {
    check(
        "mysql -h db -u root -pS3cret shop -e 'select 1'",
        "mysql -h db -u root -p<redacted> shop -e 'select 1'",
    );
    check(
        "mysqldump -uroot -p'two words' db",
        "mysqldump -uroot -p'<redacted>' db",
    );
    check(
        "mysql -u root -p pw shop",
        "mysql -u root -p <redacted> shop",
    );
    check(
        "sshpass -p hunter2 ssh deploy@host uptime",
        "sshpass -p <redacted> ssh deploy@host uptime",
    );
    check(
        "redis-cli -h c -p 6379 -a pw ping",
        "redis-cli -h c -p 6379 -a <redacted> ping",
    );
    check(
        "docker login -u bob -p pw registry.example.com",
        "docker login -u bob -p <redacted> registry.example.com",
    );
    check(
        "sudo /usr/bin/mysql -ppw && ls -a",
        "sudo /usr/bin/mysql -p<redacted> && ls -a",
    );
    check(
        "bash -c \"mysql -ppw db\"",
        "bash -c \"mysql -p<redacted> db\"",
    );
    // Each command line on its own.
    check(
        "echo \"sshpass -p a x\" ; sshpass -p b y",
        "echo \"sshpass -p <redacted> x\" ; sshpass -p <redacted> y",
    );
    // Variable reads and substitutions are shown.
    check("mysql -p\"$MYSQL_PWD\" db", "mysql -p\"<redacted>\" db");
    unchanged("mysql -p$MYSQL_PWD db");
    unchanged("mysql -p \"$(cat /run/pw)\" db");
}

#[test]
fn rule_21_7_short_flags_elsewhere_stay() {
    unchanged("ssh -p 2222 host uptime");
    unchanged("cargo test -p approval-gate");
    unchanged("mkdir -p a/b && cp -a src dst");
    unchanged("docker run -p 8080:80 nginx");
    unchanged("psql -p 5432 -U app");
    unchanged("redis-cli -p 6379 ping");
    unchanged("mysql -p");
    unchanged("mysql -p -h db");
    unchanged("ls /var/lib/mysql/ -p x");
    unchanged("mysql_config -p x");
    unchanged("mysql; ssh -p 22 h");
    unchanged("git add -p");
    unchanged("install mysqlclient -p 3");
}

#[test]
fn rule_21_7_basic_credentials_go_however_short() {
    check(
        "-H 'X-Upstream: Basic YTpi'",
        "-H 'X-Upstream: Basic <redacted>'",
    );
    check("Basic dXNlcjpwdw==", "Basic <redacted>");
    check("basic Ym9iOnB3", "basic <redacted>");
    unchanged("Basic usage: run it");
    unchanged("Basic concepts");
    unchanged("Basic auth is weak");
    unchanged("Basic YWxs");
}

#[test]
fn rule_21_7_new_secret_names_are_assignments() {
    check("DB_PASS=pw npm start", "DB_PASS=<redacted> npm start");
    check(
        "export SMTP_PASSWD='a b'",
        "export SMTP_PASSWD='<redacted>'",
    );
    check(
        "SECRET_KEY_BASE=0123abcd rails s",
        "SECRET_KEY_BASE=<redacted> rails s",
    );
    check(
        "APP_KEY=base64:AbC= php artisan",
        "APP_KEY=<redacted> php artisan",
    );
    check("--mail-pass x", "--mail-pass <redacted>");
    unchanged("pass=1 fail=0");
    unchanged("first pass: done");
    unchanged("password_policy=strict");
    unchanged("bypass=true");
    unchanged("--base main");
}
