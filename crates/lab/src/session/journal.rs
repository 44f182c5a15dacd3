//! The lock against concurrent pagelab runs and the journal of knobs to put back.
//!
//! `state/lock` is held with `flock` for as long as a session may change knobs; the kernel
//! releases it when its owner dies, however it dies, so "lock free" means "owner gone".
//! `state/journal.json` lists each changed knob's saved value in change order; it is written
//! (temporary file, fsync, rename, fsync of the directory) before the knob is touched, so a
//! SIGKILLed pagelab leaves enough behind for the next one to restore everything.

use crate::sysfs::{read_value, Knob, Sysfs};
use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// What a session changed, as written to `state/journal.json`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Journal {
    /// The pagelab process that changed the knobs.
    pub pid: u32,
    /// When its session began, in seconds since the Unix epoch.
    pub started: u64,
    /// Each changed knob with the value it held before, in change order.
    pub entries: Vec<Entry>,
    /// The program the session started last: a pagelab killed while measuring it may leave
    /// it running (when its parent-death signal was lost), and the next pagelab ends it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<Program>,
}

/// A process a session started, identified across pid reuse by its start time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Program {
    /// Its process id.
    pub pid: u32,
    /// Its start time (clock ticks after boot, field 22 of `/proc/<pid>/stat`).
    pub start: u64,
    /// The program as the user named it, for the message.
    pub name: String,
}

impl Program {
    /// The running process `pid`, if it exists.
    pub(crate) fn of(pid: u32, name: &str) -> Option<Program> {
        Some(Program {
            pid,
            start: start_time(pid)?,
            name: name.to_string(),
        })
    }

    /// Ends the program with SIGKILL if this very process still runs (the same pid and start
    /// time); whether it did.
    pub(crate) fn end_if_running(&self) -> bool {
        if start_time(self.pid) != Some(self.start) {
            return false;
        }
        pagelab_sys::process::kill(self.pid, libc::SIGKILL).is_ok()
    }
}

/// Field 22 (`starttime`) of `/proc/<pid>/stat`; the fields after the command name, which may
/// hold spaces and parentheses, are counted from its closing parenthesis.
fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    // After `)`: field 3 (state) is the first; starttime is field 22.
    rest.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// One changed knob.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Entry {
    /// Which knob.
    pub knob: Knob,
    /// The file that was written (restored as is, whatever roots the next pagelab uses).
    pub path: PathBuf,
    /// The value to put back.
    pub saved: String,
}

impl Journal {
    pub(crate) fn path(sysfs: &Sysfs) -> PathBuf {
        sysfs.state.join("journal.json")
    }

    /// The journal in `sysfs.state`, if there is one.
    pub(crate) fn load(sysfs: &Sysfs) -> anyhow::Result<Option<Journal>> {
        let path = Journal::path(sysfs);
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        serde_json::from_str(&text).map(Some).with_context(|| {
            format!(
                "{} is not a pagelab journal; it should list the kernel settings a killed \
                 pagelab left changed. Check them by hand under /sys/kernel/mm, then remove it",
                path.display()
            )
        })
    }

    /// Writes the journal atomically and durably.
    pub(crate) fn store(&self, sysfs: &Sysfs) -> anyhow::Result<()> {
        let path = Journal::path(sysfs);
        let tmp = sysfs.state.join("journal.json.tmp");
        let text = serde_json::to_vec_pretty(self).expect("a journal serializes");
        let write = || -> std::io::Result<()> {
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o644)
                .open(&tmp)?;
            f.write_all(&text)?;
            f.sync_all()?;
            fs::rename(&tmp, &path)?;
            File::open(&sysfs.state)?.sync_all()
        };
        write()
            .with_context(|| format!("writing the journal of changed settings {}", path.display()))
    }

    /// Removes the journal (durably); a missing journal is fine.
    pub(crate) fn remove(sysfs: &Sysfs) -> anyhow::Result<()> {
        let path = Journal::path(sysfs);
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e).with_context(|| format!("removing {}", path.display())),
        }
        if let Ok(dir) = File::open(&sysfs.state) {
            let _ = dir.sync_all();
        }
        Ok(())
    }
}

/// Writes `saved` back into every entry, hugetlb pools first, each group in reverse change
/// order. Returns one line per knob that really changed (`name was -> saved`; a knob that
/// already holds its saved value, set back by a later configuration, is left alone and not
/// listed) and one per failure.
pub(crate) fn put_back(entries: &[Entry]) -> (Vec<String>, Vec<(Entry, String)>) {
    let order = entries
        .iter()
        .rev()
        .filter(|e| e.knob.is_hugetlb())
        .chain(entries.iter().rev().filter(|e| !e.knob.is_hugetlb()));
    let (mut done, mut failed) = (Vec::new(), Vec::new());
    for e in order {
        let was = read_value(&e.path).unwrap_or_else(|_| "?".into());
        if was == e.saved {
            continue;
        }
        match write_file(&e.path, &e.saved).and_then(|()| read_value(&e.path)) {
            Ok(now) if now == e.saved => done.push(format!("{} {} -> {}", e.knob, was, e.saved)),
            Ok(now) => failed.push((
                e.clone(),
                format!("{}: wrote {} but it holds {}", e.knob, e.saved, now),
            )),
            Err(err) => failed.push((
                e.clone(),
                format!("{}: could not write back {}: {err:#}", e.knob, e.saved),
            )),
        }
    }
    (done, failed)
}

/// Writes `value` (and a newline, as `echo` does) to a knob file in one write.
pub(crate) fn write_file(path: &Path, value: &str) -> anyhow::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .with_context(|| format!("opening {} for writing", path.display()))?;
    let line = format!("{value}\n");
    let n = f
        .write(line.as_bytes())
        .with_context(|| format!("writing {value} to {}", path.display()))?;
    if n != line.len() {
        bail!(
            "writing {value} to {}: only {n} bytes were taken",
            path.display()
        );
    }
    Ok(())
}

/// Takes the exclusive lock on `file` (std's `File::lock`, an `flock` the kernel drops when
/// its owner dies), waiting or not; `Ok(false)` when another holder has it.
pub(crate) fn flock(file: &File, wait: bool) -> std::io::Result<bool> {
    if wait {
        return file.lock().map(|()| true);
    }
    match file.try_lock() {
        Ok(()) => Ok(true),
        Err(std::fs::TryLockError::WouldBlock) => Ok(false),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

/// Writes our pid into the lock file we hold, for the "waiting for pagelab (pid N)" message.
pub(crate) fn stamp(lock: &mut File) {
    let _ = lock.set_len(0);
    let _ = lock.seek(SeekFrom::Start(0));
    let _ = writeln!(lock, "{}", std::process::id());
}

/// The pid written in a lock file, if any.
pub(crate) fn holder(lock: &mut File) -> Option<u32> {
    let mut text = String::new();
    lock.seek(SeekFrom::Start(0)).ok()?;
    lock.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

/// Whether a process with this pid exists.
pub(crate) fn alive(pid: u32) -> bool {
    pid != 0 && pagelab_sys::process::exists(pid)
}

/// Seconds since the Unix epoch.
pub(crate) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Replays the journal of an owner that is gone; the caller holds (or could not open) the lock.
/// Returns the message to print, or an error naming what could not be restored.
pub(crate) fn replay(sysfs: &Sysfs, journal: Journal) -> anyhow::Result<Option<String>> {
    // The program first: it would go on running under the settings about to be put back.
    let ended = journal
        .program
        .as_ref()
        .filter(|p| p.end_if_running())
        .map(|p| {
            format!(
                "ended `{}` (pid {}), the program it was measuring, which was still running",
                p.name, p.pid
            )
        });
    if journal.entries.is_empty() {
        Journal::remove(sysfs)?;
        return Ok(ended.map(|e| format!("pagelab: pagelab (pid {}) is gone; {e}", journal.pid)));
    }
    let names = || {
        journal
            .entries
            .iter()
            .map(|e| format!("{} (to {})", e.knob, e.saved))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for e in &journal.entries {
        if let Err(err) = OpenOptions::new().write(true).open(&e.path) {
            bail!(
                "pagelab (pid {}) left {} kernel setting(s) changed: {}; cannot write {} ({err}): \
                 run pagelab as root (for example `sudo pagelab presets`) to restore them",
                journal.pid,
                journal.entries.len(),
                names(),
                e.path.display()
            );
        }
    }
    let how = if alive(journal.pid) && journal.pid != std::process::id() {
        "which ended its session without restoring them"
    } else {
        "killed"
    };
    let (done, failed) = put_back(&journal.entries);
    if !failed.is_empty() {
        let rest = Journal {
            entries: failed.iter().map(|(e, _)| e.clone()).collect(),
            ..journal.clone()
        };
        rest.store(sysfs)?;
        let why: Vec<String> = failed.into_iter().map(|(_, m)| m).collect();
        bail!(
            "could not restore settings left changed by pagelab (pid {}): {}; they stay in {} \
             and the next pagelab will try again",
            journal.pid,
            why.join("; "),
            Journal::path(sysfs).display()
        );
    }
    Journal::remove(sysfs)?;
    let n = done.len();
    let restored = (n > 0).then(|| {
        format!(
            "restored {n} setting{} left changed by pagelab (pid {}, {how}): {}",
            if n == 1 { "" } else { "s" },
            journal.pid,
            done.join(", ")
        )
    });
    Ok(match (restored, ended) {
        (Some(r), Some(e)) => Some(format!("pagelab: {r}; {e}")),
        (Some(r), None) => Some(format!("pagelab: {r}")),
        (None, Some(e)) => Some(format!(
            "pagelab: pagelab (pid {}) is gone; {e}",
            journal.pid
        )),
        (None, None) => None,
    })
}
