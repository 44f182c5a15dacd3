//! `gups`: HPCC RandomAccess, natively, with the model's generator.

use super::params::{pool_text, size_text, Pairs};
use super::{first_touch, record_loop, Advice, Metrics, Phase, Scale};
use anyhow::Result;
use std::fmt;

const KEYS: [&str; 4] = ["table", "updates", "seed", "pool"];
/// HPCC's LFSR polynomial, as the model's `gups`.
const POLY: u64 = 7;

/// One RandomAccess run: `updates` times `table[ran & mask] ^= ran` over a table of
/// `table` bytes of u64, `ran` the HPCC LFSR started from `splitmix64(seed)` as in the
/// model, so the same table words are updated in the same order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gups {
    /// Table bytes, a power of two.
    pub table: u64,
    /// Read-modify-writes.
    pub updates: u64,
    /// The generator's seed.
    pub seed: u64,
    /// Under the 4K baseline, the table's frames drawn from this many bytes of 2M blocks
    /// ([`super::pool`]).
    pub pool: Option<u64>,
}

/// The splitmix64 finaliser, as `pagelab_workloads` seeds its generators.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Gups {
    pub(crate) fn parse(text: &str, scale: Scale) -> Result<Gups> {
        let p = Pairs::new("gups", text, &KEYS)?;
        let (table, updates) = match scale {
            Scale::Full => (64 << 20, 4 << 20),
            Scale::Quick => (8 << 20, 256 << 10),
        };
        let table = p.pow2_size("table", table, 8, 1 << 40)?;
        Ok(Gups {
            table,
            updates: p.count("updates", updates, 1, u64::MAX)?,
            seed: p.count("seed", 1, 0, u64::MAX)?,
            pool: p.pool(table)?,
        })
    }

    pub(crate) fn run(&self, advice: Advice, m: &mut Metrics) -> Result<()> {
        let mut region = first_touch(self.table, advice, (self.pool, self.seed), m, |r| {
            for (i, w) in r.as_mut_slice::<u64>().iter_mut().enumerate() {
                *w = i as u64;
            }
        })?;
        let table = region.as_mut_slice::<u64>();
        let mask = table.len() as u64 - 1;
        let mut ran = splitmix64(self.seed).max(1);
        let phase = Phase::start();
        for _ in 0..self.updates {
            ran = (ran << 1) ^ if (ran as i64) < 0 { POLY } else { 0 };
            table[(ran & mask) as usize] ^= ran;
        }
        std::hint::black_box(&mut *table);
        record_loop(m, phase, self.updates, "ns_per_update");
        m.insert("gups".into(), 1.0 / m["ns_per_update"]);
        Ok(())
    }
}

impl fmt::Display for Gups {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "gups:table={},updates={},seed={}",
            size_text(self.table),
            self.updates,
            self.seed
        )?;
        pool_text(f, self.pool)
    }
}
