//! Target `config`: any bytes as a configuration file and `NEEDLE_*` environment variables,
//! loaded by `needle_runtime::NeedleConfig::load` (defaults ← file ← environment). Loading must
//! answer (a configuration or an error that says why), never panic; and a configuration it
//! accepts must print (`to_toml`, what `needle config` shows) as a file that loads back to the
//! same configuration.
//!
//! Input: the file's bytes, then, after a `0xff` byte (never in UTF-8 text), one variable per
//! line as `NAME=value` (`NEEDLE_` put before a name that lacks it).
//!
//! One body serves the fuzzer (`fuzz/fuzz_targets/config.rs`) and the corpus replay test
//! (`crates/runtime/tests/fuzz_corpus.rs`), which both include this file by path.

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
    let Ok(config) = load(file, env) else { return };
    let printed = config.to_toml();
    assert!(!printed.starts_with("# cannot print"), "{printed}");
    let again = load(printed.as_bytes(), Vec::new())
        .unwrap_or_else(|e| panic!("the printed configuration is refused: {e}\n{printed}"));
    assert_eq!(again.to_toml(), printed, "loaded back to the same configuration");
}
