//! The `[nested]` section of a machine file: what a guest under a hypervisor adds.

use super::{is_zero, FramePlacement, MAX_WALK_CYCLES};
use pagelab_core::PageSize;
use serde::{Deserialize, Serialize};

/// The `[nested]` section: what a guest under a hypervisor adds (used with
/// `--virt nested:host=SIZE`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NestedSpec {
    /// Entries of the nested TLB, which caches guest-physical to
    /// host-physical translations of host pages (fully associative, LRU).
    #[serde(default)]
    pub ntlb_entries: u32,
    /// The host page table's walk caches, as `[walk_caches]` gives the guest's.
    #[serde(default)]
    pub walk_cache_entries: Vec<u32>,
    /// The host's page as this guest's TLB caches it (4K, 2M or 1G), where it is known:
    /// `pagelab machines --measure` writes what its probe found. `--virt nested` without
    /// `host=` models it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_page: Option<PageSize>,
    /// Where the host's frames lie (default: `scattered`): the host backs guest-physical
    /// memory with frames of its page size, each given when the guest first touched it,
    /// which on a host up for a while is anywhere (`scattered`: 4K frames drawn over as
    /// much memory as the guest's `phys.memory`, 2M and 1G ones whole blocks); or one after
    /// the other in the order this run's walks first need them (`first-touch`, the only
    /// placement before session 51, which lays a guest page's host frames out in the
    /// order the run reads it, not by guest-physical address).
    #[serde(default = "FramePlacement::scattered")]
    pub host_frames: FramePlacement,
    /// The host's translations of 2M blocks of guest-physical memory that this guest's
    /// walks find ready, held apart in an LRU set of this many blocks; 0, the default: held
    /// in the guest's TLB beside its own entries, where `block_miss` is given (as `pagelab
    /// machines --measure` found them on the Zen 4 guest, session 40), else none modelled
    /// ([`crate::blocks`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub block_entries: u32,
    /// Cycles a walk waits for each guest-physical address it has the host translate
    /// whose block's translation is not held. Not given (the default): no blocks modelled.
    /// 0: held in the guest's TLB, where they take entries from its pages, at no cycles of
    /// their own (session 54; `pagelab machines --measure` writes it where it probed the
    /// blocks and found no time of their own, or the stride left no room for any: docs/cost.md,
    /// session 55).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_miss: Option<u32>,
    /// Cycles each such miss holds the host's block translations, one at a time, where
    /// references do not depend on one another (at most `block_miss`; 0, the default: as
    /// many at once as walks).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub block_interval: u32,
}

impl Default for NestedSpec {
    /// What a `[nested]` section that gives nothing has: no nested TLB, walk caches or
    /// block translations, the host's page unknown and its frames scattered.
    fn default() -> Self {
        NestedSpec {
            ntlb_entries: 0,
            walk_cache_entries: Vec::new(),
            host_page: None,
            host_frames: FramePlacement::scattered(),
            block_entries: 0,
            block_miss: None,
            block_interval: 0,
        }
    }
}

impl NestedSpec {
    /// `block_entries`, `block_miss` and `block_interval` together: a miss's cycles given
    /// whenever either of the others is (0 only for blocks in the TLB), each within bounds,
    /// and the interval no longer than the miss.
    pub(super) fn check_blocks(&self) -> Result<(), (&'static str, String)> {
        let (entries, interval) = (self.block_entries, self.block_interval);
        let most = crate::blocks::MAX_BLOCK_ENTRIES;
        if entries > most {
            return Err((
                "block_entries",
                format!("{entries}: allowed 0 (held in the TLB) to {most}"),
            ));
        }
        let Some(miss) = self.block_miss else {
            if (entries, interval) != (0, 0) {
                return Err((
                    "block_miss",
                    format!("missing with block_entries or block_interval given: give the cycles a walk waits for a block not held (0 to {MAX_WALK_CYCLES}; 0 with the blocks in the TLB only), or drop them"),
                ));
            }
            return Ok(());
        };
        if miss == 0 && entries != 0 {
            return Err((
                "block_miss",
                format!("0 with block_entries = {entries}: blocks held apart cost only their misses' cycles (1 to {MAX_WALK_CYCLES}); 0 holds them in the TLB, without block_entries"),
            ));
        }
        if miss > MAX_WALK_CYCLES {
            return Err((
                "block_miss",
                format!("{miss} cycles: allowed 0 to {MAX_WALK_CYCLES}"),
            ));
        }
        if interval > miss {
            return Err((
                "block_interval",
                format!("{interval} cycles: allowed 0 to block_miss ({miss}): a miss holds the translations no longer than it takes"),
            ));
        }
        Ok(())
    }
}
