//! Secrets stay secret: a distinct secret is planted in every secret-bearing setting (inline, in
//! files, in environment variables), then the real binary is run through everything that prints
//! configuration or errors — `needle config`, `needle serve` refusing settings, and a whole
//! `needle serve` (start, requests good and bad, `/metrics`, the OpenAPI document, shutdown) —
//! and no planted secret may appear in anything it writes. Tokens given by file, by variable and
//! by SHA-256 must let a client in as a token given inline does.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const NEEDLE: &str = env!("CARGO_BIN_EXE_needle");

/// The token whose SHA-256 needle.toml holds (`printf %s planted-digest-token-05 | sha256sum`).
const DIGEST_TOKEN: &str = "planted-digest-token-05";
const DIGEST_TOKEN_SHA256: &str =
    "71d32c2706ca1713c75b4960d917b6c1e37cbd59e5f68a64d2d63e989b315045";

/// Where the secrets are planted, and what they are.
struct Planted {
    dir: tempfile::TempDir,
    /// Every secret string, none of which may be printed.
    secrets: Vec<String>,
    /// The environment variables holding some of them.
    env: Vec<(String, String)>,
}

impl Planted {
    fn config(&self) -> String {
        self.dir.path().join("needle.toml").display().to_string()
    }

    /// `needle ARGS` with the planted variables, and every NEEDLE_* of the test's environment
    /// left out.
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(NEEDLE);
        command.args(args).envs(self.env.iter().cloned()).env("RUST_BACKTRACE", "full");
        for (name, _) in std::env::vars().filter(|(name, _)| name.starts_with("NEEDLE_")) {
            command.env_remove(name);
        }
        command
    }

    /// Fails naming the secret and where it was shown, if `text` shows one.
    fn assert_none_in(&self, what: &str, text: &str) {
        for secret in &self.secrets {
            assert!(!text.contains(secret.as_str()), "{what} shows the secret {secret}:\n{text}");
        }
    }
}

fn secret_file(dir: &Path, name: &str, content: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    path.display().to_string()
}

/// Does this build's configuration have a `[history.object_store]` section (its credentials get
/// secrets planted too)?
fn has_object_store_section() -> bool {
    let out = Command::new(NEEDLE).arg("config").env_remove("NEEDLE_HISTORY").output().unwrap();
    String::from_utf8_lossy(&out.stdout).contains("[history.object_store]")
}

/// A needle.toml with a secret in every secret-bearing setting, some given inline, some by file,
/// some by environment variable.
fn plant() -> Planted {
    let dir = tempfile::tempdir().unwrap();
    let token_file = secret_file(dir.path(), "token", "planted-file-token-03\n");
    let oauth_file = secret_file(dir.path(), "oauth", "planted-oauth-config-14");
    let mut secrets: Vec<String> = [
        "planted-plain-token-01",
        "planted-inline-token-02",
        "planted-file-token-03",
        "planted-env-token-04",
        DIGEST_TOKEN,
        "planted-sasl-username-06",
        "planted-sasl-password-07",
        "planted-ssl-key-password-08",
        "planted-keystore-password-09",
        "planted-truststore-password-10",
        "planted-oauth-client-secret-11",
        "planted-ssl-key-pem-12",
        "planted-ssl-key-13",
        "planted-oauth-config-14",
        "planted-key-passphrase-15",
    ]
    .map(String::from)
    .to_vec();
    let env = vec![
        ("PLANTED_TOKEN_VAR".to_owned(), "planted-env-token-04".to_owned()),
        ("PLANTED_PASSPHRASE_VAR".to_owned(), "planted-key-passphrase-15".to_owned()),
    ];
    let mut toml = format!(
        r#"[server]
tokens = [
  "planted-plain-token-01",
  {{ name = "inline", token = "planted-inline-token-02", scopes = ["admin"] }},
  {{ name = "file", token_file = "{token_file}", scopes = ["query"] }},
  {{ name = "env", token_env = "PLANTED_TOKEN_VAR", scopes = ["read"] }},
  {{ name = "digest", token_sha256 = "{DIGEST_TOKEN_SHA256}", scopes = ["read"] }},
]

[kafka.properties]
"security.protocol" = "SASL_PLAINTEXT"
"sasl.mechanism" = "PLAIN"
"sasl.username" = "planted-sasl-username-06"
"sasl.password" = "planted-sasl-password-07"
"ssl.key.password" = "planted-ssl-key-password-08"
"ssl.keystore.password" = "planted-keystore-password-09"
"ssl.truststore.password" = "planted-truststore-password-10"
"sasl.oauthbearer.client.secret" = "planted-oauth-client-secret-11"
"ssl.key.pem" = "planted-ssl-key-pem-12"
"ssl_key" = "planted-ssl-key-13"
"sasl.oauthbearer.config_file" = "{oauth_file}"
"sasl.oauthbearer.assertion.private.key.passphrase_env" = "PLANTED_PASSPHRASE_VAR"
"debug" = "all"
"#
    );
    if has_object_store_section() {
        toml.push_str(
            "\n[history.object_store]\naccess_key_id = \"planted-access-key-id-16\"\n\
             secret_access_key = \"planted-secret-access-key-17\"\n\
             session_token = \"planted-session-token-18\"\n\
             [history.object_store.options]\n\
             azure_storage_account_key = \"planted-azure-account-key-23\"\n",
        );
        secrets.extend(
            [
                "planted-access-key-id-16",
                "planted-secret-access-key-17",
                "planted-session-token-18",
                "planted-azure-account-key-23",
            ]
            .map(String::from),
        );
    }
    std::fs::write(dir.path().join("needle.toml"), toml).unwrap();
    Planted { dir, secrets, env }
}

fn text_of(output: &Output) -> String {
    format!(
        "--- stdout ---\n{}\n--- stderr ---\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn needle_config_prints_no_secret_and_says_where_each_comes_from() {
    let planted = plant();
    let out = planted.command(&["config", "--config", &planted.config()]).output().unwrap();
    let text = text_of(&out);
    assert!(out.status.success(), "{text}");
    planted.assert_none_in("needle config", &text);
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(printed.contains("\"<redacted>\""), "{printed}");
    assert!(printed.contains("token_file = ") && printed.contains("token_env = "), "{printed}");
    assert!(printed.contains(DIGEST_TOKEN_SHA256), "a digest is no secret: {printed}");
    assert!(printed.contains(&format!("given in {}", planted.config())), "{printed}");
    // still a needle.toml: with the redacted ones given again, it loads
    let mut again = printed.into_owned();
    for (i, line) in again.clone().lines().enumerate() {
        if line.contains("\"<redacted>\"") && !line.starts_with('#') {
            let given = line.replacen("<redacted>", &format!("given-again-{i}"), 1);
            again = again.replacen(line, &given, 1);
        }
    }
    let reloaded = planted.dir.path().join("again.toml");
    std::fs::write(&reloaded, again).unwrap();
    let out =
        planted.command(&["config", "--config", reloaded.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{}", text_of(&out));
}

#[test]
fn refused_settings_are_named_without_their_secrets() {
    let mut planted = plant();
    planted
        .secrets
        .extend(["planted-url-password-19", "planted-unparsed-token-20"].map(String::from));
    let config = planted.config();
    let serve = |extra: &[&str], env: &[(&str, &str)]| {
        let mut command = planted.command(&["serve", "--config", &config]);
        command.args(["--listen", "127.0.0.1:0"]).args(extra);
        command.envs(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        command.output().unwrap()
    };
    let cases: Vec<(&str, Output)> = vec![
        ("a value of the wrong type", serve(&[], &[("NEEDLE_RUNTIME__WORKERS", "many")])),
        ("HTTPS half configured", serve(&[], &[("NEEDLE_SERVER__TLS_CERT", "/no/cert.pem")])),
        (
            "a URL with a password",
            serve(&["--advertised-url", "https://u:planted-url-password-19@h:1/?x"], &[]),
        ),
        (
            "tokens that do not parse",
            serve(&[], &[("NEEDLE_SERVER__TOKENS", "[\"planted-unparsed-token-20\"")]),
        ),
        ("Kafka refusing a property", serve(&["--source", "kafka://127.0.0.1:9/records"], &[])),
    ];
    for (what, out) in &cases {
        let text = text_of(out);
        assert_eq!(out.status.code(), Some(1), "{what}: {text}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("error:"), "{what}: {text}");
        planted.assert_none_in(what, &text);
    }
    let kafka = String::from_utf8_lossy(&cases[4].1.stderr).into_owned();
    assert!(
        kafka.contains("Kafka refused the property") && kafka.contains("<redacted>"),
        "{kafka}"
    );

    // a secret file that is not there is named, with its setting
    std::fs::remove_file(planted.dir.path().join("token")).unwrap();
    let out = serve(&[], &[]);
    let error = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{error}");
    assert!(error.contains("server.tokens[2].token_file") && error.contains("token"), "{error}");
}

/// `needle serve` started on a free port with stdout and stderr in files: its URL and the files.
struct Server {
    child: Child,
    url: String,
    stdout: std::path::PathBuf,
    stderr: std::path::PathBuf,
}

impl Server {
    fn start(planted: &Planted) -> Self {
        let (stdout, stderr) =
            (planted.dir.path().join("serve.out"), planted.dir.path().join("serve.err"));
        let child = planted
            .command(&["serve", "--config", &planted.config(), "--listen", "127.0.0.1:0"])
            .args(["--workers", "1", "--source", "gen:small?rate=200"])
            .env("RUST_LOG", "trace")
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let url = loop {
            let out = std::fs::read_to_string(&stdout).unwrap_or_default();
            if let Some(line) = out.lines().find(|l| l.starts_with("needle listening on ")) {
                break line["needle listening on ".len()..].to_owned();
            }
            let err = std::fs::read_to_string(&stderr).unwrap_or_default();
            assert!(Instant::now() < deadline, "needle serve did not start: {err}");
            std::thread::sleep(Duration::from_millis(50));
        };
        Self { child, url, stdout, stderr }
    }

    fn get(&self, path: &str, token: Option<&str>) -> (u16, String) {
        let mut request = reqwest::blocking::Client::new().get(format!("{}{path}", self.url));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().unwrap();
        (response.status().as_u16(), response.text().unwrap())
    }

    fn post(&self, path: &str, token: &str, body: &str) -> (u16, String) {
        let url = format!("{}{path}", self.url);
        let request = reqwest::blocking::Client::new().post(url).bearer_auth(token);
        let response = request.body(body.to_owned()).send().unwrap();
        (response.status().as_u16(), response.text().unwrap())
    }

    /// SIGTERM, the exit, and everything it wrote.
    fn stop(mut self) -> String {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "needle serve did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
        let read = |path: &Path| std::fs::read_to_string(path).unwrap_or_default();
        format!("--- stdout ---\n{}\n--- stderr ---\n{}", read(&self.stdout), read(&self.stderr))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_served_session_shows_no_secret_and_every_way_of_giving_a_token_lets_its_holder_in() {
    let planted = plant();
    let server = Server::start(&planted);
    let mut answers = String::new();
    let mut keep = |what: &str, (status, body): (u16, String)| {
        answers.push_str(&format!("{what}: {status} {body}\n"));
        (status, body)
    };

    // every way of giving a token lets its holder in
    for (way, token) in [
        ("plain", "planted-plain-token-01"),
        ("inline", "planted-inline-token-02"),
        ("file", "planted-file-token-03"),
        ("variable", "planted-env-token-04"),
        ("digest", DIGEST_TOKEN),
    ] {
        let (status, body) = keep(way, server.get("/api/v1/queries", Some(token)));
        assert_eq!(status, 200, "the token given by {way}: {body}");
    }
    // and a near miss, the digest itself, or none, do not
    for (way, token) in [
        ("a near miss", Some("planted-file-token-0")),
        ("the digest", Some(DIGEST_TOKEN_SHA256)),
        ("no token", None),
    ] {
        let (status, body) = keep(way, server.get("/api/v1/queries", token));
        assert_eq!(status, 401, "{way}: {body}");
    }
    // scopes hold whichever way the token came
    let query = "SELECT COUNT(*) AS n FROM STREAM(300, TIME)";
    let (status, body) = keep("read token", server.post("/api/v1/query", DIGEST_TOKEN, query));
    assert_eq!(status, 403, "{body}");
    let (status, body) =
        keep("query token", server.post("/api/v1/query", "planted-file-token-03", query));
    assert_eq!(status, 200, "{body}");
    let (status, body) =
        keep("bad query", server.post("/api/v1/query", "planted-inline-token-02", "SELEKT 1"));
    assert_eq!(status, 400, "{body}");
    let (status, _) = keep("metrics", server.get("/metrics", Some("planted-env-token-04")));
    assert_eq!(status, 200);
    let (status, _) =
        keep("openapi", server.get("/api/v1/openapi.json", Some("planted-plain-token-01")));
    assert_eq!(status, 200);
    let (status, _) = keep("health", server.get("/healthz", None));
    assert_eq!(status, 200);

    let printed = server.stop();
    planted.assert_none_in("needle serve's output", &printed);
    planted.assert_none_in("the HTTP answers", &answers);
}

#[test]
fn kafka_credentials_with_librdkafka_debugging_on_show_in_no_error() {
    let dir = tempfile::tempdir().unwrap();
    let password = secret_file(dir.path(), "kafka-password", "planted-kafka-password-21\n");
    let config = dir.path().join("needle.toml");
    std::fs::write(
        &config,
        format!(
            "[kafka.properties]\n\"security.protocol\" = \"SASL_PLAINTEXT\"\n\
             \"sasl.mechanism\" = \"PLAIN\"\n\"sasl.username\" = \"planted-kafka-user-22\"\n\
             \"sasl.password_file\" = \"{password}\"\n\"debug\" = \"all\"\n"
        ),
    )
    .unwrap();
    let planted = Planted {
        dir,
        secrets: ["planted-kafka-password-21", "planted-kafka-user-22"].map(String::from).to_vec(),
        env: Vec::new(),
    };
    // librdkafka takes every property; nothing listens on the port, so start-up gives up
    let out = planted
        .command(&["serve", "--config", config.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .args(["--source", "kafka://127.0.0.1:9/records"])
        .output()
        .unwrap();
    let text = text_of(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("cannot reach Kafka"), "{text}");
    planted.assert_none_in("an unreachable Kafka", &text);
    let printed = planted.command(&["config", "--config", config.to_str().unwrap()]).output();
    let printed = text_of(&printed.unwrap());
    planted.assert_none_in("needle config", &printed);
    assert!(printed.contains(&format!("\"sasl.password_file\" = \"{password}\"")), "{printed}");
}
