//! Parsing `NAME[:key=value,...]` specs against each workload's documented parameters.
//!
//! The [`WorkloadDoc`] of a workload is the single source of truth: the parser
//! accepts exactly its keys and takes its defaults, and the catalog prints it.

use crate::WorkloadError;
use std::collections::BTreeMap;

/// One parameter of a workload, as shown by `pagelab workloads` and the README.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamDoc {
    /// The key, as written in a spec (`heap`).
    pub name: &'static str,
    /// The default value, as it would be written in a spec (`4M`).
    pub default: &'static str,
    /// What the parameter means and what it accepts.
    pub help: &'static str,
}

/// A built-in workload: its name, a one-line description and its parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkloadDoc {
    /// The name, as written before `:` in a spec.
    pub name: &'static str,
    /// One line saying what it does.
    pub summary: &'static str,
    /// Every parameter with its default and meaning.
    pub params: &'static [ParamDoc],
}

/// The parameters of one spec, with defaults filled in, ready for typed reads.
pub(crate) struct Params {
    doc: &'static WorkloadDoc,
    values: Vec<String>,
}

/// A spec's `key=value` pairs, in the order written.
pub(crate) type Pairs<'a> = Vec<(&'a str, &'a str)>;

/// Splits `NAME[:k=v,...]` into the name and its key/value pairs.
pub(crate) fn split(spec: &str) -> Result<(&str, Pairs<'_>), WorkloadError> {
    let syntax = |reason: String| WorkloadError::Syntax {
        spec: spec.to_string(),
        reason,
    };
    let (name, rest) = match spec.split_once(':') {
        Some((n, r)) => (n.trim(), r),
        None => (spec.trim(), ""),
    };
    if name.is_empty() {
        return Err(syntax("the workload name is missing".into()));
    }
    let mut pairs = Vec::new();
    for item in rest.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| syntax(format!("`{item}` is not key=value")))?;
        let (k, v) = (k.trim(), v.trim());
        if k.is_empty() {
            return Err(syntax(format!("`{item}` has no key")));
        }
        if pairs.iter().any(|&(seen, _)| seen == k) {
            return Err(syntax(format!("`{k}` is given twice")));
        }
        pairs.push((k, v));
    }
    Ok((name, pairs))
}

impl Params {
    /// Checks every key against `doc` and fills in defaults.
    pub(crate) fn new(
        doc: &'static WorkloadDoc,
        pairs: &[(&str, &str)],
    ) -> Result<Params, WorkloadError> {
        let mut values: Vec<String> = doc.params.iter().map(|p| p.default.to_string()).collect();
        for &(k, v) in pairs {
            let i = doc.params.iter().position(|p| p.name == k).ok_or_else(|| {
                WorkloadError::UnknownKey {
                    workload: doc.name.into(),
                    key: k.into(),
                    valid: doc
                        .params
                        .iter()
                        .map(|p| p.name)
                        .collect::<Vec<_>>()
                        .join(", "),
                }
            })?;
            values[i] = v.to_string();
        }
        Ok(Params { doc, values })
    }

    fn raw(&self, key: &str) -> &str {
        let i = self.doc.params.iter().position(|p| p.name == key);
        // Keys come from the workload's own code, which names only documented keys.
        i.map_or("", |i| self.values[i].as_str())
    }

    /// The value of `key` as written (or its default).
    pub(crate) fn raw_value(&self, key: &str) -> &str {
        self.raw(key)
    }

    /// An error for `key` saying what is allowed.
    pub(crate) fn bad(&self, key: &str, allowed: impl Into<String>) -> WorkloadError {
        WorkloadError::BadValue {
            workload: self.doc.name.into(),
            key: key.into(),
            value: self.raw(key).into(),
            allowed: allowed.into(),
        }
    }

    /// A byte count written like `4K` or `32M`, within `[min, max]`.
    pub(crate) fn size(&self, key: &str, min: u64, max: u64) -> Result<u64, WorkloadError> {
        let allowed = || {
            format!(
                "write a size from {} to {}, like 4K, 64K or 32M",
                fmt_size(min),
                fmt_size(max)
            )
        };
        let v = pagelab_core::parse_bytes(self.raw(key)).map_err(|_| self.bad(key, allowed()))?;
        if (min..=max).contains(&v) {
            Ok(v)
        } else {
            Err(self.bad(key, allowed()))
        }
    }

    /// A power-of-two byte count within `[min, max]`.
    pub(crate) fn pow2_size(&self, key: &str, min: u64, max: u64) -> Result<u64, WorkloadError> {
        let allowed = || {
            format!(
                "write a power of two from {} to {}, like 64, 4K or 2M",
                fmt_size(min),
                fmt_size(max)
            )
        };
        match pagelab_core::parse_bytes(self.raw(key)) {
            Ok(v) if v.is_power_of_two() && (min..=max).contains(&v) => Ok(v),
            _ => Err(self.bad(key, allowed())),
        }
    }

    /// A whole number within `[min, max]`; `_` may separate digits (`1_000_000`).
    pub(crate) fn count(&self, key: &str, min: u64, max: u64) -> Result<u64, WorkloadError> {
        let allowed =
            || format!("write a whole number from {min} to {max}, like 1000 or 1_000_000");
        let text: String = self.raw(key).chars().filter(|&c| c != '_').collect();
        if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(self.bad(key, allowed()));
        }
        match text.parse::<u64>() {
            Ok(v) if (min..=max).contains(&v) => Ok(v),
            _ => Err(self.bad(key, allowed())),
        }
    }

    /// `true`/`false` (also `yes`/`no`, `on`/`off`, `1`/`0`).
    pub(crate) fn flag(&self, key: &str) -> Result<bool, WorkloadError> {
        match self.raw(key).to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" | "1" => Ok(true),
            "false" | "no" | "off" | "0" => Ok(false),
            _ => Err(self.bad(key, "write true or false")),
        }
    }
}

/// A byte count as people write it: `4K`, `2M`, `1G` when exact, plain bytes otherwise.
pub fn fmt_size(bytes: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "T"),
        (1 << 30, "G"),
        (1 << 20, "M"),
        (1 << 10, "K"),
    ];
    for (unit, name) in UNITS {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{}{}", bytes / unit, name);
        }
    }
    bytes.to_string()
}

/// Builds an info parameter map from `(key, value)` pairs.
pub(crate) fn param_map<const N: usize>(pairs: [(&str, String); N]) -> BTreeMap<String, String> {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}
