//! Target `framing`: any bytes as a stream a source reads (a TCP socket, a file, a pipe), cut
//! into reads of sizes the input chooses and framed into lines by
//! `needle_runtime::framing::LineFramer` with a `max_line_bytes` the input chooses. The lines
//! handed on must be exactly the stream's lines — split at every `\n`, a `\r` before it left
//! out, blank lines skipped — of at most `max_line_bytes` bytes, in order, however the reads
//! cut them; each longer line counted once as oversized, none of its bytes handed on. The whole
//! stream as one batch (`Batch::new`, as a file read at once) gives every non-blank line.
//!
//! Input: byte 0 (mod 40) is `max_line_bytes`, byte 1 seeds the read sizes (0 to 16 bytes),
//! the rest is the stream.
//!
//! One body serves the fuzzer (`fuzz/fuzz_targets/framing.rs`) and the corpus replay test
//! (`crates/runtime/tests/fuzz_corpus.rs`), which both include this file by path.

use needle_runtime::framing::{Batch, LineFramer};

pub fn check(data: &[u8]) {
    let [max, seed, stream @ ..] = data else { return };
    let max = usize::from(*max % 40);
    let mut framer = LineFramer::new(max);
    let mut framed: Vec<Vec<u8>> = Vec::new();
    let mut keep = |batch: Option<Batch>| {
        if let Some(batch) = batch {
            framed.extend(batch.lines().map(<[u8]>::to_vec));
        }
    };
    // a small linear congruential generator: the reads' sizes follow from byte 1
    let mut state = u32::from(*seed);
    let mut rest = stream;
    while !rest.is_empty() {
        state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let size = ((state >> 16) % 17) as usize;
        let (read, after) = rest.split_at(size.min(rest.len()));
        rest = after;
        keep(framer.push(read));
    }
    keep(framer.finish());

    let (mut want, mut every, mut oversized) = (Vec::new(), Vec::new(), 0u64);
    let mut lines: Vec<&[u8]> = stream.split(|&b| b == b'\n').collect();
    if lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop(); // the stream ended with its last line's newline
    }
    for line in lines {
        let text = line.strip_suffix(b"\r").unwrap_or(line);
        let blank = text.iter().all(u8::is_ascii_whitespace);
        if !blank {
            every.push(text.to_vec());
        }
        if line.len() > max {
            oversized += 1;
        } else if !blank {
            want.push(text.to_vec());
        }
    }
    assert_eq!(framed, want, "the lines of at most {max} bytes, in order");
    assert_eq!(framer.oversized_lines(), oversized, "each longer line counted once");
    let whole: Vec<Vec<u8>> = Batch::new(stream.to_vec()).lines().map(<[u8]>::to_vec).collect();
    assert_eq!(whole, every, "a batch's lines are the stream's non-blank lines");
}
