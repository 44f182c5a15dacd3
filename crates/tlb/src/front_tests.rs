//! Tests of `front` (a file of their own, to keep `front.rs` short).

use super::*;
use crate::{preset, Side, TlbConfig, TlbStats};
use proptest::prelude::*;

/// A test reference: whether it is data, its address, and how many of
/// the hierarchies (the first) look it up.
pub(crate) type Ref = (bool, VirtAddr, usize);

/// The sizes the tests' hierarchies step, one each.
pub(crate) fn sizes() -> Vec<PageSize> {
    ["4K", "16K", "64K", "2M"]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect()
}

/// Steps fresh hierarchies of `cfg`, one per size of [`sizes`], through
/// `refs`: each on its own when `chunk` is 0; else `chunk` references
/// at a time through what `take` made of them, `lookup` (given the
/// chunk's number) returning the lookups that missed an L1 with their
/// outcomes (the reference's number, the lane, the outcome), and
/// `put_back` now and then (which changes nothing) and at the end.
/// Returns every hierarchy's counters and every outcome.
pub(crate) fn drive<H>(
    cfg: &TlbConfig,
    refs: &[Ref],
    chunk: usize,
    take: impl FnOnce(&mut [TlbHierarchy], &[PageSize]) -> H,
    mut lookup: impl FnMut(&mut H, &mut [TlbHierarchy], usize, &[Ref]) -> Vec<(usize, usize, Outcome)>,
    put_back: impl Fn(&mut H, &mut [TlbHierarchy]),
) -> (Vec<TlbStats>, Vec<Vec<Outcome>>) {
    let sizes = sizes();
    let mut tlbs: Vec<TlbHierarchy> = sizes
        .iter()
        .map(|_| TlbHierarchy::new(cfg).unwrap())
        .collect();
    let mut outcomes = vec![Vec::new(); sizes.len()];
    if chunk == 0 {
        for &(data, addr, reach) in refs {
            let side = if data { Side::Data } else { Side::Instr };
            for (lane, tlb) in tlbs.iter_mut().enumerate().take(reach) {
                outcomes[lane].push(tlb.access_addr(side, addr, sizes[lane]));
            }
        }
        return (tlbs.iter().map(TlbHierarchy::stats).collect(), outcomes);
    }
    let mut held = take(&mut tlbs, &sizes);
    for (c, part) in refs.chunks(chunk).enumerate() {
        let mut out: Vec<Vec<Outcome>> = part
            .iter()
            .map(|&(_, _, reach)| vec![Outcome::L1Hit; reach])
            .collect();
        for (i, lane, o) in lookup(&mut held, &mut tlbs, c, part) {
            out[i][lane] = o;
        }
        for per_ref in out {
            for (lane, o) in per_ref.into_iter().enumerate() {
                outcomes[lane].push(o);
            }
        }
        if c % 3 == 1 {
            put_back(&mut held, &mut tlbs);
        }
    }
    put_back(&mut held, &mut tlbs);
    (tlbs.iter().map(TlbHierarchy::stats).collect(), outcomes)
}

/// Steps the first `reach` of the hierarchies through each of `refs`
/// (see [`drive`]): with fronts of `RANKS` entries, `chunk` references a
/// call (the portable and the AVX-512 calls taking turns), or each
/// hierarchy on its own when `chunk` is 0.
fn step<const RANKS: usize>(
    cfg: &TlbConfig,
    refs: &[Ref],
    chunk: usize,
) -> (Vec<TlbStats>, Vec<Vec<Outcome>>) {
    let take = |tlbs: &mut [TlbHierarchy], sizes: &[PageSize]| {
        Fronts::<RANKS>::take(tlbs.iter_mut().zip(sizes.iter().copied()))
            .expect("the configuration qualifies")
    };
    let lookup = |fronts: &mut Fronts<RANKS>, tlbs: &mut [TlbHierarchy], c: usize, part: &[Ref]| {
        let next = |i: usize| {
            let (data, addr, reach) = part[i];
            (usize::from(data), addr, reach)
        };
        // As the engine does: the L1 at once, the rest after the call.
        let mut l1_misses = Vec::new();
        // The three implementations take turns, where the CPU has them.
        let avx512 = pagelab_core::isa::Isa::Avx512.supported() && c.is_multiple_of(3);
        let avx2 = pagelab_core::isa::Isa::Avx2.supported() && c % 3 == 1;
        let missed = |i: usize, m: FrontMiss<RANKS>| {
            let (tlb, side) = (&mut tlbs[m.lane], usize::from(part[i].0));
            // SAFETY: `avx512` only where the CPU has AVX-512F (checked).
            if !unsafe { m.l1_in_tier(tlb, side, avx512) } {
                l1_misses.push((i, m.lane));
            }
        };
        #[cfg(target_arch = "x86_64")]
        if avx512 {
            // SAFETY: the CPU has AVX-512F (checked).
            unsafe { fronts.access_each_avx512(part.len(), next, missed) };
        } else if avx2 {
            // SAFETY: the CPU has AVX2 (checked).
            unsafe { fronts.access_each_avx2(part.len(), next, missed) };
        } else {
            fronts.access_each(part.len(), next, missed);
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = avx2;
            fronts.access_each(part.len(), next, missed);
        }
        l1_misses
            .into_iter()
            .map(|(i, lane)| {
                let (data, addr, _) = part[i];
                let o = fronts.after_l1_miss(&mut tlbs[lane], usize::from(data), lane, addr);
                (i, lane, o)
            })
            .collect()
    };
    let put_back =
        |fronts: &mut Fronts<RANKS>, tlbs: &mut [TlbHierarchy]| fronts.put_back(tlbs.iter_mut());
    drive(cfg, refs, chunk, take, lookup, put_back)
}

/// A front of `ranks` entries and nothing behind it (instructions), a
/// front and one entry (data), and an L2.
fn tiny(ranks: usize) -> TlbConfig {
    let text = format!(
        "name = \"t\"\n[l1i]\narrays = [{{ entries = {ranks} }}]\n[l1d]\narrays = [{{ entries = {} }}]\n[l2]\narrays = [{{ entries = 16 }}]\n",
        ranks + 1
    );
    TlbConfig::from_toml_str(&text, "test").unwrap()
}

proptest! {
    /// Lookups through the fronts (both implementations, taking turns),
    /// with either tier's number of ranks, give every outcome and every
    /// counter of the hierarchies' own lookups, with and without an L2.
    #[test]
    fn fronts_agree_with_own_lookups(
        refs in proptest::collection::vec((any::<bool>(), 0u64..300, 0u64..0x1000, 1usize..=4), 0..3000),
        tiny_arrays in any::<bool>(),
        chunk in 1usize..200,
    ) {
        // 4K pages spread so that the larger sizes share some of them.
        // Each reference looks up the first `reach` hierarchies only.
        let refs: Vec<_> = refs.iter().map(|&(d, p, o, r)| (d, VirtAddr(p * p * 0x3000 + o), r)).collect();
        let cfg = |ranks| if tiny_arrays { tiny(ranks) } else { preset("weisberg").unwrap() };
        let cfg4 = cfg(PORTABLE_RANKS);
        prop_assert_eq!(step::<PORTABLE_RANKS>(&cfg4, &refs, chunk), step::<PORTABLE_RANKS>(&cfg4, &refs, 0));
        let cfg8 = cfg(AVX512_RANKS);
        prop_assert_eq!(step::<AVX512_RANKS>(&cfg8, &refs, chunk), step::<AVX512_RANKS>(&cfg8, &refs, 0));
    }
}

#[test]
fn only_small_single_arrays_are_taken() {
    let mut tlb = TlbHierarchy::new(&preset("weisberg").unwrap()).unwrap();
    assert!(Fronts::<PORTABLE_RANKS>::take([(&mut tlb, PageSize::K4)]).is_some());
    assert!(Fronts::<AVX512_RANKS>::take([(&mut tlb, PageSize::K4)]).is_some());
    for name in ["pentium4", "skylake"] {
        let mut tlb = TlbHierarchy::new(&preset(name).unwrap()).unwrap();
        assert!(
            Fronts::<PORTABLE_RANKS>::take([(&mut tlb, PageSize::K4)]).is_none(),
            "{name}"
        );
    }
    // An L1 side smaller than the front.
    let mut small = TlbHierarchy::new(&tiny(7)).unwrap();
    assert!(Fronts::<PORTABLE_RANKS>::take([(&mut small, PageSize::K4)]).is_some());
    assert!(Fronts::<AVX512_RANKS>::take([(&mut small, PageSize::K4)]).is_none());
    let cfg = preset("weisberg").unwrap();
    let mut many: Vec<TlbHierarchy> = (0..9).map(|_| TlbHierarchy::new(&cfg).unwrap()).collect();
    assert!(Fronts::<PORTABLE_RANKS>::take(many.iter_mut().map(|t| (t, PageSize::K4))).is_none());
}
