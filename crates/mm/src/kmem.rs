//! The kernel's own memory: the per-page structures (`mem_map`, struct page
//! times pages, or one structure per cluster of pages), and on a 32-bit kernel
//! what of it must live in low memory (Bligh and Hansen, OLS 2003, sections 2 and 4).

use crate::phys::{ConfigError, PhysConfig};
use pagelab_core::{Bytes, PageSize};
use serde::{Deserialize, Serialize};

/// The kernel of the modelled machine, as a machine file's `[kernel]` gives it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelConfig {
    /// Bytes of the per-page structure (struct page): 64 on x86-64 today.
    #[serde(default = "default_struct_page")]
    pub struct_page_bytes: u32,
    /// Pages governed by one structure (page clustering, Bligh and Hansen (OLS 2003) section 2):
    /// 1, or a power of two up to 1024.
    #[serde(default = "one")]
    pub page_cluster: u32,
    /// Whether the level-1 page tables (PTE pages) of a 32-bit kernel live in
    /// high memory (CONFIG_HIGHPTE) instead of low memory.
    #[serde(default)]
    pub highpte: bool,
}

fn default_struct_page() -> u32 {
    64
}
fn one() -> u32 {
    1
}

impl Default for KernelConfig {
    /// Today's x86-64 kernel: a 64-byte struct page for every page, no clustering.
    fn default() -> Self {
        KernelConfig {
            struct_page_bytes: default_struct_page(),
            page_cluster: 1,
            highpte: false,
        }
    }
}

/// The largest page cluster accepted.
pub const MAX_PAGE_CLUSTER: u32 = 1024;

impl KernelConfig {
    /// Checks every field; the error names the first bad one (as `kernel.FIELD`).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=4096).contains(&self.struct_page_bytes) {
            return Err(ConfigError {
                field: "kernel.struct_page_bytes",
                message: format!(
                    "{} is not allowed: a struct page is 1 to 4096 bytes (64 on x86-64 today)",
                    self.struct_page_bytes
                ),
            });
        }
        if !self.page_cluster.is_power_of_two() || self.page_cluster > MAX_PAGE_CLUSTER {
            return Err(ConfigError {
                field: "kernel.page_cluster",
                message: format!(
                    "{} is not allowed: pages per cluster is a power of two from 1 to {MAX_PAGE_CLUSTER}",
                    self.page_cluster
                ),
            });
        }
        Ok(())
    }

    /// Bytes of `mem_map` for `memory` bytes of `base`-sized pages: one
    /// structure per cluster of pages (a partial cluster still needs one).
    pub fn mem_map_bytes(&self, memory: Bytes, base_bytes: u64) -> u64 {
        let pages = memory.0 / base_bytes.max(1);
        pages.div_ceil(self.page_cluster as u64) * self.struct_page_bytes as u64
    }
}

/// What the kernel's own structures take on a machine.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KernelMemory {
    /// Bytes of one struct page.
    pub struct_page_bytes: u32,
    /// Pages per struct page.
    pub page_cluster: u32,
    /// `mem_map`: one struct page per cluster of pages.
    pub mem_map_bytes: u64,
    /// The low memory of a 32-bit kernel (absent when all memory is low).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub low_memory_bytes: Option<u64>,
}

impl KernelMemory {
    /// The structures fixed at boot: `mem_map` for all of `phys`'s memory.
    pub fn fixed(kernel: &KernelConfig, phys: &PhysConfig, base: PageSize) -> KernelMemory {
        KernelMemory {
            struct_page_bytes: kernel.struct_page_bytes,
            page_cluster: kernel.page_cluster,
            mem_map_bytes: kernel.mem_map_bytes(phys.memory, base.bytes()),
            low_memory_bytes: phys.highmem.map(|h| h.0),
        }
    }

    /// The share of low memory `mem_map` takes (`None` without low memory).
    pub fn mem_map_low_fraction(&self) -> Option<f64> {
        self.low_memory_bytes
            .map(|low| self.mem_map_bytes as f64 / low as f64)
    }

    /// One line for people: struct page, mem_map and its share of low memory.
    pub fn summary(&self) -> String {
        let cluster = match self.page_cluster {
            1 => String::new(),
            n => format!(" per {n} pages"),
        };
        let mut s = format!(
            "struct page {} bytes{cluster}, mem_map {}",
            self.struct_page_bytes,
            Bytes(self.mem_map_bytes)
        );
        if let (Some(low), Some(f)) = (self.low_memory_bytes, self.mem_map_low_fraction()) {
            s.push_str(&format!(
                " = {:.1}% of the {} of low memory",
                f * 100.0,
                Bytes(low)
            ));
        }
        s
    }
}

/// Why the kernel's own memory cannot be had: the failure of a 32-bit kernel
/// whose low memory is full of structures it cannot swap (Bligh and Hansen, OLS 2003, section 2).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("low memory exhausted: mem_map {mem_map} + page tables {page_tables} need {need} of the {low} of low memory; the kernel can no longer allocate (kswapd spins and the machine appears hung: Bligh and Hansen (OLS 2003), section 2). Use --highpte (page tables in high memory), --page-cluster N (a smaller mem_map) or a 64-bit machine", need = Bytes(mem_map.0 + page_tables.0))]
pub struct LowMemoryExhausted {
    /// mem_map's bytes.
    pub mem_map: Bytes,
    /// Page tables in low memory.
    pub page_tables: Bytes,
    /// Low memory.
    pub low: Bytes,
}

/// The kernel's memory over a run: mem_map, and on a 32-bit kernel the low
/// memory its page tables take, at their peak. (The reverse map's pte-chains,
/// which also live in low memory, are modelled by `pagelab sharing`, not here.)
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KernelStats {
    /// The structures fixed at boot.
    #[serde(flatten)]
    pub fixed: KernelMemory,
    /// Whether level-1 page tables live in high memory.
    pub highpte: bool,
    /// The most page-table bytes kept in low memory at once (all page tables
    /// on a machine without high memory).
    pub page_tables_low_peak_bytes: u64,
    /// The most low memory the kernel's structures took at once
    /// (mem_map + page tables in low memory).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub low_used_peak_bytes: Option<u64>,
}

impl KernelStats {
    /// A run's kernel at boot.
    pub fn new(kernel: &KernelConfig, phys: &PhysConfig, base: PageSize) -> KernelStats {
        let fixed = KernelMemory::fixed(kernel, phys, base);
        KernelStats {
            low_used_peak_bytes: fixed.low_memory_bytes.map(|_| fixed.mem_map_bytes),
            fixed,
            highpte: kernel.highpte,
            page_tables_low_peak_bytes: 0,
        }
    }

    /// The kernel of a run on `platform` (none without one), checked at boot.
    pub fn on(
        platform: Option<&crate::platform::Platform>,
        phys: &PhysConfig,
        base: PageSize,
    ) -> Result<Option<KernelStats>, LowMemoryExhausted> {
        let Some(p) = platform else { return Ok(None) };
        let k = KernelStats::new(&p.kernel, phys, base);
        k.check_boot()?;
        Ok(Some(k))
    }

    /// Fails at once if mem_map alone does not fit in low memory.
    pub fn check_boot(&self) -> Result<(), LowMemoryExhausted> {
        self.observe(0).map(|_| ())
    }

    /// Takes in the page tables in use now (`page_table_bytes` in all,
    /// `level1_bytes` of them in level-1 tables); an error when the kernel's
    /// structures would no longer fit in low memory.
    pub fn record(
        &mut self,
        page_table_bytes: u64,
        level1_bytes: u64,
    ) -> Result<(), LowMemoryExhausted> {
        let low_pt = if self.highpte && self.fixed.low_memory_bytes.is_some() {
            page_table_bytes - level1_bytes.min(page_table_bytes)
        } else {
            page_table_bytes
        };
        self.page_tables_low_peak_bytes = self.page_tables_low_peak_bytes.max(low_pt);
        let used = self.observe(low_pt)?;
        if let (Some(peak), Some(used)) = (&mut self.low_used_peak_bytes, used) {
            *peak = (*peak).max(used);
        }
        Ok(())
    }

    /// The low memory in use with these page tables, if the machine has low
    /// memory; an error when it is more than there is.
    fn observe(&self, low_pt: u64) -> Result<Option<u64>, LowMemoryExhausted> {
        let Some(low) = self.fixed.low_memory_bytes else {
            return Ok(None);
        };
        let used = self.fixed.mem_map_bytes + low_pt;
        if used > low {
            return Err(LowMemoryExhausted {
                mem_map: Bytes(self.fixed.mem_map_bytes),
                page_tables: Bytes(low_pt),
                low: Bytes(low),
            });
        }
        Ok(Some(used))
    }
}
