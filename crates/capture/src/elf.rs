//! The parts of an x86-64 ELF file the kernel's loader (`fs/binfmt_elf.c`)
//! reads to lay a program out: its type, its loadable segments and the
//! interpreter it names.

use pagelab_core::Prot;
use std::path::{Path, PathBuf};

/// The base page (x86-64's 4K), from `pagelab_core`.
const PAGE: u64 = pagelab_core::PageSize::MIN.bytes();
const PT_LOAD: u32 = 1;
const PT_INTERP: u32 = 3;
const ET_EXEC: u16 = 2;
const ET_DYN: u16 = 3;
const EM_X86_64: u16 = 62;
const PHDR: usize = 56;
#[cfg(test)]
const EHDR_LEN: usize = 64;
/// The kernel refuses more program headers than fit in 64K (`elf_read_phdrs`).
const MAX_PHNUM: usize = 65536 / PHDR;

/// Whether the program is linked at fixed addresses or position-independent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElfKind {
    /// `ET_EXEC`: loaded at the addresses of its segments.
    Exec,
    /// `ET_DYN`: a position-independent executable or a shared object (ld.so).
    Dyn,
}

/// One `PT_LOAD` program header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// `p_offset`: where the segment's bytes start in the file.
    pub offset: u64,
    /// `p_vaddr`: where the segment is linked.
    pub vaddr: u64,
    /// `p_filesz`: bytes read from the file.
    pub filesz: u64,
    /// `p_memsz`: bytes in memory (the rest, past `filesz`, is zero: the bss).
    pub memsz: u64,
    /// `p_align`.
    pub align: u64,
    /// The protection its `p_flags` ask for.
    pub prot: Prot,
}

/// An ELF file as the loader sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElfImage {
    /// Where it was read from (for messages).
    pub path: PathBuf,
    /// `e_type`.
    pub kind: ElfKind,
    /// `e_entry`: the first instruction, at its link address.
    pub entry: u64,
    /// Its `PT_LOAD` headers, in file order.
    pub loads: Vec<Segment>,
    /// The interpreter its `PT_INTERP` names, if any.
    pub interp: Option<PathBuf>,
}

/// Why a file is not an ELF image the model can load, naming the file, the
/// field and its byte offset.
#[derive(Debug, thiserror::Error)]
pub enum ElfError {
    /// The file cannot be read.
    #[error("{path}: {err}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        err: std::io::Error,
    },
    /// A field holds what the loader refuses or the model does not load.
    #[error("{path}: {field} at byte {offset}: {what}")]
    Bad {
        /// The file.
        path: PathBuf,
        /// The header field, as the ELF specification names it.
        field: &'static str,
        /// Its byte offset in the file.
        offset: u64,
        /// What is wrong with it.
        what: String,
    },
}

impl ElfImage {
    /// Reads the ELF file at `path`.
    pub fn read(path: &Path) -> Result<ElfImage, ElfError> {
        let bytes = std::fs::read(path).map_err(|err| ElfError::Io {
            path: path.to_path_buf(),
            err,
        })?;
        ElfImage::parse(&bytes, path)
    }

    /// Parses an ELF file's bytes; `path` names it in errors.
    pub fn parse(b: &[u8], path: &Path) -> Result<ElfImage, ElfError> {
        let bad = |field: &'static str, offset: usize, what: String| ElfError::Bad {
            path: path.to_path_buf(),
            field,
            offset: offset as u64,
            what,
        };
        let short = |field: &'static str, offset: usize| {
            bad(field, offset, format!("the file ends at byte {}", b.len()))
        };
        let u16_at = |field, at: usize| {
            b.get(at..at + 2)
                .map(|s| u16::from_le_bytes(s.try_into().expect("2 bytes")))
                .ok_or_else(|| short(field, at))
        };
        let u32_at = |field, at: usize| {
            b.get(at..at + 4)
                .map(|s| u32::from_le_bytes(s.try_into().expect("4 bytes")))
                .ok_or_else(|| short(field, at))
        };
        let u64_at = |field, at: usize| {
            b.get(at..at + 8)
                .map(|s| u64::from_le_bytes(s.try_into().expect("8 bytes")))
                .ok_or_else(|| short(field, at))
        };
        if b.get(..4) != Some(b"\x7fELF") {
            return Err(bad("e_ident", 0, "not an ELF file".into()));
        }
        if b.get(4) != Some(&2) || b.get(5) != Some(&1) {
            return Err(bad(
                "e_ident",
                4,
                "not a 64-bit little-endian ELF file".into(),
            ));
        }
        let kind = match u16_at("e_type", 16)? {
            ET_EXEC => ElfKind::Exec,
            ET_DYN => ElfKind::Dyn,
            t => {
                return Err(bad(
                    "e_type",
                    16,
                    format!("{t} is not an executable (2) or shared object (3)"),
                ))
            }
        };
        let machine = u16_at("e_machine", 18)?;
        if machine != EM_X86_64 {
            return Err(bad(
                "e_machine",
                18,
                format!("{machine} is not x86-64 ({EM_X86_64})"),
            ));
        }
        let entry = u64_at("e_entry", 24)?;
        let phoff = u64_at("e_phoff", 32)? as usize;
        let phentsize = u16_at("e_phentsize", 54)? as usize;
        let phnum = u16_at("e_phnum", 56)? as usize;
        if phentsize != PHDR {
            return Err(bad("e_phentsize", 54, format!("{phentsize}, not {PHDR}")));
        }
        if phnum == 0 || phnum > MAX_PHNUM {
            return Err(bad(
                "e_phnum",
                56,
                format!("{phnum} program headers (1 to {MAX_PHNUM})"),
            ));
        }
        let (mut loads, mut interp) = (Vec::new(), None);
        for i in 0..phnum {
            let at = phoff
                .checked_add(i * PHDR)
                .filter(|a| a.checked_add(PHDR).is_some_and(|e| e <= b.len()))
                .ok_or_else(|| short("e_phoff", 32))?;
            let (offset, filesz) = (u64_at("p_offset", at + 8)?, u64_at("p_filesz", at + 32)?);
            match u32_at("p_type", at)? {
                PT_LOAD => {
                    let flags = u32_at("p_flags", at + 4)?;
                    let s = Segment {
                        offset,
                        vaddr: u64_at("p_vaddr", at + 16)?,
                        filesz,
                        memsz: u64_at("p_memsz", at + 40)?,
                        align: u64_at("p_align", at + 48)?,
                        // PF_X 1, PF_W 2, PF_R 4 to PROT_READ 1, PROT_WRITE 2, PROT_EXEC 4.
                        prot: Prot(((flags & 4) >> 2 | (flags & 2) | (flags & 1) << 2) as u8),
                    };
                    if s.filesz > s.memsz {
                        return Err(bad(
                            "p_filesz",
                            at + 32,
                            format!("{:#x} exceeds p_memsz {:#x}", s.filesz, s.memsz),
                        ));
                    }
                    if s.vaddr.checked_add(s.memsz).is_none() {
                        return Err(bad(
                            "p_memsz",
                            at + 40,
                            "the segment runs past the top of the address space".into(),
                        ));
                    }
                    if (s.vaddr ^ s.offset) & (PAGE - 1) != 0 {
                        return Err(bad(
                            "p_vaddr",
                            at + 16,
                            "p_vaddr and p_offset differ within a page".into(),
                        ));
                    }
                    loads.push(s);
                }
                PT_INTERP => {
                    let name = (offset as usize)
                        .checked_add(filesz as usize)
                        .and_then(|end| b.get(offset as usize..end))
                        .ok_or_else(|| short("p_offset", at + 8))?;
                    let name = name.split(|&c| c == 0).next().unwrap_or_default();
                    interp = Some(PathBuf::from(String::from_utf8_lossy(name).into_owned()));
                }
                _ => {}
            }
        }
        if loads.is_empty() {
            return Err(bad("p_type", phoff, "no PT_LOAD segment".into()));
        }
        Ok(ElfImage {
            path: path.to_path_buf(),
            kind,
            entry,
            loads,
            interp,
        })
    }

    /// The span of its segments, from the first one's page to the last one's
    /// end (`total_mapping_size`).
    pub fn total_size(&self) -> u64 {
        let lo = self.loads.iter().map(|s| s.vaddr & !(PAGE - 1)).min();
        let hi = self.loads.iter().map(|s| s.vaddr + s.memsz).max();
        hi.unwrap_or(0) - lo.unwrap_or(0)
    }

    /// The largest power-of-two `p_align` of its segments, at least a page
    /// (`maximum_alignment`).
    pub fn alignment(&self) -> u64 {
        self.loads
            .iter()
            .map(|s| s.align)
            .filter(|a| a.is_power_of_two())
            .max()
            .unwrap_or(0)
            .next_multiple_of(PAGE)
            .max(PAGE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(e_type: u16, machine: u16, phnum: u16) -> Vec<u8> {
        let mut b = vec![0u8; EHDR_LEN + PHDR * phnum as usize];
        b[..6].copy_from_slice(b"\x7fELF\x02\x01");
        b[16..18].copy_from_slice(&e_type.to_le_bytes());
        b[18..20].copy_from_slice(&machine.to_le_bytes());
        b[32..40].copy_from_slice(&(EHDR_LEN as u64).to_le_bytes());
        b[54..56].copy_from_slice(&(PHDR as u16).to_le_bytes());
        b[56..58].copy_from_slice(&phnum.to_le_bytes());
        b
    }

    fn load(b: &mut [u8], i: usize, vaddr: u64, filesz: u64, memsz: u64) {
        let at = EHDR_LEN + i * PHDR;
        b[at..at + 4].copy_from_slice(&PT_LOAD.to_le_bytes());
        b[at + 4..at + 8].copy_from_slice(&6u32.to_le_bytes());
        b[at + 8..at + 16].copy_from_slice(&vaddr.to_le_bytes());
        b[at + 16..at + 24].copy_from_slice(&vaddr.to_le_bytes());
        b[at + 32..at + 40].copy_from_slice(&filesz.to_le_bytes());
        b[at + 40..at + 48].copy_from_slice(&memsz.to_le_bytes());
        b[at + 48..at + 56].copy_from_slice(&0x20_0000u64.to_le_bytes());
    }

    fn err(b: &[u8]) -> String {
        ElfImage::parse(b, Path::new("prog"))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn segments_span_and_alignment() {
        let mut b = header(ET_DYN, EM_X86_64, 2);
        load(&mut b, 0, 0, 0x1000, 0x1000);
        load(&mut b, 1, 0x20_1234, 0x10, 0x3000);
        let e = ElfImage::parse(&b, Path::new("prog")).unwrap();
        assert_eq!(e.kind, ElfKind::Dyn);
        assert_eq!(e.loads[1].prot, Prot(Prot::READ | Prot::WRITE));
        assert_eq!(e.total_size(), 0x20_4234);
        assert_eq!(e.alignment(), 0x20_0000);
    }

    #[test]
    fn bad_files_name_the_field_and_its_offset() {
        assert_eq!(
            err(b"#!/bin/sh"),
            "prog: e_ident at byte 0: not an ELF file"
        );
        let b = header(1, EM_X86_64, 1);
        assert!(
            err(&b).contains("e_type at byte 16: 1 is not"),
            "{}",
            err(&b)
        );
        let b = header(ET_EXEC, 183, 1);
        assert!(err(&b).contains("e_machine at byte 18"), "{}", err(&b));
        let mut b = header(ET_EXEC, EM_X86_64, 1);
        load(&mut b, 0, 0x40_0000, 0x2000, 0x1000);
        assert!(
            err(&b).contains("p_filesz at byte 96: 0x2000 exceeds"),
            "{}",
            err(&b)
        );
        let b = header(ET_EXEC, EM_X86_64, 2);
        assert!(err(&b[..100]).contains("e_phoff at byte 32: the file ends at byte 100"));
        let b = header(ET_EXEC, EM_X86_64, 1);
        assert!(err(&b).contains("no PT_LOAD"), "{}", err(&b));
    }
}
