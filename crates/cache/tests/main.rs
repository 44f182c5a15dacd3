//! Every integration test of this crate in one binary (one link instead of one a file,
//! and the files' tests run beside each other): each file of `tests/` is a module.

mod against_reference;
mod common;
mod frames;
mod set_index;
mod shared_owners;
mod walks;
