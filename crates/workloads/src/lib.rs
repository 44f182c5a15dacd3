//! pagelab-workloads (in progress).
