//! Every integration test of this crate in one binary (one link instead of one a file,
//! and the files' tests run beside each other): each file of `tests/` is a module.

mod asids;
mod common;
mod cost;
mod frames;
mod overlap;
mod pieces;
mod policies;
mod policies_more;
mod policies_reclaim;
mod policies_relocation;
mod policies_reservation;
mod policies_top;
mod real_trace;
mod reference;
mod threads;
