//! `chase`: a dependent pointer chase around the model's random cycle, natively.

use super::params::{pool_text, size_text, Pairs};
use super::{first_touch, record_loop, Advice, Metrics, Phase, Region, Scale};
use anyhow::Result;
use pagelab_workloads::Permutation;
use std::fmt;

const KEYS: [&str; 5] = ["nodes", "node", "steps", "seed", "pool"];

/// One chase: `nodes` nodes of `node` bytes; node `perm(i)` holds the address of node
/// `perm(i+1)` (the model's cycle, [`Permutation`] of `seed`), and the timed loop follows
/// `steps` pointers, each load depending on the last.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chase {
    /// Nodes in the cycle.
    pub nodes: u64,
    /// Bytes per node, a multiple of 8.
    pub node: u64,
    /// Pointers followed.
    pub steps: u64,
    /// The cycle's seed.
    pub seed: u64,
    /// Under the 4K baseline, the nodes' frames drawn from this many bytes of 2M blocks
    /// ([`super::pool`]).
    pub pool: Option<u64>,
}

impl Chase {
    pub(crate) fn parse(text: &str, scale: Scale) -> Result<Chase> {
        let p = Pairs::new("chase", text, &KEYS)?;
        let (nodes, steps) = match scale {
            Scale::Full => (512 << 10, 2 << 20),
            Scale::Quick => (64 << 10, 256 << 10),
        };
        let node = p.size("node", 64, 8, 1 << 30)?;
        if !node.is_multiple_of(8) {
            anyhow::bail!("chase: node={node} is not allowed: write a multiple of 8, like 64");
        }
        let nodes = p.count("nodes", nodes, 1, 1 << 34)?;
        if nodes.checked_mul(node).is_none_or(|b| b > 1 << 40) {
            anyhow::bail!(
                "chase: nodes={nodes} of node={} is more than 1T of data",
                size_text(node)
            );
        }
        Ok(Chase {
            nodes,
            node,
            steps: p.count("steps", steps, 1, u64::MAX)?,
            seed: p.count("seed", 1, 0, u64::MAX)?,
            pool: p.pool(nodes * node)?,
        })
    }

    pub(crate) fn run(&self, advice: Advice, m: &mut Metrics) -> Result<()> {
        let (_region, mut p) = self.prepare(advice, m)?;
        let phase = Phase::start();
        for _ in 0..self.steps {
            // SAFETY: every slot at a node's base holds the address of a node's base inside
            // the region (written above), and p starts at one.
            p = unsafe { std::ptr::read_volatile(p as *const usize) };
        }
        std::hint::black_box(p);
        record_loop(m, phase, self.steps, "ns_per_step");
        Ok(())
    }
}

impl Chase {
    /// For `pagelab machines --measure` ([`crate::probe`]): maps and links the cycle as
    /// [`Chase::run`] does, then times `chunks` stretches of `steps / chunks` steps one by
    /// one. Returns each stretch's nanoseconds per step (a stretch the thread was
    /// preempted in, on a loaded machine, shows as a slow one) and the first touch's faults.
    pub(crate) fn time_chunks(&self, advice: Advice, chunks: u64) -> Result<(Vec<f64>, f64)> {
        let mut m = Metrics::new();
        let (_region, mut p) = self.prepare(advice, &mut m)?;
        let per = (self.steps / chunks.max(1)).max(1);
        let mut out = Vec::with_capacity(chunks as usize);
        for _ in 0..chunks.max(1) {
            let t = std::time::Instant::now();
            for _ in 0..per {
                // SAFETY: as in `run`: every node's base holds the address of a node's base.
                p = unsafe { std::ptr::read_volatile(p as *const usize) };
            }
            out.push(t.elapsed().as_nanos() as f64 / per as f64);
        }
        std::hint::black_box(p);
        Ok((out, m["first_touch_faults"]))
    }

    /// Maps the nodes (the first touch, recorded in `m`) and links the cycle; returns the
    /// region, which must outlive every step, and the address of the first node.
    fn prepare(&self, advice: Advice, m: &mut Metrics) -> Result<(Region, usize)> {
        let mut region = first_touch(
            self.nodes * self.node,
            advice,
            (self.pool, self.seed),
            m,
            |r| {
                r.as_mut_slice::<u64>().fill(0);
            },
        )?;
        let p = self.link(&mut region);
        Ok((region, p))
    }

    /// Writes the cycle's pointers into `region` and returns the address of its first node.
    fn link(&self, region: &mut Region) -> usize {
        let base = region.as_mut_ptr() as usize;
        let words = (self.node / 8) as usize;
        let slots = region.as_mut_slice::<usize>();
        let perm = Permutation::new(self.nodes, self.seed);
        let mut from = perm.apply(0) as usize;
        for i in 1..=self.nodes {
            let to = perm.apply(i % self.nodes) as usize;
            slots[from * words] = base + to * words * 8;
            from = to;
        }
        base + perm.apply(0) as usize * words * 8
    }
}

impl fmt::Display for Chase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "chase:nodes={},node={},steps={},seed={}",
            self.nodes,
            size_text(self.node),
            self.steps,
            self.seed
        )?;
        pool_text(f, self.pool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pointers_form_one_cycle_through_every_node_in_the_models_order() {
        let k = Chase {
            nodes: 1000,
            node: 24,
            steps: 1,
            seed: 3,
            pool: None,
        };
        let mut region = Region::new(24_000, Advice::None).unwrap();
        let start = k.link(&mut region);
        let base = region.as_mut_ptr() as usize;
        let perm = Permutation::new(1000, 3);
        let mut p = start;
        let mut seen = vec![false; 1000];
        for i in 0..1000u64 {
            assert_eq!((p - base) / 24, perm.apply(i) as usize, "step {i}");
            assert!(!std::mem::replace(&mut seen[(p - base) / 24], true));
            // SAFETY: p is a node's base inside the region, holding the next node's address.
            p = unsafe { *(p as *const usize) };
        }
        assert_eq!(p, start);
    }
}
