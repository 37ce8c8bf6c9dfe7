//! A plan in words, for `needle explain`: what is exploded, filtered, aggregated (and, for
//! sketches, which sketch and how large its error can be), post-aggregated and windowed, and how
//! long the query runs.
//!
//! Error figures are the sketches' published bounds, computed from the plan's parameters:
//! - Theta (COUNT DISTINCT) with k nominal entries: exact below k distinct values; beyond, a
//!   relative standard error of 1/sqrt(k) (16384 → 0.78%).
//! - KLL (QUANTILE / FREQ / CUMFREQ) with parameter k: normalized rank error 2.296/k^0.9723 for a
//!   single rank and 2.446/k^0.9433 for the probability of an interval (k = 200 → 1.33% and
//!   1.65%), with 99% confidence (DataSketches' fitted formulas).
//! - Frequent items (TOP K) with maximum map size M: each count is at most 3.5/M × (the number of
//!   records counted) away from its true value (M = 1024 → 0.34%).

use crate::ast::{DistributionKind, Include, Points, StreamDuration, WindowKind, WindowUnit};
use crate::history::iso;
use crate::plan::{
    AggregateFunction, Aggregation, HistoryPlan, NamedAggregate, NamedExpr, Plan, Projection, Stage,
};
use std::fmt::Write;

/// Theta sketch relative standard error for `k` nominal entries.
pub fn theta_rse(k: u32) -> f64 {
    1.0 / (k as f64).sqrt()
}

/// KLL normalized rank error for `k`: `(single rank, interval probability)`.
pub fn kll_rank_error(k: u16) -> (f64, f64) {
    let k = k as f64;
    (2.296 / k.powf(0.9723), 2.446 / k.powf(0.9433))
}

/// Frequent-items maximum count error as a fraction of the records counted.
pub fn frequent_items_epsilon(max_map_size: u32) -> f64 {
    3.5 / max_map_size as f64
}

fn pct(x: f64) -> String {
    format!("{:.2}%", x * 100.0)
}

fn unit(u: WindowUnit, n: u64) -> String {
    match u {
        WindowUnit::Time => format!("{n} ms"),
        WindowUnit::Record if n == 1 => "record".to_string(),
        WindowUnit::Record => format!("{n} records"),
    }
}

/// Describes `plan` in plain sentences, one step per line.
pub fn explain(plan: &Plan) -> String {
    let mut out = String::new();
    let how = match plan.requested_duration {
        StreamDuration::Default => " (the default duration)",
        StreamDuration::Max => " (the maximum duration)",
        StreamDuration::Millis(_) => "",
    };
    match plan.history {
        Some(HistoryPlan { from_ms, to_ms: Some(to_ms), live: false, .. }) => {
            let _ = writeln!(
                out,
                "Reads the stored records from {} to {} (record time), and ends when they are read.",
                iso(from_ms),
                iso(to_ms)
            );
        }
        Some(HistoryPlan { from_ms, .. }) => {
            let _ = writeln!(
                out,
                "Reads the stored records from {} on, then runs for {} ms{how} over the records \
                 that arrive (each record counted once).",
                iso(from_ms),
                plan.duration_ms
            );
        }
        None => {
            let _ = writeln!(
                out,
                "Runs for {} ms{how} over the records that arrive.",
                plan.duration_ms
            );
        }
    }
    let _ = writeln!(out, "{}", window(plan));
    if plan.history.is_some() && matches!(plan.window, Some(w) if is_time_window(w)) {
        let _ = writeln!(
            out,
            "Over stored records, time windows are buckets of record time, aligned to the epoch."
        );
    }
    let _ = writeln!(out);
    if plan.outer.is_some() {
        let _ = writeln!(out, "Inner query:");
    }
    stage(&mut out, &plan.stage, plan.outer.is_none() && plan.window.is_none());
    if let Some(outer) = &plan.outer {
        let _ = writeln!(out);
        let _ =
            writeln!(out, "Outer query, run over the inner query's results each time it emits:");
        stage(&mut out, outer, false);
    }
    out
}

fn is_time_window(w: WindowKind) -> bool {
    matches!(
        w,
        WindowKind::Tumbling { unit: WindowUnit::Time, .. }
            | WindowKind::Every { unit: WindowUnit::Time, .. }
    )
}

fn window(plan: &Plan) -> String {
    match plan.window {
        None => "Emits one result, when the query ends.".to_string(),
        Some(WindowKind::Tumbling { every, unit: u }) => format!(
            "Emits a result every {} (tumbling window): each covers only that interval's records.",
            unit(u, every)
        ),
        Some(WindowKind::Every { every, unit: u, include: Include::All }) => format!(
            "Emits a result every {} over everything since the query started (additive window).",
            unit(u, every)
        ),
        Some(WindowKind::Every {
            every: 1,
            unit: WindowUnit::Record,
            include: Include::First { .. },
        }) => "Emits each matching record as soon as it arrives (sliding window of 1 record)."
            .to_string(),
        Some(WindowKind::Every { every, unit: u, include: Include::First { count, unit: fu } }) => {
            format!(
                "Emits a result every {}, covering the first {} of each interval.",
                unit(u, every),
                unit(fu, count)
            )
        }
    }
}

fn named(list: &[NamedExpr]) -> String {
    list.iter()
        .map(|n| {
            if n.name == n.expr.to_string() {
                n.name.clone()
            } else {
                format!("{} AS {}", n.expr, n.name)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn aggregate(a: &NamedAggregate) -> String {
    let text = match (a.function, &a.input) {
        (AggregateFunction::Count, _) => "COUNT(*)".to_string(),
        (f, Some(input)) => {
            let f = match f {
                AggregateFunction::Sum => "SUM",
                AggregateFunction::Min => "MIN",
                AggregateFunction::Max => "MAX",
                AggregateFunction::Avg => "AVG",
                AggregateFunction::Count => "COUNT",
            };
            format!("{f}({input})")
        }
        (_, None) => "?".to_string(),
    };
    if text == a.name {
        text
    } else {
        format!("{text} AS {}", a.name)
    }
}

fn points(kind: DistributionKind, p: &Points) -> String {
    match (kind, p) {
        (DistributionKind::Quantile, Points::Linear { count }) => {
            format!("{count} evenly spaced fractions from 0 to 1")
        }
        (_, Points::Linear { count }) => {
            format!("{count} evenly spaced points between the smallest and largest value seen")
        }
        (_, Points::Region { start, end, step }) => {
            format!("the points from {start} to {end} in steps of {step}")
        }
        (_, Points::Manual { points }) => {
            let list: Vec<String> = points.iter().map(|p| p.to_string()).collect();
            format!("the points {}", list.join(", "))
        }
    }
}

fn stage(out: &mut String, stage: &Stage, ends_early: bool) {
    let mut step = 0;
    let mut line = |out: &mut String, text: String| {
        step += 1;
        let _ = writeln!(out, "  {step}. {text}");
    };
    for e in &stage.explode {
        let into = e.aliases.join(", ");
        let how = if e.lateral {
            "keeping the record's other fields (LATERAL VIEW)"
        } else {
            "replacing each record by the exploded fields"
        };
        let outer = if e.outer {
            "; a record whose list or map is empty or missing is kept once, with NULLs (OUTER)"
        } else {
            "; a record whose list or map is empty or missing is dropped"
        };
        let each = if e.aliases.len() == 2 { "map entry" } else { "list element" };
        line(out, format!("Explodes {} into {into}, one record per {each}, {how}{outer}.", e.expr));
    }
    match &stage.filter {
        Some(f) => line(
            out,
            format!("Keeps the records for which {f} is TRUE (NULL counts as not matching)."),
        ),
        None => line(out, "Keeps every record (no WHERE).".to_string()),
    }
    match &stage.aggregation {
        Aggregation::Raw { projection, size } => {
            let what = match projection {
                Projection::All => "whole records".to_string(),
                Projection::Fields { fields } => format!("the columns {}", named(fields)),
                Projection::AllAnd { fields } => format!("whole records plus {}", named(fields)),
            };
            let how_many = if ends_early {
                format!("at most {size} records in total; the query ends as soon as it has them")
            } else {
                format!("at most {size} records per emission")
            };
            line(out, format!("RAW: emits {what}, {how_many}."));
        }
        Aggregation::GroupAll { aggregates } => {
            let list: Vec<String> = aggregates.iter().map(aggregate).collect();
            line(
                out,
                format!(
                    "GROUP ALL: computes {} over all kept records, exactly; one result record.",
                    list.join(", ")
                ),
            );
        }
        Aggregation::GroupBy { keys, aggregates, max_groups } => {
            let list: Vec<String> = aggregates.iter().map(aggregate).collect();
            let per = if list.is_empty() {
                "one record per distinct combination".to_string()
            } else {
                format!("computes {} per group", list.join(", "))
            };
            line(
                out,
                format!(
                    "GROUP BY {}: {per}; exact for up to {max_groups} groups (past that, new groups are dropped and the metadata says so).",
                    named(keys)
                ),
            );
        }
        Aggregation::CountDistinct { name, fields, nominal_entries } => {
            let list: Vec<String> = fields.iter().map(|f| f.to_string()).collect();
            line(
                out,
                format!(
                    "COUNT DISTINCT: counts the distinct values of ({}) into the column \"{name}\" with a Theta sketch of {nominal_entries} nominal entries: exact below {nominal_entries} distinct values, beyond that an estimate with relative standard error ≈ 1/sqrt({nominal_entries}) = {} (±{} at 95% confidence); the bounds are in the metadata.",
                    list.join(", "),
                    pct(theta_rse(*nominal_entries)),
                    pct(2.0 * theta_rse(*nominal_entries)),
                ),
            );
        }
        Aggregation::Distribution { kind, value, points: p, k } => {
            let (single, interval) = kll_rank_error(*k);
            let what = match kind {
                DistributionKind::Quantile => format!(
                    "QUANTILE: the value of {value} at {} (columns Quantile, Value)",
                    points(*kind, p)
                ),
                DistributionKind::Freq => format!(
                    "FREQ: the probability and count of {value} in each interval between {}, plus the open-ended intervals below the first and above the last (columns Range, Probability, Count)",
                    points(*kind, p)
                ),
                DistributionKind::CumFreq => format!(
                    "CUMFREQ: the cumulative probability and count of {value} below each of {}, plus everything (columns Range, Probability, Count)",
                    points(*kind, p)
                ),
            };
            line(
                out,
                format!(
                    "{what}. Uses a KLL sketch with k = {k}: normalized rank error ≈ {} for a single quantile or rank, ≈ {} for an interval's probability (99% confidence); exact while the sketch holds every value. Non-numeric values are skipped.",
                    pct(single),
                    pct(interval)
                ),
            );
        }
        Aggregation::TopK { k, threshold, fields, count_name, max_map_size } => {
            let at_least = threshold.map_or(String::new(), |t| format!(" seen at least {t} times"));
            line(
                out,
                format!(
                    "TOP K: the {k} most frequent values of ({}){at_least}, with their count in the column \"{count_name}\". Uses a frequent-items sketch with maximum map size {max_map_size}: each count is off by at most 3.5/{max_map_size} = {} of the records counted (the bounds are in the metadata); no false negatives: every value whose true count exceeds that error is reported.",
                    named(fields),
                    pct(frequent_items_epsilon(*max_map_size))
                ),
            );
        }
    }
    let post = &stage.post;
    for c in &post.computations {
        line(out, format!("Computes {} = {}.", c.name, c.expr));
    }
    if let Some(h) = &post.having {
        line(out, format!("Keeps the result records for which {h} is TRUE (HAVING)."));
    }
    if !post.order_by.is_empty() {
        let list: Vec<String> = post
            .order_by
            .iter()
            .map(|o| {
                format!("{} {}", o.expr, if o.descending { "descending" } else { "ascending" })
            })
            .collect();
        line(
            out,
            format!(
                "Sorts the result records by {} (NULLs first ascending, last descending).",
                list.join(", then ")
            ),
        );
    }
    if let Some(n) = post.limit {
        line(out, format!("Keeps the first {n} result records."));
    }
    if let Some(cols) = &post.output {
        line(
            out,
            format!(
                "Emits the columns {} (columns computed only for HAVING or ORDER BY are left out).",
                cols.join(", ")
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_error_bounds() {
        assert_eq!(pct(theta_rse(16384)), "0.78%");
        let (single, interval) = kll_rank_error(200);
        assert_eq!((pct(single), pct(interval)), ("1.33%".to_string(), "1.65%".to_string()));
        assert_eq!(pct(frequent_items_epsilon(1024)), "0.34%");
    }

    fn words(bql: &str) -> String {
        let plan = crate::compile(bql, &crate::QueryConfig::default())
            .unwrap_or_else(|e| panic!("{}", e.render(bql)));
        explain(&plan)
    }

    #[test]
    fn every_step_is_described_in_order() {
        let w = words(
            "SELECT a, COUNT(*) AS n FROM STREAM(60000, TIME) LATERAL VIEW OUTER EXPLODE(m) AS (k, v) \
             WHERE v > 1 GROUP BY a HAVING n > 5 ORDER BY SUM(x) DESC WINDOWING TUMBLING(5000, TIME) LIMIT 5",
        );
        let steps = [
            "Runs for 60000 ms over",
            "Emits a result every 5000 ms (tumbling window)",
            "1. Explodes m into k, v, one record per map entry, keeping the record's other fields",
            "kept once, with NULLs (OUTER)",
            "2. Keeps the records for which v > 1 is TRUE",
            "3. GROUP BY a: computes COUNT(*) AS n, SUM(x) per group; exact for up to 10000 groups",
            "4. Keeps the result records for which n > 5 is TRUE",
            "5. Sorts the result records by \"SUM(x)\" descending",
            "6. Keeps the first 5 result records.",
            "7. Emits the columns a, n",
        ];
        let mut from = 0;
        for step in steps {
            let at = w[from..]
                .find(step)
                .unwrap_or_else(|| panic!("{step:?} missing after {from} in\n{w}"));
            from += at + step.len();
        }
    }

    #[test]
    fn raw_outer_and_windows() {
        let w = words("SELECT a FROM STREAM() WHERE b = 1 LIMIT 7");
        assert!(w.contains("RAW: emits the columns a, at most 7 records in total; the query ends as soon as it has them."), "{w}");
        assert!(w.contains("Emits one result, when the query ends."), "{w}");
        let w = words("SELECT * FROM STREAM() WINDOWING EVERY(1, RECORD, FIRST, 1, RECORD)");
        assert!(w.contains("Emits each matching record as soon as it arrives"), "{w}");
        assert!(w.contains("at most 500 records per emission"), "{w}");
        let w = words("SELECT AVG(n) FROM (SELECT a, COUNT(*) AS n FROM STREAM(MAX, TIME) GROUP BY a WINDOWING EVERY(2000, TIME, ALL))");
        assert!(w.contains("(the maximum duration)"), "{w}");
        assert!(w.contains("over everything since the query started (additive window)"), "{w}");
        assert!(
            w.contains("Inner query:")
                && w.contains("Outer query, run over the inner query's results"),
            "{w}"
        );
        assert!(w.contains("GROUP ALL: computes AVG(n) over all kept records"), "{w}");
    }

    #[test]
    fn sketches_state_their_error() {
        let w = words("SELECT COUNT(DISTINCT a, b) AS u FROM STREAM()");
        assert!(w.contains("distinct values of (a, b) into the column \"u\" with a Theta sketch of 16384 nominal entries"), "{w}");
        assert!(w.contains("1/sqrt(16384) = 0.78%"), "{w}");
        let w = words("SELECT CUMFREQ(d, MANUAL, 1, 10) FROM STREAM()");
        assert!(
            w.contains(
                "CUMFREQ: the cumulative probability and count of d below each of the points 1, 10"
            ),
            "{w}"
        );
        assert!(
            w.contains("k = 200: normalized rank error ≈ 1.33%")
                && w.contains("≈ 1.65% for an interval"),
            "{w}"
        );
        let w = words("SELECT a, COUNT(*) AS c FROM STREAM() GROUP BY a HAVING c >= 3 ORDER BY c DESC LIMIT 4");
        assert!(w.contains("TOP K: the 4 most frequent values of (a) seen at least 3 times, with their count in the column \"c\""), "{w}");
        assert!(w.contains("3.5/1024 = 0.34%"), "{w}");
    }
}
