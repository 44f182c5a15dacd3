//! The large folios a process has mapped, by size, read from the kernel: each present page
//! of its mappings (`/proc/PID/maps`, `/proc/PID/pagemap`) and the flags of its frame
//! (`/proc/kpageflags`). The lab reads them at each process's exit ([`pagelab_sys::trace`]),
//! which gives the program's own per-size figures where the kernel's counters
//! (`hugepages-*/stats/anon_fault_alloc`) are machine-wide.
//!
//! How the kernel reports a folio (checked in `fs/proc/page.c`, `stable_page_flags`, and
//! `include/uapi/linux/kernel-page-flags.h`, Linux 6.x; this VM runs 6.18):
//! - every page of a large folio other than its first has `KPF_COMPOUND_TAIL`; the first
//!   has `KPF_COMPOUND_HEAD` (its `PG_head`). The folio's order is not reported: its size is
//!   the head and the run of tails after it, which is what [`FolioCounter`] counts.
//! - `KPF_THP` is set for any large folio that is rmappable and not hugetlb, "any THPs here,
//!   not just PMD-sized ones": mTHP (16K..1M) and 2M anonymous folios, and large page-cache
//!   folios. hugetlb pages have `KPF_HUGE` instead and are not counted here.
//! - the huge zero folio has `KPF_ZERO_PAGE` and `KPF_THP`: it is no allocation and is left
//!   out.
//! - `KPF_ANON` is taken from the folio (`folio->mapping`), so tails carry it as the head.
//!
//! A pagemap entry has the present bit (63) and the frame number (bits 0..54, shown to
//! root only; others read 0).

use pagelab_core::PageSize;
use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

const KPF_ANON: u64 = 1 << 12;
const KPF_COMPOUND_HEAD: u64 = 1 << 15;
const KPF_COMPOUND_TAIL: u64 = 1 << 16;
const KPF_HUGE: u64 = 1 << 17;
const KPF_THP: u64 = 1 << 22;
const KPF_ZERO_PAGE: u64 = 1 << 24;

const PM_PRESENT: u64 = 1 << 63;
const PM_PFN: u64 = (1 << 55) - 1;

/// The folios seen: head frame -> (pages, flags, index of the maps line first showing it).
type Seen = BTreeMap<u64, (u64, u64, usize)>;

/// The largest folio looked for: 1G (order 18) in 4K pages.
const MAX_FOLIO_PAGES: u64 = 1 << 18;

/// Large folios by size, anonymous and file-backed apart.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Folios {
    /// Anonymous folios (`KPF_ANON`) by size.
    pub anon: BTreeMap<PageSize, u64>,
    /// Page-cache folios by size.
    pub file: BTreeMap<PageSize, u64>,
}

impl Folios {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &Folios) {
        for (mine, theirs) in [(&mut self.anon, &other.anon), (&mut self.file, &other.file)] {
            for (&size, &n) in theirs {
                *mine.entry(size).or_default() += n;
            }
        }
    }
}

/// One line of `/proc/PID/maps` as [`FolioCounter::by_mapping`] read it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MapsFolios {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// The line's path or `[heap]`, `[stack]`, ...; `anon` for an anonymous mapping.
    pub name: String,
    /// 4K pages present (zero pages included).
    pub pages: u64,
    /// Of those, 4K pages of a zero page (the 4K one or the huge one): read, never written.
    pub zero: u64,
    /// The large folios first seen in it.
    pub folios: Folios,
}

/// Reads `/proc/kpageflags` to tell the folios of frames; one per reading.
pub struct FolioCounter {
    flags: File,
}

impl FolioCounter {
    /// Opens `/proc/kpageflags` (root only).
    pub fn open() -> io::Result<FolioCounter> {
        Ok(FolioCounter {
            flags: File::open("/proc/kpageflags")?,
        })
    }

    /// The large folios process `pid` has mapped now, each counted once however many of its
    /// pages the process maps (a folio mapped in two places of one process counts once).
    pub fn mapped_by(&self, pid: u32) -> io::Result<Folios> {
        let mut out = Folios::default();
        for m in self.by_mapping(pid)? {
            out.add(&m.folios);
        }
        Ok(out)
    }

    /// As [`FolioCounter::mapped_by`], by mapping: each line of `/proc/PID/maps`, with the
    /// 4K pages present in it and the large folios first seen in it (a folio mapped twice
    /// counts in the lower mapping only, so the sum is [`FolioCounter::mapped_by`]'s count).
    pub fn by_mapping(&self, pid: u32) -> io::Result<Vec<MapsFolios>> {
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
        let pagemap = File::open(format!("/proc/{pid}/pagemap"))?;
        let mut seen = Seen::new(); // head -> (pages, flags, line)
        let mut entries = vec![0u8; 8 * 4096];
        let mut out = Vec::new();
        for (i, line) in maps.lines().enumerate() {
            let Some((start, end)) = range_of(line) else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("/proc/{pid}/maps: unreadable line `{line}`"),
                ));
            };
            let (mut present, mut zero) = (0, 0);
            let mut page = start / 4096;
            while page < end / 4096 {
                let n = (end / 4096 - page).min(4096);
                let buf = &mut entries[..8 * n as usize];
                let got = pagemap.read_at(buf, page * 8)?;
                for e in buf[..got].chunks_exact(8) {
                    let e = u64::from_ne_bytes(e.try_into().expect("8 bytes"));
                    if e & PM_PRESENT != 0 {
                        present += 1;
                        if e & PM_PFN != 0 {
                            if self.flags_of(e & PM_PFN)? & KPF_ZERO_PAGE != 0 {
                                zero += 1;
                            }
                            self.note(e & PM_PFN, i, &mut seen)?;
                        }
                    }
                }
                if got < buf.len() {
                    break; // past the end of what the kernel shows (vsyscall)
                }
                page += n;
            }
            out.push(MapsFolios {
                start,
                end,
                name: name_of(line),
                pages: present,
                zero,
                folios: Folios::default(),
            });
        }
        for &(pages, flags, line) in seen.values() {
            let Some(size) = PageSize::from_bytes(pages * 4096) else {
                continue;
            };
            let f = &mut out[line].folios;
            let by = if flags & KPF_ANON != 0 {
                &mut f.anon
            } else {
                &mut f.file
            };
            *by.entry(size).or_default() += 1;
        }
        Ok(out)
    }

    /// Notes the folio of frame `pfn` in `seen` (head frame -> pages, flags, the maps line
    /// it was first seen in) if it is a large one (`KPF_THP`, not the huge zero folio) not
    /// seen yet.
    fn note(&self, pfn: u64, line: usize, seen: &mut Seen) -> io::Result<()> {
        if let Some((&head, &(pages, _, _))) = seen.range(..=pfn).next_back() {
            if pfn < head + pages {
                return Ok(());
            }
        }
        let flags = self.flags_of(pfn)?;
        if flags & KPF_THP == 0 || flags & (KPF_ZERO_PAGE | KPF_HUGE) != 0 {
            return Ok(());
        }
        let mut head = pfn;
        while self.flags_of(head)? & KPF_COMPOUND_TAIL != 0 && pfn - head < MAX_FOLIO_PAGES {
            head -= 1;
        }
        if self.flags_of(head)? & KPF_COMPOUND_HEAD == 0 {
            return Ok(()); // split meanwhile: no longer one folio
        }
        let mut pages = 1;
        while pages < MAX_FOLIO_PAGES && self.flags_of(head + pages)? & KPF_COMPOUND_TAIL != 0 {
            pages += 1;
        }
        seen.insert(head, (pages, flags, line));
        Ok(())
    }

    fn flags_of(&self, pfn: u64) -> io::Result<u64> {
        let mut b = [0u8; 8];
        self.flags.read_exact_at(&mut b, pfn * 8)?;
        Ok(u64::from_ne_bytes(b))
    }
}

/// The start and end address of a `/proc/PID/maps` line.
fn range_of(line: &str) -> Option<(u64, u64)> {
    let range = line.split_whitespace().next()?;
    let (s, e) = range.split_once('-')?;
    Some((
        u64::from_str_radix(s, 16).ok()?,
        u64::from_str_radix(e, 16).ok()?,
    ))
}

/// The name field of a `/proc/PID/maps` line (its sixth field on: a path may hold
/// spaces), or `anon` when it has none.
fn name_of(line: &str) -> String {
    let mut rest = line;
    for _ in 0..5 {
        rest = rest.trim_start();
        rest = rest.find(char::is_whitespace).map_or("", |i| &rest[i..]);
    }
    match rest.trim() {
        "" => "anon".to_string(),
        name => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines_give_their_range() {
        let line = "7f0000000000-7f0000010000 rw-p 00000000 00:00 0 ";
        assert_eq!(range_of(line), Some((0x7f00_0000_0000, 0x7f00_0001_0000)));
        assert_eq!(range_of("garbage"), None);
        assert_eq!(name_of(line), "anon");
        let heap = "555555559000-55555557a000 rw-p 00000000 00:00 0      [heap]";
        assert_eq!(name_of(heap), "[heap]");
        let file = "7ffff7fc3000-7ffff7fc5000 r--p 00000000 fd:01 1234  /usr/lib/a b.so";
        assert_eq!(name_of(file), "/usr/lib/a b.so");
    }

    #[test]
    fn counts_add_up_by_size() {
        let k64 = PageSize::from_shift(16).unwrap();
        let mut a = Folios::default();
        a.anon.insert(k64, 2);
        let mut b = Folios::default();
        b.anon.insert(k64, 3);
        b.file.insert(PageSize::M2, 1);
        a.add(&b);
        assert_eq!(a.anon[&k64], 5);
        assert_eq!(a.file[&PageSize::M2], 1);
    }
}
