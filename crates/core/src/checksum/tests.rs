//! The checksum's tests: every kernel and every way of feeding against a byte-at-a-time
//! reading of the definition.

use super::*;
use proptest::prelude::*;

/// The module's sums read literally, a byte at a time: what every kernel must give.
fn reference(bytes: &[u8]) -> String {
    reference_segmented(bytes, SEGMENT)
}

/// The definition over segments of `segment` bytes, literally.
fn reference_segmented(bytes: &[u8], segment: usize) -> String {
    let mut h = CHAIN;
    for seg in bytes.chunks(segment) {
        let d = reference_digest(seg);
        h = (h ^ d).wrapping_mul(P1).rotate_left(27).wrapping_mul(P2);
    }
    h ^= (bytes.len() as u64).wrapping_mul(P2);
    h ^= h >> 33;
    h = h.wrapping_mul(P1);
    h ^= h >> 29;
    format!("pl2:{h:016x}")
}

/// One segment's digest, a byte at a time.
fn reference_digest(bytes: &[u8]) -> u64 {
    let mut acc = INIT;
    let mut padded = bytes.to_vec();
    padded.resize(bytes.len().div_ceil(STRIPE) * STRIPE, 0);
    for (n, s) in padded.chunks(STRIPE).enumerate() {
        let block_stripe = n % BLOCK_STRIPES;
        for i in 0..8 {
            let mut w = 0u64;
            for b in (0..8).rev() {
                w = (w << 8) | u64::from(s[8 * i + b]);
            }
            let k = w ^ SECRET[block_stripe + i];
            acc[i] = acc[i].wrapping_add((k & 0xffff_ffff).wrapping_mul(k >> 32));
            acc[i ^ 1] = acc[i ^ 1].wrapping_add(w);
        }
        if block_stripe == BLOCK_STRIPES - 1 {
            for (i, a) in acc.iter_mut().enumerate() {
                let mut x = *a ^ (*a >> 47);
                x ^= SECRET[24 + i];
                *a = x.wrapping_mul(P32);
            }
        }
    }
    let mut h = (bytes.len() as u64).wrapping_mul(P2);
    for (i, lane) in acc.iter().enumerate() {
        h = (h ^ (lane ^ SECRET[24 + i]).wrapping_mul(P1))
            .rotate_left(27)
            .wrapping_mul(P2);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(P1);
    h ^ (h >> 29)
}

#[test]
fn segments_taken_apart_and_chained_are_the_whole() {
    let data = bytes_of(5, 10_000);
    for segment in [1, 63, 64, 1000, 1024, 4096, 9_999, 10_000, 20_000] {
        let mut whole = Checksum::with_segment(segment);
        whole.update(&data);
        let whole = whole.finish();
        assert_eq!(whole, reference_segmented(&data, segment), "{segment}");
        let digests = data.chunks(segment).map(|seg| {
            let mut c = Checksum::with_segment(segment);
            c.update(seg);
            c.segment_digest().expect("one segment")
        });
        assert_eq!(
            Checksum::from_segments(digests, data.len() as u64),
            whole,
            "{segment}"
        );
    }
    let mut two = Checksum::with_segment(10);
    two.update(&data[..11]);
    assert_eq!(two.segment_digest(), None, "eleven bytes are two segments");
    assert_eq!(
        Checksum::from_segments([], 0),
        Checksum::default().finish(),
        "the empty stream has no segment"
    );
}

#[test]
fn the_default_segment_is_two_mib() {
    let data = bytes_of(11, SEGMENT + 100);
    let mut c = Checksum::default();
    c.update(&data);
    assert_eq!(c.finish(), reference_segmented(&data, 2 << 20));
}

/// Every kernel this CPU runs, over the same whole stripes, from the same state.
fn every_kernel(acc: [u64; 8], stripe: usize, data: &[u8]) -> Vec<(&'static str, [u64; 8], usize)> {
    let mut out = Vec::new();
    let mut run = |name, f: &dyn Fn(&mut [u64; 8], &mut usize)| {
        let (mut a, mut s) = (acc, stripe);
        f(&mut a, &mut s);
        out.push((name, a, s));
    };
    run("words", &|a, s| words(a, s, data));
    #[cfg(target_arch = "x86_64")]
    {
        run("sse2", &|a, s| kernels::sse2(a, s, data));
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: checked just above.
            run("avx512", &|a, s| unsafe { kernels::avx512(a, s, data) });
        } else {
            eprintln!("skipped: the AVX-512 checksum kernel (this CPU lacks AVX-512F)");
        }
    }
    out
}

fn bytes_of(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn the_fast_checksum_is_the_definition() {
    for len in [
        0,
        1,
        7,
        8,
        63,
        64,
        65,
        1023,
        1024,
        1025,
        2048,
        5000,
        1 << 16,
    ] {
        let data = bytes_of(len as u64 + 3, len);
        let mut c = Checksum::default();
        c.update(&data);
        assert_eq!(c.finish(), reference(&data), "{len} bytes");
    }
}

#[test]
fn every_kernel_gives_the_portable_sums() {
    let data = bytes_of(99, 64 * 37);
    for stripe in [0, 5, 15] {
        let got = every_kernel(INIT, stripe, &data);
        for (name, acc, s) in &got[1..] {
            assert_eq!(
                (acc, s),
                (&got[0].1, &got[0].2),
                "{name} from stripe {stripe}"
            );
        }
    }
}

#[test]
fn close_inputs_differ() {
    let zero = vec![0u8; 2048];
    let mut seen = std::collections::HashSet::new();
    let mut check = |b: &[u8]| {
        let mut c = Checksum::default();
        c.update(b);
        assert!(seen.insert(c.finish()), "a collision among close inputs");
    };
    check(&zero);
    check(&zero[..2047]);
    check(&[]);
    for at in [0, 1, 8, 63, 64, 1000, 1024, 2047] {
        let mut b = zero.clone();
        b[at] = 1;
        check(&b);
    }
    // Two stripes of one block swapped, and two blocks swapped.
    let data = bytes_of(7, 4096);
    check(&data);
    let mut swapped = data.clone();
    swapped[..64].copy_from_slice(&data[64..128]);
    swapped[64..128].copy_from_slice(&data[..64]);
    check(&swapped);
    let mut blocks = data.clone();
    blocks[..1024].copy_from_slice(&data[1024..2048]);
    blocks[1024..2048].copy_from_slice(&data[..1024]);
    check(&blocks);
}

proptest! {
    #[test]
    fn fed_in_any_pieces_it_is_the_definition(
        data in proptest::collection::vec(any::<u8>(), 0..3000),
        cuts in proptest::collection::vec(0usize..3000, 0..8),
        segment in prop_oneof![Just(SEGMENT), 1usize..4000],
    ) {
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(data.len())).collect();
        cuts.sort_unstable();
        let mut c = Checksum::with_segment(segment);
        let mut at = 0;
        for cut in cuts.into_iter().chain([data.len()]) {
            c.update(&data[at..cut]);
            at = cut;
        }
        prop_assert_eq!(c.len(), data.len() as u64);
        prop_assert_eq!(c.finish(), reference_segmented(&data, segment));
    }
}
