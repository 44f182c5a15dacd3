//! Page tables (in progress).
