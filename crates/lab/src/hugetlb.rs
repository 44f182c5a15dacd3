//! Growing hugetlb pools for a run, and saying exactly what the kernel gave.
//!
//! The kernel fills `nr_hugepages` with as many free, contiguous, aligned blocks as it finds,
//! which may be fewer than asked. pagelab then compacts memory once and asks again; if the
//! pool is still short it puts the pool back and says what it got and what to do.

use crate::session::KnobSession;
use crate::sysfs::{list_sizes, Knob, Sysfs};
use anyhow::{bail, Context};
use pagelab_core::{Bytes, PageSize};

/// Refuses a pool of `count` pages of `size` that could never fit in the machine's memory
/// (`MemTotal`), before anything is written: the kernel would otherwise take every free
/// huge page it can find into the pool (tens of GiB, starving the machine) before the
/// shortfall is known. A machine whose memory cannot be read is not refused here.
pub fn check_pool_size(sysfs: &Sysfs, size: PageSize, count: u64) -> anyhow::Result<()> {
    let total = sysfs.host_info().memory_bytes;
    let asked = u128::from(count) * u128::from(size.bytes());
    if total == 0 || asked <= u128::from(total) {
        return Ok(());
    }
    let shown =
        u64::try_from(asked).map_or_else(|_| "more than 16E".to_string(), |b| Bytes(b).to_string());
    bail!(
        "a pool of {count} {size} pages is {shown}, more than this machine's {} of memory: \
         at most {} {size} pages could ever exist here, and the rest of the system needs memory \
         too; ask for fewer",
        Bytes(total),
        total / size.bytes()
    )
}

impl KnobSession {
    /// Sets the hugetlb pool of `size` pages to `count` (journaled like any knob). If the kernel
    /// gives fewer, tries once more after `echo 1 > /proc/sys/vm/compact_memory`; if still
    /// short, puts the pool back to what it held before and fails with e.g. "asked for 512 2M
    /// pages, the kernel gave 301: memory is too fragmented or too small; free memory, ask for
    /// fewer, or reserve them at boot (hugepages=512 on the kernel command line)". Returns the
    /// count obtained. A size the kernel lacks is an error listing the sizes it has.
    pub fn grow_hugetlb(&mut self, size: PageSize, count: u64) -> anyhow::Result<u64> {
        let have = self.sysfs().hugetlb_sizes();
        if !have.contains(&size) {
            bail!(
                "this kernel has no {size} hugetlb pages; its hugetlb sizes are {}",
                list_sizes(&have)
            );
        }
        check_pool_size(self.sysfs(), size, count)?;
        let knob = Knob::HugetlbPages(size);
        let before = self.pool(&knob)?;
        self.save(&knob)?;
        let compact = self.sysfs().proc.join("sys/vm/compact_memory");
        let outcome = grow_pool(
            count,
            |n| {
                self.write(&knob, &n.to_string())?;
                self.pool(&knob)
            },
            || crate::session::write_knob_file(&compact, "1").is_ok(),
        )?;
        match outcome {
            Ok(got) => Ok(got),
            Err(got) => {
                let back = self
                    .write(&knob, &before.to_string())
                    .and_then(|()| self.pool(&knob));
                let memory = self.sysfs().host_info().memory_bytes;
                let mut msg = shortfall_message(size, count, got, memory);
                match back {
                    Ok(n) if n == before => {}
                    Ok(n) => msg += &format!(" (putting the pool back to {before} left {n})"),
                    Err(e) => msg += &format!(" (putting the pool back to {before} failed: {e:#})"),
                }
                bail!(msg)
            }
        }
    }

    /// The pool's current size.
    fn pool(&self, knob: &Knob) -> anyhow::Result<u64> {
        let text = self.sysfs().read(knob)?;
        text.parse()
            .with_context(|| format!("{} holds `{text}`, not a page count", knob.name()))
    }
}

/// Asks for `asked` pages through `attempt` (which writes the count and returns what the pool
/// then holds); when short, calls `compact` once and asks again. `Ok(Ok(got))` when the pool
/// holds at least `asked`, `Ok(Err(got))` when it stayed short.
fn grow_pool(
    asked: u64,
    mut attempt: impl FnMut(u64) -> anyhow::Result<u64>,
    mut compact: impl FnMut() -> bool,
) -> anyhow::Result<Result<u64, u64>> {
    let got = attempt(asked)?;
    if got >= asked {
        return Ok(Ok(got));
    }
    // Compaction is best effort: without it the second attempt may still find freed memory.
    let _ = compact();
    let got = attempt(asked)?;
    Ok(if got >= asked { Ok(got) } else { Err(got) })
}

/// What to tell the user when the pool of `size` stayed at `got` pages of the `asked`, on a
/// machine with `memory` bytes (0: unknown). A boot-time reservation is suggested only when it
/// would leave the system at least a quarter of the memory: reserving more at boot makes a
/// machine that cannot start its own services.
pub fn shortfall_message(size: PageSize, asked: u64, got: u64, memory: u64) -> String {
    let want = u128::from(asked) * u128::from(size.bytes());
    let head = format!(
        "asked for {asked} {size} pages, the kernel gave {got}: memory is too fragmented or too \
         small; free memory, ask for fewer"
    );
    if memory > 0 && want * 4 > u128::from(memory) * 3 {
        let shown =
            u64::try_from(want).map_or_else(|_| "more than 16E".into(), |b| Bytes(b).to_string());
        return format!(
            "{head} ({shown} is most of this machine's {}; reserving that much at boot would \
             starve the system)",
            Bytes(memory)
        );
    }
    let boot = if size == PageSize::M2 {
        format!("hugepages={asked}")
    } else {
        format!("hugepagesz={size} hugepages={asked}")
    };
    format!("{head}, or reserve them at boot ({boot} on the kernel command line)")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attempts so far, and whether memory was compacted.
    type Log = std::rc::Rc<std::cell::Cell<(u32, bool)>>;

    /// A pool that can hold at most `cap` pages before compaction and `after` after it.
    fn kernel(
        cap: u64,
        after: u64,
    ) -> (
        impl FnMut(u64) -> anyhow::Result<u64>,
        impl FnMut() -> bool,
        Log,
    ) {
        let log = std::rc::Rc::new(std::cell::Cell::new((0u32, false)));
        let (a, c) = (log.clone(), log.clone());
        let attempt = move |n: u64| {
            let (tries, compacted) = a.get();
            a.set((tries + 1, compacted));
            Ok(n.min(if compacted { after } else { cap }))
        };
        let compact = move || {
            let (tries, _) = c.get();
            c.set((tries, true));
            true
        };
        (attempt, compact, log)
    }

    #[test]
    fn enough_at_once_needs_no_compaction() {
        let (attempt, compact, log) = kernel(1000, 1000);
        assert_eq!(grow_pool(512, attempt, compact).unwrap(), Ok(512));
        assert_eq!(log.get(), (1, false));
    }

    #[test]
    fn compaction_then_a_second_attempt_can_fill_the_pool() {
        let (attempt, compact, log) = kernel(301, 600);
        assert_eq!(grow_pool(512, attempt, compact).unwrap(), Ok(512));
        assert_eq!(log.get(), (2, true));
    }

    #[test]
    fn still_short_after_compaction_reports_what_it_got() {
        let (attempt, compact, log) = kernel(200, 301);
        assert_eq!(grow_pool(512, attempt, compact).unwrap(), Err(301));
        assert_eq!(log.get(), (2, true));
    }

    #[test]
    fn a_write_error_is_an_error_not_a_shortfall() {
        let r = grow_pool(4, |_| anyhow::bail!("EINVAL"), || true);
        assert!(r.is_err());
    }

    #[test]
    fn shortfall_says_what_was_asked_what_came_and_what_to_do() {
        const GIB: u64 = 1 << 30;
        assert_eq!(
            shortfall_message(PageSize::M2, 512, 301, 24 * GIB),
            "asked for 512 2M pages, the kernel gave 301: memory is too fragmented or too small; \
             free memory, ask for fewer, or reserve them at boot (hugepages=512 on the kernel \
             command line)"
        );
        assert!(shortfall_message(PageSize::G1, 4, 1, 24 * GIB)
            .contains("(hugepagesz=1G hugepages=4 on"));
        assert!(shortfall_message(PageSize::G1, 4, 1, 0).contains("hugepagesz=1G hugepages=4"));
    }

    /// Regression: 100000000 2M pages (190T) once got "hugepages=100000000 on the kernel
    /// command line" as advice; a request of most of the memory gets no boot advice.
    #[test]
    fn no_boot_advice_for_most_of_the_memory() {
        const GIB: u64 = 1 << 30;
        let m = shortfall_message(PageSize::M2, 100_000_000, 11_000, 24 * GIB);
        assert!(
            !m.contains("hugepages=") && m.contains("190.7T is most of this machine's 24G"),
            "{m}"
        );
        let m = shortfall_message(PageSize::M2, 10_000, 9_000, 24 * GIB);
        assert!(!m.contains("hugepages="), "19.5G of 24G: {m}");
        let m = shortfall_message(PageSize::M2, 9_000, 8_000, 24 * GIB);
        assert!(m.contains("hugepages=9000"), "17.6G of 24G: {m}");
    }

    fn tree_with_memory(kb: u64) -> (tempfile::TempDir, Sysfs) {
        let dir = tempfile::tempdir().unwrap();
        let proc = dir.path().join("proc");
        std::fs::create_dir_all(&proc).unwrap();
        std::fs::write(proc.join("meminfo"), format!("MemTotal: {kb} kB\n")).unwrap();
        let sysfs = Sysfs::at(dir.path().join("mm"), dir.path().join("state"), proc);
        (dir, sysfs)
    }

    /// Regression: `--hugetlb 2M:100000000` took 23 GiB into the pool before failing.
    #[test]
    fn a_pool_beyond_the_memory_is_refused_before_any_write() {
        let (_dir, sysfs) = tree_with_memory(24 << 20);
        let e = check_pool_size(&sysfs, PageSize::M2, 100_000_000)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "a pool of 100000000 2M pages is 190.7T, more than this machine's 24G of memory: at \
             most 12288 2M pages could ever exist here, and the rest of the system needs memory \
             too; ask for fewer"
        );
        check_pool_size(&sysfs, PageSize::M2, 12288).unwrap();
        assert!(check_pool_size(&sysfs, PageSize::M2, 12289).is_err());
        assert!(check_pool_size(&sysfs, PageSize::G1, u64::MAX)
            .unwrap_err()
            .to_string()
            .contains("16E"));
    }
}
