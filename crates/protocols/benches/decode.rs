//! Criterion bench: the decoders' hot path, a point a line (or a sample), throughput in points.
//! - 1,000 points of a host agent's metrics (`name,host=...,region=... value=12.34 <ns>`, and
//!   the same points as OpenTSDB `put` lines and tagged Graphite lines): each line parsed into a
//!   reusable `Point` (`Format::parse_point`, what the `tcp:` source does before the point goes
//!   into columns), into a `Record` (`Format::parse_line`), and parsed then written as a JSON
//!   line;
//! - the same points as one Prometheus remote write body (one series a sample, as Prometheus
//!   sends them): `remote_write::decode` into records, and `decode_request`, snappy and
//!   protobuf alone;
//! - the baseline: the same points as JSON lines, each decoded into a `Record` by
//!   `needle_record::decode_record` (what the history tap does with every line it keeps).
//!
//! `needle bench ingest` measures the same decoders over a whole workload and end to end into
//! history.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use needle_protocols::remote_write::{self, TimeSeries, WriteRequest};
use needle_protocols::{Format, Precision};
use std::fmt::Write;
use std::hint::black_box;

const HOSTS: usize = 100;
const METRICS: [&str; 5] = ["cpu_usage", "mem_used", "disk_read_bytes", "net_rx_bytes", "load1"];
const STEPS: usize = 2;
const POINTS: usize = HOSTS * METRICS.len() * STEPS;

struct Point {
    metric: &'static str,
    host: String,
    region: &'static str,
    seconds: i64,
    value: String,
}

fn points() -> Vec<Point> {
    let mut points = Vec::with_capacity(POINTS);
    for step in 0..STEPS {
        for h in 0..HOSTS {
            for (m, metric) in METRICS.iter().enumerate() {
                let cents = (h * 7919 + m * 104_729 + step * 31) % 100_000;
                points.push(Point {
                    metric,
                    host: format!("host-{h:04}"),
                    region: ["eu-west-1", "us-east-1"][h % 2],
                    seconds: 1_700_000_000 + step as i64,
                    value: format!("{}.{:02}", cents / 100, cents % 100),
                });
            }
        }
    }
    points
}

fn lines(points: &[Point], line: impl Fn(&Point) -> String) -> Vec<Vec<u8>> {
    points.iter().map(|p| line(p).into_bytes()).collect()
}

fn decode(c: &mut Criterion) {
    let points = points();
    let mut group = c.benchmark_group("protocols");
    group.throughput(Throughput::Elements(POINTS as u64));
    let forms = [
        (
            "influx",
            Format::Influx(Precision::Nanoseconds),
            lines(&points, |p| {
                let (m, h, r, v, s) = (p.metric, &p.host, p.region, &p.value, p.seconds);
                format!("{m},host={h},region={r} value={v} {s}000000000")
            }),
        ),
        (
            "opentsdb",
            Format::OpenTsdb,
            lines(&points, |p| {
                let (m, h, r, v, s) = (p.metric, &p.host, p.region, &p.value, p.seconds);
                format!("put {m} {s} {v} host={h} region={r}")
            }),
        ),
        (
            "graphite",
            Format::Graphite,
            lines(&points, |p| {
                let (m, h, r, v, s) = (p.metric, &p.host, p.region, &p.value, p.seconds);
                format!("{m};host={h};region={r} {v} {s}")
            }),
        ),
    ];
    for (name, format, lines) in &forms {
        // what a source does with each line: parsed into one reusable point, no record made
        let mut point = needle_protocols::Point::new();
        group.bench_function(format!("{name}_parse_point"), |b| {
            b.iter(|| {
                for line in lines {
                    black_box(format.parse_point(line, 0, &mut point).unwrap());
                }
            })
        });
        group.bench_function(format!("{name}_parse_line"), |b| {
            b.iter(|| {
                for line in lines {
                    black_box(format.parse_line(line, 0).unwrap());
                }
            })
        });
        let mut json = Vec::with_capacity(256 * POINTS);
        group.bench_function(format!("{name}_to_json_lines"), |b| {
            b.iter(|| {
                json.clear();
                for line in lines {
                    let record = format.parse_line(line, 0).unwrap().unwrap();
                    record.write_json(&mut json);
                    json.push(b'\n');
                }
                black_box(json.len())
            })
        });
    }
    let request = WriteRequest {
        timeseries: points
            .iter()
            .map(|p| {
                let value: f64 = p.value.parse().unwrap();
                TimeSeries::of(
                    &[("__name__", p.metric), ("host", &p.host), ("region", p.region)],
                    &[(value, p.seconds * 1000)],
                )
            })
            .collect(),
    };
    let body = remote_write::encode(&request);
    group.bench_function("remote_write_decode", |b| {
        b.iter(|| black_box(remote_write::decode(&body).unwrap()))
    });
    group.bench_function("remote_write_snappy_protobuf", |b| {
        b.iter(|| black_box(remote_write::decode_request(&body).unwrap()))
    });
    let json_lines = lines(&points, |p| {
        let mut line = String::new();
        let (m, h, r, v, s) = (p.metric, &p.host, p.region, &p.value, p.seconds);
        let _ = write!(
            line,
            r#"{{"metric":"{m}","host":"{h}","region":"{r}","value":{v},"timestamp":{s}000}}"#
        );
        line
    });
    group.bench_function("json_decode_record", |b| {
        b.iter(|| {
            for line in &json_lines {
                black_box(needle_record::decode_record(line).unwrap());
            }
        })
    });
    group.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);
