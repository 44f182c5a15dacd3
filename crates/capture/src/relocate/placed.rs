//! What the relocation does for a capture placed at Linux's addresses
//! (docs/layout.md, "A capture at Linux's addresses"): it answers the
//! placement library's questions with the model's address for a request, and
//! it keeps that library's own mappings out of the model, since the program
//! runs without it natively.

use super::{Relocator, Space};
use pagelab_core::{FileIdentity, MapRequest};
use std::collections::BTreeMap;

/// A hidden captured range's end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct HiddenEnd(pub(super) u64);

impl crate::intervals::Interval for HiddenEnd {
    fn end(&self) -> u64 {
        self.0
    }
    fn ending_at(self, end: u64) -> Self {
        HiddenEnd(end)
    }
    fn from(self, _start: u64, _at: u64) -> Self {
        self
    }
}

/// Captured ranges that the model does not see (the placement library's).
#[derive(Clone, Debug, Default)]
pub(super) struct Hidden(BTreeMap<u64, HiddenEnd>);

impl Hidden {
    pub(super) fn contains(&self, addr: u64) -> bool {
        self.0
            .range(..=addr)
            .next_back()
            .is_some_and(|(_, e)| e.0 > addr)
    }

    /// Whether all of `[s, e)` is hidden (and something is).
    pub(super) fn covers(&self, s: u64, e: u64) -> bool {
        let mut at = s;
        while at < e {
            match self.0.range(..=at).next_back() {
                Some((_, end)) if end.0 > at => at = end.0,
                _ => return false,
            }
        }
        s < e
    }

    pub(super) fn add(&mut self, s: u64, len: u64) {
        let e = s.saturating_add(len);
        crate::intervals::cut(&mut self.0, s, e);
        self.0.insert(s, HiddenEnd(e));
    }

    pub(super) fn cut(&mut self, s: u64, e: u64) {
        crate::intervals::cut(&mut self.0, s, e);
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Whether `req` maps the hidden library's file, or lands `MAP_FIXED` in a
/// hidden range (ld.so maps a library's segments and bss into its own
/// reservation).
pub(super) fn hides(space: &Space, req: &MapRequest, file: Option<FileIdentity>) -> bool {
    if file.is_some() && req.file == file {
        return true;
    }
    let fixed = req.flags & (MapRequest::FIXED | MapRequest::FIXED_NOREPLACE) != 0;
    fixed && !space.hidden.is_empty() && space.hidden.contains(req.hint.0)
}

impl Relocator {
    /// The process the trace's last switch named.
    pub fn current_pid(&self) -> u32 {
        self.pid
    }

    /// Keeps `file`'s mappings (the placement library's) and the references
    /// into them out of the relocated trace.
    pub fn hide_file(&mut self, file: FileIdentity) {
        self.hide = Some(file);
    }

    /// Where the model would place `req`, made by process `pid` at this
    /// point of the trace, without placing it: the answer to the placement
    /// library's question. `None` when the request is not one the model
    /// places (`MAP_FIXED`, or a rule it does not model) or `pid` is unknown.
    pub fn place(&self, pid: u32, req: &MapRequest) -> Option<u64> {
        let space = self.spaces.get(&pid).or(self.first.as_ref())?;
        if req.flags & (MapRequest::FIXED | MapRequest::FIXED_NOREPLACE) != 0 {
            return None;
        }
        let mut req = *req;
        if req.hint.0 != 0 {
            // A hint inside a known mapping is moved with it, as `apply` does.
            if let Some(h) = space.translate(req.hint.0) {
                req.hint = pagelab_core::VirtAddr(h);
            }
        }
        space.layout.place(&req).ok().map(|a| a.0)
    }
}
