//! Where a JSON path (`filters[0].operation`, `aggregation.fields.demographics.country`) is in the
//! query text, so that errors in JSON queries point at the value (or key) they are about.
//!
//! A small scanner over text serde_json has already accepted: it follows the path and returns the
//! byte span of the value or of its key. Keys may contain dots (field names such as
//! `demographics.country`); the longest key matching the rest of the path wins.

use crate::span::Span;

/// One step of a path.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    Key(String),
    Index(usize),
}

fn steps(path: &str) -> Vec<Step> {
    let mut out = Vec::new();
    for part in path.split('.') {
        let (name, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !name.is_empty() {
            out.push(Step::Key(name.to_string()));
        }
        // `[i]` steps while they follow; a key with brackets of its own (`a]b`) ends the path
        while let Some(inside) = rest.strip_prefix('[') {
            let Some(close) = inside.find(']') else { break };
            match inside[..close].parse() {
                Ok(i) => out.push(Step::Index(i)),
                Err(_) => out.push(Step::Key(inside[..close].to_string())),
            }
            rest = &inside[close + 1..];
        }
    }
    out
}

struct Scanner<'a> {
    b: &'a [u8],
}

impl Scanner<'_> {
    fn ws(&self, mut i: usize) -> usize {
        while i < self.b.len() && self.b[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    }

    /// The end of the string starting at `i` (which is `"`), and its content (escapes dropped).
    fn string(&self, i: usize) -> (usize, String) {
        let mut j = i + 1;
        let mut raw = Vec::new();
        while j < self.b.len() && self.b[j] != b'"' {
            if self.b[j] == b'\\' {
                j += 1;
            }
            if j < self.b.len() {
                raw.push(self.b[j]);
            }
            j += 1;
        }
        (j + 1, String::from_utf8_lossy(&raw).into_owned())
    }

    /// The end of the value starting at `i`.
    fn skip(&self, i: usize) -> usize {
        match self.b.get(i) {
            Some(b'"') => self.string(i).0,
            Some(b'{') | Some(b'[') => {
                let mut depth = 0usize;
                let mut j = i;
                while j < self.b.len() {
                    match self.b[j] {
                        b'"' => {
                            j = self.string(j).0;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth = depth.saturating_sub(1);
                            if depth == 0 {
                                return j + 1;
                            }
                        }
                        _ => {}
                    }
                    j += 1;
                }
                j
            }
            _ => {
                let mut j = i;
                while j < self.b.len() && !b",}] \t\r\n".contains(&self.b[j]) {
                    j += 1;
                }
                j
            }
        }
    }

    /// Follows `path` from the value at `i`; the span of the value reached, or of its key when
    /// `key` and the last step is a key.
    fn find(&self, i: usize, path: &[Step], key: bool) -> Option<Span> {
        let i = self.ws(i);
        if path.is_empty() {
            return Some(Span::new(i, self.skip(i)));
        }
        match (self.b.get(i)?, &path[0]) {
            (b'{', Step::Key(_)) => {
                let mut j = self.ws(i + 1);
                while self.b.get(j) == Some(&b'"') {
                    let (key_end, name) = self.string(j);
                    let value = self.ws(self.ws(key_end) + 1);
                    // Keys with dots: the longest run of steps that spells this key.
                    for n in (1..=path.len()).rev() {
                        let spelled: Option<Vec<&str>> = path[..n]
                            .iter()
                            .map(|s| match s {
                                Step::Key(k) => Some(k.as_str()),
                                Step::Index(_) => None,
                            })
                            .collect();
                        if spelled.is_some_and(|parts| parts.join(".") == name) {
                            if key && n == path.len() {
                                return Some(Span::new(j, key_end));
                            }
                            return self.find(value, &path[n..], key);
                        }
                    }
                    j = self.ws(self.skip(value));
                    if self.b.get(j) == Some(&b',') {
                        j = self.ws(j + 1);
                    }
                }
                None
            }
            (b'[', Step::Index(n)) => {
                let mut j = self.ws(i + 1);
                for _ in 0..*n {
                    j = self.ws(self.skip(j));
                    if self.b.get(j) != Some(&b',') {
                        return None;
                    }
                    j = self.ws(j + 1);
                }
                if self.b.get(j) == Some(&b']') {
                    return None;
                }
                self.find(j, &path[1..], key)
            }
            _ => None,
        }
    }
}

/// The span of the value at `path` in `text` (a JSON object), or of its key when `key`.
pub fn locate(text: &str, path: &str, key: bool) -> Option<Span> {
    let steps = steps(path);
    let steps = match steps.first() {
        Some(Step::Key(k)) if k == "query" => &steps[1..],
        _ => &steps[..],
    };
    Scanner { b: text.as_bytes() }
        .find(0, steps, key)
        .filter(|s| s.end > s.start && s.end <= text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_values_and_keys_along_a_path() {
        let text = r#"{"filters": [{"field": "a", "operation": "==", "values": ["x"]},
            {"field": "b", "operation": "=~", "values": ["y", "z"]}],
            "aggregation": {"fields": {"demographics.country": "c"}}}"#;
        let at = |path: &str, key: bool| locate(text, path, key).map(|s| &text[s.start..s.end]);
        assert_eq!(at("filters[1].operation", false), Some("\"=~\""));
        assert_eq!(at("filters[1].values[1]", false), Some("\"z\""));
        assert_eq!(at("filters[0]", false).map(|s| s.starts_with("{\"field\": \"a\"")), Some(true));
        assert_eq!(at("aggregation.fields.demographics.country", false), Some("\"c\""));
        assert_eq!(at("filters[1].operation", true), Some("\"operation\""));
        assert_eq!(at("query.filters[0].field", false), Some("\"a\""));
        assert_eq!(at("filters[5]", false), None);
        assert_eq!(at("window", false), None);
    }

    #[test]
    fn keys_with_brackets_of_their_own_do_not_panic() {
        // a fuzz find (fuzz/regressions/bullet_json/): `]` right after `[i]` sliced backwards
        let text = r#"{"hi[1, 2]]]]]story": {"to": 1000}, "a[0]": [1]}"#;
        for path in ["hi[1, 2]]]]]story", "hi[1, 2]]]]]story.to", "a[0][0]", "a]b[", "[", "]"] {
            let _ = locate(text, path, false);
            let _ = locate(text, path, true);
        }
        assert_eq!(
            steps("a[0][1].b"),
            [Step::Key("a".into()), Step::Index(0), Step::Index(1), Step::Key("b".into())]
        );
        assert!(crate::json::parse_json(text).is_err());
    }
}
