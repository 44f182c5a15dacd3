//! Maps of disjoint address intervals keyed by their start, as the layout and the
//! relocation keep them, and the one way both cut a range out of such a map (munmap).

use std::collections::BTreeMap;

/// An interval's value in such a map: it knows its end, and how to be cut.
pub(crate) trait Interval: Copy {
    /// The interval's end (exclusive).
    fn end(&self) -> u64;
    /// The same interval ending at `end` instead (its head, when a cut starts inside it).
    fn ending_at(self, end: u64) -> Self;
    /// The part from `at` on of this interval, which starts at `start` (its tail, when a cut
    /// ends inside it); it keeps the interval's end.
    fn from(self, start: u64, at: u64) -> Self;
}

/// Removes `[s, e)` from `map`, keeping the parts of the intervals it overlaps that lie
/// outside it.
pub(crate) fn cut<V: Interval>(map: &mut BTreeMap<u64, V>, s: u64, e: u64) {
    let hit: Vec<(u64, V)> = map
        .range(..e)
        .rev()
        .take_while(|(_, v)| v.end() > s)
        .map(|(k, v)| (*k, *v))
        .collect();
    for (k, v) in hit {
        map.remove(&k);
        if k < s {
            map.insert(k, v.ending_at(s));
        }
        if v.end() > e {
            map.insert(e, v.from(k, e));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An interval that remembers the offset of its start from where it began.
    #[derive(Clone, Copy, Debug, PartialEq)]
    struct Iv {
        end: u64,
        offset: u64,
    }

    impl Interval for Iv {
        fn end(&self) -> u64 {
            self.end
        }
        fn ending_at(self, end: u64) -> Self {
            Iv { end, ..self }
        }
        fn from(self, start: u64, at: u64) -> Self {
            Iv {
                end: self.end,
                offset: self.offset + (at - start),
            }
        }
    }

    #[test]
    fn a_cut_keeps_the_heads_and_tails_outside_it() {
        let mut m = BTreeMap::new();
        m.insert(0, Iv { end: 10, offset: 0 });
        m.insert(10, Iv { end: 20, offset: 0 });
        m.insert(30, Iv { end: 40, offset: 0 });
        cut(&mut m, 5, 15);
        let got: Vec<(u64, Iv)> = m.iter().map(|(k, v)| (*k, *v)).collect();
        assert_eq!(
            got,
            [
                (0, Iv { end: 5, offset: 0 }),
                (15, Iv { end: 20, offset: 5 }),
                (30, Iv { end: 40, offset: 0 }),
            ]
        );
        // Inside one interval: a head and a tail; outside every interval: nothing.
        cut(&mut m, 32, 34);
        cut(&mut m, 20, 30);
        let got: Vec<(u64, u64, u64)> = m.iter().map(|(k, v)| (*k, v.end, v.offset)).collect();
        assert_eq!(got, [(0, 5, 0), (15, 20, 5), (30, 32, 0), (34, 40, 4)]);
        // A cut over everything empties the map.
        cut(&mut m, 0, u64::MAX);
        assert!(m.is_empty());
    }
}
