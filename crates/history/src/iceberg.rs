//! The store as an Apache Iceberg table (format v2): each version of the manifest is written as
//! the table's metadata file, so Spark, Trino, Flink or pyiceberg read what needle keeps with
//! its schema and snapshots, consistently while needle writes and compacts.
//!
//! ```text
//! PREFIX/metadata/v<N>.metadata.json     version N of the manifest: Iceberg's table metadata,
//!                                        needle's own manifest in its `needle.manifest` property
//! PREFIX/metadata/version-hint.text      the newest N (a hint, as Iceberg's file-system tables)
//! PREFIX/metadata/snap-*.avro, *-m0.avro the snapshots' manifest lists and manifests
//! PREFIX/p=<start>/part-*.parquet        the data files
//! ```
//!
//! - **Columns** get field ids from the manifest's registry ([`FieldId`]): a field's first kind
//!   keeps its name, `__needle_time` (a `timestamptz`, id 1) and `__needle_layout` (id 2) are
//!   fixed; a field whose values change type keeps a column per kind where Iceberg cannot widen
//!   (`INT` into `LONG` and `FLOAT` into `DOUBLE` it can): `x` and `x__double`, say, or
//!   `x__json` for maps, lists and mixed values. Parts carry the ids in their Parquet schema;
//!   the table's name mapping reads those written before by name.
//! - **Partitions**: hourly parts are `hour(__needle_time)`, a compacted day `day(...)`, as the
//!   store's directories are (`p=<start>`); another `partition_ms` leaves the table unpartitioned.
//! - **Snapshots**: a version whose parts changed is a snapshot: `append` (parts uploaded),
//!   `replace` (a merge: the same rows in fewer parts), `delete` (retention) or `overwrite`. Each
//!   lists the previous snapshot's manifests again where none of their parts left, and writes
//!   a manifest per partition spec for the rest (`ManifestPlan`); the snapshots of the last
//!   [`crate::manifest::KEEP_VERSIONS`] versions are kept.

use crate::columns::LAYOUT_COLUMN;
use crate::manifest::{Manifest, ManifestPart};
use crate::object::Bucket;
use crate::HistoryError;
use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFileBuilder, DataFileFormat, Datum, FormatVersion, Literal,
    ManifestContentType, ManifestFile, ManifestList, ManifestListWriter, ManifestWriterBuilder,
    NestedField, NullOrder, Operation, PrimitiveType, Schema, Snapshot, SnapshotReference,
    SnapshotRetention, SortDirection, SortField, SortOrder, Struct, Summary, TableMetadata,
    TableMetadataBuilder, Transform, Type, UnboundPartitionSpec,
};
use needle_engine::columnar::layout::{Kind, TIME_COLUMN};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// The property of the table metadata holding needle's manifest (JSON).
pub const MANIFEST_PROPERTY: &str = "needle.manifest";
/// The field id of [`TIME_COLUMN`].
pub const TIME_FIELD_ID: i32 = 1;
/// The field id of [`LAYOUT_COLUMN`].
pub const LAYOUT_FIELD_ID: i32 = 2;
/// The partition specs: by hour, by day, none.
const HOUR_SPEC: i32 = 0;
const DAY_SPEC: i32 = 1;
const NO_SPEC: i32 = 2;
const HOUR_MS: i64 = 3_600_000;
const DAY_MS: i64 = 86_400_000;

/// What Iceberg type a column of a part is: kinds Iceberg can widen into one another
/// share one (`INT` and `LONG`, `FLOAT` and `DOUBLE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Long,
    Double,
    Boolean,
    String,
    Json,
}

impl Family {
    pub(crate) fn of(kind: Kind) -> Family {
        match kind {
            Kind::Int | Kind::Long => Family::Long,
            Kind::Float | Kind::Double => Family::Double,
            Kind::Bool => Family::Boolean,
            Kind::Text => Family::String,
            Kind::Json => Family::Json,
        }
    }

    fn primitive(self) -> PrimitiveType {
        match self {
            Family::Long => PrimitiveType::Long,
            Family::Double => PrimitiveType::Double,
            Family::Boolean => PrimitiveType::Boolean,
            Family::String | Family::Json => PrimitiveType::String,
        }
    }

    fn suffix(self) -> &'static str {
        match self {
            Family::Long => "long",
            Family::Double => "double",
            Family::Boolean => "boolean",
            Family::String => "string",
            Family::Json => "json",
        }
    }
}

/// A column of the table: a part column's name and family, and its Iceberg field id. The
/// first family registered for a column name is the table's column of that name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldId {
    pub column: String,
    pub family: Family,
    pub id: i32,
}

/// The id of `column` of `family`, if registered.
pub fn field_id(fields: &[FieldId], column: &str, family: Family) -> Option<i32> {
    if column == TIME_COLUMN {
        return Some(TIME_FIELD_ID);
    }
    if column == LAYOUT_COLUMN {
        return Some(LAYOUT_FIELD_ID);
    }
    fields.iter().find(|f| f.column == column && f.family == family).map(|f| f.id)
}

/// A store's field id registry as a part writer sees it: ids of the columns registered, and
/// (`allocate`, a store with one writer) new ids for columns that are not yet.
#[derive(Debug, Clone)]
pub(crate) struct FieldIds {
    pub registry: Arc<std::sync::Mutex<Vec<FieldId>>>,
    pub allocate: bool,
}

impl FieldIds {
    /// The id of `column` of `kind`, registered now if it may be.
    pub(crate) fn id(&self, column: &str, kind: Kind) -> Option<i32> {
        let family = Family::of(kind);
        let mut registry = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(id) = field_id(&registry, column, family) {
            return Some(id);
        }
        if !self.allocate {
            return None;
        }
        register(&mut registry, &[(column.to_owned(), family)]);
        field_id(&registry, column, family)
    }
}

/// Registers the columns of `wanted` not registered yet; true when one was.
pub fn register(fields: &mut Vec<FieldId>, wanted: &[(String, Family)]) -> bool {
    let mut changed = false;
    for (column, family) in wanted {
        if field_id(fields, column, *family).is_none() {
            let id =
                fields.iter().map(|f| f.id).max().unwrap_or(LAYOUT_FIELD_ID).max(LAYOUT_FIELD_ID)
                    + 1;
            fields.push(FieldId { column: column.clone(), family: *family, id });
            changed = true;
        }
    }
    changed
}

/// The Iceberg name of a registered column: its own for the first family of its name,
/// `column__family` for the others.
fn iceberg_name(fields: &[FieldId], field: &FieldId) -> String {
    let first = fields.iter().find(|f| f.column == field.column).map(|f| f.id);
    if first == Some(field.id) {
        field.column.clone()
    } else {
        format!("{}__{}", field.column, field.family.suffix())
    }
}

/// The table's sort order: the store's `sort_by` (`*` standing for every text column, by
/// name) then the time, each field the table has a column of (a field not seen yet joins the
/// order when it does); `None` when no field of `sort_by` has one yet.
fn sort_order(fields: &[FieldId], sort_by: &[String]) -> Option<SortOrder> {
    let first = |name: &str| {
        fields.iter().find(|f| f.column == name).filter(|f| iceberg_name(fields, f) == name)
    };
    let text = fields
        .iter()
        .filter(|f| f.family == Family::String && iceberg_name(fields, f) == f.column)
        .map(|f| f.column.as_str());
    let names = crate::config::sort_fields(sort_by, text);
    let ids: Vec<i32> = names.iter().filter_map(|name| first(name)).map(|f| f.id).collect();
    if ids.is_empty() {
        return None;
    }
    let field = |source_id| SortField {
        source_id,
        transform: Transform::Identity,
        direction: SortDirection::Ascending,
        null_order: NullOrder::First,
    };
    let fields = ids.into_iter().chain([TIME_FIELD_ID]).map(field).collect();
    Some(SortOrder { order_id: 1, fields })
}

/// The table's schema: the time, the layout, then every registered column.
pub fn schema(fields: &[FieldId]) -> Result<Schema, HistoryError> {
    let mut columns = vec![
        Arc::new(NestedField::required(
            TIME_FIELD_ID,
            TIME_COLUMN,
            Type::Primitive(PrimitiveType::Timestamptz),
        )),
        Arc::new(NestedField::required(
            LAYOUT_FIELD_ID,
            LAYOUT_COLUMN,
            Type::Primitive(PrimitiveType::Int),
        )),
    ];
    for field in fields {
        columns.push(Arc::new(NestedField::optional(
            field.id,
            iceberg_name(fields, field),
            Type::Primitive(field.family.primitive()),
        )));
    }
    Schema::builder().with_fields(columns).build().map_err(iceberg_error)
}

/// The name mapping of the table (`schema.name-mapping.default`): each Parquet column name to
/// the field of its first family, for parts written without field ids.
fn name_mapping(fields: &[FieldId]) -> String {
    let mut mapping = vec![
        serde_json::json!({"field-id": TIME_FIELD_ID, "names": [TIME_COLUMN]}),
        serde_json::json!({"field-id": LAYOUT_FIELD_ID, "names": [LAYOUT_COLUMN]}),
    ];
    let mut seen = HashSet::new();
    for field in fields {
        if seen.insert(field.column.as_str()) {
            mapping.push(serde_json::json!({"field-id": field.id, "names": [field.column]}));
        }
    }
    serde_json::Value::Array(mapping).to_string()
}

fn iceberg_error(e: iceberg::Error) -> HistoryError {
    HistoryError::Object { location: "the table's Iceberg metadata".into(), message: e.to_string() }
}

/// The spec and partition value of a part.
fn partition_of(part: &ManifestPart, span_ms: i64) -> (i32, Struct) {
    let start = part.partition_start;
    match span_ms {
        HOUR_MS => (HOUR_SPEC, Struct::from_iter([Some(Literal::int((start / HOUR_MS) as i32))])),
        DAY_MS => (DAY_SPEC, Struct::from_iter([Some(Literal::int((start / DAY_MS) as i32))])),
        _ => (NO_SPEC, Struct::empty()),
    }
}

/// A part's Iceberg bound of a JSON statistic for a column of `family`.
fn bound(family: Family, value: &serde_json::Value, column: &str) -> Option<Datum> {
    if column == TIME_COLUMN {
        return value.as_i64().map(|ms| Datum::timestamptz_micros(ms.saturating_mul(1000)));
    }
    match (family, value) {
        (Family::Long, v) => v.as_i64().map(Datum::long),
        (Family::Double, v) => v.as_f64().filter(|f| f.is_finite()).map(Datum::double),
        (Family::Boolean, serde_json::Value::Bool(b)) => Some(Datum::bool(*b)),
        (Family::String, serde_json::Value::String(s)) => Some(Datum::string(s)),
        _ => None,
    }
}

/// The data file of a live part.
fn data_file(
    location: &str,
    part: &ManifestPart,
    fields: &[FieldId],
) -> Result<iceberg::spec::DataFile, HistoryError> {
    let (spec, partition) = partition_of(part, part.partition_span_ms);
    let mut lower = HashMap::new();
    let mut upper = HashMap::new();
    let mut nulls = HashMap::new();
    for (column, summary) in &part.columns {
        let (family, id) = if column == TIME_COLUMN {
            (Family::Long, TIME_FIELD_ID)
        } else if column == LAYOUT_COLUMN {
            nulls.insert(LAYOUT_FIELD_ID, summary.nulls);
            let int = |v: &serde_json::Value| v.as_i64().and_then(|i| i32::try_from(i).ok());
            if let Some(lo) = summary.min.as_ref().and_then(int) {
                lower.insert(LAYOUT_FIELD_ID, Datum::int(lo));
            }
            if let Some(hi) = summary.max.as_ref().and_then(int) {
                upper.insert(LAYOUT_FIELD_ID, Datum::int(hi));
            }
            continue;
        } else {
            let Some(family) = part.families.get(column).copied() else { continue };
            let Some(id) = field_id(fields, column, family) else { continue };
            (family, id)
        };
        nulls.insert(id, summary.nulls);
        if family == Family::Json {
            continue;
        }
        if let Some(lo) = summary.min.as_ref().and_then(|v| bound(family, v, column)) {
            lower.insert(id, lo);
        }
        if let Some(hi) = summary.max.as_ref().and_then(|v| bound(family, v, column)) {
            upper.insert(id, hi);
        }
    }
    DataFileBuilder::default()
        .content(DataContentType::Data)
        .file_path(format!("{location}/{}", part.key))
        .file_format(DataFileFormat::Parquet)
        .partition(partition)
        .partition_spec_id(spec)
        .record_count(part.rows)
        .file_size_in_bytes(part.bytes)
        .lower_bounds(lower)
        .upper_bounds(upper)
        .null_value_counts(nulls)
        .build()
        .map_err(|e| HistoryError::Object {
            location: format!("{location}/{}", part.key),
            message: e.to_string(),
        })
}

/// Manifests of a previous snapshot listed again by the next: at most this many a partition
/// spec, past which they are folded into the next commit's new manifest (Iceberg's manifest
/// merging), so a table's manifest list stays short while commits stay small.
pub(crate) const MAX_REUSED_MANIFESTS: usize = 16;

/// Which of the previous snapshot's manifests the next snapshot lists again.
struct ManifestPlan {
    /// Listed again as they are.
    reused: Vec<ManifestFile>,
    /// Their keys: the parts they list need no new entry.
    kept: HashSet<String>,
    /// Every live part is written again (no previous manifests to trust).
    all: bool,
}

impl ManifestPlan {
    /// A manifest is listed again when none of its parts left and its spec has few enough
    /// manifests; everything is rewritten when a live part's manifest is unknown (written
    /// before parts knew theirs) or the previous list cannot be read.
    fn of(
        bucket: &Bucket,
        location: &str,
        previous: &Manifest,
        next: &Manifest,
        removed: &[&ManifestPart],
        snapshot_id: i64,
    ) -> ManifestPlan {
        let everything = ManifestPlan { reused: Vec::new(), kept: HashSet::new(), all: true };
        let Some(list) = previous
            .table
            .as_ref()
            .and_then(|t| t.0.current_snapshot())
            .map(|s| s.manifest_list().to_owned())
        else {
            return everything;
        };
        let prefix = format!("{location}/");
        let Some(list_key) = list.strip_prefix(&prefix) else { return everything };
        let Ok(Some(bytes)) = bucket.get(list_key) else { return everything };
        let Ok(list) = ManifestList::parse_with_version(&bytes, FormatVersion::V2) else {
            return everything;
        };
        let touched: HashSet<&str> = removed.iter().filter_map(|p| p.manifest.as_deref()).collect();
        if removed.iter().any(|p| p.manifest.is_none()) {
            return everything;
        }
        let mut candidates: BTreeMap<i32, Vec<ManifestFile>> = BTreeMap::new();
        for file in list.consume_entries() {
            let Some(key) = file.manifest_path.strip_prefix(&prefix) else { return everything };
            if file.added_snapshot_id == snapshot_id {
                return everything; // a version number reused: trust nothing
            }
            if !touched.contains(key) && file.content == ManifestContentType::Data {
                candidates.entry(file.partition_spec_id).or_default().push(file);
            }
        }
        let mut reused = Vec::new();
        for (_, files) in candidates {
            if files.len() <= MAX_REUSED_MANIFESTS {
                reused.extend(files);
            }
        }
        let kept: HashSet<String> = reused
            .iter()
            .filter_map(|f| f.manifest_path.strip_prefix(&prefix).map(str::to_owned))
            .collect();
        // a live part added before must be in a manifest listed again or be rewritten; one
        // whose manifest is unknown makes the whole list suspect
        let unknown = next
            .parts
            .iter()
            .any(|p| p.added.is_some_and(|a| a.snapshot != snapshot_id) && p.manifest.is_none());
        if unknown {
            return everything;
        }
        ManifestPlan { reused, kept, all: false }
    }
}

/// What a version's Iceberg metadata took: the metadata JSON, and the objects written for it.
pub(crate) struct Written {
    pub json: Vec<u8>,
    /// The manifests and manifest list written for this version (removed if it loses).
    pub objects: Vec<String>,
    /// The objects of snapshots this version expires (removed once it is committed).
    pub expired_objects: Vec<String>,
}

/// The first metadata of a table at `location`.
fn new_table(location: &str) -> Result<TableMetadata, HistoryError> {
    let schema = schema(&[])?;
    let hour = UnboundPartitionSpec::builder()
        .with_spec_id(HOUR_SPEC)
        .add_partition_field(TIME_FIELD_ID, "hour", Transform::Hour)
        .map_err(iceberg_error)?
        .build();
    let builder = TableMetadataBuilder::new(
        schema,
        hour,
        SortOrder::unsorted_order(),
        location.to_owned(),
        FormatVersion::V2,
        HashMap::new(),
    )
    .map_err(iceberg_error)?;
    let day = UnboundPartitionSpec::builder()
        .with_spec_id(DAY_SPEC)
        .add_partition_field(TIME_FIELD_ID, "day", Transform::Day)
        .map_err(iceberg_error)?
        .build();
    let none = UnboundPartitionSpec::builder().with_spec_id(NO_SPEC).build();
    let builder = builder
        .add_partition_spec(day)
        .map_err(iceberg_error)?
        .add_partition_spec(none)
        .map_err(iceberg_error)?;
    Ok(builder.build().map_err(iceberg_error)?.metadata)
}

/// Writes `next` (the version after `previous`) as Iceberg metadata: its schema, and when its
/// parts differ from `previous`'s a snapshot (a manifest of every live part and its manifest
/// list, put in `bucket` now). The new parts of `next` are stamped with the snapshot that adds
/// them. The JSON is not written: the caller commits it.
pub(crate) fn write_version(
    bucket: &Bucket,
    previous: &Manifest,
    next: &mut Manifest,
) -> Result<Written, HistoryError> {
    let location = bucket.url().trim_end_matches('/').to_owned();
    let base = match &previous.table {
        Some(table) => table.0.as_ref().clone(),
        None => new_table(&location)?,
    };
    let mut objects = Vec::new();
    let mut new_snapshot: Option<i64> = None;
    // what the new snapshot lists: its manifest list and every manifest in it
    let mut referenced: Vec<String> = Vec::new();
    let before: HashMap<&str, &ManifestPart> =
        previous.parts.iter().map(|p| (p.key.as_str(), p)).collect();
    let now: HashSet<&str> = next.parts.iter().map(|p| p.key.as_str()).collect();
    let added: Vec<usize> = (0..next.parts.len())
        .filter(|i| !before.contains_key(next.parts[*i].key.as_str()))
        .collect();
    let removed: Vec<&ManifestPart> =
        previous.parts.iter().filter(|p| !now.contains(p.key.as_str())).collect();

    let mut builder = base.into_builder(None);
    let schema = schema(&next.fields)?;
    builder = builder.add_schema(schema).map_err(iceberg_error)?;
    builder = builder.set_current_schema(-1).map_err(iceberg_error)?;
    // the order parts are written in (one already known keeps its id)
    if let Some(order) = sort_order(&next.fields, &next.sort_by) {
        builder = builder.add_sort_order(order).map_err(iceberg_error)?;
        builder = builder.set_default_sort_order(-1).map_err(iceberg_error)?;
    }
    let mut properties = HashMap::new();
    properties.insert("schema.name-mapping.default".to_owned(), name_mapping(&next.fields));
    properties.insert("write.format.default".to_owned(), "parquet".to_owned());
    // a catalog that writes metadata files of its own for the table (a REST catalog's server)
    // keeps as many as needle keeps of its own, and removes the older ones itself
    properties.insert("write.metadata.delete-after-commit.enabled".to_owned(), "true".to_owned());
    properties.insert(
        "write.metadata.previous-versions-max".to_owned(),
        crate::manifest::KEEP_VERSIONS.to_string(),
    );
    if let Some(age) = next.snapshot_max_age_ms {
        // what an engine's own snapshot expiry keeps to, as needle does
        properties.insert("history.expire.max-snapshot-age-ms".to_owned(), age.to_string());
    }
    builder = builder.set_properties(properties).map_err(iceberg_error)?;

    if !added.is_empty() || !removed.is_empty() {
        let sequence = next.iceberg_sequence + 1;
        let snapshot_id = i64::try_from(next.version).unwrap_or(i64::MAX);
        for i in &added {
            next.parts[*i].added = Some(Added { snapshot: snapshot_id, sequence });
        }
        let table_schema = Arc::new(crate::iceberg::schema(&next.fields)?);
        let io = FileIO::new_with_memory();
        let unique = uuid::Uuid::new_v4();
        // the previous snapshot's manifests whose parts are all still live, and unchanged
        // partition specs, are listed again as they are (a fast append); the others are
        // rewritten, with the new parts, into one new manifest per partition spec
        let plan = ManifestPlan::of(bucket, &location, previous, next, &removed, snapshot_id);
        let mut manifests = plan.reused;
        let mut by_spec: BTreeMap<i32, (Vec<usize>, Vec<&ManifestPart>)> = BTreeMap::new();
        for i in 0..next.parts.len() {
            let part = &next.parts[i];
            let listed_again =
                part.manifest.as_deref().is_some_and(|m| plan.kept.contains(m)) && !plan.all;
            if !listed_again {
                by_spec.entry(partition_of(part, part.partition_span_ms).0).or_default().0.push(i);
            }
        }
        for part in &removed {
            by_spec.entry(partition_of(part, part.partition_span_ms).0).or_default().1.push(part);
        }
        // the table as staged so far (its schema now current): its specs and schema id
        let staged = builder.clone().build().map_err(iceberg_error)?.metadata;
        let specs: HashMap<_, _> =
            staged.partition_specs_iter().map(|s| (s.spec_id(), s.as_ref().clone())).collect();
        for (spec_id, (live, gone)) in by_spec {
            let Some(spec) = specs.get(&spec_id) else { continue };
            let key = format!("metadata/{unique}-m{spec_id}.avro");
            let path = format!("{location}/{key}");
            let output = io.new_output(&path).map_err(iceberg_error)?;
            let mut writer = ManifestWriterBuilder::new(
                output,
                Some(snapshot_id),
                table_schema.clone(),
                spec.clone(),
            )
            .build_v2_data();
            for i in &live {
                let part = &next.parts[*i];
                let file = data_file(&location, part, &next.fields)?;
                match part.added {
                    Some(Added { snapshot, sequence: seq }) if snapshot != snapshot_id => writer
                        .add_existing_file(file, snapshot, seq, Some(seq))
                        .map_err(iceberg_error)?,
                    _ => writer.add_file(file, sequence).map_err(iceberg_error)?,
                }
            }
            for part in gone {
                let file = data_file(&location, part, &previous.fields)?;
                let seq = part.added.map_or(0, |a| a.sequence);
                writer.add_delete_file(file, seq, Some(seq)).map_err(iceberg_error)?;
            }
            let manifest = block_on(writer.write_manifest_file()).map_err(iceberg_error)?;
            let bytes = block_on(io.new_input(&path).map_err(iceberg_error)?.read())
                .map_err(iceberg_error)?;
            bucket.put(&key, bytes)?;
            for i in live {
                next.parts[i].manifest = Some(key.clone());
            }
            objects.push(key);
            manifests.push(manifest);
        }
        // every manifest this snapshot lists (its own and those it reuses) stays while it does
        let listed: Vec<String> = manifests
            .iter()
            .filter_map(|m| m.manifest_path.strip_prefix(&format!("{location}/")))
            .map(str::to_owned)
            .collect();
        let list_key = format!("metadata/snap-{snapshot_id}-{unique}.avro");
        let list_path = format!("{location}/{list_key}");
        let output = io.new_output(&list_path).map_err(iceberg_error)?;
        let parent = previous.table.as_ref().and_then(|t| t.0.current_snapshot_id());
        let mut list = ManifestListWriter::v2(
            block_on(output.writer()).map_err(iceberg_error)?,
            snapshot_id,
            parent,
            sequence,
        );
        list.add_manifests(manifests.into_iter()).map_err(iceberg_error)?;
        block_on(list.close()).map_err(iceberg_error)?;
        let bytes = block_on(io.new_input(&list_path).map_err(iceberg_error)?.read())
            .map_err(iceberg_error)?;
        bucket.put(&list_key, bytes)?;
        objects.push(list_key.clone());
        referenced = listed;
        referenced.push(list_key);

        let rows_added: u64 = added.iter().map(|i| next.parts[*i].rows).sum();
        let rows_removed: u64 = removed.iter().map(|p| p.rows).sum();
        let operation = match (added.is_empty(), removed.is_empty()) {
            (false, true) => Operation::Append,
            (true, false) => Operation::Delete,
            _ if rows_added == rows_removed => Operation::Replace,
            _ => Operation::Overwrite,
        };
        let mut summary = HashMap::new();
        summary.insert("added-data-files".to_owned(), added.len().to_string());
        summary.insert("deleted-data-files".to_owned(), removed.len().to_string());
        summary.insert("added-records".to_owned(), rows_added.to_string());
        summary.insert("deleted-records".to_owned(), rows_removed.to_string());
        summary.insert("total-data-files".to_owned(), next.parts.len().to_string());
        let total: u64 = next.parts.iter().map(|p| p.rows).sum();
        summary.insert("total-records".to_owned(), total.to_string());
        let snapshot = Snapshot::builder()
            .with_snapshot_id(snapshot_id)
            .with_parent_snapshot_id(parent)
            .with_sequence_number(sequence)
            .with_timestamp_ms(next.committed_ms)
            .with_manifest_list(list_path)
            .with_summary(Summary { operation, additional_properties: summary })
            .with_schema_id(staged.current_schema_id())
            .build();
        builder = builder.add_snapshot(snapshot).map_err(iceberg_error)?;
        builder = builder
            .set_ref(
                "main",
                SnapshotReference::new(snapshot_id, SnapshotRetention::branch(None, None, None)),
            )
            .map_err(iceberg_error)?;
        next.iceberg_sequence = sequence;
        new_snapshot = Some(snapshot_id);
    }
    // the snapshots of versions no longer kept go (their objects with them, see the manifest)
    let built = builder.clone().build().map_err(iceberg_error)?.metadata;
    let oldest_kept =
        i64::try_from(next.version.saturating_sub(crate::manifest::KEEP_VERSIONS - 1))
            .unwrap_or(i64::MAX);
    let current = built.current_snapshot_id();
    let too_old = next.snapshot_max_age_ms.map_or(i64::MIN, |age| {
        crate::manifest::now_ms().saturating_sub(i64::try_from(age).unwrap_or(i64::MAX))
    });
    let expired: Vec<i64> = built
        .snapshots()
        .filter(|s| s.snapshot_id() < oldest_kept || s.timestamp_ms() < too_old)
        .map(|s| s.snapshot_id())
        .filter(|id| Some(*id) != current)
        .collect();
    if !expired.is_empty() {
        builder = builder.remove_snapshots(&expired);
    }
    // the objects of the snapshots that go, deleted once this version is committed
    // (a manifest listed by several snapshots goes with the last of them)
    let mut expired_objects = Vec::new();
    if let Some(snapshot) = new_snapshot {
        next.iceberg_objects.push((snapshot, referenced));
    }
    let mut expiring: Vec<String> = Vec::new();
    next.iceberg_objects.retain(|(snapshot, keys)| {
        let gone = expired.contains(snapshot);
        if gone {
            expiring.extend(keys.iter().cloned());
        }
        !gone
    });
    let still: HashSet<&str> =
        next.iceberg_objects.iter().flat_map(|(_, keys)| keys.iter().map(String::as_str)).collect();
    expiring.sort();
    expiring.dedup();
    expired_objects.extend(expiring.into_iter().filter(|k| !still.contains(k.as_str())));
    // needle's own manifest, in the same object
    let mut own = next.clone();
    own.table = None;
    let text = serde_json::to_string(&own)
        .map_err(|e| HistoryError::Object { location: location.clone(), message: e.to_string() })?;
    let mut properties = HashMap::new();
    properties.insert(MANIFEST_PROPERTY.to_owned(), text);
    builder = builder.set_properties(properties).map_err(iceberg_error)?;
    let metadata = builder.build().map_err(iceberg_error)?.metadata;
    let json = serde_json::to_vec(&metadata)
        .map_err(|e| HistoryError::Object { location: location.clone(), message: e.to_string() })?;
    next.table = Some(Table(Arc::new(metadata)));
    Ok(Written { json, objects, expired_objects })
}

/// Reads a version's metadata JSON: needle's manifest in it, with the table kept for the next
/// commit.
pub(crate) fn read_version(bytes: &[u8], location: &str) -> Result<Manifest, HistoryError> {
    let error = |message: String| HistoryError::Object { location: location.to_owned(), message };
    let metadata: TableMetadata =
        serde_json::from_slice(bytes).map_err(|e| error(e.to_string()))?;
    let text = metadata.properties().get(MANIFEST_PROPERTY).ok_or_else(|| {
        error(format!("no {MANIFEST_PROPERTY} property: not a needle store's table"))
    })?;
    let mut manifest: Manifest = serde_json::from_str(text).map_err(|e| error(e.to_string()))?;
    manifest.table = Some(Table(Arc::new(metadata)));
    Ok(manifest)
}

/// The snapshot that added a part, and its data sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Added {
    pub snapshot: i64,
    pub sequence: i64,
}

/// A version's Iceberg metadata, kept beside the manifest read from it.
#[derive(Debug, Clone)]
pub struct Table(pub Arc<TableMetadata>);

impl PartialEq for Table {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || *self.0 == *other.0
    }
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    futures_executor::block_on(future)
}

/// A snapshot of the table, as `needle history` lists it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SnapshotInfo {
    pub snapshot: i64,
    pub sequence: i64,
    pub operation: String,
    pub committed: String,
    pub added_files: String,
    pub deleted_files: String,
    pub records: String,
}

/// A column of the table's schema, and the schema that added it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SchemaField {
    pub id: i32,
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// The schema (0, 1, ...) that added the column: how the schema evolved.
    pub added_in_schema: i32,
}

/// The table's snapshots (oldest first) and its current schema.
pub fn describe(table: &TableMetadata) -> (Vec<SnapshotInfo>, Vec<SchemaField>) {
    let mut snapshots: Vec<SnapshotInfo> = table
        .snapshots()
        .map(|s| {
            let summary = &s.summary().additional_properties;
            let get = |k: &str| summary.get(k).cloned().unwrap_or_default();
            SnapshotInfo {
                snapshot: s.snapshot_id(),
                sequence: s.sequence_number(),
                operation: s.summary().operation.as_str().to_owned(),
                committed: chrono::DateTime::from_timestamp_millis(s.timestamp_ms())
                    .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
                    .unwrap_or_default(),
                added_files: get("added-data-files"),
                deleted_files: get("deleted-data-files"),
                records: get("total-records"),
            }
        })
        .collect();
    snapshots.sort_by_key(|s| s.sequence);
    let mut schemas: Vec<_> = table.schemas_iter().collect();
    schemas.sort_by_key(|s| s.schema_id());
    let mut first: HashMap<i32, i32> = HashMap::new();
    for schema in &schemas {
        for field in schema.as_struct().fields() {
            first.entry(field.id).or_insert(schema.schema_id());
        }
    }
    let fields = table
        .current_schema()
        .as_struct()
        .fields()
        .iter()
        .map(|f| SchemaField {
            id: f.id,
            name: f.name.clone(),
            kind: f.field_type.to_string(),
            added_in_schema: first.get(&f.id).copied().unwrap_or_default(),
        })
        .collect();
    (snapshots, fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(column: &str, family: Family, id: i32) -> FieldId {
        FieldId { column: column.into(), family, id }
    }

    #[test]
    fn the_sort_order_is_sort_by_with_every_text_column_for_the_star_then_the_time() {
        let fields = vec![
            id("value", Family::Double, 3),
            id("host", Family::String, 4),
            id("__name__", Family::String, 5),
            id("region", Family::String, 6),
            // a second kind of `value`: not a column named `value`
            id("value", Family::String, 7),
        ];
        let sort_by = vec!["__name__".to_owned(), "*".to_owned()];
        let order = sort_order(&fields, &sort_by).unwrap();
        let ids: Vec<i32> = order.fields.iter().map(|f| f.source_id).collect();
        assert_eq!(ids, [5, 4, 6, TIME_FIELD_ID]);
        assert!(order.fields.iter().all(|f| f.direction == SortDirection::Ascending));
        // fields the table has no column of yet are left out; none at all: no order
        assert!(sort_order(&fields, &["absent".to_owned()]).is_none());
        assert!(sort_order(&[], &sort_by).is_none());
    }
}
