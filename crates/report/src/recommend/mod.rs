//! The answer first: one sentence per workload saying which page size, policy or
//! configuration to use, with the numbers behind it.
//!
//! Every sentence comes from a [`Rule`] applied to a saved result, never from the simulator, so
//! the terminal, the HTML report and `pagelab report` on an old file say the same thing.
//!
//! - **A page-size study** ([`study`]): the smallest page size past which TLB misses stop
//!   falling significantly, within a memory budget. That is how Weisberg and Wiseman chose
//!   16K ("a significant decrease in TLB misses without a significant increase in memory
//!   usage"). Then their two-size scheme: the same rule on the instruction side alone (code
//!   and small data) and on the data side alone (large data).
//! - **A comparison of policies** ([`study`] on a `--policy` result): the policy with the
//!   fewest TLB misses whose peak memory stays within the budget.
//! - **A lab run or benchmark** ([`lab`]): the fastest configuration within the budget, with
//!   its spread; a gain inside the spread of the runs is said to be one.
//! - **A validation** ([`lab`]): whether the model and the kernel agree, per workload.
//!
//! ```
//! use pagelab_report::recommend::{pick, Point, Rule};
//!
//! // 4K, 64K, 2M: misses fall 96% by 64K, 2M removes 3% more of the 4K misses for 40% memory.
//! let points = [
//!     Point { label: "4K".into(), misses: 1000.0, memory: 100.0 },
//!     Point { label: "64K".into(), misses: 40.0, memory: 103.0 },
//!     Point { label: "2M".into(), misses: 10.0, memory: 140.0 },
//! ];
//! assert_eq!(pick(&points, &Rule::default()), 1);
//! ```

pub mod lab;
mod sentence;
pub mod study;

use std::fmt;

/// How a recommendation is chosen; `--max-memory-growth` and `--min-miss-drop` set it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rule {
    /// The most memory a recommendation may cost over the baseline (4K pages, the 4K
    /// policy or the 4K configuration), as a fraction: 0.25 allows 25% more.
    pub max_memory_growth: f64,
    /// The share of the baseline's TLB misses a larger page size (or another policy) must
    /// remove to count as a significant improvement: 0.05 is 5%.
    pub min_miss_drop: f64,
}

impl Default for Rule {
    fn default() -> Self {
        Rule {
            max_memory_growth: 0.25,
            min_miss_drop: 0.05,
        }
    }
}

impl Rule {
    /// The rule in a few words, for the line above the recommendations.
    pub fn describe(&self) -> String {
        format!(
            "memory at most +{} over the baseline; a larger size or another policy counts when it removes at least {} of the baseline's TLB misses",
            percent_text(self.max_memory_growth),
            percent_text(self.min_miss_drop)
        )
    }

    /// The rule as it applies to a lab result (`run`, `bench`; `validate` has none).
    pub fn describe_for(&self, command: &str) -> Option<String> {
        match command {
            "validate" => None,
            "run" | "bench" => Some(format!(
                "the fastest configuration whose peak memory is at most +{} over 4K; a gain is reliable only beyond the spread of the runs",
                percent_text(self.max_memory_growth)
            )),
            _ => Some(self.describe()),
        }
    }

    /// Whether `memory` is within the budget over `base`.
    pub fn within_budget(&self, base: f64, memory: f64) -> bool {
        // A hair of slack so that exactly +25% is inside on every platform.
        memory <= base * (1.0 + self.max_memory_growth) * (1.0 + 1e-12)
    }

    /// Whether going from `from` to `to` misses removes a significant share of `base` misses.
    pub fn significant_drop(&self, base: f64, from: f64, to: f64) -> bool {
        base > 0.0 && from - to >= self.min_miss_drop * base * (1.0 - 1e-12)
    }
}

/// Parses a percentage as people write it: `25%`, `25` or `0.25%`; the result is a fraction.
///
/// # Errors
/// A message naming the text when it is not a number, negative or not finite.
pub fn parse_percent(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let number = t.strip_suffix('%').unwrap_or(t).trim();
    match number.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v / 100.0),
        _ => Err(format!(
            "`{text}` is not a percentage: write a number such as 25% or 5%"
        )),
    }
}

fn percent_text(fraction: f64) -> String {
    let p = fraction * 100.0;
    if (p - p.round()).abs() < 1e-9 {
        format!("{}%", p.round())
    } else {
        format!("{p}%")
    }
}

/// One recommendation: a sentence about one workload, program or kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recommendation {
    /// What it is about: a workload, a trace, a program, a benchmark kernel.
    pub subject: String,
    /// What it recommends, as people write it (`64K`, `reservation`, `64K+2M`), when it
    /// recommends something.
    pub choice: Option<String>,
    /// The whole sentence, subject first.
    pub sentence: String,
}

impl fmt::Display for Recommendation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.sentence)
    }
}

/// One candidate for [`pick`]: a page size's (or a policy's) misses and memory.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// How people name it: `64K`, `reservation`.
    pub label: String,
    /// Its TLB misses (or any cost to make small).
    pub misses: f64,
    /// Its memory.
    pub memory: f64,
}

/// The rule on an ordered list whose first point is the baseline: the index of the first
/// point within the memory budget past which no point within the budget removes a
/// significant share of the baseline's misses.
///
/// With page sizes in ascending order this is "the smallest page size past which misses stop
/// falling significantly". The baseline is always within its own budget, so there is
/// always an answer; an empty list gives 0.
pub fn pick(points: &[Point], rule: &Rule) -> usize {
    let Some(base) = points.first() else {
        return 0;
    };
    let within: Vec<bool> = points
        .iter()
        .map(|p| rule.within_budget(base.memory, p.memory))
        .collect();
    (0..points.len())
        .filter(|&i| within[i])
        .find(|&i| {
            (i + 1..points.len())
                .filter(|&j| within[j])
                .all(|j| !rule.significant_drop(base.misses, points[i].misses, points[j].misses))
        })
        .unwrap_or(0)
}

pub use sentence::{change, signed_percent};
