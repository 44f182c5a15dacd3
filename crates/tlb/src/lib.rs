//! pagelab-tlb (in progress).
