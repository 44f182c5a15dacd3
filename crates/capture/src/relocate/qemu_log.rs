//! Where QEMU user mode loaded a program, read from its `-d page` log.

use super::{CapturedImage, PAGE};
use crate::elf::ElfImage;
use rustc_hash::FxHashMap;

impl CapturedImage {
    /// Where QEMU user mode put a program, from its `-d page` log (the
    /// block after "page layout changed following binary load"): the
    /// program's bias from `brk` (the end of its bss), the interpreter's
    /// from `entry` (its entry point), the stack from the row holding
    /// `start_stack`; and QEMU's own pages for the guest CPU ([`CapturedImage::qemu_own`]):
    /// the page each of the next blocks, "following mmap", adds, while each adds one
    /// writable page (x86-64 QEMU maps its IDT, then its GDT, before the guest runs).
    pub fn from_qemu_log(
        log: &str,
        program: &ElfImage,
        interp: Option<&ElfImage>,
    ) -> Result<CapturedImage, String> {
        let block = log
            .split_once("page layout changed following binary load")
            .ok_or("no \"page layout changed following binary load\" in QEMU's -d page log")?
            .1;
        let qemu_own = qemu_own(block);
        let rows = page_rows(block)?;
        let mut field = FxHashMap::default();
        for line in block.lines().skip(1) {
            let mut w = line.split_whitespace();
            let (Some(a), Some(b)) = (w.next(), w.next()) else {
                break;
            };
            if a.contains('-') || a == "start" {
                continue; // a row (above) or the rows' header
            } else if let Some(v) = hex(b) {
                field.insert(a.to_string(), v);
            } else {
                break;
            }
            if a == "auxv_start" {
                break;
            }
        }
        let get = |k: &str| {
            field
                .get(k)
                .copied()
                .ok_or_else(|| format!("QEMU's -d page log has no `{k}`"))
        };
        let end = program.loads.iter().map(|s| s.vaddr + s.memsz).max();
        let program_bias = get("brk")?.wrapping_sub(end.unwrap_or(0));
        let entry = get("entry")?;
        let interp_bias = interp.map(|i| entry.wrapping_sub(i.entry));
        if interp.is_none() && entry.wrapping_sub(program.entry) != program_bias {
            return Err(format!(
                "QEMU's -d page log: entry {entry:#x} and brk disagree on where {} lies",
                program.path.display()
            ));
        }
        if program_bias % PAGE != 0 || interp_bias.is_some_and(|b| b % PAGE != 0) {
            return Err("QEMU's -d page log: a load bias that is no multiple of 4K".into());
        }
        let sp = get("start_stack")?;
        let stack = rows
            .into_iter()
            .map(|(s, e, _)| (s, e))
            .find(|(s, e)| (*s..*e).contains(&sp))
            .ok_or_else(|| format!("QEMU's -d page log: no row holds start_stack {sp:#x}"))?;
        Ok(CapturedImage {
            program_bias,
            interp_bias,
            stack,
            qemu_own,
        })
    }
}

/// QEMU's pages for the guest CPU, from the page log after the binary load (`after`): of
/// the first [`QEMU_OWN_PAGES`] blocks "following mmap", each that adds exactly one
/// writable 4K page to the one before adds it; the first that does not ends the search.
fn qemu_own(after: &str) -> Vec<(u64, u64)> {
    // A block that does not parse ends the search as one that adds no page does.
    fn rows(block: &str) -> Vec<(u64, u64, &str)> {
        page_rows(block).unwrap_or_default()
    }
    let mut blocks = after.split("page layout changed following ");
    let mut before = rows(blocks.next().unwrap_or_default());
    let mut own = Vec::new();
    for block in blocks.take(QEMU_OWN_PAGES) {
        let Some(block) = block.strip_prefix("mmap") else {
            break;
        };
        let now = rows(block);
        // A new page may extend the row before it (QEMU's log merges rows of one
        // protection): the new bytes are those no row before covered.
        let covered = |a: u64| before.iter().any(|(s, e, _)| (*s..*e).contains(&a));
        let new: Vec<&(u64, u64, &str)> = now
            .iter()
            .filter(|(s, e, _)| s < e && (!covered(*s) || !covered(e - 1)))
            .collect();
        let page = match new[..] {
            [(s, e, prot)] if prot.starts_with("rw") => {
                let s = if covered(*s) {
                    e.saturating_sub(PAGE)
                } else {
                    *s
                };
                (e - s == PAGE && !covered(s)).then_some((s, *e))
            }
            _ => None,
        };
        let Some(page) = page else { break };
        own.push(page);
        before = now;
    }
    own
}

/// A hexadecimal number of the page log, with or without `0x`.
fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).ok()
}

/// The rows (`start-end size prot`) of one layout block of the page log, from the line
/// after its header (`start end size prot`) to the first line that is no row; an error
/// names a row whose addresses do not parse.
fn page_rows(block: &str) -> Result<Vec<(u64, u64, &str)>, String> {
    let mut rows = Vec::new();
    for line in block
        .lines()
        .skip_while(|l| !l.starts_with("start "))
        .skip(1)
    {
        let mut w = line.split_whitespace();
        let Some((s, e)) = w.next().and_then(|a| a.split_once('-')) else {
            break;
        };
        match (hex(s), hex(e)) {
            (Some(s), Some(e)) => rows.push((s, e, w.nth(1).unwrap_or(""))),
            _ => return Err(format!("QEMU's -d page log: bad row `{line}`")),
        }
    }
    Ok(rows)
}

/// How many of QEMU's own pages [`qemu_own`] looks for: x86-64 QEMU's IDT and GDT.
const QEMU_OWN_PAGES: usize = 2;
