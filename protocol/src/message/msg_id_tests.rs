use proptest::prelude::*;

use super::*;
use crate::message::record::{MessageRecord, StoreStamp, decode};
use crate::message::{MessageSysFlag, QueueOffset};

#[test]
fn offset_msg_id_ipv4_layout() {
    let host: SocketAddr = "10.0.0.1:10911".parse().unwrap();
    let id = offset_msg_id(host, PhysicalOffset(0x1234));
    // 0A000001 | 00002A9F | 0000000000001234
    assert_eq!(id, "0A00000100002A9F0000000000001234");
    assert_eq!(parse_offset_msg_id(&id), Ok((host, PhysicalOffset(0x1234))));
    assert_eq!(
        parse_offset_msg_id(&id.to_lowercase()),
        Ok((host, PhysicalOffset(0x1234)))
    );
}

#[test]
fn offset_msg_id_ipv6_and_errors() {
    let host: SocketAddr = "[2001:db8::1]:10911".parse().unwrap();
    let id = offset_msg_id(host, PhysicalOffset(7));
    assert_eq!(id.len(), 56);
    assert!(id.starts_with("20010DB8000000000000000000000001"));
    assert_eq!(parse_offset_msg_id(&id), Ok((host, PhysicalOffset(7))));
    assert_eq!(parse_offset_msg_id("ABC"), Err(MsgIdError::Length(3)));
    assert_eq!(
        parse_offset_msg_id("0A00000100002A9F000000000000123G"),
        Err(MsgIdError::NotHex)
    );
    assert_eq!(
        parse_offset_msg_id("0A000001FFFFFFFF0000000000001234"),
        Err(MsgIdError::Port(-1))
    );
    // Multi-byte characters of the right byte length are not hex.
    assert_eq!(
        parse_offset_msg_id(&"é".repeat(16)),
        Err(MsgIdError::NotHex)
    );
}

#[test]
fn record_view_msg_id_matches() {
    let store: SocketAddr = "[::1]:10911".parse().unwrap();
    let born: SocketAddr = "1.1.1.1:1".parse().unwrap();
    let rec = MessageRecord {
        queue_id: 0,
        flag: 0,
        sys_flag: MessageSysFlag(0).with_host_families(&born, &store),
        born_timestamp: 0,
        born_host: born,
        reconsume_times: 0,
        prepared_transaction_offset: PhysicalOffset(0),
        body: b"",
        body_crc: None,
        topic: "T",
        properties: "",
    };
    let st = StoreStamp {
        queue_offset: QueueOffset(0),
        physical_offset: PhysicalOffset(123_456),
        store_timestamp: 0,
        store_host: store,
    };
    let bytes = rec.encode_to_vec(&st).unwrap();
    let view = decode(&bytes, true).unwrap();
    assert_eq!(
        view.offset_msg_id(),
        offset_msg_id(store, PhysicalOffset(123_456))
    );
}

#[test]
fn uniq_key_layout_and_generation() {
    // 2026-11-29T17:00:00Z; month starts 2026-11-01T00:00:00Z = 1_793_491_200_000.
    let now = 1_795_971_600_000;
    assert_eq!(month_start_utc_ms(now), 1_793_491_200_000);
    assert_eq!(next_month_start_utc_ms(now), 1_796_083_200_000);
    let mut g = UniqKeyGenerator::new("192.168.0.2".parse().unwrap(), 0x1_0005, -2);
    let a = g.generate_at(now);
    let b = g.generate_at(now + 1);
    let delta = (now - 1_793_491_200_000) as u32;
    assert_eq!(a, format!("C0A800020005FFFFFFFE{delta:08X}0000"));
    assert_eq!(&b[..20], &a[..20]);
    assert!(b.ends_with("0001"));
    let k = UniqKey::parse(&a).unwrap();
    assert_eq!(
        k,
        UniqKey {
            ip: "192.168.0.2".parse().unwrap(),
            pid: 5,
            class_loader_hash: -2,
            since_month_start_ms: delta,
            counter: 0,
        }
    );
    assert_eq!(k.to_string(), a);
    assert_eq!(k.approx_born_time_ms(now + 5), now);
    // Asked at the very start of the next month, the offset still points back.
    assert_eq!(k.approx_born_time_ms(1_796_083_200_000 + 1), now);

    // New month: the offset restarts.
    let c = g.generate_at(1_796_083_200_000 + 10);
    assert_eq!(UniqKey::parse(&c).unwrap().since_month_start_ms, 10);

    let mut g6 = UniqKeyGenerator::new("::1".parse().unwrap(), 1, 1);
    let id6 = g6.generate();
    assert_eq!(id6.len(), 56);
    assert!(UniqKey::parse(&id6).unwrap().ip.is_ipv6());
}

#[test]
fn civil_calendar_edges() {
    for (y, m, d) in [
        (1970, 1, 1),
        (2000, 2, 29),
        (2024, 12, 31),
        (1969, 12, 31),
        (2100, 3, 1),
    ] {
        assert_eq!(civil_from_days(days_from_civil(y, m, d)), (y, m, d));
    }
    assert_eq!(days_from_civil(1970, 1, 1), 0);
    assert_eq!(days_from_civil(2000, 3, 1), 11_017);
}

proptest! {
    #[test]
    fn parsers_never_panic(s in "\\PC{0,60}|[0-9A-Fa-f]{32}|[0-9A-Fa-f]{56}") {
        let _ = parse_offset_msg_id(&s);
        if let Ok(k) = UniqKey::parse(&s) {
            prop_assert_eq!(k.to_string(), s.to_uppercase());
        }
    }

    #[test]
    fn offset_id_round_trip(a: [u8; 4], b: [u8; 16], port: u16, off: i64, v6: bool) {
        let ip: IpAddr = if v6 { Ipv6Addr::from(b).into() } else { Ipv4Addr::from(a).into() };
        let host = SocketAddr::new(ip, port);
        let id = offset_msg_id(host, PhysicalOffset(off));
        prop_assert_eq!(parse_offset_msg_id(&id), Ok((host, PhysicalOffset(off))));
    }

    #[test]
    fn month_start_is_first_of_month(ms in -10_000_000_000_000i64..10_000_000_000_000) {
        let start = month_start_utc_ms(ms);
        prop_assert!(start <= ms && ms < next_month_start_utc_ms(ms));
        prop_assert_eq!(civil_from_days(start / DAY_MS).2, 1);
    }
}
