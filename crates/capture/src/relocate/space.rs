//! One process's address space as the relocation keeps it: captured ranges and where each
//! lies in the model.

use super::*;

/// A captured range `[start, end)` and where it lies in the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Piece {
    pub(super) end: u64,
    pub(super) model: u64,
}

impl crate::intervals::Interval for Piece {
    fn end(&self) -> u64 {
        self.end
    }
    fn ending_at(self, end: u64) -> Self {
        Piece { end, ..self }
    }
    fn from(self, start: u64, at: u64) -> Self {
        Piece {
            end: self.end,
            model: self.model + (at - start),
        }
    }
}

/// One process's address space, captured and modelled.
#[derive(Clone, Debug)]
pub(super) struct Space {
    pub(super) layout: LinuxLayout,
    /// Captured start to piece.
    pub(super) pieces: BTreeMap<u64, Piece>,
    /// The captured break's first value, and the model's.
    pub(super) brk: Option<(u64, u64)>,
    /// The model's `start_brk`.
    pub(super) start_brk: u64,
    /// The captured break's current end.
    pub(super) brk_end: u64,
    pub(super) pending: Option<MapRequest>,
    /// The piece the last reference hit (references run in long streaks).
    pub(super) last: std::cell::Cell<(u64, Piece)>,
    /// Whether the last event was an munmap (the decoder writes a moving
    /// mremap as munmap then map).
    pub(super) after_unmap: bool,
    /// Captured ranges the model does not see (the placement library's).
    pub(super) hidden: placed::Hidden,
    /// The pending request maps a hidden range.
    pub(super) pending_hidden: bool,
}

impl Space {
    pub(super) fn find(&self, addr: u64) -> Option<(u64, Piece)> {
        let (s, p) = self.pieces.range(..=addr).next_back()?;
        (p.end > addr).then_some((*s, *p))
    }

    pub(super) fn translate(&self, addr: u64) -> Option<u64> {
        let (s, p) = self.last.get();
        if (s..p.end).contains(&addr) {
            return Some(p.model + (addr - s));
        }
        let (s, p) = self.find(addr)?;
        self.last.set((s, p));
        Some(p.model + (addr - s))
    }

    /// Forgets the captured range `[s, e)`, cutting pieces it overlaps.
    pub(super) fn cut(&mut self, s: u64, e: u64) {
        self.last.set((0, Piece { end: 0, model: 0 }));
        crate::intervals::cut(&mut self.pieces, s, e);
    }

    pub(super) fn add(&mut self, start: u64, len: u64, model: u64) {
        self.cut(start, start + len);
        self.pieces.insert(
            start,
            Piece {
                end: start + len,
                model,
            },
        );
    }

    /// `[s, e)` cut at piece boundaries: the model's range of each known
    /// piece, and whether any part was unknown.
    pub(super) fn ranges(&self, s: u64, e: u64) -> (Vec<(u64, u64)>, bool) {
        let mut out = Vec::new();
        for (k, p) in self.pieces.range(..e).rev().take_while(|(_, p)| p.end > s) {
            let lo = (*k).max(s);
            out.push((p.model + (lo - k), p.end.min(e) - lo));
        }
        out.reverse();
        let covered: u64 = out.iter().map(|r| r.1).sum();
        (out, covered < e - s)
    }
}

impl Space {
    /// The space of a program just loaded: its segments and stack where the
    /// model put them (`model` in `layout`), keyed by where the capture put
    /// them.
    pub(super) fn image(
        layout: LinuxLayout,
        model: &ExecLayout,
        interp: Option<&ElfImage>,
        captured: &CapturedImage,
    ) -> Result<Space, String> {
        let mut space = Space {
            layout,
            pieces: BTreeMap::new(),
            brk: None,
            start_brk: model.start_brk.0,
            brk_end: 0,
            pending: None,
            last: std::cell::Cell::new((0, Piece { end: 0, model: 0 })),
            after_unmap: false,
            hidden: placed::Hidden::default(),
            pending_hidden: false,
        };
        if interp.is_some() != captured.interp_bias.is_some() {
            return Err("the captured image and the program disagree on an interpreter".into());
        }
        for r in &model.regions {
            let captured_start = match r.kind {
                RegionKind::Program | RegionKind::ProgramBss => r
                    .start
                    .0
                    .wrapping_sub(model.load_bias)
                    .wrapping_add(captured.program_bias),
                RegionKind::Interpreter | RegionKind::InterpreterBss => r
                    .start
                    .0
                    .wrapping_sub(model.interp_bias)
                    .wrapping_add(captured.interp_bias.unwrap_or(0)),
                // The vDSO of the capture (QEMU's own, if any) is not placed.
                RegionKind::Stack | RegionKind::VdsoData | RegionKind::Vdso => continue,
            };
            space.add(captured_start, r.len, r.start.0);
        }
        for &(s, e) in &captured.qemu_own {
            space.hidden.add(s, e.saturating_sub(s));
        }
        let (lo, hi) = captured.stack;
        if hi <= lo || hi - lo > STACK_TOP / 2 {
            return Err(format!("captured stack {lo:#x}-{hi:#x} is no range"));
        }
        space.add(lo, hi - lo, STACK_TOP - (hi - lo));
        Ok(space)
    }
}
