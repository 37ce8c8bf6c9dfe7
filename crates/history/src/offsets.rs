//! Which of a source's records the store keeps, by the source's own offsets: what lets a Kafka
//! consumer that takes a partition over (after a kill, or a restart) tell the records already
//! in history from the ones it must keep, so each record is kept once.
//!
//! - A source that numbers its records (Kafka: a topic's partition, named `topic/partition`)
//!   hands the store, with each batch, the range of offsets the batch came from
//!   ([`Store::append_from`](crate::Store::append_from)). A flush writes the ranges of the
//!   records it flushes into each of its parts ([`crate::part::META_OFFSETS`]); a merge
//!   writes the union of its inputs'.
//! - [`Store::kept_offsets`](crate::Store::kept_offsets) says, per stream, the offset after
//!   the last record kept: over this writer's parts, and on object storage over the manifest's
//!   [`KeptOffset`]s as well (the uploads of every writer sharing the store).
//! - On object storage, a part a crash left waiting for upload is dropped instead of uploaded
//!   when another writer has since kept records of one of its streams from before the part's
//!   end ([`conflicts`]): that writer read those records again from the source (their offsets
//!   were never committed), so uploading the part would keep them twice.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The offsets a part's (or a batch's) records came from, in one source stream:
/// `[first, next)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetRange {
    pub first: i64,
    pub next: i64,
}

/// Per source stream (`topic/partition`), an offset range.
pub type OffsetRanges = BTreeMap<String, OffsetRange>;

/// In the manifest, per source stream: the offset after the last record kept in the store, and
/// the writer whose upload kept it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptOffset {
    pub next: i64,
    pub writer: String,
}

/// Widens `into` to cover `from` as well.
pub fn widen(into: &mut OffsetRanges, from: &OffsetRanges) {
    for (stream, range) in from {
        into.entry(stream.clone())
            .and_modify(|r| {
                r.first = r.first.min(range.first);
                r.next = r.next.max(range.next);
            })
            .or_insert(*range);
    }
}

/// Raises `kept` (stream → offset after the last record kept) to what `ranges` reach.
pub fn raise(kept: &mut BTreeMap<String, i64>, ranges: &OffsetRanges) {
    for (stream, range) in ranges {
        let slot = kept.entry(stream.clone()).or_insert(range.next);
        *slot = (*slot).max(range.next);
    }
}

/// Records `writer`'s upload of parts with `ranges` in the manifest's kept offsets.
pub fn record_upload(kept: &mut BTreeMap<String, KeptOffset>, writer: &str, ranges: &OffsetRanges) {
    for (stream, range) in ranges {
        match kept.get_mut(stream) {
            Some(k) if k.next >= range.next => {}
            Some(k) => *k = KeptOffset { next: range.next, writer: writer.to_owned() },
            None => {
                kept.insert(
                    stream.clone(),
                    KeptOffset { next: range.next, writer: writer.to_owned() },
                );
            }
        }
    }
}

/// The first stream of `ranges` that another writer than `writer` has kept records of from
/// before the range's end: a part with these ranges, never uploaded, holds records that
/// writer read again.
pub fn conflicts<'a>(
    kept: &'a BTreeMap<String, KeptOffset>,
    writer: &str,
    ranges: &'a OffsetRanges,
) -> Option<(&'a str, &'a KeptOffset)> {
    ranges.iter().find_map(|(stream, range)| {
        let k = kept.get(stream)?;
        (k.writer != writer && k.next > range.first).then_some((stream.as_str(), k))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(list: &[(&str, i64, i64)]) -> OffsetRanges {
        list.iter().map(|(s, f, n)| (s.to_string(), OffsetRange { first: *f, next: *n })).collect()
    }

    #[test]
    fn widening_keeps_the_lowest_first_and_the_highest_next() {
        let mut into = ranges(&[("t/0", 10, 20)]);
        widen(&mut into, &ranges(&[("t/0", 5, 12), ("t/1", 0, 3)]));
        assert_eq!(into, ranges(&[("t/0", 5, 20), ("t/1", 0, 3)]));
    }

    #[test]
    fn an_upload_raises_the_kept_offset_and_names_its_writer_only_when_it_goes_further() {
        let mut kept = BTreeMap::new();
        record_upload(&mut kept, "a", &ranges(&[("t/0", 0, 100)]));
        record_upload(&mut kept, "b", &ranges(&[("t/0", 50, 80)]));
        assert_eq!(kept["t/0"], KeptOffset { next: 100, writer: "a".into() });
        record_upload(&mut kept, "b", &ranges(&[("t/0", 100, 150)]));
        assert_eq!(kept["t/0"], KeptOffset { next: 150, writer: "b".into() });
        let mut next = BTreeMap::new();
        raise(&mut next, &ranges(&[("t/0", 0, 7), ("t/1", 3, 4)]));
        raise(&mut next, &ranges(&[("t/0", 2, 5)]));
        assert_eq!(next, BTreeMap::from([("t/0".into(), 7), ("t/1".into(), 4)]));
    }

    #[test]
    fn a_waiting_part_conflicts_only_with_another_writer_past_its_start() {
        let kept = BTreeMap::from([
            ("t/0".to_string(), KeptOffset { next: 120, writer: "b".into() }),
            ("t/1".to_string(), KeptOffset { next: 500, writer: "a".into() }),
        ]);
        // its own later uploads are no conflict; another writer's from before its start is none
        assert!(conflicts(&kept, "a", &ranges(&[("t/1", 400, 450)])).is_none());
        assert!(conflicts(&kept, "a", &ranges(&[("t/0", 120, 130)])).is_none());
        assert!(conflicts(&kept, "a", &ranges(&[("t/2", 0, 1)])).is_none());
        let waiting = ranges(&[("t/0", 100, 130)]);
        let (stream, by) = conflicts(&kept, "a", &waiting).unwrap();
        assert_eq!((stream, by.writer.as_str()), ("t/0", "b"));
    }
}
