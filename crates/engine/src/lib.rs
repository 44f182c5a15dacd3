//! pagelab-engine (in progress).
