//! [`ingest`]: loads a finite input (an NDJSON file, stdin, any reader) into a history store,
//! and returns once all of it is durable — what `needle ingest` runs.
//!
//! Lines are read on one thread and decoded on the others, each line into the record kept from
//! the line before and from it straight into columns ([`needle_history::ColumnBuffer`]); every
//! [`INGEST_PART_RECORDS`] records a thread writes what it gathered as sorted parts, durable at
//! once. At the end each partition's parts are merged into one. Lines that are not JSON objects
//! are counted and skipped, the first few kept in the summary with their line numbers.

use crossbeam_channel::{bounded, Receiver};
use needle_record::{Record, Value};
use needle_runtime::config::HistoryConfig;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Bytes of whole lines handed to a decoding thread at a time.
const CHUNK_BYTES: usize = 1 << 20;
/// Records a decoding thread gathers as columns before it writes them as parts (bounds the
/// memory an ingest holds).
pub const INGEST_PART_RECORDS: usize = 262_144;
/// How many malformed lines are quoted.
const MALFORMED_SAMPLES: usize = 5;

/// What an ingest did.
#[derive(Debug, Default, Clone, serde::Serialize)]
#[non_exhaustive]
pub struct IngestSummary {
    /// Records kept (`history.filter` may rule some out).
    pub records: u64,
    /// Numeric top-level values other than the time field: the readings of a time series.
    pub points: u64,
    /// Lines skipped because they were not JSON objects.
    pub malformed: u64,
    /// The first malformed lines: their 1-based line numbers and what was wrong.
    #[serde(skip)]
    pub malformed_samples: Vec<(u64, String)>,
    /// Bytes of the store's data files (its live parts) afterwards.
    pub bytes: u64,
    /// Bytes of a local store's Iceberg table besides (its metadata and catalog files).
    pub table_bytes: u64,
    /// `bytes / points`.
    pub bytes_per_point: f64,
    /// Bytes read from the input.
    pub input_bytes: u64,
    /// Wall time of the whole ingest, merges included.
    pub seconds: f64,
    /// `records / seconds`.
    pub records_per_second: f64,
    /// `points / seconds`.
    pub points_per_second: f64,
}

/// Loads every line of `reader` into the store `config` names, on `threads` decoding threads,
/// and makes it durable; `progress` is told the bytes of each chunk read. An error says what
/// failed (what was read before a read error is kept).
pub fn ingest(
    config: &HistoryConfig,
    reader: Box<dyn Read + Send>,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<IngestSummary, String> {
    let store = needle_history::Store::open(config.store_config())
        .map_err(|e| format!("history {}: {e}", config.dir))?;
    let filter =
        needle_runtime::runtime::history_filter(&config.filter).map_err(|e| e.to_string())?;
    let started = Instant::now();
    let (tx, rx) = bounded::<(u64, Vec<u8>)>(threads * 2);
    let read_error: Mutex<Option<String>> = Mutex::new(None);
    let records = AtomicU64::new(0);
    let points = AtomicU64::new(0);
    let malformed = Mutex::new((0u64, Vec::new()));
    let failure: Mutex<Option<String>> = Mutex::new(None);
    let input_bytes = AtomicU64::new(0);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            if let Err(e) = read_chunks(reader, &tx, &input_bytes, progress) {
                *read_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
            }
            drop(tx);
        });
        for _ in 0..threads {
            let rx: Receiver<(u64, Vec<u8>)> = rx.clone();
            let (store, filter) = (&store, &filter);
            let (records, points, malformed, failure) = (&records, &points, &malformed, &failure);
            let time_field = config.time_field.as_str();
            scope.spawn(move || {
                // each line is decoded into the record kept from the line before, and gathered
                // straight into columns: no record is allocated or kept per line
                let mut record = Record::new();
                let mut columns = needle_history::ColumnBuffer::new();
                let write = |columns: needle_history::ColumnBuffer| {
                    if let Err(e) = store.write_columns(columns) {
                        failure
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .get_or_insert(e.to_string());
                    }
                };
                for (first_line, chunk) in rx {
                    let now = now_ms();
                    let ctx = needle_engine::EvalContext::new(now);
                    let mut line_number = first_line;
                    let mut kept = 0u64;
                    for line in chunk.split(|b| *b == b'\n') {
                        line_number += 1;
                        if line.iter().all(u8::is_ascii_whitespace) {
                            continue;
                        }
                        match needle_record::decode_record_into(line, &mut record) {
                            Ok(()) => {
                                if filter
                                    .as_ref()
                                    .is_some_and(|f| f.eval(&record, &ctx) != Value::Bool(true))
                                {
                                    continue;
                                }
                                points.fetch_add(
                                    count_points(&record, time_field),
                                    Ordering::Relaxed,
                                );
                                let (time_ms, stored) = store.prepare(&record, now);
                                columns.push(time_ms, &stored);
                                kept += 1;
                            }
                            Err(e) => {
                                // the kept record may hold part of this line: start afresh
                                record = Record::new();
                                let mut m = malformed.lock().unwrap_or_else(|e| e.into_inner());
                                m.0 += 1;
                                if m.1.len() < MALFORMED_SAMPLES {
                                    m.1.push((line_number, e.to_string()));
                                }
                            }
                        }
                    }
                    records.fetch_add(kept, Ordering::Relaxed);
                    if columns.len() >= INGEST_PART_RECORDS {
                        write(std::mem::take(&mut columns));
                    }
                }
                write(columns);
            });
        }
    });
    if let Some(e) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(format!("the store refused records: {e}"));
    }
    store.flush().map_err(|e| format!("history could not be made durable: {e}"))?;
    // what was loaded in many parts becomes one part per partition: the smallest store, and
    // the fastest to read
    store.compact().map_err(|e| format!("history could not be merged: {e}"))?;
    // the table's last snapshot names every part, and the parts merged away go now
    store.close().map_err(|e| format!("history's table could not be committed: {e}"))?;
    let (malformed_count, samples) = malformed.into_inner().unwrap_or_else(|e| e.into_inner());
    if let Some(e) = read_error.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(format!("reading the input failed (what was read before is kept): {e}"));
    }
    let seconds = started.elapsed().as_secs_f64();
    let records = records.into_inner();
    let points = points.into_inner();
    // the live parts' bytes (on object storage: what the manifest names)
    let bytes = match store.info() {
        Ok(info) => info.bytes,
        Err(_) => dir_bytes(Path::new(&config.dir)),
    };
    let table_bytes = if config.is_remote() {
        0
    } else {
        let dir = Path::new(&config.dir);
        let catalog =
            std::fs::metadata(dir.join(needle_history::catalog::FILE)).map_or(0, |m| m.len());
        dir_bytes(&dir.join("metadata")) + catalog
    };
    Ok(IngestSummary {
        records,
        points,
        malformed: malformed_count,
        malformed_samples: samples,
        bytes,
        table_bytes,
        bytes_per_point: if points > 0 { bytes as f64 / points as f64 } else { 0.0 },
        input_bytes: input_bytes.into_inner(),
        seconds,
        records_per_second: records as f64 / seconds.max(1e-9),
        points_per_second: points as f64 / seconds.max(1e-9),
    })
}

/// Numeric top-level values other than the time field: a record's readings.
fn count_points(record: &Record, time_field: &str) -> u64 {
    record.iter().filter(|(k, v)| v.is_numeric() && k.as_str() != time_field).count() as u64
}

/// Reads whole lines in chunks of about [`CHUNK_BYTES`], with the number of lines before each.
fn read_chunks(
    reader: Box<dyn Read + Send>,
    tx: &crossbeam_channel::Sender<(u64, Vec<u8>)>,
    input_bytes: &AtomicU64,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<(), String> {
    let mut reader = BufReader::with_capacity(CHUNK_BYTES, reader);
    let mut lines = 0u64;
    loop {
        let mut chunk = Vec::with_capacity(CHUNK_BYTES + 4096);
        let mut in_chunk = 0u64;
        while chunk.len() < CHUNK_BYTES {
            let n = reader.read_until(b'\n', &mut chunk).map_err(|e| e.to_string())?;
            if n == 0 {
                break;
            }
            in_chunk += 1;
        }
        if chunk.is_empty() {
            return Ok(());
        }
        input_bytes.fetch_add(chunk.len() as u64, Ordering::Relaxed);
        progress(chunk.len() as u64);
        let first = lines;
        lines += in_chunk;
        if tx.send((first, chunk)).is_err() {
            return Ok(());
        }
    }
}

/// Bytes of every file under `dir`.
pub fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
