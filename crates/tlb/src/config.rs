//! TLB configurations: serde structs read from TOML, validation, and `describe`.

use crate::TlbError;
use pagelab_core::PageSize;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The largest array pagelab builds (entries).
pub const MAX_ENTRIES: usize = 1 << 24;

/// A whole TLB organisation: split L1, and optionally an L2 that is either
/// unified (`[l2]`) or split per side (`[l2i]` and `[l2d]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlbConfig {
    /// Short name, like `skylake`.
    pub name: String,
    /// One line for people.
    #[serde(default)]
    pub description: String,
    /// Citation for the numbers.
    #[serde(default)]
    pub source: String,
    /// Instruction-side first level.
    pub l1i: LevelConfig,
    /// Data-side first level.
    pub l1d: LevelConfig,
    /// Unified second level, shared by both sides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2: Option<LevelConfig>,
    /// Instruction-side second level (with `l2d`, instead of `l2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2i: Option<LevelConfig>,
    /// Data-side second level (with `l2i`, instead of `l2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2d: Option<LevelConfig>,
    /// Address-space IDs the kernel tags entries with (x86's PCIDs, of which
    /// Linux uses 6 per CPU; arm64's ASIDs): a process switch keeps the
    /// entries of the last N processes instead of emptying the TLB. Absent:
    /// every switch flushes. `--asids N` sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asids: Option<u32>,
}

/// One level: one or more arrays looked up together, each for some page sizes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LevelConfig {
    /// The arrays of this level.
    pub arrays: Vec<ArrayConfig>,
}

/// One TLB array.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArrayConfig {
    /// Number of entries.
    pub entries: usize,
    /// Associativity; omitted means fully associative.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ways: Option<usize>,
    /// Page sizes this array is built for; omitted means every size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sizes: Option<Vec<PageSize>>,
    /// What the array does with a page of a size it does not list.
    #[serde(default)]
    pub other_sizes: OtherSizes,
    /// How a set-associative array picks a page's set.
    #[serde(default, skip_serializing_if = "SetIndex::is_linear")]
    pub index: SetIndex,
    /// Which entry of a full set a set-associative array's miss replaces.
    #[serde(default, skip_serializing_if = "Replacement::is_lru")]
    pub replacement: Replacement,
}

/// Which entry of a full set a miss replaces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Replacement {
    /// The least recently used: a loop over one page more than a set holds then misses
    /// every time.
    #[default]
    Lru,
    /// A way picked at random (a fixed pseudo-random sequence per array, so runs repeat):
    /// the same loop then still hits about half the time. AMD Zen 4's second-level data
    /// TLB does that on this project's guest: 32 pages a set over its 24 ways hit 52% of
    /// the time, where LRU gives none and random replacement 54% (docs/cost.md, session 35).
    Random,
}

impl Replacement {
    /// Whether this is the default, [`Replacement::Lru`].
    pub fn is_lru(&self) -> bool {
        *self == Replacement::Lru
    }
}

/// How a set-associative array picks the set of a page number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SetIndex {
    /// The page number modulo the sets (its low bits).
    #[default]
    Linear,
    /// The low bits XOR the as many bits above them: Intel's second-level TLB since
    /// Skylake, reverse-engineered as "XOR-7" over its 128 sets (Gras et al., "Translation
    /// Leak-aside Buffer", USENIX Security 2018). Pages a power-of-two stride apart then
    /// spread over every set instead of piling into a few.
    Xor,
}

impl SetIndex {
    /// Whether this is the default, [`SetIndex::Linear`].
    pub fn is_linear(&self) -> bool {
        *self == SetIndex::Linear
    }
}

/// How an array caches a page of a size it does not list, when it is the array
/// chosen for that size (the array listing the largest size not above it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OtherSizes {
    /// One entry per page, as if the hardware had been built for that size: what
    /// the page-size study needs for 8K..1M pages that x86 lacks.
    #[default]
    Hold,
    /// One entry per fragment: the array caches the fragment of its listed size
    /// containing the address (the Pentium 4 I-TLB with 4M pages; AMD's
    /// "smashing" of 1G pages into 2M entries).
    Fragment,
}

/// Which level of a configuration: used in messages and stats.
pub(crate) const LEVEL_NAMES: [&str; 5] = ["l1i", "l1d", "l2", "l2i", "l2d"];

impl TlbConfig {
    /// Parses and validates TOML text; `origin` names the file in messages.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<TlbConfig, TlbError> {
        let cfg: TlbConfig = toml::from_str(text).map_err(|e| TlbError::Parse {
            file: origin.to_string(),
            message: e.to_string().trim_end().to_string(),
        })?;
        cfg.validate(origin)?;
        Ok(cfg)
    }

    /// The levels present, with their names, in the order l1i, l1d, l2, l2i, l2d.
    pub fn levels(&self) -> Vec<(&'static str, &LevelConfig)> {
        let all = [
            Some(&self.l1i),
            Some(&self.l1d),
            self.l2.as_ref(),
            self.l2i.as_ref(),
            self.l2d.as_ref(),
        ];
        LEVEL_NAMES
            .iter()
            .zip(all)
            .filter_map(|(n, l)| l.map(|l| (*n, l)))
            .collect()
    }

    /// Checks every rule; `origin` names the file in the error.
    pub fn validate(&self, origin: &str) -> Result<(), TlbError> {
        let err = |place: &str, message: String| TlbError::Invalid {
            file: origin.to_string(),
            place: place.to_string(),
            message,
        };
        if self.name.trim().is_empty() {
            return Err(err(
                "name",
                "name must not be empty: give the configuration a short name like \"skylake\""
                    .into(),
            ));
        }
        if self.l2.is_some() && (self.l2i.is_some() || self.l2d.is_some()) {
            return Err(err(
                "top level",
                "[l2] (one L2 shared by both sides) cannot be combined with [l2i]/[l2d] (one L2 per side): keep one form".into(),
            ));
        }
        if self.l2i.is_some() != self.l2d.is_some() {
            let (has, lacks) = if self.l2i.is_some() {
                ("l2i", "l2d")
            } else {
                ("l2d", "l2i")
            };
            return Err(err(
                "top level",
                format!("[{has}] needs [{lacks}] too: a split L2 has one level per side; for one L2 shared by both sides write [l2]"),
            ));
        }
        for (name, level) in self.levels() {
            validate_level(name, level).map_err(|(place, message)| err(&place, message))?;
        }
        if self.asids == Some(0) {
            return Err(err(
                "asids",
                "0 is not allowed: give at least 1 address-space ID, or leave asids out for a TLB flushed at every process switch".into(),
            ));
        }
        Ok(())
    }

    /// A one-line-per-level summary for people: a title line, then one line per level.
    pub fn describe(&self) -> String {
        let mut out = self.name.clone();
        if !self.description.is_empty() {
            out.push_str(" - ");
            out.push_str(&self.description);
        }
        for (name, level) in self.levels() {
            let label = match name {
                "l2" => "L2 (unified)".to_string(),
                n => n.to_uppercase(),
            };
            let arrays: Vec<String> = level.arrays.iter().map(describe_array).collect();
            out.push_str(&format!("\n  {label:<12} {}", arrays.join(" + ")));
        }
        if let Some(n) = self.asids {
            out.push_str(&format!(
                "\n  {:<12} {n}, kept across process switches",
                "ASIDs"
            ));
        }
        out
    }
}

fn describe_array(a: &ArrayConfig) -> String {
    let org = match a.ways {
        Some(w) if w != a.entries => format!("{w}-way"),
        _ => "FA".to_string(),
    };
    let sizes = match &a.sizes {
        None => "all sizes".to_string(),
        Some(list) => {
            let names: Vec<String> = list.iter().map(|s| s.to_string()).collect();
            let other = match a.other_sizes {
                OtherSizes::Hold => "",
                OtherSizes::Fragment => ", others fragmented",
            };
            format!("{}{other}", names.join("/"))
        }
    };
    let index = match a.index {
        SetIndex::Linear => "",
        SetIndex::Xor => ", XOR-indexed",
    };
    let replacement = match a.replacement {
        Replacement::Lru => "",
        Replacement::Random => ", random replacement",
    };
    format!("{} entries {org}{index}{replacement} ({sizes})", a.entries)
}

type Problem = (String, String);

fn validate_level(name: &str, level: &LevelConfig) -> Result<(), Problem> {
    let lv = format!("[{name}]");
    if level.arrays.is_empty() {
        return Err((
            lv,
            "arrays must list at least one array, like arrays = [{ entries = 64 }]".into(),
        ));
    }
    let mut owner: Vec<(PageSize, usize)> = Vec::new();
    let mut catch_all: Option<usize> = None;
    for (i, a) in level.arrays.iter().enumerate() {
        let place = |field: &str| format!("[{name}] arrays[{i}].{field}");
        validate_geometry(a).map_err(|(f, m)| (place(f), m))?;
        match &a.sizes {
            None => {
                if let Some(j) = catch_all {
                    return Err((
                        place("sizes"),
                        format!("only one array per level may omit sizes, and arrays[{j}] already holds every unlisted size: list this array's sizes"),
                    ));
                }
                if a.other_sizes == OtherSizes::Fragment {
                    return Err((
                        place("other_sizes"),
                        "other_sizes = \"fragment\" needs a sizes list: an array without one holds every size whole".into(),
                    ));
                }
                catch_all = Some(i);
            }
            Some(list) if list.is_empty() => {
                return Err((
                    place("sizes"),
                    "sizes must list at least one page size (like [\"4K\", \"2M\"]), or be omitted for an array that holds every size".into(),
                ));
            }
            Some(list) => {
                for (k, s) in list.iter().enumerate() {
                    if list[..k].contains(s) {
                        return Err((place("sizes"), format!("lists {s} twice")));
                    }
                    if let Some((_, j)) = owner.iter().find(|(o, _)| o == s) {
                        return Err((
                            place("sizes"),
                            format!("{s} is already listed by arrays[{j}]: each page size may be listed by one array per level"),
                        ));
                    }
                    owner.push((*s, i));
                }
            }
        }
    }
    if catch_all.is_none() && !owner.iter().any(|(s, _)| *s == PageSize::K4) {
        return Err((
            lv,
            "no array can hold 4K pages: list \"4K\" in one array's sizes, or leave one array without sizes to hold every size".into(),
        ));
    }
    Ok(())
}

fn validate_geometry(a: &ArrayConfig) -> Result<(), (&'static str, String)> {
    if a.entries == 0 || a.entries > MAX_ENTRIES {
        return Err((
            "entries",
            format!(
                "entries is {}, but must be from 1 to {MAX_ENTRIES}",
                a.entries
            ),
        ));
    }
    let Some(w) = a.ways.filter(|&w| w != a.entries) else {
        if a.index != SetIndex::Linear {
            return Err((
                "index",
                "a fully associative array has no sets to index: give ways, or omit index".into(),
            ));
        }
        if a.replacement != Replacement::Lru {
            return Err((
                "replacement",
                "replacement = \"random\" is for a set-associative array (give ways); a fully associative one replaces its least recently used entry".into(),
            ));
        }
        if a.ways == Some(0) {
            return Err((
                "ways",
                "ways must be at least 1 (omit ways for a fully associative array)".into(),
            ));
        }
        return Ok(());
    };
    if w == 0 {
        return Err((
            "ways",
            "ways must be at least 1 (omit ways for a fully associative array)".into(),
        ));
    }
    if w > a.entries {
        return Err((
            "ways",
            format!(
                "ways ({w}) cannot exceed entries ({}); omit ways for a fully associative array",
                a.entries
            ),
        ));
    }
    if a.entries / w * w != a.entries {
        return Err((
            "ways",
            format!("entries ({}) must be a multiple of ways ({w})", a.entries),
        ));
    }
    let sets = a.entries / w;
    if !sets.is_power_of_two() {
        return Err((
            "ways",
            format!(
                "entries / ways = {sets} sets, but the number of sets must be a power of two (1, 2, 4, 8, ...) because a page's set is its page number modulo the sets"
            ),
        ));
    }
    Ok(())
}

/// Reads, parses and validates a TLB configuration file.
pub fn load(path: &Path) -> Result<TlbConfig, TlbError> {
    let text = std::fs::read_to_string(path).map_err(|err| TlbError::Io {
        path: path.to_path_buf(),
        err,
    })?;
    TlbConfig::from_toml_str(&text, &path.display().to_string())
}
