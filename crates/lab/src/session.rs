//! Changing the kernel's page-size knobs for a run, and restoring every one on every exit path.
//!
//! A [`KnobSession`] holds `state/lock` (so two pagelab runs never change the knobs at once),
//! records each knob's value in `state/journal.json` before the first change, and restores
//! them on [`KnobSession::restore`], on drop (early returns, errors, panics), and, through the
//! handlers that keep SIGINT/SIGTERM/SIGHUP/SIGQUIT from killing pagelab, after Ctrl-C. Only
//! SIGKILL (or a crash of the machine's power) escapes: then the journal stays, and the next
//! pagelab command replays it with [`recover`].
//!
//! ```no_run
//! use pagelab_lab::session::KnobSession;
//! use pagelab_lab::sysfs::{Sysfs, ThpMode};
//! # fn main() -> anyhow::Result<()> {
//! let mut session = KnobSession::begin(&Sysfs::host())?;
//! session.configure(&["64K".parse()?], ThpMode::Always)?;
//! // ... run and measure ...
//! session.restore()?;
//! # Ok(()) }
//! ```

mod journal;

pub use pagelab_sys::signals::received as interrupted;

use crate::sysfs::{choices, list_sizes, Knob, Sysfs, ThpMode};
use anyhow::{bail, Context};
use journal::{Entry, Journal};
use pagelab_core::PageSize;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Exclusive use of the kernel's page-size knobs, restored when it ends.
#[derive(Debug)]
pub struct KnobSession {
    sysfs: Sysfs,
    /// The open `state/lock`, locked for the session's life.
    lock: Option<File>,
    /// The terminating signals, caught while the session may have knobs to restore.
    held: Option<pagelab_sys::signals::Held>,
    journal: Journal,
    /// Set once the knobs are restored (by `restore` or drop).
    closed: bool,
}

impl KnobSession {
    /// Opens a session: checks that the knobs can be written (root, a writable `/sys`) and says
    /// what is missing otherwise; takes `state/lock`, printing once
    /// "pagelab: waiting for pagelab (pid N), which holds the knobs (…/lock)" and waiting while
    /// another pagelab holds it; replays a journal left by a killed pagelab; and catches
    /// SIGINT, SIGTERM, SIGHUP and SIGQUIT until the session ends (see [`interrupted`]).
    pub fn begin(sysfs: &Sysfs) -> anyhow::Result<KnobSession> {
        check_permission(sysfs)?;
        std::fs::create_dir_all(&sysfs.state).with_context(|| {
            format!(
                "creating pagelab's state directory {}",
                sysfs.state.display()
            )
        })?;
        let lock_path = sysfs.state.join("lock");
        let mut lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .open(&lock_path)
            .with_context(|| format!("opening the lock {}", lock_path.display()))?;
        if !journal::flock(&lock, false)? {
            let pid = journal::holder(&mut lock).map_or("?".to_string(), |p| p.to_string());
            eprintln!(
                "pagelab: waiting for pagelab (pid {pid}), which holds the knobs ({})",
                lock_path.display()
            );
            journal::flock(&lock, true)
                .with_context(|| format!("waiting for the lock {}", lock_path.display()))?;
        }
        journal::stamp(&mut lock);
        // The lock is ours, so any journal belongs to a pagelab that is gone.
        if let Some(stale) = Journal::load(sysfs)? {
            if let Some(message) = journal::replay(sysfs, stale)? {
                eprintln!("{message}");
            }
        }
        let held = pagelab_sys::signals::hold();
        Ok(KnobSession {
            sysfs: sysfs.clone(),
            lock: Some(lock),
            held: Some(held),
            journal: Journal {
                pid: std::process::id(),
                started: journal::now(),
                entries: Vec::new(),
                program: None,
            },
            closed: false,
        })
    }

    /// Sets `knob` to `value`: saves the knob's current value in the journal first (on its
    /// first change only; written and fsynced before the knob is touched), writes the value,
    /// reads it back and fails, naming the knob, the value and what it holds, if the kernel
    /// did not take it.
    pub fn set(&mut self, knob: Knob, value: &str) -> anyhow::Result<()> {
        self.save(&knob)?;
        self.write(&knob, value)?;
        let now = self.sysfs.read(&knob)?;
        if now != value.trim() {
            bail!(
                "the kernel did not take {} = {}: it holds {}",
                knob.name(),
                value.trim(),
                if now.is_empty() { "nothing" } else { &now }
            );
        }
        Ok(())
    }

    /// Makes exactly `pages` available to anonymous memory with `mode`.
    ///
    /// Each THP size in `pages` is set to `mode` and every other THP size to `never`. pagelab
    /// never writes `inherit`: a size set to `inherit` follows the top-level `enabled`, so
    /// writing every size explicitly keeps the top-level knob from widening what is available.
    /// The top-level `enabled` is set to `mode` when any THP size is requested and to `never`
    /// for the 4K baseline: with no size inheriting it decides no fault, but glibc's
    /// `glibc.malloc.hugetlb=1` reads only that file to decide whether to `madvise` the heap,
    /// so it must say `madvise` for the madvise mode to reach programs. 4K (the base page) is
    /// always available; `pages` holding 4K alone is the baseline with every THP size `never`.
    /// `defrag`, `use_zero_page` and khugepaged are left as found. Knobs already holding the
    /// wanted value are not written (and not listed by [`KnobSession::changes`]).
    ///
    /// A size that is not a THP size of this kernel is an error listing the sizes it has.
    pub fn configure(&mut self, pages: &[PageSize], mode: ThpMode) -> anyhow::Result<()> {
        self.sysfs.require_thp()?;
        let have = self.sysfs.thp_sizes();
        if pages.is_empty() {
            bail!(
                "no page sizes given: name 4K for the baseline or THP sizes ({})",
                list_sizes(&have)
            );
        }
        let wanted = thp_targets(pages, &have)?;
        let targets: Vec<(Knob, &str)> = have
            .iter()
            .map(|s| {
                let v = if wanted.contains(s) {
                    mode.as_str()
                } else {
                    "never"
                };
                (Knob::SizeEnabled(*s), v)
            })
            .collect();
        let top = if wanted.is_empty() {
            "never"
        } else {
            mode.as_str()
        };
        // Narrow first, then widen, so no moment offers more than before or after.
        let (off, on): (Vec<_>, Vec<_>) = targets.into_iter().partition(|(_, v)| *v == "never");
        for (knob, value) in off.into_iter().chain([(Knob::ThpEnabled, top)]).chain(on) {
            if self.sysfs.read(&knob)? != value {
                self.set(knob, value)?;
            }
        }
        Ok(())
    }

    /// Records the program the session has just started, so that if pagelab is killed with
    /// SIGKILL while it runs, the next pagelab command ends it (should its parent-death signal
    /// have been lost: a set-user-id program clears it) and says so. The journal on tmpfs makes
    /// this a write without disk I/O.
    pub fn note_program(&mut self, pid: u32, name: &str) -> anyhow::Result<()> {
        self.journal.program = journal::Program::of(pid, name);
        self.journal.store(&self.sysfs)
    }

    /// The roots this session works under.
    pub fn sysfs(&self) -> &Sysfs {
        &self.sysfs
    }

    /// The knobs changed so far, in change order, with their saved and current values.
    pub fn changes(&self) -> Vec<(Knob, String, String)> {
        self.journal
            .entries
            .iter()
            .map(|e| {
                let now = self.sysfs.read(&e.knob).unwrap_or_else(|_| "?".into());
                (e.knob.clone(), e.saved.clone(), now)
            })
            .collect()
    }

    /// Restores every changed knob, removes the journal and releases the lock. hugetlb pools
    /// go back first, then the THP knobs, each in reverse change order: the THP knobs are
    /// independent of one another in the kernel (`inherit` is resolved at fault time, not when
    /// written), and shrinking the pools first returns their memory to the page allocator at
    /// once. Errors name each knob that failed (those stay in the journal, so the next pagelab
    /// command tries again).
    pub fn restore(mut self) -> anyhow::Result<()> {
        self.close()
    }

    /// Records `knob`'s current value in the journal unless it is already there.
    pub(crate) fn save(&mut self, knob: &Knob) -> anyhow::Result<()> {
        if self.journal.entries.iter().any(|e| &e.knob == knob) {
            return Ok(());
        }
        let path = knob.path(&self.sysfs);
        if !path.exists() {
            bail!(
                "this kernel has no {} ({} does not exist)",
                knob.name(),
                path.display()
            );
        }
        if let Err(e) = OpenOptions::new().write(true).open(&path) {
            bail!(
                "cannot change {}: {}",
                knob.name(),
                why_not_writable(&path, &e)
            );
        }
        let saved = self.sysfs.read(knob)?;
        self.journal.entries.push(Entry {
            knob: knob.clone(),
            path,
            saved,
        });
        if let Err(e) = self.journal.store(&self.sysfs) {
            self.journal.entries.pop();
            return Err(e);
        }
        Ok(())
    }

    /// Writes `value` to a knob already saved in the journal, without reading it back.
    pub(crate) fn write(&self, knob: &Knob, value: &str) -> anyhow::Result<()> {
        let path = knob.path(&self.sysfs);
        journal::write_file(&path, value.trim()).map_err(|e| {
            let accepts = choices(&path).map_or(String::new(), |c| format!(" (it accepts: {c})"));
            e.context(format!(
                "the kernel refused {} for {}{accepts}",
                value.trim(),
                knob.name()
            ))
        })
    }

    fn close(&mut self) -> anyhow::Result<()> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        let (_, failed) = journal::put_back(&self.journal.entries);
        let result = if failed.is_empty() {
            Journal::remove(&self.sysfs)
        } else {
            self.journal.entries = failed.iter().map(|(e, _)| e.clone()).collect();
            let kept = self.journal.store(&self.sysfs);
            let why: Vec<String> = failed.into_iter().map(|(_, m)| m).collect();
            Err(anyhow::anyhow!(
                "could not restore {}; {}",
                why.join("; "),
                match kept {
                    Ok(()) =>
                        "they stay in the journal and the next pagelab command tries again".into(),
                    Err(e) => format!("and could not keep them in the journal either: {e:#}"),
                }
            ))
        };
        // Unlocking after the journal is gone: the next holder finds nothing stale.
        drop(self.lock.take());
        drop(self.held.take());
        result
    }
}

impl Drop for KnobSession {
    /// Restores the knobs when the session ends without [`KnobSession::restore`]
    /// (an early return, an error, a panic).
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            eprintln!("pagelab: {e:#}");
        }
    }
}

/// Restores the settings a pagelab killed with SIGKILL left changed. Call it at the start of
/// every command: when `state/journal.json` exists and no live pagelab holds `state/lock`
/// (the kernel drops a dead owner's lock), it writes back the saved values, removes the
/// journal and returns the message to print, e.g. "pagelab: restored 3 settings left changed
/// by pagelab (pid 1234, killed): transparent_hugepage/hugepages-64kB/enabled always -> never,
/// ...". A journal whose owner still holds the lock is left alone (`Ok(None)`). Without
/// permission to write the knobs, the error tells the user to run pagelab as root.
pub fn recover(sysfs: &Sysfs) -> anyhow::Result<Option<String>> {
    if !Journal::path(sysfs).exists() {
        return Ok(None);
    }
    let lock_path = sysfs.state.join("lock");
    let lock = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&lock_path)
        .or_else(|_| File::open(&lock_path));
    let mut lock = match lock {
        Ok(f) => Some(f),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(e).with_context(|| format!("opening the lock {}", lock_path.display()))
        }
    };
    if let Some(f) = lock.as_mut() {
        if !journal::flock(f, false)? {
            return Ok(None); // its owner is alive and will restore them itself
        }
        journal::stamp(f);
    }
    // Held until we return: a pagelab starting now waits for the replay.
    let _held = lock;
    match Journal::load(sysfs)? {
        Some(stale) => journal::replay(sysfs, stale),
        None => Ok(None),
    }
}

/// Writes `value` to a knob-like file (`/proc/sys/vm/compact_memory`) outside the journal.
pub(crate) fn write_knob_file(path: &Path, value: &str) -> anyhow::Result<()> {
    journal::write_file(path, value)
}

/// The THP sizes `pages` asks for (4K, the base page, dropped); an error for any other size.
fn thp_targets(pages: &[PageSize], have: &[PageSize]) -> anyhow::Result<Vec<PageSize>> {
    let mut bad: Vec<PageSize> = pages
        .iter()
        .copied()
        .filter(|p| *p != PageSize::K4 && !have.contains(p))
        .collect();
    bad.sort();
    bad.dedup();
    if !bad.is_empty() {
        bail!(
            "{} {} not a THP size of this kernel; its THP sizes are {} (and 4K, the base page){}",
            list_sizes(&bad),
            if bad.len() == 1 { "is" } else { "are" },
            list_sizes(have),
            if bad.contains(&PageSize::G1) {
                "; 1G pages come only from a hugetlb pool"
            } else {
                ""
            }
        );
    }
    Ok(pages
        .iter()
        .copied()
        .filter(|p| *p != PageSize::K4)
        .collect())
}

/// Fails unless the top-level THP knob (or, without THP, a hugetlb pool) can be written.
fn check_permission(sysfs: &Sysfs) -> anyhow::Result<()> {
    let probe = [Knob::ThpEnabled]
        .into_iter()
        .chain(sysfs.hugetlb_sizes().into_iter().map(Knob::HugetlbPages))
        .map(|k| k.path(sysfs))
        .find(|p| p.exists());
    let Some(path) = probe else {
        bail!(
            "found no THP or hugetlb knobs under {}: this kernel offers no page sizes but 4K \
             to choose from (built without CONFIG_TRANSPARENT_HUGEPAGE and CONFIG_HUGETLBFS?)",
            sysfs.mm.display()
        );
    };
    match OpenOptions::new().write(true).open(&path) {
        Ok(_) => Ok(()),
        Err(e) => bail!(
            "pagelab must change the kernel's page-size settings for this, but {}",
            why_not_writable(&path, &e)
        ),
    }
}

/// Why `path` cannot be written, and what to do about it.
fn why_not_writable(path: &Path, err: &std::io::Error) -> String {
    if pagelab_sys::process::is_root() {
        format!(
            "{} cannot be written even as root ({err}): /sys is probably mounted read-only \
             (a container?); run pagelab on the host or with /sys writable",
            path.display()
        )
    } else {
        format!(
            "{} can only be written by root ({err}): run pagelab as root, e.g. `sudo pagelab ...`",
            path.display()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_drop_the_base_page_and_refuse_other_sizes() {
        let have: Vec<PageSize> = ["16K", "64K", "2M"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let k64: PageSize = "64K".parse().unwrap();
        assert_eq!(thp_targets(&[PageSize::K4, k64], &have).unwrap(), vec![k64]);
        assert!(thp_targets(&[PageSize::K4], &have).unwrap().is_empty());
        let err = thp_targets(&[PageSize::G1, "8K".parse().unwrap()], &have)
            .unwrap_err()
            .to_string();
        assert!(err.contains("8K, 1G are not a THP size"), "{err}");
        assert!(
            err.contains("16K, 64K, 2M") && err.contains("hugetlb pool"),
            "{err}"
        );
    }
}
