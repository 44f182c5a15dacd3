//! A machine for people: `pagelab machines`.

use crate::{list, Machine};
use pagelab_core::Bytes;
pub use pagelab_mm::kmem::KernelMemory;

impl Machine {
    /// The kernel's fixed memory on this machine: `mem_map`, and the low
    /// memory it takes on a 32-bit kernel.
    pub fn kernel_memory(&self) -> KernelMemory {
        KernelMemory::fixed(&self.kernel, &self.phys, self.geometry.base())
    }

    /// A few lines for people: title, page table, page sizes, memory and
    /// zones, NUMA, struct page and mem_map, per-CPU page lists, TLB, source.
    pub fn describe(&self) -> String {
        let g = &self.geometry;
        let mut out = self.name.clone();
        if !self.description.is_empty() {
            out.push_str(" - ");
            out.push_str(&self.description);
        }
        let entries: Vec<String> = (1..=g.levels())
            .rev()
            .map(|l| g.entries(l).to_string())
            .collect();
        out.push_str(&format!(
            "\n  page table   {} levels of {} entries (root first), {}-byte entries, {}-bit addresses",
            g.levels(),
            entries.join(", "),
            g.entry_bytes(),
            g.va_bits()
        ));
        out.push_str(&format!("\n  page sizes   {}", list(&self.page_sizes)));
        let zones: Vec<String> = match self.phys.zone_sizes() {
            Ok(z) => z
                .iter()
                .map(|(k, b)| format!("{} {}", k.name(), Bytes(*b)))
                .collect(),
            Err(e) => vec![e.to_string()],
        };
        out.push_str(&format!(
            "\n  memory       {} ({})",
            self.phys.memory,
            zones.join(", ")
        ));
        let n = &self.numa;
        if n.nodes.len() > 1 {
            let nodes: Vec<String> = n
                .nodes
                .iter()
                .map(|d| format!("{} + {} CPUs", d.memory, d.cpus.len()))
                .collect();
            out.push_str(&format!(
                "\n  numa         {} nodes: {}",
                n.nodes.len(),
                nodes.join(", ")
            ));
        } else {
            out.push_str(&format!("\n  cpus         {}, one node", n.cpus));
        }
        out.push_str(&format!(
            "\n  kernel       {}",
            self.kernel_memory().summary()
        ));
        if let Some(p) = &self.pcp {
            out.push_str(&format!(
                "\n  pcp lists    per CPU and zone: batch {}, hot {}-{}, cold {}-{} pages",
                p.batch, p.hot.low, p.hot.high, p.cold.low, p.cold.high
            ));
        }
        if let Some(t) = &self.tlb {
            out.push_str(&format!("\n  tlb          {}", t.name));
        }
        if let Some(c) = &self.cost {
            let levels: Vec<String> = c
                .levels()
                .iter()
                .map(|(name, l)| {
                    format!(
                        "{name} {} {}-way {}B lines{} {} cycles",
                        Bytes(l.size),
                        l.ways,
                        l.line,
                        if l.index.is_address() { "" } else { " hashed" },
                        l.latency
                    )
                })
                .collect();
            out.push_str(&format!(
                "\n  caches       {}; memory {} cycles",
                levels.join(", "),
                c.caches.memory_latency
            ));
            let w = &c.walk_caches.entries;
            out.push_str(&format!(
                "\n  walk caches  {}; tlb hit {:?} cycles; base CPI {}{}",
                if w.is_empty() {
                    "none".to_string()
                } else {
                    format!("{w:?} entries (level 2 up)")
                },
                c.costs.tlb_hit,
                c.costs.base_cpi,
                if c.nested.is_some() {
                    "; nested paging"
                } else {
                    ""
                }
            ));
            if let Some(o) = &c.overlap {
                out.push_str(&format!(
                    "\n  overlap      {} misses and {} walks in flight (independent references)",
                    o.miss_buffers, o.walkers
                ));
            }
        }
        if !self.source.is_empty() {
            out.push_str(&format!("\n  source       {}", self.source));
        }
        out
    }
}
