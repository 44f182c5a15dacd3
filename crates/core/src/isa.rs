//! The SIMD tier every vectorised path of pagelab runs, chosen once per process.
//!
//! pagelab's hot loops (the Lackey parser's blocks and windows, the TLB
//! fronts of the study) have a portable build and builds for wider vector
//! units. Which one runs is decided here, and only here: the environment
//! variable [`VAR`] (`PAGELAB_ISA=portable|avx2|avx512`) names a tier, and
//! without it the best tier this CPU has is used. Every dispatch asks
//! [`active`]; every tier gives identical results, so the variable exists to
//! test the slower tiers on a fast machine and to rule the vector paths out.
//!
//! A tier is a ceiling: `avx512` also runs the AVX2 kernels where no AVX-512
//! one exists, and runs the AVX-512 VBMI2 windows of the Lackey parser only
//! where the CPU has VBMI2 ([`vbmi2_active`]).
//!
//! # Errors and the library's fallback
//! An unknown value, or a tier this CPU lacks, is an [`IsaError`] from
//! [`selected`]; the `pagelab` binary checks it at startup and refuses to run.
//! Libraries cannot refuse from inside a loop, so [`active`] never fails and
//! never panics: with a bad value it runs the portable tier, which every CPU
//! has and which gives the same results. Programs embedding the libraries
//! should call [`selected`] once at startup to report the mistake.

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

/// The environment variable that chooses the tier.
pub const VAR: &str = "PAGELAB_ISA";

/// A SIMD tier, from the narrowest to the widest (the order is the ceiling's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Isa {
    /// The target's baseline only: SSE2 on x86-64, word-at-a-time elsewhere.
    Portable,
    /// AVX2 with BMI1, BMI2, POPCNT and LZCNT (Haswell and later).
    Avx2,
    /// AVX-512 F, BW and VL on top of the AVX2 tier (Skylake-SP, Zen 4).
    Avx512,
}

/// The extensions the AVX-512 VBMI2 windows need on top of the `avx512` tier (every
/// CPU with VBMI2 has CD, whose leading-zero counts their drain uses).
const VBMI2_FEATURES: &[&str] = &["avx512vbmi", "avx512vbmi2", "avx512cd"];

impl Isa {
    /// Every tier, narrowest first.
    pub const ALL: [Isa; 3] = [Isa::Portable, Isa::Avx2, Isa::Avx512];

    /// The tier's name as [`VAR`] spells it.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Portable => "portable",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    /// The CPU features (as `is_x86_feature_detected!` names them) the tier
    /// needs, its narrower tiers' included.
    pub fn features(self) -> &'static [&'static str] {
        match self {
            Isa::Portable => &[],
            Isa::Avx2 => &["avx2", "bmi1", "bmi2", "popcnt", "lzcnt"],
            Isa::Avx512 => &[
                "avx2", "bmi1", "bmi2", "popcnt", "lzcnt", "avx512f", "avx512bw", "avx512vl",
            ],
        }
    }

    /// The features of [`Isa::features`] this CPU lacks (all of them off x86-64).
    pub fn missing(self) -> Vec<&'static str> {
        self.features()
            .iter()
            .copied()
            .filter(|f| !has(f))
            .collect()
    }

    /// Whether this CPU can run the tier (whatever [`VAR`] says).
    pub fn supported(self) -> bool {
        self.missing().is_empty()
    }

    /// The widest tier this CPU has: the default.
    pub fn best() -> Isa {
        static BEST: OnceLock<Isa> = OnceLock::new();
        *BEST.get_or_init(|| {
            Isa::ALL
                .into_iter()
                .rev()
                .find(|t| t.supported())
                .unwrap_or(Isa::Portable)
        })
    }

    /// Every tier this CPU has, narrowest first.
    pub fn supported_tiers() -> Vec<Isa> {
        Isa::ALL.into_iter().filter(|t| t.supported()).collect()
    }
}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Isa {
    type Err = IsaError;

    fn from_str(s: &str) -> Result<Self, IsaError> {
        Isa::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| IsaError::Unknown {
                value: s.to_string(),
            })
    }
}

/// Why the tier [`VAR`] names cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IsaError {
    /// The value names no tier.
    #[error(
        "{VAR}={value:?} is not a SIMD tier: use portable, avx2 or avx512 (this CPU has {})",
        list(&Isa::supported_tiers())
    )]
    Unknown {
        /// The value as given (non-UTF-8 bytes replaced).
        value: String,
    },
    /// The tier needs features this CPU lacks.
    #[error(
        "{VAR}={tier} needs CPU features this CPU lacks ({}): use {} (this CPU's best is {})",
        missing.join(", "),
        list(&Isa::supported_tiers()),
        Isa::best()
    )]
    Unsupported {
        /// The tier asked for.
        tier: Isa,
        /// Its features this CPU lacks.
        missing: Vec<&'static str>,
    },
}

/// `a, b or c`.
fn list(tiers: &[Isa]) -> String {
    let names: Vec<&str> = tiers.iter().map(|t| t.name()).collect();
    match names.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// The tier a value of [`VAR`] asks for: `None` or an empty value is the
/// CPU's best; otherwise the named tier, if this CPU has it.
pub fn parse(value: Option<&std::ffi::OsStr>) -> Result<Isa, IsaError> {
    let Some(value) = value.filter(|v| !v.is_empty()) else {
        return Ok(Isa::best());
    };
    let tier: Isa = value.to_string_lossy().trim().parse()?;
    let missing = tier.missing();
    if missing.is_empty() {
        Ok(tier)
    } else {
        Err(IsaError::Unsupported { tier, missing })
    }
}

/// The tier [`VAR`] chooses for this process, read once and cached.
pub fn selected() -> Result<Isa, IsaError> {
    static SELECTED: OnceLock<Result<Isa, IsaError>> = OnceLock::new();
    SELECTED
        .get_or_init(|| parse(std::env::var_os(VAR).as_deref()))
        .clone()
}

/// The tier every dispatch runs: [`selected`], or [`Isa::Portable`] when
/// [`VAR`] is wrong (see the module's documentation). Never panics.
pub fn active() -> Isa {
    selected().unwrap_or(Isa::Portable)
}

/// Whether this CPU has the AVX-512 VBMI2 windows' features (whatever [`VAR`] says).
pub fn vbmi2_supported() -> bool {
    Isa::Avx512.supported() && VBMI2_FEATURES.iter().all(|f| has(f))
}

/// Whether the Lackey parser runs its AVX-512 VBMI2 windows: the active tier
/// is `avx512` and this CPU has VBMI2.
pub fn vbmi2_active() -> bool {
    active() == Isa::Avx512 && vbmi2_supported()
}

/// A line for test output saying which tiers this CPU runs and which it skips.
pub fn describe_cpu() -> String {
    let has: Vec<Isa> = Isa::supported_tiers();
    let lacks: Vec<String> = Isa::ALL
        .into_iter()
        .filter(|t| !t.supported())
        .map(|t| format!("{t} (no {})", t.missing().join(", ")))
        .collect();
    let names: Vec<&str> = has.iter().map(|t| t.name()).collect();
    let mut s = format!("this CPU runs the tiers {}", names.join(", "));
    if !lacks.is_empty() {
        s += &format!("; it lacks {}", lacks.join(" and "));
    }
    if Isa::Avx512.supported() && !vbmi2_supported() {
        s += "; it has no AVX-512 VBMI2, so the Lackey windows never run";
    }
    s
}

/// Whether the CPU has one feature, by its `is_x86_feature_detected!` name.
fn has(feature: &str) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as d;
        match feature {
            "avx2" => d!("avx2"),
            "bmi1" => d!("bmi1"),
            "bmi2" => d!("bmi2"),
            "popcnt" => d!("popcnt"),
            "lzcnt" => d!("lzcnt"),
            "avx512f" => d!("avx512f"),
            "avx512bw" => d!("avx512bw"),
            "avx512vl" => d!("avx512vl"),
            "avx512vbmi" => d!("avx512vbmi"),
            "avx512vbmi2" => d!("avx512vbmi2"),
            "avx512cd" => d!("avx512cd"),
            _ => false,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = feature;
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn unset_or_empty_is_the_best_tier() {
        assert_eq!(parse(None), Ok(Isa::best()));
        assert_eq!(parse(Some(OsStr::new(""))), Ok(Isa::best()));
        assert!(Isa::best().supported());
        eprintln!("{}", describe_cpu());
    }

    #[test]
    fn every_tier_this_cpu_has_is_accepted_and_portable_always() {
        assert!(Isa::Portable.supported());
        for t in Isa::ALL {
            let got = parse(Some(OsStr::new(t.name())));
            if t.supported() {
                assert_eq!(got, Ok(t));
            } else {
                let e = got.unwrap_err().to_string();
                assert!(e.starts_with(&format!("PAGELAB_ISA={t} needs")), "{e}");
                assert!(
                    e.contains(&format!("this CPU's best is {}", Isa::best())),
                    "{e}"
                );
            }
        }
    }

    #[test]
    fn an_unknown_value_names_the_variable_the_value_and_the_choices() {
        let e = parse(Some(OsStr::new("sse9"))).unwrap_err();
        assert_eq!(
            e,
            IsaError::Unknown {
                value: "sse9".into()
            }
        );
        let msg = e.to_string();
        assert!(msg.starts_with("PAGELAB_ISA=\"sse9\" is not a SIMD tier: use portable, avx2 or avx512 (this CPU has portable"), "{msg}");
        // Case matters, as for every other value pagelab reads.
        assert!(parse(Some(OsStr::new("AVX2"))).is_err());
    }

    #[test]
    fn a_missing_feature_is_named() {
        let e = IsaError::Unsupported {
            tier: Isa::Avx512,
            missing: vec!["avx512bw", "avx512vl"],
        };
        assert!(e.to_string().starts_with(
            "PAGELAB_ISA=avx512 needs CPU features this CPU lacks (avx512bw, avx512vl): use "
        ));
    }

    #[test]
    fn tiers_are_ordered_and_include_their_narrower_tiers() {
        assert!(Isa::Portable < Isa::Avx2 && Isa::Avx2 < Isa::Avx512);
        for w in Isa::ALL.windows(2) {
            for f in w[0].features() {
                assert!(w[1].features().contains(f), "{} lacks {f}", w[1]);
            }
        }
        assert_eq!(list(&[Isa::Portable]), "portable");
        assert_eq!(list(&Isa::ALL), "portable, avx2 or avx512");
    }
}
