//! Recovery checks ConsumeQueue units against the CommitLog. A
//! unit torn by a crash (its bytes half old, half new) can name an offset and size that
//! pass the old "offset >= 0 && size > 0" test and end inside the CommitLog; it then
//! took a queue slot for ever (consumers read garbage there, and the next message got
//! the slot after it).

use std::os::unix::fs::FileExt;
use std::time::Duration;

use protocol::message::{PhysicalOffset, QueueOffset, decode};

use crate::MessageStore;
use crate::commitlog::tests_support::{config, message};
use crate::consume_queue::{CqUnit, UNIT_SIZE, file_name};
use crate::put_result::PutMessageStatus;

/// `other_queue`: the torn unit names a whole record of another queue (it passes every
/// bound check and only a comparison with the record itself catches it); else it names
/// bytes inside this queue's last record (out of CommitLog order).
fn torn_unit_is_dropped(crash: bool, other_queue: bool) {
    let dir = tempfile::tempdir().unwrap();
    let c = config(dir.path(), 64 * 1024);
    let mut last = (PhysicalOffset(0), 0u32);
    {
        let store = MessageStore::open(c.clone()).unwrap();
        for i in 0..5u8 {
            let r = store.put_message(&message("T", 0, &[i + 1; 50])).wait();
            assert_eq!(r.status, PutMessageStatus::PutOk);
            let a = r.append.unwrap();
            last = (a.wrote_offset, a.wrote_bytes);
        }
        let r = store.put_message(&message("T", 1, b"other queue")).wait();
        let a = r.append.unwrap();
        if other_queue {
            last = (a.wrote_offset, a.wrote_bytes + 1);
        }
        assert!(store.dispatcher().wait_caught_up(Duration::from_secs(10)));
    }
    let torn = if other_queue {
        CqUnit {
            physical_offset: last.0,
            size: last.1 as i32 - 1,
            tags_code: 0,
        }
    } else {
        CqUnit {
            physical_offset: PhysicalOffset(last.0.0 + 1),
            size: last.1 as i32 - 1,
            tags_code: 0,
        }
    };
    let cq_file = c.consume_queue_dir().join("T/0").join(file_name(0));
    std::fs::OpenOptions::new()
        .write(true)
        .open(&cq_file)
        .unwrap()
        .write_all_at(&torn.encode(), (5 * UNIT_SIZE) as u64)
        .unwrap();
    if crash {
        std::fs::write(c.abort_path(), b"").unwrap();
    }

    let store = MessageStore::open(c).unwrap();
    let cq = store.dispatcher().consume_queues().find("T", 0).unwrap();
    assert_eq!(cq.max_offset(), QueueOffset(5), "the torn unit is gone");
    let r = store.put_message(&message("T", 0, b"next")).wait();
    let a = r.append.unwrap();
    assert_eq!(a.logics_offset, QueueOffset(5));
    assert!(store.dispatcher().wait_caught_up(Duration::from_secs(10)));
    assert_eq!(
        cq.get(QueueOffset(5)).unwrap().physical_offset,
        a.wrote_offset
    );
    let got = store
        .dispatcher()
        .get_message("g", "T", 0, QueueOffset(0), 32, None);
    assert_eq!(got.messages.len(), 6);
    for m in &got.messages {
        decode(m, true).unwrap();
    }
}

#[test]
fn a_torn_unit_out_of_order_is_dropped() {
    torn_unit_is_dropped(false, false);
    torn_unit_is_dropped(true, false);
}

#[test]
fn a_torn_unit_naming_another_queues_record_is_dropped() {
    torn_unit_is_dropped(false, true);
    torn_unit_is_dropped(true, true);
}
