//! `host`: the preset of the CPU this program runs on, read from `/proc/cpuinfo`.
//!
//! The machine a user measures on is not always the one a preset was written for (this
//! project's own development VM was an AMD Zen 4 guest in one session and an Intel Emerald
//! Rapids guest in the next), so `pagelab bench --predict` models `host` by default, and
//! `--machine host` works wherever a machine is named. A CPU no preset describes falls back
//! to [`FALLBACK`], and the choice says so.

use crate::{preset, Machine, MachineError};

/// The name that stands for the preset of the CPU this program runs on.
pub const HOST: &str = "host";

/// The preset modelled when no preset describes the CPU.
pub const FALLBACK: &str = "zen4";

/// What `/proc/cpuinfo` says about the first CPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostCpu {
    /// `vendor_id` on x86 (`GenuineIntel`, `AuthenticAMD`); `CPU implementer` on Arm.
    pub vendor: String,
    /// `cpu family` on x86; 0 on Arm.
    pub family: u32,
    /// `model` on x86; `CPU part` on Arm.
    pub model: u32,
    /// `model name`, where the kernel gives one.
    pub model_name: String,
    /// Whether `flags` names `amx_tile`: Intel's tile matrix unit, which Xeon cores from
    /// Sapphire Rapids on have and no earlier core does.
    pub amx: bool,
}

impl std::fmt::Display for HostCpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.vendor.starts_with("0x") {
            write!(f, "Arm implementer {} part {:#x}", self.vendor, self.model)
        } else {
            write!(
                f,
                "{} family {} model {}",
                self.vendor, self.family, self.model
            )?;
            if !self.model_name.is_empty() {
                write!(f, " ({})", self.model_name)?;
            }
            Ok(())
        }
    }
}

/// The first processor's fields of a `/proc/cpuinfo` text, or what is missing.
pub fn parse_cpuinfo(text: &str) -> Result<HostCpu, String> {
    let mut cpu = HostCpu {
        vendor: String::new(),
        family: 0,
        model: 0,
        model_name: String::new(),
        amx: false,
    };
    let (mut family, mut model) = (None, None);
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() && !cpu.vendor.is_empty() {
            break; // the first processor's block ends
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        let number = |v: &str| {
            let n = match v.strip_prefix("0x") {
                Some(hex) => u32::from_str_radix(hex, 16),
                None => v.parse(),
            };
            n.map_err(|_| format!("line {}: `{key}` is `{v}`, not a number", i + 1))
        };
        match key {
            "vendor_id" | "CPU implementer" => cpu.vendor = value.to_string(),
            "cpu family" => family = Some(number(value)?),
            "model" | "CPU part" => model = Some(number(value)?),
            "model name" => cpu.model_name = value.to_string(),
            "flags" => cpu.amx = value.split_whitespace().any(|f| f == "amx_tile"),
            _ => {}
        }
    }
    if cpu.vendor.is_empty() {
        return Err("no `vendor_id` or `CPU implementer` line".into());
    }
    cpu.model = model.ok_or("no `model` or `CPU part` line")?;
    cpu.family = match family {
        Some(f) => f,
        None if cpu.vendor.starts_with("0x") => 0,
        None => return Err("no `cpu family` line".into()),
    };
    Ok(cpu)
}

/// The preset that describes `cpu`, whose kernel uses base pages of `page_bytes`.
/// Only cores whose caches and TLBs a preset gives: Zen 3 (Milan and the client parts),
/// Zen 4 (Genoa, Bergamo and Siena, and the client parts), Golden and Raptor Cove Xeons
/// (Sapphire and Emerald Rapids), Skylake-derived client cores, and Neoverse N1 at each
/// granule.
///
/// A hypervisor may report a model number that is not the host's: one KVM guest of this
/// project's (session 59) said Intel family 6 model 167, Rocket Lake's number, on a CPU
/// with AMX and AVX-512 FP16, which Rocket Lake lacks. So a CPU whose model no preset
/// names may still be recognised by its features ([`preset_by_features`]); the choice's
/// reason says which.
pub fn preset_for(cpu: &HostCpu, page_bytes: u64) -> Option<&'static str> {
    preset_by_model(cpu, page_bytes).or_else(|| preset_by_features(cpu))
}

/// The preset of `cpu`'s vendor, family and model (Arm: implementer and part).
fn preset_by_model(cpu: &HostCpu, page_bytes: u64) -> Option<&'static str> {
    match (cpu.vendor.as_str(), cpu.family, cpu.model) {
        ("AuthenticAMD", 0x19, 0x00..=0x0f | 0x20..=0x5f) => Some("zen3"),
        ("AuthenticAMD", 0x19, 0x10..=0x1f | 0x60..=0x7f | 0xa0..=0xaf) => Some("zen4"),
        ("GenuineIntel", 6, 0x8f | 0xcf) => Some("emeraldrapids"),
        ("GenuineIntel", 6, 0x4e | 0x5e | 0x8e | 0x9e) => Some("skylake"),
        ("0x41", 0, 0xd0c) => match page_bytes {
            4096 => Some("neoverse-n1-4k"),
            16384 => Some("neoverse-n1-16k"),
            65536 => Some("neoverse-n1-64k"),
            _ => None,
        },
        _ => None,
    }
}

/// The preset of an Intel family 6 CPU with AMX whatever its model: the Sapphire Rapids
/// generation of Xeon cores (`emeraldrapids`), whose TLBs and L1 and L2 the later Xeons
/// keep.
fn preset_by_features(cpu: &HostCpu) -> Option<&'static str> {
    (cpu.vendor == "GenuineIntel" && cpu.family == 6 && cpu.amx).then_some("emeraldrapids")
}

/// Which preset `host` stands for on this machine, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostChoice {
    /// The preset's name.
    pub name: &'static str,
    /// One sentence a person reads: the CPU, and whether a preset matched it.
    pub reason: String,
}

/// The choice for a CPU (or for a `/proc/cpuinfo` that could not be read or parsed).
pub fn choose(cpu: Result<HostCpu, String>, page_bytes: u64) -> HostChoice {
    match cpu {
        Ok(cpu) => match (preset_by_model(&cpu, page_bytes), preset_by_features(&cpu)) {
            (Some(name), _) => HostChoice {
                name,
                reason: format!("this CPU is {cpu}: preset {name}"),
            },
            (None, Some(name)) => HostChoice {
                name,
                reason: format!(
                    "this CPU is {cpu}, a model no preset names, with AMX (Xeon cores \
                     from Sapphire Rapids on): preset {name}"
                ),
            },
            (None, None) => HostChoice {
                name: FALLBACK,
                reason: format!(
                    "no preset describes this CPU ({cpu}); modelling {FALLBACK} \
                     (name one with --machine NAME|FILE)"
                ),
            },
        },
        Err(why) => HostChoice {
            name: FALLBACK,
            reason: format!("/proc/cpuinfo: {why}; modelling {FALLBACK}"),
        },
    }
}

/// The choice for the CPU this program runs on.
pub fn host_choice() -> HostChoice {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .map_err(|e| e.to_string())
        .and_then(|t| parse_cpuinfo(&t));
    choose(cpu, base_page_bytes())
}

/// The kernel's base page size, from the first mapping's `KernelPageSize` in
/// `/proc/self/smaps` (4K where it cannot be read: every x86 kernel's).
fn base_page_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/smaps")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("KernelPageSize:"))
                .and_then(|v| v.trim().strip_suffix("kB"))
                .and_then(|v| v.trim().parse::<u64>().ok())
        })
        .map_or(4096, |kb| kb * 1024)
}

/// The preset of the CPU this program runs on.
pub fn host_preset() -> Result<Machine, MachineError> {
    preset(host_choice().name)
}

/// The CPU this program runs on, in words (`GenuineIntel family 6 model 207 (...)`), or
/// why `/proc/cpuinfo` could not say.
pub fn host_cpu_text() -> String {
    match std::fs::read_to_string("/proc/cpuinfo")
        .map_err(|e| e.to_string())
        .and_then(|t| parse_cpuinfo(&t))
    {
        Ok(cpu) => cpu.to_string(),
        Err(e) => format!("a CPU /proc/cpuinfo does not describe ({e})"),
    }
}
