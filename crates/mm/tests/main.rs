//! Every integration test of this crate in one binary (one link instead of one a file,
//! and the files' tests run beside each other): each file of `tests/` is a module.

mod common;
mod fault_paths;
mod file_superpages;
mod kept_folios;
mod pagetable_layouts;
mod pagetable_prop;
mod pcp_reference;
mod phys_buddy_reference;
mod phys_zones_prop;
mod policy_eager;
mod policy_explicit;
mod policy_linux_thp;
mod policy_relocation;
mod policy_reservation;
mod reclaim;
mod reclaim_prop;
mod sharing;
