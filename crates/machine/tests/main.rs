//! Every integration test of this crate in one binary (one link instead of one a file,
//! and the files' tests run beside each other): each file of `tests/` is a module.

mod common;
mod costs;
mod host;
mod kernel_memory;
mod machines;
mod measured;
mod numa;
