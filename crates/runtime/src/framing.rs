//! Cutting a byte stream into [`Batch`]es of whole NDJSON lines.
//!
//! Sources read whatever the OS gives them (64 KiB at a time, or a few bytes from a socket); the
//! [`LineFramer`] keeps the unfinished tail and hands on only complete lines, so a worker never
//! sees half a record. A line longer than the configured maximum is dropped whole and counted,
//! rather than growing memory without bound.
//!
//! A batch may instead hold [`Record`]s built in code (a program embedding needle pushes typed
//! events, no JSON on the way): the workers run those through the queries as they are. Such a
//! batch can carry a [`Recycler`] that takes its emptied vector of records back to the producer
//! when the workers are done with it, so a steady producer allocates nothing per event.
//!
//! A batch may instead read its lines where they already are, in buffers its source owns
//! ([`Chunks`]: Kafka's messages, read in place rather than copied into one vector); the buffers
//! are released when the batch drops.
//!
//! A batch may carry a [`Receipt`]: the source's token for "these bytes". The worker that reads
//! the batch keeps the receipt until the partials it made from the batch have been handed on
//! (its next flush), then drops it; a source that must know when its input is done with (Kafka,
//! to commit offsets only for records whose results went out) acts when the receipt drops.

use crate::columns::ColumnBatch;
use crossbeam_channel::Sender;
use needle_history::OffsetRanges;
use needle_record::Record;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Where a typed batch's records go back to when the workers are done with them (see the
/// module doc): the producer refills them in place.
pub type Recycler = Sender<Vec<Record>>;

/// A source's token for a batch, dropped once the batch's effects have been handed on.
pub struct Receipt(#[allow(dead_code)] Box<dyn Send + Sync>);

impl Receipt {
    /// Wraps a token whose `Drop` tells the source the batch is done with.
    pub fn new(token: impl Send + Sync + 'static) -> Self {
        Self(Box::new(token))
    }
}

impl std::fmt::Debug for Receipt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Receipt")
    }
}

/// Lines a batch reads in place, in buffers its source owns (see the module doc). Each chunk
/// holds whole lines; its last line may lack its `\n`. Dropping it releases the buffers.
pub trait Chunks: Send + 'static {
    /// How many chunks there are.
    fn count(&self) -> usize;
    /// Chunk `index` (`index < count()`).
    fn chunk(&self, index: usize) -> &[u8];
}

/// A batch's borrowed chunks, and their bytes in all.
struct InPlace {
    chunks: Box<dyn Chunks>,
    bytes: usize,
}

impl std::fmt::Debug for InPlace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InPlace")
            .field("chunks", &self.chunks.count())
            .field("bytes", &self.bytes)
            .finish()
    }
}

/// A batch's place among those the workers hold: dropped with the batch, when the worker is
/// done with it (history's seam waits until the workers hold none).
#[derive(Debug)]
pub(crate) struct InWorkers(Arc<AtomicI64>);

impl InWorkers {
    /// Counts one more batch in `held` until the value returned drops.
    pub(crate) fn enter(held: &Arc<AtomicI64>) -> Self {
        held.fetch_add(1, Ordering::SeqCst);
        Self(held.clone())
    }
}

impl Drop for InWorkers {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Whole lines of input, as read, for one worker to decode; or records built in code.
#[derive(Debug)]
pub struct Batch {
    data: Vec<u8>,
    /// Lines read in place, after those of `data` (boxed: a batch travels by value through
    /// `Result`s, and most have none).
    in_place: Option<Box<InPlace>>,
    /// Events pushed from code, run through the queries as they are (boxed: most batches
    /// have none, and a batch travels by value).
    pushed: Option<Box<Pushed>>,
    /// When the bytes were read: the start of the read→matched latency.
    pub read_at: Instant,
    receipt: Option<Receipt>,
    /// With history on: counts the batch as held by the workers until it drops.
    held: Option<InWorkers>,
    /// The source offsets the batch's records came from, for history (boxed: most sources
    /// have none).
    offsets: Option<Box<OffsetRanges>>,
    /// Its records are in history already (a source reading again what a process before it
    /// kept): the workers read them, history does not keep them twice.
    kept_already: bool,
}

impl Batch {
    pub fn new(data: Vec<u8>) -> Self {
        Self {
            data,
            in_place: None,
            pushed: None,
            read_at: Instant::now(),
            receipt: None,
            held: None,
            offsets: None,
            kept_already: false,
        }
    }

    /// Says which source offsets the batch's records came from (history keeps them with the
    /// records: see `needle_history::offsets`).
    pub fn with_offsets(mut self, offsets: OffsetRanges) -> Self {
        self.offsets = (!offsets.is_empty()).then(|| Box::new(offsets));
        self
    }

    /// Takes the source offsets the batch's records came from (none when the source has no
    /// offsets).
    pub fn take_offsets(&mut self) -> OffsetRanges {
        self.offsets.take().map(|o| *o).unwrap_or_default()
    }

    /// Marks the batch's records as kept in history already: the workers read them, the
    /// history tap passes them by.
    pub fn kept_already(mut self) -> Self {
        self.kept_already = true;
        self
    }

    pub fn is_kept_already(&self) -> bool {
        self.kept_already
    }

    /// A batch whose receipt the worker drops once it has handed on what it made of it.
    pub fn with_receipt(data: Vec<u8>, receipt: Receipt) -> Self {
        Self { receipt: Some(receipt), ..Self::new(data) }
    }

    /// Adds lines read in place from `chunks` (see [`Chunks`]), after the batch's own.
    pub fn with_chunks(mut self, chunks: Box<dyn Chunks>) -> Self {
        let bytes = (0..chunks.count()).map(|i| chunks.chunk(i).len()).sum();
        self.in_place = Some(Box::new(InPlace { chunks, bytes }));
        self
    }

    /// A batch of records built in code; `recycler`, when given, gets the vector back (records
    /// and all, to be overwritten) once the workers are done with it.
    pub fn of_records(records: Vec<Record>, recycler: Option<Recycler>) -> Self {
        let pushed = Pushed { records, recycler, columns: Vec::new(), bytes: 0 };
        Self { pushed: Some(Box::new(pushed)), ..Self::new(Vec::new()) }
    }

    /// The records pushed from code (empty for a batch of lines).
    pub fn records(&self) -> &[Record] {
        self.pushed.as_deref().map_or(&[], |pushed| &pushed.records)
    }

    /// A batch of typed events pushed from code as columns.
    pub fn of_columns(columns: ColumnBatch) -> Self {
        Self::of_events(vec![columns], Vec::new())
    }

    /// A batch of events gathered as several batches of columns (each of its own fields: a
    /// metrics protocol's points of each shape), and records, read in that order.
    pub fn of_events(columns: Vec<ColumnBatch>, records: Vec<Record>) -> Self {
        let pushed = Pushed { records, recycler: None, columns, bytes: 0 };
        Self { pushed: Some(Box::new(pushed)), ..Self::new(Vec::new()) }
    }

    /// Says how many bytes the events built in code were read from (a protocol's lines), for
    /// [`Batch::byte_len`] and the bytes-read metrics.
    pub fn with_source_bytes(mut self, bytes: usize) -> Self {
        if let Some(pushed) = self.pushed.as_deref_mut() {
            pushed.bytes = bytes;
        }
        self
    }

    /// The events gathered as columns (none for a batch of lines or of records alone).
    pub fn columns(&self) -> &[ColumnBatch] {
        self.pushed.as_deref().map_or(&[], |pushed| &pushed.columns)
    }

    /// The batch as NDJSON: its bytes (those read in place too, each chunk ending in a
    /// newline), or its columns' rows and its records written as JSON lines.
    pub fn to_ndjson(&self) -> Vec<u8> {
        let records = self.records();
        if !self.columns().is_empty() {
            let rows: usize = self.columns().iter().map(ColumnBatch::rows).sum();
            let mut out = Vec::with_capacity((rows + records.len()) * 64);
            self.columns().iter().for_each(|columns| columns.write_ndjson(&mut out));
            for record in records {
                record.write_json(&mut out);
                out.push(b'\n');
            }
            return out;
        }
        if records.is_empty() {
            let Some(in_place) = &self.in_place else { return self.data.clone() };
            let mut out = Vec::with_capacity(self.data.len() + in_place.bytes + 1024);
            out.extend_from_slice(&self.data);
            for i in 0..in_place.chunks.count() {
                let chunk = in_place.chunks.chunk(i);
                if !out.is_empty() && !out.ends_with(b"\n") {
                    out.push(b'\n');
                }
                out.extend_from_slice(chunk);
            }
            if !out.is_empty() && !out.ends_with(b"\n") {
                out.push(b'\n');
            }
            return out;
        }
        let mut out = Vec::with_capacity(records.len() * 64);
        for record in records {
            record.write_json(&mut out);
            out.push(b'\n');
        }
        out
    }

    /// Takes the batch's receipt (the worker holds it until its next flush).
    pub fn take_receipt(&mut self) -> Option<Receipt> {
        self.receipt.take()
    }

    /// Gives the batch a receipt (replacing any).
    pub fn set_receipt(&mut self, receipt: Receipt) {
        self.receipt = Some(receipt);
    }

    /// Counts the batch as held by the workers while it lives.
    pub(crate) fn hold(&mut self, held: InWorkers) {
        self.held = Some(held);
    }

    /// The raw bytes held in the batch's own vector: zero or more lines, each ending in `\n`
    /// (except possibly the last line of a finished input). Lines read in place are not among
    /// them ([`Batch::byte_len`] counts them, [`Batch::lines`] reads them).
    pub fn bytes(&self) -> &[u8] {
        &self.data
    }

    /// The bytes of the batch's lines, those read in place included (for events built in code
    /// from bytes read, those bytes: [`Batch::with_source_bytes`]).
    pub fn byte_len(&self) -> usize {
        self.data.len()
            + self.in_place.as_ref().map_or(0, |p| p.bytes)
            + self.pushed.as_ref().map_or(0, |p| p.bytes)
    }

    /// The non-empty lines, without their `\n` or `\r\n`: those of the batch's vector, then
    /// those read in place, chunk by chunk.
    pub fn lines(&self) -> impl Iterator<Item = &[u8]> {
        let chunks = self.in_place.as_ref().map(|p| p.chunks.as_ref());
        let count = chunks.map_or(0, |c| c.count());
        lines_of(&self.data)
            .chain((0..count).flat_map(move |i| lines_of(chunks.map_or(&[][..], |c| c.chunk(i)))))
    }
}

/// The non-empty lines of `data`, without their `\n` or `\r\n`. Newlines are found with
/// `memchr` (SIMD, many bytes a step): a byte-at-a-time split cost the workers ~10% of their
/// time on 100-byte events.
pub(crate) fn lines_of(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut ends = memchr::memchr_iter(b'\n', data);
    let mut start = 0;
    std::iter::from_fn(move || {
        if start > data.len() {
            return None;
        }
        let end = ends.next().unwrap_or(data.len());
        let line = &data[start..end];
        start = end + 1;
        Some(line)
    })
    .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
    .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
}

/// Events built in code: batches of columns, and records (with where their vector goes back
/// to).
#[derive(Debug)]
struct Pushed {
    columns: Vec<ColumnBatch>,
    records: Vec<Record>,
    recycler: Option<Recycler>,
    /// The bytes the events were read from (0 for events pushed from code).
    bytes: usize,
}

impl Drop for Pushed {
    fn drop(&mut self) {
        if let Some(recycler) = &self.recycler {
            // a producer that is gone, or has enough spare vectors, lets this one go
            let _ = recycler.try_send(std::mem::take(&mut self.records));
        }
    }
}

/// Keeps the unfinished tail of a stream and hands on complete lines.
#[derive(Debug)]
pub struct LineFramer {
    pending: Vec<u8>,
    max_line_bytes: usize,
    /// Inside a line that was too long: drop bytes until its end.
    skipping: bool,
    oversized_lines: u64,
}

impl LineFramer {
    /// `max_line_bytes`: longer lines are dropped and counted in [`Self::oversized_lines`].
    pub fn new(max_line_bytes: usize) -> Self {
        Self { pending: Vec::new(), max_line_bytes, skipping: false, oversized_lines: 0 }
    }

    /// Lines dropped so far because they were longer than the maximum.
    pub fn oversized_lines(&self) -> u64 {
        self.oversized_lines
    }

    /// Adds bytes read from the stream; returns a batch of the lines they completed, if any.
    pub fn push(&mut self, mut chunk: &[u8]) -> Option<Batch> {
        if self.skipping {
            match memchr::memchr(b'\n', chunk) {
                Some(end) => {
                    self.skipping = false;
                    chunk = &chunk[end + 1..];
                }
                None => return None,
            }
        }
        // The batch is allocated once at its size, the unfinished tail copied out of it: not
        // the tail grown by a reallocation to take the chunk (a large reallocation per read).
        let batch = match memchr::memrchr(b'\n', chunk) {
            Some(last) => {
                let mut data = Vec::with_capacity(self.pending.len() + last + 1);
                data.extend_from_slice(&self.pending);
                data.extend_from_slice(&chunk[..=last]);
                self.pending.clear();
                self.pending.extend_from_slice(&chunk[last + 1..]);
                Some(data)
            }
            None => {
                self.pending.extend_from_slice(chunk);
                None
            }
        };
        let batch = batch.map(|data| self.drop_oversized(data));
        if self.pending.len() > self.max_line_bytes {
            self.pending.clear();
            self.skipping = true;
            self.oversized_lines += 1;
        }
        batch.filter(|data| !data.is_empty()).map(Batch::new)
    }

    /// [`LineFramer::push`] without a batch of their own for the lines: the complete lines are
    /// handed to `lines` where they lie — in `chunk` itself, but for the line the tail held,
    /// finished in the framer's own vector — in at most two calls, each of whole lines ending
    /// in `\n`. For a reader that only parses the lines (a metrics protocol's): the read is not
    /// copied into a new vector (a fresh allocation, page faults and a copy per read were a
    /// tenth of a line protocol source's time). The same lines as `push`'s, too long ones
    /// dropped and counted alike.
    pub fn push_lines(&mut self, chunk: &[u8], mut lines: impl FnMut(&[u8])) {
        if self.skipping || self.pending.len() + chunk.len() > self.max_line_bytes {
            // a line here may be too long: `push` drops it
            if let Some(batch) = self.push(chunk) {
                lines(batch.bytes());
            }
            return;
        }
        let Some(last) = memchr::memrchr(b'\n', chunk) else {
            self.pending.extend_from_slice(chunk);
            return;
        };
        let mut complete = &chunk[..=last];
        if !self.pending.is_empty() {
            let first = memchr::memchr(b'\n', complete).unwrap_or(last);
            self.pending.extend_from_slice(&complete[..=first]);
            lines(&self.pending);
            self.pending.clear();
            complete = &complete[first + 1..];
        }
        if !complete.is_empty() {
            lines(complete);
        }
        self.pending.extend_from_slice(&chunk[last + 1..]);
    }

    /// The end of the stream: the last line, if it had no newline.
    pub fn finish(&mut self) -> Option<Batch> {
        self.skipping = false;
        let data = std::mem::take(&mut self.pending);
        if data.len() > self.max_line_bytes {
            self.oversized_lines += 1;
            return None;
        }
        (!data.is_empty()).then(|| Batch::new(data))
    }

    /// Removes complete lines longer than the maximum from a batch (rare: only when one read
    /// brought a whole oversized line at once).
    fn drop_oversized(&mut self, data: Vec<u8>) -> Vec<u8> {
        if data.len() <= self.max_line_bytes
            || data.split(|&b| b == b'\n').all(|l| l.len() <= self.max_line_bytes)
        {
            return data;
        }
        let mut kept = Vec::with_capacity(data.len());
        for line in data.split_inclusive(|&b| b == b'\n') {
            if line.len() - usize::from(line.ends_with(b"\n")) > self.max_line_bytes {
                self.oversized_lines += 1;
            } else {
                kept.extend_from_slice(line);
            }
        }
        kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(batches: &[Batch]) -> Vec<String> {
        batches
            .iter()
            .flat_map(|b| b.lines().map(|l| String::from_utf8_lossy(l).into_owned()))
            .collect()
    }

    fn frame(chunks: &[&[u8]], max: usize) -> (Vec<String>, u64) {
        let mut framer = LineFramer::new(max);
        let mut out: Vec<Batch> = chunks.iter().filter_map(|c| framer.push(c)).collect();
        out.extend(framer.finish());
        (lines(&out), framer.oversized_lines())
    }

    #[test]
    fn lines_split_across_reads_arrive_whole() {
        let (got, _) = frame(&[b"{\"a\":", b"1}\n{\"a\"", b":2}\n{\"a\":3}"], 100);
        assert_eq!(got, ["{\"a\":1}", "{\"a\":2}", "{\"a\":3}"]);
    }

    #[test]
    fn lines_are_those_of_a_split_at_every_newline() {
        for text in ["", "\n", "a", "a\n", "a\nb", "\n\na\r\n \nbb\n\n", "x\ny\r\nz\r"] {
            let batch = Batch::new(text.as_bytes().to_vec());
            let naive: Vec<&[u8]> = text
                .as_bytes()
                .split(|&b| b == b'\n')
                .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
                .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
                .collect();
            assert_eq!(batch.lines().collect::<Vec<_>>(), naive, "{text:?}");
        }
    }

    /// Chunks owned elsewhere, as a source's buffers would be.
    struct Owned(Vec<Vec<u8>>);

    impl Chunks for Owned {
        fn count(&self) -> usize {
            self.0.len()
        }
        fn chunk(&self, index: usize) -> &[u8] {
            &self.0[index]
        }
    }

    #[test]
    fn lines_read_in_place_are_those_of_the_chunks_each_ending_a_line() {
        let chunks: Vec<Vec<u8>> =
            [&b"{\"a\":1}"[..], b"{\"a\":2}\n{\"a\":3}\n", b"", b" \r\n", b"{\"a\":4}\r\n"]
                .iter()
                .map(|c| c.to_vec())
                .collect();
        let batch = Batch::with_receipt(b"{\"a\":0}\n".to_vec(), Receipt::new(()))
            .with_chunks(Box::new(Owned(chunks)));
        let lines: Vec<&[u8]> = batch.lines().collect();
        let a = |i: u8| format!("{{\"a\":{i}}}").into_bytes();
        assert_eq!(lines, [a(0), a(1), a(2), a(3), a(4)]);
        assert_eq!(batch.byte_len(), 8 + 7 + 16 + 3 + 9);
        assert_eq!(batch.bytes(), b"{\"a\":0}\n", "the chunks were not copied into the batch");
        assert_eq!(
            batch.to_ndjson(),
            b"{\"a\":0}\n{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n \r\n{\"a\":4}\r\n"
        );
        let again: Vec<Vec<u8>> =
            Batch::new(batch.to_ndjson()).lines().map(<[u8]>::to_vec).collect();
        assert_eq!(again, lines.iter().map(|l| l.to_vec()).collect::<Vec<_>>());
    }

    #[test]
    fn crlf_and_blank_lines_are_handled() {
        let (got, _) = frame(&[b"x\r\n\n  \ny\n"], 100);
        assert_eq!(got, ["x", "y"]);
    }

    #[test]
    fn oversized_lines_are_dropped_and_counted_without_losing_neighbours() {
        // A long line spread over several reads, then one arriving whole in a single read.
        let long = vec![b'z'; 50];
        let whole = [b"ok1\n".as_slice(), &long, b"\nok2\n"].concat();
        let (got, dropped) = frame(&[b"a\nzzzz", &long, &long, b"zz\nb\n", &whole, b"tail"], 10);
        assert_eq!(got, ["a", "b", "ok1", "ok2", "tail"]);
        assert_eq!(dropped, 2);
    }

    proptest::proptest! {
        /// Lines handed on where they lie are the lines `push` makes batches of, whatever the
        /// reads and however long the lines; too long ones are counted alike.
        #[test]
        fn lines_handed_where_they_lie_are_those_push_gives(
            text in proptest::collection::vec(
                proptest::sample::select(vec![b'a', b'b', b' ', b'\r', b'\n', b'\n']), 0..300),
            cuts in proptest::collection::vec(0usize..300, 0..12),
            max in 1usize..40,
        ) {
            let mut cuts: Vec<usize> = cuts.into_iter().filter(|&c| c <= text.len()).collect();
            cuts.sort_unstable();
            let mut reads = Vec::new();
            let mut start = 0;
            for cut in cuts.into_iter().chain([text.len()]) {
                reads.push(&text[start..cut.max(start)]);
                start = cut.max(start);
            }
            let (want, want_dropped) = frame(&reads, max);
            let mut framer = LineFramer::new(max);
            let (mut got, mut whole) = (Vec::new(), true);
            for read in &reads {
                framer.push_lines(read, |bytes| {
                    whole &= bytes.ends_with(b"\n");
                    got.extend(lines(&[Batch::new(bytes.to_vec())]));
                });
            }
            proptest::prop_assert!(whole, "each call has whole lines");
            got.extend(lines(&framer.finish().into_iter().collect::<Vec<_>>()));
            proptest::prop_assert_eq!(got, want);
            proptest::prop_assert_eq!(framer.oversized_lines(), want_dropped);
        }
    }

    #[test]
    fn an_oversized_last_line_is_dropped_at_finish() {
        let (got, dropped) = frame(&[b"a\n", b"0123456789ab"], 10);
        assert_eq!(got, ["a"]);
        assert_eq!(dropped, 1);
    }
}
