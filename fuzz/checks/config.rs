//! Target `config`: any bytes as a configuration file and `NEEDLE_*` environment variables,
//! loaded by `needle_runtime::NeedleConfig::load` (defaults ← file ← environment). Loading must
//! answer (a configuration or an error that says why), never panic; and a configuration it
//! accepts must print (`to_toml`, what `needle config` shows) with no secret in it, as a file
//! that, given the redacted secrets again, loads back to a configuration printed the same.
//!
//! Input: the file's bytes, then, after a `0xff` byte (never in UTF-8 text), one variable per
//! line as `NAME=value` (`NEEDLE_` put before a name that lacks it).
//!
//! One body serves the fuzzer (`fuzz/fuzz_targets/config.rs`) and the corpus replay test
//! (`crates/runtime/tests/fuzz_corpus.rs`), which both include this file by path.

use needle_runtime::config::TokenConfig;
use needle_runtime::secrets::{self, Secret, REDACTED};
use needle_runtime::NeedleConfig;
use std::io::Write;

fn load(file: &[u8], env: Vec<(String, String)>) -> Result<NeedleConfig, String> {
    let mut f = tempfile::NamedTempFile::new().expect("a temporary file");
    f.write_all(file).expect("the file written");
    NeedleConfig::load(Some(f.path()), env).map_err(|e| e.to_string())
}

pub fn check(data: &[u8]) {
    let (file, env) = match data.iter().position(|&b| b == 0xff) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let env: Vec<(String, String)> = String::from_utf8_lossy(env)
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(name, value)| {
            let name = match name.starts_with("NEEDLE_") {
                true => name.to_owned(),
                false => format!("NEEDLE_{name}"),
            };
            (name, value.to_owned())
        })
        .collect();
    let Ok(config) = load(file, env.clone()) else { return };
    let printed = config.to_toml();
    assert!(!printed.starts_with("# cannot print"), "{printed}");
    let body = |printed: &str| -> String {
        printed.lines().filter(|l| !l.starts_with('#')).collect::<Vec<_>>().join("\n")
    };
    let printed = body(&printed);

    // No secret printed: one shows only where the same configuration without its secrets shows
    // the same text.
    let mut open = config.clone();
    let mut secret_values = Vec::new();
    for token in &mut open.server.tokens {
        let secret = match token {
            TokenConfig::Plain(secret) => secret,
            TokenConfig::Scoped(scoped) => match &mut scoped.token {
                Some(secret) => secret,
                None => continue,
            },
        };
        secret_values.push(secret.expose().to_owned());
        *secret = Secret::default();
    }
    for (key, value) in &mut open.kafka.properties {
        if secrets::is_secret_kafka_property(key) {
            secret_values.push(std::mem::take(value));
        }
    }
    let open = body(&open.to_toml());
    for value in secret_values.iter().filter(|v| !v.is_empty() && !REDACTED.contains(v.as_str())) {
        assert!(
            !printed.contains(value.as_str()) || open.contains(value.as_str()),
            "the secret {value:?} is printed:\n{printed}"
        );
    }

    // Given the redacted ones again, the printed configuration loads back and prints the same
    // (unless a setting that is not secret holds the marker itself: then which is which is
    // unknown).
    let marker = format!("\"{REDACTED}\"");
    let redacted = config
        .secret_sources
        .origins
        .iter()
        .filter(|(_, origin)| matches!(origin, secrets::SecretOrigin::Inline { .. }));
    if printed.matches(&marker).count() > redacted.count() {
        return;
    }
    let mut given = printed.clone();
    let mut n = 0;
    while let Some(at) = given.find(&marker) {
        given.replace_range(at..at + marker.len(), &format!("\"given-again-{n}\""));
        n += 1;
    }
    let again = load(given.as_bytes(), env)
        .unwrap_or_else(|e| panic!("the printed configuration is refused: {e}\n{given}"));
    assert_eq!(body(&again.to_toml()), printed, "loaded back to the same configuration");
}
