//! pagelab-report (in progress).
