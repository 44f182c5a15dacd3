//! `fault`: the cost of first-touching memory under a page-size configuration.

use super::params::{size_text, Pairs};
use super::{first_touch, record_loop, Advice, Metrics, Phase, Scale};
use anyhow::Result;
use pagelab_core::PageSize;
use std::fmt;

const KEYS: [&str; 1] = ["size"];
/// The granule of the first touch: one write per base page.
const TOUCH: usize = PageSize::K4.bytes() as usize;

/// One fault-cost run: map `size` bytes and write one 8-byte word per 4K (the first
/// touch, timed: `first_touch_ns_per_mb`, `ns_per_page`, `first_touch_faults`); then
/// write them again (`retouch_ns_per_mb`: the same loop with no faults, so the
/// difference is the kernel's share).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// Bytes to touch, a multiple of 4K.
    pub size: u64,
}

fn touch(base: *mut u8, len: usize, value: u64) {
    for off in (0..len).step_by(TOUCH) {
        // SAFETY: off + 8 <= len and the caller's region is writable for len bytes.
        unsafe { std::ptr::write_volatile(base.add(off) as *mut u64, value) };
    }
}

impl Fault {
    pub(crate) fn parse(text: &str, scale: Scale) -> Result<Fault> {
        let p = Pairs::new("fault", text, &KEYS)?;
        let size = match scale {
            Scale::Full => 256 << 20,
            Scale::Quick => 32 << 20,
        };
        let size = p.size("size", size, TOUCH as u64, 1 << 40)?;
        if !size.is_multiple_of(TOUCH as u64) {
            anyhow::bail!(
                "fault: size={} is not allowed: write a multiple of 4K",
                size_text(size)
            );
        }
        Ok(Fault { size })
    }

    pub(crate) fn run(&self, advice: Advice, m: &mut Metrics) -> Result<()> {
        let mut region = first_touch(self.size, advice, (None, 0), m, |r| {
            let len = r.len();
            touch(r.as_mut_ptr(), len, 1);
        })?;
        let pages = PageSize::K4.pages_in(self.size);
        m.insert(
            "ns_per_page".into(),
            m["first_touch_seconds"] * 1e9 / pages as f64,
        );
        let len = region.len();
        let phase = Phase::start();
        touch(region.as_mut_ptr(), len, 2);
        record_loop(m, phase, pages, "retouch_ns_per_page");
        m.insert(
            "retouch_ns_per_mb".into(),
            m["loop_seconds"] * 1e9 / (self.size as f64 / (1 << 20) as f64),
        );
        Ok(())
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fault:size={}", size_text(self.size))
    }
}
