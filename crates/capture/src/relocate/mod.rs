//! Relocation of a captured trace to Linux's layout: each mapping the trace
//! records is placed again by [`LinuxLayout`]'s rules, the program's own
//! mappings where `execve` puts them ([`LinuxLayout::exec`]), and every
//! reference and address-space event is moved from the captured address to
//! the model's, mapping by mapping.
//!
//! What moves where:
//!
//! - the program's and interpreter's segments by their load biases (the
//!   captured ones from [`CapturedImage`]);
//! - the stack top to top: the captured stack's top byte to the kernel's
//!   `STACK_TOP`;
//! - each mmap (a [`Event::MapRequest`] then its [`Event::Map`]) where the
//!   model places the request, its hint moved first when it points into a
//!   mapping the relocation knows (ld.so maps a library's segments
//!   `MAP_FIXED` into its own reservation);
//! - mremap's result (a [`Event::Map`] without request, as the decoder
//!   writes it): grown in place when the model's layout has room after the
//!   old mapping, else placed as mmap places a request of its length with no
//!   hint (`mremap` with `MREMAP_MAYMOVE`);
//! - the program break from the model's `start_brk`, by as much as the
//!   captured one moved from its first value (the first `brk` returns it).
//!
//! munmap, mprotect and madvise are cut at mapping boundaries and moved
//! piece by piece. What the relocation cannot place is an error naming the
//! event, never a guess: a reference outside every mapping it knows, a
//! request the layout does not model, a process that execs a program the
//! trace does not name (traces written before exec records named it).
//!
//! An exec ([`Relocator::exec`]) replaces the process's space with a new
//! one: the new program laid out by [`LinuxLayout::exec`] and moved from
//! where the capture's new QEMU put it, as for the first program.

use crate::elf::ElfImage;
use crate::layout::{ExecLayout, LinuxLayout, RegionKind, Unmodelled, STACK_TOP};
use pagelab_core::{Backing, Event, FileIdentity, MapEvent, MapRequest, Sharing, VirtAddr};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

/// The base page (x86-64's 4K), from `pagelab_core`.
const PAGE: u64 = pagelab_core::PageSize::MIN.bytes();

/// Where the capture (QEMU user mode) put the program it started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapturedImage {
    /// What the program's link addresses were moved by.
    pub program_bias: u64,
    /// What the interpreter's were moved by, when it has one.
    pub interp_bias: Option<u64>,
    /// The captured stack: its first byte and its end.
    pub stack: (u64, u64),
    /// Pages QEMU maps for the guest CPU itself before the program runs (on x86-64 its
    /// IDT and GDT: its first byte and its end), which QEMU's own descriptor loads read,
    /// at a signal's delivery for one, as memory accesses of the guest's instruction. A
    /// program under Linux has no such pages: references there are dropped.
    pub qemu_own: Vec<(u64, u64)>,
}

/// Why a captured trace cannot be relocated: the event (counted from 0) and
/// what about it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("event {index} of the trace (process {pid}): {what}")]
pub struct RelocateError {
    /// The event's position in the trace.
    pub index: u64,
    /// The process it belongs to.
    pub pid: u32,
    /// What could not be relocated.
    pub what: String,
}

/// The files a program image is loaded from, by their identities (the
/// device and inode of their `stat`): the program's and its interpreter's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageFiles {
    /// The program's file.
    pub program: FileIdentity,
    /// The interpreter's (ld.so's), when the program has one.
    pub interp: Option<FileIdentity>,
}

/// The model's file ids: one per file, numbered from 1 in the order the
/// relocated trace first maps it, whether a loaded image or the program's
/// own mmap maps it (so a program exec'd twice, or a file exec'd by one
/// process and mmapped by another, shares its pages in the model's page
/// cache as in the kernel's). The capture's own ids (the decoder's, which
/// know nothing of the images) are translated through the identity their
/// mmap request names.
#[derive(Debug, Default)]
struct FileIds {
    ids: FxHashMap<FileIdentity, u64>,
    /// The capture's id of each file it mapped, to the model's.
    captured: FxHashMap<u64, u64>,
}

impl FileIds {
    fn id(&mut self, file: FileIdentity) -> u64 {
        let next = self.ids.len() as u64 + 1;
        *self.ids.entry(file).or_insert(next)
    }

    /// The model's ids of an image's files (0 for no interpreter).
    fn image(&mut self, files: &ImageFiles) -> (u64, u64) {
        (
            self.id(files.program),
            files.interp.map_or(0, |f| self.id(f)),
        )
    }

    /// `backing` with the model's file id: that of `file` (the identity
    /// the mmap request named) or, without one (mremap's result), the one
    /// the capture's id was given when it was first mapped.
    fn backing(&mut self, backing: Backing, file: Option<FileIdentity>) -> Result<Backing, String> {
        let Backing::File { file_id, offset } = backing else {
            return Ok(backing);
        };
        let id = match file {
            Some(f) => {
                let id = self.id(f);
                self.captured.insert(file_id, id);
                id
            }
            None => *self.captured.get(&file_id).ok_or_else(|| {
                format!("file {file_id} is mapped before any mmap request named its identity")
            })?,
        };
        Ok(Backing::File {
            file_id: id,
            offset,
        })
    }
}

/// The mappings `execve` made for `model` (from [`LinuxLayout::exec`]), as
/// the trace's map events: each segment of the program's file and of the
/// interpreter's, private and file-backed (so its read faults take the
/// kernel's fault-around), and the bss pages past each file's, anonymous.
/// The capture records no event for them (QEMU's loader makes them before
/// the program's first instruction), so without these the model would infer
/// anonymous mappings there and fault on every page of code.
/// The initial stack is mapped anonymous; the vDSO is not placed.
/// `files` are the model's ids of the program's and the interpreter's files.
pub fn image_maps_of(model: &ExecLayout, files: (u64, u64)) -> impl Iterator<Item = MapEvent> + '_ {
    model.regions.iter().filter_map(move |r| {
        let backing = match (r.kind, r.offset) {
            (RegionKind::Program, Some(offset)) => Backing::File {
                file_id: files.0,
                offset,
            },
            (RegionKind::Interpreter, Some(offset)) => Backing::File {
                file_id: files.1,
                offset,
            },
            // The initial stack as `setup_arg_pages` leaves it (the strings' pages and 128K):
            // mapped, not inferred, so it is no 2M block that a THP policy could fill with a
            // huge page where Linux's stack VMA holds no aligned 2M range. References below it
            // (a stack grown deeper) are still inferred.
            (RegionKind::ProgramBss | RegionKind::InterpreterBss | RegionKind::Stack, _) => {
                Backing::Anon
            }
            _ => return None,
        };
        Some(MapEvent {
            start: r.start,
            len: r.len,
            prot: r.prot,
            backing,
            sharing: Sharing::Private,
        })
    })
}

/// Relocates a captured trace's events, one at a time, to Linux's layout.
#[derive(Debug)]
pub struct Relocator {
    /// The image the first process starts with, until its first event.
    first: Option<Space>,
    /// The map events of the first process's image ([`image_maps_of`]),
    /// given out after its first event.
    image: Vec<MapEvent>,
    spaces: FxHashMap<u32, Space>,
    files: FileIds,
    pid: u32,
    index: u64,
    /// The placement library's file, whose mappings the model does not see.
    hide: Option<FileIdentity>,
}

impl Relocator {
    /// A relocator for a trace whose first process's program (with `interp`)
    /// the model laid out as `model` in `layout` (both from
    /// [`LinuxLayout::exec`]) and the capture as `captured`, loaded from
    /// `files`.
    pub fn new(
        layout: LinuxLayout,
        model: &ExecLayout,
        interp: Option<&ElfImage>,
        captured: &CapturedImage,
        files: &ImageFiles,
    ) -> Result<Relocator, RelocateError> {
        let space =
            Space::image(layout, model, interp, captured).map_err(|what| RelocateError {
                index: 0,
                pid: 0,
                what,
            })?;
        let mut ids = FileIds::default();
        let image = image_maps_of(model, ids.image(files)).collect();
        Ok(Relocator {
            first: Some(space),
            image,
            spaces: FxHashMap::default(),
            files: ids,
            pid: 0,
            index: 0,
            hide: None,
        })
    }

    /// Relocates `ev`, an exec of the current process, whose new program
    /// (with `interp`) the model laid out as `model` in `layout` and the
    /// capture as `captured`: the process's space is replaced by the new
    /// program's, and the new image's segments are mapped from `files`
    /// (with the ids those files had before, if any).
    #[allow(clippy::too_many_arguments)]
    pub fn exec(
        &mut self,
        ev: Event,
        layout: LinuxLayout,
        model: &ExecLayout,
        interp: Option<&ElfImage>,
        captured: &CapturedImage,
        files: &ImageFiles,
        out: &mut Vec<Event>,
    ) -> Result<(), RelocateError> {
        let index = self.index;
        self.index += 1;
        let pid = self.pid;
        let err = |what: String| RelocateError { index, pid, what };
        if !matches!(ev, Event::Exec(_)) {
            return Err(err(format!("{ev:?} given as an exec")));
        }
        if !self.spaces.contains_key(&pid) {
            return Err(err("an exec of no current process".into()));
        }
        let space = Space::image(layout, model, interp, captured).map_err(err)?;
        self.spaces.insert(pid, space);
        out.push(ev);
        let ids = self.files.image(files);
        out.extend(image_maps_of(model, ids).map(|m| Event::Map(Box::new(m))));
        Ok(())
    }
}

impl Relocator {
    /// The model's address space of process `pid` as it stands.
    pub fn layout(&self, pid: u32) -> Option<&LinuxLayout> {
        self.spaces.get(&pid).map(|s| &s.layout)
    }

    /// Appends `ev`, relocated, to `out` (a range cut at mapping boundaries
    /// becomes several events).
    pub fn apply(&mut self, ev: Event, out: &mut Vec<Event>) -> Result<(), RelocateError> {
        let index = self.index;
        self.index += 1;
        if let Event::Switch(t) = ev {
            self.pid = t.pid;
            out.push(ev);
            if let Some(first) = self.first.take() {
                self.spaces.insert(t.pid, first);
                out.extend(self.image.drain(..).map(|m| Event::Map(Box::new(m))));
            }
            return Ok(());
        }
        let pid = self.pid;
        let err = |what: String| RelocateError { index, pid, what };
        let Some(space) = self.spaces.get_mut(&pid) else {
            return Err(err(
                "no process is current (no switch record before it)".into()
            ));
        };
        let after_unmap =
            std::mem::replace(&mut space.after_unmap, matches!(ev, Event::Unmap { .. }));
        match ev {
            Event::Ref(mut r) => {
                if r.addr.0 < STACK_TOP {
                    match space.translate(r.addr.0) {
                        Some(a) => r.addr = VirtAddr(a),
                        None if space.hidden.contains(r.addr.0) => return Ok(()),
                        None => {
                            return Err(err(format!(
                                "a reference at {:#x} lies in no mapping the relocation knows",
                                r.addr.0
                            )))
                        }
                    }
                }
                out.push(Event::Ref(r));
            }
            Event::MapRequest(req) => {
                space.pending_hidden = placed::hides(space, &req, self.hide);
                space.pending = (!space.pending_hidden).then_some(*req);
            }
            Event::Map(m) if std::mem::take(&mut space.pending_hidden) => {
                space.hidden.add(m.start.0, m.len);
            }
            Event::Map(m) => {
                let mut m = *m;
                let pending = space.pending.take();
                m.backing = self
                    .files
                    .backing(m.backing, pending.and_then(|r| r.file))
                    .map_err(err)?;
                let at = match pending {
                    Some(mut req) => {
                        let fixed = req.flags & (MapRequest::FIXED | MapRequest::FIXED_NOREPLACE);
                        match space.translate(req.hint.0) {
                            Some(h) if req.hint.0 != 0 => req.hint = VirtAddr(h),
                            _ if fixed != 0 => {
                                return Err(err(format!(
                                    "MAP_FIXED at {:#x}, in no mapping the relocation knows",
                                    req.hint.0
                                )))
                            }
                            _ => {}
                        }
                        let at = space.layout.map(&req).map_err(|e| unplaced(&err, &m, e))?;
                        out.push(Event::MapRequest(Box::new(req)));
                        at
                    }
                    None => remapped(space, &m, after_unmap).map_err(|e| unplaced(&err, &m, e))?,
                };
                space.layout.insert(at, m.len, false);
                space.add(m.start.0, m.len, at.0);
                space.hidden.cut(m.start.0, m.start.0.saturating_add(m.len));
                out.push(Event::Map(Box::new(MapEvent { start: at, ..m })));
            }
            Event::Unmap { start, len } => {
                let (e, ranges) = cut_range(space, start.0, len);
                space.cut(start.0, e);
                space.hidden.cut(start.0, e);
                for (s, l) in ranges {
                    space.layout.remove(VirtAddr(s), l);
                    out.push(Event::Unmap {
                        start: VirtAddr(s),
                        len: l,
                    });
                }
            }
            Event::Protect { start, len, .. } | Event::Advise { start, len, .. }
                if space.hidden.covers(start.0, start.0.saturating_add(len)) => {}
            Event::Protect { start, len, prot } => {
                for (s, l) in known(space, start.0, len, &err)? {
                    out.push(Event::Protect {
                        start: VirtAddr(s),
                        len: l,
                        prot,
                    });
                }
            }
            Event::Advise { start, len, advice } => {
                for (s, l) in known(space, start.0, len, &err)? {
                    out.push(Event::Advise {
                        start: VirtAddr(s),
                        len: l,
                        advice,
                    });
                }
            }
            Event::Brk { end } => {
                let end = end.0.next_multiple_of(PAGE);
                let (cap, model) = *space.brk.get_or_insert((end, space.start_brk));
                let new = model + end.saturating_sub(cap);
                let old = model + space.brk_end.saturating_sub(cap);
                if new > old {
                    if !space.layout.is_free(VirtAddr(old), new - old) {
                        return Err(err(format!(
                            "the program break grows into a mapping of the model's at {old:#x}"
                        )));
                    }
                    space.layout.insert(VirtAddr(old), new - old, false);
                } else if new < old {
                    space.layout.remove(VirtAddr(new), old - new);
                }
                space.cut(cap, cap.max(space.brk_end));
                if end > cap {
                    space.add(cap, end - cap, model);
                }
                space.brk_end = end;
                out.push(Event::Brk {
                    end: VirtAddr(new),
                });
            }
            Event::Fork { child, .. } => {
                let copy = Space {
                    pending: None,
                    ..space.clone()
                };
                self.spaces.insert(child, copy);
                out.push(ev);
            }
            Event::Exit { .. } => {
                out.push(ev);
            }
            Event::Exec(_) => {
                return Err(err(
                    "the process execs a program the trace does not name (an older capture), so its layout cannot be modelled".into(),
                ))
            }
            Event::Switch(_) => unreachable!("handled above"),
        }
        Ok(())
    }
}

fn unplaced(err: &impl Fn(String) -> RelocateError, m: &MapEvent, e: Unmodelled) -> RelocateError {
    err(format!(
        "the mapping of {:#x} bytes captured at {:#x}: {e}",
        m.len, m.start.0
    ))
}

/// Where mremap's result goes in the model: grown in place (no munmap
/// before it) after the mapping it extends, if there is room, else where
/// mmap puts its length.
fn remapped(space: &Space, m: &MapEvent, moved: bool) -> Result<VirtAddr, Unmodelled> {
    let below = m.start.0.checked_sub(1).and_then(|a| space.translate(a));
    if let Some(below) = below.filter(|_| !moved) {
        let after = VirtAddr(below + 1);
        if space.layout.is_free(after, m.len) {
            return Ok(after);
        }
    }
    let shared = m.sharing == Sharing::Shared;
    let (flags, offset) = match m.backing {
        Backing::Anon => (MapRequest::ANONYMOUS, 0),
        Backing::File { offset, .. } => (0, offset),
    };
    space.layout.place(&MapRequest {
        hint: VirtAddr(0),
        len: m.len,
        prot: m.prot,
        flags: flags
            | if shared {
                MapRequest::SHARED
            } else {
                MapRequest::PRIVATE
            },
        file: None,
        offset,
    })
}

/// The captured range's end and its known pieces in the model (munmap of
/// what is not mapped does nothing).
fn cut_range(space: &Space, start: u64, len: u64) -> (u64, Vec<(u64, u64)>) {
    let e = start.saturating_add(len);
    (e, space.ranges(start, e).0)
}

/// The captured range's pieces in the model; an error if any part is unknown.
fn known(
    space: &Space,
    start: u64,
    len: u64,
    err: &impl Fn(String) -> RelocateError,
) -> Result<Vec<(u64, u64)>, RelocateError> {
    let (ranges, unknown) = space.ranges(start, start.saturating_add(len));
    if unknown {
        return Err(err(format!(
            "the range {start:#x}+{len:#x} is partly in no mapping the relocation knows"
        )));
    }
    Ok(ranges)
}

mod placed;
mod qemu_log;
mod space;
use space::Space;
#[cfg(test)]
mod tests;
