//! The fuzz target `protocols` on its committed inputs (`fuzz/corpus/protocols/`, and
//! `fuzz/regressions/protocols/` for inputs that once failed): the same checking body the
//! fuzzer runs (`fuzz/checks/protocols.rs`), here on stable in the normal test run. `make fuzz`
//! runs the fuzzer.

#[path = "../../../fuzz/checks/protocols.rs"]
mod protocols;
#[path = "../../../fuzz/checks/replay.rs"]
mod replay;

#[test]
fn the_protocols_corpus_and_regressions_pass_its_fuzz_check() {
    assert!(replay::replay("protocols", protocols::check) >= 6);
}
