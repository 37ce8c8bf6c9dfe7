//! The limits and defaults a query is validated against. The runtime fills this from needle.toml,
//! the environment and flags; the defaults are Bullet's where Bullet has one.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct QueryConfig {
    /// Duration of `STREAM()` with no duration, in ms.
    pub default_duration_ms: u64,
    /// Longest duration a query may ask for, in ms; `STREAM(MAX, TIME)` means this.
    pub max_duration_ms: u64,
    /// RAW result size when the query has no LIMIT (Bullet: 500).
    pub default_raw_size: u64,
    /// Largest LIMIT a RAW query may ask for (Bullet: 500).
    pub max_raw_size: u64,
    /// Smallest window emit interval for time windows, in ms (Bullet: 1000).
    pub min_window_emit_ms: u64,
    /// Groups kept exactly by GROUP BY / DISTINCT; past this new groups are dropped and the
    /// metadata says so.
    pub max_groups: u64,
    /// Theta sketch nominal entries for COUNT DISTINCT (Bullet: 16384).
    pub count_distinct_nominal_entries: u32,
    /// KLL sketch k for QUANTILE / FREQ / CUMFREQ.
    pub distribution_k: u16,
    /// Most points a distribution may ask for.
    pub max_distribution_points: u64,
    /// Frequent-items sketch maximum map size for TOP K (a power of two).
    pub top_k_max_map_size: u32,
    /// Largest k a TOP K may ask for.
    pub max_top_k: u64,
    /// "Now" for the relative times of history queries (`'-15m'`) and the default end of
    /// `HISTORY(from)`, ms since the epoch; `None`: the wall clock when the query is compiled.
    /// Not a setting: tests fix it so results do not depend on the day they run.
    #[serde(skip)]
    pub now_ms: Option<i64>,
}

impl Default for QueryConfig {
    fn default() -> Self {
        Self {
            default_duration_ms: 30_000,
            max_duration_ms: 600_000,
            default_raw_size: 500,
            max_raw_size: 500,
            min_window_emit_ms: 1_000,
            max_groups: 10_000,
            count_distinct_nominal_entries: 16_384,
            distribution_k: 200,
            max_distribution_points: 100,
            top_k_max_map_size: 1_024,
            max_top_k: 500,
            now_ms: None,
        }
    }
}
