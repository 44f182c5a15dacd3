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
        let mut rows = Vec::new();
        let mut field = FxHashMap::default();
        for line in block.lines().skip(1) {
            let mut w = line.split_whitespace();
            let (Some(a), Some(b)) = (w.next(), w.next()) else {
                break;
            };
            let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
            if let Some((s, e)) = a.split_once('-') {
                match (hex(s), hex(e)) {
                    (Some(s), Some(e)) => rows.push((s, e)),
                    _ => return Err(format!("QEMU's -d page log: bad row `{line}`")),
                }
            } else if a == "start" {
                continue;
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
    let rows = |block: &str| -> Vec<(u64, u64, String)> {
        block
            .lines()
            .skip_while(|line| !line.starts_with("start "))
            .skip(1)
            .map_while(|line| {
                let mut w = line.split_whitespace();
                let (s, e) = w.next()?.split_once('-')?;
                let (_size, prot) = (w.next()?, w.next()?);
                let hex = |t: &str| u64::from_str_radix(t, 16).ok();
                Some((hex(s)?, hex(e)?, prot.to_string()))
            })
            .collect()
    };
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
        let new: Vec<&(u64, u64, String)> = now
            .iter()
            .filter(|(s, e, _)| !covered(*s) || !covered(e - 1))
            .collect();
        let page = match new[..] {
            [(s, e, prot)] if prot.starts_with("rw") => {
                let s = if covered(*s) { e - PAGE } else { *s };
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

/// How many of QEMU's own pages [`qemu_own`] looks for: x86-64 QEMU's IDT and GDT.
const QEMU_OWN_PAGES: usize = 2;
