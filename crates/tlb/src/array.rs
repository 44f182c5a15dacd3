//! The `Tlb` seam and the closed set of array implementations.

use crate::{FullyAssoc, SetAssoc, SmallFullyAssoc};
use pagelab_core::{PageSize, Vpn};

/// A packed entry key: `vpn << 5 | size.index()`.
///
/// Page numbers of every size share one key space; the size lives in the low
/// five bits, so a 4K page and a 2M page with the same number never collide.
pub(crate) type Key = u64;

/// The key no valid entry ever has (its size bits would mean a 2^43-byte page).
pub(crate) const EMPTY: Key = u64::MAX;

#[inline]
pub(crate) fn key(vpn: Vpn, size: PageSize) -> Key {
    debug_assert!(vpn.0 < 1 << 59, "page number {:#x} too large to key", vpn.0);
    (vpn.0 << 5) | size.index() as u64
}

#[inline]
pub(crate) fn unkey(k: Key) -> (Vpn, PageSize) {
    let size = PageSize::from_index((k & 31) as usize).expect("valid key");
    (Vpn(k >> 5), size)
}

/// Moves `k` to the front of `set` (kept most recent first, empty slots
/// [`EMPTY`] at the end), shifting every entry before it back by one. Returns
/// `None` when `k` was there (a hit), else the last entry, which fell off the
/// end ([`EMPTY`] if the set had room).
///
/// What reaches a TLB model after the engine's repeat filters nearly always
/// hits one of the few most recent entries, at a rank that varies from one
/// access to the next. So the first [`FRONT`] ranks are compared at once and
/// shifted with selects, not branches that would mispredict; deeper hits and
/// misses continue with one pass that compares and shifts as it goes (no call
/// to `memmove`).
#[inline(always)]
pub(crate) fn move_to_front(set: &mut [Key], k: Key) -> Option<Key> {
    let (head, tail) = match set.split_first_chunk_mut::<FRONT>() {
        Some(split) => split,
        None => return move_to_front_by_walk(set, k, k),
    };
    let old = *head;
    let hits = old
        .iter()
        .enumerate()
        .fold(0u32, |m, (i, &e)| m | u32::from(e == k) << i);
    if hits != 0 {
        // Keys are unique, so exactly one bit is set: rank `p`.
        let p = hits.trailing_zeros() as usize;
        for i in (1..FRONT).rev() {
            // A blend by mask, which compiles to no branch (p is unpredictable).
            let take_prev = 0u64.wrapping_sub(u64::from(i <= p));
            head[i] = (old[i - 1] & take_prev) | (old[i] & !take_prev);
        }
        head[0] = k;
        return None;
    }
    head[0] = k;
    head[1..].copy_from_slice(&old[..FRONT - 1]);
    move_to_front_by_walk(tail, k, old[FRONT - 1])
}

/// Ranks compared at once by [`move_to_front`].
const FRONT: usize = 4;

/// Writes `carry` at the front of `set`, shifting entries back until `k` is
/// overwritten (returns `None`) or the last entry falls off (returns it).
#[inline(always)]
pub(crate) fn move_to_front_by_walk(set: &mut [Key], k: Key, mut carry: Key) -> Option<Key> {
    for slot in set.iter_mut() {
        let cur = std::mem::replace(slot, carry);
        if cur == k {
            return None;
        }
        carry = cur;
    }
    Some(carry)
}

/// One TLB array: a fixed number of entries, each caching the translation of one
/// page identified by its page number and its size.
///
/// Contract: replacement is exact LRU within the array (fully associative) or
/// within a set (set associative; the set of a page is its page number modulo
/// the number of sets), unless a set-associative array is built with
/// [`crate::config::Replacement::Random`]: a miss in a full set then replaces the
/// entry at the recency position its fixed pseudo-random sequence picks. [`Tlb::access`] is [`Tlb::lookup`] followed, on a miss,
/// by [`Tlb::insert`]: a hit makes the entry the most recent; a miss inserts the
/// page as the most recent, evicting the least recent entry of its set if the
/// set is full. Entries of different sizes coexist and never match each other:
/// `(5, 4K)` and `(5, 2M)` are different pages. Cold misses are misses.
/// [`Tlb::contains`] never changes the recency order. An array never counts
/// anything; counters belong to the hierarchy.
pub trait Tlb {
    /// Looks the page up; on a hit makes it most recent. Returns whether it hit.
    fn lookup(&mut self, vpn: Vpn, size: PageSize) -> bool;
    /// Inserts the page as most recent (touching it if already present) and
    /// returns the entry evicted to make room, if any.
    fn insert(&mut self, vpn: Vpn, size: PageSize) -> Option<(Vpn, PageSize)>;
    /// Lookup, then insert on a miss. Returns whether it hit.
    fn access(&mut self, vpn: Vpn, size: PageSize) -> bool;
    /// Whether the page is cached, without touching the recency order.
    fn contains(&self, vpn: Vpn, size: PageSize) -> bool;
    /// Removes the page if cached; returns whether it was.
    fn invalidate(&mut self, vpn: Vpn, size: PageSize) -> bool;
    /// Removes every entry for which `remove(vpn, size)` is true; returns how many.
    fn invalidate_where(&mut self, remove: impl FnMut(Vpn, PageSize) -> bool) -> usize;
    /// Empties the array.
    fn flush(&mut self);
    /// Number of valid entries.
    fn len(&self) -> usize;
    /// Whether no entry is valid.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Number of entries the array can hold.
    fn capacity(&self) -> usize;
    /// Every cached page, sorted by size then page number (for tests and debugging).
    fn resident(&self) -> Vec<(Vpn, PageSize)>;
}

/// A TLB array of either organisation, chosen by configuration.
///
/// A closed enum rather than `dyn Tlb` so the hot path is a predictable match.
// The small array is stored inline on purpose: a level holds one to three
// arrays, and a box would put a pointer chase in front of every lookup.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum TlbArray {
    /// Fully associative LRU, up to [`SmallFullyAssoc::MAX_ENTRIES`] entries: keys in recency order.
    SmallFullyAssoc(SmallFullyAssoc),
    /// Fully associative LRU, any size: hash table and recency list.
    FullyAssoc(FullyAssoc),
    /// Set associative, LRU within each set.
    SetAssoc(SetAssoc),
}

impl TlbArray {
    /// A fully associative array when `ways` is `None` or equals `entries`
    /// ([`SmallFullyAssoc`] up to its maximum size, else [`FullyAssoc`]),
    /// else a set-associative one. Panics on a geometry [`SetAssoc::new`] refuses;
    /// configurations are validated before they get here.
    pub fn new(entries: usize, ways: Option<usize>) -> TlbArray {
        match ways {
            Some(w) if w != entries => TlbArray::SetAssoc(SetAssoc::new(entries, w)),
            _ if entries <= SmallFullyAssoc::MAX_ENTRIES => {
                TlbArray::SmallFullyAssoc(SmallFullyAssoc::new(entries))
            }
            _ => TlbArray::FullyAssoc(FullyAssoc::new(entries)),
        }
    }

    /// The same array with its sets picked by `index` (a fully associative array has
    /// no sets; configurations refuse an index for one).
    pub fn with_index(self, index: crate::config::SetIndex) -> TlbArray {
        match self {
            TlbArray::SetAssoc(a) => TlbArray::SetAssoc(a.with_index(index)),
            other => other,
        }
    }

    /// The same array replacing as `replacement` says (a fully associative array is LRU;
    /// configurations refuse anything else for one).
    pub fn with_replacement(self, replacement: crate::config::Replacement) -> TlbArray {
        match self {
            TlbArray::SetAssoc(a) => TlbArray::SetAssoc(a.with_replacement(replacement)),
            other => other,
        }
    }

    /// The hot path: the small arrays' short loops are inlined into the
    /// hierarchy; the hash table's longer code stays out of line.
    #[inline(always)]
    pub(crate) fn access_key(&mut self, k: Key) -> bool {
        match self {
            TlbArray::SmallFullyAssoc(a) => a.access_key(k),
            TlbArray::FullyAssoc(a) => a.access_key_outlined(k),
            TlbArray::SetAssoc(a) => a.access_key(k),
        }
    }
}

macro_rules! delegate {
    ($self:ident, $a:ident => $e:expr) => {
        match $self {
            TlbArray::SmallFullyAssoc($a) => $e,
            TlbArray::FullyAssoc($a) => $e,
            TlbArray::SetAssoc($a) => $e,
        }
    };
}

impl Tlb for TlbArray {
    #[inline]
    fn lookup(&mut self, vpn: Vpn, size: PageSize) -> bool {
        delegate!(self, a => a.lookup(vpn, size))
    }
    fn insert(&mut self, vpn: Vpn, size: PageSize) -> Option<(Vpn, PageSize)> {
        delegate!(self, a => a.insert(vpn, size))
    }
    #[inline]
    fn access(&mut self, vpn: Vpn, size: PageSize) -> bool {
        delegate!(self, a => a.access(vpn, size))
    }
    fn contains(&self, vpn: Vpn, size: PageSize) -> bool {
        delegate!(self, a => a.contains(vpn, size))
    }
    fn invalidate(&mut self, vpn: Vpn, size: PageSize) -> bool {
        delegate!(self, a => a.invalidate(vpn, size))
    }
    fn invalidate_where(&mut self, remove: impl FnMut(Vpn, PageSize) -> bool) -> usize {
        delegate!(self, a => a.invalidate_where(remove))
    }
    fn flush(&mut self) {
        delegate!(self, a => a.flush())
    }
    fn len(&self) -> usize {
        delegate!(self, a => a.len())
    }
    fn capacity(&self) -> usize {
        delegate!(self, a => a.capacity())
    }
    fn resident(&self) -> Vec<(Vpn, PageSize)> {
        delegate!(self, a => a.resident())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_differ_by_size() {
        for s in PageSize::all() {
            assert_eq!(unkey(key(Vpn(12345), s)), (Vpn(12345), s));
            assert_ne!(key(Vpn(7), s), EMPTY);
        }
        assert_ne!(key(Vpn(5), PageSize::K4), key(Vpn(5), PageSize::M2));
    }
}
