//! Reclaim: when free memory runs low, take pages back from per-zone
//! active/inactive LRU lists, as Linux's kswapd and direct reclaim do.
//!
//! - **Lists.** Every mapped anonymous page and every page-cache folio is
//!   one entry of its zone's lists ([`crate::phys::Lru`]); a superpage is one
//!   entry. New pages enter the inactive list. The model sets a page's
//!   referenced bit whenever it translates an address in it (and its dirty
//!   bit on a write), as the hardware sets a PTE's accessed and dirty bits
//!   ([`Residency::touch`]).
//! - **When.** An allocation that leaves its zone's free frames below the
//!   zone's low watermark wakes reclaim, which runs once the fault (or the
//!   policy's periodic work) is done, until the zone's free frames reach its
//!   high watermark (kswapd). An allocation that fails outright makes the
//!   fault reclaim every zone up to high and retry (direct reclaim).
//!   Watermarks are Linux's by default ([`crate::phys::watermarks`]).
//! - **Order.** A policy that holds frames without mapping them (the
//!   reservation policy) is asked first to give them back, its least
//!   recently allocated reservation first ([`crate::policy::Policy::shrink`]);
//!   then the unread pages of partly read page-cache folios (page-cache
//!   reservations) are freed, their read pages kept as base folios. Then pages are aged with second chance: the inactive list is kept at
//!   least as large as the active list by moving the active list's coldest
//!   pages to it (a referenced one goes back to the active head instead, its
//!   bit cleared); the inactive list's coldest page is reclaimed unless
//!   referenced, in which case it is activated, its bit cleared.
//! - **What.** An anonymous page is swapped out: unmapped from every process
//!   that maps it (found from its address: fork keeps addresses), its
//!   frames given back through the policy, its range recorded in [`Swap`]; a
//!   later fault there is a major fault. A page-cache folio is dropped:
//!   unmapped from every process that maps it (found through the VMAs of its
//!   file: the object-based reverse map), written back first if dirty.
//! - **Superpages.** With `reclaim_superpages = "whole"` a superpage is
//!   reclaimed whole; with `"split"` it is split into base pages first (its
//!   mappings demoted, its frames and LRU entry split, a folio's unread pages
//!   freed), and only as many base pages as needed are then reclaimed.
//! - **TLB.** Every range unmapped in the running process is reported for
//!   invalidation (`Mm::take_invalidations`).
//!
//! Not modelled: the min watermark as a floor (allocations succeed while
//! frames remain), swap space limits, the swap cache, readahead of swap,
//! and workingset refault detection.

mod check;
mod scan;
mod swap;
mod track;

pub use check::check;
pub(crate) use scan::Reclaimer;
pub use swap::Swap;
pub use track::{Owner, Residency};
