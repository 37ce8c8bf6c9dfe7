//! What travels on the distributed mode's topics.
//!
//! **Query topic** (compacted; key: the query id). A running query is a JSON value (few and small,
//! so readable with Kafka's console tools):
//! `{"v":1,"id":..,"owner":..,"query":..,"config":{..},"plan":"<hex>","received_ms":..,"ends_ms":..,
//! "client":..,"results_from":..,"url":..}`.
//! `config` is the api node's query configuration, so every worker compiles the text to the same
//! plan; `plan` is the FNV-1a hash of that plan's JSON, which the worker checks. A query's end is
//! a tombstone (the key with no value), which compaction eventually keeps alone and then drops.
//! An api node that adopts the query of one that died writes the same notice with itself as
//! `owner`: the last notice of an id says who merges it. `client` is whose query it is, and
//! `results_from` the offset of the query's partition of the results topic that its partials
//! come at or after (where an adopting node starts reading them). `url` is the base URL clients
//! reach the owner at (its `server.advertised_url`), where the other api nodes send a client
//! asking them for the query; notices of builds before it have none.
//!
//! **Results topic** (key: the owning api node, empty for progress). Binary, little-endian:
//!
//! | bytes | field |
//! |---|---|
//! | 4 | magic `NDLM` |
//! | 1 | version ([`VERSION`]) |
//! | 1 | kind: 1 partial, 2 progress, 3 history, 4 worker, 5 api, 6 cut |
//! | 2 + n | partial, history: the owning api node (length, UTF-8) |
//! | 2 + n | partial, history: the query id |
//! | rest | partial: the engine's encoded partial (itself versioned and checksummed) |
//! | 8 | progress: records read since the worker's last progress message |
//! | 2 + n | history: the worker node that read its store |
//! | 1 | history: 1 planned, 2 piece, 3 done |
//! | 1 (+ 16) | planned: 1 and the first and last stored record times (i64), or 0: none |
//! | 8 + rest | piece: its record time (i64), the engine's encoded partial |
//! | rest | done: what the read cost, JSON |
//! | 2 + n, 1 | worker: its name, 1 when it keeps history (sent every second: the api nodes' roster) |
//! | 2 + n | api: its name (sent every second: how api nodes tell that one died) |
//! | 2 + n, 8, 8, 8 | cut: query id, emission number, offset of its last partial (-1: none), time |
//!
//! A cut is written by an api node before it delivers an emission of a windowed query: where it
//! cut it, so that an api node adopting the query cuts there too.
//!
//! Decoding never trusts a length and never panics; anything unexpected is an error the reader
//! counts and skips.

use needle_engine::aggregate::codec::fnv1a64;
use needle_query::plan::Plan;
use needle_query::QueryConfig;
use needle_runtime::history::ReplayReport;
use serde::{Deserialize, Serialize};

/// The results topic's format version.
pub const VERSION: u8 = 1;
const MAGIC: &[u8; 4] = b"NDLM";
const PARTIAL: u8 = 1;
const PROGRESS: u8 = 2;
const HISTORY: u8 = 3;
const WORKER: u8 = 4;
const API: u8 = 5;
const CUT: u8 = 6;
const REPORT: u8 = 7;
const PLANNED: u8 = 1;
const PIECE: u8 = 2;
const DONE: u8 = 3;

/// A running query, as the query topic carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueryNotice {
    pub v: u32,
    pub id: String,
    pub owner: String,
    pub query: String,
    pub config: QueryConfig,
    pub plan: String,
    pub received_ms: i64,
    pub ends_ms: i64,
    /// A query that looks back: its range as the api node resolved it (`from`, `to`; relative
    /// times are relative to the api node's clock when it compiled the query).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<(i64, Option<i64>)>,
    /// Whose query it is (a token's name or a client's address), kept when it is adopted.
    #[serde(default)]
    pub client: String,
    /// The offset of the query's partition of the results topic that its partials come at or
    /// after (none: from the oldest the topic keeps).
    #[serde(default)]
    pub results_from: Option<i64>,
    /// The base URL clients reach the owner at (empty: not known, a notice of an older build).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub url: String,
    /// A query that looks back: the worker nodes whose reads of their stores it waits for
    /// (empty for a notice of an older build: such a query is not adopted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history_workers: Vec<String>,
    /// A query that looks back, over a store on object storage the workers share: the
    /// manifest version its api node planned from (the workers deal that version's parts out
    /// among themselves); none: each reads by writers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_version: Option<u64>,
}

impl QueryNotice {
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a notice serializes")
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, String> {
        let notice: QueryNotice =
            serde_json::from_slice(bytes).map_err(|e| format!("not a query notice: {e}"))?;
        if notice.v != 1 {
            return Err(format!("query notice version {} (this build reads 1)", notice.v));
        }
        Ok(notice)
    }
}

/// The fingerprint of a plan: FNV-1a 64 of its JSON, in hex.
pub fn plan_hash(plan: &Plan) -> String {
    let json = serde_json::to_vec(plan).expect("a plan serializes");
    format!("{:016x}", fnv1a64(&json))
}

/// A message of the results topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultsMessage<'a> {
    Partial {
        owner: &'a str,
        id: &'a str,
        partial: &'a [u8],
    },
    Progress {
        records: u64,
    },
    /// A worker node's read of its stored past for a query.
    History {
        owner: &'a str,
        id: &'a str,
        worker: &'a str,
        event: HistoryWire<'a>,
    },
    /// A worker node is up (and whether it keeps history).
    Worker {
        name: &'a str,
        history: bool,
    },
    /// An api node is up.
    Api {
        name: &'a str,
    },
    /// A node's report of itself for the cluster view
    /// ([`needle_runtime::cluster::NodeReport`] as JSON), sent with its heartbeat. A kind of
    /// its own: nodes of older builds skip it (logged) and read the heartbeats as before.
    Report {
        json: &'a [u8],
    },
    /// Where an api node cut an emission of a windowed query.
    Cut {
        id: &'a str,
        emission: u64,
        through: i64,
        at_ms: i64,
    },
}

/// What a worker node's read of the past sends (see `needle_runtime::history::WorkerHistory`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HistoryWire<'a> {
    Planned {
        data: Option<(i64, i64)>,
    },
    Piece {
        at_ms: i64,
        partial: &'a [u8],
    },
    /// [`ReadReport`] as JSON.
    Done {
        report: &'a [u8],
    },
}

/// A worker node's [`ReplayReport`] as the results topic carries it (with what it read but
/// counted in no piece).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadReport {
    #[serde(flatten)]
    pub report: ReplayReport,
    pub seen_after: u64,
}

impl ReadReport {
    pub fn to_bytes(report: &ReplayReport) -> Vec<u8> {
        let wire = ReadReport { report: report.clone(), seen_after: report.seen_after };
        serde_json::to_vec(&wire).expect("a report serializes")
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<ReplayReport, String> {
        let wire: ReadReport =
            serde_json::from_slice(bytes).map_err(|e| format!("not a read report: {e}"))?;
        let mut report = wire.report;
        report.seen_after = wire.seen_after;
        Ok(report)
    }
}

impl<'a> ResultsMessage<'a> {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(MAGIC);
        out.push(VERSION);
        match self {
            ResultsMessage::Partial { owner, id, partial } => {
                out.reserve(partial.len());
                out.push(PARTIAL);
                put_str(&mut out, owner);
                put_str(&mut out, id);
                out.extend_from_slice(partial);
            }
            ResultsMessage::Progress { records } => {
                out.push(PROGRESS);
                out.extend_from_slice(&records.to_le_bytes());
            }
            ResultsMessage::History { owner, id, worker, event } => {
                out.push(HISTORY);
                put_str(&mut out, owner);
                put_str(&mut out, id);
                put_str(&mut out, worker);
                match event {
                    HistoryWire::Planned { data: None } => out.extend_from_slice(&[PLANNED, 0]),
                    HistoryWire::Planned { data: Some((first, last)) } => {
                        out.extend_from_slice(&[PLANNED, 1]);
                        out.extend_from_slice(&first.to_le_bytes());
                        out.extend_from_slice(&last.to_le_bytes());
                    }
                    HistoryWire::Piece { at_ms, partial } => {
                        out.push(PIECE);
                        out.extend_from_slice(&at_ms.to_le_bytes());
                        out.extend_from_slice(partial);
                    }
                    HistoryWire::Done { report } => {
                        out.push(DONE);
                        out.extend_from_slice(report);
                    }
                }
            }
            ResultsMessage::Worker { name, history } => {
                out.push(WORKER);
                put_str(&mut out, name);
                out.push(u8::from(*history));
            }
            ResultsMessage::Api { name } => {
                out.push(API);
                put_str(&mut out, name);
            }
            ResultsMessage::Report { json } => {
                out.push(REPORT);
                out.extend_from_slice(json);
            }
            ResultsMessage::Cut { id, emission, through, at_ms } => {
                out.push(CUT);
                put_str(&mut out, id);
                out.extend_from_slice(&emission.to_le_bytes());
                out.extend_from_slice(&through.to_le_bytes());
                out.extend_from_slice(&at_ms.to_le_bytes());
            }
        }
        out
    }

    pub fn decode(bytes: &'a [u8]) -> Result<Self, String> {
        if bytes.len() < 6 || &bytes[..4] != MAGIC {
            return Err("not a needle results message (bad magic)".into());
        }
        if bytes[4] != VERSION {
            return Err(format!(
                "results message version {} (this build reads {VERSION})",
                bytes[4]
            ));
        }
        let mut rest = &bytes[6..];
        match bytes[5] {
            PARTIAL => {
                let owner = take_str(&mut rest)?;
                let id = take_str(&mut rest)?;
                Ok(ResultsMessage::Partial { owner, id, partial: rest })
            }
            PROGRESS => {
                let records: [u8; 8] =
                    rest.try_into().map_err(|_| "a progress message is 8 bytes".to_owned())?;
                Ok(ResultsMessage::Progress { records: u64::from_le_bytes(records) })
            }
            HISTORY => {
                let owner = take_str(&mut rest)?;
                let id = take_str(&mut rest)?;
                let worker = take_str(&mut rest)?;
                let (&kind, mut rest) = rest.split_first().ok_or("truncated history message")?;
                let event = match kind {
                    PLANNED => match rest {
                        [0] => HistoryWire::Planned { data: None },
                        [1, times @ ..] if times.len() == 16 => {
                            let first = take_i64(&mut &times[..8])?;
                            let last = take_i64(&mut &times[8..])?;
                            HistoryWire::Planned { data: Some((first, last)) }
                        }
                        _ => return Err("a history plan is 1 or 17 bytes".into()),
                    },
                    PIECE => {
                        let at_ms = take_i64(&mut rest)?;
                        HistoryWire::Piece { at_ms, partial: rest }
                    }
                    DONE => HistoryWire::Done { report: rest },
                    kind => return Err(format!("unknown history message kind {kind}")),
                };
                Ok(ResultsMessage::History { owner, id, worker, event })
            }
            WORKER => {
                let name = take_str(&mut rest)?;
                match rest {
                    [flag @ (0 | 1)] => Ok(ResultsMessage::Worker { name, history: *flag == 1 }),
                    _ => Err("a worker message ends with one byte, 0 or 1".into()),
                }
            }
            API => {
                let name = take_str(&mut rest)?;
                if !rest.is_empty() {
                    return Err("an api message is its name alone".into());
                }
                Ok(ResultsMessage::Api { name })
            }
            REPORT => Ok(ResultsMessage::Report { json: rest }),
            CUT => {
                let id = take_str(&mut rest)?;
                if rest.len() != 24 {
                    return Err("a cut message ends with three 8-byte numbers".into());
                }
                let emission = u64::from_le_bytes(take_i64(&mut rest)?.to_le_bytes());
                let through = take_i64(&mut rest)?;
                let at_ms = take_i64(&mut rest)?;
                Ok(ResultsMessage::Cut { id, emission, through, at_ms })
            }
            kind => Err(format!("unknown results message kind {kind}")),
        }
    }
}

fn take_i64(rest: &mut &[u8]) -> Result<i64, String> {
    let bytes: [u8; 8] =
        rest.get(..8).and_then(|b| b.try_into().ok()).ok_or("truncated results message")?;
    *rest = &rest[8..];
    Ok(i64::from_le_bytes(bytes))
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    let len = u16::try_from(s.len()).expect("node names and query ids are short");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn take_str<'a>(rest: &mut &'a [u8]) -> Result<&'a str, String> {
    if rest.len() < 2 {
        return Err("truncated results message".into());
    }
    let len = usize::from(u16::from_le_bytes([rest[0], rest[1]]));
    let bytes = rest.get(2..2 + len).ok_or("truncated results message")?;
    *rest = &rest[2 + len..];
    std::str::from_utf8(bytes).map_err(|_| "a name in a results message is not UTF-8".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_messages_round_trip() {
        let partial =
            ResultsMessage::Partial { owner: "api-1", id: "api-1-5f-3", partial: b"\x01\x02" };
        let bytes = partial.encode();
        assert_eq!(ResultsMessage::decode(&bytes).unwrap(), partial);
        let progress = ResultsMessage::Progress { records: 123_456_789 };
        assert_eq!(ResultsMessage::decode(&progress.encode()).unwrap(), progress);
        let report = ReadReport::to_bytes(&ReplayReport {
            records_read: 9,
            seen_after: 4,
            ..ReplayReport::default()
        });
        for event in [
            HistoryWire::Planned { data: None },
            HistoryWire::Planned { data: Some((-5, i64::MAX)) },
            HistoryWire::Piece { at_ms: 1_700_000_000_000, partial: b"\x07\x08" },
            HistoryWire::Done { report: &report },
        ] {
            let message =
                ResultsMessage::History { owner: "api", id: "api-1", worker: "w1", event };
            assert_eq!(ResultsMessage::decode(&message.encode()).unwrap(), message);
        }
        let back = ReadReport::from_bytes(&report).unwrap();
        assert_eq!((back.records_read, back.seen_after), (9, 4));
        for history in [true, false] {
            let worker = ResultsMessage::Worker { name: "w1", history };
            assert_eq!(ResultsMessage::decode(&worker.encode()).unwrap(), worker);
        }
        let cut = ResultsMessage::Cut { id: "api_2-1f-9", emission: 3, through: -1, at_ms: 17 };
        assert_eq!(ResultsMessage::decode(&cut.encode()).unwrap(), cut);
        let encoded = cut.encode();
        for end in 0..encoded.len() {
            assert!(ResultsMessage::decode(&encoded[..end]).is_err(), "cut at {end}");
        }
        let api = ResultsMessage::Api { name: "api_2" };
        assert_eq!(ResultsMessage::decode(&api.encode()).unwrap(), api);
        let report = ResultsMessage::Report { json: br#"{"name":"w1"}"# };
        assert_eq!(ResultsMessage::decode(&report.encode()).unwrap(), report);
        assert!(ResultsMessage::decode(&[api.encode().as_slice(), b"x"].concat()).is_err());
    }

    #[test]
    fn garbage_and_truncation_are_errors_not_panics() {
        let good = ResultsMessage::Partial { owner: "a", id: "q", partial: b"xyz" }.encode();
        for cut in 0..10 {
            let _ = ResultsMessage::decode(&good[..cut]);
        }
        assert!(ResultsMessage::decode(&good[..8]).is_err());
        assert!(ResultsMessage::decode(b"{\"json\": true}").unwrap_err().contains("magic"));
        let mut other_version = good.clone();
        other_version[4] = 9;
        assert!(ResultsMessage::decode(&other_version).unwrap_err().contains("version 9"));
        let mut other_kind = good;
        other_kind[5] = 8;
        assert!(ResultsMessage::decode(&other_kind).is_err());
        let short_progress = [b"NDLM".as_slice(), &[1, 2, 0, 0]].concat();
        assert!(ResultsMessage::decode(&short_progress).is_err());
        let event = HistoryWire::Planned { data: Some((1, 2)) };
        let planned = ResultsMessage::History { owner: "a", id: "q", worker: "w", event }.encode();
        for cut in 0..planned.len() {
            assert!(ResultsMessage::decode(&planned[..cut]).is_err(), "cut at {cut}");
        }
        let worker = ResultsMessage::Worker { name: "w", history: true }.encode();
        assert!(ResultsMessage::decode(&[worker.as_slice(), &[1]].concat()).is_err());
        assert!(ReadReport::from_bytes(b"[1,2]").is_err());
    }

    #[test]
    fn query_notices_round_trip_and_refuse_other_versions() {
        let notice = QueryNotice {
            v: 1,
            id: "n-1".into(),
            owner: "n".into(),
            query: "SELECT * FROM STREAM(1000, TIME)".into(),
            config: QueryConfig::default(),
            plan: "00".into(),
            received_ms: 1,
            ends_ms: 1001,
            history: Some((-3_600_000, None)),
            client: "token-ab12".into(),
            results_from: Some(42),
            url: "http://10.0.0.7:9900".into(),
            history_workers: vec!["worker_1".into(), "worker_2".into()],
            history_version: Some(42),
        };
        assert_eq!(QueryNotice::from_bytes(&notice.to_bytes()).unwrap(), notice);
        let text = String::from_utf8(notice.to_bytes()).unwrap();
        assert!(text.contains(r#""url":"http://10.0.0.7:9900""#), "{text}");
        assert!(text.contains(r#""history_workers":["worker_1","worker_2"]"#), "{text}");
        assert!(text.contains(r#""history_version":42"#), "{text}");
        let v2 = QueryNotice { v: 2, ..notice };
        assert!(QueryNotice::from_bytes(&v2.to_bytes()).unwrap_err().contains("version 2"));
        assert!(QueryNotice::from_bytes(b"garbage").is_err());
        // a notice of a build before failover: no client, nothing to say where partials start
        let old = br#"{"v":1,"id":"n-1","owner":"n","query":"SELECT * FROM STREAM()","config":{},"plan":"00","received_ms":1,"ends_ms":2}"#;
        let old = QueryNotice::from_bytes(old).unwrap();
        assert_eq!((old.client.as_str(), old.results_from, old.url.as_str()), ("", None, ""));
        assert!(old.history_workers.is_empty() && old.history_version.is_none());
        // and without a URL or workers, written as the builds before it wrote it
        let unknown = QueryNotice { url: String::new(), ..old };
        let text = String::from_utf8(unknown.to_bytes()).unwrap();
        assert!(!text.contains("url") && !text.contains("history_"), "{text}");
    }
}
