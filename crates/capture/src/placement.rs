//! A capture whose mappings land at Linux's addresses (docs/layout.md, "A
//! capture at Linux's addresses"): the placement library preloaded into the
//! guest (`capture/place/pagelab_place.c`) asks, before each mmap without
//! `MAP_FIXED`, where the mapping goes; QEMU's plugin passes the question into
//! the trace stream (an `X_PLACE` record) and waits on a pipe; the relocation
//! answers with the address the model's `LinuxLayout` gives the request at
//! that point of the trace, and QEMU keeps it as a free hint. The program then
//! sees the addresses it would natively, and does with them what it would.

use pagelab_core::MapRequest;
use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::sync::{Arc, Mutex};

/// A placement question: the request, by process `pid`, after `index`
/// events of the stream.
#[derive(Clone, Debug)]
pub(crate) struct Question {
    pub index: u64,
    pub pid: u32,
    pub req: MapRequest,
}

/// The questions decoded and not yet answered, shared by the decoder and the
/// relocation (which may run on another thread than the capture was made on).
pub(crate) type Questions = Arc<Mutex<VecDeque<Question>>>;

/// The answering side: the questions, the pipe the plugin reads answers
/// from, and what was done (recorded in the result's source).
#[derive(Debug)]
pub(crate) struct Answers {
    pub questions: Questions,
    pipe: Option<File>,
    /// Questions answered with an address, and the mmaps that landed there.
    pub asked: u64,
    pub placed: u64,
    pub kept: u64,
    /// Per process: the address given, until the process's next map.
    pub given: rustc_hash::FxHashMap<u32, u64>,
}

impl Answers {
    pub fn new(questions: Questions, pipe: File) -> Answers {
        Answers {
            questions,
            pipe: Some(pipe),
            asked: 0,
            placed: 0,
            kept: 0,
            given: Default::default(),
        }
    }

    /// The next question asked after at most `seen` events, if any.
    pub fn next_before(&self, seen: u64) -> Option<Question> {
        let mut q = self.questions.lock().expect("never poisoned");
        if q.front().is_some_and(|f| f.index <= seen) {
            q.pop_front()
        } else {
            None
        }
    }

    /// Sends `addr` (0: no answer) to the plugin. A pipe that fails (the
    /// program is gone) is dropped: nothing waits any more.
    pub fn answer(&mut self, pid: u32, addr: Option<u64>) {
        self.asked += 1;
        let a = addr.unwrap_or(0);
        if a != 0 {
            self.placed += 1;
            self.given.insert(pid, a);
        }
        if let Some(p) = &mut self.pipe {
            if p.write_all(&a.to_le_bytes()).is_err() {
                self.pipe = None;
            }
        }
    }

    /// A map by process `pid` at captured address `start`: whether it is
    /// where its answer said.
    pub fn mapped(&mut self, pid: u32, start: u64) {
        if let Some(a) = self.given.remove(&pid) {
            if a == start {
                self.kept += 1;
            }
        }
    }
}
