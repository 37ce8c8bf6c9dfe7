//! The one entry point from query text to a validated [`Plan`]: Bullet JSON when the trimmed
//! text starts with `{`, BQL otherwise; then [`crate::validate::validate`].

use crate::config::QueryConfig;
use crate::error::QueryError;
use crate::plan::Plan;

/// True when `text` is a Bullet JSON query rather than BQL.
pub fn is_json(text: &str) -> bool {
    text.trim_start().starts_with('{')
}

/// Parses (BQL or Bullet JSON) and validates `text` against `config`.
pub fn compile(text: &str, config: &QueryConfig) -> Result<Plan, QueryError> {
    let query = if is_json(text) {
        crate::json::parse_json(text)?
    } else {
        crate::parser::parse_bql(text)?
    };
    crate::validate::validate(&query, text, config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chooses_the_language_by_the_first_character() {
        let config = QueryConfig::default();
        let bql =
            compile("SELECT * FROM STREAM(2000, TIME) WHERE id = 'x' LIMIT 10", &config).unwrap();
        let json = compile(
            r#"  {"filters": [{"field": "id", "operation": "==", "values": ["x"]}],
                 "aggregation": {"type": "RAW", "size": 10}, "duration": 2000}"#,
            &config,
        )
        .unwrap();
        let json_of = |p: &Plan| serde_json::to_value(&p.stage).unwrap();
        assert_eq!(json_of(&bql), json_of(&json));
        assert_eq!(bql.duration_ms, 2000);
        assert!(compile("{", &config).is_err());
        assert!(compile("SELECT", &config).is_err());
    }
}
