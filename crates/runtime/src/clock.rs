//! The runtime's clock: wall-clock time in milliseconds since the epoch, read by every thread
//! that stamps or ticks something (workers, the joiner, the history tap, the runtime itself).
//! The engine never reads a clock; it is handed this one's readings.

/// Wall-clock time in ms since the epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
