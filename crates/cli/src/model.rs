//! The model's configuration from the words of the command line (or of the
//! Python API's keyword arguments, which carry the same words and get the
//! same messages).

use anyhow::{Context, Result};
use pagelab_engine::{PolicyConfig, StudyConfig};

/// The study configuration: `page_sizes` as `4K,64K,2M`, `tlb` a preset name or a TOML file.
pub fn study_config(page_sizes: &str, tlb: &str) -> Result<StudyConfig> {
    let page_sizes = pagelab_core::parse_page_sizes(page_sizes)
        .with_context(|| format!("--page-sizes {page_sizes}"))?;
    let tlb = pagelab_tlb::resolve(tlb).with_context(|| format!("--tlb {tlb}"))?;
    Ok(StudyConfig { page_sizes, tlb })
}

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
}

/// The configuration of the policy runs over the TLB of `study`.
pub fn policy_config(study: &StudyConfig, a: &PolicyArgs<'_>) -> Result<PolicyConfig> {
    let policies = a
        .policies
        .iter()
        .map(|p| p.parse().with_context(|| format!("--policy {p}")))
        .collect::<Result<Vec<_>>>()?;
    let phys = phys_config(a.phys, a.memory)?;
    let cow = a
        .cow
        .parse()
        .map_err(|e: String| anyhow::anyhow!("--cow {}: {e}", a.cow))?;
    Ok(PolicyConfig {
        policies,
        tlb: study.tlb.clone(),
        phys,
        strict: a.strict,
        cow,
    })
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
