//! The model's configuration from the words of the command line (or of the
//! Python API's keyword arguments, which carry the same words and get the
//! same messages).

use anyhow::{Context, Result};
use pagelab_core::PageSize;
use pagelab_engine::{CostConfig, CostMachine, PolicyConfig, StudyConfig};
use pagelab_machine::Machine;

/// The study configuration: `page_sizes` as `4K,64K,2M`, `tlb` a preset name or a TOML file.
pub fn study_config(page_sizes: &str, tlb: &str) -> Result<StudyConfig> {
    let page_sizes = pagelab_core::parse_page_sizes(page_sizes)
        .with_context(|| format!("--page-sizes {page_sizes}"))?;
    let tlb = pagelab_tlb::resolve(tlb).with_context(|| format!("--tlb {tlb}"))?;
    Ok(StudyConfig { page_sizes, tlb })
}

/// The study configuration and the machine when `machine` names one (a
/// preset or a machine file): its page sizes and TLB are the defaults of
/// `page_sizes` and `tlb`, and sizes asked for must be ones it can map.
/// Without a machine, the defaults are today's.
pub fn machine_study_config(
    machine: Option<&str>,
    page_sizes: Option<&str>,
    tlb: Option<&str>,
) -> Result<(StudyConfig, Option<Machine>)> {
    let machine = machine
        .map(|name| pagelab_machine::resolve(name).with_context(|| format!("--machine {name}")))
        .transpose()?;
    let sizes = match (page_sizes, &machine) {
        (Some(text), _) => {
            let sizes = pagelab_core::parse_page_sizes(text)
                .with_context(|| format!("--page-sizes {text}"))?;
            if let Some(m) = &machine {
                m.check_sizes(&sizes)
                    .map_err(|e| anyhow::anyhow!("--page-sizes {text}: {e}"))?;
            }
            sizes
        }
        (None, Some(m)) => m.page_sizes.clone(),
        (None, None) => pagelab_core::parse_page_sizes(DEFAULT_PAGE_SIZES)?,
    };
    let tlb = match (tlb, machine.as_ref().and_then(|m| m.tlb.clone())) {
        (Some(t), _) => pagelab_tlb::resolve(t).with_context(|| format!("--tlb {t}"))?,
        (None, Some(t)) => t,
        (None, None) => pagelab_tlb::preset(pagelab_tlb::DEFAULT_PRESET)?,
    };
    let cfg = StudyConfig {
        page_sizes: sizes,
        tlb,
    };
    Ok((cfg, machine))
}

/// What times the runs: the machine's `[caches]` and `[costs]` with the
/// study's TLB, and nested paging when `virt` is `nested:host=SIZE`. None
/// when the machine gives no caches (then `virt` is an error).
pub fn cost_config(
    machine: Option<&Machine>,
    study: &StudyConfig,
    virt: Option<&str>,
) -> Result<Option<CostConfig>> {
    let timed = match machine {
        Some(m) => CostMachine::new(m, &study.tlb)
            .map_err(|e| anyhow::anyhow!("--machine {}: {e}", m.name))?,
        None => None,
    };
    let Some(machine) = timed else {
        if let Some(v) = virt {
            anyhow::bail!(
                "--virt {v}: nested paging needs a machine with caches and latencies; give --machine with a [caches] section, such as zen4 (see `pagelab machines`)"
            );
        }
        return Ok(None);
    };
    let nested_host = match virt {
        None => None,
        Some(v) => Some(nested_host(&machine, v)?),
    };
    Ok(Some(CostConfig {
        machine,
        nested_host,
    }))
}

/// Whether this process has not yet said that machine `name` gives no host page: the note
/// is said once per machine and process, since a sweep (Python's, or a worker's) asks for
/// many configurations of one machine.
fn first_time_for(name: &str) -> bool {
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut said = SAID
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let first = !said.iter().any(|n| n == name);
    if first {
        said.push(name.to_string());
    }
    first
}

/// The host page of `--virt v`: `nested:host=SIZE`, or `nested` alone for the machine's
/// `[nested] host_page` (what `pagelab machines --measure` found), 2M where the file gives
/// none (said on standard error: KVM backs a guest with transparent huge pages when the
/// host has them).
fn nested_host(machine: &CostMachine, v: &str) -> Result<PageSize> {
    if v == "nested" {
        let found = machine.cost.nested.as_ref().and_then(|n| n.host_page);
        return Ok(found.unwrap_or_else(|| {
            if first_time_for(&machine.name) {
                eprintln!(
                    "pagelab: --virt nested: machine {} gives no [nested] host_page (`pagelab \
                     machines --measure` finds it); 2M host pages assumed",
                    machine.name
                );
            }
            PageSize::M2
        }));
    }
    let size = v.strip_prefix("nested:host=").ok_or_else(|| {
        anyhow::anyhow!(
            "--virt {v}: write nested (the machine's host page), nested:host=4K, \
             nested:host=2M or nested:host=1G"
        )
    })?;
    size.parse().with_context(|| format!("--virt {v}"))
}

/// Default page sizes of a study without a machine.
pub const DEFAULT_PAGE_SIZES: &str = "4K,8K,16K,32K,64K,128K,256K,2M";

/// What the memory-management model runs take besides the TLB.
#[derive(Clone, Debug, Default)]
pub struct PolicyArgs<'a> {
    /// Policies as written (`base:4K`, `linux-thp:enabled=always`).
    pub policies: &'a [String],
    /// `--phys FILE.toml`.
    pub phys: Option<&'a std::path::Path>,
    /// `--memory SIZE`.
    pub memory: Option<&'a str>,
    /// `--strict`.
    pub strict: bool,
    /// `--cow whole|base`.
    pub cow: &'a str,
    /// `--machine`: its memory (which `phys` and `memory` replace), geometry,
    /// kernel and nodes.
    pub machine: Option<&'a Machine>,
    /// `--page-cluster N`: pages per struct page, replacing the machine's.
    pub page_cluster: Option<u32>,
    /// `--highpte`: level-1 page tables in high memory.
    pub highpte: bool,
    /// `--bind CPUS`: the CPUs processes are bound to, placed round-robin.
    pub bind: Option<&'a str>,
    /// `--mempolicy POLICY`: the memory policy on a NUMA machine.
    pub mempolicy: Option<&'a str>,
    /// `--pcp on|off|batch=N,hot=LOW-HIGH,cold=LOW-HIGH`: the per-CPU page lists.
    pub pcp: Option<&'a str>,
    /// `--asids N`: TLB entries kept across switches under N tags.
    pub asids: Option<u32>,
    /// `--page-cache warm|cold`.
    pub page_cache: Option<&'a str>,
    /// `--fault-around SIZE`.
    pub fault_around: Option<&'a str>,
}

/// Pages readahead reads around a page-cache miss by default (`read_ahead_kb` 128K).
const DEFAULT_READAROUND_PAGES: u64 = 32;

/// Linux's file faults as `--page-cache` and `--fault-around` ask, or the model's plain
/// ones (each fault maps and reads its own page) when neither is given.
pub fn file_faults(
    page_cache: Option<&str>,
    fault_around: Option<&str>,
) -> Result<pagelab_mm::fault_around::FileFaults> {
    if page_cache.is_none() && fault_around.is_none() {
        return Ok(Default::default());
    }
    let warm = match page_cache.unwrap_or("warm") {
        "warm" => true,
        "cold" => false,
        other => anyhow::bail!("--page-cache {other}: write warm or cold"),
    };
    let window = match fault_around {
        None => 64 << 10,
        Some(s) => s
            .parse::<pagelab_core::PageSize>()
            .map_err(|e| anyhow::anyhow!("--fault-around {s}: {e}"))?
            .bytes(),
    };
    Ok(pagelab_mm::fault_around::FileFaults::linux(
        window,
        DEFAULT_READAROUND_PAGES,
        warm,
    ))
}

/// The configuration of the policy runs over the TLB of `study`.
pub fn policy_config(study: &StudyConfig, a: &PolicyArgs<'_>) -> Result<PolicyConfig> {
    let policies = a
        .policies
        .iter()
        .map(|p| p.parse().with_context(|| format!("--policy {p}")))
        .collect::<Result<Vec<_>>>()?;
    let (phys, platform) = match a.machine {
        Some(m) => {
            let mut m = m.clone();
            if let Some(n) = a.page_cluster {
                m.kernel.page_cluster = n;
            }
            m.kernel.highpte |= a.highpte;
            m.kernel.validate().map_err(|e| {
                anyhow::anyhow!(
                    "--page-cluster {}: {}",
                    a.page_cluster.unwrap_or(1),
                    e.message
                )
            })?;
            let (phys, mut platform) = machine_phys(m, a.phys, a.memory)?;
            if let Some(p) = &mut platform {
                p.placement = placement(p, a.bind, a.mempolicy)?;
                if let Some(spec) = a.pcp {
                    p.pcp = pcp(p.pcp, spec)?;
                }
            }
            (phys, platform)
        }
        None => (phys_config(a.phys, a.memory)?, None),
    };
    let cow = a
        .cow
        .parse()
        .map_err(|e: String| anyhow::anyhow!("--cow {}: {e}", a.cow))?;
    Ok(PolicyConfig {
        policies,
        tlb: pagelab_tlb::TlbConfig {
            asids: a.asids.or(study.tlb.asids),
            ..study.tlb.clone()
        },
        phys,
        strict: a.strict,
        cow,
        file_faults: file_faults(a.page_cache, a.fault_around)?,
        platform,
        exit_mappings: false,
    })
}

/// `--bind` and `--mempolicy` on the machine of `p`, checked against its
/// CPUs and nodes.
fn placement(
    p: &pagelab_mm::platform::Platform,
    bind: Option<&str>,
    mempolicy: Option<&str>,
) -> Result<pagelab_mm::placement::Placement> {
    let mut out = pagelab_mm::placement::Placement::default();
    if bind.is_none() && mempolicy.is_none() {
        return Ok(out);
    }
    if p.numa.nodes.len() < 2 {
        let flag = if bind.is_some() {
            "--bind"
        } else {
            "--mempolicy"
        };
        anyhow::bail!("{flag}: the machine has one NUMA node; --bind and --mempolicy need a machine of several nodes (ia32-pae, or a file with [numa] nodes)");
    }
    if let Some(c) = bind {
        out.cpus = Some(parse_cpus(c).map_err(|e| anyhow::anyhow!("--bind {c}: {e}"))?);
    }
    if let Some(m) = mempolicy {
        out.policy = m
            .parse::<pagelab_mm::phys::nodes::MemPolicy>()
            .map_err(|e| anyhow::anyhow!("--mempolicy {m}: {e}"))?;
    }
    out.check(&p.numa).map_err(anyhow::Error::msg)?;
    Ok(out)
}

/// `--pcp SPEC` over the machine's lists `machine`: `on` keeps them (or
/// takes the paper's), `off` drops them, settings change them (from the
/// paper's when the machine has none).
fn pcp(
    machine: Option<pagelab_mm::phys::PcpConfig>,
    spec: &str,
) -> Result<Option<pagelab_mm::phys::PcpConfig>> {
    Ok(match spec {
        "off" => None,
        "on" => Some(machine.unwrap_or_default()),
        _ => Some(
            machine
                .unwrap_or_default()
                .with_overrides(spec)
                .map_err(|e| anyhow::anyhow!("--pcp {spec}: {e}"))?,
        ),
    })
}

/// A CPU list: `0,2`, `0-3`, `0-3,8`.
fn parse_cpus(s: &str) -> Result<Vec<u32>, String> {
    let num = |t: &str| {
        t.trim()
            .parse::<u32>()
            .map_err(|_| format!("`{t}` is not a CPU number; write a list like 0,2 or 0-3"))
    };
    let mut out = Vec::new();
    for part in s.split(',') {
        match part.split_once('-') {
            Some((a, b)) if num(a)? <= num(b)? => out.extend(num(a)?..=num(b)?),
            Some(_) => return Err(format!("`{part}` is an empty range: write LOW-HIGH")),
            None => out.push(num(part)?),
        }
    }
    Ok(out)
}

/// The machine's physical memory, replaced by `--phys` and resized by
/// `--memory` (checked against the rest of the machine), and what else a run
/// takes from the machine.
fn machine_phys(
    mut m: Machine,
    file: Option<&std::path::Path>,
    memory: Option<&str>,
) -> Result<(
    pagelab_mm::phys::PhysConfig,
    Option<pagelab_mm::platform::Platform>,
)> {
    if file.is_some() || memory.is_some() {
        let mut phys = match file {
            Some(_) => phys_config(file, None)?,
            None => m.phys.clone(),
        };
        if let Some(text) = memory {
            phys.memory = pagelab_core::Bytes(
                pagelab_core::parse_bytes(text).with_context(|| format!("--memory {text}"))?,
            );
        }
        let origin = match (file, memory) {
            (Some(p), _) => format!("--phys {}", p.display()),
            (None, _) => format!("--memory {}", memory.unwrap_or_default()),
        };
        m.set_phys(phys, &origin)
            .with_context(|| format!("--machine {}", m.name))?;
    }
    Ok((m.phys.clone(), Some(m.platform())))
}

/// The modelled machine's physical memory: `--phys FILE.toml`, else 4G, with
/// `--memory` overriding the size.
fn phys_config(
    file: Option<&std::path::Path>,
    memory: Option<&str>,
) -> Result<pagelab_mm::phys::PhysConfig> {
    use pagelab_mm::phys::PhysConfig;
    let mut phys = match file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--phys {}", path.display()))?;
            toml::from_str::<PhysConfig>(&text)
                .with_context(|| format!("--phys {}", path.display()))?
        }
        None => PhysConfig::new(pagelab_core::Bytes(4 << 30)),
    };
    if let Some(m) = memory {
        phys.memory = pagelab_core::Bytes(
            pagelab_core::parse_bytes(m).with_context(|| format!("--memory {m}"))?,
        );
    }
    let origin = file.map_or_else(
        || "--memory".to_string(),
        |p| format!("--phys {}", p.display()),
    );
    phys.validate().with_context(|| origin)?;
    Ok(phys)
}

/// The largest reference a trace may hold, as `--max-ref-size` (or `max_ref_size=` in Python)
/// writes it: a size up to 4G - 1 (the largest a reference can hold).
pub fn max_ref_size(text: &str) -> Result<u32> {
    let bytes = pagelab_core::parse_bytes(text)
        .map_err(|e| anyhow::anyhow!("--max-ref-size {text}: {e}"))?;
    u32::try_from(bytes)
        .map_err(|_| anyhow::anyhow!("--max-ref-size {text}: a reference size is below 4G"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_missing_host_page_is_said_once_per_machine() {
        assert!(super::first_time_for("a machine of this test"));
        assert!(!super::first_time_for("a machine of this test"));
        assert!(super::first_time_for("another machine of this test"));
    }
}
