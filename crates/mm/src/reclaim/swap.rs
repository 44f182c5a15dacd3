//! Swap space: the virtual ranges of each process whose anonymous pages
//! were swapped out. A later fault there is a major fault (the page is read
//! back); unmapping the range frees its swap entries.

use pagelab_core::VirtAddr;
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

/// Swapped-out ranges per process, disjoint, as `start -> end`.
#[derive(Clone, Debug, Default)]
pub struct Swap {
    ranges: FxHashMap<u32, BTreeMap<VirtAddr, VirtAddr>>,
    bytes: u64,
}

impl Swap {
    /// Bytes in swap now.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Whether `pid` has any swapped range.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Whether `addr` of `pid` lies in a swapped range.
    pub fn holds(&self, pid: u32, addr: VirtAddr) -> bool {
        self.ranges
            .get(&pid)
            .and_then(|m| m.range(..=addr).next_back())
            .is_some_and(|(_, &e)| addr < e)
    }

    /// Records `[start, end)` of `pid` as swapped out (it held no swap before).
    pub fn add(&mut self, pid: u32, start: VirtAddr, end: VirtAddr) {
        self.remove(pid, start, end);
        self.ranges.entry(pid).or_default().insert(start, end);
        self.bytes += end - start;
    }

    /// Forgets the swapped parts of `[start, end)` of `pid`; returns their bytes.
    pub fn remove(&mut self, pid: u32, start: VirtAddr, end: VirtAddr) -> u64 {
        let Some(m) = self.ranges.get_mut(&pid) else {
            return 0;
        };
        let first = m
            .range(..start)
            .next_back()
            .filter(|(_, &e)| e > start)
            .map(|(&s, _)| s)
            .unwrap_or(start);
        let hit: Vec<(VirtAddr, VirtAddr)> = m.range(first..end).map(|(&s, &e)| (s, e)).collect();
        let mut gone = 0;
        for (s, e) in hit {
            m.remove(&s);
            if s < start {
                m.insert(s, start);
            }
            if e > end {
                m.insert(end, e);
            }
            gone += e.min(end) - s.max(start);
        }
        if m.is_empty() {
            self.ranges.remove(&pid);
        }
        self.bytes -= gone;
        gone
    }

    /// Forgets every range of `pid` (exit).
    pub fn remove_pid(&mut self, pid: u32) {
        if let Some(m) = self.ranges.remove(&pid) {
            self.bytes -= m.iter().map(|(&s, &e)| e - s).sum::<u64>();
        }
    }

    /// Gives `child` a copy of `parent`'s ranges (fork shares swap entries).
    pub fn fork(&mut self, parent: u32, child: u32) {
        if let Some(m) = self.ranges.get(&parent).cloned() {
            self.bytes += m.iter().map(|(&s, &e)| e - s).sum::<u64>();
            self.ranges.insert(child, m);
        }
    }

    /// Every range of `pid`.
    pub fn ranges(&self, pid: u32) -> impl Iterator<Item = (VirtAddr, VirtAddr)> + '_ {
        self.ranges
            .get(&pid)
            .into_iter()
            .flat_map(|m| m.iter().map(|(&s, &e)| (s, e)))
    }
}

#[cfg(test)]
mod tests {
    use super::Swap;
    use pagelab_core::VirtAddr as V;

    #[test]
    fn ranges_split_on_partial_removal() {
        let mut s = Swap::default();
        s.add(1, V(0x1000), V(0x5000));
        s.add(1, V(0x8000), V(0x9000));
        assert!(s.holds(1, V(0x4fff)) && !s.holds(1, V(0x5000)) && !s.holds(2, V(0x1000)));
        assert_eq!(s.remove(1, V(0x2000), V(0x3000)), 0x1000);
        assert!(s.holds(1, V(0x1000)) && !s.holds(1, V(0x2000)) && s.holds(1, V(0x3000)));
        assert_eq!(s.remove(1, V(0), V(0x8800)), 0x3800);
        assert_eq!(s.bytes(), 0x800);
        s.fork(1, 2);
        assert_eq!(s.bytes(), 0x1000);
        s.remove_pid(1);
        s.remove_pid(2);
        assert!(s.is_empty() && s.bytes() == 0);
    }
}
