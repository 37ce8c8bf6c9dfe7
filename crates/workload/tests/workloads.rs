//! Integration tests of the workload generators: determinism, shapes, sizes, needles, iot walks.

use needle_record::{decode_record, Record, Value};
use needle_workload::iot::{is_outlier, outlier_count};
use needle_workload::{
    parse_spec, Generator, NeedleSpec, WorkloadError, WorkloadKind, WorkloadSpec,
};

fn lines(spec: &WorkloadSpec, n: usize) -> Vec<Vec<u8>> {
    let mut g = Generator::new(spec).unwrap();
    (0..n)
        .map(|_| {
            let mut buf = Vec::new();
            g.write_next(&mut buf);
            buf
        })
        .collect()
}

fn bullet_with_needle(
    count: u64,
    fields: &[(&str, &str)],
    k: u64,
    at: Option<u64>,
) -> WorkloadSpec {
    let mut spec = WorkloadSpec::new(WorkloadKind::Bullet).with_seed(7).with_count(count);
    spec.needle = Some(NeedleSpec {
        fields: fields.iter().map(|(f, v)| (f.to_string(), v.to_string())).collect(),
        count: k,
        at,
    });
    spec
}

#[test]
fn same_seed_same_bytes_different_seed_different_bytes() {
    for kind in WorkloadKind::ALL {
        let a = lines(&WorkloadSpec::new(kind).with_seed(1), 300);
        let b = lines(&WorkloadSpec::new(kind).with_seed(1), 300);
        let c = lines(&WorkloadSpec::new(kind).with_seed(2), 300);
        assert_eq!(a, b, "{kind}");
        assert_ne!(a, c, "{kind}");
    }
}

#[test]
fn write_next_appends_and_next_record_decodes_the_same() {
    for kind in WorkloadKind::ALL {
        let spec = WorkloadSpec::new(kind).with_seed(5);
        let mut g = Generator::new(&spec).unwrap();
        let mut batch = Vec::new();
        g.write_next(&mut batch);
        batch.push(b'\n');
        g.write_next(&mut batch);
        let mut h = Generator::new(&spec).unwrap();
        let parsed: Vec<Record> =
            batch.split(|b| *b == b'\n').map(|l| decode_record(l).unwrap()).collect();
        assert_eq!(parsed, vec![h.next_record(), h.next_record()], "{kind}");
        assert_eq!(h.produced(), 2);
    }
}

#[test]
fn bullet_has_92_fields_of_the_right_types_and_size() {
    let spec = WorkloadSpec::new(WorkloadKind::Bullet).with_seed(11);
    let all = lines(&spec, 2000);
    let avg = all.iter().map(Vec::len).sum::<usize>() as f64 / all.len() as f64;
    assert!((1.6 * 1024.0..=2.0 * 1024.0).contains(&avg), "average record is {avg} bytes");
    println!("average bullet record: {avg} bytes");
    let mut ids = std::collections::HashSet::new();
    let mut last_ts = 0;
    for line in &all {
        let r = decode_record(line).unwrap();
        assert_eq!(r.len(), 92);
        let (mut strings, mut longs, mut maps, mut lists) = (0, 0, 0, 0);
        for (name, v) in r.iter() {
            match v {
                Value::String(_) => strings += 1,
                Value::Long(_) => longs += 1,
                Value::Map(m) => {
                    maps += 1;
                    assert!((3..=12).contains(&m.len()), "{name} has {} entries", m.len());
                    assert!(m.values().all(|v| matches!(v, Value::String(_))), "{name}");
                }
                Value::List(items) => {
                    lists += 1;
                    assert!((1..=5).contains(&items.len()), "{name}");
                    assert!(items.iter().all(|m| matches!(m, Value::Map(_))), "{name}");
                }
                other => panic!("{name}: unexpected {other:?}"),
            }
        }
        assert_eq!((strings, longs, maps, lists), (62, 4, 23, 3));
        let id = r.get("id").and_then(Value::as_str).unwrap();
        assert!(id.len() == 10 && id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
        assert!(ids.insert(id.to_owned()), "duplicate id {id}");
        let ts = r.get("event_ts").and_then(Value::as_i64).unwrap();
        assert!(ts > last_ts);
        last_ts = ts;
        let demo = r.get("demographics").and_then(Value::as_map).unwrap();
        for key in ["country", "age", "gender"] {
            assert!(demo.get(key).and_then(Value::as_str).is_some(), "demographics.{key}");
        }
        assert!(r.get("timespent").and_then(Value::as_i64).is_some());
    }
}

#[test]
fn bullet_distributions_have_the_documented_cardinality_and_skew() {
    let mut g = Generator::new(&WorkloadSpec::new(WorkloadKind::Bullet).with_seed(3)).unwrap();
    let mut counts: std::collections::HashMap<&str, std::collections::HashMap<String, usize>> =
        Default::default();
    for _ in 0..5000 {
        let r = g.next_record();
        let country =
            r.get("demographics").and_then(Value::as_map).unwrap()["country"].as_str().unwrap();
        *counts.entry("country").or_default().entry(country.to_owned()).or_default() += 1;
        for f in ["device", "browser_name", "browser_version"] {
            let v = r.get(f).and_then(Value::as_str).unwrap().to_owned();
            *counts.entry(f).or_default().entry(v).or_default() += 1;
        }
    }
    for (field, distinct) in
        [("country", 50), ("device", 10), ("browser_name", 8), ("browser_version", 30)]
    {
        let c = &counts[field];
        assert_eq!(c.len(), distinct, "{field}");
        let (max, min) = (c.values().max().unwrap(), c.values().min().unwrap());
        assert!(*max > 5 * min, "{field} is not skewed: {max} vs {min}");
    }
    assert_eq!(counts["country"].iter().max_by_key(|(_, n)| **n).unwrap().0, "US");
}

#[test]
fn needles_replace_only_their_fields_in_only_their_records() {
    let plain = lines(&WorkloadSpec::new(WorkloadKind::Bullet).with_seed(7), 100);
    let spec = bullet_with_needle(
        100,
        &[
            ("demographics.country", "Atlantis"),
            ("timespent", "-5"),
            ("id", "needle\"1"),
            ("ctx.zz", "new"),
        ],
        5,
        Some(20),
    );
    let with = lines(&spec, 100);
    for i in 0..100 {
        if !(20..25).contains(&i) {
            assert_eq!(plain[i], with[i], "record {i} changed");
            continue;
        }
        let mut expect = decode_record(&plain[i]).unwrap();
        let got = decode_record(&with[i]).unwrap();
        let Some(Value::Map(demo)) = expect.get("demographics").cloned() else { panic!() };
        let mut demo = demo;
        demo.insert("country".into(), Value::from("Atlantis"));
        expect.insert("demographics", Value::Map(demo));
        expect.insert("timespent", Value::Long(-5));
        expect.insert("id", Value::from("needle\"1"));
        let Some(Value::Map(mut ctx)) = expect.get("ctx").cloned() else { panic!() };
        ctx.insert("zz".into(), Value::from("new"));
        expect.insert("ctx", Value::Map(ctx));
        assert_eq!(got, expect, "record {i}");
    }
}

#[test]
fn needle_default_is_the_middle_and_count_defaults_to_one() {
    let spec = parse_spec("bullet?seed=7&count=101&needle=device=toaster").unwrap();
    let found: Vec<usize> = lines(&spec, 101)
        .iter()
        .enumerate()
        .filter(|(_, l)| decode_record(l).unwrap().get("device") == Some(&Value::from("toaster")))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(found, vec![50]);
    let spec = bullet_with_needle(10, &[("device", "toaster")], 4, None);
    let found = lines(&spec, 10)
        .iter()
        .map(|l| decode_record(l).unwrap().get("device") == Some(&Value::from("toaster")))
        .collect::<Vec<_>>();
    assert_eq!(found, [false, false, false, true, true, true, true, false, false, false]);
}

#[test]
fn bad_needles_are_rejected_with_a_reason() {
    for (field, want) in [
        ("nope", "no field `nope`"),
        ("demographics", "is a map"),
        ("clicks", "list of maps"),
        ("device.x", "not a map"),
        ("timespent", "not an integer"),
    ] {
        let spec = bullet_with_needle(10, &[(field, "abc")], 1, None);
        match Generator::new(&spec) {
            Err(WorkloadError::Needle(msg)) => assert!(msg.contains(want), "{field}: {msg}"),
            other => panic!("{field}: {:?}", other.map(|_| ())),
        }
    }
}

#[test]
fn count_limits_the_iterator_but_not_write_next() {
    let mut g = Generator::new(&WorkloadSpec::new(WorkloadKind::Small).with_count(3)).unwrap();
    assert_eq!(g.by_ref().count(), 3);
    assert!(g.is_done());
    let mut buf = Vec::new();
    g.write_next(&mut buf);
    assert!(decode_record(&buf).is_ok());
}

#[test]
fn small_events_are_about_100_bytes() {
    let all = lines(&WorkloadSpec::new(WorkloadKind::Small).with_seed(9), 5000);
    let avg = all.iter().map(Vec::len).sum::<usize>() as f64 / all.len() as f64;
    assert!((90.0..=110.0).contains(&avg), "{avg}");
    for (i, line) in all.iter().enumerate() {
        let r = decode_record(line).unwrap();
        let keys: Vec<&str> = r.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["id", "key", "value", "ts"]);
        assert_eq!(r.get("id").and_then(Value::as_str).map(str::len), Some(36));
        assert!(r.get("key").and_then(Value::as_str).unwrap().starts_with("key_"));
        let v = r.get("value").unwrap();
        assert!(matches!(v, Value::Double(x) if (0.0..100_000.0).contains(x)), "{v:?}");
        assert_eq!(r.get("ts").and_then(Value::as_i64), Some(1_700_000_000_000 + i as i64));
    }
}

#[test]
fn iot_walks_stay_in_range_and_outliers_reach_above_95() {
    let spec = parse_spec("iot?sensors=100&seed=4").unwrap();
    let minutes = 300;
    let mut g = Generator::new(&spec).unwrap();
    let mut outlier_max = i64::MIN;
    for m in 0..minutes {
        for s in 0..100u64 {
            let r = g.next_record();
            assert_eq!(r.get("ts").and_then(Value::as_i64), Some(1_577_836_800_000 + m * 60_000));
            assert_eq!(
                r.get("sensor").and_then(Value::as_str),
                Some(format!("sensor_{s}").as_str())
            );
            let group = r.get("group").and_then(Value::as_i64).unwrap();
            assert!((0..12).contains(&group));
            assert!(["APAC", "AMER", "EMEA"]
                .contains(&r.get("region").and_then(Value::as_str).unwrap()));
            let fw = r.get("firmware_version").and_then(Value::as_str).unwrap();
            assert!(fw.starts_with("v1.") && fw.split('.').count() == 3, "{fw}");
            assert_eq!(r.len(), 15);
            for t in 0..10 {
                let v = r.get(&format!("temp{t}")).and_then(Value::as_i64).unwrap();
                if is_outlier(s, 100) {
                    assert!(v < 100, "sensor_{s} temp{t} = {v}");
                    outlier_max = outlier_max.max(v);
                } else {
                    assert!((19..35).contains(&v), "sensor_{s} temp{t} = {v}");
                }
            }
        }
    }
    assert_eq!(outlier_count(100), 1);
    assert!(outlier_max > 95, "outlier max {outlier_max}");
}

#[test]
fn iot_tags_are_fixed_per_sensor() {
    let mut g = Generator::new(&parse_spec("iot?sensors=7&seed=2").unwrap()).unwrap();
    let first: Vec<Record> = (0..7).map(|_| g.next_record()).collect();
    for earlier in &first {
        let later = g.next_record();
        for tag in ["sensor", "group", "region", "firmware_version"] {
            assert_eq!(earlier.get(tag), later.get(tag));
        }
    }
}
