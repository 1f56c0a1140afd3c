use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

#[test]
fn unquoted_numeric_keys_are_quoted() {
    let v: Value = from_slice(br#"{"brokerAddrs":{0:"a:1",1:"b:2",-1:"c"}}"#).unwrap();
    assert_eq!(
        v,
        json!({"brokerAddrs": {"0": "a:1", "1": "b:2", "-1": "c"}})
    );
}

#[test]
fn single_quotes_and_identifier_keys() {
    let v: Value = from_slice(br#"{topic:'T', 'k':'say "hi"', "x":'a\'b'}"#).unwrap();
    assert_eq!(v, json!({"topic": "T", "k": "say \"hi\"", "x": "a'b"}));
}

#[test]
fn object_keys_become_json_strings() {
    let text = br#"{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:{"brokerOffset":12},{"brokerName":"b", "queueId":1,"topic":"t"}:{"brokerOffset":3}}}"#;
    let v: Value = from_slice(text).unwrap();
    let table = v["offsetTable"].as_object().unwrap();
    assert_eq!(table.len(), 2);
    let key = r#"{"brokerName":"b","queueId":1,"topic":"t"}"#;
    assert_eq!(table[key], json!({"brokerOffset": 3}));
}

#[test]
fn standard_json_passes_untouched() {
    let v: Value = from_slice(br#"{"a":[1,2,{"b":null}],"c":"\u00e9"}"#).unwrap();
    assert_eq!(v, json!({"a": [1, 2, {"b": null}], "c": "é"}));
}

#[test]
fn hostile_inputs_are_errors() {
    let deep = "[".repeat(100_000);
    assert!(from_slice::<Value>(deep.as_bytes()).is_err());
    let deep_keys = "{".repeat(100_000);
    assert!(from_slice::<Value>(deep_keys.as_bytes()).is_err());
    for bad in [
        &b"{0:"[..],
        b"{'abc",
        b"{{{",
        b"\xff\xfe",
        b"{:1}",
        b"",
        b"}}]]",
    ] {
        assert!(from_slice::<Value>(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn writer_sorts_and_quotes_like_fastjson() {
    let mut addrs = BTreeMap::new();
    addrs.insert(10i64, "x".to_string());
    addrs.insert(2i64, "y".to_string());
    let v = json!({"z": 1, "brokerAddrs": addrs, "a": "é\n"});
    let default = String::from_utf8(to_vec_with(&v, Style::Default, &["brokerAddrs"])).unwrap();
    assert_eq!(default, r#"{"a":"é\n","brokerAddrs":{2:"y",10:"x"},"z":1}"#);
    let browser = String::from_utf8(to_vec_with(&v, Style::Browser, &["brokerAddrs"])).unwrap();
    assert_eq!(
        browser,
        r#"{"a":"\u00e9\n","brokerAddrs":{"2":"y","10":"x"},"z":1}"#
    );
    let big = String::from_utf8(to_vec(
        &json!({"t": 9_007_199_254_740_993i64}),
        Style::Browser,
    ))
    .unwrap();
    assert_eq!(big, r#"{"t":"9007199254740993"}"#);
    // Digit-only keys of a String-keyed map stay quoted.
    let topics = String::from_utf8(to_vec_with(
        &json!({"123": 1}),
        Style::Default,
        &["brokerAddrs"],
    ))
    .unwrap();
    assert_eq!(topics, r#"{"123":1}"#);
}

fn arb_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        ".{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z0-9]{1,4}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn default_style_reads_back(v in arb_value()) {
        let text = to_vec_with(&v, Style::Default, &["brokerAddrs"]);
        prop_assert_eq!(from_slice::<Value>(&text).unwrap(), v);
    }

    #[test]
    fn numeric_key_maps_read_back(m in prop::collection::btree_map(any::<i64>(), ".{0,6}", 0..5)) {
        let v = json!({"brokerAddrs": m});
        let text = to_vec_with(&v, Style::Default, &["brokerAddrs"]);
        prop_assert_eq!(from_slice::<Value>(&text).unwrap(), v);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = from_slice::<Value>(&bytes);
    }

    #[test]
    fn arbitrary_json_like_text_never_panics(s in r#"[{}\[\]:,'"0-9a-z\\ ]{0,64}"#) {
        let _ = from_slice::<Value>(s.as_bytes());
    }
}

/// Found by the `fastjson_bodies` fuzz target: a backslash before a multi-byte character
/// was copied as two bytes, slicing inside the UTF-8 sequence (a panic on network input).
#[test]
fn an_escape_before_a_multi_byte_character_is_an_error_not_a_panic() {
    for text in ["{\"a\":\"x\\\u{98}y\"}", "{\"k\\é\":1}", "['\\€']"] {
        let r = normalize(text.as_bytes()).and_then(|t| {
            serde_json::from_str::<Value>(&t).map_err(|e| BodyError::Json(e.to_string()))
        });
        assert!(r.is_err(), "{text:?} gave {r:?}");
    }
}
