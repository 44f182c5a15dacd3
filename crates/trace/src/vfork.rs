//! A trace in the order the kernel runs a vfork.
//!
//! `vfork` (and `clone` with `CLONE_VFORK`) suspends the calling thread
//! until the child execs or exits: `kernel_clone` waits in
//! `wait_for_vfork_done`, and the child wakes it from `mm_release`
//! (`complete_vfork_done`), which `exec_mm_release` and `exit_mm_release`
//! call (kernel/fork.c). A capture under an emulator that runs vfork as a
//! plain fork (QEMU user mode does) records the parent running on beside
//! the child. [`VforkOrder`] holds the suspended thread's records from the
//! fork until the child's exec or exit, and delivers them right after it,
//! so that the model sees what the kernel runs: the child alone in the
//! shared address space, then the parent.

use crate::{TraceError, TraceSource};
use pagelab_core::{Event, SourceInfo, ThreadId};
use std::collections::VecDeque;

/// `inner`'s events with each vfork's calling thread held while its child
/// runs (see the module's documentation). A thread whose child neither
/// execs nor exits in the trace is released at its end. The other threads
/// of the parent run on, as in the kernel.
///
/// Contract: that of [`TraceSource`]. Events are only moved, never
/// changed or dropped, except that a [`Event::Switch`] is added before a
/// held thread's records and after them (back to the thread that runs
/// next), so that each record keeps its process and thread. An error of
/// `inner` is passed on once the events before it are delivered (the held
/// ones among them included).
pub struct VforkOrder<S> {
    inner: S,
    /// Events to order before the inner source's next: a released thread's.
    input: VecDeque<Event>,
    /// Events ordered and not yet delivered.
    ready: VecDeque<Event>,
    /// The thread the last event seen belongs to.
    cur: Option<ThreadId>,
    /// Per suspending child (its pid), the thread it suspends.
    waiting: Vec<(u32, ThreadId)>,
    /// Per suspended thread, its records since the fork (a Switch to it first).
    held: Vec<(ThreadId, Vec<Event>)>,
    /// The thread the last delivered switch named.
    emitted: Option<ThreadId>,
    /// Whether a switch to a held thread was left out since the last
    /// delivered event (a switch back after it is then left out too).
    skipped: bool,
    batch: Vec<Event>,
    inner_done: bool,
    error: Option<TraceError>,
}

impl<S: TraceSource> VforkOrder<S> {
    /// `inner` in the kernel's order.
    pub fn new(inner: S) -> VforkOrder<S> {
        VforkOrder {
            inner,
            input: VecDeque::new(),
            ready: VecDeque::new(),
            cur: None,
            waiting: Vec::new(),
            held: Vec::new(),
            emitted: None,
            skipped: false,
            batch: Vec::new(),
            inner_done: false,
            error: None,
        }
    }

    /// The source ordered.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// One event in trace order: held, or delivered (releasing a thread
    /// its child's exec or exit wakes).
    fn order(&mut self, ev: Event) {
        if let Event::Switch(t) = ev {
            self.cur = Some(t);
            if self.held.iter().any(|(h, _)| *h == t) {
                // The held records start with a switch to it already.
                self.skipped = true;
                return;
            }
            if std::mem::take(&mut self.skipped) && self.emitted == Some(t) {
                // Back to the thread that ran before the held one's records.
                return;
            }
        } else if let Some(cur) = self.cur {
            if let Some((_, events)) = self.held.iter_mut().find(|(h, _)| *h == cur) {
                events.push(ev);
                return;
            }
        }
        let wakes = match (&ev, self.cur) {
            (Event::Fork { child, flags }, Some(parent)) if flags.suspends_parent() => {
                self.waiting.push((*child, parent));
                self.held.push((parent, vec![Event::Switch(parent)]));
                None
            }
            (Event::Exec(_) | Event::Exit { .. }, Some(cur)) => self
                .waiting
                .iter()
                .position(|(c, _)| *c == cur.pid)
                .map(|i| (cur, self.waiting.remove(i).1)),
            _ => None,
        };
        if let Event::Switch(t) = ev {
            self.emitted = Some(t);
        }
        self.skipped = false;
        self.ready.push_back(ev);
        if let Some((child, parent)) = wakes {
            self.release(parent, Some(child));
        }
    }

    /// `parent` runs again: its held records are ordered next, then a switch
    /// back to `back` (the thread whose records follow in the trace).
    /// Follows `events` while nothing is held or waiting, as [`VforkOrder::order`] would
    /// deliver them unchanged (switches only move the current thread); returns the index of
    /// the first that `order` must see (a fork that suspends its parent), if any.
    fn pass_through(&mut self, events: &[Event]) -> Option<usize> {
        for (i, ev) in events.iter().enumerate() {
            match ev {
                Event::Switch(t) => {
                    self.cur = Some(*t);
                    self.emitted = Some(*t);
                }
                Event::Fork { flags, .. } if flags.suspends_parent() && self.cur.is_some() => {
                    return Some(i);
                }
                _ => {}
            }
        }
        None
    }

    fn release(&mut self, parent: ThreadId, back: Option<ThreadId>) {
        let Some(i) = self.held.iter().position(|(h, _)| *h == parent) else {
            return;
        };
        let (_, events) = self.held.remove(i);
        if events.len() <= 1 {
            return; // only its switch: it did nothing meanwhile
        }
        let back = back.map(Event::Switch);
        for ev in events.into_iter().chain(back).rev() {
            self.input.push_front(ev);
        }
    }
}

impl<S: TraceSource> TraceSource for VforkOrder<S> {
    fn fill(&mut self, out: &mut Vec<Event>, max: usize) -> Result<bool, TraceError> {
        // One inner batch at a time, all of it ordered before any is delivered: a
        // trace without vfork keeps its batches as the inner source gave them (the
        // engine ticks its policies between batches, so results stay the same).
        loop {
            while let Some(ev) = self.input.pop_front() {
                self.order(ev);
            }
            if !self.ready.is_empty() {
                let n = self.ready.len().min(max);
                out.extend(self.ready.drain(..n));
                return Ok(n > 0);
            }
            if self.inner_done {
                // The trace ended with threads still held: they run now, in the
                // order they were suspended.
                if let Some(&(parent, _)) = self.held.first() {
                    self.waiting.retain(|(_, p)| *p != parent);
                    let back = self.cur;
                    self.release(parent, back);
                    continue;
                }
                return match &self.error {
                    Some(e) => Err(e.duplicate()),
                    None => Ok(false),
                };
            }
            if self.input.is_empty()
                && self.held.is_empty()
                && self.waiting.is_empty()
                && !self.skipped
            {
                // Nothing held, nothing waiting: events pass through as they are until one
                // that `order` would act on, straight into `out` (no copy through the queues).
                let start = out.len();
                match self.inner.fill(out, max) {
                    Ok(true) => {
                        if let Some(k) = self.pass_through(&out[start..]) {
                            self.input.extend(out.drain(start + k..));
                        }
                        if out.len() > start {
                            return Ok(true);
                        }
                    }
                    Ok(false) => self.inner_done = true,
                    Err(e) => {
                        out.truncate(start);
                        self.inner_done = true;
                        self.error = Some(e);
                    }
                }
                continue;
            }
            self.batch.clear();
            match self.inner.fill(&mut self.batch, max) {
                Ok(true) => self.input.extend(self.batch.drain(..)),
                Ok(false) => self.inner_done = true,
                Err(e) => {
                    self.inner_done = true;
                    self.error = Some(e);
                }
            }
        }
    }

    fn info(&self) -> SourceInfo {
        self.inner.info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Events;
    use pagelab_core::{AccessKind, CloneFlags, MemRef, VirtAddr};

    fn sw(pid: u32) -> Event {
        Event::Switch(ThreadId { pid, tid: pid })
    }

    fn r(addr: u64) -> Event {
        Event::Ref(MemRef {
            addr: VirtAddr(addr),
            size: 1,
            kind: AccessKind::Load,
        })
    }

    fn vfork(child: u32) -> Event {
        Event::Fork {
            child,
            flags: CloneFlags::VFORK_CALL,
        }
    }

    fn ordered(events: Vec<Event>, batch: usize) -> Vec<Event> {
        let mut src = VforkOrder::new(Events(events.into_iter()));
        let mut out = Vec::new();
        while src.fill(&mut out, batch).unwrap() {}
        out
    }

    /// Every event through `order` one at a time, never the pass-through: the reference.
    fn ordered_slowly(events: Vec<Event>) -> Vec<Event> {
        let mut src = VforkOrder::new(Events(Vec::new().into_iter()));
        src.input.extend(events);
        let mut out = Vec::new();
        while src.fill(&mut out, 7).unwrap() {}
        out
    }

    proptest::proptest! {
        #[test]
        fn passing_through_orders_as_order_does(
            picks in proptest::collection::vec((0u8..10, 1u32..5), 0..200),
            batch in 1usize..40,
        ) {
            // Random threads' switches, references, plain forks, vforks, execs and exits.
            let events: Vec<Event> = picks
                .iter()
                .enumerate()
                .map(|(i, &(kind, pid))| match kind {
                    0 | 1 => sw(pid),
                    2 => vfork(pid),
                    3 => Event::fork(pid),
                    4 => Event::Exec(None),
                    5 => Event::Exit { status: 0 },
                    _ => r(i as u64),
                })
                .collect();
            proptest::prop_assert_eq!(ordered(events.clone(), batch), ordered_slowly(events));
        }
    }

    #[test]
    fn the_parent_waits_for_its_vfork_child_exec() {
        // As QEMU records it: the parent runs on after the vfork.
        let captured = vec![
            sw(1),
            r(1),
            vfork(2),
            r(2),
            sw(2),
            r(3),
            sw(1),
            r(4),
            sw(2),
            r(5),
            Event::Exec(None),
            r(6),
            sw(1),
            r(7),
        ];
        let kernel = vec![
            sw(1),
            r(1),
            vfork(2),
            sw(2),
            r(3),
            r(5),
            Event::Exec(None),
            sw(1),
            r(2),
            r(4),
            sw(2),
            r(6),
            sw(1),
            r(7),
        ];
        for batch in [1, 2, 5, 1000] {
            assert_eq!(ordered(captured.clone(), batch), kernel, "batch {batch}");
        }
        // A plain fork is left as it is.
        let mut fork = captured.clone();
        fork[2] = Event::fork(2);
        assert_eq!(ordered(fork.clone(), 3), fork);
    }

    #[test]
    fn a_released_parent_may_vfork_again_and_a_trace_end_releases() {
        let captured = vec![
            sw(1),
            vfork(2),
            r(1),
            vfork(3),
            r(2),
            sw(2),
            Event::Exit { status: 0 },
            sw(3),
            r(3),
        ];
        let kernel = vec![
            sw(1),
            vfork(2),
            sw(2),
            Event::Exit { status: 0 },
            sw(1),
            r(1),
            vfork(3),
            sw(2),
            sw(3),
            r(3),
            sw(1),
            r(2),
            sw(3),
        ];
        assert_eq!(ordered(captured, 4), kernel);
    }
}
