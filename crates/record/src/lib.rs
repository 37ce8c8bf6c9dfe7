//! needle's data model: the typed [`Value`]s a record holds, the [`Record`] itself, the
//! [`Type`]s a query can name (casts, hints), and decoding records from JSON.
//!
//! Everything above this crate (the query language, the engine, the runtime) speaks these types.
//! Values follow Bullet's typing: INTEGER, LONG, FLOAT, DOUBLE, BOOLEAN, STRING, lists and maps.
//! A JSON integer that fits in 64 bits decodes as a LONG, any other number as a DOUBLE.
//!
//! Its place in the flow: the first step after the bytes — a worker decodes each line here (only
//! the fields the active queries read, [`FieldSet`]), and a program embedding needle builds
//! records in code with [`RecordWriter`]; the crates above only read records.

pub mod check;
pub mod decode;
pub mod error;
pub mod limits;
pub mod types;
pub mod value;
pub mod writer;

pub use decode::{
    decode_fields, decode_record, decode_record_into, decode_value, FieldSet, Validation,
};
pub use error::RecordError;
pub use limits::{FAST_SKIP_MAX_OPENINGS, MAX_DEPTH, STREAM_MAX_BYTES};
pub use types::Type;
pub use value::{map_with_capacity, Map, MapHasher, Record, Value};
pub use writer::RecordWriter;
