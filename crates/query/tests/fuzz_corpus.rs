//! The fuzz targets `parse` and `bullet_json` on their committed inputs (`fuzz/corpus/`, and
//! `fuzz/regressions/` for inputs that once failed): the same checking bodies the fuzzer runs
//! (`fuzz/checks/`), here on stable in the normal test run. `make fuzz` runs the fuzzer.

#[path = "../../../fuzz/checks/bullet_json.rs"]
mod bullet_json;
#[path = "../../../fuzz/checks/parse.rs"]
mod parse;
#[path = "../../../fuzz/checks/replay.rs"]
mod replay;

#[test]
fn the_parse_corpus_and_regressions_pass_its_fuzz_check() {
    replay::replay("parse", parse::check);
}

#[test]
fn the_bullet_json_corpus_and_regressions_pass_its_fuzz_check() {
    replay::replay("bullet_json", bullet_json::check);
}
