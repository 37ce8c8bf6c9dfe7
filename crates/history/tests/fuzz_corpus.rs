//! The fuzz target `history_reader` on its committed inputs (`fuzz/corpus/history_reader/`,
//! and `fuzz/regressions/history_reader/` for inputs that once failed): the same checking body
//! the fuzzer runs (`fuzz/checks/history_reader.rs`: a part with its bytes edited, read back
//! through the store), here on stable in the normal test run. `make fuzz` runs the fuzzer.

#[path = "../../../fuzz/checks/history_reader.rs"]
mod history_reader;
#[path = "../../../fuzz/checks/replay.rs"]
mod replay;

#[test]
fn the_history_reader_corpus_and_regressions_pass_its_fuzz_check() {
    replay::replay("history_reader", history_reader::check);
}
