//! Reads a Kafka topic and prints the emissions of a query as JSON lines.
//!
//! ```text
//! cargo run -p needle --example kafka_reader -- 'kafka://127.0.0.1:9092/events?start=earliest' \
//!     "SELECT * FROM STREAM(10000, TIME) WHERE kind = 'needle' LIMIT 10"
//! ```
//! The source spec is the one `needle serve --source` takes: brokers, topic, and `start`
//! (`earliest`, `latest`, or `committed`, the default) and `group`. The program ends with the
//! query: after its duration, or once it has its LIMIT of records.

use needle::Needle;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let Some(spec) = args.next() else {
        eprintln!("usage: kafka_reader kafka://HOST:PORT/TOPIC[?start=earliest] [QUERY]");
        std::process::exit(2);
    };
    let text = args.next().unwrap_or_else(|| "SELECT * FROM STREAM(10000, TIME) LIMIT 10".into());
    let needle = Needle::builder().source(spec).start()?;
    let query = needle.query(&text)?;
    for emission in query {
        println!("{}", emission.to_json_string());
    }
    let counts = needle.counts();
    eprintln!("read {} records, {} matched", counts.records_read, counts.records_matched);
    Ok(())
}
