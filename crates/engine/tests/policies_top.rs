//! References and events at the top of the address space, under every policy:
//! each either runs or stops with a clean error that names the record and the
//! address space, never a panic (a reference to 0xffff_ffff_ffff_ffff once
//! panicked in the inferred-VMA path, `eager`/`explicit` called the next
//! address down "out of memory", and fork and the invariant checks saw only
//! the lower 128 TiB of a 256 TiB space).

use crate::common;

use common::Events;
use pagelab_core::{
    AccessKind, Advice, Backing, Bytes, Event, MapEvent, MemRef, Prot, Sharing, VirtAddr,
};
use pagelab_engine::{run_policies, PolicyConfig};
use pagelab_mm::phys::PhysConfig;

const POLICIES: &[&str] = &[
    "base:4K",
    "base:64K",
    "linux-thp",
    "linux-thp:enabled=always",
    "relocation",
    "eager",
    "explicit",
    "reservation",
];

fn run(events: Vec<Event>, policy: &str) -> Result<(), String> {
    let cfg = PolicyConfig {
        policies: vec![policy.parse().unwrap()],
        tlb: pagelab_tlb::preset("weisberg").unwrap(),
        phys: PhysConfig::new(Bytes(64 << 20)),
        strict: false,
        cow: Default::default(),
        file_faults: Default::default(),
        platform: None,
        exit_mappings: false,
    };
    run_policies(&mut Events(events.into_iter()), &cfg, &mut ())
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fn load(addr: u64, size: u32) -> Event {
    Event::Ref(MemRef {
        addr: VirtAddr(addr),
        size,
        kind: AccessKind::Load,
    })
}

#[test]
fn a_reference_past_the_address_space_is_a_clean_error_under_every_policy() {
    for policy in POLICIES {
        for addr in [u64::MAX, u64::MAX - 1, 1 << 48, 1 << 63] {
            let events = vec![load(0x1000, 8), load(addr, 1)];
            let err = run(events, policy).expect_err(policy);
            assert!(
                err.contains("record 1 ")
                    && err.contains("outside the 48-bit virtual address space"),
                "{policy} at {addr:#x}: {err}"
            );
            assert!(!err.contains("out of memory"), "{policy}: {err}");
        }
        // The last page of the address space is a page like any other.
        run(vec![load((1 << 48) - 8, 8)], policy).unwrap_or_else(|e| panic!("{policy}: {e}"));
        // A reference that runs off the end stops at the first page beyond it.
        let err = run(vec![load((1 << 48) - 4, 8)], policy).expect_err(policy);
        assert!(err.contains("record 0 "), "{policy}: {err}");
    }
}

/// A small generator, so that the test needs no crate and repeats exactly.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 11 ^ self.0 << 21
    }

    /// An address near one of the edges: the top of the 48-bit space, the top
    /// of the 64-bit one, or the bottom.
    fn addr(&mut self) -> u64 {
        let off = self.next() % (8 << 20);
        match self.next() % 4 {
            0 => (1u64 << 48).wrapping_sub(off),
            1 => (1u64 << 48).wrapping_add(off),
            2 => u64::MAX - off,
            _ => off,
        }
    }

    fn event(&mut self) -> Event {
        let (mut start, len) = (self.addr() & !0xfff, (self.next() % (4 << 20)) & !0xfff);
        // Most ranges inside the space, so that a run goes on past them.
        if !self.next().is_multiple_of(8) {
            start = start.min((1 << 48) - len);
        }
        match self.next() % 9 {
            0 => Event::Map(Box::new(MapEvent {
                start: VirtAddr(start),
                len,
                prot: Prot(Prot::READ | Prot::WRITE),
                backing: Backing::Anon,
                sharing: Sharing::Private,
            })),
            1 => Event::Unmap {
                start: VirtAddr(start),
                len,
            },
            2 => Event::Protect {
                start: VirtAddr(start),
                len,
                prot: Prot(Prot::READ),
            },
            3 => Event::Advise {
                start: VirtAddr(start),
                len,
                advice: [
                    Advice::HugePage,
                    Advice::DontNeed,
                    Advice::PageOrder {
                        shift: 21,
                        wait: false,
                    },
                ][(self.next() % 3) as usize],
            },
            4 => Event::Brk {
                end: VirtAddr(start),
            },
            // A child that copies the mappings at the top of the space (fork
            // once copied only the lower 128 TiB).
            5 => Event::fork(2 + (self.next() % 64) as u32),
            _ => Event::Ref(MemRef {
                addr: VirtAddr(self.addr()),
                size: (self.next() % 64) as u32,
                kind: [AccessKind::Instr, AccessKind::Load, AccessKind::Store]
                    [(self.next() % 3) as usize],
            }),
        }
    }
}

#[test]
fn random_events_near_the_edges_never_panic() {
    let mut g = Lcg(0x5eed);
    for round in 0..100 {
        let events: Vec<Event> = (0..200).map(|_| g.event()).collect();
        for policy in POLICIES {
            if let Err(e) = run(events.clone(), policy) {
                assert!(
                    e.contains("record ") && e.contains("outside the 48-bit"),
                    "round {round}, {policy}: {e}"
                );
            }
        }
    }
}
