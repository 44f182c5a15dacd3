//! `pagelab machines`: the machine presets, or one machine and its kernel's memory.

use crate::args::MachinesArgs;
use anyhow::{Context, Result};

pub fn run(a: MachinesArgs) -> Result<()> {
    if a.measure {
        return super::machines_measure::run(&a);
    }
    let Some(name) = &a.machine else {
        for m in pagelab_machine::presets() {
            crate::out::outln!("{}\n", m.describe())?;
        }
        return Ok(());
    };
    let mut m = pagelab_machine::resolve(name).with_context(|| format!("machine {name}"))?;
    if let Some(text) = &a.memory {
        let mut phys = m.phys.clone();
        phys.memory = pagelab_core::Bytes(
            pagelab_core::parse_bytes(text).with_context(|| format!("--memory {text}"))?,
        );
        m.set_phys(phys, &format!("--memory {text}"))?;
    }
    if let Some(n) = a.page_cluster {
        m.kernel.page_cluster = n;
        m.kernel
            .validate()
            .map_err(|e| anyhow::anyhow!("--page-cluster {n}: {}", e.message))?;
    }
    crate::out::outln!("{}", m.describe())?;
    Ok(())
}
