//! `key=value` parameters of a kernel spec, with errors that name the kernel, the key and what is allowed.

use anyhow::{anyhow, bail, Result};
use pagelab_core::{parse_bytes, Bytes};

/// The parameters given in one spec, checked against the kernel's keys.
pub(crate) struct Pairs<'a> {
    kernel: &'static str,
    pairs: Vec<(&'a str, &'a str)>,
}

impl<'a> Pairs<'a> {
    /// Splits `a=1,b=2` (may be empty); refuses unknown and repeated keys.
    pub(crate) fn new(kernel: &'static str, text: &'a str, keys: &[&str]) -> Result<Pairs<'a>> {
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = item.split_once('=').ok_or_else(|| {
                anyhow!(
                    "`{item}` in the {kernel} spec is not key=value (keys: {})",
                    keys.join(", ")
                )
            })?;
            let (k, v) = (k.trim(), v.trim());
            if !keys.contains(&k) {
                bail!(
                    "{kernel} has no parameter `{k}` (its parameters: {})",
                    keys.join(", ")
                );
            }
            if pairs.iter().any(|(seen, _)| *seen == k) {
                bail!("{kernel}: `{k}` is given twice");
            }
            pairs.push((k, v));
        }
        Ok(Pairs { kernel, pairs })
    }

    /// `pool=SIZE` ([`super::pool`]) for `data` bytes: whole 2M blocks, from the data's
    /// size (in whole 4K pages) to 1T; `None` when not given.
    pub(crate) fn pool(&self, data: u64) -> Result<Option<u64>> {
        let Some(v) = self.raw("pool") else {
            return Ok(None);
        };
        let n = self.size("pool", 0, 2 << 20, 1 << 40)?;
        if !n.is_multiple_of(2 << 20) {
            return Err(self.bad("pool", v, "whole 2M blocks, like 64M or 8G".into()));
        }
        let least = data.div_ceil(4096).saturating_mul(4096);
        if n < least {
            return Err(self.bad(
                "pool",
                v,
                format!("the pool must hold the data's {} at least", Bytes(least)),
            ));
        }
        Ok(Some(n))
    }

    /// The text given for `key`, if any.
    pub(crate) fn raw(&self, key: &str) -> Option<&'a str> {
        self.pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }

    fn bad(&self, key: &str, value: &str, allowed: String) -> anyhow::Error {
        anyhow!("{}: {key}={value} is not allowed: {allowed}", self.kernel)
    }

    /// A byte count within `[min, max]`, `default` when not given.
    pub(crate) fn size(&self, key: &str, default: u64, min: u64, max: u64) -> Result<u64> {
        let Some(v) = self.raw(key) else {
            return Ok(default);
        };
        match parse_bytes(v) {
            Ok(n) if (min..=max).contains(&n) => Ok(n),
            _ => Err(self.bad(
                key,
                v,
                format!(
                    "write a size from {} to {}, like 4K or 32M",
                    Bytes(min),
                    Bytes(max)
                ),
            )),
        }
    }

    /// A power-of-two byte count within `[min, max]`, `default` when not given.
    pub(crate) fn pow2_size(&self, key: &str, default: u64, min: u64, max: u64) -> Result<u64> {
        let n = self.size(key, default, min, max)?;
        if !n.is_power_of_two() {
            let v = self.raw(key).unwrap_or_default();
            return Err(self.bad(
                key,
                v,
                format!("write a power of two from {} to {}", Bytes(min), Bytes(max)),
            ));
        }
        Ok(n)
    }

    /// A whole number within `[min, max]` (`_` may separate digits), `default` when not given.
    pub(crate) fn count(&self, key: &str, default: u64, min: u64, max: u64) -> Result<u64> {
        let Some(v) = self.raw(key) else {
            return Ok(default);
        };
        match v.replace('_', "").parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(n),
            _ => Err(self.bad(key, v, format!("write a whole number from {min} to {max}"))),
        }
    }

    /// Like [`Pairs::count`], but `auto` (or absence) gives `None`.
    pub(crate) fn count_or_auto(&self, key: &str, min: u64, max: u64) -> Result<Option<u64>> {
        match self.raw(key) {
            None | Some("auto") => Ok(None),
            Some(_) => self.count(key, 0, min, max).map(Some),
        }
    }
}

/// A size as people write it (`4K`, `1536K`, `32M`), exact: parsing it gives `n` back.
pub(crate) fn size_text(n: u64) -> String {
    for (unit, name) in [(1u64 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")] {
        if n >= unit && n.is_multiple_of(unit) {
            return format!("{}{name}", n / unit);
        }
    }
    n.to_string()
}

/// `,pool=SIZE` after a spec's other parameters, when it has a pool.
pub(crate) fn pool_text(f: &mut std::fmt::Formatter<'_>, pool: Option<u64>) -> std::fmt::Result {
    match pool {
        Some(p) => write!(f, ",pool={}", size_text(p)),
        None => Ok(()),
    }
}
