//! Physical memory (in progress).
