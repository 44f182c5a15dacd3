//! What the modelled machine gives a run of the model beyond its physical
//! memory: the page-table geometry, the kernel's per-page structures and
//! low memory, and its CPUs and NUMA nodes. A machine file (`pagelab-machine`)
//! is read into one; without one, a run uses today's defaults (the geometry
//! Linux uses for the policy's base page, a 64-byte struct page, one node).

use crate::kmem::KernelConfig;
use crate::pagetable::Geometry;
use crate::phys::numa::NumaConfig;

/// The machine a run of the model is on, apart from its physical memory.
#[derive(Clone, Debug, PartialEq)]
pub struct Platform {
    /// The page-table geometry; a policy's base page must be its base page.
    pub geometry: Geometry,
    /// The kernel's per-page structures and where its page tables live.
    pub kernel: KernelConfig,
    /// CPUs and NUMA nodes.
    pub numa: NumaConfig,
    /// Where processes run and their memory policy (used with several nodes).
    pub placement: crate::placement::Placement,
    /// Per-CPU hot and cold page lists, when modelled (`[pcp]`, `--pcp`).
    pub pcp: Option<crate::phys::PcpConfig>,
}
