//! The fuzz targets `framing` and `config` on their committed inputs (`fuzz/corpus/<target>/`,
//! and `fuzz/regressions/<target>/` for inputs that once failed): the same checking bodies the
//! fuzzer runs (`fuzz/checks/`), here on stable in the normal test run. `make fuzz` runs the
//! fuzzer.

#[path = "../../../fuzz/checks/config.rs"]
mod config;
#[path = "../../../fuzz/checks/framing.rs"]
mod framing;
#[path = "../../../fuzz/checks/replay.rs"]
mod replay;

#[test]
fn the_framing_corpus_and_regressions_pass_its_fuzz_check() {
    assert!(replay::replay("framing", framing::check) >= 3);
}

#[test]
fn the_config_corpus_and_regressions_pass_its_fuzz_check() {
    assert!(replay::replay("config", config::check) >= 3);
}
