//! One description of the modelled machine, read from a TOML file or an
//! embedded preset (`configs/machines/`): the page-table geometry (levels,
//! entries per table, PTE size), the MMU's page sizes, physical memory and
//! zones (with the low and high memory of a 32-bit kernel), NUMA nodes with
//! their memory and CPUs, the kernel's per-page structure, and optionally a TLB.
//!
//! ```
//! let m = pagelab_machine::preset("ia32-pae").unwrap();
//! assert_eq!(m.geometry.levels(), 3);
//! assert_eq!(m.geometry.entry_bytes(), 8);
//! assert_eq!(m.numa.nodes.len(), 4);
//! // mem_map at 16G: 4M pages of 44 bytes, 176M of the 896M of low memory.
//! assert_eq!(m.kernel_memory().mem_map_bytes, 176 << 20);
//! ```
//!
//! The file grows by optional sections: a new part of the machine (data
//! caches, memory latency, page-walk caches) is a new `Option` field of
//! [`MachineFile`] with `#[serde(default)]`, validated in [`Machine::from_file`]
//! and carried on [`Machine`]; files without it keep their meaning.

pub mod blocks;
mod describe;
pub mod host;
pub mod measured;
mod presets;

pub use describe::KernelMemory;
pub use presets::{preset, preset_names, preset_text, presets};

use pagelab_cache::{
    CachesSpec, CostSpec, CostsSpec, FramesSpec, NestedSpec, OverlapSpec, WalkCachesSpec,
};
use pagelab_core::{Bytes, PageSize};
use pagelab_mm::kmem::KernelConfig;
use pagelab_mm::pagetable::{Geometry, GeometryError, GeometrySpec};
use pagelab_mm::phys::numa::NumaConfig;
use pagelab_mm::phys::{PcpConfig, PhysConfig};
use pagelab_mm::platform::Platform;
use pagelab_tlb::TlbConfig;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A machine file as written (TOML). See `configs/machines/` and docs/machines.md.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineFile {
    /// Short name, like `ia32-pae`.
    pub name: String,
    /// One line for people.
    #[serde(default)]
    pub description: String,
    /// Citation for the numbers.
    #[serde(default)]
    pub source: String,
    /// The page-table geometry: `base`, `bits_per_level` (level 1 first),
    /// `leaf_levels`, `max_run_shift`, `entry_bytes`.
    pub page_table: GeometrySpec,
    /// The MMU.
    pub mmu: MmuConfig,
    /// Physical memory and zones, as in `configs/phys/` (`--phys` replaces it).
    pub phys: PhysConfig,
    /// The kernel's per-page structure and page tables (default: today's x86-64 kernel).
    #[serde(default)]
    pub kernel: KernelConfig,
    /// CPUs and NUMA nodes (default: one CPU, one node holding all memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa: Option<NumaConfig>,
    /// Per-CPU hot and cold page lists (absent: not modelled; each field
    /// defaults to the paper's value: `batch = 16`, `hot = { low = 32,
    /// high = 96 }`, `cold = { low = 0, high = 32 }`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcp: Option<PcpConfig>,
    /// The TLB: a preset name (`pagelab presets`) or a table as in
    /// `configs/tlb/` (default: the default TLB; `--tlb` replaces it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tlb: Option<toml::Value>,
    /// Data caches and memory latency (with `costs`, the machine's time: docs/cost.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caches: Option<CachesSpec>,
    /// Page-walk caches (needs `caches`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub walk_caches: Option<WalkCachesSpec>,
    /// Cycles of an instruction and of a TLB hit at each level (with `caches`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub costs: Option<CostsSpec>,
    /// The nested TLB and host walk caches of a guest (`--virt nested:host=SIZE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested: Option<NestedSpec>,
    /// The core's misses in flight, with which independent misses overlap (with `caches`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<OverlapSpec>,
    /// Where the model's frames lie in physical memory, for the caches (with `caches`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frames: Option<FramesSpec>,
}

/// The MMU's part of a machine file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MmuConfig {
    /// The page sizes a TLB entry can hold, smallest (the base page) first;
    /// each must be one the page table can map.
    pub page_sizes: Vec<PageSize>,
}

/// A machine, checked: every part consistent with the others.
#[derive(Clone, Debug, PartialEq)]
pub struct Machine {
    /// Short name.
    pub name: String,
    /// One line for people.
    pub description: String,
    /// Citation for the numbers.
    pub source: String,
    /// The page-table geometry.
    pub geometry: Geometry,
    /// The MMU's page sizes, smallest first.
    pub page_sizes: Vec<PageSize>,
    /// Physical memory and zones.
    pub phys: PhysConfig,
    /// The kernel's per-page structure and page tables.
    pub kernel: KernelConfig,
    /// CPUs and NUMA nodes.
    pub numa: NumaConfig,
    /// Per-CPU hot and cold page lists, when the machine models them.
    pub pcp: Option<PcpConfig>,
    /// The machine's TLB, if the file gives one.
    pub tlb: Option<TlbConfig>,
    /// Caches, walk caches and latencies, if the file gives them: what
    /// translation costs in time on this machine.
    pub cost: Option<CostSpec>,
}

/// Why a machine could not be loaded. Every message names the file (or
/// preset) and, for a value that is not allowed, the field and what is.
#[derive(Debug, thiserror::Error)]
pub enum MachineError {
    /// The file could not be read.
    #[error("cannot read machine file {path}: {err}")]
    Io {
        /// The file.
        path: String,
        /// The operating-system error.
        err: std::io::Error,
    },
    /// The TOML is malformed, has an unknown field or a value of the wrong type.
    #[error("{file}: {message}")]
    Parse {
        /// The file (or preset).
        file: String,
        /// The TOML parser's message, naming the line and the field.
        message: String,
    },
    /// A value is well-formed but not allowed, or contradicts another.
    #[error("{file}: field `{field}`: {message}")]
    Invalid {
        /// The file (or preset).
        file: String,
        /// The field, as written in the file (`mmu.page_sizes`, `phys.highmem`).
        field: String,
        /// What is wrong and what is allowed.
        message: String,
    },
    /// No preset has this name.
    #[error("unknown machine `{name}`: the machines are {}; `host` (this CPU's preset); or give a path ending in .toml", valid.join(", "))]
    UnknownPreset {
        /// The name asked for.
        name: String,
        /// Every preset name.
        valid: Vec<String>,
    },
}

impl Machine {
    /// Parses and checks TOML text; `origin` names the file in messages.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Machine, MachineError> {
        let file: MachineFile = toml::from_str(text).map_err(|e| MachineError::Parse {
            file: origin.to_string(),
            message: e.to_string().trim_end().to_string(),
        })?;
        Machine::from_file(file, origin)
    }

    /// Reads and checks a machine file.
    pub fn load(path: &Path) -> Result<Machine, MachineError> {
        let text = std::fs::read_to_string(path).map_err(|err| MachineError::Io {
            path: path.display().to_string(),
            err,
        })?;
        Machine::from_toml_str(&text, &path.display().to_string())
    }

    /// Checks a parsed file: each part on its own, then against the others.
    pub fn from_file(f: MachineFile, origin: &str) -> Result<Machine, MachineError> {
        let bad = |field: &str, message: String| MachineError::Invalid {
            file: origin.to_string(),
            field: field.to_string(),
            message,
        };
        if f.name.trim().is_empty() {
            return Err(bad(
                "name",
                "must not be empty: give the machine a short name like \"ia32-pae\"".into(),
            ));
        }
        let geometry = Geometry::from_spec(&f.page_table).map_err(|e| match e {
            GeometryError::Field { field, why } => bad(&format!("page_table.{field}"), why),
        })?;
        check_page_sizes(&geometry, &f.mmu.page_sizes).map_err(|m| bad("mmu.page_sizes", m))?;
        let mut m = Machine {
            name: f.name,
            description: f.description,
            source: f.source,
            geometry,
            page_sizes: f.mmu.page_sizes,
            numa: f
                .numa
                .unwrap_or_else(|| NumaConfig::uniform(f.phys.memory, 1)),
            phys: f.phys,
            kernel: f.kernel,
            pcp: f.pcp,
            tlb: None,
            cost: None,
        };
        m.check().map_err(|(field, message)| bad(&field, message))?;
        m.tlb = match f.tlb {
            None => None,
            Some(toml::Value::String(name)) => Some(
                pagelab_tlb::preset(&name).map_err(|e| bad("tlb", e.to_string()))?,
            ),
            Some(v @ toml::Value::Table(_)) => {
                let t: TlbConfig = v.try_into().map_err(|e: toml::de::Error| {
                    bad("tlb", e.to_string().trim_end().to_string())
                })?;
                t.validate(&format!("{origin} [tlb]"))
                    .map_err(|e| bad("tlb", e.to_string()))?;
                Some(t)
            }
            Some(_) => {
                return Err(bad("tlb", "write a TLB preset name (see `pagelab presets`) or a [tlb] table as in configs/tlb/".into()))
            }
        };
        m.cost = cost_spec(
            f.caches,
            f.walk_caches,
            f.costs,
            f.nested,
            f.overlap,
            f.frames,
        )
        .map_err(|(field, message)| bad(&field, message))?;
        if let Some(c) = &m.cost {
            let tlb = match &m.tlb {
                Some(t) => t.clone(),
                None => pagelab_tlb::preset(pagelab_tlb::DEFAULT_PRESET)
                    .map_err(|e| bad("tlb", e.to_string()))?,
            };
            let smallest = m.page_sizes[0].bytes();
            c.check(smallest, tlb_levels(&tlb), m.geometry.levels() as usize)
                .map_err(|e| bad(&e.field, e.why))?;
        }
        Ok(m)
    }

    /// The checks that tie the parts together, as (field, message); run again
    /// after an override ([`Machine::set_phys`]).
    fn check(&self) -> Result<(), (String, String)> {
        let phys_err = |e: pagelab_mm::phys::ConfigError| (format!("phys.{}", e.field), e.message);
        self.phys.validate().map_err(phys_err)?;
        let base = self.geometry.base();
        if !self.phys.memory.0.is_multiple_of(base.bytes()) {
            return Err((
                "phys.memory".into(),
                format!(
                    "{} is not a whole number of {base} base pages",
                    self.phys.memory
                ),
            ));
        }
        if let Some(h) = self.phys.highmem {
            if self.geometry.va_bits() > 32 {
                return Err((
                    "phys.highmem".into(),
                    format!("{h}: only a 32-bit kernel has high memory, and this page table translates {} bits; leave highmem out", self.geometry.va_bits()),
                ));
            }
        }
        self.kernel
            .validate()
            .map_err(|e| (e.field.to_string(), e.message))?;
        self.numa
            .validate(self.phys.memory)
            .map_err(|e| (e.field.to_string(), e.message))?;
        Ok(())
    }

    /// Replaces the physical memory (`--phys`), checked against the rest of
    /// the machine. When the memory size changes, a machine with several
    /// nodes spreads it evenly over them (each node keeps its CPUs).
    pub fn set_phys(&mut self, phys: PhysConfig, origin: &str) -> Result<(), MachineError> {
        if phys.memory != self.phys.memory {
            let n = self.numa.nodes.len() as u64;
            let each = phys.memory.0 / n;
            if each * n != phys.memory.0 || !each.is_multiple_of(PageSize::MIN.bytes()) {
                return Err(MachineError::Invalid {
                    file: origin.to_string(),
                    field: "memory".into(),
                    message: format!(
                        "{} cannot be spread evenly over the {n} NUMA nodes of machine {}: give a multiple of {n} x {}",
                        phys.memory, self.name, PageSize::MIN
                    ),
                });
            }
            for node in &mut self.numa.nodes {
                node.memory = Bytes(each);
            }
        }
        self.phys = phys;
        self.check()
            .map_err(|(field, message)| MachineError::Invalid {
                file: origin.to_string(),
                field,
                message,
            })
    }

    /// What a run of the model takes from the machine besides its memory.
    pub fn platform(&self) -> Platform {
        Platform {
            geometry: self.geometry,
            kernel: self.kernel.clone(),
            numa: self.numa.clone(),
            placement: Default::default(),
            pcp: self.pcp,
        }
    }

    /// The sizes the page table can map (the MMU's sizes and runs of entries).
    pub fn mappable_sizes(&self) -> Vec<PageSize> {
        self.geometry.sizes()
    }

    /// Checks sizes asked for on the command line: each must be one the page
    /// table can map. The error lists those it can.
    pub fn check_sizes(&self, sizes: &[PageSize]) -> Result<(), String> {
        match sizes
            .iter()
            .find(|s| self.geometry.placement(**s).is_none())
        {
            None => Ok(()),
            Some(s) => Err(format!(
                "machine {} cannot map {s} pages: its page table maps {}",
                self.name,
                list(&self.mappable_sizes())
            )),
        }
    }
}

/// The levels of a TLB (1, or 2 with any second level), which the time's
/// `costs.tlb_hit` gives one value each.
pub fn tlb_levels(t: &TlbConfig) -> usize {
    1 + usize::from(t.l2.is_some() || t.l2i.is_some() || t.l2d.is_some())
}

/// The time sections of a file, which come together: `caches` and `costs`
/// both or neither, `walk_caches`, `nested` and `overlap` only with them.
fn cost_spec(
    caches: Option<CachesSpec>,
    walk_caches: Option<WalkCachesSpec>,
    costs: Option<CostsSpec>,
    nested: Option<NestedSpec>,
    overlap: Option<OverlapSpec>,
    frames: Option<FramesSpec>,
) -> Result<Option<CostSpec>, (String, String)> {
    if caches.is_none() && costs.is_none() && overlap.is_some() {
        return Err(("overlap".into(), "given without [caches] and [costs]: misses only overlap in the data caches they come from".into()));
    }
    if caches.is_none() && costs.is_none() && frames.is_some() {
        return Err((
            "frames".into(),
            "given without [caches] and [costs]: where frames lie only matters to the data caches"
                .into(),
        ));
    }
    match (caches, costs) {
        (Some(caches), Some(costs)) => Ok(Some(CostSpec {
            caches,
            walk_caches: walk_caches.unwrap_or_default(),
            costs,
            nested,
            overlap,
            frames: frames.unwrap_or_default(),
        })),
        (Some(_), None) => Err(("costs".into(), "missing: a machine with [caches] needs [costs] (base_cpi, and tlb_hit with one value per TLB level)".into())),
        (None, Some(_)) => Err(("caches".into(), "missing: a machine with [costs] needs [caches] (l1d, optional l2 and l3, memory_latency)".into())),
        (None, None) => match (walk_caches, nested) {
            (None, None) => Ok(None),
            (Some(_), _) => Err(("walk_caches".into(), "given without [caches] and [costs]: walk caches only count with the data caches they read through".into())),
            (None, Some(_)) => Err(("nested".into(), "given without [caches] and [costs]: nested paging only counts with the data caches its walks read through".into())),
        },
    }
}

/// Sizes written as people write them, comma-separated.
pub(crate) fn list(sizes: &[PageSize]) -> String {
    sizes
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The MMU's sizes: at least one, increasing, the base page first, each one
/// the geometry can map.
fn check_page_sizes(g: &Geometry, sizes: &[PageSize]) -> Result<(), String> {
    if sizes.first() != Some(&g.base()) {
        return Err(format!(
            "list the page sizes smallest first, starting with the base page {} of page_table.base",
            g.base()
        ));
    }
    if sizes.windows(2).any(|w| w[0] >= w[1]) {
        return Err("list each page size once, smallest first".into());
    }
    match sizes.iter().find(|s| g.placement(**s).is_none()) {
        Some(s) => Err(format!(
            "{s} cannot be mapped by this page table: its leaf entries and runs of them map {}",
            list(&g.sizes())
        )),
        None => Ok(()),
    }
}

/// A machine preset name, `host` (the preset of the CPU this runs on: [`host`]), or a
/// path to a machine file (anything ending in `.toml`).
pub fn resolve(arg: &str) -> Result<Machine, MachineError> {
    if arg.ends_with(".toml") {
        Machine::load(Path::new(arg))
    } else if arg == host::HOST {
        host::host_preset()
    } else {
        preset(arg)
    }
}
