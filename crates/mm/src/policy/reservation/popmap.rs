//! The population map of one reservation (Navarro et al.'s popmap, GISP's
//! POPMAP): which of its base frames are in use, with a count per naturally
//! aligned run of every power-of-two length, so that "is this aligned
//! extent fully populated?" and "what is the largest free aligned extent?"
//! are answered in O(levels) instead of a scan.

/// Base-frame population of an extent of `2^levels` base frames.
#[derive(Clone, Debug)]
pub(crate) struct PopMap {
    /// `counts[k][j]`: frames in use in the `j`-th aligned run of `2^k` frames.
    counts: Vec<Vec<u32>>,
    /// `empty[k]`: runs of level `k` with no frame in use.
    empty: Vec<u64>,
}

impl PopMap {
    /// An empty map of `2^levels` frames.
    pub(crate) fn new(levels: u8) -> PopMap {
        let counts: Vec<Vec<u32>> = (0..=levels).map(|k| vec![0; 1 << (levels - k)]).collect();
        let empty = counts.iter().map(|c| c.len() as u64).collect();
        PopMap { counts, empty }
    }

    /// log2 of the number of frames.
    pub(crate) fn levels(&self) -> u8 {
        (self.counts.len() - 1) as u8
    }

    /// Frames in the map.
    pub(crate) fn frames(&self) -> u64 {
        1 << self.levels()
    }

    /// Whether frame `i` is in use.
    pub(crate) fn is_set(&self, i: u64) -> bool {
        self.counts[0][i as usize] == 1
    }

    /// Frames in use.
    pub(crate) fn populated(&self) -> u64 {
        u64::from(self.counts[self.levels() as usize][0])
    }

    /// Marks frame `i` in use; false if it already was.
    pub(crate) fn set(&mut self, i: u64) -> bool {
        if self.is_set(i) {
            return false;
        }
        for (k, c) in self.counts.iter_mut().enumerate() {
            let n = &mut c[(i >> k) as usize];
            if *n == 0 {
                self.empty[k] -= 1;
            }
            *n += 1;
        }
        true
    }

    /// Marks frame `i` free; false if it already was.
    pub(crate) fn clear(&mut self, i: u64) -> bool {
        if !self.is_set(i) {
            return false;
        }
        for (k, c) in self.counts.iter_mut().enumerate() {
            let n = &mut c[(i >> k) as usize];
            *n -= 1;
            if *n == 0 {
                self.empty[k] += 1;
            }
        }
        true
    }

    /// Whether the aligned run of `2^k` frames holding frame `i` is all in use.
    pub(crate) fn full(&self, k: u8, i: u64) -> bool {
        self.counts[k as usize][(i >> k) as usize] == 1 << k
    }

    /// log2 of the longest aligned run with no frame in use (what preempting
    /// this reservation would give back as one block), if any frame is free.
    pub(crate) fn largest_free(&self) -> Option<u8> {
        (0..=self.levels())
            .rev()
            .find(|&k| self.empty[k as usize] > 0)
    }

    /// The free frames, in order.
    pub(crate) fn free_frames(&self) -> impl Iterator<Item = u64> + '_ {
        self.counts[0]
            .iter()
            .enumerate()
            .filter(|(_, &n)| n == 0)
            .map(|(i, _)| i as u64)
    }

    /// Recomputes every count from the frames and compares.
    pub(crate) fn check(&self) -> Result<(), String> {
        for k in 1..self.counts.len() {
            let (lower, this) = (&self.counts[k - 1], &self.counts[k]);
            for (j, &n) in this.iter().enumerate() {
                if n != lower[2 * j] + lower[2 * j + 1] {
                    return Err(format!("popmap level {k} run {j} counts {n}"));
                }
            }
            let empty = this.iter().filter(|&&n| n == 0).count() as u64;
            if empty != self.empty[k] {
                return Err(format!(
                    "popmap level {k}: {} empty runs recorded, {empty} found",
                    self.empty[k]
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::PopMap;

    #[test]
    fn counts_runs_and_largest_free_extent() {
        let mut p = PopMap::new(3);
        assert_eq!(p.largest_free(), Some(3));
        assert!(p.set(5));
        assert!(!p.set(5));
        assert_eq!(p.largest_free(), Some(2));
        assert!(!p.full(1, 4));
        p.set(4);
        assert!(p.full(1, 5) && !p.full(2, 5));
        for i in 0..8 {
            p.set(i);
        }
        assert_eq!((p.populated(), p.largest_free()), (8, None));
        assert!(p.full(3, 0));
        p.clear(2);
        assert_eq!(p.free_frames().collect::<Vec<_>>(), [2]);
        assert_eq!(p.largest_free(), Some(0));
        p.check().unwrap();
    }
}
