//! Every integration test of this crate in one binary (one link instead of one a file,
//! and the files' tests run beside each other): each file of `tests/` is a module.

mod against_reference;
mod arrays;
mod config;
mod hierarchy;
mod random_replacement;
mod xor_index;
