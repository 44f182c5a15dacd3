//! `base:SIZE`: every page one fixed base size, 4K to 256K, with the internal
//! fragmentation that brings (Wong's (64KB pages on Power) 64K base pages; Weisberg and Wiseman's (IRI 2009)
//! study of every size from 4K to 256K).

use super::Policy;
use crate::machine::{Machine, MmError};
use crate::pagetable::PteFlags;
use crate::vma::Vma;
use pagelab_core::{PageSize, VirtAddr};

/// Maps one base page of the fixed size at every fault.
#[derive(Clone, Debug)]
pub struct BasePolicy {
    size: PageSize,
}

impl BasePolicy {
    /// A policy mapping `size` pages; the machine's base page must be `size`.
    pub fn new(size: PageSize) -> Self {
        BasePolicy { size }
    }
}

impl Policy for BasePolicy {
    fn fault(
        &mut self,
        m: &mut Machine,
        pid: u32,
        vma: &Vma,
        addr: VirtAddr,
        _write: bool,
    ) -> Result<(), MmError> {
        m.fault_in(pid, addr, self.size, PteFlags::from_prot(vma.prot))
    }
}
