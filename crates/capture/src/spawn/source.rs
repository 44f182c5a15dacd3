//! A capture as a [`TraceSource`]: the backend's stream (under Valgrind, segment after
//! segment), then the exit event the trace lacks; a stream that recorded no reference is
//! an error.

use super::{Backend, Capture, Reader};
use pagelab_core::{Event, SourceInfo, ThreadId};
use pagelab_trace::{LackeyReader, PageBatch, PageFilter, TraceError, TraceSource};

impl Capture {
    /// Why a stream that ended without a single reference is an error: the
    /// backend failed before the program ran (QEMU runs ELF binaries only),
    /// and all-zero counts would pass for a result.
    fn nothing_recorded(&self) -> TraceError {
        let status = self
            .status
            .map_or("an unknown status".to_string(), |s| s.to_string());
        let why = if self.script {
            format!(
                " the program is a `#!` script; the {} backend ended ({status}) before its \
                 interpreter ran; its own message is above",
                self.backend
            )
        } else {
            format!(
                " the {} backend ended ({status}) before the program ran; its own message is above",
                self.backend
            )
        };
        TraceError::Other(format!(
            "capture of `{}` recorded no reference:{why}",
            pagelab_core::escape(&self.label)
        ))
    }
}

impl Capture {
    /// Under Valgrind, at the end of a segment: the events of the marker it
    /// ended at and a reader for the next one; false at the end of the stream.
    fn next_segment(&mut self, out: &mut Vec<Event>) -> bool {
        let Reader::Lackey(r, v) = &mut self.reader else {
            return false;
        };
        let (Some(m), offset) = v.stream.take_marker() else {
            return false;
        };
        v.lives.marker(m, out);
        **r = LackeyReader::new(
            v.stream.segment(),
            format!("lackey capture of {} (from byte {offset})", self.label),
        );
        true
    }
}

impl TraceSource for Capture {
    fn fill(&mut self, out: &mut Vec<Event>, max: usize) -> Result<bool, TraceError> {
        if self.ended {
            let n = self.tail.len().min(max);
            out.extend(self.tail.drain(..n));
            return Ok(n > 0);
        }
        if !self.started && max > 0 {
            self.started = true;
            if let Reader::Lackey(..) = self.reader {
                // Lackey names no process: the whole trace is the program's.
                let pid = self.child.id();
                out.push(Event::Switch(ThreadId { pid, tid: pid }));
                return Ok(true);
            }
        }
        let before = out.len();
        let more = match &mut self.reader {
            Reader::Qemu(r) => r.fill(out, max)?,
            Reader::Lackey(r, _) => r.fill(out, max)?,
        };
        if !self.recorded {
            self.recorded = out[before..].iter().any(|e| matches!(e, Event::Ref(_)));
        }
        if more || self.next_segment(out) {
            return Ok(true);
        }
        self.ended = true;
        if let Some(exit) = self.wait()? {
            let pid = self.child.id();
            self.tail = vec![Event::Switch(ThreadId { pid, tid: pid }), exit];
        }
        if !self.recorded {
            return Err(self.nothing_recorded());
        }
        self.fill(out, max)
    }

    /// The reader's own filtering parse; the few events around it (Lackey's
    /// opening switch, the exit the trace lacks) go through `fill`.
    fn fill_pages(
        &mut self,
        filter: &mut PageFilter,
        out: &mut PageBatch,
        max: usize,
    ) -> Result<bool, TraceError> {
        let lackey_start = !self.started && matches!(self.reader, Reader::Lackey(..));
        if !self.ended && !lackey_start {
            let more = match &mut self.reader {
                Reader::Qemu(r) => r.fill_pages(filter, out, max)?,
                Reader::Lackey(r, _) => r.fill_pages(filter, out, max)?,
            };
            self.recorded |= out.refs[0] + out.refs[1] > 0;
            if more {
                return Ok(true);
            }
        }
        out.events.clear();
        let r = self.fill(&mut out.events, max);
        filter.take_events(out);
        r
    }

    fn parses_to_pages(&self) -> bool {
        true
    }

    fn info(&self) -> SourceInfo {
        let mut info = SourceInfo {
            kind: match self.backend {
                Backend::Qemu => "qemu".into(),
                Backend::Valgrind => "lackey".into(),
            },
            name: self.label.clone(),
            compression: None,
            params: Default::default(),
        };
        info.params
            .insert("backend".into(), self.backend.to_string());
        info
    }
}
