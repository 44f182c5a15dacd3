//! A window of a trace: skip the first references, stop after a number of them.

use pagelab_core::{Event, SourceInfo};
use pagelab_trace::{TraceError, TraceSource};

/// The part of any [`TraceSource`] that begins after `skip` references and
/// holds at most `limit` references.
///
/// Only references ([`Event::Ref`]) are counted. The other events met while
/// skipping (mappings, thread switches, forks) are kept, so that the model
/// sees the address space as it was when the window opens; the source ends
/// at the reference after the last one of the window.
///
/// Contract: that of [`TraceSource`]; memory stays bounded by one batch.
///
/// ```
/// use pagelab_capture::Window;
/// use pagelab_core::{AccessKind, Event, MemRef};
/// use pagelab_trace::{LackeyReader, TraceSource};
///
/// let text = "I  1000,4\n L 2000,8\nI  1004,4\n S 2008,8\n";
/// let mut w = Window::new(LackeyReader::new(text.as_bytes(), "t"), 1, Some(2));
/// let mut out = Vec::new();
/// while w.fill(&mut out, 100)? {}
/// assert_eq!(out.len(), 2);
/// assert_eq!(out[0], Event::Ref(MemRef { addr: 0x2000, size: 8, kind: AccessKind::Load }));
/// # Ok::<(), pagelab_trace::TraceError>(())
/// ```
pub struct Window<S> {
    inner: S,
    skip: u64,
    limit: Option<u64>,
    skipped: u64,
    delivered: u64,
    finished: bool,
}

impl<S: TraceSource> Window<S> {
    /// The window of `inner` after `skip` references, of at most `limit` references.
    pub fn new(inner: S, skip: u64, limit: Option<u64>) -> Self {
        Window {
            inner,
            skip,
            limit,
            skipped: 0,
            delivered: 0,
            finished: false,
        }
    }

    /// References delivered so far.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Whether the window closed before the source ended (the limit was reached).
    pub fn cut_short(&self) -> bool {
        self.finished && self.limit == Some(self.delivered)
    }

    /// The wrapped source.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The wrapped source, mutably.
    pub fn inner_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Drops the references of `out[from..]` that fall before the window.
    fn drop_skipped(&mut self, out: &mut Vec<Event>, from: usize) {
        let mut keep = from;
        for i in from..out.len() {
            if self.skipped < self.skip && matches!(out[i], Event::Ref(_)) {
                self.skipped += 1;
                continue;
            }
            out.swap(keep, i);
            keep += 1;
        }
        out.truncate(keep);
    }

    /// Cuts `out[from..]` after the window's last reference.
    fn apply_limit(&mut self, out: &mut Vec<Event>, from: usize) {
        let Some(limit) = self.limit else {
            self.delivered += out[from..]
                .iter()
                .filter(|e| matches!(e, Event::Ref(_)))
                .count() as u64;
            return;
        };
        for i in from..out.len() {
            if let Event::Ref(_) = out[i] {
                if self.delivered == limit {
                    out.truncate(i);
                    self.finished = true;
                    return;
                }
                self.delivered += 1;
            }
        }
    }
}

impl<S: TraceSource> TraceSource for Window<S> {
    fn fill(&mut self, out: &mut Vec<Event>, max: usize) -> Result<bool, TraceError> {
        let start = out.len();
        while !self.finished && out.len() == start {
            if self.limit == Some(self.delivered) {
                self.finished = true;
                break;
            }
            if !self.inner.fill(out, max)? {
                self.finished = true;
                break;
            }
            if self.skipped < self.skip {
                self.drop_skipped(out, start);
            }
            self.apply_limit(out, start);
        }
        Ok(out.len() > start)
    }

    fn info(&self) -> SourceInfo {
        let mut info = self.inner.info();
        if self.skip > 0 {
            info.params.insert("skip".into(), self.skip.to_string());
        }
        if let Some(l) = self.limit {
            info.params.insert("limit".into(), l.to_string());
        }
        info
    }
}
