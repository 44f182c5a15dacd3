//! The machines of `configs/machines/`, embedded at build time.

use crate::{Machine, MachineError};

const PRESETS: &[(&str, &str)] = &[
    (
        "ia32-pae",
        include_str!("../../../configs/machines/ia32-pae.toml"),
    ),
    ("ia32", include_str!("../../../configs/machines/ia32.toml")),
    (
        "x86-64",
        include_str!("../../../configs/machines/x86-64.toml"),
    ),
    (
        "x86-64-la57",
        include_str!("../../../configs/machines/x86-64-la57.toml"),
    ),
    (
        "arm64-4k",
        include_str!("../../../configs/machines/arm64-4k.toml"),
    ),
    (
        "arm64-16k",
        include_str!("../../../configs/machines/arm64-16k.toml"),
    ),
    (
        "arm64-64k",
        include_str!("../../../configs/machines/arm64-64k.toml"),
    ),
    (
        "pentium4",
        include_str!("../../../configs/machines/pentium4.toml"),
    ),
    (
        "pkunity",
        include_str!("../../../configs/machines/pkunity.toml"),
    ),
    (
        "power5plus",
        include_str!("../../../configs/machines/power5plus.toml"),
    ),
    (
        "power6",
        include_str!("../../../configs/machines/power6.toml"),
    ),
    ("zen3", include_str!("../../../configs/machines/zen3.toml")),
    ("zen4", include_str!("../../../configs/machines/zen4.toml")),
    (
        "emeraldrapids",
        include_str!("../../../configs/machines/emeraldrapids.toml"),
    ),
    (
        "skylake",
        include_str!("../../../configs/machines/skylake.toml"),
    ),
    (
        "neoverse-n1-4k",
        include_str!("../../../configs/machines/neoverse-n1-4k.toml"),
    ),
    (
        "neoverse-n1-16k",
        include_str!("../../../configs/machines/neoverse-n1-16k.toml"),
    ),
    (
        "neoverse-n1-64k",
        include_str!("../../../configs/machines/neoverse-n1-64k.toml"),
    ),
];

/// Names of every machine preset.
pub fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|(n, _)| *n).collect()
}

/// The TOML text of a preset, as shipped.
pub fn preset_text(name: &str) -> Option<&'static str> {
    PRESETS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// A preset by name; an unknown name is an error listing the valid ones.
pub fn preset(name: &str) -> Result<Machine, MachineError> {
    match preset_text(name) {
        Some(text) => Machine::from_toml_str(
            text,
            &format!("machine `{name}` (configs/machines/{name}.toml)"),
        ),
        None => Err(MachineError::UnknownPreset {
            name: name.to_string(),
            valid: preset_names().into_iter().map(String::from).collect(),
        }),
    }
}

/// Every preset, parsed. Panics if a shipped preset is invalid (a test loads
/// them all, so a broken one cannot ship).
pub fn presets() -> Vec<Machine> {
    preset_names()
        .into_iter()
        .map(|n| preset(n).unwrap_or_else(|e| panic!("shipped machine preset is invalid: {e}")))
        .collect()
}
