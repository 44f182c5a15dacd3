//! The per-CPU hot and cold page lists against a small reference written
//! here from the paper's and Linux 2.6.0's description (section 6 of the
//! 004 paper; `buffered_rmqueue` and `free_hot_cold_page`): random
//! allocations and frees of several orders, hot and cold, on two CPUs and
//! two zones, with random batch sizes and watermarks. The reference keeps
//! each list as a plain vector, head first, over the crate's buddy allocator
//! (tested on its own against `phys_buddy_reference.rs`); every frame
//! handed out, every free's outcome and every counter must agree, and
//! `check()` must hold after every step.

use pagelab_core::{Bytes, Order, Pfn};
use pagelab_mm::phys::{
    BuddyAllocator, FrameAllocator, ListMarks, PageTemp, PcpConfig, PhysConfig, PhysMem, ZoneKind,
    ZonePref,
};
use proptest::prelude::*;

const CPUS: u32 = 2;

#[derive(Debug, Clone)]
enum Op {
    Cpu(u32),
    Alloc(u8, bool, bool),
    Free(usize, bool),
    FreeAgain(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => (0..CPUS).prop_map(Op::Cpu),
        6 => (prop_oneof![6 => Just(0u8), 1 => 1u8..=3], any::<bool>(), any::<bool>())
            .prop_map(|(o, z, c)| Op::Alloc(o, z, c)),
        5 => (any::<usize>(), any::<bool>()).prop_map(|(i, c)| Op::Free(i, c)),
        1 => any::<usize>().prop_map(Op::FreeAgain),
    ]
}

fn config() -> impl Strategy<Value = PcpConfig> {
    (1u32..=8, 0u32..=12, 1u32..=12, 0u32..=6, 1u32..=8).prop_map(|(batch, hl, hd, cl, cd)| {
        PcpConfig {
            batch,
            hot: ListMarks {
                low: hl,
                high: hl + hd,
            },
            cold: ListMarks {
                low: cl,
                high: cl + cd,
            },
        }
    })
}

/// The reference: per (cpu, zone, temp) a vector with the head at index 0.
struct Reference {
    cfg: PcpConfig,
    buddies: Vec<BuddyAllocator>,
    lists: Vec<Vec<u64>>,
    cpu: u32,
    hot: u64,
    cold: u64,
    direct: u64,
    locks: u64,
    without: u64,
    refills: u64,
    drains: u64,
}

impl Reference {
    fn list(&self, zone: usize, cold: bool) -> usize {
        (self.cpu as usize * 2 + zone) * 2 + usize::from(cold)
    }

    fn marks(&self, cold: bool) -> ListMarks {
        if cold {
            self.cfg.cold
        } else {
            self.cfg.hot
        }
    }

    fn zone_of(&self, pfn: u64) -> usize {
        usize::from(!self.buddies[0].contains(Pfn(pfn)))
    }

    fn try_zone(&mut self, zone: usize, order: u8, cold: bool) -> Option<u64> {
        self.without += 1;
        if order == 0 {
            let l = self.list(zone, cold);
            if self.lists[l].len() <= self.marks(cold).low as usize {
                self.locks += 1;
                self.refills += 1;
                for _ in 0..self.cfg.batch {
                    match self.buddies[zone].alloc(Order(0)) {
                        Some(p) => self.lists[l].push(p.0),
                        None => break,
                    }
                }
            }
            if !self.lists[l].is_empty() {
                if cold {
                    self.cold += 1;
                } else {
                    self.hot += 1;
                }
                return Some(self.lists[l].remove(0));
            }
        }
        self.locks += 1;
        let p = self.buddies[zone].alloc(Order(order))?;
        self.direct += 1;
        Some(p.0)
    }

    fn alloc(&mut self, order: u8, zone: usize, cold: bool) -> Option<u64> {
        if let Some(p) = self.try_zone(zone, order, cold) {
            return Some(p);
        }
        if self.lists.iter().all(Vec::is_empty) {
            return None;
        }
        for l in 0..self.lists.len() {
            if self.lists[l].is_empty() {
                continue;
            }
            self.locks += 1;
            for p in std::mem::take(&mut self.lists[l]) {
                let z = self.zone_of(p);
                self.buddies[z].free(Pfn(p), Order(0)).unwrap();
            }
        }
        self.try_zone(zone, order, cold)
    }

    /// Frees a block the test holds (so never a bad free).
    fn free(&mut self, pfn: u64, order: u8, cold: bool) {
        let zone = self.zone_of(pfn);
        self.without += 1;
        if order > 0 {
            self.locks += 1;
            self.buddies[zone].free(Pfn(pfn), Order(order)).unwrap();
            return;
        }
        let l = self.list(zone, cold);
        if self.lists[l].len() >= self.marks(cold).high as usize {
            self.locks += 1;
            self.drains += 1;
            for _ in 0..self.cfg.batch {
                let Some(p) = self.lists[l].pop() else {
                    break;
                };
                self.buddies[zone].free(Pfn(p), Order(0)).unwrap();
            }
        }
        self.lists[l].insert(0, pfn);
    }
}

fn temp(cold: bool) -> PageTemp {
    if cold {
        PageTemp::Cold
    } else {
        PageTemp::Hot
    }
}

fn run(cfg: PcpConfig, ops: Vec<Op>) -> Result<(), TestCaseError> {
    // 1M in two zones of 128 frames each: dma32 [0, 512K), normal above.
    let mut phys = PhysConfig::new(Bytes(1 << 20));
    phys.dma32 = Bytes(512 << 10);
    phys.max_order = 3;
    let mut mem = PhysMem::new(&phys).unwrap();
    mem.set_pcp(cfg, CPUS);
    let buddy = |start| BuddyAllocator::new(Pfn(start), 128, Order(3)).unwrap();
    let mut r = Reference {
        cfg,
        buddies: vec![buddy(0), buddy(128)],
        lists: vec![Vec::new(); CPUS as usize * 2 * 2],
        cpu: 0,
        hot: 0,
        cold: 0,
        direct: 0,
        locks: 0,
        without: 0,
        refills: 0,
        drains: 0,
    };
    let mut held: Vec<(u64, u8)> = Vec::new();
    let mut freed: Vec<u64> = Vec::new();
    for op in ops {
        match op {
            Op::Cpu(c) => {
                mem.set_cpu(c);
                r.cpu = c;
            }
            Op::Alloc(order, normal, cold) => {
                let kind = if normal {
                    ZoneKind::Normal
                } else {
                    ZoneKind::Dma32
                };
                let got = mem.alloc_temp(Order(order), ZonePref::Only(kind), temp(cold));
                let want = r.alloc(order, usize::from(normal), cold);
                prop_assert_eq!(got.map(|p| p.0), want, "{:?}", op);
                if let Some(p) = want {
                    held.push((p, order));
                    freed.retain(|&f| f != p);
                }
            }
            Op::Free(i, cold) if !held.is_empty() => {
                let (p, order) = held.swap_remove(i % held.len());
                mem.free_temp(Pfn(p), Order(order), temp(cold)).unwrap();
                r.free(p, order, cold);
                if order == 0 {
                    freed.push(p);
                }
            }
            Op::FreeAgain(i) if !freed.is_empty() => {
                // A page freed to a list (or through it to the buddy
                // allocator) cannot be freed again.
                let p = freed[i % freed.len()];
                prop_assert!(mem.free_temp(Pfn(p), Order(0), PageTemp::Hot).is_err());
            }
            _ => {}
        }
        mem.check()
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let s = mem.pcp_stats().unwrap();
        let listed: usize = r.lists.iter().map(Vec::len).sum();
        prop_assert_eq!(
            (s.pcp_allocs_hot, s.pcp_allocs_cold, s.buddy_allocs),
            (r.hot, r.cold, r.direct)
        );
        prop_assert_eq!((s.refills, s.drains), (r.refills, r.drains));
        prop_assert_eq!(
            (
                s.buddy_lock_acquisitions,
                s.buddy_lock_acquisitions_without_lists
            ),
            (r.locks, r.without)
        );
        prop_assert_eq!(s.pages_on_lists, listed as u64);
        let buddy_free: u64 = r.buddies.iter().map(|b| b.free_frames()).sum();
        prop_assert_eq!(mem.free_frames(), buddy_free + listed as u64);
        for (z, kind) in [ZoneKind::Dma32, ZoneKind::Normal].into_iter().enumerate() {
            let id = mem.zone_id(kind).unwrap();
            prop_assert_eq!(mem.zone_free(id), r.buddies[z].free_frames());
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn the_lists_match_the_reference(cfg in config(), ops in prop::collection::vec(op(), 1..400)) {
        run(cfg, ops)?;
    }
}

#[test]
fn the_paper_defaults_match_the_reference() {
    // Long hot runs on one CPU, then frees: the paper's values exercise the
    // refill at 32 and the drain at 96.
    let mut ops = vec![Op::Alloc(0, true, false); 120];
    ops.extend((0..120).map(|i| Op::Free(i, false)));
    ops.extend((0..40).map(|i| Op::Alloc(0, false, i % 2 == 0)));
    run(PcpConfig::PAPER, ops).unwrap();
}

#[test]
fn the_paper_defaults_are_16_32_96_0_32() {
    let p = PcpConfig::default();
    assert_eq!(p, PcpConfig::PAPER);
    assert_eq!(
        (p.batch, p.hot.low, p.hot.high, p.cold.low, p.cold.high),
        (16, 32, 96, 0, 32)
    );
}

#[test]
fn a_steady_hot_churn_takes_the_lock_once_per_batch() {
    // Allocate and free one page at a time on one CPU: after the first
    // refills bring the hot list above its low watermark, the page freed is
    // the next one allocated and the buddy allocator is never touched again.
    let mut mem = PhysMem::new(&PhysConfig::new(Bytes(64 << 20))).unwrap();
    mem.set_pcp(PcpConfig::PAPER, 1);
    for _ in 0..1000 {
        let p = mem.alloc(Order(0), ZonePref::Any).unwrap();
        mem.free(p, Order(0)).unwrap();
    }
    let s = mem.pcp_stats().unwrap();
    // Refills at 0, 16 and 32 pages (each at or below the low watermark of
    // 32) bring the list to 48; from then on it holds 47 or 48 pages.
    assert_eq!(s.refills, 3);
    assert_eq!(s.buddy_lock_acquisitions, 3);
    assert_eq!(s.buddy_lock_acquisitions_without_lists, 2000);
    assert_eq!(s.buddy_lock_acquisitions_saved, 1997);
    assert_eq!((s.pcp_allocs_hot, s.pcp_frees_hot), (1000, 1000));
    assert_eq!(s.pages_on_lists, 48);
}
