//! The types a query can name: in `CAST(e AS t)`, in field type hints (`a : LIST[MAP[STRING]]`),
//! and in the schema the server reports.

use std::fmt;

/// A Bullet type. Containers nest as LANGUAGE.md allows: `LIST[t]`, `MAP[t]`, `LIST[MAP[t]]`,
/// `MAP[MAP[t]]` where `t` is a primitive.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Type {
    Integer,
    Long,
    Float,
    Double,
    Boolean,
    String,
    List(Box<Type>),
    Map(Box<Type>),
}

impl Type {
    /// True for INTEGER, LONG, FLOAT and DOUBLE.
    pub fn is_numeric(&self) -> bool {
        matches!(self, Type::Integer | Type::Long | Type::Float | Type::Double)
    }

    /// True for the non-container types.
    pub fn is_primitive(&self) -> bool {
        !matches!(self, Type::List(_) | Type::Map(_))
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Integer => f.write_str("INTEGER"),
            Type::Long => f.write_str("LONG"),
            Type::Float => f.write_str("FLOAT"),
            Type::Double => f.write_str("DOUBLE"),
            Type::Boolean => f.write_str("BOOLEAN"),
            Type::String => f.write_str("STRING"),
            Type::List(t) => write!(f, "LIST[{t}]"),
            Type::Map(t) => write!(f, "MAP[{t}]"),
        }
    }
}
