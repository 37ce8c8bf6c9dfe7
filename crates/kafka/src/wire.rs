//! What travels on the distributed mode's topics.
//!
//! **Query topic** (compacted; key: the query id). A running query is a JSON value (few and small,
//! so readable with Kafka's console tools):
//! `{"v":1,"id":..,"owner":..,"query":..,"config":{..},"plan":"<hex>","received_ms":..,"ends_ms":..}`.
//! `config` is the api node's query configuration, so every worker compiles the text to the same
//! plan; `plan` is the FNV-1a hash of that plan's JSON, which the worker checks. A query's end is
//! a tombstone (the key with no value), which compaction eventually keeps alone and then drops.
//!
//! **Results topic** (key: the owning api node, empty for progress). Binary, little-endian:
//!
//! | bytes | field |
//! |---|---|
//! | 4 | magic `NDLM` |
//! | 1 | version ([`VERSION`]) |
//! | 1 | kind: 1 partial, 2 progress |
//! | 2 + n | partial: the owning api node (length, UTF-8) |
//! | 2 + n | partial: the query id |
//! | rest | partial: the engine's encoded partial (itself versioned and checksummed) |
//! | 8 | progress: records read since the worker's last progress message |
//!
//! Decoding never trusts a length and never panics; anything unexpected is an error the reader
//! counts and skips.

use needle_engine::aggregate::codec::fnv1a64;
use needle_query::plan::Plan;
use needle_query::QueryConfig;
use serde::{Deserialize, Serialize};

/// The results topic's format version.
pub const VERSION: u8 = 1;
const MAGIC: &[u8; 4] = b"NDLM";
const PARTIAL: u8 = 1;
const PROGRESS: u8 = 2;

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
    Partial { owner: &'a str, id: &'a str, partial: &'a [u8] },
    Progress { records: u64 },
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
            kind => Err(format!("unknown results message kind {kind}")),
        }
    }
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
        other_kind[5] = 7;
        assert!(ResultsMessage::decode(&other_kind).is_err());
        let short_progress = [b"NDLM".as_slice(), &[1, 2, 0, 0]].concat();
        assert!(ResultsMessage::decode(&short_progress).is_err());
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
        };
        assert_eq!(QueryNotice::from_bytes(&notice.to_bytes()).unwrap(), notice);
        let v2 = QueryNotice { v: 2, ..notice };
        assert!(QueryNotice::from_bytes(&v2.to_bytes()).unwrap_err().contains("version 2"));
        assert!(QueryNotice::from_bytes(b"garbage").is_err());
    }
}
