//! `needle gen`: writes a workload of docs/workloads.md (bullet, iot, small) as NDJSON to stdout,
//! deterministically for a seed, optionally with needle records (bullet) or at a target rate.
//! `--to kafka://HOST:PORT/TOPIC` produces it into a Kafka topic instead, one record per
//! message, round-robin over the topic's partitions (created with `--partitions` when missing).

use needle_workload::{
    parse_needle_field, Generator, NeedleSpec, Pacer, WorkloadError, WorkloadSpec, DEFAULT_SENSORS,
};
use std::io::{self, Write};
use std::process::ExitCode;
use std::time::Instant;

/// Bytes gathered before each write to stdout.
const BATCH_BYTES: usize = 64 * 1024;

#[derive(clap::Args)]
pub struct Args {
    /// The workload: bullet (1.8 KiB Bullet-shaped records), iot (sensor readings) or small
    /// (~100-byte events).
    #[arg(value_parser = ["bullet", "iot", "small"])]
    workload: String,
    /// How many records to write (default: no end; stop it with a pipe, e.g. `| head`).
    #[arg(long, short = 'n')]
    count: Option<u64>,
    /// The seed: the same seed and options give the same bytes.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// bullet: set FIELD to VALUE in the needle records (FIELD may be MAP.KEY, e.g.
    /// demographics.country=Atlantis; VALUE is a string, or an integer for a long field).
    /// Repeat to set several fields.
    #[arg(long = "needle", value_name = "FIELD=VALUE")]
    needles: Vec<String>,
    /// bullet: how many needle records (consecutive).
    #[arg(long, value_name = "K", default_value_t = 1)]
    needle_count: u64,
    /// bullet: index of the first needle record (default: the middle of --count).
    #[arg(long, value_name = "I")]
    needle_at: Option<u64>,
    /// iot: the number of sensors.
    #[arg(long, value_name = "S", default_value_t = DEFAULT_SENSORS)]
    sensors: u64,
    /// Records per second (default: as fast as possible).
    #[arg(long)]
    rate: Option<f64>,
    /// Write to a Kafka topic instead of stdout: kafka://HOST:PORT/TOPIC. The [kafka] section's
    /// properties (security settings) apply; see --config.
    #[arg(long, value_name = "kafka://HOST:PORT/TOPIC")]
    to: Option<String>,
    /// With --to: the partitions of the topic when it has to be created.
    #[arg(long, default_value_t = 4, requires = "to")]
    partitions: i32,
    /// With --to: a needle.toml whose [kafka.properties] to use (default: ./needle.toml when it
    /// exists).
    #[arg(long, requires = "to")]
    config: Option<std::path::PathBuf>,
}

pub fn run(args: Args) -> ExitCode {
    let spec = match spec_of(&args) {
        Ok(spec) => spec,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let generator = match Generator::new(&spec) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(target) = &args.to {
        return to_kafka(target, &args, generator, spec.rate);
    }
    match write_all(generator, spec.rate, &mut io::stdout().lock()) {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`| head`): that is how an endless stream ends.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: writing the output: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Produces the workload into a Kafka topic; says how many records went where.
fn to_kafka(target: &str, args: &Args, generator: Generator, rate: Option<f64>) -> ExitCode {
    let opened = needle_kafka::spec::parse_target(target).and_then(|(brokers, topic)| {
        let config =
            super::config::load(args.config.clone()).map_err(needle_kafka::KafkaError::Config)?;
        let connection = needle_kafka::client::Connection::new(&brokers, &config.kafka.properties)?;
        let writer =
            needle_kafka::produce::TopicWriter::open(&connection, &topic, args.partitions)?;
        Ok((writer, topic, brokers))
    });
    let (mut writer, topic, brokers) = match opened {
        Ok(opened) => opened,
        Err(e) => {
            eprintln!("error: {}", needle_runtime::secrets::scrub(&e.to_string()));
            return ExitCode::from(2);
        }
    };
    match write_all(generator, rate, &mut writer) {
        Ok(()) => {
            eprintln!("wrote {} records to kafka topic {topic} on {brokers}", writer.sent());
            ExitCode::SUCCESS
        }
        Err(e) => {
            let message = format!("error: writing to kafka topic {topic}: {e}");
            eprintln!("{}", needle_runtime::secrets::scrub(&message));
            ExitCode::FAILURE
        }
    }
}

fn spec_of(args: &Args) -> Result<WorkloadSpec, WorkloadError> {
    let mut spec = WorkloadSpec::new(args.workload.parse()?).with_seed(args.seed);
    spec.count = args.count;
    spec.rate = args.rate;
    spec.sensors = args.sensors;
    if args.needles.is_empty() {
        if args.needle_at.is_some() || args.needle_count != 1 {
            return Err(WorkloadError::Needle(
                "--needle-count/--needle-at need --needle FIELD=VALUE".into(),
            ));
        }
    } else {
        let fields =
            args.needles.iter().map(|n| parse_needle_field(n)).collect::<Result<Vec<_>, _>>()?;
        spec.needle = Some(NeedleSpec { fields, count: args.needle_count, at: args.needle_at });
    }
    spec.validate()?;
    Ok(spec)
}

/// Writes the records, one per line, in batches; paced when `rate` is given.
fn write_all(mut generator: Generator, rate: Option<f64>, out: &mut impl Write) -> io::Result<()> {
    let pacer = rate.map(|r| Pacer::new(r, Instant::now()));
    let mut buf = Vec::with_capacity(BATCH_BYTES + 4096);
    while !generator.is_done() {
        if let Some(pacer) = &pacer {
            let next = generator.produced();
            if next >= pacer.due(Instant::now()) {
                // Caught up: hand over what is written, then wait for the next record's turn.
                out.write_all(&buf)?;
                out.flush()?;
                buf.clear();
                std::thread::sleep(pacer.when(next).saturating_duration_since(Instant::now()));
            }
        }
        generator.write_next(&mut buf);
        buf.push(b'\n');
        if buf.len() >= BATCH_BYTES {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    out.write_all(&buf)?;
    out.flush()
}
