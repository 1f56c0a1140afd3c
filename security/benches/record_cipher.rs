//! The cipher TLS runs on every produced message, on its own: AES-128-GCM (the suite
//! `security::tls` prefers) sealing one TLS record (the sender's work) and opening it
//! (the receiver's), with ring, the provider rustls uses. Records of 1 KiB (one message
//! per record) to 16 KiB (the largest TLS record, many pipelined messages per record). With the `sign` bench this gives the
//! cryptographic floor of ACL + TLS per message, the part no implementation can remove
//! (docs/benchmarks.md). Run with `cargo bench -p rmq-security --bench
//! record_cipher`.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ring::aead::{AES_128_GCM, Aad, LessSafeKey, Nonce, UnboundKey};

/// A TLS 1.3 record header as the additional data (content type, version, length).
const AAD: [u8; 5] = [0x17, 0x03, 0x03, 0x40, 0x11];

fn bench_record(c: &mut Criterion) {
    let key = LessSafeKey::new(UnboundKey::new(&AES_128_GCM, &[7u8; 16]).expect("16-byte key"));
    let mut group = c.benchmark_group("aes128gcm_record");
    for size in [1024usize, 4096, 16384] {
        group.throughput(Throughput::Bytes(size as u64));
        // Sealing and opening with one nonce is fine for a measurement and nothing else.
        let nonce = || Nonce::assume_unique_for_key([1u8; 12]);
        group.bench_function(format!("seal_then_open_{size}"), |bench| {
            let mut record = vec![0x5au8; size];
            bench.iter(|| {
                let tag = key
                    .seal_in_place_separate_tag(nonce(), Aad::from(AAD), &mut record)
                    .expect("seal");
                let plain = key
                    .open_in_place_separate_tag(nonce(), Aad::from(AAD), tag, &mut record, 0..)
                    .expect("open");
                black_box(plain.len())
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_record);
criterion_main!(benches);
