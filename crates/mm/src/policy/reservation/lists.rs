//! The reservation lists (Navarro et al. 4.3; GISP 3.4): one list per size of
//! the largest free extent a reservation would give back if preempted, each
//! ordered by the time of the reservation's most recent frame allocation, so
//! that the victim for an allocation of some size is the least recently
//! allocated reservation able to yield a free block of that size.

use std::collections::{BTreeMap, BTreeSet};

/// Reservations by (largest free extent, last allocation time).
#[derive(Clone, Debug, Default)]
pub(crate) struct Lists {
    /// Level (log2 of base frames) of the largest free extent, to the list
    /// of `(last allocation time, reservation id)`, oldest first.
    lists: BTreeMap<u8, BTreeSet<(u64, u64)>>,
}

impl Lists {
    /// Files reservation `id` under `level`, last allocated at `time`.
    pub(crate) fn insert(&mut self, level: u8, time: u64, id: u64) {
        self.lists.entry(level).or_default().insert((time, id));
    }

    /// Removes what [`Lists::insert`] filed.
    pub(crate) fn remove(&mut self, level: u8, time: u64, id: u64) -> bool {
        let Some(l) = self.lists.get_mut(&level) else {
            return false;
        };
        let found = l.remove(&(time, id));
        if l.is_empty() {
            self.lists.remove(&level);
        }
        found
    }

    /// The least recently allocated reservation whose largest free extent is
    /// at least `level`.
    pub(crate) fn victim(&self, level: u8) -> Option<u64> {
        self.lists
            .range(level..)
            .filter_map(|(_, l)| l.first())
            .min()
            .map(|&(_, id)| id)
    }

    /// Every entry, as `(level, time, id)`.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u8, u64, u64)> + '_ {
        self.lists
            .iter()
            .flat_map(|(&k, l)| l.iter().map(move |&(t, id)| (k, t, id)))
    }

    /// Entries per level, for the counters.
    pub(crate) fn lengths(&self) -> impl Iterator<Item = (u8, usize)> + '_ {
        self.lists.iter().map(|(&k, l)| (k, l.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::Lists;

    #[test]
    fn victim_is_the_oldest_able_to_yield_the_size() {
        let mut l = Lists::default();
        l.insert(8, 10, 1); // 1M free, allocated at 10
        l.insert(3, 5, 2); // 32K free, allocated at 5
        l.insert(9, 20, 3); // 2M free, allocated at 20
        assert_eq!(l.victim(0), Some(2));
        assert_eq!(l.victim(4), Some(1));
        assert_eq!(l.victim(9), Some(3));
        assert_eq!(l.victim(10), None);
        assert!(l.remove(8, 10, 1));
        assert!(!l.remove(8, 10, 1));
        assert_eq!(l.victim(4), Some(3));
        assert_eq!(l.iter().count(), 2);
    }
}
