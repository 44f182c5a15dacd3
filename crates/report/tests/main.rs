//! Every integration test of this crate in one binary (one link instead of one a file,
//! and the files' tests run beside each other): each file of `tests/` is a module.

mod common;
mod csv;
mod html;
mod json;
mod lab_table;
mod plot;
mod recommend;
mod table;
