use bytes::{Bytes, BytesMut};
use proptest::prelude::*;

use super::{Header, oracle, plain_text, put_str, reader};
use crate::{ExtFields, LanguageCode, RemotingCommand};

/// The reader and the serde_json oracle agree: same header, or both refuse.
fn agree(bytes: &[u8]) -> Option<Header> {
    let new = reader::read(&Bytes::copy_from_slice(bytes));
    let old = oracle::decode(bytes);
    match (new, old) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a, b, "input {:?}", String::from_utf8_lossy(bytes));
            Some(a)
        }
        (Err(_), Err(_)) => None,
        (a, b) => panic!(
            "reader {a:?} but oracle {b:?} for {:?}",
            String::from_utf8_lossy(bytes)
        ),
    }
}

fn ok(json: &str) -> Header {
    agree(json.as_bytes()).unwrap_or_else(|| panic!("refused {json}"))
}

fn refused(json: &[u8]) {
    assert!(
        agree(json).is_none(),
        "accepted {:?}",
        String::from_utf8_lossy(json)
    );
}

#[test]
fn escapes_like_serde_json() {
    for s in [
        "",
        "plain",
        "q\"b\\s/",
        "\n\r\t\u{8}\u{c}",
        "\u{0}\u{1f}\u{7f}",
        "é€𝄞",
        "a\u{1}b\u{2}c",
    ] {
        let mut out = BytesMut::new();
        put_str(&mut out, s);
        assert_eq!(&out[..], serde_json::to_string(s).unwrap().as_bytes());
    }
}

#[test]
fn reads_escapes_and_surrogates() {
    let h = ok(
        r#"{"co\u0064e":5,"remark":"a\"\\\/\b\f\n\r\t\u00e9\uD834\uDD1E","extFields":{"k\u0031":"v\u0000"}}"#,
    );
    assert_eq!(h.code, 5);
    assert_eq!(h.remark.as_deref(), Some("a\"\\/\u{8}\u{c}\n\r\té𝄞"));
    assert_eq!(h.ext_fields.get("k1"), Some("v\u{0}"));
    for lone in [
        r#""\uD834""#,
        r#""\uDD1E""#,
        r#""\uD834\n""#,
        r#""\uD834\u0041""#,
        r#""\u12""#,
        r#""\x""#,
    ] {
        refused(format!(r#"{{"code":1,"remark":{lone}}}"#).as_bytes());
        // Inside a skipped value only the escape syntax is checked.
        agree(format!(r#"{{"code":1,"other":[{lone}]}}"#).as_bytes());
    }
    refused(b"{\"code\":1,\"remark\":\"a\x01\"}");
    refused(b"{\"code\":1,\"other\":\"a\x01\"}");
}

#[test]
fn lenient_values() {
    let h = ok(
        r#" {"code":"12","language":3,"version":-1,"opaque":2147483647,"flag":0,
        "remark":null,"extFields":{"n":42,"neg":-7,"b":true,"f":false,"z":null,"s":"x"}} "#,
    );
    assert_eq!(
        (h.code, h.language, h.version, h.opaque),
        (12, LanguageCode::from_code(3), -1, i32::MAX)
    );
    assert_eq!(h.remark, None);
    assert_eq!(
        h.ext_fields.sorted(),
        [
            ("b", "true"),
            ("f", "false"),
            ("n", "42"),
            ("neg", "-7"),
            ("s", "x")
        ]
    );
    assert!(
        ok(r#"{"code":1,"extFields":null,"language":null}"#)
            .ext_fields
            .is_empty()
    );
    assert_eq!(
        ok(r#"{"code":1,"language":"CPP"}"#).language,
        LanguageCode::from_name("CPP")
    );
    for v in [
        "-0",
        "0.5",
        "1e3",
        "-1.25E-2",
        "1.0",
        "18446744073709551616",
        "-9223372036854775809",
        "-9223372036854775808",
        "18446744073709551615",
        "0.30000000000000004441",
        "123456789012345678901234567890e-10",
    ] {
        let h = ok(&format!(r#"{{"code":1,"extFields":{{"v":{v}}}}}"#));
        assert!(h.ext_fields.get("v").is_some(), "{v}");
    }
    assert_eq!(
        ok(r#"{"code":1,"extFields":{"v":-0}}"#).ext_fields.get("v"),
        Some("-0")
    );
    for bad in ["-0", "1.0", "2147483648", "true", "null", "[]", "\"x\""] {
        refused(format!(r#"{{"code":{bad}}}"#).as_bytes());
    }
    refused(br#"{"code":1,"extFields":{"v":1e400}}"#);
    refused(br#"{"code":1,"extFields":{"v":[1]}}"#);
    refused(br#"{"code":1,"remark":5}"#);
    refused(br#"{"code":1,"extFields":[]}"#);
    refused(br#"{"code":1,"language":1.5}"#);
    refused(br#"{"version":1}"#);
}

#[test]
fn integers_at_the_edges_of_the_digit_fast_path() {
    for (text, want) in [
        ("0", 0),
        ("7", 7),
        ("999999999", 999_999_999),
        ("2147483647", i32::MAX),
        ("-2147483648", i32::MIN),
        ("\"12\"", 12),
    ] {
        assert_eq!(ok(&format!(r#"{{"code":{text}}}"#)).code, want, "{text}");
    }
    for text in [
        "01",
        "2147483648",
        "1e2",
        "5.0",
        "-0",
        "5.",
        "1x",
        "9999999999",
    ] {
        refused(format!(r#"{{"code":{text}}}"#).as_bytes());
    }
}

#[test]
fn duplicates_unknowns_and_trailing_bytes() {
    let h = ok(
        r#"{"code":1,"code":2,"x":{"a":[1,{"b":null}],"c":"\u0000"},"extFields":{"a":"1","b":"2","a":"3","b":null},"remark":"r","remark":null}"#,
    );
    assert_eq!(h.code, 2);
    assert_eq!(h.ext_fields.sorted(), [("a", "3"), ("b", "2")]);
    assert_eq!(h.remark, None);
    assert!(
        ok(r#"{"code":1,"extFields":{"a":"1"},"extFields":null}"#)
            .ext_fields
            .is_empty()
    );
    for bad in [
        &b"{\"code\":1} x"[..],
        b"{\"code\":1,}",
        b"{\"code\":1",
        b"",
        b"[]",
        b"{\"code\":1,\"x\":[1,]}",
        b"{\"code\":1,\"x\":{1:2}}",
        b"{\"code\":01}",
    ] {
        refused(bad);
    }
    ok("{\"code\":1}\n\t ");
}

#[test]
fn invalid_utf8_only_in_skipped_values() {
    agree(b"{\"code\":1,\"x\":\"\xff\xfe\"}").expect("skipped");
    refused(b"{\"code\":1,\"remark\":\"\xff\"}");
    refused(b"{\"code\":1,\"extFields\":{\"\xc3\":\"v\"}}");
    refused(b"{\"code\":1,\"\xff\":0}");
}

#[test]
fn deep_nesting_is_skipped_without_recursion() {
    let depth = 100_000;
    let json = format!(
        r#"{{"code":7,"x":{}1{}}}"#,
        "[{\"k\":".repeat(depth),
        "}]".repeat(depth)
    );
    assert_eq!(reader::read(&Bytes::from(json)).unwrap().code, 7);
    let unclosed = format!(r#"{{"code":7,"x":{}"#, "[".repeat(depth));
    assert!(reader::read(&Bytes::from(unclosed)).is_err());
}

fn encode(cmd: &RemotingCommand) -> Vec<u8> {
    let mut out = BytesMut::new();
    super::encode(cmd, &mut out);
    out.to_vec()
}

fn scalar() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value as J;
    prop_oneof![
        any::<String>().prop_map(J::from),
        "[a-z\u{1}\"\\\\é𝄞]{0,20}".prop_map(J::from),
        any::<i64>().prop_map(J::from),
        any::<u64>().prop_map(J::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(J::from),
        any::<bool>().prop_map(J::from),
        Just(J::Null),
    ]
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    scalar().prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            prop::collection::btree_map("[a-z]{0,3}", inner, 0..4)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Headers as a peer might write them: known and unknown properties in any order, with
/// values of any type (so many are refused, by both readers alike).
fn header_json() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just("code".to_owned()),
        Just("language".to_owned()),
        Just("version".to_owned()),
        Just("opaque".to_owned()),
        Just("flag".to_owned()),
        Just("remark".to_owned()),
        Just("extFields".to_owned()),
        "[a-zA-Z]{0,6}",
    ];
    let value = prop_oneof![
        (-3i64..3_000_000_000).prop_map(serde_json::Value::from),
        prop::collection::btree_map("[a-e]{1,2}", scalar(), 0..6)
            .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        json_value(),
    ];
    (
        any::<i32>(),
        prop::collection::vec((key, value), 0..6),
        any::<bool>(),
    )
        .prop_map(|(code, members, pretty)| {
            let mut out = format!("{{\"code\":{code}");
            for (k, v) in members {
                out.push(',');
                out.push_str(&serde_json::to_string(&k).unwrap());
                out.push(':');
                let v = if pretty {
                    serde_json::to_string_pretty(&v)
                } else {
                    serde_json::to_string(&v)
                };
                out.push_str(&v.unwrap());
            }
            out.push('}');
            out
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn agrees_with_oracle_on_written_headers(json in header_json()) {
        agree(json.as_bytes());
    }

    #[test]
    fn agrees_with_oracle_on_mutated_headers(
        json in header_json(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..4),
    ) {
        let mut bytes = json.into_bytes();
        for (at, byte, kind) in edits {
            if bytes.is_empty() {
                break;
            }
            let i = at.index(bytes.len());
            match kind {
                0 => bytes[i] = byte,
                1 => { bytes.remove(i); }
                _ => bytes.insert(i, byte),
            }
        }
        agree(&bytes);
    }

    #[test]
    fn agrees_with_oracle_on_random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        agree(&bytes);
        let mut framed = b"{\"code\":1,\"extFields\":{\"a\":".to_vec();
        framed.extend_from_slice(&bytes);
        agree(&framed);
    }

    #[test]
    fn encode_then_read_round_trips(
        code in any::<i32>(),
        opaque in any::<i32>(),
        flag in any::<i32>(),
        version in any::<i32>(),
        remark in proptest::option::of(any::<String>()),
        fields in prop::collection::vec((any::<String>(), any::<String>()), 0..8),
    ) {
        let cmd = RemotingCommand {
            code,
            opaque,
            flag,
            version,
            remark,
            ext_fields: fields.into_iter().collect::<ExtFields>(),
            ..RemotingCommand::default()
        };
        let bytes = encode(&cmd);
        let h = agree(&bytes).expect("own output is readable");
        prop_assert_eq!((h.code, h.opaque, h.flag, h.version), (code, opaque, flag, version));
        prop_assert_eq!(h.language, cmd.language);
        prop_assert_eq!(h.remark, cmd.remark);
        prop_assert_eq!(h.ext_fields, cmd.ext_fields);
    }
}

proptest! {
    #[test]
    fn word_scan_finds_the_first_stop_byte(
        bytes in proptest::array::uniform8(prop_oneof![
            any::<u8>(),
            Just(b'"'),
            Just(b'\\'),
            0u8..0x21,
            0x7Fu8..=0xFF,
        ])
    ) {
        let want = bytes.iter().position(|&b| b < 0x20 || b == b'"' || b == b'\\');
        let stops = plain_text::stop_bytes(u64::from_le_bytes(bytes));
        prop_assert_eq!((stops != 0).then(|| (stops.trailing_zeros() / 8) as usize), want);
    }
}
