//! The host's page size as a guest sees it: the size of the translations its TLB caches.
//!
//! Under nested paging the hardware caches a guest-virtual to host-physical translation at
//! the smaller of the guest's and the host's page (a guest 2M page over 4K host pages is
//! splintered into 4K entries). From inside a guest the host's page size cannot be read, but
//! it shows in time: the same lines (16384 where the L2 is 2M, 8192 where it is 1M:
//! [`super::overlap::walk_pages`]), on 2M-advised pages, once spread one per 4K page (64M or
//! 32M) and once packed (1M or 512K), each load on the last.
//!
//! - Over 2M host pages the spread lines need 32 or 16 2M entries and the packed one, which
//!   any L1 TLB holds; the lines stay in the L2 either way ([`Lines::offset`]): the two take
//!   the same time.
//! - Over 4K host pages the spread lines need a 4K entry each, several times the largest L2
//!   TLB, so nearly every load walks; the packed need 256 or 128, which the L2 TLB holds: the
//!   spread lines take a walk longer.
//!
//! The same two layouts with independent loads give the time a splintered walk adds when
//! walks overlap, and so how many are under way at once.

use super::overlap::Lines;
use super::Rounds;
use crate::native::Advice;
use anyhow::Result;
use pagelab_core::PageSize;

/// What [`host_page`] measured, ns per load.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HostPageProbe {
    /// One line in each of [`super::overlap::walk_pages`] 4K slots, on 2M-advised pages: dependent,
    /// independent.
    pub spread: (f64, f64),
    /// The same number of lines packed (64 bytes apart), on a 2M-advised page: dependent,
    /// independent.
    pub packed: (f64, f64),
    /// Whether both got 2M pages from the guest's kernel (else nothing can be told).
    pub huge_ok: bool,
}

/// A translation shows when the spread lines take this share longer than the packed ones
/// and at least [`MIN_NS`] more: a walk, even one whose reads all hit the L1, is tens of
/// cycles, where the two layouts' data costs the same.
const MIN_SHARE: f64 = 0.25;
/// See [`MIN_SHARE`].
const MIN_NS: f64 = 2.0;

impl HostPageProbe {
    /// What a translation adds to a dependent load of the spread lines (spread less packed).
    pub fn translation_ns(&self) -> f64 {
        self.spread.0 - self.packed.0
    }

    /// The host's page as the TLB caches it: 4K when the spread lines pay a translation the
    /// packed ones do not ([`MIN_SHARE`], [`MIN_NS`]), else 2M; `None` when the guest's
    /// kernel gave the lines 4K pages, so that both layouts' translations are the guest's.
    pub fn host_page(&self) -> Option<PageSize> {
        if !self.huge_ok {
            return None;
        }
        let extra = self.translation_ns();
        Some(if extra > MIN_NS && extra > MIN_SHARE * self.packed.0 {
            PageSize::K4
        } else {
            PageSize::M2
        })
    }

    /// Splintered walks under way at once: what a translation adds to a dependent load over
    /// what it adds to an independent one; `None` where either is not positive or no
    /// translation showed.
    pub fn walks_in_flight(&self) -> Option<f64> {
        let added = self.spread.1 - self.packed.1;
        (self.host_page() == Some(PageSize::K4) && added > 0.0)
            .then(|| self.translation_ns() / added)
    }
}

/// The two layouts of `pages` lines ([`HostPageProbe::spread`], [`HostPageProbe::packed`]).
fn layouts(pages: u64) -> [Lines; 2] {
    [4096, 64].map(|spacing| Lines {
        count: pages,
        spacing,
        visit: pagelab_workloads::Visit::Random,
    })
}

/// Adds the two layouts' runs to `rounds`, `steps` loads a run; returns where they start,
/// for [`of`].
pub(crate) fn add(rounds: &mut Rounds<'_>, pages: u64, steps: u64) -> usize {
    let [spread, packed] = layouts(pages);
    let at = super::overlap::add_pair(rounds, spread, (Advice::HugePage, None), steps, None);
    super::overlap::add_pair(rounds, packed, (Advice::HugePage, None), steps, None);
    at
}

/// What the runs [`add`] added at `at` measured.
pub(crate) fn of(times: &[(f64, f64)], at: usize, pages: u64) -> HostPageProbe {
    let [spread, packed] = layouts(pages);
    let (spread_t, spread_huge) = super::overlap::pair_of(times, at, spread);
    let (packed_t, packed_huge) = super::overlap::pair_of(times, at + 2, packed);
    HostPageProbe {
        spread: spread_t,
        packed: packed_t,
        huge_ok: spread_huge && packed_huge,
    }
}

/// Measures the two layouts of `pages` lines, `steps` loads a run, `repeat` runs of each,
/// taken in [`Rounds`].
///
/// # Errors
/// A region that cannot be mapped.
pub fn host_page(pages: u64, steps: u64, repeat: u32) -> Result<HostPageProbe> {
    let mut rounds = Rounds::default();
    let at = add(&mut rounds, pages, steps);
    let times = rounds.run(repeat, &mut |_, _| {})?;
    Ok(of(&times, at, pages))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(spread: f64, packed: f64) -> HostPageProbe {
        HostPageProbe {
            spread: (spread, 4.0),
            packed: (packed, 1.0),
            huge_ok: true,
        }
    }

    #[test]
    fn a_translation_the_packed_lines_do_not_pay_means_4k_host_pages() {
        // This guest's figures (session 31's probe in C): 19-21 ns against 7-8.
        let p = probe(19.7, 7.5);
        assert_eq!(p.host_page(), Some(PageSize::K4));
        let w = p.walks_in_flight().unwrap();
        assert!((w - 12.2 / 3.0).abs() < 1e-9, "{w}");
        // Equal within noise, or a small difference: 2M.
        assert_eq!(probe(7.9, 7.5).host_page(), Some(PageSize::M2));
        assert_eq!(probe(9.4, 7.5).host_page(), Some(PageSize::M2), "1.9 ns");
        assert_eq!(probe(30.0, 28.0).host_page(), Some(PageSize::M2), "7%");
        assert_eq!(probe(7.9, 7.5).walks_in_flight(), None);
        // Without 2M pages in the guest, nothing is known.
        let mut p = probe(19.7, 7.5);
        p.huge_ok = false;
        assert_eq!((p.host_page(), p.walks_in_flight()), (None, None));
    }
}
