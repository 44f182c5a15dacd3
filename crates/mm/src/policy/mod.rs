//! Superpage policies: what to map at a fault, when to promote and demote.
//!
//! One file per policy, chosen by a closed enum ([`PolicyImpl`]) from a spec
//! string ([`PolicySpec`]) such as `base:64K` or `linux-thp:enabled=always`.

mod base;
mod eager;
mod explicit;
mod linux_thp;
mod relocation;
mod reservation;

pub use base::BasePolicy;
pub use eager::{EagerPolicy, EagerSettings, EAGER_DEFAULT_MAX};
pub use explicit::{requested_size, ExplicitCounters, ExplicitPolicy};
pub use linux_thp::{LinuxThpPolicy, ThpSetting, ThpSettings};
pub use relocation::{RelocationCounters, RelocationPolicy, RelocationSettings, Threshold};
pub use reservation::{ReservationPolicy, ReservationSettings};

use crate::machine::{Machine, MmError};
use crate::pagetable::PhysMapping;
use crate::phys::ZoneId;
use crate::vma::Vma;
use pagelab_core::{PageSize, VirtAddr};
use std::fmt;

/// What a policy wants for the file-backed pages of a VMA (see [`crate::filemap`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FilePages {
    /// Folio sizes above the base page the page cache may read, largest
    /// first; empty for base pages only.
    pub sizes: Vec<PageSize>,
    /// Whether a large folio is read whole at its first fault (mapped whole
    /// at once) or page by page (mapped whole once every page is read).
    pub read_whole: bool,
}

/// The seam every policy implements.
///
/// Contract: [`Policy::fault`] is called for a reference to an address of
/// `pid` that no page maps, inside `vma`; it must map a page holding `addr`
/// (through [`Machine::map`], counting the fault with [`Machine::count_fault`])
/// or return an error. [`Policy::release`] receives every mapping the machine
/// removed (munmap, MADV_DONTNEED, brk shrink, exit), frame numbers in 4K
/// units, and must free their frames or keep them in its own bookkeeping
/// (a reservation); frames must never leak: after the run, frames in use equal
/// frames mapped plus frames the policy reports holding. [`Policy::tick`] is
/// called between batches of references for periodic work (a scanner).
pub trait Policy {
    /// Maps a page holding `addr`.
    fn fault(
        &mut self,
        m: &mut Machine,
        pid: u32,
        vma: &Vma,
        addr: VirtAddr,
        write: bool,
    ) -> Result<(), MmError>;
    /// Frees (or keeps) the frames of removed mappings.
    fn release(
        &mut self,
        m: &mut Machine,
        pid: u32,
        removed: &[PhysMapping],
    ) -> Result<(), MmError> {
        let _ = pid;
        for r in removed {
            m.free_frames(r.pfn, r.size)?;
        }
        Ok(())
    }
    /// Periodic work between batches.
    fn tick(&mut self, m: &mut Machine) -> Result<(), MmError> {
        let _ = m;
        Ok(())
    }
    /// Ranges `(pid, start, end)` whose translations `tick` changed (a
    /// collapse) since the last call, for the caller to invalidate in the TLB,
    /// as the kernel flushes the range of a page it collapses.
    fn take_remapped(&mut self) -> Vec<(u32, VirtAddr, VirtAddr)> {
        Vec::new()
    }
    /// Process `pid` is about to exit, its address space still whole (as the kernel's
    /// `do_exit` before `exit_mm`), for policies that count what a process maps then.
    fn exit(&mut self, m: &Machine, pid: u32) {
        let _ = (m, pid);
    }
    /// Policy-specific counters, as JSON.
    fn counters(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
    /// 4K frames the policy holds without mapping them (reservations), for the
    /// frame accounting of `Mm::check`.
    fn held_frames(&self) -> u64 {
        0
    }
    /// Gives back frames held without mapping them in `zone` (one
    /// reservation, least recently allocated first), for reclaim, which asks
    /// before it reclaims any mapped page; false when there is nothing to give.
    fn shrink(&mut self, m: &mut Machine, zone: ZoneId) -> Result<bool, MmError> {
        let _ = (m, zone);
        Ok(false)
    }
    /// The page-cache folio sizes and read mode the policy wants for the
    /// file-backed VMA `vma` (default: base pages only).
    fn file_pages(&self, vma: &Vma) -> FilePages {
        let _ = vma;
        FilePages::default()
    }
    /// The policy's own invariants against the machine (its bookkeeping
    /// agrees with the page tables and frames), for `Mm::check`.
    fn check(&self, m: &Machine) -> Result<(), String> {
        let _ = m;
        Ok(())
    }
}

/// A policy as named on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PolicySpec {
    /// `base:SIZE`: every page one fixed size, 4K to 256K.
    Base(PageSize),
    /// `eager[:sizes=LIST]`: the largest page that fits, at first touch.
    Eager(EagerSettings),
    /// `explicit`: the page order each region asked for (best effort or wait).
    Explicit,
    /// `linux-thp[:SETTINGS]`: Linux anonymous THP with multi-size THP.
    LinuxThp(ThpSettings),
    /// `relocation[:size=2M,max_ptes_none=511|threshold=P%,scan=N,budget=N]`:
    /// base pages, collapsed by a periodic scanner.
    Relocation(RelocationSettings),
    /// `reservation[:max=2M]`: reserve at first touch, promote when populated (GISP, Navarro et al.).
    Reservation(ReservationSettings),
}

/// The names `--policy` accepts, for error messages.
pub const POLICY_NAMES: &str = "base:SIZE (4K..256K), linux-thp[:enabled=always|madvise|never,SIZE=always|madvise|never|inherit,...], relocation[:size=2M,max_ptes_none=N|threshold=P%,scan=N,budget=N], eager[:sizes=4K,64K,2M,...], explicit, reservation[:max=2M]";

impl std::str::FromStr for PolicySpec {
    type Err = MmError;
    fn from_str(s: &str) -> Result<Self, MmError> {
        let s = s.trim();
        let (name, params) = s.split_once(':').unwrap_or((s, ""));
        match name {
            "base" => {
                let size: PageSize = params
                    .parse()
                    .map_err(|e| MmError::Policy(format!("policy `{s}`: {e}")))?;
                if size > PageSize::from_shift(18).expect("256K") {
                    return Err(MmError::Policy(format!(
                        "policy `{s}`: a base page size is from 4K to 256K (larger pages are superpages: use a superpage policy)"
                    )));
                }
                Ok(PolicySpec::Base(size))
            }
            "eager" => Ok(PolicySpec::Eager(
                params
                    .parse()
                    .map_err(|e| MmError::Policy(format!("policy `{s}`: {e}")))?,
            )),
            "explicit" if params.is_empty() => Ok(PolicySpec::Explicit),
            "explicit" => Err(MmError::Policy(format!(
                "policy `{s}`: explicit takes no parameters (regions ask for their page order with advise events)"
            ))),
            "linux-thp" => {
                Ok(PolicySpec::LinuxThp(params.parse().map_err(|e| {
                    MmError::Policy(format!("policy `{s}`: {e}"))
                })?))
            }
            "relocation" => {
                Ok(PolicySpec::Relocation(params.parse().map_err(|e| {
                    MmError::Policy(format!("policy `{s}`: {e}"))
                })?))
            }
            "reservation" => Ok(PolicySpec::Reservation(
                params
                    .parse()
                    .map_err(|e| MmError::Policy(format!("policy `{s}`: {e}")))?,
            )),
            _ => Err(MmError::Policy(format!(
                "unknown policy `{s}`: the policies are {POLICY_NAMES}"
            ))),
        }
    }
}

impl fmt::Display for PolicySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicySpec::Base(s) => write!(f, "base:{s}"),
            PolicySpec::Eager(e) if e.sizes.is_none() => f.write_str("eager"),
            PolicySpec::Eager(e) => write!(f, "eager:{e}"),
            PolicySpec::Explicit => f.write_str("explicit"),
            PolicySpec::Reservation(r) if r.to_string().is_empty() => f.write_str("reservation"),
            PolicySpec::Reservation(r) => write!(f, "reservation:{r}"),
            PolicySpec::Relocation(r) => {
                let r = r.to_string();
                if r.is_empty() {
                    f.write_str("relocation")
                } else {
                    write!(f, "relocation:{r}")
                }
            }
            PolicySpec::LinuxThp(t) => {
                let t = t.to_string();
                if t.is_empty() {
                    f.write_str("linux-thp")
                } else {
                    write!(f, "linux-thp:{t}")
                }
            }
        }
    }
}

impl PolicySpec {
    /// The base page size the machine runs with under this policy.
    pub fn base(&self) -> PageSize {
        match self {
            PolicySpec::Base(s) => *s,
            PolicySpec::Eager(_) | PolicySpec::Explicit => PageSize::K4,
            PolicySpec::LinuxThp(_) => PageSize::K4,
            PolicySpec::Relocation(_) => PageSize::K4,
            PolicySpec::Reservation(_) => PageSize::K4,
        }
    }

    /// A fresh policy of this kind.
    pub fn build(&self) -> PolicyImpl {
        match self {
            PolicySpec::Base(s) => PolicyImpl::Base(BasePolicy::new(*s)),
            PolicySpec::Eager(e) => PolicyImpl::Eager(Box::new(EagerPolicy::new(e.clone()))),
            PolicySpec::Explicit => PolicyImpl::Explicit(Box::new(ExplicitPolicy::new())),
            PolicySpec::LinuxThp(t) => {
                PolicyImpl::LinuxThp(Box::new(LinuxThpPolicy::new(t.clone())))
            }
            PolicySpec::Relocation(r) => {
                PolicyImpl::Relocation(Box::new(RelocationPolicy::new(r.clone())))
            }
            PolicySpec::Reservation(r) => {
                PolicyImpl::Reservation(Box::new(ReservationPolicy::new(r.clone())))
            }
        }
    }
}

/// Every policy, dispatched by `match` (no dynamic dispatch on the fault path).
#[derive(Clone, Debug)]
pub enum PolicyImpl {
    /// See [`BasePolicy`].
    Base(BasePolicy),
    /// See [`EagerPolicy`].
    Eager(Box<EagerPolicy>),
    /// See [`ExplicitPolicy`].
    Explicit(Box<ExplicitPolicy>),
    /// See [`LinuxThpPolicy`] (boxed: its counters are large beside the other variants).
    LinuxThp(Box<LinuxThpPolicy>),
    /// See [`RelocationPolicy`].
    Relocation(Box<RelocationPolicy>),
    /// See [`ReservationPolicy`].
    Reservation(Box<ReservationPolicy>),
}

impl Policy for PolicyImpl {
    fn fault(
        &mut self,
        m: &mut Machine,
        pid: u32,
        vma: &Vma,
        addr: VirtAddr,
        write: bool,
    ) -> Result<(), MmError> {
        match self {
            PolicyImpl::Base(p) => p.fault(m, pid, vma, addr, write),
            PolicyImpl::Eager(p) => p.fault(m, pid, vma, addr, write),
            PolicyImpl::Explicit(p) => p.fault(m, pid, vma, addr, write),
            PolicyImpl::LinuxThp(p) => p.fault(m, pid, vma, addr, write),
            PolicyImpl::Relocation(p) => p.fault(m, pid, vma, addr, write),
            PolicyImpl::Reservation(p) => p.fault(m, pid, vma, addr, write),
        }
    }
    fn release(
        &mut self,
        m: &mut Machine,
        pid: u32,
        removed: &[PhysMapping],
    ) -> Result<(), MmError> {
        match self {
            PolicyImpl::Base(p) => p.release(m, pid, removed),
            PolicyImpl::Eager(p) => p.release(m, pid, removed),
            PolicyImpl::Explicit(p) => p.release(m, pid, removed),
            PolicyImpl::LinuxThp(p) => p.release(m, pid, removed),
            PolicyImpl::Relocation(p) => p.release(m, pid, removed),
            PolicyImpl::Reservation(p) => p.release(m, pid, removed),
        }
    }
    fn tick(&mut self, m: &mut Machine) -> Result<(), MmError> {
        match self {
            PolicyImpl::Base(p) => p.tick(m),
            PolicyImpl::Eager(p) => p.tick(m),
            PolicyImpl::Explicit(p) => p.tick(m),
            PolicyImpl::LinuxThp(p) => p.tick(m),
            PolicyImpl::Relocation(p) => p.tick(m),
            PolicyImpl::Reservation(p) => p.tick(m),
        }
    }
    fn take_remapped(&mut self) -> Vec<(u32, VirtAddr, VirtAddr)> {
        match self {
            PolicyImpl::Relocation(p) => p.take_remapped(),
            // Promotion at a fault remaps the pages around the faulting one.
            PolicyImpl::Reservation(p) => p.take_remapped(),
            // The others change translations only at faults and events.
            _ => Vec::new(),
        }
    }
    fn exit(&mut self, m: &Machine, pid: u32) {
        // The others count nothing at exit.
        if let PolicyImpl::LinuxThp(p) = self {
            p.exit(m, pid)
        }
    }
    fn held_frames(&self) -> u64 {
        match self {
            PolicyImpl::Base(p) => p.held_frames(),
            PolicyImpl::Eager(p) => p.held_frames(),
            PolicyImpl::Explicit(p) => p.held_frames(),
            PolicyImpl::LinuxThp(p) => p.held_frames(),
            PolicyImpl::Relocation(p) => p.held_frames(),
            PolicyImpl::Reservation(p) => p.held_frames(),
        }
    }
    fn shrink(&mut self, m: &mut Machine, zone: ZoneId) -> Result<bool, MmError> {
        match self {
            PolicyImpl::Reservation(p) => p.shrink(m, zone),
            // The others hold no frames they do not map.
            _ => Ok(false),
        }
    }
    fn file_pages(&self, vma: &Vma) -> FilePages {
        match self {
            PolicyImpl::LinuxThp(p) => p.file_pages(vma),
            PolicyImpl::Reservation(p) => p.file_pages(vma),
            // base: base pages by definition; eager: Shimizu's design covers
            // private anonymous memory only; explicit and relocation: their
            // papers map file pages with base pages.
            _ => FilePages::default(),
        }
    }
    fn check(&self, m: &Machine) -> Result<(), String> {
        match self {
            PolicyImpl::Reservation(p) => p.check(m),
            // The others keep no bookkeeping of their own to check yet.
            _ => Ok(()),
        }
    }
    fn counters(&self) -> serde_json::Value {
        match self {
            PolicyImpl::Base(p) => p.counters(),
            PolicyImpl::Eager(p) => p.counters(),
            PolicyImpl::Explicit(p) => p.counters(),
            PolicyImpl::LinuxThp(p) => p.counters(),
            PolicyImpl::Relocation(p) => p.counters(),
            PolicyImpl::Reservation(p) => p.counters(),
        }
    }
}
