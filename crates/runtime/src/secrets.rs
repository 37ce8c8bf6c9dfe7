//! Secret settings: which settings hold a secret (declared once, here, in [`SECRET_SETTINGS`]),
//! where a secret may come from instead of needle.toml, and how needle keeps every secret it
//! reads from being shown.
//!
//! - A secret setting `KEY` may be given as `KEY_file = "PATH"` (the file holds the secret alone,
//!   as systemd credentials and Kubernetes Secrets mount them; a trailing newline is dropped) or
//!   `KEY_env = "VARIABLE"` (an environment variable holds it). A missing, empty or oversized
//!   file, or an unset variable, is an error naming the setting and the path, never the content;
//!   a file every user can read is a warning.
//! - `needle config` prints a secret as [`REDACTED`] (or as the `KEY_file` / `KEY_env` it came
//!   from), and a header comment says where each redacted one was given.
//! - [`Secret`] holds a secret in the typed configuration: its `Debug` and `Serialize` never
//!   show the value.
//! - Every secret read is remembered, and [`scrub`] replaces them in any text needle is about to
//!   show (configuration errors, log lines, panic messages): a safety net under the rest.

use figment::error::Actual;
use figment::value::{Dict, Tag, Value};
use std::borrow::Cow;
use std::fmt;
use std::path::PathBuf;
use std::sync::RwLock;

/// What needle shows in place of a secret.
pub const REDACTED: &str = "<redacted>";

/// Every setting that holds a secret, as a path into needle.toml: keys joined by `.` (a key with
/// dots in it quoted, as in TOML), `*` for any key or list position, and `*` inside a quoted key
/// for any characters. A string given where a pattern names a table or list (a whole
/// `NEEDLE_SERVER__TOKENS` variable that does not parse) is secret too.
pub const SECRET_SETTINGS: &[&str] = &[
    // Bearer tokens: plain strings, or tables with a `token`.
    "server.tokens",
    "server.tokens.*",
    "server.tokens.*.token",
    // Kafka: every property librdkafka marks sensitive (CONFIGURATION.md of librdkafka 2.12),
    // the Java clients' stores, and any property named like a password or a secret.
    "kafka.properties",
    r#"kafka.properties."sasl.username""#,
    r#"kafka.properties."sasl.password""#,
    r#"kafka.properties."sasl.oauthbearer.config""#,
    r#"kafka.properties."sasl.oauthbearer.client.secret""#,
    r#"kafka.properties."sasl.oauthbearer.assertion.private.key.file""#,
    r#"kafka.properties."sasl.oauthbearer.assertion.private.key.passphrase""#,
    r#"kafka.properties."sasl.oauthbearer.assertion.private.key.pem""#,
    r#"kafka.properties."ssl.key.location""#,
    r#"kafka.properties."ssl.key.password""#,
    r#"kafka.properties."ssl.key.pem""#,
    r#"kafka.properties."ssl_key""#,
    r#"kafka.properties."ssl.ca.pem""#,
    r#"kafka.properties."ssl.keystore.password""#,
    r#"kafka.properties."ssl.truststore.password""#,
    r#"kafka.properties."*password*""#,
    r#"kafka.properties."*passphrase*""#,
    r#"kafka.properties."*secret*""#,
    // Object-store credentials of history, and any `object_store` crate option named like one
    // (`aws_secret_access_key`, `azure_storage_account_key`, `google_service_account_key`,
    // `azure_storage_token`, `google_application_credentials`, ...).
    "history.object_store",
    "history.object_store.access_key_id",
    "history.object_store.secret_access_key",
    "history.object_store.session_token",
    "history.object_store.options",
    r#"history.object_store.options."*key*""#,
    r#"history.object_store.options."*secret*""#,
    r#"history.object_store.options."*token*""#,
    r#"history.object_store.options."*password*""#,
    r#"history.object_store.options."*credentials*""#,
    // The Iceberg REST catalog's bearer token.
    "history.catalog_token",
];

/// The suffix of a key naming the file a secret setting is read from (`token_file`).
pub const FILE_SUFFIX: &str = "_file";
/// The suffix of a key naming the environment variable a secret setting is read from
/// (`token_env`).
pub const ENV_SUFFIX: &str = "_env";
/// A secret file larger than this is refused: it is not a file holding one secret.
pub const MAX_SECRET_FILE_BYTES: u64 = 64 << 10;
/// Secrets shorter than this are not searched for in text ([`scrub`]): replacing every `a` of
/// an error message would hide the message, not the secret.
pub const SHORTEST_SCRUBBED: usize = 6;

/// One step of a [`SettingPath`]: a table's key or a list's position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    Key(String),
    Index(usize),
}

/// Where a setting is in the configuration: `server.tokens[1].token`,
/// `kafka.properties."sasl.password"`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SettingPath(Vec<Segment>);

impl SettingPath {
    /// The path of `key` in the table at this path.
    pub fn key(&self, key: &str) -> Self {
        let mut segments = self.0.clone();
        segments.push(Segment::Key(key.to_owned()));
        Self(segments)
    }

    /// The path of position `index` in the list at this path.
    pub fn index(&self, index: usize) -> Self {
        let mut segments = self.0.clone();
        segments.push(Segment::Index(index));
        Self(segments)
    }

    /// A path from its keys (no list positions): `["kafka", "properties", "sasl.password"]`.
    pub fn of_keys(keys: &[&str]) -> Self {
        Self(keys.iter().map(|k| Segment::Key((*k).to_owned())).collect())
    }

    /// Whether this setting holds a secret ([`SECRET_SETTINGS`]).
    pub fn is_secret(&self) -> bool {
        secret_patterns().iter().any(|pattern| pattern.matches(self))
    }
}

impl fmt::Display for SettingPath {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        for (i, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Index(index) => write!(f, "[{index}]")?,
                Segment::Key(key) => {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    let bare = !key.is_empty()
                        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                    match bare {
                        true => f.write_str(key)?,
                        false => write!(f, "\"{key}\"")?,
                    }
                }
            }
        }
        Ok(())
    }
}

/// Whether the Kafka property `key` (of `[kafka.properties]`) holds a secret.
pub fn is_secret_kafka_property(key: &str) -> bool {
    SettingPath::of_keys(&["kafka", "properties", key]).is_secret()
}

/// A [`SECRET_SETTINGS`] entry, parsed.
struct Pattern(Vec<String>);

impl Pattern {
    /// Splits at the dots outside quotes; the quotes go.
    fn parse(text: &str) -> Self {
        let (mut segments, mut current, mut quoted) = (Vec::new(), String::new(), false);
        for c in text.chars() {
            match c {
                '"' => quoted = !quoted,
                '.' if !quoted => segments.push(std::mem::take(&mut current)),
                c => current.push(c),
            }
        }
        segments.push(current);
        Self(segments)
    }

    fn matches(&self, path: &SettingPath) -> bool {
        self.0.len() == path.0.len()
            && self.0.iter().zip(&path.0).all(|(pattern, segment)| match segment {
                Segment::Index(_) => pattern == "*",
                Segment::Key(key) => glob_matches(pattern, key),
            })
    }
}

/// `*` matches any run of characters (none included); everything else itself.
fn glob_matches(pattern: &str, text: &str) -> bool {
    let Some((first, rest)) = pattern.split_once('*') else { return pattern == text };
    let Some(mut text) = text.strip_prefix(first) else { return false };
    let mut pieces: Vec<&str> = rest.split('*').collect();
    let last = pieces.pop().unwrap_or_default();
    for piece in pieces {
        match text.find(piece) {
            Some(at) => text = &text[at + piece.len()..],
            None => return false,
        }
    }
    text.len() >= last.len() && text.ends_with(last)
}

fn secret_patterns() -> &'static [Pattern] {
    static PATTERNS: std::sync::OnceLock<Vec<Pattern>> = std::sync::OnceLock::new();
    PATTERNS.get_or_init(|| SECRET_SETTINGS.iter().map(|p| Pattern::parse(p)).collect())
}

/// A secret in the typed configuration (a token). Its `Debug` and `Serialize` show
/// [`REDACTED`]; only [`Secret::expose`] gives the value, to the code that uses it.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself: for comparing or handing to a client library, never for showing.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Self::new(value)
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self::new(value)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "Secret({REDACTED:?})")
    }
}

impl serde::Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(REDACTED)
    }
}

impl<'de> serde::Deserialize<'de> for Secret {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Secret)
    }
}

/// Where a secret setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretOrigin {
    /// Written as the setting itself, in the place named (a file, `NEEDLE_*` variables).
    Inline { given_in: String },
    /// Read from this file (`KEY_file`).
    File(PathBuf),
    /// Read from this environment variable (`KEY_env`).
    Env(String),
}

/// The secret settings a configuration has, where each came from, and the warnings reading them
/// gave (a file every user can read).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecretSources {
    pub origins: Vec<(SettingPath, SecretOrigin)>,
    pub warnings: Vec<String>,
}

impl SecretSources {
    /// Where the secret at `path` came from, if it is one.
    pub fn origin(&self, path: &SettingPath) -> Option<&SecretOrigin> {
        self.origins.iter().find(|(p, _)| p == path).map(|(_, origin)| origin)
    }
}

/// How [`resolve`] reads what the configuration points at.
pub(crate) struct Surroundings<'a> {
    /// An environment variable's value.
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// The name of the place a value with this tag was given in (a file, `NEEDLE_*` variables).
    pub given_in: &'a dyn Fn(Tag) -> String,
}

/// Replaces every `KEY_file` and `KEY_env` of a secret setting in `root` (the merged
/// configuration, before it is typed) by `KEY` and the secret read, remembers every secret for
/// [`scrub`], and says where each came from. An error names the setting and the file or variable,
/// never a secret.
pub(crate) fn resolve(root: &mut Dict, around: &Surroundings) -> Result<SecretSources, String> {
    let mut sources = SecretSources::default();
    resolve_table(&SettingPath::default(), root, around, &mut sources)?;
    Ok(sources)
}

fn resolve_table(
    path: &SettingPath,
    table: &mut Dict,
    around: &Surroundings,
    sources: &mut SecretSources,
) -> Result<(), String> {
    let keys: Vec<String> = table.keys().cloned().collect();
    let mut read = Vec::new();
    for key in &keys {
        let indirection = [(FILE_SUFFIX, true), (ENV_SUFFIX, false)]
            .into_iter()
            .find_map(|(suffix, is_file)| Some((key.strip_suffix(suffix)?, is_file)));
        let Some((base, is_file)) = indirection else { continue };
        let target = path.key(base);
        if base.is_empty() || !target.is_secret() {
            continue;
        }
        let named_by = path.key(key);
        let Some(Value::String(_, name)) = table.remove(key) else {
            let what = if is_file { "a file's path" } else { "an environment variable's name" };
            return Err(format!("{named_by} must be a string: {what}"));
        };
        if table.contains_key(base) || read.iter().any(|k: &String| k == base) {
            return Err(format!(
                "{target} is given twice: as itself and by {named_by} (or both {FILE_SUFFIX} and \
                 {ENV_SUFFIX}); keep one"
            ));
        }
        let (secret, origin) = match is_file {
            true => (read_secret_file(&named_by, &name, sources)?, SecretOrigin::File(name.into())),
            false => (read_secret_env(&named_by, &name, around)?, SecretOrigin::Env(name)),
        };
        remember(&secret);
        table.insert(base.to_owned(), Value::from(secret));
        sources.origins.push((target, origin));
        read.push(base.to_owned());
    }
    for (key, value) in table.iter_mut() {
        if !read.contains(key) {
            resolve_value(&path.key(key), value, around, sources)?;
        }
    }
    Ok(())
}

fn resolve_value(
    path: &SettingPath,
    value: &mut Value,
    around: &Surroundings,
    sources: &mut SecretSources,
) -> Result<(), String> {
    match value {
        Value::Dict(_, table) => resolve_table(path, table, around, sources),
        Value::Array(_, items) => {
            for (i, item) in items.iter_mut().enumerate() {
                resolve_value(&path.index(i), item, around, sources)?;
            }
            Ok(())
        }
        leaf if path.is_secret() => {
            let text = match leaf {
                Value::String(_, s) => s.clone(),
                Value::Num(_, n) => match n.to_actual() {
                    Actual::Unsigned(n) => n.to_string(),
                    Actual::Signed(n) => n.to_string(),
                    Actual::Float(n) => n.to_string(),
                    _ => return Ok(()),
                },
                _ => return Ok(()),
            };
            if text.trim() == REDACTED {
                return Err(format!(
                    "{path} is \"{REDACTED}\", what `needle config` prints in place of a secret: \
                     give the secret, or {FILE_SUFFIX} / {ENV_SUFFIX} with where it is"
                ));
            }
            if !text.is_empty() {
                remember(&text);
                let given_in = (around.given_in)(leaf.tag());
                sources.origins.push((path.clone(), SecretOrigin::Inline { given_in }));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The secret in the file `path` names (`setting` being the `KEY_file` that names it).
fn read_secret_file(
    setting: &SettingPath,
    path: &str,
    sources: &mut SecretSources,
) -> Result<String, String> {
    let cannot = |e: &dyn fmt::Display| format!("{setting}: cannot read {path}: {e}");
    let metadata = std::fs::metadata(path).map_err(|e| cannot(&e))?;
    if !metadata.is_file() {
        return Err(format!("{setting}: {path} is not a file"));
    }
    if metadata.len() > MAX_SECRET_FILE_BYTES {
        return Err(format!(
            "{setting}: {path} holds {} bytes, more than a secret file's {} KiB: it must hold the \
             secret alone",
            metadata.len(),
            MAX_SECRET_FILE_BYTES >> 10
        ));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = metadata.permissions().mode() & 0o777;
        if mode & 0o004 != 0 {
            sources.warnings.push(format!(
                "{setting}: {path} can be read by every user of this machine (mode {mode:03o}); \
                 make it readable by needle's user alone (chmod 600; a Kubernetes Secret's \
                 defaultMode 0400)"
            ));
        }
    }
    #[cfg(not(unix))]
    let _ = sources;
    let bytes = std::fs::read(path).map_err(|e| cannot(&e))?;
    let text = String::from_utf8(bytes).map_err(|_| format!("{setting}: {path} is not UTF-8"))?;
    let secret = text.trim_end_matches(['\n', '\r']);
    if secret.trim().is_empty() {
        return Err(format!("{setting}: {path} is empty"));
    }
    Ok(secret.to_owned())
}

/// The secret in the environment variable `name` (`setting` being the `KEY_env` that names it).
fn read_secret_env(
    setting: &SettingPath,
    name: &str,
    around: &Surroundings,
) -> Result<String, String> {
    match (around.env)(name) {
        None => Err(format!("{setting}: the environment variable {name} is not set")),
        Some(value) if value.trim().is_empty() => {
            Err(format!("{setting}: the environment variable {name} is empty"))
        }
        Some(value) => Ok(value),
    }
}

/// Rewrites `table` (a configuration about to be printed) so that it shows no secret: a secret
/// read from a file or a variable goes back to the `KEY_file` / `KEY_env` that named it, any
/// other becomes [`REDACTED`]. Returns a line for each redacted one, saying where it was given.
pub(crate) fn redact_for_printing(table: &mut toml::Table, sources: &SecretSources) -> Vec<String> {
    let mut notes = Vec::new();
    redact_table(&SettingPath::default(), table, sources, &mut notes);
    notes
}

fn redact_table(
    path: &SettingPath,
    table: &mut toml::Table,
    sources: &SecretSources,
    notes: &mut Vec<String>,
) {
    let keys: Vec<String> = table.keys().cloned().collect();
    for key in keys {
        let child = path.key(&key);
        let leaf = !matches!(table[&key], toml::Value::Table(_) | toml::Value::Array(_));
        if leaf && child.is_secret() && !is_empty(&table[&key]) {
            let named_by = match sources.origin(&child) {
                Some(SecretOrigin::File(file)) => Some((FILE_SUFFIX, file.display().to_string())),
                Some(SecretOrigin::Env(name)) => Some((ENV_SUFFIX, name.clone())),
                _ => None,
            };
            match named_by {
                Some((suffix, name)) => {
                    table.remove(&key);
                    table.insert(format!("{key}{suffix}"), toml::Value::String(name));
                }
                None => {
                    table.insert(key, toml::Value::String(REDACTED.into()));
                    notes.push(redacted_note(&child, sources));
                }
            }
            continue;
        }
        if let Some(value) = table.get_mut(&key) {
            redact_value(&child, value, sources, notes);
        }
    }
}

fn redact_value(
    path: &SettingPath,
    value: &mut toml::Value,
    sources: &SecretSources,
    notes: &mut Vec<String>,
) {
    match value {
        toml::Value::Table(table) => redact_table(path, table, sources, notes),
        toml::Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                redact_value(&path.index(i), item, sources, notes);
            }
        }
        leaf if path.is_secret() && !is_empty(leaf) => {
            *leaf = toml::Value::String(REDACTED.into());
            notes.push(redacted_note(path, sources));
        }
        _ => {}
    }
}

fn is_empty(value: &toml::Value) -> bool {
    value.as_str().is_some_and(str::is_empty)
}

fn redacted_note(path: &SettingPath, sources: &SecretSources) -> String {
    match sources.origin(path) {
        Some(SecretOrigin::Inline { given_in }) => format!("{path}: given in {given_in}"),
        _ => format!("{path}: given in the program's own configuration"),
    }
}

/// Shows a table of Kafka properties with the secret ones' values [`REDACTED`] (for `Debug`).
pub struct RedactedProperties<'a>(pub &'a std::collections::BTreeMap<String, String>);

impl fmt::Debug for RedactedProperties<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let shown = self.0.iter().map(|(key, value)| match is_secret_kafka_property(key) {
            true => (key, REDACTED),
            false => (key, value.as_str()),
        });
        f.debug_map().entries(shown).finish()
    }
}

/// The secrets this process has read, longest first.
static REMEMBERED: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Remembers `secret` so that [`scrub`] takes it out of text (when it has at least
/// [`SHORTEST_SCRUBBED`] characters), as it is and as an error message quotes it (escaped).
pub fn remember(secret: &str) {
    let secret = secret.trim();
    if secret.chars().count() < SHORTEST_SCRUBBED {
        return;
    }
    let quoted = format!("{secret:?}");
    let escaped = &quoted[1..quoted.len() - 1];
    let mut remembered = REMEMBERED.write().unwrap_or_else(|e| e.into_inner());
    for form in [secret, escaped] {
        if !remembered.iter().any(|known| known == form) {
            remembered.push(form.to_owned());
        }
    }
    // the longest first, so a secret that holds another is replaced whole
    remembered.sort_by_key(|known| std::cmp::Reverse(known.len()));
}

/// `text` with every secret this process has read replaced by [`REDACTED`].
pub fn scrub(text: &str) -> Cow<'_, str> {
    let remembered = REMEMBERED.read().unwrap_or_else(|e| e.into_inner());
    let mut scrubbed = Cow::Borrowed(text);
    for secret in remembered.iter() {
        if scrubbed.contains(secret.as_str()) {
            scrubbed = Cow::Owned(scrubbed.replace(secret.as_str(), REDACTED));
        }
    }
    scrubbed
}

/// Makes a panic's message go through [`scrub`] before it is printed (the standard hook prints
/// it as it is when it holds no secret, so nothing else changes).
pub fn scrub_panic_messages() {
    let standard = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str));
        let Some(message) = message else { return standard(info) };
        let scrubbed = scrub(message);
        if matches!(scrubbed, Cow::Borrowed(_)) {
            return standard(info);
        }
        let thread = std::thread::current();
        let name = thread.name().unwrap_or("<unnamed>");
        let location = info.location().map(|l| format!(" at {l}")).unwrap_or_default();
        eprintln!("\nthread '{name}' panicked{location}:\n{scrubbed}");
    }));
}

/// `text` (a URL, as a user wrote it) without what is between `://` and `@`: a user and
/// password in a URL are a secret wherever the URL is echoed.
pub fn without_userinfo(text: &str) -> Cow<'_, str> {
    let Some(scheme_end) = text.find("://").map(|i| i + 3) else { return Cow::Borrowed(text) };
    let authority_end =
        text[scheme_end..].find(['/', '?', '#']).map_or(text.len(), |i| scheme_end + i);
    match text[scheme_end..authority_end].rfind('@') {
        Some(at) => {
            Cow::Owned(format!("{}{REDACTED}{}", &text[..scheme_end], &text[scheme_end + at..]))
        }
        None => Cow::Borrowed(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(path: &str) -> SettingPath {
        SettingPath(
            path.split('/')
                .map(|s| match s.parse() {
                    Ok(i) => Segment::Index(i),
                    Err(_) => Segment::Key(s.to_owned()),
                })
                .collect(),
        )
    }

    #[test]
    fn the_declared_settings_are_secret_and_their_neighbours_are_not() {
        for secret in [
            "server/tokens/0",
            "server/tokens/3/token",
            "kafka/properties/sasl.password",
            "kafka/properties/ssl.key.password",
            "kafka/properties/ssl.keystore.password",
            "kafka/properties/ssl.truststore.password",
            "kafka/properties/sasl.oauthbearer.client.secret",
            "kafka/properties/ssl.key.pem",
            "kafka/properties/ssl_key",
            "kafka/properties/sasl.username",
            "kafka/properties/some.future.password",
            "history/object_store/access_key_id",
            "history/object_store/secret_access_key",
            "history/object_store/session_token",
            "history/object_store/options/aws_secret_access_key",
            "history/object_store/options/azure_storage_account_key",
            "history/object_store/options/google_service_account_key",
            "history/object_store/options/azure_storage_token",
            "history/catalog_token",
        ] {
            assert!(keys(secret).is_secret(), "{secret}");
        }
        for open in [
            "server/tokens/3/name",
            "server/tokens/3/scopes/0",
            "server/tokens/3/token_sha256",
            "server/listen",
            "server/tls_key",
            "kafka/properties/security.protocol",
            "kafka/properties/sasl.mechanism",
            "kafka/properties/ssl.certificate.pem",
            "kafka/brokers",
            "history/object_store/endpoint",
            "history/object_store/region",
            "history/object_store/allow_http",
            "history/object_store/options/aws_virtual_hosted_style_request",
            "history/object_store/options/azure_storage_account_name",
        ] {
            assert!(!keys(open).is_secret(), "{open}");
        }
        assert!(is_secret_kafka_property("sasl.password"));
        assert!(!is_secret_kafka_property("session.timeout.ms"));
    }

    #[test]
    fn paths_print_as_toml_keys() {
        let path = SettingPath::of_keys(&["kafka", "properties", "sasl.password"]);
        assert_eq!(path.to_string(), r#"kafka.properties."sasl.password""#);
        let token = SettingPath::of_keys(&["server", "tokens"]).index(2).key("token_file");
        assert_eq!(token.to_string(), "server.tokens[2].token_file");
    }

    #[test]
    fn globs_match_within_a_key() {
        assert!(glob_matches("*password*", "ssl.key.password"));
        assert!(glob_matches("*password*", "password"));
        assert!(glob_matches("a*b*c", "a-b-c") && !glob_matches("a*b*c", "a-c-b"));
        assert!(!glob_matches("*secret*", "sasl.mechanism"));
        assert!(glob_matches("exact", "exact") && !glob_matches("exact", "exactly"));
    }

    #[test]
    fn a_secret_never_debugs_or_serializes_as_itself() {
        let secret = Secret::new("hunter2-hunter2");
        assert!(!format!("{secret:?}").contains("hunter2"));
        assert_eq!(serde_json::to_string(&secret).unwrap(), format!("\"{REDACTED}\""));
        assert_eq!(secret.expose(), "hunter2-hunter2");
        let mut properties = std::collections::BTreeMap::new();
        properties.insert("sasl.password".to_owned(), "pw-in-a-map-1".to_owned());
        properties.insert("sasl.mechanism".to_owned(), "PLAIN".to_owned());
        let shown = format!("{:?}", RedactedProperties(&properties));
        assert!(!shown.contains("pw-in-a-map-1") && shown.contains("PLAIN"), "{shown}");
    }

    #[test]
    fn remembered_secrets_are_scrubbed_from_text_but_short_ones_are_not_searched() {
        remember("scrub-me-7f3a");
        remember("abc");
        let text = "cannot use 'scrub-me-7f3a' for abc";
        assert_eq!(scrub(text), format!("cannot use '{REDACTED}' for abc"));
        remember("with \"quotes\" in it");
        let quoted = format!("found string {:?}", "with \"quotes\" in it");
        assert_eq!(scrub(&quoted), format!("found string \"{REDACTED}\""));
        assert!(matches!(scrub("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_url_loses_its_user_and_password() {
        assert_eq!(without_userinfo("http://u:pw@h:1/x"), format!("http://{REDACTED}@h:1/x"));
        assert_eq!(without_userinfo("http://h:1/a@b"), "http://h:1/a@b");
        assert_eq!(without_userinfo("no url"), "no url");
    }

    fn resolve_toml(text: &str, env: &[(&str, &str)]) -> Result<(Dict, SecretSources), String> {
        let value: Value =
            toml::from_str::<toml::Table>(text).map(|t| Value::serialize(t).unwrap()).unwrap();
        let Value::Dict(_, mut root) = value else { unreachable!("a table") };
        let env = |name: &str| env.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string());
        let around = Surroundings { env: &env, given_in: &|_| "needle.toml".to_owned() };
        resolve(&mut root, &around).map(|sources| (root, sources))
    }

    fn secret_file(content: &str, mode: u32) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), content).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let permissions = std::fs::Permissions::from_mode(mode);
            std::fs::set_permissions(file.path(), permissions).unwrap();
        }
        file
    }

    #[test]
    fn files_and_variables_stand_in_for_secret_settings_only() {
        let file = secret_file("from-a-file-91\n", 0o600);
        let text = format!(
            "[server]\ntokens = [{{ name = \"a\", token_file = \"{}\" }}, \
             {{ name = \"b\", token_env = \"B_TOKEN\" }}, \"inline-token-3\"]\n\
             [kafka.properties]\n\"sasl.password_env\" = \"PW\"\n\"debug_file\" = \"x\"",
            file.path().display()
        );
        let env = [("B_TOKEN", "from-a-variable-5"), ("PW", "kafka-password-8")];
        let (root, sources) = resolve_toml(&text, &env).unwrap();
        let tokens = root["server"].as_dict().unwrap()["tokens"].as_array().unwrap();
        let token = |i: usize| tokens[i].as_dict().unwrap()["token"].as_str().unwrap().to_owned();
        assert_eq!((token(0).as_str(), token(1).as_str()), ("from-a-file-91", "from-a-variable-5"));
        let properties = root["kafka"].as_dict().unwrap()["properties"].as_dict().unwrap();
        assert_eq!(properties["sasl.password"].as_str(), Some("kafka-password-8"));
        // not a secret setting: left for librdkafka to refuse by name
        assert!(properties.contains_key("debug_file"));
        let tokens_at = SettingPath::of_keys(&["server", "tokens"]);
        assert_eq!(
            sources.origin(&tokens_at.index(0).key("token")),
            Some(&SecretOrigin::File(file.path().to_owned()))
        );
        assert_eq!(
            sources.origin(&tokens_at.index(1).key("token")),
            Some(&SecretOrigin::Env("B_TOKEN".into()))
        );
        assert_eq!(
            sources.origin(&tokens_at.index(2)),
            Some(&SecretOrigin::Inline { given_in: "needle.toml".into() })
        );
        assert!(sources.warnings.is_empty(), "{:?}", sources.warnings);
        assert!(scrub("x from-a-file-91 x").contains(REDACTED));
    }

    #[test]
    fn a_missing_empty_or_open_file_is_named_with_its_setting_and_never_shown() {
        let token_file = |path: &str| {
            format!("[server]\ntokens = [{{ name = \"a\", token_file = \"{path}\" }}]")
        };
        let error = resolve_toml(&token_file("/no/such/secret"), &[]).unwrap_err();
        assert!(
            error.contains("server.tokens[0].token_file") && error.contains("/no/such/secret"),
            "{error}"
        );
        let empty = secret_file("\n", 0o600);
        let path = empty.path().display().to_string();
        let error = resolve_toml(&token_file(&path), &[]).unwrap_err();
        assert!(error.contains("is empty") && error.contains(&path), "{error}");

        let open = secret_file("world-readable-secret-2", 0o644);
        let path = open.path().display().to_string();
        let (_, sources) = resolve_toml(&token_file(&path), &[]).unwrap();
        let [warning] = &sources.warnings[..] else { panic!("{:?}", sources.warnings) };
        assert!(warning.contains("server.tokens[0].token_file") && warning.contains(&path));
        assert!(warning.contains("644") && !warning.contains("world-readable-secret-2"));

        let text = "[kafka.properties]\n\"sasl.password_env\" = \"UNSET_PW\"";
        let error = resolve_toml(text, &[]).unwrap_err();
        assert!(error.contains(r#"kafka.properties."sasl.password_env""#), "{error}");
        assert!(error.contains("UNSET_PW") && error.contains("not set"), "{error}");

        let both = "[kafka.properties]\n\"sasl.password\" = \"x\"\n\"sasl.password_env\" = \"PW\"";
        let error = resolve_toml(both, &[("PW", "kafka-pw-given-twice")]).unwrap_err();
        assert!(error.contains("given twice") && !error.contains("kafka-pw-given-twice"));

        let marker = format!("[server]\ntokens = [\"{REDACTED}\"]");
        let error = resolve_toml(&marker, &[]).unwrap_err();
        assert!(error.contains("server.tokens[0]") && error.contains("needle config"), "{error}");
    }

    #[test]
    fn printing_redacts_secrets_and_points_back_at_files_and_variables() {
        let mut table: toml::Table = toml::from_str(
            "[server]\ntokens = [\"plain-1\", { name = \"a\", token = \"file-2\" }, \
             { name = \"b\", token = \"var-3\" }, { name = \"c\", token_sha256 = \"00\" }]\n\
             [kafka.properties]\n\"sasl.password\" = \"pw-4\"\n\"security.protocol\" = \"SSL\"\n\
             [history.object_store]\nsecret_access_key = \"\"\nregion = \"eu\"\n\
             access_key_id = \"akid-5\"\n[history.object_store.options]\n\
             google_service_account_key = \"gsak-6\"\naws_virtual_hosted_style_request = true",
        )
        .unwrap();
        let tokens = SettingPath::of_keys(&["server", "tokens"]);
        let sources = SecretSources {
            origins: vec![
                (tokens.index(0), SecretOrigin::Inline { given_in: "/etc/needle.toml".into() }),
                (tokens.index(1).key("token"), SecretOrigin::File("/run/a".into())),
                (tokens.index(2).key("token"), SecretOrigin::Env("B_TOKEN".into())),
            ],
            warnings: Vec::new(),
        };
        let notes = redact_for_printing(&mut table, &sources);
        let printed = toml::to_string(&table).unwrap();
        for secret in ["plain-1", "file-2", "var-3", "pw-4", "akid-5", "gsak-6"] {
            assert!(!printed.contains(secret), "{secret} in {printed}");
        }
        assert!(printed.contains("token_file = \"/run/a\""), "{printed}");
        assert!(printed.contains("token_env = \"B_TOKEN\""), "{printed}");
        assert!(printed.contains("token_sha256 = \"00\"") && printed.contains("SSL"), "{printed}");
        assert!(printed.contains("secret_access_key = \"\""), "an unset secret stays empty");
        assert!(printed.contains("aws_virtual_hosted_style_request = true"), "{printed}");
        assert_eq!(
            notes,
            [
                "server.tokens[0]: given in /etc/needle.toml",
                r#"kafka.properties."sasl.password": given in the program's own configuration"#,
                "history.object_store.access_key_id: given in the program's own configuration",
                "history.object_store.options.google_service_account_key: given in the \
                 program's own configuration",
            ]
        );
    }
}
