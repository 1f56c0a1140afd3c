use super::*;

fn prefix(len: u32) -> Vec<u8> {
    let mut p = vec![0u8];
    p.extend_from_slice(&len.to_be_bytes());
    p
}

fn lengths(chunks: &[&[u8]]) -> Vec<usize> {
    let mut scan = PrefixScan::default();
    let mut seen = Vec::new();
    for c in chunks {
        scan.feed::<()>(c, |len| {
            seen.push(len);
            Ok(())
        })
        .expect("no refusal");
    }
    seen
}

#[test]
fn prefixes_are_found_however_the_bytes_are_split() {
    let mut body = prefix(3);
    body.extend_from_slice(b"abc");
    body.extend(prefix(0));
    body.extend(prefix(2));
    body.extend_from_slice(b"xy");
    // All at once.
    assert_eq!(lengths(&[&body]), [3, 0, 2]);
    // Byte by byte.
    let bytes: Vec<&[u8]> = body.chunks(1).collect();
    assert_eq!(lengths(&bytes), [3, 0, 2]);
    // A prefix split across two frames.
    assert_eq!(lengths(&[&body[..2], &body[2..]]), [3, 0, 2]);
}

#[test]
fn a_large_announced_length_is_seen_before_its_bytes() {
    // Only the prefix has come: the length is known, nothing of the body is needed.
    assert_eq!(lengths(&[&prefix(4 << 20)]), [4 << 20]);
}

fn budgets(total: usize, max_telemetry: usize) -> Arc<Budgets> {
    Arc::new(Budgets {
        total: InFlightLimit::new(total),
        max_message: 8 << 20,
        max_telemetry_message: max_telemetry,
        refusals: Refusals::default(),
    })
}

fn held(b: &Arc<Budgets>, connection: Option<Arc<InFlightLimit>>) -> Held {
    Held {
        connection,
        budgets: Arc::clone(b),
        permits: Mutex::new(Reserved::default()),
    }
}

#[test]
fn a_reservation_grows_to_the_largest_message_and_is_freed_with_the_call() {
    let b = budgets(1000, 100);
    let conn = InFlightLimit::new(600);
    let one = held(&b, Some(Arc::clone(&conn)));
    one.grow_to(300).expect("fits");
    one.grow_to(200).expect("smaller: already reserved");
    one.grow_to(500).expect("grows by 200");
    assert_eq!((conn.in_use(), b.total.in_use()), (500, 500));
    // The connection's budget refuses the next call's 200 bytes.
    let two = held(&b, Some(Arc::clone(&conn)));
    let refused = two.grow_to(200).expect_err("over the connection's budget");
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
    assert!(refused.message().contains("maxInFlightBytesPerConnection"));
    // Another connection meets the broker-wide budget.
    let three = held(&b, Some(InFlightLimit::new(600)));
    three.grow_to(450).expect("fits in the total");
    let four = held(&b, Some(InFlightLimit::new(600)));
    let refused = four.grow_to(100).expect_err("over the total");
    assert!(refused.message().contains("maxInFlightBytesTotal"));
    drop((one, two, three, four));
    assert_eq!((conn.in_use(), b.total.in_use()), (0, 0));
}

#[test]
fn a_refused_growth_keeps_nothing_of_what_it_asked() {
    let b = budgets(100, 100);
    let conn = InFlightLimit::new(1000);
    let blocker = held(&b, None);
    blocker.grow_to(90).expect("fits");
    let one = held(&b, Some(Arc::clone(&conn)));
    one.grow_to(50).expect_err("over the total");
    // The connection's units taken before the total refused are given back.
    assert_eq!(conn.in_use(), 0);
    assert_eq!(b.total.in_use(), 90);
}

fn body_of(b: &Arc<Budgets>, cap: Cap, bytes: Vec<u8>) -> BudgetedBody {
    BudgetedBody {
        inner: Body::new(http_body_util::Full::new(Bytes::from(bytes))),
        scan: PrefixScan::default(),
        held: Arc::new(held(b, None)),
        cap,
        failed: false,
    }
}

fn poll_all(body: &mut BudgetedBody) -> Vec<Result<usize, Status>> {
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    let mut out = Vec::new();
    while let Poll::Ready(Some(frame)) = Pin::new(&mut *body).poll_frame(&mut cx) {
        out.push(frame.map(|f| f.into_data().map_or(0, |d| d.len())));
    }
    out
}

#[test]
fn a_telemetry_command_over_its_cap_ends_the_stream() {
    let b = budgets(1 << 20, 64);
    let mut small = prefix(10);
    small.extend_from_slice(&[0; 10]);
    assert!(matches!(
        poll_all(&mut body_of(&b, Cap::Telemetry(64), small))[..],
        [Ok(15)]
    ));
    let mut large = prefix(65);
    large.extend_from_slice(&[0; 65]);
    let mut body = body_of(&b, Cap::Telemetry(64), large.clone());
    let polled = poll_all(&mut body);
    let [Err(status)] = &polled[..] else {
        panic!("{polled:?}")
    };
    assert_eq!(status.code(), tonic::Code::ResourceExhausted);
    assert!(status.message().contains("grpcMaxTelemetryMessageSize"));
    assert!(body.is_end_stream());
    // Any other call takes it.
    assert!(matches!(
        poll_all(&mut body_of(&b, Cap::Decode, large))[..],
        [Ok(70)]
    ));
}

#[test]
fn a_message_over_the_decode_limit_reserves_nothing() {
    let b = budgets(100, 64);
    let mut body = body_of(&b, Cap::Decode, prefix(u32::MAX));
    assert!(matches!(poll_all(&mut body)[..], [Ok(5)]));
    assert_eq!(b.total.in_use(), 0);
}
