//! The `file:` source: an NDJSON file read to its end, or followed as it grows.
//!
//! Following (`file:PATH?follow=true` or `--follow`) polls for new bytes every 50 ms; a line is
//! handed on only once its newline has been written. When the file shrinks (truncated or
//! replaced by a shorter one), reading starts again from its beginning; the unfinished line
//! from before is dropped.

use super::{flush_last_line, pump, split_query, BatchSink, Source, SourceOptions};
use crate::framing::LineFramer;
use crate::RuntimeError;
use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::path::PathBuf;
use std::time::Duration;

const FOLLOW_POLL: Duration = Duration::from_millis(50);

pub struct FileSource {
    path: PathBuf,
    follow: bool,
    options: SourceOptions,
}

impl FileSource {
    pub fn new(path: impl Into<PathBuf>, follow: bool, options: SourceOptions) -> Self {
        Self { path: path.into(), follow, options }
    }

    /// `PATH` or `PATH?follow=true|false`.
    pub fn from_spec(rest: &str, options: &SourceOptions) -> Result<Box<dyn Source>, RuntimeError> {
        let spec = format!("file:{rest}");
        let (path, params) = split_query(rest);
        if path.is_empty() {
            return Err(RuntimeError::bad_source(
                &spec,
                "give a path: file:/path/to/records.ndjson",
            ));
        }
        let mut follow = options.follow;
        for (key, value) in params {
            match (key, value) {
                ("follow", "" | "true" | "1") => follow = true,
                ("follow", "false" | "0") => follow = false,
                ("follow", other) => {
                    return Err(RuntimeError::bad_source(
                        &spec,
                        format!("follow must be true or false, not '{other}'"),
                    ))
                }
                (other, _) => {
                    return Err(RuntimeError::bad_source(
                        &spec,
                        format!("unknown option '{other}' (known: follow)"),
                    ))
                }
            }
        }
        // Refuse a missing file now, with a clear message, rather than in the reader thread.
        File::open(path).map_err(|e| RuntimeError::io(format!("opening {path}"), e))?;
        Ok(Box::new(Self::new(path, follow, options.clone())))
    }
}

impl Source for FileSource {
    fn describe(&self) -> String {
        let follow = if self.follow { " (following)" } else { "" };
        format!("file {}{follow}", self.path.display())
    }

    fn run(self: Box<Self>, sink: BatchSink) -> Result<(), RuntimeError> {
        let context = format!("reading {}", self.path.display());
        let mut file = File::open(&self.path).map_err(|e| RuntimeError::io(&context, e))?;
        let mut framer = LineFramer::new(self.options.max_line_bytes);
        loop {
            if !pump(&mut file, &mut framer, &sink, self.options.read_bytes, &context)? {
                return Ok(());
            }
            if !self.follow {
                flush_last_line(&mut framer, &sink);
                return Ok(());
            }
            std::thread::sleep(FOLLOW_POLL);
            if sink.is_stopped() {
                return Ok(());
            }
            let position = file.stream_position().map_err(|e| RuntimeError::io(&context, e))?;
            let length = std::fs::metadata(&self.path).map(|m| m.len()).unwrap_or(position);
            if length < position {
                file = File::open(&self.path).map_err(|e| RuntimeError::io(&context, e))?;
                file.seek(SeekFrom::Start(0)).map_err(|e| RuntimeError::io(&context, e))?;
                framer = LineFramer::new(self.options.max_line_bytes);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{lines_of, sink};
    use super::*;
    use std::io::Write;
    use std::sync::atomic::Ordering;

    #[test]
    fn reads_every_line_of_a_file_in_small_reads() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        let text: String = (0..1000).map(|i| format!("{{\"i\":{i}}}\n")).collect();
        write!(f, "{text}{{\"last\":true}}").unwrap();
        let options = SourceOptions { read_bytes: 7, ..SourceOptions::default() };
        let source = FileSource::from_spec(f.path().to_str().unwrap(), &options).unwrap();
        let (sink, rx, _stop, counters) = sink(100_000);
        source.run(sink).unwrap();
        let lines = lines_of(rx.try_iter());
        assert_eq!(lines.len(), 1001);
        assert_eq!(lines[999], "{\"i\":999}");
        assert_eq!(lines[1000], "{\"last\":true}");
        assert_eq!(counters.bytes.load(Ordering::Relaxed), text.len() as u64 + 13);
    }

    #[test]
    fn follows_a_growing_file_and_stops_on_request() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(f, "first").unwrap();
        let source = FileSource::from_spec(
            &format!("{}?follow=true", f.path().display()),
            &SourceOptions::default(),
        )
        .unwrap();
        let (sink, rx, stop, _) = sink(100);
        let reader = std::thread::spawn(move || source.run(sink));
        assert_eq!(lines_of([rx.recv_timeout(Duration::from_secs(5)).unwrap()]), ["first"]);
        write!(f, "sec").unwrap();
        f.flush().unwrap();
        std::thread::sleep(Duration::from_millis(120));
        assert!(rx.is_empty(), "half a line is not handed on");
        writeln!(f, "ond").unwrap();
        assert_eq!(lines_of([rx.recv_timeout(Duration::from_secs(5)).unwrap()]), ["second"]);
        stop.stop();
        reader.join().unwrap().unwrap();
    }

    #[test]
    fn bad_specs_are_refused_with_reasons() {
        let o = SourceOptions::default();
        let missing = FileSource::from_spec("/no/such/file.ndjson", &o).err().unwrap().to_string();
        assert!(missing.contains("opening /no/such/file.ndjson"), "{missing}");
        let f = tempfile::NamedTempFile::new().unwrap();
        let bad = FileSource::from_spec(&format!("{}?follow=maybe", f.path().display()), &o);
        assert!(bad.err().unwrap().to_string().contains("follow must be true or false"));
        let unknown = FileSource::from_spec(&format!("{}?tail=1", f.path().display()), &o);
        assert!(unknown.err().unwrap().to_string().contains("unknown option 'tail'"));
        assert!(FileSource::from_spec("", &o).is_err());
    }
}
