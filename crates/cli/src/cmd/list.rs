//! `pagelab presets` and `pagelab workloads`.

use anyhow::Result;

pub fn presets() -> Result<()> {
    for (name, cfg) in pagelab_tlb::presets() {
        println!("{name}\n{}\n", cfg.describe());
    }
    Ok(())
}

pub fn workloads() -> Result<()> {
    for w in pagelab_workloads::catalog() {
        println!("{}: {}", w.name, w.summary);
        for p in w.params {
            println!("    {:<8} default {:<8} {}", p.name, p.default, p.help);
        }
        println!();
    }
    println!("{}: {}", crate::builtin::REAL, crate::builtin::REAL_SUMMARY);
    Ok(())
}
