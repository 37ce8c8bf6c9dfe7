//! The `gen:` source: a workload of docs/workloads.md generated in-process (`gen:bullet?rate=20000`,
//! `gen:iot?sensors=1000`, `gen:small`; the spec syntax is the workload crate's `parse_spec`),
//! paced to a rate or as fast as the workers take it, with needle records injected on request.
//! Batches hold up to 64 KiB of lines, fewer when the rate makes records trickle, so latency
//! stays low at modest rates.

use super::{BatchSink, Source, SourceOptions};
use crate::framing::Batch;
use crate::RuntimeError;
use needle_workload::{parse_spec, Generator, Pacer, WorkloadSpec};
use std::time::{Duration, Instant};

const BATCH_BYTES: usize = 64 << 10;

pub struct GeneratorSource {
    spec: WorkloadSpec,
    generator: Generator,
}

impl GeneratorSource {
    pub fn from_spec(
        rest: &str,
        _options: &SourceOptions,
    ) -> Result<Box<dyn Source>, RuntimeError> {
        let bad = |reason: String| RuntimeError::bad_source(&format!("gen:{rest}"), reason);
        let spec = parse_spec(rest).map_err(|e| bad(e.to_string()))?;
        let generator = Generator::new(&spec).map_err(|e| bad(e.to_string()))?;
        Ok(Box::new(Self { spec, generator }))
    }
}

impl Source for GeneratorSource {
    fn describe(&self) -> String {
        let rate =
            self.spec.rate.map_or("as fast as possible".into(), |r| format!("{r} records/s"));
        format!("generated {} workload (seed {}, {rate})", self.spec.kind, self.spec.seed)
    }

    fn run(mut self: Box<Self>, sink: BatchSink) -> Result<(), RuntimeError> {
        let pacer = self.spec.rate.map(|rate| Pacer::new(rate, Instant::now()));
        let limit = self.spec.count.unwrap_or(u64::MAX);
        let mut buf = Vec::with_capacity(BATCH_BYTES + 4096);
        while !sink.is_stopped() && self.generator.produced() < limit {
            let due = pacer.map_or(limit, |p| p.due(Instant::now()).min(limit));
            while self.generator.produced() < due && buf.len() < BATCH_BYTES {
                self.generator.write_next(&mut buf);
                buf.push(b'\n');
            }
            if !buf.is_empty() && !sink.send(Batch::new(std::mem::take(&mut buf))) {
                return Ok(());
            }
            if let Some(pacer) = pacer {
                let next = pacer.when(self.generator.produced());
                let wait = next.saturating_duration_since(Instant::now());
                // Short naps, so a stop is noticed quickly even at very low rates.
                std::thread::sleep(wait.min(Duration::from_millis(50)));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{lines_of, sink};
    use super::*;

    #[test]
    fn generates_the_requested_count_with_the_needles() {
        let source = GeneratorSource::from_spec(
            "bullet?count=300&seed=5&needle=id=c39ba8cfe8&needle_count=3&needle_at=100",
            &SourceOptions::default(),
        )
        .unwrap();
        let (sink, rx, _stop, _) = sink(10_000);
        source.run(sink).unwrap();
        let lines = lines_of(rx.try_iter());
        assert_eq!(lines.len(), 300);
        let needles: Vec<usize> =
            (0..300).filter(|&i| lines[i].contains("\"id\":\"c39ba8cfe8\"")).collect();
        assert_eq!(needles, [100, 101, 102]);
    }

    #[test]
    fn a_rate_paces_the_stream() {
        let source =
            GeneratorSource::from_spec("small?rate=200&count=60", &SourceOptions::default())
                .unwrap();
        let (sink, rx, _stop, _) = sink(10_000);
        let start = Instant::now();
        source.run(sink).unwrap();
        let elapsed = start.elapsed();
        assert_eq!(lines_of(rx.try_iter()).len(), 60);
        // 60 records at 200/s: the last is due at 295 ms.
        assert!(elapsed >= Duration::from_millis(250), "{elapsed:?}");
    }

    #[test]
    fn bad_specs_are_refused_with_the_reason() {
        let err =
            GeneratorSource::from_spec("bulet?rate=5", &SourceOptions::default()).err().unwrap();
        assert!(err.to_string().contains("gen:bulet?rate=5"), "{err}");
        assert!(GeneratorSource::from_spec("small?rate=-1", &SourceOptions::default()).is_err());
    }
}
