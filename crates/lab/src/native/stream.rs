//! `stream`: McCalpin's STREAM (copy, scale, add, triad), natively.

use super::params::Pairs;
use super::{first_touch, Advice, Metrics, Phase, Scale};
use anyhow::Result;
use std::fmt;
use std::hint::black_box;
use std::time::Instant;

const KEYS: [&str; 2] = ["n", "iters"];
/// STREAM's scalar.
const SCALAR: f64 = 3.0;

/// One STREAM run over three arrays of `n` f64 each, laid one after another in one region
/// (as STREAM's static arrays are), `iters` times the four kernels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stream {
    /// Elements per array.
    pub n: u64,
    /// Passes of the four kernels.
    pub iters: u64,
}

impl Stream {
    pub(crate) fn parse(text: &str, scale: Scale) -> Result<Stream> {
        let p = Pairs::new("stream", text, &KEYS)?;
        let (n, iters) = match scale {
            Scale::Full => (2 << 20, 10),
            Scale::Quick => (256 << 10, 3),
        };
        Ok(Stream {
            n: p.count("n", n, 1, 1 << 36)?,
            iters: p.count("iters", iters, 1, 1 << 32)?,
        })
    }

    pub(crate) fn run(&self, advice: Advice, m: &mut Metrics) -> Result<()> {
        let n = self.n as usize;
        let mut region = first_touch(3 * 8 * self.n, advice, (None, 0), m, |r| {
            let all = r.as_mut_slice::<f64>();
            all[..n].fill(1.0);
            all[n..2 * n].fill(2.0);
            all[2 * n..].fill(0.0);
        })?;
        let all = region.as_mut_slice::<f64>();
        let (a, rest) = all.split_at_mut(n);
        let (b, c) = rest.split_at_mut(n);
        let c = &mut c[..n];
        // Best time per kernel, as STREAM reports; bytes moved per element: 16, 16, 24, 24.
        let mut best = [f64::INFINITY; 4];
        let phase = Phase::start();
        for _ in 0..self.iters {
            let t = Instant::now();
            c.copy_from_slice(black_box(&*a));
            best[0] = best[0].min(t.elapsed().as_secs_f64());
            let t = Instant::now();
            for (bi, ci) in b.iter_mut().zip(black_box(&*c)) {
                *bi = SCALAR * ci;
            }
            best[1] = best[1].min(t.elapsed().as_secs_f64());
            let t = Instant::now();
            for ((ci, ai), bi) in c.iter_mut().zip(black_box(&*a)).zip(black_box(&*b)) {
                *ci = ai + bi;
            }
            best[2] = best[2].min(t.elapsed().as_secs_f64());
            let t = Instant::now();
            for ((ai, bi), ci) in a.iter_mut().zip(black_box(&*b)).zip(black_box(&*c)) {
                *ai = bi + SCALAR * ci;
            }
            best[3] = best[3].min(t.elapsed().as_secs_f64());
            black_box(&mut *a);
        }
        super::record_loop(m, phase, 4 * self.n * self.iters, "ns_per_element_mean");
        // Per element of one kernel, from each kernel's best pass (as the MB/s figures).
        let best_total: f64 = best.iter().sum();
        m.insert(
            "ns_per_element".into(),
            best_total * 1e9 / (4 * self.n) as f64,
        );
        let names = ["copy", "scale", "add", "triad"];
        let bytes = [16.0, 16.0, 24.0, 24.0];
        for ((name, per), secs) in names.iter().zip(bytes).zip(best) {
            let mb_per_s = per * self.n as f64 / secs.max(1e-12) / 1e6;
            m.insert(format!("{name}_mb_per_s"), mb_per_s);
        }
        m.insert("mb_per_s".into(), m["triad_mb_per_s"]);
        Ok(())
    }
}

impl fmt::Display for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "stream:n={},iters={}", self.n, self.iters)
    }
}
