//! Replays a fuzz target's committed inputs through its checking body, in the workspace's
//! normal test run: every file of `fuzz/corpus/<target>/` (the seeds the fuzzer starts from)
//! and of `fuzz/regressions/<target>/` (inputs that once failed, kept so they stay fixed).

use std::path::{Path, PathBuf};

/// Runs `check` on every committed input of `target`; fails naming each input whose check
/// panicked. Returns how many inputs ran.
pub fn replay(target: &str, check: fn(&[u8])) -> usize {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut inputs: Vec<PathBuf> = Vec::new();
    for dir in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(fuzz.join(dir).join(target)) else { continue };
        inputs
            .extend(entries.map(|e| e.expect("a directory entry").path()).filter(|p| p.is_file()));
    }
    inputs.sort();
    assert!(!inputs.is_empty(), "no committed input for fuzz target {target}");
    let failed: Vec<String> = inputs
        .iter()
        .filter(|path| {
            let data = std::fs::read(path).expect("a committed input");
            std::panic::catch_unwind(|| check(&data)).is_err()
        })
        .map(|path| path.display().to_string())
        .collect();
    assert!(failed.is_empty(), "fuzz target {target}: these inputs fail its check: {failed:#?}");
    inputs.len()
}
