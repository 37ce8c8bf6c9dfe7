//! The points of `needle bench ingest` and their wire bytes: a deterministic metrics workload
//! (hosts × metrics series tagged `host` and `region`, one point a second each) rendered once per
//! protocol into what an agent would send, and what a store holding exactly those points must
//! answer ([`Expected`]).
//!
//! Every protocol carries the same points, one a line (or a sample), so each becomes one record
//! with the same `value` (a DOUBLE, written with two decimals so that no protocol reads it as an
//! integer) and the same `timestamp` (ms); only the name's key differs (`metric` in the JSON
//! lines, `measurement`, `metric`, `path`, `__name__` in the protocols' records).

use needle_protocols::remote_write::{self, TimeSeries, WriteRequest};
use std::io::Write;

/// The metrics' names, as a host agent reports them (the first `--metrics` of them are used).
pub const METRICS: [&str; 10] = [
    "cpu_usage",
    "mem_used",
    "disk_read_bytes",
    "disk_write_bytes",
    "net_rx_bytes",
    "net_tx_bytes",
    "load1",
    "processes",
    "swap_used",
    "uptime",
];

/// Regions the hosts are spread over (host `h` is in region `h % 4`).
const REGIONS: [&str; 4] = ["eu-west-1", "eu-central-1", "us-east-1", "ap-south-1"];

/// The wire forms of the points: lines for the line protocols, request bodies for HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// `{"metric": ..., "host": ..., "region": ..., "value": ..., "timestamp": ms}` lines.
    JsonLines,
    /// InfluxDB line protocol, timestamps in ns (the default precision, Telegraf's).
    Influx,
    /// OpenTSDB telnet `put` lines, timestamps in seconds.
    OpenTsdb,
    /// Graphite plaintext lines with tags (`name;host=...;region=...`), timestamps in seconds.
    Graphite,
    /// JSON lines in request bodies of `samples_per_request` points each (`POST /api/v1/records`).
    JsonBodies,
    /// Prometheus remote write 1.0 bodies of `samples_per_request` samples each, one series a
    /// sample with all its labels, as Prometheus's queue manager builds them.
    RemoteWrite,
}

/// The workload: `hosts` × `metrics` series of `points` points each, a point a second.
#[derive(Debug, Clone)]
pub struct Workload {
    hosts: Vec<String>,
    metrics: usize,
    points: u64,
    seed: u64,
    /// The first point's time, in whole seconds since the epoch.
    start_s: i64,
    samples_per_request: usize,
}

/// One point of the workload.
#[derive(Debug, Clone, Copy)]
pub struct Point<'w> {
    pub metric: &'w str,
    pub host: &'w str,
    pub region: &'w str,
    /// Seconds since the epoch.
    pub time_s: i64,
    /// The value in hundredths (the value is `cents / 100`).
    pub cents: u64,
}

impl Point<'_> {
    pub fn value(&self) -> f64 {
        self.cents as f64 / 100.0
    }

    fn write_value(&self, out: &mut Vec<u8>) {
        let _ = write!(out, "{}.{:02}", self.cents / 100, self.cents % 100);
    }
}

/// What a store holding exactly the workload's points answers.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Expected {
    pub points: u64,
    /// The sum of every value (exact: computed in hundredths).
    pub sum: f64,
    pub first_ms: i64,
    pub last_ms: i64,
}

impl Workload {
    /// `hosts` × `metrics` (at most [`METRICS`]' length) series of `points` points, the first
    /// at `start_s`; values seeded by `seed`.
    pub fn new(
        hosts: u64,
        metrics: usize,
        points: u64,
        seed: u64,
        start_s: i64,
        samples_per_request: usize,
    ) -> Self {
        Self {
            hosts: (0..hosts).map(|h| format!("host-{h:04}")).collect(),
            metrics: metrics.min(METRICS.len()),
            points,
            seed,
            start_s,
            samples_per_request: samples_per_request.max(1),
        }
    }

    pub fn series(&self) -> u64 {
        self.hosts.len() as u64 * self.metrics as u64
    }

    pub fn points(&self) -> u64 {
        self.series() * self.points
    }

    /// Every point in the order an agent sends them: second by second, every series' point of
    /// that second (timestamps never go back).
    pub fn for_each(&self, mut f: impl FnMut(&Point<'_>)) {
        for i in 0..self.points {
            for (h, host) in self.hosts.iter().enumerate() {
                for (m, metric) in METRICS[..self.metrics].iter().enumerate() {
                    let series = (h * self.metrics + m) as u64;
                    f(&Point {
                        metric,
                        host,
                        region: REGIONS[h % REGIONS.len()],
                        time_s: self.start_s + i as i64,
                        cents: mix(self.seed ^ (series << 32) ^ i) % 100_000,
                    });
                }
            }
        }
    }

    /// What the points add up to.
    pub fn expected(&self) -> Expected {
        let mut cents: u128 = 0;
        self.for_each(|p| cents += u128::from(p.cents));
        Expected {
            points: self.points(),
            sum: cents as f64 / 100.0,
            first_ms: self.start_s * 1000,
            last_ms: (self.start_s + self.points as i64 - 1) * 1000,
        }
    }

    /// The points as `wire` lines, one point a line.
    pub fn lines(&self, wire: Wire) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.points() as usize * 96);
        self.for_each(|p| write_line(wire, p, &mut out));
        out
    }

    /// The points as request bodies of `samples_per_request` points each: JSON lines
    /// ([`Wire::JsonBodies`]) or remote write ([`Wire::RemoteWrite`]).
    pub fn bodies(&self, wire: Wire) -> Vec<Vec<u8>> {
        let mut bodies = Vec::new();
        let mut lines = Vec::new();
        let mut series = Vec::with_capacity(self.samples_per_request);
        let mut in_body = 0;
        let mut finish = |lines: &mut Vec<u8>, series: &mut Vec<TimeSeries>| match wire {
            Wire::RemoteWrite => {
                let request = WriteRequest { timeseries: std::mem::take(series) };
                bodies.push(remote_write::encode(&request));
            }
            _ => bodies.push(std::mem::take(lines)),
        };
        self.for_each(|p| {
            match wire {
                Wire::RemoteWrite => series.push(TimeSeries::of(
                    &[("__name__", p.metric), ("host", p.host), ("region", p.region)],
                    &[(p.value(), p.time_s * 1000)],
                )),
                _ => write_line(Wire::JsonLines, p, &mut lines),
            }
            in_body += 1;
            if in_body == self.samples_per_request {
                finish(&mut lines, &mut series);
                in_body = 0;
            }
        });
        if in_body > 0 {
            finish(&mut lines, &mut series);
        }
        bodies
    }
}

/// One point as a line of `wire` (a line protocol, or JSON), with its newline.
fn write_line(wire: Wire, p: &Point<'_>, out: &mut Vec<u8>) {
    let (name, host, region, s) = (p.metric, p.host, p.region, p.time_s);
    match wire {
        Wire::Influx => {
            let _ = write!(out, "{name},host={host},region={region} value=");
            p.write_value(out);
            let _ = writeln!(out, " {s}000000000");
        }
        Wire::OpenTsdb => {
            let _ = write!(out, "put {name} {s} ");
            p.write_value(out);
            let _ = writeln!(out, " host={host} region={region}");
        }
        Wire::Graphite => {
            let _ = write!(out, "{name};host={host};region={region} ");
            p.write_value(out);
            let _ = writeln!(out, " {s}");
        }
        Wire::JsonLines | Wire::JsonBodies | Wire::RemoteWrite => {
            let _ =
                write!(out, r#"{{"metric":"{name}","host":"{host}","region":"{region}","value":"#);
            p.write_value(out);
            let _ = writeln!(out, r#","timestamp":{s}000}}"#);
        }
    }
}

/// splitmix64's finalizer: a well-spread value of `x`.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use needle_protocols::{Format, Precision};
    use needle_record::Value;

    fn small() -> Workload {
        Workload::new(3, 2, 4, 7, 1_700_000_000, 5)
    }

    /// Every wire form reads back as the same points: values, times and tags.
    #[test]
    fn every_wire_form_carries_the_same_points() {
        let workload = small();
        let mut want = Vec::new();
        workload.for_each(|p| want.push((p.host.to_owned(), p.value(), p.time_s * 1000)));
        assert_eq!(want.len() as u64, workload.points());
        let of = |record: &needle_record::Record| {
            let value = match record.get("value") {
                Some(Value::Double(v)) => *v,
                other => panic!("value {other:?} in {}", record.to_json()),
            };
            let host = record.get("host").and_then(Value::as_str).unwrap().to_owned();
            (host, value, record.get("timestamp").and_then(Value::as_i64).unwrap())
        };
        let lines = |bytes: &[u8]| -> Vec<Vec<u8>> {
            bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()).map(<[u8]>::to_vec).collect()
        };
        let json: Vec<_> = lines(&workload.lines(Wire::JsonLines))
            .iter()
            .map(|l| of(&needle_record::decode_record(l).unwrap()))
            .collect();
        assert_eq!(json, want);
        for (wire, format) in [
            (Wire::Influx, Format::Influx(Precision::Nanoseconds)),
            (Wire::OpenTsdb, Format::OpenTsdb),
            (Wire::Graphite, Format::Graphite),
        ] {
            let got: Vec<_> = lines(&workload.lines(wire))
                .iter()
                .map(|l| of(&format.parse_line(l, 0).unwrap().unwrap()))
                .collect();
            assert_eq!(got, want, "{wire:?}");
        }
        let bodies = workload.bodies(Wire::RemoteWrite);
        assert_eq!(bodies.len(), 5, "24 samples in bodies of 5");
        let got: Vec<_> = bodies
            .iter()
            .flat_map(|b| remote_write::decode(b).unwrap().records)
            .map(|r| of(&r))
            .collect();
        assert_eq!(got, want);
        let got: Vec<_> = workload
            .bodies(Wire::JsonBodies)
            .iter()
            .flat_map(|b| lines(b))
            .map(|l| of(&needle_record::decode_record(&l).unwrap()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn the_expected_answer_adds_up_the_points() {
        let workload = small();
        let expected = workload.expected();
        let mut sum = 0.0;
        workload.for_each(|p| sum += p.value());
        assert_eq!(expected.points, 24);
        assert!((expected.sum - sum).abs() < 1e-9, "{expected:?} {sum}");
        assert_eq!((expected.first_ms, expected.last_ms), (1_700_000_000_000, 1_700_000_003_000));
        assert_eq!(workload.lines(Wire::Influx), small().lines(Wire::Influx), "deterministic");
    }
}
