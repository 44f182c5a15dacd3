use super::*;

fn buddy(start: u64, frames: u64, max: u8) -> BuddyAllocator {
    BuddyAllocator::new(Pfn(start), frames, Order(max)).unwrap()
}

fn alloc(b: &mut BuddyAllocator, order: u8) -> Option<u64> {
    let got = b.alloc(Order(order)).map(|p| p.0);
    b.check().unwrap();
    got
}

fn free(b: &mut BuddyAllocator, pfn: u64, order: u8) {
    b.free(Pfn(pfn), Order(order)).unwrap();
    b.check().unwrap();
}

#[test]
fn split_and_coalesce_by_hand() {
    let mut b = buddy(0, 16, 4);
    assert_eq!(b.free_blocks(), [0, 0, 0, 0, 1]);
    // Splitting 16 for one frame leaves the upper halves 1, 2..4, 4..8, 8..16 free.
    assert_eq!(alloc(&mut b, 0), Some(0));
    assert_eq!(b.free_blocks(), [1, 1, 1, 1, 0]);
    assert_eq!(alloc(&mut b, 0), Some(1));
    assert_eq!(alloc(&mut b, 1), Some(2));
    assert_eq!(b.free_blocks(), [0, 0, 1, 1, 0]);
    // Smallest order first: the order-2 block at 4, not the order-3 block at 8.
    assert_eq!(alloc(&mut b, 0), Some(4));
    assert_eq!(b.free_blocks(), [1, 1, 0, 1, 0]);
    assert_eq!(b.free_frames(), 11);
    free(&mut b, 1, 0); // buddy 0 is allocated: no merge
    assert_eq!(b.free_blocks(), [2, 1, 0, 1, 0]);
    free(&mut b, 0, 0); // 0+1 -> order 1 at 0; its buddy 2 is allocated
    assert_eq!(b.free_blocks(), [1, 2, 0, 1, 0]);
    free(&mut b, 2, 1); // 0..2 + 2..4 -> order 2 at 0; buddy 4 is not free
    assert_eq!(b.free_blocks(), [1, 1, 1, 1, 0]);
    free(&mut b, 4, 0); // cascades 4,5 -> 4..8 -> 0..8 -> 0..16
    assert_eq!(b.free_blocks(), [0, 0, 0, 0, 1]);
    assert_eq!(b.free_frames(), 16);
    let s = b.buddy_stats();
    assert_eq!((s.allocs, s.frees), (4, 4));
}

#[test]
fn exhaustion_and_failures_per_order() {
    let mut b = buddy(0, 16, 4);
    assert_eq!(alloc(&mut b, 4), Some(0));
    assert_eq!(alloc(&mut b, 0), None);
    free(&mut b, 0, 4);
    for want in [0, 4, 8, 12] {
        assert_eq!(alloc(&mut b, 2), Some(want));
    }
    assert_eq!(alloc(&mut b, 2), None);
    assert_eq!(alloc(&mut b, 2), None);
    assert_eq!(alloc(&mut b, 5), None, "above max order");
    assert_eq!(b.buddy_stats().failures_by_order, [1, 0, 2, 0, 0]);
    assert_eq!(b.free_frames(), 0);
    assert_eq!(
        b.unusable_index(Order(0)),
        1.0,
        "no free memory is all unusable"
    );
}

#[test]
fn unaligned_range_starts_and_ends_with_small_blocks() {
    let mut b = buddy(3, 29, 3);
    assert_eq!(b.free_blocks(), [1, 0, 1, 3]);
    assert_eq!(b.total_frames(), 29);
    b.check().unwrap();
    // Blocks never merge across the start: 3's buddy 2 is outside.
    assert_eq!(alloc(&mut b, 0), Some(3));
    free(&mut b, 3, 0);
    assert_eq!(b.free_blocks(), [1, 0, 1, 3]);
    // A range that is not a multiple of the largest block: 20 frames from 0.
    let b = buddy(0, 20, 3);
    assert_eq!(b.free_blocks(), [0, 0, 1, 2]);
}

#[test]
fn fragmentation_on_a_hand_built_layout() {
    let mut b = buddy(0, 16, 4);
    for p in 0..16 {
        assert_eq!(alloc(&mut b, 0), Some(p));
    }
    for p in (0..16).step_by(2) {
        free(&mut b, p, 0);
    }
    // Eight lone frames: nothing above order 0 can be served.
    assert_eq!(b.free_blocks(), [8, 0, 0, 0, 0]);
    assert_eq!(b.unusable_index(Order(0)), 0.0);
    assert_eq!(b.unusable_index(Order(1)), 1.0);
    free(&mut b, 1, 0);
    free(&mut b, 3, 0);
    // 0..4 free as one order-2 block and lone frames 4, 6, ..., 14: 10 free frames.
    assert_eq!(b.free_blocks(), [6, 0, 1, 0, 0]);
    assert_eq!(b.unusable_index(Order(1)), 6.0 / 10.0);
    assert_eq!(b.unusable_index(Order(2)), 6.0 / 10.0);
    assert_eq!(b.unusable_index(Order(3)), 1.0);
    let s = FrameAllocator::stats(&b);
    assert_eq!(s.unusable_index[1], 6.0 / 10.0);
    assert_eq!(s.used_frames, 6);
}

#[test]
fn bad_frees_are_errors_and_change_nothing() {
    let mut b = buddy(0, 32, 4);
    let big = b.alloc(Order(3)).unwrap(); // 0..8
    let one = b.alloc(Order(0)).unwrap(); // 8
    let before = (b.free_blocks().to_vec(), b.free_frames());
    let cases = [
        (
            9,
            0,
            PhysError::DoubleFree {
                pfn: Pfn(9),
                order: 0,
            },
        ),
        (
            big.0,
            2,
            PhysError::WrongOrder {
                pfn: Pfn(0),
                order: 2,
                actual: 3,
            },
        ),
        (
            4,
            2,
            PhysError::NotAllocated {
                pfn: Pfn(4),
                order: 2,
            },
        ),
        (
            16,
            0,
            PhysError::DoubleFree {
                pfn: Pfn(16),
                order: 0,
            },
        ),
        (
            32,
            0,
            PhysError::OutOfRange {
                pfn: Pfn(32),
                order: 0,
                start: Pfn(0),
                end: Pfn(32),
            },
        ),
        (
            3,
            1,
            PhysError::Misaligned {
                pfn: Pfn(3),
                order: 1,
            },
        ),
        (0, 5, PhysError::OrderTooLarge { order: 5, max: 4 }),
        (
            u64::MAX,
            4,
            PhysError::OutOfRange {
                pfn: Pfn(u64::MAX),
                order: 4,
                start: Pfn(0),
                end: Pfn(32),
            },
        ),
    ];
    for (pfn, order, want) in cases {
        let got = b.free(Pfn(pfn), Order(order)).unwrap_err();
        assert_eq!(got, want);
        assert!(!got.to_string().is_empty());
        b.check().unwrap();
        assert_eq!((b.free_blocks().to_vec(), b.free_frames()), before);
    }
    free(&mut b, one.0, 0);
    assert_eq!(
        b.free(one, Order(0)),
        Err(PhysError::DoubleFree {
            pfn: Pfn(8),
            order: 0
        })
    );
    assert_eq!(b.buddy_stats().bad_frees, 9);
}

#[test]
fn split_makes_order_zero_pages() {
    let mut b = buddy(0, 16, 4);
    let p = b.alloc(Order(3)).unwrap();
    b.split(p, Order(3)).unwrap();
    b.check().unwrap();
    assert_eq!(b.allocated_order(Pfn(5)), Some(Order(0)));
    assert_eq!(
        b.free(p, Order(3)),
        Err(PhysError::WrongOrder {
            pfn: Pfn(0),
            order: 3,
            actual: 0
        })
    );
    assert!(b.split(p, Order(3)).is_err());
    for f in (0..8).rev() {
        free(&mut b, f, 0);
    }
    assert_eq!(b.free_blocks(), [0, 0, 0, 0, 1]);
    assert_eq!(b.buddy_stats().splits, 1);
}

#[test]
fn natural_alignment_at_every_order() {
    let mut b = buddy(0, 1 << 12, 10);
    for order in (0..=10u8).rev().chain(0..=10) {
        if let Some(p) = b.alloc(Order(order)) {
            assert_eq!(p.0 % (1 << order), 0, "order {order} at {p:?}");
        }
    }
    b.check().unwrap();
}

#[test]
fn bookkeeping_is_about_half_a_byte_per_frame() {
    let frames = 1u64 << 20; // 4 GiB of 4K frames
    let b = buddy(0, frames, 10);
    let bytes = b.bookkeeping_bytes() as u64;
    assert!(
        bytes <= frames / 2 + frames / 64 + 4096,
        "{bytes} bytes for {frames} frames"
    );
}

#[test]
fn bad_geometry_is_an_error() {
    assert!(matches!(
        BuddyAllocator::new(Pfn(0), 0, Order(3)),
        Err(PhysError::BadRange { .. })
    ));
    assert!(matches!(
        BuddyAllocator::new(Pfn(u64::MAX), 2, Order(3)),
        Err(PhysError::BadRange { .. })
    ));
    assert!(matches!(
        BuddyAllocator::new(Pfn(0), 8, Order(19)),
        Err(PhysError::OrderTooLarge { .. })
    ));
}
