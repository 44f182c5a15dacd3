//! `pagelab presets` and `pagelab workloads`.

use anyhow::Result;

pub fn presets() -> Result<()> {
    for (name, cfg) in pagelab_tlb::presets() {
        crate::out::outln!("{name}\n{}\n", cfg.describe())?;
    }
    Ok(())
}

pub fn workloads() -> Result<()> {
    for w in pagelab_workloads::catalog() {
        crate::out::outln!("{}: {}", w.name, w.summary)?;
        for p in w.params {
            crate::out::outln!("    {:<8} default {:<8} {}", p.name, p.default, p.help)?;
        }
        crate::out::outln!()?;
    }
    crate::out::outln!(
        "{}: {}",
        pagelab::builtin::REAL,
        pagelab::builtin::REAL_SUMMARY
    )?;
    Ok(())
}
