//! Pushes typed events from code and prints a windowed TOP K as each window closes.
//!
//! ```text
//! cargo run --release -p needle --example typed_top_k -- [WINDOWS]
//! ```
//! A simulated shop: page views of products, as structs, written into needle's records field by
//! field (no JSON). The query keeps the three most viewed products of every second.

use needle::Needle;
use std::time::{Duration, Instant};

/// One page view, as the program holds it.
struct PageView<'a> {
    product: &'a str,
    country: &'a str,
    ms_on_page: i64,
}

const PRODUCTS: [&str; 6] = ["kettle", "lamp", "desk", "chair", "mug", "rug"];

fn main() -> Result<(), needle::Error> {
    let windows: u64 = std::env::args().nth(1).and_then(|n| n.parse().ok()).unwrap_or(3);
    let needle = Needle::builder().workers(2).start()?;
    let query = needle.query(&format!(
        "SELECT TOP(3, product) FROM STREAM({}, TIME) WHERE ms_on_page >= 1000 \
         WINDOWING TUMBLING(1000, TIME)",
        windows * 1000
    ))?;

    // the producer: its own thread, pushing until the query is over
    let mut pusher = needle.pusher()?;
    let until = Instant::now() + Duration::from_millis(windows * 1000 + 200);
    let producer = std::thread::spawn(move || -> Result<u64, needle::Error> {
        let mut pushed = 0u64;
        while Instant::now() < until {
            for i in 0..10_000u64 {
                // a skewed mix: earlier products are viewed more (6, 5, 4, 3, 2, 1 in 21)
                let n = (pushed + i) as usize;
                let product = match n % 21 {
                    0..=5 => 0,
                    6..=10 => 1,
                    11..=14 => 2,
                    15..=17 => 3,
                    18..=19 => 4,
                    _ => 5,
                };
                let view = PageView {
                    product: PRODUCTS[product],
                    country: if n.is_multiple_of(4) { "nz" } else { "fr" },
                    ms_on_page: (n % 5000) as i64,
                };
                pusher.push_with(|event| {
                    event
                        .set_str("product", view.product)
                        .set_str("country", view.country)
                        .set_i64("ms_on_page", view.ms_on_page);
                })?;
            }
            pushed += 10_000;
            pusher.flush()?;
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(pushed)
    });

    for emission in query {
        let window = emission.window_number();
        let top: Vec<String> = emission
            .records
            .iter()
            .map(|r| {
                let field = |name: &str| r.get(name).map_or_else(String::new, |v| v.to_json());
                format!("{} ({} views)", field("product"), field("Count"))
            })
            .collect();
        println!("window {window}: {}", top.join(", "));
    }
    let pushed = producer.join().expect("the producer does not panic")?;
    let counts = needle.counts();
    println!(
        "pushed {pushed} page views; read {}, {} of them matched",
        counts.records_read, counts.records_matched
    );
    Ok(())
}
