//! Exact reference sequences for tiny parameters, checked by hand against the
//! loops described in each workload's documentation.

use crate::common;
use common::*;
use pagelab_core::AccessKind::{Load, Modify, Store};

#[test]
fn stride_16k_every_page_twice() {
    let r = refs("stride:heap=16K,page=4K,line=64,every=1,iters=2,init=false");
    let b = MMAP_BASE;
    assert_eq!(
        addrs(&r, Load),
        [
            b,
            b + 0x1040,
            b + 0x2080,
            b + 0x30c0,
            b,
            b + 0x1040,
            b + 0x2080,
            b + 0x30c0
        ]
    );
    // One loop iteration, in program order: the load's data follows its fetch.
    assert_eq!(
        r[..7],
        [
            i(0x401000, 4),
            d(b, 8, Load),
            i(0x401004, 3),
            i(0x401007, 3),
            i(0x40100a, 3),
            i(0x40100d, 3),
            i(0x401010, 2),
        ]
    );
    assert_eq!(r.len(), 2 * 4 * 7);
}

#[test]
fn stride_every_other_page_and_offset_wrap() {
    let r = refs("stride:heap=16K,every=2,iters=1,init=false");
    assert_eq!(addrs(&r, Load), [MMAP_BASE, MMAP_BASE + 0x2040]);
    // 256-byte pages, 64-byte lines: the offset wraps after four pages.
    let r = refs("stride:heap=2K,page=256,line=64,iters=1,init=false");
    let off: Vec<u64> = addrs(&r, Load).iter().map(|a| a - MMAP_BASE).collect();
    assert_eq!(off, [0, 0x140, 0x280, 0x3c0, 0x400, 0x540, 0x680, 0x7c0]);
}

#[test]
fn stride_init_writes_the_heap_with_a_memset_loop_first() {
    let r = refs("stride:heap=64,page=64,line=64,iters=1");
    let m = 0x7f3a_1be9_d6c0;
    let b = MMAP_BASE;
    let memset = |at: u64| {
        [
            i(m, 4),
            d(at, 32, Store),
            i(m + 4, 4),
            i(m + 8, 3),
            i(m + 11, 2),
        ]
    };
    assert_eq!(r[..5], memset(b));
    assert_eq!(r[5..10], memset(b + 32));
    assert_eq!(r[10..12], [i(0x401000, 4), d(b, 8, Load)]);
    assert_eq!(r.len(), 10 + 7);
}

#[test]
fn align_moves_the_data_to_the_next_boundary() {
    let r = refs("stride:heap=8K,iters=1,init=false,align=2M");
    assert_eq!(addrs(&r, Load), [0x7f3a_1c60_0000, 0x7f3a_1c60_1040]);
}

#[test]
fn stream_two_elements() {
    let r = refs("stream:n=2,iters=1,init=false");
    let (a, b, c) = (BSS_BASE, BSS_BASE + 16, BSS_BASE + 32);
    assert_eq!(
        data(&r),
        [
            // copy c = a
            (a, 8, Load),
            (c, 8, Store),
            (a + 8, 8, Load),
            (c + 8, 8, Store),
            // scale b = s * c
            (c, 8, Load),
            (b, 8, Store),
            (c + 8, 8, Load),
            (b + 8, 8, Store),
            // add c = a + b
            (a, 8, Load),
            (b, 8, Load),
            (c, 8, Store),
            (a + 8, 8, Load),
            (b + 8, 8, Load),
            (c + 8, 8, Store),
            // triad a = b + s * c
            (c, 8, Load),
            (b, 8, Load),
            (a, 8, Store),
            (c + 8, 8, Load),
            (b + 8, 8, Load),
            (a + 8, 8, Store),
        ]
    );
    // Triad's first element in full: movsd, mulsd, addsd, movsd, add, cmp, jne.
    let t = 2 * (7 + 8 + 9);
    assert_eq!(
        r[t..t + 10],
        [
            i(0x401060, 5),
            d(c, 8, Load),
            i(0x401065, 4),
            i(0x401069, 5),
            d(b, 8, Load),
            i(0x40106e, 5),
            d(a, 8, Store),
            i(0x401073, 4),
            i(0x401077, 3),
            i(0x40107a, 2),
        ]
    );
    assert_eq!(r.len(), 2 * 34);
}

#[test]
fn stream_init_covers_all_three_arrays_with_a_short_last_store() {
    // 3 arrays x 1 element = 24 bytes: one 24-byte store.
    let r = refs("stream:n=1,iters=0");
    assert_eq!(data(&r), [(BSS_BASE, 24, Store)]);
}

/// splitmix64 as published (Steele, Lea, Flood 2014), written out again here.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E3779B97F4A7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
    z ^ (z >> 31)
}

#[test]
fn gups_follows_the_hpcc_lfsr() {
    let r = refs("gups:table=64K,updates=1000,seed=7,init=false");
    let mut ran = splitmix64(7);
    let expect: Vec<_> = (0..1000)
        .map(|_| {
            ran = (ran << 1) ^ if (ran as i64) < 0 { 7 } else { 0 };
            (MMAP_BASE + (ran & 8191) * 8, 8, Modify)
        })
        .collect();
    assert_eq!(data(&r), expect);
    // Nine instructions around the modify, which is the seventh.
    assert_eq!(r[6], i(0x401014, 4)); // 4+4+3+3+3+3 = 0x14
    assert_eq!(r[7].kind, Modify);
    assert_eq!(r.len(), 1000 * 10);
}

#[test]
fn chase_follows_the_permutation_round_the_cycle() {
    let r = refs("chase:nodes=5,node=128,steps=12,seed=3,init=false");
    let p = pagelab_workloads::Permutation::new(5, 3);
    let expect: Vec<u64> = (0..12).map(|s| MMAP_BASE + p.apply(s % 5) * 128).collect();
    assert_eq!(addrs(&r, Load), expect);
    assert_eq!(
        r[..4],
        [
            i(0x401000, 3),
            d(expect[0], 8, Load),
            i(0x401003, 4),
            i(0x401007, 2)
        ]
    );
}
