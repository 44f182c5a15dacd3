//! `binfmt_elf`'s placement of a new program (`fs/binfmt_elf.c:
//! load_elf_binary`, `fs/exec.c: setup_arg_pages`,
//! `arch/x86/entry/vdso/vma.c: map_vdso`), without randomisation, as under
//! `setarch -R`:
//!
//! - the stack: its top at `STACK_TOP` (0x7ffffffff000), its pages those
//!   the strings `execve` copied (the file name, the environment, the
//!   arguments) take, plus 128K, at most `RLIMIT_STACK`;
//! - the program: a position-independent one (`ET_DYN`) with an interpreter
//!   at `ELF_ET_DYN_BASE` (2/3 of the address window, 0x555555554000),
//!   aligned down to its largest segment alignment; without an interpreter
//!   and with page-aligned segments where mmap puts it; a fixed one
//!   (`ET_EXEC`) at its own addresses. Each segment is one mapping, and the
//!   pages of its bss past the file's one more, anonymous;
//! - the interpreter (ld.so) where mmap puts a request of its whole span;
//! - the program break at the page after the program's last byte, or at
//!   `ELF_ET_DYN_BASE` for a position-independent program without an
//!   interpreter (a static PIE, ld.so run directly; Linux 6.10 and later);
//! - the vDSO, its data pages first, where mmap puts it.

use super::{LayoutParams, LinuxLayout, Unmodelled, TASK_SIZE};
use crate::elf::{ElfImage, ElfKind, Segment};
use pagelab_core::{MapRequest, Prot, VirtAddr};

const PAGE: u64 = 4096;
/// `ELF_ET_DYN_BASE` of x86-64: two thirds of the default address window.
pub const ELF_ET_DYN_BASE: u64 = TASK_SIZE / 3 * 2;
/// `STACK_TOP` without randomisation: the top of the default window.
pub const STACK_TOP: u64 = TASK_SIZE;
/// The room `setup_arg_pages` adds below the strings (`stack_expand`).
const STACK_EXPAND: u64 = 128 << 10;

/// What a region of a new program's address space holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RegionKind {
    /// The initial stack.
    Stack,
    /// A segment of the program's file.
    Program,
    /// The program's bss pages past its file's.
    ProgramBss,
    /// A segment of the interpreter's file.
    Interpreter,
    /// The interpreter's bss pages past its file's.
    InterpreterBss,
    /// The vDSO's data pages (`[vvar]`, `[vvar_vclock]`).
    VdsoData,
    /// The vDSO's code (`[vdso]`).
    Vdso,
}

/// One mapping `execve` makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// What it holds.
    pub kind: RegionKind,
    /// Its first byte.
    pub start: VirtAddr,
    /// Its length in bytes, a multiple of 4K.
    pub len: u64,
    /// Its protection.
    pub prot: Prot,
    /// The file offset of its first byte, for a file's segment.
    pub offset: Option<u64>,
}

/// A program as `execve` was asked to start it.
#[derive(Clone, Copy, Debug)]
pub struct ExecRequest<'a> {
    /// The program's file.
    pub program: &'a ElfImage,
    /// The interpreter its `PT_INTERP` names, read (`None` for a static program).
    pub interp: Option<&'a ElfImage>,
    /// The bytes of the strings copied to the stack: see [`exec_strings`].
    pub strings: u64,
}

/// Where `execve` put a program: its mappings in the order it made them, and
/// the program break.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecLayout {
    /// The mappings, in the order the kernel made them.
    pub regions: Vec<Region>,
    /// The program break's start (`mm->start_brk`).
    pub start_brk: VirtAddr,
    /// What the program's link addresses are moved by.
    pub load_bias: u64,
    /// What the interpreter's link addresses are moved by.
    pub interp_bias: u64,
}

impl ExecLayout {
    /// The regions of one kind.
    pub fn of(&self, kind: RegionKind) -> impl Iterator<Item = &Region> {
        self.regions.iter().filter(move |r| r.kind == kind)
    }
}

/// The bytes `execve` copies to the new stack: the file name it was given,
/// then each environment string and each argument, each with its NUL.
pub fn exec_strings<'a>(
    filename: &[u8],
    argv: impl IntoIterator<Item = &'a [u8]>,
    envp: impl IntoIterator<Item = &'a [u8]>,
) -> u64 {
    let n = |s: &[u8]| s.len() as u64 + 1;
    n(filename) + argv.into_iter().map(n).sum::<u64>() + envp.into_iter().map(n).sum::<u64>()
}

impl LinuxLayout {
    /// A new address space with `req`'s program loaded as Linux loads it,
    /// and where each of its mappings went.
    pub fn exec(
        params: LayoutParams,
        req: &ExecRequest<'_>,
    ) -> Result<(LinuxLayout, ExecLayout), Unmodelled> {
        if req.program.interp.is_some() && req.interp.is_none() {
            return Err(Unmodelled::Rule(
                "a program with an interpreter, without the interpreter's file",
            ));
        }
        let mut l = LinuxLayout::new(params);
        let mut regions = Vec::new();
        // setup_arg_pages: the strings' pages, 8 bytes below the top first.
        let low = (STACK_TOP - 8).saturating_sub(req.strings) & !(PAGE - 1);
        let size = STACK_TOP - low.min(STACK_TOP - PAGE);
        let rlim = params.rlimit_stack.unwrap_or(u64::MAX) & !(PAGE - 1);
        let stack = (size + STACK_EXPAND).min(rlim).max(size);
        l.insert(VirtAddr(STACK_TOP - stack), stack, true);
        regions.push(Region {
            kind: RegionKind::Stack,
            start: VirtAddr(STACK_TOP - stack),
            len: stack,
            prot: Prot(Prot::READ | Prot::WRITE),
            offset: None,
        });
        let program = req.program;
        let first = program.loads[0].vaddr;
        let (bias, flags) = match program.kind {
            ElfKind::Exec => (0, MapRequest::FIXED_NOREPLACE),
            ElfKind::Dyn if req.interp.is_some() || program.alignment() > PAGE => {
                let base = ELF_ET_DYN_BASE & !(program.alignment() - 1);
                (
                    base.wrapping_sub(first) & !(PAGE - 1),
                    MapRequest::FIXED_NOREPLACE,
                )
            }
            ElfKind::Dyn => (first.wrapping_neg() & !(PAGE - 1), 0),
        };
        let kinds = (RegionKind::Program, RegionKind::ProgramBss);
        let load_bias = load(&mut l, program, bias, flags, kinds, &mut regions)?;
        let end = program.loads.iter().map(|s| s.vaddr + s.memsz).max();
        let start_brk = if program.kind == ElfKind::Dyn && req.interp.is_none() {
            // A static PIE or ld.so run as a program: its break is moved out
            // of the mmap area, randomised or not (Linux 6.10 and later).
            ELF_ET_DYN_BASE
        } else {
            load_bias.wrapping_add(end.unwrap_or(0))
        }
        .next_multiple_of(PAGE);
        let mut interp_bias = 0;
        if let Some(interp) = req.interp {
            let (bias, flags) = match interp.kind {
                ElfKind::Exec => (0, MapRequest::FIXED),
                ElfKind::Dyn => (interp.loads[0].vaddr.wrapping_neg(), 0),
            };
            let kinds = (RegionKind::Interpreter, RegionKind::InterpreterBss);
            interp_bias = load(&mut l, interp, bias, flags, kinds, &mut regions)?;
        }
        // map_vdso: one request for the data pages and the code after them.
        let len = params.vdso_data + params.vdso_text;
        let at = l.map(&MapRequest {
            hint: VirtAddr(0),
            len,
            prot: Prot(Prot::READ),
            flags: MapRequest::PRIVATE | MapRequest::ANONYMOUS,
            file: None,
            offset: 0,
        })?;
        for (kind, start, len, prot) in [
            (RegionKind::VdsoData, at, params.vdso_data, Prot::READ),
            (
                RegionKind::Vdso,
                at.saturating_add(params.vdso_data),
                params.vdso_text,
                Prot::READ | Prot::EXEC,
            ),
        ] {
            regions.push(Region {
                kind,
                start,
                len,
                prot: Prot(prot),
                offset: None,
            });
        }
        Ok((
            l,
            ExecLayout {
                regions,
                start_brk: VirtAddr(start_brk),
                load_bias,
                interp_bias,
            },
        ))
    }
}

/// Maps `image`'s segments as `load_elf_binary` and `load_elf_interp` do:
/// the first with the `flags` given at `bias` plus its address, as one
/// request of the whole span; the rest fixed after it. Returns the bias
/// the first mapping's place gave.
fn load(
    l: &mut LinuxLayout,
    image: &ElfImage,
    mut bias: u64,
    flags: u32,
    (file_kind, bss_kind): (RegionKind, RegionKind),
    regions: &mut Vec<Region>,
) -> Result<u64, Unmodelled> {
    let mut total = image.total_size().next_multiple_of(PAGE);
    for (i, s) in image.loads.iter().enumerate() {
        let flags = if i == 0 { flags } else { MapRequest::FIXED };
        let addr = bias.wrapping_add(s.vaddr);
        let pgoff = s.vaddr & (PAGE - 1);
        let size = (s.filesz + pgoff).next_multiple_of(PAGE);
        let mut at = addr & !(PAGE - 1);
        if size > 0 {
            // elf_map: a request of the whole span first, the rest unmapped.
            let req = MapRequest {
                hint: VirtAddr(at),
                len: if i == 0 { total.max(size) } else { size },
                prot: s.prot,
                flags: MapRequest::PRIVATE | flags,
                file: None,
                offset: s.offset - pgoff,
            };
            at = l.place(&req)?.0;
            l.insert(VirtAddr(at), size, false);
            regions.push(file_region(file_kind, at, size, s));
        }
        if i == 0 && image.kind == ElfKind::Dyn {
            bias = bias.wrapping_add(at.wrapping_sub(addr & !(PAGE - 1)));
        }
        total = 0;
        // The bss past the file's last page: anonymous pages.
        if s.memsz > s.filesz {
            let base = if size > 0 { at } else { addr & !(PAGE - 1) };
            let zero = (base + pgoff + s.filesz).next_multiple_of(PAGE);
            let end = (base + pgoff + s.memsz).next_multiple_of(PAGE);
            if end > zero {
                l.insert(VirtAddr(zero), end - zero, false);
                regions.push(Region {
                    kind: bss_kind,
                    start: VirtAddr(zero),
                    len: end - zero,
                    prot: s.prot,
                    offset: None,
                });
            }
        }
    }
    Ok(bias)
}

fn file_region(kind: RegionKind, at: u64, len: u64, s: &Segment) -> Region {
    Region {
        kind,
        start: VirtAddr(at),
        len,
        prot: s.prot,
        offset: Some(s.offset & !(PAGE - 1)),
    }
}
