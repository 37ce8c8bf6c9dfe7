//! [`Pusher`]: events a program hands to needle from code, as JSON lines or as typed records.
//!
//! A pusher gathers events into batches (of [`Builder::batch_events`](crate::Builder::batch_events),
//! or 64 KiB of JSON) and hands each batch to the workers through the same bounded queue a
//! source uses: when the workers fall behind, [`Pusher::flush`] (and so the push that fills a
//! batch) waits, and nothing pushed is dropped. Any number of pushers may push at once, from
//! their own threads ([`crate::Needle::pusher`]).
//!
//! Typed events cost no JSON at all: [`Pusher::push_with`] writes an event's fields into a
//! record the workers handed back from an earlier batch ([`RecordWriter`]), so a producer in a
//! steady state allocates nothing per event.

use crate::error::Error;
use crossbeam_channel::{Receiver, Sender};
use needle_record::{Record, RecordWriter};
use needle_runtime::framing::Batch;
use needle_runtime::source::BatchSink;
use std::sync::{Arc, RwLock};

/// Bytes of JSON lines a pusher gathers before handing them on.
const JSON_BATCH_BYTES: usize = 64 << 10;
/// Emptied record vectors a pusher keeps for reuse.
const SPARE_BATCHES: usize = 8;

/// The workers' queue, shared by every pusher of one [`crate::Needle`]; emptied at shutdown,
/// which ends the workers once they have read what was pushed.
pub(crate) type SharedSink = Arc<RwLock<Option<BatchSink>>>;

/// Pushes events into a running needle (see the module doc). Flushes what it holds when dropped.
pub struct Pusher {
    sink: SharedSink,
    lines: Vec<u8>,
    records: Vec<Record>,
    /// Records of `records` written so far (the rest are spares to overwrite).
    used: usize,
    batch_events: usize,
    spare_tx: Sender<Vec<Record>>,
    spare_rx: Receiver<Vec<Record>>,
}

impl std::fmt::Debug for Pusher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pusher").field("pending", &(self.used, self.lines.len())).finish()
    }
}

impl Pusher {
    pub(crate) fn new(sink: SharedSink, batch_events: usize) -> Self {
        let (spare_tx, spare_rx) = crossbeam_channel::bounded(SPARE_BATCHES);
        Self {
            sink,
            lines: Vec::new(),
            records: Vec::new(),
            used: 0,
            batch_events: batch_events.max(1),
            spare_tx,
            spare_rx,
        }
    }

    /// Pushes one event as a JSON object (one line of NDJSON; a trailing newline is optional).
    /// Lines that are not JSON objects are counted as malformed and skipped by the workers, as
    /// from any source.
    pub fn push_json(&mut self, line: &[u8]) -> Result<(), Error> {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        self.lines.extend_from_slice(line);
        self.lines.push(b'\n');
        if self.lines.len() >= JSON_BATCH_BYTES {
            self.send_lines()?;
        }
        Ok(())
    }

    /// Pushes a record built in code.
    pub fn push(&mut self, record: Record) -> Result<(), Error> {
        if self.used < self.records.len() {
            self.records[self.used] = record;
        } else {
            self.records.push(record);
        }
        self.event_written()
    }

    /// Pushes a typed event written field by field into a record kept from an earlier event:
    ///
    /// ```
    /// # let needle = needle::Needle::builder().workers(1).start().unwrap();
    /// let mut pusher = needle.pusher().unwrap();
    /// pusher.push_with(|event| {
    ///     event.set_str("device", "ipad").set_i64("ms", 120).set_f64("temp", 21.5);
    /// }).unwrap();
    /// ```
    pub fn push_with(&mut self, write: impl FnOnce(&mut RecordWriter<'_>)) -> Result<(), Error> {
        if self.used == self.records.len() {
            self.records.push(Record::new());
        }
        let mut writer = RecordWriter::new(&mut self.records[self.used]);
        write(&mut writer);
        writer.finish();
        self.event_written()
    }

    /// Hands on every event pushed so far, waiting while the workers' queue is full.
    pub fn flush(&mut self) -> Result<(), Error> {
        if !self.lines.is_empty() {
            self.send_lines()?;
        }
        if self.used > 0 {
            self.send_records()?;
        }
        Ok(())
    }

    fn event_written(&mut self) -> Result<(), Error> {
        self.used += 1;
        if self.used >= self.batch_events {
            self.send_records()?;
        }
        Ok(())
    }

    fn send_lines(&mut self) -> Result<(), Error> {
        let lines = std::mem::take(&mut self.lines);
        self.send(Batch::new(lines))
    }

    fn send_records(&mut self) -> Result<(), Error> {
        // the next batch's records: a vector the workers are done with, or a new one
        let next = self.spare_rx.try_recv().unwrap_or_default();
        let mut records = std::mem::replace(&mut self.records, next);
        // a flush before the batch was full: the records past those written are stale
        records.truncate(self.used);
        self.used = 0;
        self.send(Batch::of_records(records, Some(self.spare_tx.clone())))
    }

    fn send(&self, batch: Batch) -> Result<(), Error> {
        let sink = self.sink.read().unwrap_or_else(|e| e.into_inner());
        match sink.as_ref() {
            Some(sink) if sink.send(batch) => Ok(()),
            _ => Err(Error::Closed("needle is shutting down: the events were not taken".into())),
        }
    }
}

impl Drop for Pusher {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}
