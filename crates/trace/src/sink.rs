//! Sinks: where decoded or generated records go.

use pagelab_core::{Event, MemRef, PageSize, VirtAddr};

use crate::{PageBatch, PageFilter};

/// Where a reader's or a generator's records go: a vector of events, or a
/// page filter that keeps no event for the references it drops
/// ([`PageSink`]). The native decoder and the built-in workloads write
/// through it, so one loop serves both `fill` and `fill_pages`.
pub trait RecordSink {
    /// Events taken in so far.
    fn taken(&self) -> usize;
    /// Makes room for `n` more events, if the sink stores them.
    fn reserve(&mut self, n: usize);
    /// One reference decoded by the fast path.
    fn reference(&mut self, r: MemRef);
    /// Any other record (a reference with its size after the tag included).
    fn event(&mut self, e: Event);
    /// One reference of the native decoder's window loop, which knows its
    /// side (0: instruction, 1: data) and its last byte already. A sink
    /// that counts references may leave this one uncounted: the loop
    /// reports every window's references once, by [`RecordSink::window_counts`],
    /// before anything else reaches the sink (a count per window instead of
    /// a read-modify-write of memory per record).
    #[inline(always)]
    fn window_reference(&mut self, r: MemRef, _side: usize, _last: VirtAddr) {
        self.reference(r);
    }
    /// The references per side (instructions, data) that the window loop
    /// has just handed to [`RecordSink::window_reference`].
    #[inline(always)]
    fn window_counts(&mut self, _refs: [u64; 2]) {}
    /// The page filter and batch this sink feeds, if it is a [`PageSink`]: the native
    /// decoder's vector window filters a whole window's references into them at once.
    #[inline(always)]
    fn page_parts(&mut self) -> Option<(&mut PageFilter, &mut PageBatch)> {
        None
    }
}

impl RecordSink for Vec<Event> {
    #[inline(always)]
    fn taken(&self) -> usize {
        self.len()
    }
    #[inline]
    fn reserve(&mut self, n: usize) {
        Vec::reserve(self, n);
    }
    #[inline(always)]
    fn reference(&mut self, r: MemRef) {
        push_reference(self, r);
    }
    #[inline(always)]
    fn event(&mut self, e: Event) {
        self.push(e);
    }
}

/// `v.push(Event::Ref(r))`, with the event written field by field into its slot where `v`
/// has room (the decoders reserve room for a whole fill first; see [`Event::write_ref`]).
#[inline(always)]
fn push_reference(v: &mut Vec<Event>, r: MemRef) {
    let len = v.len();
    match v.spare_capacity_mut().first_mut() {
        Some(slot) => {
            Event::write_ref(slot, r);
            // SAFETY: the slot at `len`, the first past the length, was just written.
            unsafe { v.set_len(len + 1) };
        }
        None => push_growing(v, r.addr, r.size, r.kind),
    }
}

/// `v.push(Event::Ref(..))` where `v` is full: kept out of the decoding loops. It takes
/// the reference's fields, each in a register: a `MemRef` argument is passed in memory,
/// which the decoding loop would then build on the stack for every reference.
#[cold]
#[inline(never)]
fn push_growing(v: &mut Vec<Event>, addr: VirtAddr, size: u32, kind: pagelab_core::AccessKind) {
    v.push(Event::Ref(MemRef { addr, size, kind }));
}

/// References filtered into a page batch as they are decoded.
pub struct PageSink<'a> {
    /// The filter each reference goes through.
    pub filter: &'a mut PageFilter,
    /// The batch the filter's words go to.
    pub out: &'a mut PageBatch,
}

impl RecordSink for PageSink<'_> {
    #[inline(always)]
    fn taken(&self) -> usize {
        self.out.events() as usize
    }
    fn reserve(&mut self, _n: usize) {}
    #[inline(always)]
    fn reference(&mut self, r: MemRef) {
        self.filter.reference(&r, self.out);
    }
    #[inline(always)]
    fn event(&mut self, e: Event) {
        self.filter.event(&e, self.out);
    }
    #[inline(always)]
    fn window_reference(&mut self, r: MemRef, side: usize, last: VirtAddr) {
        let (first, last) = (r.addr.vpn(PageSize::MIN).0, last.vpn(PageSize::MIN).0);
        self.filter.page(side, first, last, self.out);
    }
    #[inline(always)]
    fn window_counts(&mut self, refs: [u64; 2]) {
        self.out.refs[0] += refs[0];
        self.out.refs[1] += refs[1];
    }
    #[inline(always)]
    fn page_parts(&mut self) -> Option<(&mut PageFilter, &mut PageBatch)> {
        Some((&mut *self.filter, &mut *self.out))
    }
}
