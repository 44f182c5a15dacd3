//! The kernel's memory in a run on a 32-bit machine: page tables in low
//! memory in closed form, and the failure Bligh and Hansen (OLS 2003) describes when they
//! and mem_map no longer fit (with `highpte` and page clustering as the ways out).

use crate::common;

use common::{store, switch};
use pagelab_core::Event;
use pagelab_machine::{preset, Machine};

/// `procs` processes, each writing one word in each of the first `regions`
/// 2M regions of its address space: one PTE page per region.
fn spread(procs: u32, regions: u64) -> Vec<Event> {
    let mut ev = Vec::new();
    for pid in 1..=procs {
        ev.push(switch(pid));
        for r in 0..regions {
            ev.push(store((r << 21) + 4096));
        }
    }
    ev
}

fn run(m: &Machine, events: Vec<Event>) -> Result<serde_json::Value, String> {
    Ok(common::run(m, events)?["kernel"].clone())
}

/// Per process on PAE: the 32-byte PDPT, a 4K PMD page per 1G touched, a 4K PTE page per 2M.
fn tables(regions: u64) -> u64 {
    32 + regions.div_ceil(512) * 4096 + regions * 4096
}

/// ia32-pae's page table and struct page with 64M of memory, 16M of it low
/// (tests/data/pae-small.toml): its low memory fills in tens of processes, so
/// each case runs in well under a second where ia32-pae's 896M took minutes.
fn small() -> Machine {
    common::machine("pae-small.toml")
}

/// 64 regions of 2M per process: one PMD page and 64 PTE pages.
const REGIONS: u64 = 64;

#[test]
fn page_tables_in_low_memory_in_closed_form() {
    let m = small();
    let k = run(&m, spread(10, REGIONS)).unwrap();
    // 16384 pages of 44 bytes.
    assert_eq!(k["mem_map_bytes"], 16384 * 44);
    assert_eq!(k["low_memory_bytes"], 16u64 << 20);
    assert_eq!(tables(REGIONS), 32 + 4096 + 64 * 4096);
    assert_eq!(k["page_tables_low_peak_bytes"], 10 * tables(REGIONS));
    assert_eq!(k["low_used_peak_bytes"], 16384 * 44 + 10 * tables(REGIONS));
    // The same run on a machine without high memory keeps no low-memory figures.
    let mut x86 = preset("x86-64").unwrap();
    x86.set_phys(
        pagelab_mm::phys::PhysConfig::new(pagelab_core::Bytes(64 << 20)),
        "test",
    )
    .unwrap();
    let x = run(&x86, spread(1, 1)).unwrap();
    assert_eq!(x["mem_map_bytes"], 16384 * 64);
    assert!(x.get("low_memory_bytes").is_none() && x.get("low_used_peak_bytes").is_none());
}

#[test]
fn low_memory_runs_out_where_the_arithmetic_says() {
    let m = small();
    // 15680K of low memory is left after mem_map; each process takes 260K + 32 bytes.
    let room = (16u64 << 20) - 16384 * 44;
    let fit = room / tables(REGIONS);
    assert_eq!(fit, 60);
    assert!(run(&m, spread(fit as u32, REGIONS)).is_ok());
    let e = run(&m, spread(fit as u32 + 1, REGIONS)).unwrap_err();
    assert!(
        e.contains("low memory exhausted: mem_map 704K + page tables"),
        "{e}"
    );
    assert!(
        e.contains("of the 16M of low memory") && e.contains("--highpte"),
        "{e}"
    );
    // With the PTE pages in high memory, only PDPTs and PMDs stay low.
    let mut high = m.clone();
    high.kernel.highpte = true;
    let k = run(&high, spread(fit as u32 + 1, REGIONS)).unwrap();
    assert_eq!(k["page_tables_low_peak_bytes"], (fit + 1) * (32 + 4096));
    assert_eq!(k["highpte"], true);
}

#[test]
fn a_mem_map_larger_than_low_memory_fails_at_boot() {
    let mut m = small();
    // 16384 pages x 1100 bytes = 17.2M of mem_map > 16M of low memory.
    m.kernel.struct_page_bytes = 1100;
    let e = run(&m, spread(1, 1)).unwrap_err();
    assert!(e.contains("low memory exhausted: mem_map 17.2M"), "{e}");
    m.kernel.page_cluster = 2; // 8.6M: it boots
    let k = run(&m, spread(1, 1)).unwrap();
    assert_eq!(k["mem_map_bytes"], 8192 * 1100);
    assert_eq!(k["page_cluster"], 2);
}
