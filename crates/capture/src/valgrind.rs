//! The Valgrind backend's stream: Lackey's text, cut where Valgrind says a
//! process started or ended.
//!
//! Under `--trace-children=yes` every program a captured process execs runs
//! under Valgrind too and writes to the same descriptor. Lackey's lines name
//! no process; Valgrind's own lines (`==PID== ...`) do, and two of them mark
//! a process's life: `==PID== Command: ...` when a program starts (the first,
//! or one a process exec'd) and `==PID== Exit code: N` when it ends. The
//! stream is cut into segments at these lines, each read by its own
//! [`LackeyReader`], and the lines become events between them
//! ([`Lives::marker`]).

use pagelab_core::{Event, ThreadId};
use std::fs::File;
use std::io::{ErrorKind, Read};
use std::sync::{Arc, Mutex, PoisonError};

/// Bytes read from the pipe at a time.
const CHUNK: usize = 1 << 20;
/// A Valgrind line longer than this is not a marker (the command line of a
/// `Command:` line can be long: it is kept whole up to here).
const MAX_MARKER_LINE: usize = 1 << 20;

/// A line of Valgrind's own that starts or ends a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Marker {
    /// `==PID== Command: ...`: process `pid` started a program.
    Start(u32),
    /// `==PID== Exit code: N`: process `pid` ended.
    Exit(u32, i32),
}

/// Parses one line (without its newline) as a marker.
fn marker(line: &[u8]) -> Option<Marker> {
    let rest = line.strip_prefix(b"==")?;
    let digits = rest.iter().position(|b| !b.is_ascii_digit())?;
    let pid: u32 = std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()?;
    let rest = rest[digits..].strip_prefix(b"== ")?;
    if rest.starts_with(b"Command: ") {
        return Some(Marker::Start(pid));
    }
    let code = rest.strip_prefix(b"Exit code:")?;
    let code = std::str::from_utf8(code).ok()?.trim().parse().ok()?;
    Some(Marker::Exit(pid, code))
}

struct Shared {
    pipe: File,
    buf: Vec<u8>,
    lo: usize,
    hi: usize,
    eof: bool,
    /// `buf[lo]` starts a line.
    line_start: bool,
    /// The marker the current segment ended at, not yet taken.
    marker: Option<Marker>,
    /// Bytes of the stream before `buf[lo]`.
    offset: u64,
}

/// The whole stream, shared by its segments.
#[derive(Clone)]
pub(crate) struct Stream(Arc<Mutex<Shared>>);

/// One segment of the stream: reads end (return 0) at the next marker.
pub(crate) struct Segment(Stream);

impl Stream {
    pub(crate) fn new(pipe: File) -> Stream {
        Stream(Arc::new(Mutex::new(Shared {
            pipe,
            buf: vec![0; CHUNK],
            lo: 0,
            hi: 0,
            eof: false,
            line_start: true,
            marker: None,
            offset: 0,
        })))
    }

    /// A reader of the next segment.
    pub(crate) fn segment(&self) -> Segment {
        Segment(self.clone())
    }

    /// The marker the last segment ended at (None: the stream ended), and
    /// the stream offset after it.
    pub(crate) fn take_marker(&self) -> (Option<Marker>, u64) {
        let mut s = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        (s.marker.take(), s.offset)
    }
}

impl Shared {
    /// Reads more after `buf[lo..hi]`; false at the end of the pipe.
    fn refill(&mut self) -> std::io::Result<bool> {
        if self.eof {
            return Ok(false);
        }
        if self.lo > 0 {
            self.buf.copy_within(self.lo..self.hi, 0);
            self.hi -= self.lo;
            self.lo = 0;
        }
        if self.hi == self.buf.len() {
            let n = self.buf.len();
            self.buf.resize(2 * n, 0);
        }
        loop {
            match self.pipe.read(&mut self.buf[self.hi..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(false);
                }
                Ok(n) => {
                    self.hi += n;
                    return Ok(true);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Where in `buf[from..hi]` the next line that starts (or may start, when
    /// one byte of it is here) with `==` begins.
    fn next_valgrind_line(&self, from: usize) -> Option<usize> {
        let data = &self.buf[from..self.hi];
        let may_be =
            |rest: &[u8]| !rest.is_empty() && b"==".starts_with(&rest[..rest.len().min(2)]);
        if from == self.lo && self.line_start && may_be(data) {
            return Some(from);
        }
        let mut at = 0;
        while let Some(nl) = data[at..].iter().position(|&b| b == b'\n') {
            let p = at + nl + 1;
            if may_be(&data[p..]) {
                return Some(from + p);
            }
            at = p;
        }
        None
    }

    /// Hands `n` bytes from `buf[lo..]` to `out`.
    fn give(&mut self, out: &mut [u8], n: usize) -> usize {
        let n = n.min(out.len());
        if n == 0 {
            return 0;
        }
        out[..n].copy_from_slice(&self.buf[self.lo..self.lo + n]);
        self.line_start = self.buf[self.lo + n - 1] == b'\n';
        self.lo += n;
        self.offset += n as u64;
        n
    }
}

impl Read for Segment {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let mut s = (self.0).0.lock().unwrap_or_else(PoisonError::into_inner);
        if s.marker.is_some() || out.is_empty() {
            return Ok(0);
        }
        let mut from = s.lo;
        loop {
            let Some(p) = s.next_valgrind_line(from) else {
                if s.hi > s.lo {
                    // No line of Valgrind's starts here: all of it is Lackey's,
                    // except a last line, which may turn out to be one.
                    let n = s.hi - s.lo;
                    return Ok(s.give(out, n));
                }
                if !s.refill()? {
                    return Ok(0);
                }
                from = s.lo;
                continue;
            };
            if p > s.lo {
                let n = p - s.lo;
                return Ok(s.give(out, n));
            }
            // A line of Valgrind's may start at lo: is it whole?
            let Some(len) = s.buf[p..s.hi].iter().position(|&b| b == b'\n') else {
                if s.hi - s.lo < MAX_MARKER_LINE && s.refill()? {
                    from = s.lo;
                    continue;
                }
                // Unended or huge: Lackey's reader judges it.
                let n = s.hi - s.lo;
                return Ok(s.give(out, n));
            };
            match marker(&s.buf[p..p + len]) {
                Some(m) => {
                    s.marker = Some(m);
                    s.lo = p + len + 1;
                    s.offset += len as u64 + 1;
                    s.line_start = true;
                    return Ok(0);
                }
                None => return Ok(s.give(out, len + 1)),
            }
        }
    }
}

/// Which process the unlabelled Lackey lines belong to, from the markers.
///
/// Valgrind names no parent: a program started by a process other than the
/// current one is taken to be a child the current one forked and that then
/// exec'd (a shell running a command and waiting for it), and when it ends
/// its lines go back to that parent. Processes that run at the same time
/// interleave their lines, which no marker separates: the Valgrind backend
/// attributes such lines to the last process that started or ended.
#[derive(Debug, Default)]
pub(crate) struct Lives {
    /// The process the lines belong to now, then the ones it was started from.
    stack: Vec<u32>,
    /// Processes whose `Exit code` line was seen.
    exited: Vec<u32>,
}

impl Lives {
    /// The events a marker stands for.
    pub(crate) fn marker(&mut self, m: Marker, out: &mut Vec<Event>) {
        let switch = |pid: u32| Event::Switch(ThreadId { pid, tid: pid });
        match m {
            Marker::Start(pid) => match self.stack.last() {
                None => {
                    self.stack.push(pid);
                    out.push(switch(pid));
                }
                Some(&cur) if cur == pid => out.push(Event::Exec(None)),
                Some(_) => {
                    out.push(Event::fork(pid));
                    out.extend([switch(pid), Event::Exec(None)]);
                    self.stack.push(pid);
                }
            },
            Marker::Exit(pid, status) => {
                // Lackey reports 0 for a program that exit_group()s with
                // another code; the root's real status comes from waiting
                // for it (`Capture`), a child's is Lackey's.
                if self.stack.first() == Some(&pid) && self.stack.len() == 1 {
                    self.stack.clear();
                    return;
                }
                self.exited.push(pid);
                out.extend([switch(pid), Event::Exit { status }]);
                self.stack.retain(|&p| p != pid);
                if let Some(&cur) = self.stack.last() {
                    out.push(switch(cur));
                }
            }
        }
    }

    /// Whether an exit event was emitted for `pid`.
    pub(crate) fn exited(&self, pid: u32) -> bool {
        self.exited.contains(&pid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_the_lines_that_start_or_end_a_program() {
        assert_eq!(marker(b"==12== Command: sh -c x"), Some(Marker::Start(12)));
        assert_eq!(
            marker(b"==7== Exit code:       3"),
            Some(Marker::Exit(7, 3))
        );
        assert_eq!(marker(b"==7== Counted 0 calls to main()"), None);
        assert_eq!(marker(b"== Command: x"), None);
        assert_eq!(marker(b" L 0400,8"), None);
    }

    fn read_all(text: &str) -> (Vec<String>, Vec<Marker>) {
        let (r, w) = std::io::pipe().unwrap();
        let text = text.to_string();
        let writer = std::thread::spawn(move || {
            let mut w = w;
            // Small writes: markers and lines are cut across reads.
            for piece in text.as_bytes().chunks(3) {
                std::io::Write::write_all(&mut w, piece).unwrap();
            }
        });
        let stream = Stream::new(File::from(std::os::fd::OwnedFd::from(r)));
        let mut segments = Vec::new();
        let mut markers = Vec::new();
        loop {
            let mut s = String::new();
            let mut seg = stream.segment();
            let mut buf = [0u8; 5];
            loop {
                let n = seg.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                s.push_str(std::str::from_utf8(&buf[..n]).unwrap());
            }
            segments.push(s);
            match stream.take_marker().0 {
                Some(m) => markers.push(m),
                None => break,
            }
        }
        writer.join().unwrap();
        (segments, markers)
    }

    #[test]
    fn the_stream_is_cut_at_markers_only() {
        let text = "==1== Lackey\n==1== Command: sh\nI  0400,2\n==1== x\n L 08,8\n\
                    ==2== Command: true\nI  0500,1\n==2== Exit code: 0\nI  0402,1\n==1== Exit code: 5\n";
        let (segs, marks) = read_all(text);
        assert_eq!(
            marks,
            [
                Marker::Start(1),
                Marker::Start(2),
                Marker::Exit(2, 0),
                Marker::Exit(1, 5)
            ]
        );
        assert_eq!(
            segs,
            [
                "==1== Lackey\n",
                "I  0400,2\n==1== x\n L 08,8\n",
                "I  0500,1\n",
                "I  0402,1\n",
                ""
            ]
        );
    }

    #[test]
    fn a_program_started_elsewhere_is_a_forked_child_that_exec_d() {
        let mut l = Lives::default();
        let mut out = Vec::new();
        for m in [
            Marker::Start(1),
            Marker::Start(1),
            Marker::Start(2),
            Marker::Exit(2, 0),
            Marker::Exit(1, 5),
        ] {
            l.marker(m, &mut out);
        }
        let sw = |pid| Event::Switch(ThreadId { pid, tid: pid });
        assert_eq!(
            out,
            [
                sw(1),
                Event::Exec(None),
                Event::fork(2),
                sw(2),
                Event::Exec(None),
                sw(2),
                Event::Exit { status: 0 },
                sw(1),
            ]
        );
        // The root's exit is the capture's, with the status it was waited for with.
        assert!(!l.exited(1) && l.exited(2));
    }
}
