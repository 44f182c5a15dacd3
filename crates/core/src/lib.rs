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
mod event;
mod size;

pub use addr::{Pfn, VirtAddr, Vpn};
pub use event::{
    AccessKind, Advice, Backing, Event, MapEvent, MemRef, Prot, Sharing, ThreadId,
};
pub use size::{parse_bytes, parse_page_sizes, Bytes, Order, PageSize, PageSizeError};
