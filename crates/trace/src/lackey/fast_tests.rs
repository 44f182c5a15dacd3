//! Tests of `fast` (a file of their own, to keep `fast.rs` short).

use super::*;
use pagelab_core::isa::Isa;
use proptest::prelude::*;

/// Every implementation of `hex16` this CPU can run.
fn all_hex16(chunk: &[u8; 16]) -> Vec<(u32, u64)> {
    let mut all = vec![hex16::<false>(chunk), swar::hex16(chunk)];
    #[cfg(target_arch = "x86_64")]
    if Isa::Avx2.supported() {
        all.push(avx2::hex16(chunk));
    }
    all
}

/// `parse_blocks` over `text` padded as the reader pads it: the AVX2
/// build when `avx2`, else the portable one.
fn blocks(text: &[u8], avx2: bool) -> (Vec<Event>, u64, Result<(), &'static str>, usize) {
    let mut buf = text.to_vec();
    if !buf.ends_with(b"\n") {
        buf.push(b'\n');
    }
    let complete = buf.len();
    buf.resize(complete + READ_AHEAD, b'7');
    let mut out = Vec::new();
    let mut sink = EventSink::new(&mut out, usize::MAX);
    let (s, line, result) = if avx2 {
        assert!(Isa::Avx2.supported());
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has the AVX2 tier (asserted just above), the
        // features `avx2::parse_blocks` is compiled for.
        let r = unsafe { avx2::parse_blocks(&buf, complete, 0, 0, &mut sink) };
        #[cfg(not(target_arch = "x86_64"))]
        let r = unreachable!("no AVX2 off x86-64");
        r
    } else {
        parse_blocks_with::<false, _>(&buf, complete, 0, 0, &mut sink)
    };
    (out, line, result, s)
}

/// The SSE2 (or SWAR) build of the block loop agrees with the AVX2 one.
#[test]
fn block_loops_agree() {
    if !Isa::Avx2.supported() {
        eprintln!(
            "block_loops_agree: skipped: this CPU lacks the AVX2 tier ({})",
            Isa::Avx2.missing().join(", ")
        );
        return;
    }
    proptest!(|(text in super::super::tests::arb_text())| {
        prop_assert_eq!(blocks(&text, false), blocks(&text, true));
    });
}

fn hex_ref(chunk: &[u8; 16]) -> (u32, u64) {
    let n = chunk.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    let text = std::str::from_utf8(&chunk[..n]).unwrap();
    (n as u32, u64::from_str_radix(text, 16).unwrap_or(0))
}

fn bytes() -> impl Strategy<Value = u8> {
    prop_oneof![
        Just(b'\n'),
        Just(b','),
        b'0'..=b'9',
        b'a'..=b'f',
        b'A'..=b'F',
        any::<u8>()
    ]
}

proptest! {
    #[test]
    fn newline_masks_agree(block in proptest::collection::vec(bytes(), 64)) {
        let block: [u8; 64] = block.try_into().unwrap();
        let want = block.iter().enumerate().fold(0u64, |m, (i, &b)| m | ((b == b'\n') as u64) << i);
        prop_assert_eq!(newline_mask::<false>(&block), want);
        prop_assert_eq!(swar::newline_mask(&block), want);
        #[cfg(target_arch = "x86_64")]
        if Isa::Avx2.supported() {
            prop_assert_eq!(avx2::newline_mask(&block), want);
        }
    }

    #[test]
    fn hex_digits_agree(chunk in proptest::collection::vec(bytes(), 16)) {
        let chunk: [u8; 16] = chunk.try_into().unwrap();
        let (want_n, want) = hex_ref(&chunk);
        for (n, v) in all_hex16(&chunk) {
            prop_assert_eq!(n, want_n);
            if n > 0 {
                prop_assert_eq!(v >> (64 - 4 * n), want);
            }
        }
    }
}

#[test]
fn every_byte_is_classified_right() {
    for b in 0..=255u8 {
        let mut chunk = [b'0'; 16];
        chunk[0] = b;
        let want = hex_ref(&chunk);
        for (n, v) in all_hex16(&chunk) {
            assert_eq!(n, want.0, "byte {b:#x}");
            if n == 16 {
                assert_eq!(v, want.1, "byte {b:#x}");
            }
        }
    }
}
