//! `FROM..TO/STEP` in a workload parameter: one workload per value, so that
//! one command runs a whole curve (`stride:heap=128K..32M/128K,every=16` is
//! Winwood et al.'s (OLS 2002) Figure 4, 256 heaps).
//!
//! ```
//! let s = pagelab::param_sweep::expand("stride:heap=128K..512K/128K,every=16")
//!     .unwrap()
//!     .unwrap();
//! assert_eq!(s.param, "heap");
//! assert_eq!(s.values, [128 << 10, 256 << 10, 384 << 10, 512 << 10]);
//! assert_eq!(s.specs[2], "stride:heap=384K,every=16");
//! assert!(pagelab::param_sweep::expand("stride:heap=4M").unwrap().is_none());
//! ```

use anyhow::{bail, Result};

/// The most values one sweep may run.
pub const MAX_VALUES: u64 = 10_000;

/// A workload specification with one parameter swept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamSweep {
    /// The swept parameter's name (`heap`).
    pub param: String,
    /// Its values, in bytes or as counts, from FROM up to TO.
    pub values: Vec<u64>,
    /// One workload specification per value, the range replaced by it.
    pub specs: Vec<String>,
}

/// Expands the one `FROM..TO/STEP` of `spec`; `None` when it has none. Sizes
/// are written as people write them (`128K`); a range written without units
/// gives plain numbers. Errors name the parameter and what is allowed.
pub fn expand(spec: &str) -> Result<Option<ParamSweep>> {
    let Some((name, params)) = spec.split_once(':') else {
        return Ok(None);
    };
    let parts: Vec<&str> = params.split(',').collect();
    let ranged: Vec<usize> = (0..parts.len())
        .filter(|&i| parts[i].contains(".."))
        .collect();
    let at = match ranged.as_slice() {
        [] => return Ok(None),
        [one] => *one,
        [a, b, ..] => bail!(
            "--workload {spec}: sweep one parameter at a time (`{}` and `{}` both give FROM..TO/STEP)",
            key(parts[*a]),
            key(parts[*b])
        ),
    };
    let (param, range) = parts[at]
        .split_once('=')
        .ok_or_else(|| anyhow::anyhow!("--workload {spec}: write {}=FROM..TO/STEP", parts[at]))?;
    let bad = |why: String| anyhow::anyhow!("--workload {spec}: parameter `{param}`: {why}");
    let form = || format!("write FROM..TO/STEP, such as {param}=128K..32M/128K or {param}=1..10/1");
    let (from, rest) = range.split_once("..").ok_or_else(|| bad(form()))?;
    let (to, step) = rest.split_once('/').ok_or_else(|| bad(form()))?;
    let num = |what: &str, text: &str| {
        pagelab_core::parse_bytes(text).map_err(|_| {
            bad(format!(
                "{what} `{text}` is not a size or count (such as 128K, 32M or 16); {}",
                form()
            ))
        })
    };
    let (lo, hi, by) = (num("FROM", from)?, num("TO", to)?, num("STEP", step)?);
    if by == 0 {
        return Err(bad("STEP must be more than 0".into()));
    }
    if lo > hi {
        return Err(bad(format!("FROM {from} is above TO {to}")));
    }
    let count = (hi - lo) / by + 1;
    if count > MAX_VALUES {
        return Err(bad(format!(
            "{count} values; at most {MAX_VALUES} in one sweep: give a larger STEP"
        )));
    }
    let sized = [from, to, step]
        .iter()
        .any(|t| t.trim().ends_with(|c: char| c.is_ascii_alphabetic()));
    let values: Vec<u64> = (0..count).map(|i| lo + i * by).collect();
    let specs = values
        .iter()
        .map(|&v| {
            let mut p: Vec<String> = parts.iter().map(|s| s.to_string()).collect();
            p[at] = format!(
                "{param}={}",
                if sized {
                    pagelab_report::curve::size_text(v)
                } else {
                    v.to_string()
                }
            );
            format!("{name}:{}", p.join(","))
        })
        .collect();
    Ok(Some(ParamSweep {
        param: param.to_string(),
        values,
        specs,
    }))
}

fn key(part: &str) -> &str {
    part.split_once('=').map_or(part, |(k, _)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_papers_sweep_has_256_heaps() {
        let s = expand("stride:heap=128K..32M/128K,every=16")
            .unwrap()
            .unwrap();
        assert_eq!(s.values.len(), 256);
        assert_eq!(s.specs[0], "stride:heap=128K,every=16");
        assert_eq!(s.specs[32], "stride:heap=4224K,every=16");
        assert_eq!(s.specs[255], "stride:heap=32M,every=16");
    }

    #[test]
    fn counts_stay_counts_and_a_step_may_stop_short_of_to() {
        let s = expand("gups:updates=1000..3500/1000").unwrap().unwrap();
        assert_eq!(
            s.specs,
            [
                "gups:updates=1000",
                "gups:updates=2000",
                "gups:updates=3000"
            ]
        );
    }

    #[test]
    fn bad_ranges_name_the_parameter_and_the_form() {
        let e = |s: &str| format!("{:#}", expand(s).unwrap_err());
        assert!(e("stride:heap=1M..4M").contains("parameter `heap`: write FROM..TO/STEP"));
        assert!(e("stride:heap=1M..4M/0").contains("STEP must be more than 0"));
        assert!(e("stride:heap=8M..4M/1M").contains("FROM 8M is above TO 4M"));
        assert!(e("stride:heap=4K..4G/4K").contains("at most 10000"));
        assert!(e("stride:heap=1M..x/1M").contains("TO `x` is not a size"));
        assert!(e("stride:heap=1M..4M/1M,every=1..4/1").contains("one parameter at a time"));
    }
}
