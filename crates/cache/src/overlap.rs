//! Memory-level parallelism: how much of the misses' latency an out-of-order
//! core hides when its references do not depend on one another.
//!
//! The in-order model ([`crate::Caches`], the walks) pays every latency in
//! full, one after the other. A core issues later independent loads while
//! earlier ones miss, limited by what tracks the misses in flight: the L1D's
//! miss buffers (AMD's miss address buffers, Intel's fill buffers) and the
//! page-table walkers. [`Overlap`] replays a run on a clock with those two
//! pools:
//!
//! - instructions move the clock on by their cycles ([`Overlap::issue`]: the
//!   machine's `base_cpi` each, a load's issue included);
//! - an independent reference starts at the clock and does not move it: its
//!   TLB lookup, then, if it walks, a walker for the walk's cycles (waiting
//!   for the first to come free when all are busy), then its data: a miss
//!   buffer for the latency of a line that missed the L1D (waiting likewise),
//!   the L1D's latency otherwise;
//! - a walk's own reads go through the L1D as data does (Intel counts where
//!   they hit, L1D to memory, in its `PAGE_WALKER_LOADS` events), so those
//!   that missed it also hold a miss buffer: one, for their cycles together,
//!   from the walk's start (a walk waits for a walker and, when it has such
//!   reads, a buffer). Under a stream of independent misses the buffers are
//!   the bottleneck, and a 4K page's walk then costs its misses' share of
//!   them where walkers alone would hide it entirely: on this project's
//!   Intel guest, random loads over 256M took 1.3 times as long on 4K pages
//!   as on 2M pages though the walkers were not short (`docs/cost.md`);
//! - where the machine gives a `walk_interval`, a walk also starts no sooner
//!   than that many cycles after the one before: short walks, which a pool
//!   of walkers would overlap many at a time, then go one an interval;
//! - where the machine says `walks = "additive"` ([`WalkClock::Additive`]), a walk
//!   also holds up every reference after it by its share of the walkers (its
//!   cycles over their number, at least the interval): the walks' time adds to
//!   the loop's own instead of hiding under it. That is how `pagelab machines
//!   --measure` reads its walkers (a walk's latency over what it *adds* to an
//!   independent load), so a measured file says so;
//! - where the machine gives the host's block translations (`[nested] block_interval`),
//!   those a walk missed take one resource, one at a time, for that many cycles each: the
//!   walk starts no sooner than the resource comes free, and holds it for its misses'
//!   intervals together ([`crate::blocks`]). It binds only a loop faster than the misses
//!   (on the Zen 4 guest, sessions 39 and 40: a stride over 4096 pages scattered over 8G
//!   took 2.1 ns more an access than over 64 blocks where each access cost 2 ns, and
//!   1.1 ns more where each cost 3.9; random updates of 9 ns, 0.8 more). The resource is
//!   free again by the end of the walk that took it, so it holds nothing up beyond what is
//!   in flight;
//! - the time a reference waits for a walker or a buffer holds up everything
//!   after it (the pools are taken in program order), so the clock never runs
//!   further ahead of the misses than the pools allow;
//! - a dependent reference ([`Overlap::dependent`]) waits for everything
//!   before it and costs its latency in full;
//! - the run's time is when the last of them completes.
//!
//! Everything is counted in ticks of 1/[`TICKS`] cycle, so that instructions
//! of half a cycle add up exactly. There is no limit of the reorder window
//! besides the two pools and the interval, and no bandwidth limit.

use serde::{Deserialize, Serialize};

/// The `[overlap]` section of a machine file: the core's capacity for misses
/// in flight.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverlapSpec {
    /// L1D misses that can be outstanding at once (miss buffers).
    pub miss_buffers: u32,
    /// Page walks that can be under way at once.
    pub walkers: u32,
    /// Cycles from one walk's start to the next one's at the least (0, the default: walks
    /// start as walkers come free). Short walks show it: on this project's Intel guest,
    /// walks of 12 ns (a guest 2M page splintered over 4K host pages) added 2.6 ns each
    /// to independent loads where walks of 70 ns added 8.5, so that a pool of walkers
    /// alone, which gives both the same share of their latency, cannot be the whole
    /// story (`pagelab machines --measure` measures both; docs/cost.md).
    #[serde(default, skip_serializing_if = "crate::config::is_zero")]
    pub walk_interval: u32,
    /// How a walk holds up the references after it ([`WalkClock`]; pooled, the default).
    #[serde(default, skip_serializing_if = "WalkClock::is_pooled")]
    pub walks: WalkClock,
}

/// How the clock of an [`Overlap`] reads its walkers: `walks` in `[overlap]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WalkClock {
    /// The walkers are a pool: a walk holds up the references after it only while every
    /// walker is busy, so a loop that keeps fewer walks in flight than there are walkers
    /// hides them under its own time. The meaning of a walker count from a vendor's
    /// documentation (the presets').
    #[default]
    Pooled,
    /// Besides the pool, every walk moves the clock on by its cycles over the walkers (at
    /// least `walk_interval`): the walks' time adds to the loop's own. The meaning of a
    /// walker count measured as a walk's latency over the time it adds to an independent
    /// load, as `pagelab machines --measure` does. (On this project's Zen 4 guest, session
    /// 33, the probe's loop ran 5.0 cycles a load on packed lines and 13.2 over 4K pages
    /// whose walks took 62: 8.2 more, where a pool of its 8 walkers would add 2.8 and the
    /// walks' share added to the loop gives 12.8. `docs/cost.md`, session 37.)
    ///
    /// The share is at most the walk's own cycles, so that the clock never runs ahead of
    /// the references it has started.
    Additive,
}

impl WalkClock {
    fn is_pooled(&self) -> bool {
        *self == WalkClock::Pooled
    }
}

/// The most of either pool a machine file may give.
pub const MAX_IN_FLIGHT: u32 = 256;

/// The longest [`OverlapSpec::walk_interval`] a machine file may give, cycles.
pub const MAX_WALK_INTERVAL: u32 = 1000;

/// The completion times of the slots of one pool, earliest first taken.
#[derive(Clone, Debug)]
struct Pool {
    busy_until: Vec<u64>,
}

impl Pool {
    fn new(slots: u32) -> Pool {
        Pool {
            busy_until: vec![0; slots.max(1) as usize],
        }
    }

    /// The slot that comes free first, and when.
    #[inline]
    fn first_free(&self) -> (usize, u64) {
        let (i, &free) = self
            .busy_until
            .iter()
            .enumerate()
            .min_by_key(|&(_, &t)| t)
            .expect("a pool has at least one slot");
        (i, free)
    }

    /// Takes the slot that comes free first, from `at` at the earliest, for
    /// `cycles`; returns when it starts.
    #[inline]
    fn take(&mut self, at: u64, cycles: u64) -> u64 {
        let (i, free) = self.first_free();
        let start = at.max(free);
        self.busy_until[i] = start + cycles;
        start
    }
}

/// Ticks per cycle of an [`Overlap`]'s clock.
pub const TICKS: u64 = 256;

/// One run's clock of overlapped references, in ticks ([`TICKS`]).
#[derive(Clone, Debug)]
pub struct Overlap {
    misses: Pool,
    walks: Pool,
    /// [`OverlapSpec::walk_interval`] in ticks, and the earliest start of the next walk.
    walk_interval: u64,
    next_walk: u64,
    /// When the host's block translations are next free ([`Overlap::independent`]'s
    /// `blocks`).
    next_block: u64,
    /// [`OverlapSpec::walks`] is [`WalkClock::Additive`].
    additive: bool,
    /// When the next reference may start.
    clock: u64,
    /// When the last reference so far completes (every pool slot and the clock are at or
    /// before it).
    frontier: u64,
}

impl Overlap {
    /// A clock with `spec`'s pools, at zero.
    pub fn new(spec: &OverlapSpec) -> Overlap {
        Overlap {
            misses: Pool::new(spec.miss_buffers),
            walks: Pool::new(spec.walkers),
            walk_interval: u64::from(spec.walk_interval) * TICKS,
            next_walk: 0,
            next_block: 0,
            additive: spec.walks == WalkClock::Additive,
            clock: 0,
            frontier: 0,
        }
    }

    /// Instructions of `ticks` in all; returns how much they moved the run's completion
    /// on (less than `ticks` while misses are in flight beyond the clock).
    #[inline]
    pub fn issue(&mut self, ticks: u64) -> u64 {
        self.clock += ticks;
        self.advance(self.clock)
    }

    /// An independent reference: `translate` ticks of TLB lookup, `walk` of page walk
    /// (0: none) of which `walk_miss` were reads that missed the L1D, `data` of its
    /// line's latency, which missed the L1D when `l1_miss`. A walk whose host block
    /// translations missed holds their resource for `blocks` ticks (their `[nested]
    /// block_interval`s together, at most the walk's own ticks): it starts no sooner than
    /// the resource comes free. Returns how much it moved the run's completion on (at
    /// most the sum of the three).
    #[inline]
    pub fn independent(
        &mut self,
        translate: u64,
        (walk, walk_miss, blocks): (u64, u64, u64),
        data: u64,
        l1_miss: bool,
    ) -> u64 {
        let mut t = self.clock + translate;
        let mut waited = 0;
        if walk > 0 {
            let (w, walker_free) = self.walks.first_free();
            let mut start = t.max(walker_free).max(self.next_walk);
            if blocks > 0 {
                start = start.max(self.next_block);
                self.next_block = start + blocks.min(walk);
            }
            if walk_miss > 0 {
                let (b, buffer_free) = self.misses.first_free();
                start = start.max(buffer_free);
                self.misses.busy_until[b] = start + walk_miss;
            }
            self.walks.busy_until[w] = start + walk;
            self.next_walk = start + self.walk_interval;
            waited += start - t;
            if self.additive {
                let share = walk / self.walks.busy_until.len() as u64;
                waited += share.max(self.walk_interval).min(walk);
            }
            t = start + walk;
        }
        let done = if l1_miss {
            let start = self.misses.take(t, data);
            waited += start - t;
            start + data
        } else {
            t + data
        };
        self.clock += waited;
        self.advance(done)
    }

    /// A reference that depends on everything before it and costs `ticks` in full;
    /// returns how much it moved the run's completion on.
    #[inline]
    pub fn dependent(&mut self, ticks: u64) -> u64 {
        let done = self.frontier + ticks;
        self.clock = done;
        self.advance(done)
    }

    #[inline]
    fn advance(&mut self, done: u64) -> u64 {
        let before = self.frontier;
        self.frontier = before.max(done);
        self.frontier - before
    }

    /// When the last reference completes: the run's time.
    pub fn elapsed(&self) -> u64 {
        self.frontier
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock(miss_buffers: u32, walkers: u32) -> Overlap {
        Overlap::new(&OverlapSpec {
            miss_buffers,
            walkers,
            walk_interval: 0,
            walks: WalkClock::Pooled,
        })
    }

    #[test]
    fn hits_hide_behind_the_instructions() {
        // Two instructions of 1 cycle and a load that hits in 4: the load overlaps them.
        // Each pair of instructions moves the load's completion on by 2.
        let mut o = clock(4, 2);
        let moved: u64 = (0..10)
            .map(|_| o.issue(1) + o.independent(0, (0, 0, 0), 4, false) + o.issue(1))
            .sum();
        assert_eq!((moved, o.elapsed()), (20 + 3, 20 + 3));
    }

    #[test]
    fn misses_overlap_up_to_the_miss_buffers() {
        // 8 misses of 100 cycles, 4 buffers, 4 cycles of instructions each: the first
        // four start at 4, 8, 12, 16 and complete at 104..116; the fifth (at 20) waits for
        // the first buffer (104), completes at 204, and holds the clock up by 84; the
        // eighth waits for the fourth (116 + 84 + ...): 216.
        let mut o = clock(4, 2);
        let moved: u64 = (0..8)
            .map(|_| o.issue(4) + o.independent(0, (0, 0, 0), 100, true))
            .sum();
        assert_eq!(o.elapsed(), 216);
        assert_eq!(moved, 216);
        assert_eq!(o.clock, 32 + 84);
        // One buffer: they go one after the other, 4 + 8 x 100.
        let mut serial = clock(1, 1);
        for _ in 0..8 {
            serial.issue(4);
            serial.independent(0, (0, 0, 0), 100, true);
        }
        assert_eq!(serial.elapsed(), 804);
    }

    #[test]
    fn walks_wait_for_a_walker_and_data_follows_its_walk() {
        // Each reference: 4 cycles of instructions, TLB 7, walk 50, data 20 from the L2.
        // One walker: the walks go one after the other (the first from 11, the n-th ends
        // at 11 + 50n), each data access 20 after.
        let mut o = clock(24, 1);
        for _ in 0..3 {
            o.issue(4);
            o.independent(7, (50, 0, 0), 20, true);
        }
        assert_eq!(o.elapsed(), 11 + 150 + 20);
        // Two walkers: walks 1 and 2 overlap (from 11 and 15), the third (wanting a
        // walker at 19) waits for the first (free at 61): ends at 111, its data at 131.
        let mut o = clock(24, 2);
        for _ in 0..3 {
            o.issue(4);
            o.independent(7, (50, 0, 0), 20, true);
        }
        assert_eq!(o.elapsed(), 131);
    }

    #[test]
    fn walks_start_no_closer_than_the_interval() {
        // The interval is given in cycles and the clock counts ticks: everything here is
        // in cycles, times TICKS.
        let t = TICKS;
        let run = |walk_interval: u32, walk: u64, n: u64| {
            let mut o = Overlap::new(&OverlapSpec {
                miss_buffers: 16,
                walkers: 8,
                walk_interval,
                walks: WalkClock::Pooled,
            });
            for _ in 0..n {
                o.issue(t);
                o.independent(7 * t, (walk * t, 0, 0), 14 * t, true);
            }
            o.elapsed() / t
        };
        // Short walks (TLB 7, walk 6, data 14 from the L2) with 8 walkers, 1 cycle of
        // instructions each: the walkers alone keep up, one reference a cycle.
        assert_eq!(run(0, 6, 100), 100 + 7 + 6 + 14);
        // An interval of 7: the n-th walk starts at 8 + 7n, the last (n = 99) at 701.
        assert_eq!(run(7, 6, 100), 8 + 7 * 99 + 6 + 14);
        // Long walks (200 cycles) are held by the walkers, not by an interval of 7: ten
        // rounds of 8 walks, a round 200 cycles after the last, its walks 7 apart.
        assert_eq!(run(7, 200, 80), 8 + 200 * 10 + 7 * 7 + 14);
    }

    /// 100 references of 5 cycles of instructions each, each walking `walk` cycles (its
    /// host block translations holding theirs for `blocks`), its data 14 from the L2, with 16
    /// buffers and 8 walkers: the run's cycles.
    fn looped(walks: WalkClock, walk_interval: u32, walk: u64, blocks: u64) -> u64 {
        let t = TICKS;
        let mut o = Overlap::new(&OverlapSpec {
            miss_buffers: 16,
            walkers: 8,
            walk_interval,
            walks,
        });
        for _ in 0..100 {
            o.issue(5 * t);
            o.independent(0, (walk * t, 0, blocks * t), 14 * t, true);
        }
        o.elapsed() / t
    }

    #[test]
    fn an_additive_clock_adds_each_walks_share_to_the_loop() {
        let run = |walks, walk_interval, walk| looped(walks, walk_interval, walk, 0);
        // A loop of 5 cycles a reference, each walking 64 cycles, 8 walkers: a pool runs
        // rounds of 8 walks 5 cycles apart, a round 64 cycles after the last, 8 cycles a
        // reference: the 100th walk (the 4th of the 13th round) starts at 20 + 12 x 64.
        assert_eq!(run(WalkClock::Pooled, 0, 64), 20 + 12 * 64 + 64 + 14);
        // Additive: each walk adds its 64 / 8 to the loop's 5, 13 a reference.
        assert_eq!(run(WalkClock::Additive, 0, 64), 5 + 13 * 99 + 64 + 14);
        // A share under the interval is the interval (walks of 16 add 2 a walk, the
        // interval 6); a share is never more than the walk's own cycles.
        assert_eq!(run(WalkClock::Additive, 0, 16), 5 + 7 * 99 + 16 + 14);
        assert_eq!(run(WalkClock::Additive, 6, 16), 5 + 11 * 99 + 16 + 14);
        assert_eq!(run(WalkClock::Additive, 6, 3), 5 + 8 * 99 + 3 + 14);
        // Without walks the two clocks agree.
        assert_eq!(run(WalkClock::Additive, 6, 0), run(WalkClock::Pooled, 6, 0));
    }

    #[test]
    fn the_block_translations_bind_only_a_loop_faster_than_them() {
        // Additive, walks of 64: the loop takes 5 + 8 a reference. Block translations of
        // 20 a walk are slower: the walks start 20 apart, the last at 5 + 20 x 99.
        assert_eq!(
            looped(WalkClock::Additive, 0, 64, 20),
            5 + 20 * 99 + 64 + 14
        );
        // Of 10 a walk they are faster than the loop, and add nothing.
        assert_eq!(
            looped(WalkClock::Additive, 0, 64, 10),
            looped(WalkClock::Additive, 0, 64, 0)
        );
        // Pooled, the walkers keep up with 8 cycles a reference; 20 binds alike.
        assert_eq!(looped(WalkClock::Pooled, 0, 64, 20), 5 + 20 * 99 + 64 + 14);
        // No walk holds them longer than itself.
        assert_eq!(looped(WalkClock::Pooled, 0, 64, 100), 5 + 64 * 99 + 64 + 14);
    }

    #[test]
    fn a_walks_misses_hold_a_miss_buffer() {
        // Memory misses of 300 with 2 buffers and 8 walkers, 4 cycles of instructions
        // each: without walks two complete every 300 cycles.
        let run = |walk: (u64, u64)| {
            let mut o = clock(2, 8);
            for _ in 0..10 {
                o.issue(4);
                o.independent(0, (walk.0, walk.1, 0), 300, true);
            }
            o.elapsed()
        };
        let base = run((0, 0));
        // Two at a time: five rounds of 300, and the instructions between (4 a reference,
        // and each round's pair starts once a buffer frees).
        assert!((5 * 300..5 * 300 + 10 * 4).contains(&base), "{base}");
        // A walk of 60 that hit the L1D throughout takes no buffer: the 8 walkers hide
        // every walk but the first.
        assert_eq!(run((60, 0)), base + 60);
        // A walk of 60 of which 50 missed the L1D holds a buffer for those 50: each of
        // the two buffers serves five walks' 50 besides its five misses' 300.
        let missing = run((60, 50));
        assert!(missing >= base + 5 * 50, "{missing} against {base}");
        assert_eq!(missing, 1854);
    }

    #[test]
    fn a_dependent_reference_waits_for_everything_before_it() {
        let mut o = clock(8, 2);
        o.independent(0, (0, 0, 0), 300, true);
        o.issue(4);
        o.independent(0, (0, 0, 0), 300, true);
        // The two complete at 300 and 304; the dependent one starts at 304.
        assert_eq!(o.dependent(300), 300);
        assert_eq!(o.elapsed(), 304 + 300);
        // Only dependent references: the in-order sum.
        let mut chase = clock(8, 2);
        let sum: u64 = [330, 4, 50, 14].iter().map(|&c| chase.dependent(c)).sum();
        assert_eq!((sum, chase.elapsed()), (398, 398));
    }
}
