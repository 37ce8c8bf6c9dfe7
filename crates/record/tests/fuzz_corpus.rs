//! The fuzz target `decode` on its committed inputs (`fuzz/corpus/decode/`, and
//! `fuzz/regressions/decode/` for inputs that once failed): the same checking body the fuzzer
//! runs (`fuzz/checks/decode.rs`), here on stable in the normal test run. `make fuzz` runs the
//! fuzzer.

#[path = "../../../fuzz/checks/decode.rs"]
mod decode;
#[path = "../../../fuzz/checks/replay.rs"]
mod replay;

#[test]
fn the_decode_corpus_and_regressions_pass_its_fuzz_check() {
    replay::replay("decode", decode::check);
}
