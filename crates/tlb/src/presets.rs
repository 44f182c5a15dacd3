//! Built-in configurations: the TOML files of `configs/tlb/`, embedded at build time.

use crate::config::{load, TlbConfig};
use crate::TlbError;
use std::path::Path;

/// The preset used when none is named: the Weisberg & Wiseman study's TLB.
pub const DEFAULT_PRESET: &str = "weisberg";

const PRESETS: &[(&str, &str)] = &[
    (
        "weisberg",
        include_str!("../../../configs/tlb/weisberg.toml"),
    ),
    (
        "pentium4",
        include_str!("../../../configs/tlb/pentium4.toml"),
    ),
    ("pkunity", include_str!("../../../configs/tlb/pkunity.toml")),
    (
        "power5plus",
        include_str!("../../../configs/tlb/power5plus.toml"),
    ),
    ("skylake", include_str!("../../../configs/tlb/skylake.toml")),
    ("zen3", include_str!("../../../configs/tlb/zen3.toml")),
    ("zen4", include_str!("../../../configs/tlb/zen4.toml")),
    (
        "emeraldrapids",
        include_str!("../../../configs/tlb/emeraldrapids.toml"),
    ),
];

/// Names of every preset, default first.
pub fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|(n, _)| *n).collect()
}

/// The TOML text of a preset, as shipped.
pub fn preset_text(name: &str) -> Option<&'static str> {
    PRESETS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// A preset by name; an unknown name is an error listing the valid ones.
pub fn preset(name: &str) -> Result<TlbConfig, TlbError> {
    match preset_text(name) {
        Some(text) => {
            TlbConfig::from_toml_str(text, &format!("preset `{name}` (configs/tlb/{name}.toml)"))
        }
        None => Err(TlbError::UnknownPreset {
            name: name.to_string(),
            valid: preset_names().into_iter().map(String::from).collect(),
        }),
    }
}

/// Every preset, parsed, default first. Panics if a shipped preset is invalid
/// (a test loads them all, so a broken one cannot ship).
pub fn presets() -> Vec<(&'static str, TlbConfig)> {
    preset_names()
        .into_iter()
        .map(|n| {
            (
                n,
                preset(n).unwrap_or_else(|e| panic!("shipped TLB preset is invalid: {e}")),
            )
        })
        .collect()
}

/// A preset name, or a path to a TOML file (anything ending in `.toml`).
pub fn resolve(arg: &str) -> Result<TlbConfig, TlbError> {
    if arg.ends_with(".toml") {
        load(Path::new(arg))
    } else {
        preset(arg)
    }
}
