//! pagelab-trace (in progress).
