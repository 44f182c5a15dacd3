//! Errors of configuration loading and validation.

use std::path::PathBuf;

/// Why a TLB configuration could not be loaded or built.
#[derive(Debug, thiserror::Error)]
pub enum TlbError {
    /// The file could not be read.
    #[error("cannot read TLB config {path}: {err}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating-system error (in the message, so not chained as a
        /// source: `anyhow`'s `{:#}` would print it twice).
        err: std::io::Error,
    },
    /// The TOML is malformed, has an unknown field, or a value of the wrong type.
    #[error("{file}: {message}")]
    Parse {
        /// The file (or `preset <name>`).
        file: String,
        /// The TOML parser's message, which names the line and the field.
        message: String,
    },
    /// A value is well-formed but not allowed.
    #[error("{file}: {place}: {message}")]
    Invalid {
        /// The file (or `preset <name>`).
        file: String,
        /// Where: `[l1d]`, `[l1d] arrays[1]`, `[l2] arrays[0].ways`, or `top level`.
        place: String,
        /// What is wrong and what is allowed.
        message: String,
    },
    /// No preset has this name.
    #[error("unknown TLB preset `{name}`: valid presets are {}; or give a path ending in .toml", valid.join(", "))]
    UnknownPreset {
        /// The name asked for.
        name: String,
        /// Every preset name.
        valid: Vec<String>,
    },
}
