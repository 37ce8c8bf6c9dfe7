//! The `bullet` workload: records shaped like the data of the Bullet-on-Storm experiments, 92
//! top-level fields (62 strings, 4 longs, 23 maps of string → string with 3–12 entries, 3 lists
//! of 1–5 maps), about 1.8 KiB of JSON each; and the needle records injected into it.
//!
//! The shape (field order is fixed, values vary):
//! ```text
//! {"id":"3f9a0c81d2",            10 hex chars, unique per record (a bijection of the sequence number)
//!  "event_ts":1700000000000,      ms, strictly increasing (+1..3 ms per record)
//!  "session_id":"9c1e20ab", "device":"iphone", "browser_name":"chrome", "browser_version":"120.0",
//!  "demographics":{"country":"US","age":"34","gender":"f",...},   country skewed over 50 values
//!  "timespent":1234, "page_url":"/news/48213", "referrer":"google", "experiments":{"e1":"b",...},
//!  ... 62 string fields, 4 longs (event_ts, timespent, page_load_ms, dl_bytes), 23 maps,
//!  "clicks":[{"pos":"3","tgt":"a7"}], "impressions":[...], "errors":[...] }
//! ```
//! Skewed fields (device, browser_name, browser_version, os_name, referrer, lang, event_type,
//! country) draw value k of n with weight 1/(k+1); the other picks are uniform. Most maps have
//! 3 or 4 entries (their first entries, in a fixed key order), a few up to 12: P(3+k) ∝ 0.1^k,
//! but at least 1/1024 for every count (draws go through 1024-slot tables). Lists hold 1–5 maps
//! (70% one).
//!
//! Needles: every record draws its random values the same way whether or not it is a needle,
//! so a stream with needles equals the stream without them except for the needle fields of the
//! needle records.

use crate::write::{hex, i64_dec, json_str, u64_dec};
use crate::{WorkloadError, WorkloadSpec};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// How a value is drawn.
#[derive(Clone, Copy)]
enum Val {
    /// Uniform over the pool.
    Pick(&'static [&'static str]),
    /// Skewed over the pool (weight 1/(k+1)); the index is into [`SKEWED`].
    Skewed(usize),
    /// A decimal integer in `lo..=hi`, as a string.
    Num(u32, u32),
    /// Random lowercase hex digits.
    Hex(u32),
}

#[derive(Clone, Copy)]
enum Kind {
    Id,
    EventTs,
    PageUrl,
    Str(Val),
    Long(u32, u32),
    Map(&'static MapDef),
    List(&'static ListDef),
}

struct MapDef {
    keys: &'static [&'static str],
    /// One value kind for every key, or one per key.
    vals: &'static [Val],
}

struct ListDef {
    keys: &'static [&'static str],
    vals: &'static [Val],
}

const COUNTRIES: &[&str] = &[
    "US", "IN", "BR", "GB", "DE", "FR", "JP", "CA", "MX", "ID", "IT", "ES", "AU", "KR", "RU", "TR",
    "PH", "VN", "NL", "PL", "AR", "CO", "TH", "EG", "NG", "ZA", "SE", "BE", "CH", "AT", "IE", "PT",
    "GR", "CZ", "RO", "HU", "DK", "FI", "NO", "IL", "SA", "AE", "SG", "MY", "NZ", "CL", "PE", "PK",
    "BD", "UA",
];
const DEVICES: &[&str] =
    &["iphone", "android", "desktop", "ipad", "tablet", "tv", "mac", "console", "watch", "other"];
const BROWSERS: &[&str] =
    &["chrome", "safari", "edge", "firefox", "samsung", "opera", "ucweb", "ie"];
const BROWSER_VERSIONS: &[&str] = &[
    "120.0", "119.0", "17.1", "118.0", "121.0", "16.6", "117.0", "17.0", "115.0", "116.0", "16.5",
    "114.0", "119.1", "15.6", "113.0", "112.0", "120.1", "23.0", "22.0", "111.0", "110.0", "16.4",
    "109.0", "108.0", "11.0", "107.0", "106.0", "15.4", "105.0", "104.0",
];
const OS: &[&str] = &["ios", "android", "windows", "macos", "linux", "chromeos", "tizen"];
const REFERRERS: &[&str] =
    &["", "google", "yahoo", "bing", "facebook", "twitter", "reddit", "ddg", "email", "news"];
const LANGS: &[&str] = &["en", "es", "pt", "fr", "de", "ja", "hi", "it", "ko", "ru", "zh", "ar"];
const EVENTS: &[&str] = &["view", "click", "scroll", "hover", "share", "close", "error"];
/// The skewed pools, indexed by [`Val::Skewed`].
const SKEWED: &[&[&str]] =
    &[COUNTRIES, DEVICES, BROWSERS, BROWSER_VERSIONS, OS, REFERRERS, LANGS, EVENTS];
const COUNTRY: Val = Val::Skewed(0);

const SECTIONS: &[&str] =
    &["news", "sports", "finance", "mail", "tech", "style", "travel", "food", "autos", "games"];
const SITES: &[&str] = &["www", "m", "app", "amp", "beta"];
const APP_VERSIONS: &[&str] = &["", "", "5.2.1", "5.3.0", "5.3.2", "6.0.0"];
const OS_VERSIONS: &[&str] = &["17", "16", "14", "13", "11", "10", "12"];
const FLAG: &[&str] = &["0", "1"];
const YN: &[&str] = &["y", "n"];
const ABC: &[&str] = &["a", "b", "c", "d"];
const EMPTYISH: &[&str] = &["", "", "", "1", "2", "x"];
const DIGIT: &[&str] = &["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];
const TIERS: &[&str] = &["free", "plus", "pro"];
const NETS: &[&str] = &["wifi", "4g", "5g", "3g", "eth"];
const GENDERS: &[&str] = &["f", "m", "u"];
const BUCKETS: &[&str] = &["a", "b", "c", "ctl"];

const DEMOGRAPHICS: MapDef = MapDef {
    keys: &[
        "country", "age", "gender", "edu", "inc", "rg", "ms", "kids", "home", "occ", "eth", "hh",
    ],
    vals: &[
        COUNTRY,
        Val::Num(13, 79),
        Val::Pick(GENDERS),
        Val::Num(1, 6),
        Val::Num(1, 9),
        Val::Num(1, 50),
        Val::Pick(YN),
        Val::Num(0, 4),
        Val::Pick(YN),
        Val::Num(1, 30),
        Val::Num(1, 8),
        Val::Num(1, 7),
    ],
};
const K12: &[&str] = &["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"];
const EXPS: &[&str] = &["e1", "e2", "e3", "e4", "e5", "e6", "e7", "e8", "e9", "e10", "e11", "e12"];
const EXPERIMENTS: MapDef = MapDef { keys: EXPS, vals: &[Val::Pick(BUCKETS)] };
const GEO: MapDef = MapDef {
    keys: &["cc", "rg", "ct", "zip", "dma", "tz", "isp", "asn", "conn", "colo", "lat", "lon"],
    vals: &[COUNTRY, Val::Num(1, 50), Val::Num(1, 999), Val::Num(100, 999), Val::Num(500, 881)],
};
const PERF: MapDef = MapDef {
    keys: &["dns", "tcp", "ttfb", "dom", "load", "fcp", "lcp", "cls", "fid", "tti", "tbt", "si"],
    vals: &[Val::Num(0, 999)],
};
const ADS: MapDef = MapDef {
    keys: &["pos", "sz", "adv", "cr", "li", "pl", "ord", "bid", "cpm", "fmt", "viz", "clk"],
    vals: &[Val::Num(0, 99)],
};
const COOKIES: MapDef = MapDef {
    keys: &["b", "t", "y", "a", "f", "c", "v", "s", "u", "n", "d", "m"],
    vals: &[Val::Hex(2)],
};
const FLAGS: MapDef = MapDef { keys: K12, vals: &[Val::Pick(FLAG)] };
const MAPS: [(&str, MapDef); 16] = [
    ("ctx", MapDef { keys: K12, vals: &[Val::Pick(ABC)] }),
    ("prefs", MapDef { keys: K12, vals: &[Val::Pick(YN)] }),
    ("gdpr", MapDef { keys: K12, vals: &[Val::Pick(FLAG)] }),
    ("viewport", MapDef { keys: K12, vals: &[Val::Num(0, 99)] }),
    ("net_info", MapDef { keys: K12, vals: &[Val::Pick(NETS)] }),
    ("cnt", MapDef { keys: K12, vals: &[Val::Hex(2)] }),
    ("srch", MapDef { keys: K12, vals: &[Val::Pick(DIGIT)] }),
    ("soc", MapDef { keys: K12, vals: &[Val::Pick(FLAG)] }),
    ("shop", MapDef { keys: K12, vals: &[Val::Num(0, 99)] }),
    ("video", MapDef { keys: K12, vals: &[Val::Num(0, 9)] }),
    ("push", MapDef { keys: K12, vals: &[Val::Pick(YN)] }),
    ("abm", MapDef { keys: K12, vals: &[Val::Pick(ABC)] }),
    ("app", MapDef { keys: K12, vals: &[Val::Pick(DIGIT)] }),
    ("meta", MapDef { keys: K12, vals: &[Val::Hex(2)] }),
    ("trk", MapDef { keys: K12, vals: &[Val::Pick(FLAG)] }),
    ("caps", MapDef { keys: K12, vals: &[Val::Pick(YN)] }),
];
const CLICKS: ListDef = ListDef { keys: &["pos", "tgt"], vals: &[Val::Num(0, 20), Val::Hex(2)] };
const IMPRESSIONS: ListDef =
    ListDef { keys: &["id", "slot"], vals: &[Val::Hex(4), Val::Num(0, 9)] };
const ERRORS: ListDef = ListDef {
    keys: &["code", "src"],
    vals: &[Val::Num(400, 599), Val::Pick(&["js", "net", "img"])],
};

const fn s(val: Val) -> Kind {
    Kind::Str(val)
}
const fn p(pool: &'static [&'static str]) -> Kind {
    Kind::Str(Val::Pick(pool))
}

/// The 92 top-level fields, in output order.
const FIELDS: &[(&str, Kind)] = &[
    ("id", Kind::Id),
    ("event_ts", Kind::EventTs),
    ("session_id", s(Val::Hex(8))),
    ("event_type", s(Val::Skewed(7))),
    ("device", s(Val::Skewed(1))),
    ("browser_name", s(Val::Skewed(2))),
    ("browser_version", s(Val::Skewed(3))),
    ("os_name", s(Val::Skewed(4))),
    ("os_version", p(OS_VERSIONS)),
    ("demographics", Kind::Map(&DEMOGRAPHICS)),
    ("timespent", Kind::Long(0, 3600)),
    ("page_url", Kind::PageUrl),
    ("referrer", s(Val::Skewed(5))),
    ("lang", s(Val::Skewed(6))),
    ("site", p(SITES)),
    ("section", p(SECTIONS)),
    ("app_version", p(APP_VERSIONS)),
    ("experiments", Kind::Map(&EXPERIMENTS)),
    ("geo", Kind::Map(&GEO)),
    ("page_load_ms", Kind::Long(50, 5000)),
    ("perf", Kind::Map(&PERF)),
    ("ads", Kind::Map(&ADS)),
    ("cookies", Kind::Map(&COOKIES)),
    ("flags", Kind::Map(&FLAGS)),
    ("dl_bytes", Kind::Long(100, 9999)),
    ("src", p(EMPTYISH)),
    ("prop", s(Val::Num(1, 99))),
    ("cat", p(ABC)),
    ("tz", s(Val::Num(0, 23))),
    ("net", p(NETS)),
    ("carrier", s(Val::Num(0, 9))),
    ("res", p(DIGIT)),
    ("vp", p(DIGIT)),
    ("layout", p(ABC)),
    ("theme", p(YN)),
    ("mkt", p(DIGIT)),
    ("chan", p(ABC)),
    ("camp", p(EMPTYISH)),
    ("slot", p(DIGIT)),
    ("cid", s(Val::Hex(3))),
    ("pid", s(Val::Hex(3))),
    ("act", p(DIGIT)),
    ("tgt", p(EMPTYISH)),
    ("lbl", p(EMPTYISH)),
    ("mod", p(ABC)),
    ("pos", p(DIGIT)),
    ("view", p(FLAG)),
    ("feed", p(FLAG)),
    ("rank", p(DIGIT)),
    ("algo", p(ABC)),
    ("bkt", p(DIGIT)),
    ("tier", p(TIERS)),
    ("plan", p(EMPTYISH)),
    ("auth", p(FLAG)),
    ("nav", p(DIGIT)),
    ("dnt", p(FLAG)),
    ("ck", p(FLAG)),
    ("amp", p(FLAG)),
    ("bot", p(FLAG)),
    ("colo", p(ABC)),
    ("dc", p(DIGIT)),
    ("ab", p(ABC)),
    ("pvt", p(DIGIT)),
    ("ct", p(DIGIT)),
    ("pub", p(EMPTYISH)),
    ("rgn", p(DIGIT)),
    ("sdk", p(EMPTYISH)),
    ("conn", p(FLAG)),
    ("pgt", p(ABC)),
    ("hd", p(FLAG)),
    ("mob", p(FLAG)),
    ("cohort", p(DIGIT)),
    ("locale", s(Val::Skewed(6))),
    (MAPS[0].0, Kind::Map(&MAPS[0].1)),
    (MAPS[1].0, Kind::Map(&MAPS[1].1)),
    (MAPS[2].0, Kind::Map(&MAPS[2].1)),
    (MAPS[3].0, Kind::Map(&MAPS[3].1)),
    (MAPS[4].0, Kind::Map(&MAPS[4].1)),
    (MAPS[5].0, Kind::Map(&MAPS[5].1)),
    (MAPS[6].0, Kind::Map(&MAPS[6].1)),
    (MAPS[7].0, Kind::Map(&MAPS[7].1)),
    (MAPS[8].0, Kind::Map(&MAPS[8].1)),
    (MAPS[9].0, Kind::Map(&MAPS[9].1)),
    (MAPS[10].0, Kind::Map(&MAPS[10].1)),
    (MAPS[11].0, Kind::Map(&MAPS[11].1)),
    (MAPS[12].0, Kind::Map(&MAPS[12].1)),
    (MAPS[13].0, Kind::Map(&MAPS[13].1)),
    (MAPS[14].0, Kind::Map(&MAPS[14].1)),
    (MAPS[15].0, Kind::Map(&MAPS[15].1)),
    ("clicks", Kind::List(&CLICKS)),
    ("impressions", Kind::List(&IMPRESSIONS)),
    ("errors", Kind::List(&ERRORS)),
];

/// The first `event_ts` (2023-11-14T22:13:20Z).
pub const EVENT_TS_START: u64 = 1_700_000_000_000;
const ID_BITS: u32 = 40;
const ID_MASK: u64 = (1 << ID_BITS) - 1;
/// Lookup tables of this many slots draw the skewed values and entry counts with one draw.
const TABLE_SLOTS: usize = 1024;

/// The JSON text a needle puts in place of a value.
#[derive(Debug, Clone)]
struct Override {
    key: String,
    json: Vec<u8>,
}

#[derive(Debug, Clone)]
struct Needles {
    start: u64,
    end: u64,
    /// Per top-level field: the replacement value.
    top: Vec<Option<Vec<u8>>>,
    /// Per top-level field (maps only): entries to set.
    entries: Vec<Vec<Override>>,
}

/// The bullet generator's state.
#[derive(Debug, Clone)]
pub(crate) struct Bullet {
    draw: Draw,
    seq: u64,
    ts: u64,
    id_offset: u64,
    needles: Option<Needles>,
}

/// The random source and the lookup tables it draws through.
#[derive(Debug, Clone)]
struct Draw {
    rng: ChaCha8Rng,
    skewed: Vec<Vec<u16>>,
    entry_counts: Vec<u16>,
    list_lens: Vec<u16>,
}

/// `slots` draws from weights (slot counts proportional to the weights, at least one each).
fn table(weights: &[f64]) -> Vec<u16> {
    let total: f64 = weights.iter().sum();
    let mut out = Vec::with_capacity(TABLE_SLOTS);
    for (k, w) in weights.iter().enumerate() {
        let n = ((w / total * TABLE_SLOTS as f64).round() as usize).max(1);
        out.extend(std::iter::repeat_n(k as u16, n));
    }
    // Rounding leaves a few slots over or under: take them from, or give them to, the first
    // value (the most likely one in every table here), so every value keeps at least one slot.
    if out.len() > TABLE_SLOTS {
        out.drain(..out.len() - TABLE_SLOTS);
    }
    while out.len() < TABLE_SLOTS {
        out.insert(0, 0);
    }
    out
}

/// Uniform in `0..n` from one 32-bit draw (multiply-shift; the bias is below 2^-24 here).
#[inline]
fn pick(rng: &mut ChaCha8Rng, n: usize) -> usize {
    ((rng.next_u32() as u64 * n as u64) >> 32) as usize
}

#[inline]
fn from_table(rng: &mut ChaCha8Rng, table: &[u16]) -> usize {
    table[(rng.next_u32() >> 22) as usize] as usize
}

/// A bijection on 40-bit integers that looks random: sequence number → unique id.
fn scramble(mut x: u64) -> u64 {
    x &= ID_MASK;
    x = x.wrapping_mul(0x9E37_79B9_7F4B) & ID_MASK;
    x ^= x >> 21;
    x = x.wrapping_mul(0xC2B2_AE3D_27D5) & ID_MASK; // odd: invertible mod 2^40
    x ^= x >> 19;
    x
}

impl Bullet {
    pub(crate) fn new(spec: &WorkloadSpec) -> Result<Self, WorkloadError> {
        let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
        let id_offset = rng.next_u64() & ID_MASK;
        let skewed = SKEWED
            .iter()
            .map(|pool| table(&(0..pool.len()).map(|k| 1.0 / (k + 1) as f64).collect::<Vec<_>>()))
            .collect();
        let mut w = 1.0;
        let entry_counts: Vec<f64> = (3..=12)
            .map(|_| {
                let x = w;
                w *= 0.1;
                x
            })
            .collect();
        let list_lens = [0.7, 0.15, 0.08, 0.04, 0.03];
        let needles = match spec.needle_start()? {
            None => None,
            Some(start) => {
                let needle = spec.needle.as_ref().expect("needle_start is Some only with a needle");
                Some(resolve_needles(&needle.fields, start, start + needle.count)?)
            }
        };
        let draw =
            Draw { rng, skewed, entry_counts: table(&entry_counts), list_lens: table(&list_lens) };
        Ok(Self { draw, seq: 0, ts: EVENT_TS_START, id_offset, needles })
    }

    /// Appends the next record's JSON to `out`.
    pub(crate) fn write_next(&mut self, out: &mut Vec<u8>) {
        let seq = self.seq;
        self.seq += 1;
        let draw = &mut self.draw;
        self.ts += 1 + pick(&mut draw.rng, 3) as u64;
        let needles = self.needles.as_ref().filter(|n| (n.start..n.end).contains(&seq));
        out.reserve(2048);
        for (i, (name, kind)) in FIELDS.iter().enumerate() {
            out.extend_from_slice(if i == 0 { b"{\"" } else { b",\"" });
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b"\":");
            let mark = out.len();
            match *kind {
                Kind::Id => {
                    out.push(b'"');
                    hex(out, scramble(seq.wrapping_add(self.id_offset)), ID_BITS / 4);
                    out.push(b'"');
                }
                Kind::EventTs => u64_dec(out, self.ts),
                Kind::PageUrl => {
                    out.extend_from_slice(b"\"/");
                    out.extend_from_slice(SECTIONS[pick(&mut draw.rng, SECTIONS.len())].as_bytes());
                    out.push(b'/');
                    u64_dec(out, pick(&mut draw.rng, 100_000) as u64);
                    out.push(b'"');
                }
                Kind::Str(val) => draw.write_val(out, val),
                Kind::Long(lo, hi) => {
                    u64_dec(out, lo as u64 + pick(&mut draw.rng, (hi - lo + 1) as usize) as u64)
                }
                Kind::Map(def) => {
                    let n = 3 + from_table(&mut draw.rng, &draw.entry_counts);
                    let overrides = needles.map_or(&[][..], |nd| &nd.entries[i][..]);
                    draw.write_map(out, def, n, overrides);
                }
                Kind::List(def) => {
                    let n = 1 + from_table(&mut draw.rng, &draw.list_lens);
                    out.push(b'[');
                    for j in 0..n {
                        if j > 0 {
                            out.push(b',');
                        }
                        let def = MapDef { keys: def.keys, vals: def.vals };
                        draw.write_map(out, &def, def.keys.len(), &[]);
                    }
                    out.push(b']');
                }
            }
            if let Some(json) = needles.and_then(|nd| nd.top[i].as_deref()) {
                out.truncate(mark);
                out.extend_from_slice(json);
            }
        }
        out.push(b'}');
    }

    pub(crate) fn produced(&self) -> u64 {
        self.seq
    }
}

impl Draw {
    fn write_map(&mut self, out: &mut Vec<u8>, def: &MapDef, n: usize, overrides: &[Override]) {
        out.push(b'{');
        let mut used = [false; 8];
        for (j, key) in def.keys[..n].iter().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            out.push(b'"');
            out.extend_from_slice(key.as_bytes());
            out.extend_from_slice(b"\":");
            let mark = out.len();
            let val =
                if def.vals.len() == 1 { def.vals[0] } else { def.vals[j.min(def.vals.len() - 1)] };
            self.write_val(out, val);
            if let Some(o) = overrides.iter().position(|o| o.key == *key) {
                out.truncate(mark);
                out.extend_from_slice(&overrides[o].json);
                used[o] = true;
            }
        }
        for (o, ov) in overrides.iter().enumerate() {
            if !used[o] {
                out.push(b',');
                json_str(out, &ov.key);
                out.push(b':');
                out.extend_from_slice(&ov.json);
            }
        }
        out.push(b'}');
    }

    #[inline]
    fn write_val(&mut self, out: &mut Vec<u8>, val: Val) {
        out.push(b'"');
        match val {
            Val::Pick(pool) => {
                out.extend_from_slice(pool[pick(&mut self.rng, pool.len())].as_bytes())
            }
            Val::Skewed(t) => {
                let k = from_table(&mut self.rng, &self.skewed[t]);
                out.extend_from_slice(SKEWED[t][k].as_bytes())
            }
            Val::Num(lo, hi) => {
                u64_dec(out, lo as u64 + pick(&mut self.rng, (hi - lo + 1) as usize) as u64)
            }
            Val::Hex(digits) => hex(out, self.rng.next_u64(), digits),
        }
        out.push(b'"');
    }
}

/// Maps each `(field, value)` of a needle to what it replaces; the errors name the problem.
fn resolve_needles(
    fields: &[(String, String)],
    start: u64,
    end: u64,
) -> Result<Needles, WorkloadError> {
    let mut top = vec![None; FIELDS.len()];
    let mut entries: Vec<Vec<Override>> = vec![Vec::new(); FIELDS.len()];
    for (field, value) in fields {
        let (name, key) = match field.split_once('.') {
            Some((name, key)) => (name, Some(key)),
            None => (field.as_str(), None),
        };
        let Some(i) = FIELDS.iter().position(|(n, _)| *n == name) else {
            return Err(WorkloadError::Needle(format!(
                "bullet has no field `{name}` (e.g. id, device, browser_name, timespent, demographics.country)"
            )));
        };
        let mut json = Vec::new();
        match (FIELDS[i].1, key) {
            (Kind::Map(_), Some(key)) if !key.is_empty() => {
                json_str(&mut json, value);
                if entries[i].iter().any(|o| o.key == key) {
                    return Err(WorkloadError::Needle(format!("`{field}` is given twice")));
                }
                if entries[i].len() == 8 {
                    return Err(WorkloadError::Needle(format!(
                        "at most 8 needle entries per map (`{name}`)"
                    )));
                }
                entries[i].push(Override { key: key.to_owned(), json });
                continue;
            }
            (Kind::Map(_), _) => {
                return Err(WorkloadError::Needle(format!(
                    "`{name}` is a map: name one of its entries, e.g. `{name}.{}`",
                    if name == "demographics" { "country" } else { "a" }
                )))
            }
            (Kind::List(_), _) => {
                return Err(WorkloadError::Needle(format!(
                    "`{name}` is a list of maps; it cannot be a needle field"
                )))
            }
            (_, Some(_)) => {
                return Err(WorkloadError::Needle(format!(
                    "`{name}` is not a map, so `{field}` names nothing"
                )))
            }
            (Kind::EventTs | Kind::Long(..), None) => {
                let v: i64 = value.parse().map_err(|_| {
                    WorkloadError::Needle(format!(
                        "`{name}` is a long field: `{value}` is not an integer"
                    ))
                })?;
                i64_dec(&mut json, v);
            }
            (Kind::Id | Kind::PageUrl | Kind::Str(_), None) => json_str(&mut json, value),
        }
        if top[i].is_some() {
            return Err(WorkloadError::Needle(format!("`{field}` is given twice")));
        }
        top[i] = Some(json);
    }
    Ok(Needles { start, end, top, entries })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_table_has_the_bullet_shape() {
        let count = |f: fn(&Kind) -> bool| FIELDS.iter().filter(|(_, k)| f(k)).count();
        assert_eq!(FIELDS.len(), 92);
        assert_eq!(count(|k| matches!(k, Kind::Id | Kind::PageUrl | Kind::Str(_))), 62);
        assert_eq!(count(|k| matches!(k, Kind::EventTs | Kind::Long(..))), 4);
        assert_eq!(count(|k| matches!(k, Kind::Map(_))), 23);
        assert_eq!(count(|k| matches!(k, Kind::List(_))), 3);
        let mut names: Vec<&str> = FIELDS.iter().map(|(n, _)| *n).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 92, "field names are unique");
        for (_, kind) in FIELDS {
            if let Kind::Map(def) = kind {
                assert_eq!(def.keys.len(), 12);
                assert!(def.vals.len() == 1 || def.vals.len() <= def.keys.len());
            }
        }
    }

    #[test]
    fn scramble_is_a_bijection_on_a_sample() {
        let mut seen: Vec<u64> = (0..200_000).map(scramble).collect();
        assert!(seen.iter().all(|x| *x <= ID_MASK));
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 200_000);
    }

    #[test]
    fn tables_have_the_slots_and_the_skew() {
        for t in [table(&[1.0, 0.5, 0.25]), table(&[1.0; 50]), table(&[0.9, 0.0001])] {
            assert_eq!(t.len(), TABLE_SLOTS);
        }
        assert!(table(&[0.9, 0.0001]).contains(&1));
        let t = table(&[1.0, 0.5]);
        assert_eq!(t.iter().filter(|k| **k == 0).count(), 683);
    }
}
