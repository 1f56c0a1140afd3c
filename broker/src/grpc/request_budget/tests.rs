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
        scan.feed::<()>(c, |s| {
            if let Seen::Announced(len) = s {
                seen.push(len);
            }
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
        message_timeout: Duration::from_millis(50),
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
    one.announce(300).expect("fits");
    one.announce(200).expect("smaller: already reserved");
    one.announce(500).expect("grows by 200");
    one.arrive(120).expect("fits");
    one.arrive(500).expect("grows by 380");
    assert_eq!((conn.in_use(), b.total.in_use()), (500, 500));
    // The connection's budget refuses the next call's 200 bytes.
    let two = held(&b, Some(Arc::clone(&conn)));
    let refused = two.announce(200).expect_err("over the connection's budget");
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
    assert!(refused.message().contains("maxInFlightBytesPerConnection"));
    // Another connection meets the broker-wide budget with the bytes that arrive.
    let three = held(&b, Some(InFlightLimit::new(600)));
    three.arrive(450).expect("fits in the total");
    let four = held(&b, Some(InFlightLimit::new(600)));
    let refused = four.arrive(100).expect_err("over the total");
    assert!(refused.message().contains("maxInFlightBytesTotal"));
    drop((one, two, three, four));
    assert_eq!((conn.in_use(), b.total.in_use()), (0, 0));
}

#[test]
fn announcements_take_nothing_of_the_total() {
    // A connection's announcements are its own: the shared total holds bytes only.
    let b = budgets(100, 100);
    let one = held(&b, Some(InFlightLimit::new(1000)));
    one.announce(900).expect("the connection's budget");
    assert_eq!(b.total.in_use(), 0);
    let other = held(&b, None);
    other.arrive(100).expect("the whole total is left");
}

fn body_of(b: &Arc<Budgets>, cap: Cap, bytes: Vec<u8>) -> BudgetedBody {
    BudgetedBody {
        inner: Body::new(http_body_util::Full::new(Bytes::from(bytes))),
        scan: PrefixScan::default(),
        held: Arc::new(held(b, None)),
        cap,
        deadline: None,
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

#[test]
fn prefixes_and_arrivals_are_reported_in_order() {
    let mut body = prefix(3);
    body.extend_from_slice(b"abc");
    let mut scan = PrefixScan::default();
    let mut seen = Vec::new();
    for c in [&body[..6], &body[6..]] {
        scan.feed::<()>(c, |s| {
            seen.push(s);
            Ok(())
        })
        .expect("no refusal");
        if c.len() == 6 {
            assert_eq!(scan.incomplete(), Some(3));
        }
    }
    let arrived = |bytes| Seen::Arrived {
        announced: 3,
        bytes,
    };
    assert_eq!(
        seen,
        [Seen::Announced(3), arrived(5), arrived(6), arrived(8)]
    );
    assert_eq!(scan.incomplete(), None);
}

/// A body that sends `bytes` and then nothing, never ending.
struct Stalled(Option<Bytes>);

impl HttpBody for Stalled {
    type Data = Bytes;
    type Error = Status;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        match self.0.take() {
            Some(b) => Poll::Ready(Some(Ok(Frame::data(b)))),
            None => Poll::Pending,
        }
    }
}

#[tokio::test]
async fn a_stalled_message_ends_its_call_and_frees_its_bytes() {
    use http_body_util::BodyExt;
    let b = budgets(1 << 20, 64);
    let mut sent = prefix(1000);
    sent.extend_from_slice(&[0; 400]);
    let mut body = BudgetedBody {
        inner: Body::new(Stalled(Some(Bytes::from(sent)))),
        scan: PrefixScan::default(),
        held: Arc::new(held(&b, None)),
        cap: Cap::Decode,
        deadline: None,
        failed: false,
    };
    let first = body.frame().await.expect("a frame").expect("admitted");
    assert_eq!(first.into_data().map(|d| d.len()).ok(), Some(405));
    assert_eq!(b.total.in_use(), 405);
    let refused = body
        .frame()
        .await
        .expect("an answer")
        .expect_err("timed out");
    assert_eq!(refused.code(), tonic::Code::DeadlineExceeded);
    assert!(
        refused
            .message()
            .contains("grpcRequestMessageTimeoutMillis")
    );
    assert!(body.is_end_stream());
    drop(body);
    assert_eq!(b.total.in_use(), 0);
}
