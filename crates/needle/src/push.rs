//! [`Pusher`]: events a program hands to needle from code, as JSON lines or as typed values.
//!
//! A pusher gathers events into batches (of [`Builder::batch_events`](crate::Builder::batch_events),
//! or 64 KiB of JSON) and hands each batch to the workers through the same bounded queue a
//! source uses: when the workers fall behind, [`Pusher::flush`] (and so the push that fills a
//! batch) waits, and nothing pushed is dropped. Any number of pushers may push at once, from
//! their own threads ([`crate::Needle::pusher`]).
//!
//! Typed events cost no JSON at all: [`Pusher::push_with`] gathers a batch of events as
//! columns, one vector per field (the names once per batch), which the workers read column at
//! a time for the queries that allow it — aggregations (COUNT, SUM, AVG, MIN, MAX, GROUP BY)
//! of plain fields with a WHERE of comparisons — and row by row for the others. An event that
//! does not fit the batch's columns (its fields in another order than the events before it, a
//! field set twice, a NULL, a list, a map, or a field of another type than before) is kept as
//! a record instead, with the events before and after it in that batch ([`RecordWriter`]'s
//! rules: records the workers handed back are overwritten in place): the answers are the same
//! either way, and a batch's events keep the order they were pushed in.

use crate::error::Error;
use crossbeam_channel::{Receiver, Sender};
use needle_record::{Record, RecordWriter, Value};
use needle_runtime::columns::{ColumnsBuilder, Scalar};
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
    /// Typed events as columns.
    columns: ColumnsBuilder,
    /// Typed events kept as records (an event that did not fit the columns, and those after it
    /// in its batch), and records pushed.
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
            columns: ColumnsBuilder::new(batch_events),
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
        // the typed events before it go in its batch, ahead of it
        self.columns_to_records();
        self.record_slot(record);
        self.event_written()
    }

    /// Pushes a typed event, its fields set one by one (in the same order from event to event,
    /// as a struct's, for the fast path: see the module doc):
    ///
    /// ```
    /// # let needle = needle::Needle::builder().workers(1).start().unwrap();
    /// let mut pusher = needle.pusher().unwrap();
    /// pusher.push_with(|event| {
    ///     event.set_str("device", "ipad").set_i64("ms", 120).set_f64("temp", 21.5);
    /// }).unwrap();
    /// ```
    pub fn push_with(&mut self, write: impl FnOnce(&mut EventWriter<'_>)) -> Result<(), Error> {
        if self.used == self.records.len() {
            self.records.push(Record::new());
        }
        let spare = &mut self.records[self.used];
        let mut event = match self.used {
            // columns, while no event of this batch had to be a record
            0 => EventWriter { columns: &mut self.columns, record: None, spare: Some(spare) },
            _ => EventWriter {
                columns: &mut self.columns,
                record: Some(RecordWriter::new(spare)),
                spare: None,
            },
        };
        write(&mut event);
        let as_record = event.record.is_some();
        drop(event);
        if !as_record {
            self.columns.commit();
            if self.columns.rows() >= self.batch_events {
                self.send_columns()?;
            }
            return Ok(());
        }
        // a record: the typed events before it become records too, ahead of it in its batch
        if self.columns.rows() > 0 {
            let event = std::mem::take(&mut self.records[self.used]);
            self.columns_to_records();
            self.record_slot(event);
        }
        self.event_written()
    }

    /// The typed events gathered as columns made records, in order, after those held.
    fn columns_to_records(&mut self) {
        let Some(columns) = self.columns.finish() else { return };
        let reader = columns.rows_reader();
        for row in 0..columns.rows() {
            if self.used == self.records.len() {
                self.records.push(Record::new());
            }
            reader.write(row, &mut self.records[self.used]);
            self.used += 1;
        }
    }

    /// Puts `record` in the next place of the records batch (not yet counted as written).
    fn record_slot(&mut self, record: Record) {
        if self.used < self.records.len() {
            self.records[self.used] = record;
        } else {
            self.records.push(record);
        }
    }

    /// Hands on every event pushed so far, waiting while the workers' queue is full.
    pub fn flush(&mut self) -> Result<(), Error> {
        if !self.lines.is_empty() {
            self.send_lines()?;
        }
        self.send_columns()?;
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

    fn send_columns(&mut self) -> Result<(), Error> {
        match self.columns.finish() {
            Some(columns) => self.send(Batch::of_columns(columns)),
            None => Ok(()),
        }
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

/// Writes one typed event's fields for [`Pusher::push_with`]: into the batch's columns, or,
/// for an event that does not fit them, into a record (see the module doc). Each setter sets
/// the next field; a field set twice keeps the last value, where it was first set.
pub struct EventWriter<'p> {
    columns: &'p mut ColumnsBuilder,
    /// The event as a record, once it did not fit the columns.
    record: Option<RecordWriter<'p>>,
    /// The record it would go into.
    spare: Option<&'p mut Record>,
}

impl std::fmt::Debug for EventWriter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventWriter").field("as_record", &self.record.is_some()).finish()
    }
}

impl<'p> EventWriter<'p> {
    /// Sets the next field to `value` (any [`Value`]: NULL, lists and maps make the event a
    /// record).
    pub fn set(&mut self, name: &str, value: impl Into<Value>) -> &mut Self {
        let value = value.into();
        match Scalar::of(&value) {
            Some(scalar) if self.record.is_none() && self.columns.stage(name, scalar) => {}
            _ => {
                self.as_record().set(name, value);
            }
        }
        self
    }

    /// Sets the next field to a string.
    pub fn set_str(&mut self, name: &str, value: &str) -> &mut Self {
        if !self.staged(name, Scalar::Text(value)) {
            self.as_record().set_str(name, value);
        }
        self
    }

    /// Sets the next field to a LONG.
    pub fn set_i64(&mut self, name: &str, value: i64) -> &mut Self {
        if !self.staged(name, Scalar::Long(value)) {
            self.as_record().set_i64(name, value);
        }
        self
    }

    /// Sets the next field to a DOUBLE.
    pub fn set_f64(&mut self, name: &str, value: f64) -> &mut Self {
        if !self.staged(name, Scalar::Double(value)) {
            self.as_record().set_f64(name, value);
        }
        self
    }

    /// Sets the next field to a BOOLEAN.
    pub fn set_bool(&mut self, name: &str, value: bool) -> &mut Self {
        if !self.staged(name, Scalar::Bool(value)) {
            self.as_record().set_bool(name, value);
        }
        self
    }

    /// True when the field went into the columns.
    #[inline]
    fn staged(&mut self, name: &str, value: Scalar<'_>) -> bool {
        self.record.is_none() && self.columns.stage(name, value)
    }

    /// The event as a record from here on: the fields set so far moved into it.
    #[cold]
    fn as_record(&mut self) -> &mut RecordWriter<'p> {
        if self.record.is_none() {
            let spare = self.spare.take().expect("an event not in the columns has a record");
            let mut writer = RecordWriter::new(spare);
            for (name, value) in self.columns.staged() {
                writer.set(name, value);
            }
            self.columns.discard();
            self.record = Some(writer);
        }
        self.record.as_mut().expect("set above")
    }
}
