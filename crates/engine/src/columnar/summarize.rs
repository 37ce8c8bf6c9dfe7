//! Summarizing: the rows of a batch (or of a block's batches) in a time range that pass a
//! [`Filter`], folded per time bucket and per group (the values of the GROUP BY fields) into
//! each field's count, sum, min and max — what COUNT, SUM, AVG, MIN and MAX need — without
//! building a record.

use super::filter::{stretch_end, Filter};
use super::layout::{time_values, TIME_COLUMN};
use super::stats::ColumnStats;
use super::view::{ColumnView, Columns};
use arrow_array::{Array, Int32Array, RecordBatch, StringArray};
use needle_record::Value;
use std::collections::{BTreeMap, HashMap};

/// What a [`Summarizer`] (or [`summarize_batch`]) folds a block into.
pub struct GroupRequest<'a> {
    /// The GROUP BY fields (none: one group).
    pub keys: &'a [String],
    /// The fields summarized for the aggregates.
    pub fields: &'a [String],
    pub filter: Option<&'a Filter>,
    /// The time bucket of a record time (a time window's); `None`: one bucket, 0.
    pub bucket: Option<&'a (dyn Fn(i64) -> i64 + Sync)>,
}

impl GroupRequest<'_> {
    /// Every field the request reads.
    pub fn columns(&self) -> Vec<String> {
        let mut all: Vec<String> = self.keys.to_vec();
        let filtered = self.filter.map(Filter::fields).unwrap_or_default();
        for f in self.fields.iter().chain(filtered) {
            if !all.contains(f) {
                all.push(f.clone());
            }
        }
        all
    }
}

/// The rows of one batch that pass the request's filter, folded per group into what its
/// aggregates need, with no record built: for events that arrive as columns (pushed from code)
/// rather than from a stored block. The batch's columns are named by their fields (none may
/// begin with [`super::layout::RESERVED`]); there is one time bucket (the request's `bucket`
/// is not read). Also the rows that passed the filter (`None`: there is none), for a caller
/// that counts the rows some query of several matched. `None` when a column cannot be read
/// this way.
pub fn summarize_batch(
    request: &GroupRequest<'_>,
    batch: &RecordBatch,
) -> Option<(Vec<GroupSummary>, Option<Vec<bool>>)> {
    let mut summarizer = Summarizer::new(request, i64::MIN, i64::MAX, Some(0));
    summarizer.passed = Some(Vec::new());
    summarizer.add(batch, &[])?;
    let passed = summarizer.passed.take().filter(|_| request.filter.is_some());
    Some((summarizer.finish().into_iter().flat_map(|bucket| bucket.groups).collect(), passed))
}

/// One time bucket of a block: the rows in range read there, and the groups of those that
/// passed the filter.
#[derive(Debug, Clone, PartialEq)]
pub struct BucketSummary {
    pub bucket: i64,
    /// The latest record time of the bucket's rows.
    pub last_ms: i64,
    /// Rows read (in the time range), whether or not they passed the filter.
    pub seen: u64,
    pub groups: Vec<GroupSummary>,
}

/// One group of a bucket: its key values, its rows, and each requested field's summary over
/// them (in [`GroupRequest::fields`]' order).
#[derive(Debug, Clone, PartialEq)]
pub struct GroupSummary {
    pub keys: Vec<Value>,
    pub rows: u64,
    pub fields: Vec<ColumnStats>,
}

/// Folds batches of one block (one schema) into buckets and groups (see the module doc).
pub struct Summarizer<'r> {
    request: &'r GroupRequest<'r>,
    /// The block's last time, when all of it is in range and unbucketed (no time read).
    whole: Option<i64>,
    from_ms: i64,
    to_ms: i64,
    keys: Vec<KeyCodes>,
    /// A group's codes (more than one key) → its number.
    tuples: HashMap<Vec<u32>, u64>,
    /// (bucket, group number) → slot, with time buckets.
    slots: HashMap<(i64, u64), u32>,
    /// group number → slot, without (one bucket).
    by_group: Vec<u32>,
    heads: Vec<(i64, u64)>,
    rows: Vec<u64>,
    accs: Vec<Accs>,
    /// bucket → (last time, rows seen)
    buckets: BTreeMap<i64, (i64, u64)>,
    /// When asked for ([`summarize_batch`]): the rows of the last batch that passed the filter.
    passed: Option<Vec<bool>>,
}

/// Row skipped (out of range, or filtered out).
const SKIP: u32 = u32::MAX;

impl<'r> Summarizer<'r> {
    /// `whole`: every row of the block lies in the range and there are no time buckets — the
    /// block's last time, and its time column is not read.
    pub fn new(
        request: &'r GroupRequest<'r>,
        from_ms: i64,
        to_ms: i64,
        whole: Option<i64>,
    ) -> Self {
        Self {
            request,
            whole,
            from_ms,
            to_ms,
            keys: request.keys.iter().map(|_| KeyCodes::default()).collect(),
            tuples: HashMap::new(),
            slots: HashMap::new(),
            by_group: Vec::new(),
            heads: Vec::new(),
            rows: Vec::new(),
            accs: Vec::new(),
            buckets: BTreeMap::new(),
            passed: None,
        }
    }

    /// Folds one batch in; `None` when a column cannot be read here (JSON text).
    pub fn add(&mut self, batch: &RecordBatch, json_columns: &[String]) -> Option<()> {
        let columns = Columns::of(batch, json_columns);
        let keep = match self.request.filter {
            Some(filter) => Some(filter.rows(&columns)?),
            None => None,
        };
        if let (Some(passed), Some(keep)) = (&mut self.passed, &keep) {
            passed.clone_from(keep);
        }
        let fields: Vec<ColumnView<'_>> =
            self.request.fields.iter().map(|f| columns.get(f)).collect();
        if self.accs.is_empty() {
            self.accs = fields.iter().map(|c| Accs::for_column(*c)).collect::<Option<_>>()?;
        }
        // the rows in range, counted per bucket (seen), then those that pass the filter
        // (`None`: every row)
        let (mut pass, buckets) = match self.whole {
            Some(last_ms) => {
                if batch.num_rows() > 0 {
                    self.note_bucket(0, last_ms, batch.num_rows() as u64);
                }
                (None, None)
            }
            None => {
                let times = batch.column_by_name(TIME_COLUMN)?;
                let times = time_values(times.as_ref())?;
                let pass: Vec<bool> =
                    times.iter().map(|t| *t >= self.from_ms && *t < self.to_ms).collect();
                let buckets: Option<Vec<i64>> =
                    self.request.bucket.map(|bucket| times.iter().map(|t| bucket(*t)).collect());
                self.count_seen(times, &pass, buckets.as_deref());
                (Some(pass), buckets)
            }
        };
        if let Some(keep) = keep {
            match &mut pass {
                Some(pass) => pass.iter_mut().zip(keep).for_each(|(p, k)| *p &= k),
                None => pass = Some(keep),
            }
        }
        let key_columns: Vec<ColumnView<'_>> =
            self.request.keys.iter().map(|k| columns.get(k)).collect();
        let runs = match (key_columns.as_slice(), &buckets, pass) {
            // every row, one group, or a text key without NULL: runs straight from the keys
            ([], None, None) => match batch.num_rows() {
                0 => Vec::new(),
                rows => vec![Run { slot: self.slot_of_group(0) as usize, start: 0, end: rows }],
            },
            ([ColumnView::Dictionary(keys, values)], None, None) if keys.null_count() == 0 => {
                self.runs_by_dictionary(keys.values(), values)?
            }
            (key_columns, buckets, pass) => {
                let pass = pass.unwrap_or_else(|| vec![true; batch.num_rows()]);
                match (key_columns, buckets) {
                    ([], None) => self.one_group_runs(&pass),
                    ([ColumnView::Dictionary(keys, values)], None) => {
                        runs(&self.slots_by_dictionary(&pass, keys, values)?)
                    }
                    _ => runs(&self.slots(&pass, key_columns, buckets.as_deref())?),
                }
            }
        };
        self.fold_runs(&runs, fields)
    }

    /// Adds each run's rows and its fields' values to its slot.
    fn fold_runs(&mut self, runs: &[Run], fields: Vec<ColumnView<'_>>) -> Option<()> {
        for run in runs {
            self.rows[run.slot] += (run.end - run.start) as u64;
        }
        for (acc, col) in self.accs.iter_mut().zip(fields) {
            acc.add(col, runs)?;
        }
        Some(())
    }

    /// One group in one bucket: a run per stretch of passing rows (a part sorted by a key
    /// then time has a stretch per key in a time range).
    fn one_group_runs(&mut self, pass: &[bool]) -> Vec<Run> {
        let mut out = Vec::new();
        let mut start = stretch_end(pass, 0, false);
        while start < pass.len() {
            let end = stretch_end(pass, start, true);
            out.push(Run { slot: 0, start, end });
            start = stretch_end(pass, end, false);
        }
        if !out.is_empty() {
            let slot = self.slot_of_group(0) as usize;
            out.iter_mut().for_each(|run| run.slot = slot);
        }
        out
    }

    /// Every row of the batch, one text key without NULL, one bucket: a run per stretch of
    /// equal dictionary keys (a part sorted by the key has long ones), its slot found once per
    /// distinct key. `None` for a key outside the dictionary.
    fn runs_by_dictionary(&mut self, keys: &[i32], values: &StringArray) -> Option<Vec<Run>> {
        let mut by_key = vec![SKIP; values.len()];
        let mut out = Vec::new();
        let mut start = 0;
        while start < keys.len() {
            let key = keys[start];
            let end = stretch_end(keys, start, key);
            let k = usize::try_from(key).ok()?;
            let cached = by_key.get_mut(k)?;
            if *cached == SKIP {
                let code = match values.is_valid(k) {
                    true => self.keys[0].text(values.value(k)),
                    false => 0,
                };
                *cached = self.slot_of_group(u64::from(code));
            }
            out.push(Run { slot: *cached as usize, start, end });
            start = end;
        }
        Some(out)
    }

    /// The slot of a group (one bucket).
    fn slot_of_group(&mut self, group: u64) -> u32 {
        match self.by_group.get(group as usize) {
            Some(s) if *s != SKIP => *s,
            _ => self.new_slot((0, group)),
        }
    }

    /// One text key read with its dictionary, one bucket: each distinct value's slot found
    /// once, each row's by its dictionary key. `None` for a key outside the dictionary.
    fn slots_by_dictionary(
        &mut self,
        pass: &[bool],
        keys: &Int32Array,
        values: &StringArray,
    ) -> Option<Vec<u32>> {
        // the slot of each dictionary entry, made when a passing row first uses it
        let mut by_key = vec![SKIP; values.len()];
        let mut null_slot = SKIP;
        let mut slot_of = vec![SKIP; pass.len()];
        let key_values = keys.values();
        let no_nulls = keys.null_count() == 0;
        // sorted by the key, rows of one value come together: the last one's slot is at hand
        let mut last: Option<(i32, u32)> = None;
        for (row, slot) in slot_of.iter_mut().enumerate() {
            if !pass[row] {
                continue;
            }
            if no_nulls {
                if let Some((key, s)) = last {
                    if key == key_values[row] {
                        *slot = s;
                        continue;
                    }
                }
            }
            let valid = no_nulls || keys.is_valid(row);
            let k = if valid { usize::try_from(key_values[row]).ok() } else { None };
            let cached = match k {
                Some(k) => by_key.get_mut(k)?,
                None => &mut null_slot,
            };
            if *cached == SKIP {
                let code = match k {
                    Some(k) if values.is_valid(k) => self.keys[0].text(values.value(k)),
                    _ => 0,
                };
                *cached = self.slot_of_group(u64::from(code));
            }
            *slot = *cached;
            if valid {
                last = Some((key_values[row], *slot));
            }
        }
        Some(slot_of)
    }

    /// The general case: each passing row's group from its keys' codes, its slot by bucket and
    /// group. `None` when a key column cannot be read here.
    fn slots(
        &mut self,
        pass: &[bool],
        key_columns: &[ColumnView<'_>],
        buckets: Option<&[i64]>,
    ) -> Option<Vec<u32>> {
        let rows = pass.len();
        let mut key_codes: Vec<Vec<u32>> = Vec::with_capacity(key_columns.len());
        for (col, codes) in key_columns.iter().zip(&mut self.keys) {
            key_codes.push(codes.code_rows(*col, rows)?);
        }
        let mut tuple = Vec::with_capacity(key_codes.len());
        let mut slot_of = vec![SKIP; rows];
        let mut last: Option<((i64, u64), u32)> = None;
        for row in 0..rows {
            if !pass[row] {
                continue;
            }
            // the group: its key's code, or its codes' number (several keys)
            let group = match key_codes.as_slice() {
                [] => 0,
                [codes] => u64::from(codes[row]),
                _ => {
                    tuple.clear();
                    tuple.extend(key_codes.iter().map(|c| c[row]));
                    match self.tuples.get(&tuple) {
                        Some(n) => *n,
                        None => {
                            let next = self.tuples.len() as u64;
                            self.tuples.insert(tuple.clone(), next);
                            next
                        }
                    }
                }
            };
            slot_of[row] = match buckets {
                None => self.slot_of_group(group),
                Some(buckets) => {
                    let head = (buckets[row], group);
                    match last {
                        Some((h, s)) if h == head => s,
                        _ => {
                            let s = match self.slots.get(&head) {
                                Some(s) => *s,
                                None => self.new_slot(head),
                            };
                            last = Some((head, s));
                            s
                        }
                    }
                }
            };
        }
        Some(slot_of)
    }

    /// A new slot for a (bucket, group).
    fn new_slot(&mut self, head: (i64, u64)) -> u32 {
        let s = self.heads.len() as u32;
        if self.request.bucket.is_none() {
            let group = head.1 as usize;
            if self.by_group.len() <= group {
                self.by_group.resize(group + 1, SKIP);
            }
            self.by_group[group] = s;
        } else {
            self.slots.insert(head, s);
        }
        self.heads.push(head);
        self.rows.push(0);
        for acc in &mut self.accs {
            acc.grow();
        }
        s
    }

    /// Counts the rows in range (`in_range`) as seen, per bucket, with each bucket's latest
    /// time.
    fn count_seen(&mut self, times: &[i64], in_range: &[bool], buckets: Option<&[i64]>) {
        let Some(buckets) = buckets else {
            let mut seen = 0;
            let mut last_ms = i64::MIN;
            for (t, p) in times.iter().zip(in_range) {
                if *p {
                    seen += 1;
                    last_ms = last_ms.max(*t);
                }
            }
            if seen > 0 {
                self.note_bucket(0, last_ms, seen);
            }
            return;
        };
        let mut current: Option<(i64, i64, u64)> = None; // bucket, last time, seen
        for ((t, p), bucket) in times.iter().zip(in_range).zip(buckets) {
            if !*p {
                continue;
            }
            match &mut current {
                Some((b, last_ms, seen)) if b == bucket => {
                    *last_ms = (*last_ms).max(*t);
                    *seen += 1;
                }
                _ => {
                    if let Some((b, last_ms, seen)) = current.take() {
                        self.note_bucket(b, last_ms, seen);
                    }
                    current = Some((*bucket, *t, 1));
                }
            }
        }
        if let Some((b, last_ms, seen)) = current {
            self.note_bucket(b, last_ms, seen);
        }
    }

    fn note_bucket(&mut self, bucket: i64, last_ms: i64, seen: u64) {
        let entry = self.buckets.entry(bucket).or_insert((i64::MIN, 0));
        entry.0 = entry.0.max(last_ms);
        entry.1 += seen;
    }

    pub fn finish(self) -> Vec<BucketSummary> {
        let mut out: BTreeMap<i64, BucketSummary> = self
            .buckets
            .iter()
            .map(|(b, (last_ms, seen))| {
                (*b, BucketSummary { bucket: *b, last_ms: *last_ms, seen: *seen, groups: vec![] })
            })
            .collect();
        let tuples: HashMap<u64, &Vec<u32>> = self.tuples.iter().map(|(t, n)| (*n, t)).collect();
        for (slot, (bucket, group)) in self.heads.iter().enumerate() {
            let keys = match self.keys.len() {
                0 => vec![],
                1 => vec![self.keys[0].value(*group as u32)],
                _ => tuples[group]
                    .iter()
                    .zip(&self.keys)
                    .map(|(code, codes)| codes.value(*code))
                    .collect(),
            };
            let rows = self.rows[slot];
            let fields = self.accs.iter().map(|acc| acc.stats(slot, rows)).collect();
            if let Some(b) = out.get_mut(bucket) {
                b.groups.push(GroupSummary { keys, rows, fields });
            }
        }
        out.into_values().collect()
    }
}

/// The distinct values of one key column across a block's batches, numbered (0: NULL).
#[derive(Default)]
struct KeyCodes {
    values: Vec<Value>,
    texts: HashMap<String, u32>,
    longs: HashMap<(u8, i64), u32>,
}

impl KeyCodes {
    fn value(&self, code: u32) -> Value {
        if code == 0 {
            Value::Null
        } else {
            self.values[code as usize - 1].clone()
        }
    }

    fn text(&mut self, s: &str) -> u32 {
        if let Some(c) = self.texts.get(s) {
            return *c;
        }
        self.values.push(Value::String(s.to_owned()));
        let c = self.values.len() as u32;
        self.texts.insert(s.to_owned(), c);
        c
    }

    /// A non-text value by (type tag, 64 bits).
    fn other(&mut self, tag: u8, bits: i64, value: Value) -> u32 {
        if let Some(c) = self.longs.get(&(tag, bits)) {
            return *c;
        }
        self.values.push(value);
        let c = self.values.len() as u32;
        self.longs.insert((tag, bits), c);
        c
    }

    /// Each row's code; `None` for a JSON column.
    fn code_rows(&mut self, col: ColumnView<'_>, rows: usize) -> Option<Vec<u32>> {
        let mut out = vec![0u32; rows];
        match col {
            ColumnView::Json(_) | ColumnView::Unreadable => return None,
            ColumnView::Missing => {}
            ColumnView::Dictionary(keys, values) => {
                let by_key: Vec<u32> = (0..values.len())
                    .map(|k| if values.is_valid(k) { self.text(values.value(k)) } else { 0 })
                    .collect();
                for (i, code) in out.iter_mut().enumerate() {
                    if keys.is_valid(i) {
                        *code = usize::try_from(keys.value(i)).map_or(0, |k| by_key[k]);
                    }
                }
            }
            ColumnView::Text(a) => {
                let mut last: Option<(&str, u32)> = None;
                for (i, code) in out.iter_mut().enumerate() {
                    if a.is_valid(i) {
                        let s = a.value(i);
                        *code = match last {
                            Some((l, c)) if l == s => c,
                            _ => {
                                let c = self.text(s);
                                last = Some((s, c));
                                c
                            }
                        };
                    }
                }
            }
            scalar => {
                for (i, code) in out.iter_mut().enumerate() {
                    if let Some((tag, bits, value)) = scalar.scalar(i) {
                        *code = self.other(tag, bits, value);
                    }
                }
            }
        }
        Some(out)
    }
}

/// Rows `start..end` of a batch, all of one slot.
struct Run {
    slot: usize,
    start: usize,
    end: usize,
}

impl Run {
    fn rows(&self) -> std::ops::Range<usize> {
        self.start..self.end
    }
}

/// The runs of rows with the same slot, rows not in any ([`SKIP`]) left out.
fn runs(slot_of: &[u32]) -> Vec<Run> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < slot_of.len() {
        let (slot, start) = (slot_of[i], i);
        i += 1;
        while i < slot_of.len() && slot_of[i] == slot {
            i += 1;
        }
        if slot != SKIP {
            out.push(Run { slot: slot as usize, start, end: i });
        }
    }
    out
}

/// Count, exact sum, min and max of integers.
fn fold_ints(values: impl Iterator<Item = i64>) -> (u64, i128, i64, i64) {
    values.fold((0, 0, i64::MAX, i64::MIN), |(n, sum, lo, hi), v| {
        (n + 1, sum + i128::from(v), lo.min(v), hi.max(v))
    })
}

/// [`fold_ints`] over a slice without NULL, in one pass the compiler vectorizes: the sum kept
/// in 64 bits (wrapping), exact whenever the count times the largest magnitude stays inside
/// them; otherwise summed again in 128.
fn fold_longs(values: &[i64]) -> (u64, i128, i64, i64) {
    let (sum, lo, hi) = values.iter().fold((0i64, i64::MAX, i64::MIN), |(sum, lo, hi), v| {
        (sum.wrapping_add(*v), lo.min(*v), hi.max(*v))
    });
    let n = values.len() as u64;
    let largest = i128::from(lo).abs().max(i128::from(hi).abs());
    let total = match largest * i128::from(n) <= i128::from(i64::MAX) {
        true => i128::from(sum),
        false => values.iter().map(|v| i128::from(*v)).sum(),
    };
    (n, total, lo, hi)
}

/// Count, sum, min and max of floats (a NaN makes the sum NaN: the caller then reads records).
fn fold_floats(values: impl Iterator<Item = f64>) -> (u64, f64, f64, f64) {
    values.fold((0, 0.0, f64::INFINITY, f64::NEG_INFINITY), |(n, sum, lo, hi), v| {
        (n + 1, sum + v, if v < lo { v } else { lo }, if v > hi { v } else { hi })
    })
}

/// One field's running count, sum, min and max per slot, typed by its column.
enum Accs {
    Missing { slots: usize },
    Ints { long: bool, count: Vec<u64>, sum: Vec<i128>, min: Vec<i64>, max: Vec<i64> },
    Floats { double: bool, count: Vec<u64>, sum: Vec<f64>, min: Vec<f64>, max: Vec<f64> },
    Texts { count: Vec<u64>, min: Vec<Option<String>>, max: Vec<Option<String>> },
    Bools { count: Vec<u64>, min: Vec<bool>, max: Vec<bool> },
}

impl Accs {
    fn for_column(col: ColumnView<'_>) -> Option<Accs> {
        Some(match col {
            ColumnView::Json(_) | ColumnView::Unreadable => return None,
            ColumnView::Missing => Accs::Missing { slots: 0 },
            ColumnView::Int(_) | ColumnView::Long(_) => Accs::Ints {
                long: matches!(col, ColumnView::Long(_)),
                count: vec![],
                sum: vec![],
                min: vec![],
                max: vec![],
            },
            ColumnView::Float(_) | ColumnView::Double(_) => Accs::Floats {
                double: matches!(col, ColumnView::Double(_)),
                count: vec![],
                sum: vec![],
                min: vec![],
                max: vec![],
            },
            ColumnView::Text(_) | ColumnView::Dictionary(..) => {
                Accs::Texts { count: vec![], min: vec![], max: vec![] }
            }
            ColumnView::Bool(_) => Accs::Bools { count: vec![], min: vec![], max: vec![] },
        })
    }

    fn grow(&mut self) {
        match self {
            Accs::Missing { slots } => *slots += 1,
            Accs::Ints { count, sum, min, max, .. } => {
                count.push(0);
                sum.push(0);
                min.push(i64::MAX);
                max.push(i64::MIN);
            }
            Accs::Floats { count, sum, min, max, .. } => {
                count.push(0);
                sum.push(0.0);
                min.push(f64::INFINITY);
                max.push(f64::NEG_INFINITY);
            }
            Accs::Texts { count, min, max } => {
                count.push(0);
                min.push(None);
                max.push(None);
            }
            Accs::Bools { count, min, max } => {
                count.push(0);
                min.push(true);
                max.push(false);
            }
        }
    }

    /// Folds the column's rows into their slots, run by run (each run's figures kept in
    /// registers, then added to its slot's); `None` when the column is not of the kind the
    /// block's first batch had.
    fn add(&mut self, col: ColumnView<'_>, runs: &[Run]) -> Option<()> {
        match (self, col) {
            (Accs::Missing { .. }, ColumnView::Missing) => {}
            (
                Accs::Ints { count, sum, min, max, .. },
                col @ (ColumnView::Long(_) | ColumnView::Int(_)),
            ) => {
                let value = |i: usize| match col {
                    ColumnView::Long(a) => a.is_valid(i).then(|| a.value(i)),
                    ColumnView::Int(a) => a.is_valid(i).then(|| i64::from(a.value(i))),
                    _ => None,
                };
                for run in runs {
                    let (n, total, lo, hi) = match col {
                        // no NULL: straight over the values
                        ColumnView::Long(a) if a.null_count() == 0 => {
                            fold_longs(&a.values()[run.start..run.end])
                        }
                        _ => fold_ints(run.rows().filter_map(value)),
                    };
                    let s = run.slot;
                    count[s] += n;
                    sum[s] += total;
                    min[s] = min[s].min(lo);
                    max[s] = max[s].max(hi);
                }
            }
            (
                Accs::Floats { count, sum, min, max, .. },
                col @ (ColumnView::Double(_) | ColumnView::Float(_)),
            ) => {
                let value = |i: usize| match col {
                    ColumnView::Double(a) => a.is_valid(i).then(|| a.value(i)),
                    ColumnView::Float(a) => a.is_valid(i).then(|| f64::from(a.value(i))),
                    _ => None,
                };
                for run in runs {
                    let (n, total, lo, hi) = match col {
                        // no NULL: straight over the values
                        ColumnView::Double(a) if a.null_count() == 0 => {
                            fold_floats(a.values()[run.start..run.end].iter().copied())
                        }
                        _ => fold_floats(run.rows().filter_map(value)),
                    };
                    let s = run.slot;
                    count[s] += n;
                    sum[s] += total;
                    if lo < min[s] {
                        min[s] = lo;
                    }
                    if hi > max[s] {
                        max[s] = hi;
                    }
                }
            }
            (
                Accs::Texts { count, min, max },
                col @ (ColumnView::Text(_) | ColumnView::Dictionary(..)),
            ) => {
                for run in runs {
                    let s = run.slot;
                    for i in run.rows() {
                        let text = match col {
                            ColumnView::Text(a) if a.is_valid(i) => a.value(i),
                            ColumnView::Dictionary(keys, values) if keys.is_valid(i) => {
                                let k = usize::try_from(keys.value(i)).ok()?;
                                if values.is_null(k) {
                                    continue;
                                }
                                values.value(k)
                            }
                            _ => continue,
                        };
                        count[s] += 1;
                        if min[s].as_deref().is_none_or(|m| text < m) {
                            min[s] = Some(text.to_owned());
                        }
                        if max[s].as_deref().is_none_or(|m| text > m) {
                            max[s] = Some(text.to_owned());
                        }
                    }
                }
            }
            (Accs::Bools { count, min, max }, ColumnView::Bool(a)) => {
                for run in runs {
                    let s = run.slot;
                    for i in run.rows().filter(|i| a.is_valid(*i)) {
                        let v = a.value(i);
                        count[s] += 1;
                        min[s] &= v;
                        max[s] |= v;
                    }
                }
            }
            _ => return None,
        }
        Some(())
    }

    /// Slot `slot`'s summary over its `rows` rows.
    fn stats(&self, slot: usize, rows: u64) -> ColumnStats {
        let (count, sum, min, max) = match self {
            Accs::Missing { .. } => (0, None, None, None),
            Accs::Ints { long, count, sum, min, max } => {
                let value = |v: i64| {
                    if *long {
                        Value::Long(v)
                    } else {
                        Value::Int(v as i32)
                    }
                };
                let n = count[slot];
                let some = n > 0;
                (
                    n,
                    Some(sum[slot] as f64),
                    some.then(|| value(min[slot])),
                    some.then(|| value(max[slot])),
                )
            }
            Accs::Floats { double, count, sum, min, max } => {
                let value = |v: f64| {
                    if *double {
                        Value::Double(v)
                    } else {
                        Value::Float(v as f32)
                    }
                };
                let n = count[slot];
                let some = n > 0;
                (n, Some(sum[slot]), some.then(|| value(min[slot])), some.then(|| value(max[slot])))
            }
            Accs::Texts { count, min, max } => (
                count[slot],
                None,
                min[slot].clone().map(Value::String),
                max[slot].clone().map(Value::String),
            ),
            Accs::Bools { count, min, max } => {
                let some = count[slot] > 0;
                (
                    count[slot],
                    None,
                    some.then_some(Value::Bool(min[slot])),
                    some.then_some(Value::Bool(max[slot])),
                )
            }
        };
        ColumnStats { min, max, count, null_count: rows - count, sum }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::columnar::filter::tests::filter;
    use arrow_array::Int64Array;

    #[test]
    fn a_batch_is_summarized_per_group_after_its_filter() {
        let batch = RecordBatch::try_from_iter([
            (
                "k",
                std::sync::Arc::new(StringArray::from(vec![Some("a"), Some("b"), None, Some("a")]))
                    as _,
            ),
            (
                "v",
                std::sync::Arc::new(Int64Array::from(vec![Some(1), Some(2), Some(3), None])) as _,
            ),
        ])
        .unwrap();
        let (keys, fields) = (["k".to_owned()], ["v".to_owned()]);
        let f = filter("v IS NULL OR v < 3").unwrap();
        let request = GroupRequest { keys: &keys, fields: &fields, filter: Some(&f), bucket: None };
        let (mut groups, passed) = summarize_batch(&request, &batch).unwrap();
        assert_eq!(passed.unwrap(), [true, true, false, true]);
        groups.sort_by_key(|g| format!("{:?}", g.keys));
        let seen: Vec<(Vec<Value>, u64, u64, Option<f64>)> = groups
            .iter()
            .map(|g| (g.keys.clone(), g.rows, g.fields[0].count, g.fields[0].sum))
            .collect();
        assert_eq!(
            seen,
            [
                (vec![Value::String("a".into())], 2, 1, Some(1.0)),
                (vec![Value::String("b".into())], 1, 1, Some(2.0)),
            ]
        );
        let empty = RecordBatch::try_from_iter([(
            "v",
            std::sync::Arc::new(Int64Array::from(Vec::<i64>::new())) as _,
        )])
        .unwrap();
        assert_eq!(summarize_batch(&request, &empty).unwrap(), (vec![], Some(vec![])));
        let unfiltered = GroupRequest { filter: None, ..request };
        assert_eq!(summarize_batch(&unfiltered, &empty).unwrap(), (vec![], None));
    }

    #[test]
    fn a_sum_of_longs_is_exact_in_64_bits_and_past_them() {
        let big = i64::MAX / 2 + 7;
        for values in [
            vec![],
            vec![5, -3, 9],
            vec![big, big, big],
            vec![i64::MIN, i64::MIN, 1],
            vec![i64::MAX, -1, i64::MAX],
            (0..10_000).map(|i| i * 1_000_003 - 7).collect(),
        ] {
            assert_eq!(fold_longs(&values), fold_ints(values.iter().copied()), "{values:?}");
        }
    }
}
