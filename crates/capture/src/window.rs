//! A window of a trace: skip the first references, stop after a number of them.

use pagelab_core::{Event, SourceInfo};
use pagelab_trace::{PageBatch, PageFilter, TraceError, TraceSource};

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
/// use pagelab_core::{AccessKind, Event, MemRef, VirtAddr};
/// use pagelab_trace::{LackeyReader, TraceSource};
///
/// let text = "I  1000,4\n L 2000,8\nI  1004,4\n S 2008,8\n";
/// let mut w = Window::new(LackeyReader::new(text.as_bytes(), "t"), 1, Some(2));
/// let mut out = Vec::new();
/// while w.fill(&mut out, 100)? {}
/// assert_eq!(out.len(), 2);
/// assert_eq!(out[0], Event::Ref(MemRef { addr: VirtAddr(0x2000), size: 8, kind: AccessKind::Load }));
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

    /// While skipping, through events; from the window's first reference
    /// on, through the source's own page path (when it has one), asking for
    /// no more events than there are references left in the window.
    fn fill_pages(
        &mut self,
        filter: &mut PageFilter,
        out: &mut PageBatch,
        max: usize,
    ) -> Result<bool, TraceError> {
        if self.skipped < self.skip || !self.inner.parses_to_pages() {
            return pagelab_trace::fill_pages_by_events(self, filter, out, max);
        }
        if self.finished {
            return Ok(false);
        }
        let mut max = max;
        if let Some(limit) = self.limit {
            let left = limit - self.delivered;
            if left == 0 {
                self.finished = true;
                return Ok(false);
            }
            max = max.min(usize::try_from(left).unwrap_or(usize::MAX));
        }
        let before = out.refs[0] + out.refs[1];
        let more = self.inner.fill_pages(filter, out, max)?;
        self.delivered += out.refs[0] + out.refs[1] - before;
        if !more {
            self.finished = true;
        }
        Ok(more)
    }

    fn parses_to_pages(&self) -> bool {
        self.inner.parses_to_pages()
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

#[cfg(test)]
mod tests {
    use super::*;
    use pagelab_trace::LackeyReader;
    use proptest::prelude::*;

    /// A Lackey text of `n` references over a few pages, with Valgrind's
    /// own lines between them now and then.
    fn text(n: usize) -> String {
        let mut t = String::new();
        for i in 0..n {
            if i % 97 == 0 {
                t.push_str("==7== a line of Valgrind's own\n");
            }
            let page = (i * 7919) % 13;
            match i % 3 {
                0 => t.push_str(&format!(
                    "I  {:08x},4\n",
                    0x0400_0000 + page * 0x1000 + i % 64
                )),
                1 => t.push_str(&format!(" L {:010x},8\n", 0x1f_fefe_0000 + page * 0x1000)),
                _ => t.push_str(&format!(" S {:010x},8\n", 0x1f_fefe_0ff8 + page * 0x1000)),
            }
        }
        t
    }

    /// The words and counts of the window's references: through its page
    /// path, or through its events and then the filter.
    fn words(
        text: &str,
        skip: u64,
        limit: Option<u64>,
        batch: usize,
        pages: bool,
    ) -> (Vec<u64>, [u64; 2], u64, bool) {
        let mut w = Window::new(LackeyReader::new(text.as_bytes(), "t"), skip, limit);
        let mut filter = PageFilter::new(4, false);
        let mut all = PageBatch::default();
        let mut out = PageBatch::default();
        loop {
            out.clear();
            let more = if pages {
                w.fill_pages(&mut filter, &mut out, batch).unwrap()
            } else {
                let more = w.fill(&mut out.events, batch).unwrap();
                filter.take_events(&mut out);
                more
            };
            all.words.extend_from_slice(&out.words);
            all.refs[0] += out.refs[0];
            all.refs[1] += out.refs[1];
            if !more {
                break;
            }
        }
        filter.flush(&mut all);
        (all.words, all.refs, w.delivered(), w.cut_short())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// The page path gives the words, counts and window of the events path.
        #[test]
        fn page_path_agrees_with_events(
            n in 0usize..3000,
            skip in 0u64..2000,
            limit in proptest::option::of(0u64..2000),
            batch in prop_oneof![Just(1usize), 2usize..100, Just(1 << 16)],
        ) {
            let t = text(n);
            let want = words(&t, skip, limit, batch, false);
            prop_assert_eq!(words(&t, skip, limit, batch, true), want.clone());
            prop_assert_eq!(want.2, (n as u64).saturating_sub(skip).min(limit.unwrap_or(u64::MAX)));
        }
    }
}
