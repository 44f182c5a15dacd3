//! Strong types shared by every pagelab crate.
//!
//! Page size is data, never a global: a [`PageSize`] travels with every
//! computation that needs one, and a byte address ([`VirtAddr`]) cannot be
//! confused with a page number ([`Vpn`]) because they are different types.
//!
//! ```
//! use pagelab_core::{PageSize, VirtAddr};
//! let size: PageSize = "64K".parse().unwrap();
//! let addr = VirtAddr(0x1_2345);
//! assert_eq!(addr.vpn(size).0, 0x1);
//! assert_eq!(size.to_string(), "64K");
//! ```

mod addr;
mod checksum;
mod event;
pub mod isa;
mod output;
mod quote;
mod size;

pub use addr::{BasePfn, Pfn, VirtAddr, Vpn};
pub use checksum::Checksum;
pub use event::{
    AccessKind, Advice, Backing, CloneFlags, Event, ExecImage, FileIdentity, MapEvent, MapRequest,
    MemRef, Prot, Sharing, ThreadId,
};
pub use output::{write_atomically, AtomicFile, Output};
pub use quote::{escape, escape_bytes};
pub use size::{
    parse_bytes, parse_page_sizes, Bytes, Order, PageSize, PageSizeError, MAX_PAGE_SHIFT,
    MIN_PAGE_SHIFT,
};

/// Where a trace came from, as recorded in every result.
#[derive(Clone, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct SourceInfo {
    /// `lackey`, `native`, `workload`, ...
    pub kind: String,
    /// A file path, `-` for standard input, or a workload name.
    pub name: String,
    /// Compression of the input, if any (`zstd`, `xz`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compression: Option<String>,
    /// Parameters, for workloads: every parameter with its effective value.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty", default)]
    pub params: std::collections::BTreeMap<String, String>,
}
