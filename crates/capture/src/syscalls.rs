//! What an x86-64 system call recorded by the plugin does to the address space.

use pagelab_core::{
    AccessKind, Advice, Backing, Event, FileIdentity, MapEvent, MapRequest, MemRef, Prot, Sharing,
    VirtAddr,
};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

/// x86-64 system call numbers the plugin records.
pub mod nr {
    /// mmap(addr, len, prot, flags, fd, offset)
    pub const MMAP: u64 = 9;
    /// mprotect(addr, len, prot)
    pub const MPROTECT: u64 = 10;
    /// munmap(addr, len)
    pub const MUNMAP: u64 = 11;
    /// brk(addr)
    pub const BRK: u64 = 12;
    /// mremap(old, old_len, new_len, flags, new_addr)
    pub const MREMAP: u64 = 25;
    /// madvise(addr, len, advice)
    pub const MADVISE: u64 = 28;
    /// exit(status): one thread ends (the plugin reports the last thread's as exit_group)
    pub const EXIT: u64 = 60;
    /// exit_group(status): the process ends
    pub const EXIT_GROUP: u64 = 231;
    /// read(fd, buf, count)
    pub const READ: u64 = 0;
    /// pread64(fd, buf, count, offset)
    pub const PREAD64: u64 = 17;
    /// readlink(path, buf, size)
    pub const READLINK: u64 = 89;
    /// getdents64(fd, buf, count)
    pub const GETDENTS64: u64 = 217;
    /// readlinkat(dirfd, path, buf, size)
    pub const READLINKAT: u64 = 267;
    /// getrandom(buf, count, flags)
    pub const GETRANDOM: u64 = 318;
    /// rseq(area, len, flags, sig)
    pub const RSEQ: u64 = 334;
    /// wait4(pid, status, options, rusage)
    pub const WAIT4: u64 = 61;
    /// waitid(which, pid, infop, options, rusage)
    pub const WAITID: u64 = 247;
    /// stat(path, buf)
    pub const STAT: u64 = 4;
    /// fstat(fd, buf)
    pub const FSTAT: u64 = 5;
    /// lstat(path, buf)
    pub const LSTAT: u64 = 6;
    /// newfstatat(dirfd, path, buf, flags)
    pub const NEWFSTATAT: u64 = 262;
    /// statx(dirfd, path, flags, mask, buf)
    pub const STATX: u64 = 332;
    /// statfs(path, buf)
    pub const STATFS: u64 = 137;
    /// fstatfs(fd, buf)
    pub const FSTATFS: u64 = 138;
    /// uname(buf)
    pub const UNAME: u64 = 63;
    /// pipe(fds)
    pub const PIPE: u64 = 22;
    /// pipe2(fds, flags)
    pub const PIPE2: u64 = 293;
    /// socketpair(domain, type, protocol, fds)
    pub const SOCKETPAIR: u64 = 53;
    /// rt_sigaction(sig, act, oldact, sigsetsize)
    pub const RT_SIGACTION: u64 = 13;
    /// rt_sigprocmask(how, set, oldset, sigsetsize)
    pub const RT_SIGPROCMASK: u64 = 14;
    /// clock_gettime(clock, tp)
    pub const CLOCK_GETTIME: u64 = 228;
    /// clock_getres(clock, res)
    pub const CLOCK_GETRES: u64 = 229;
    /// gettimeofday(tv, tz)
    pub const GETTIMEOFDAY: u64 = 96;
    /// sysinfo(info)
    pub const SYSINFO: u64 = 99;
    /// getrlimit(resource, rlim)
    pub const GETRLIMIT: u64 = 97;
    /// getrusage(who, usage)
    pub const GETRUSAGE: u64 = 98;
    /// times(buf)
    pub const TIMES: u64 = 100;
    /// prlimit64(pid, resource, new, old)
    pub const PRLIMIT64: u64 = 302;
    /// getcwd(buf, size)
    pub const GETCWD: u64 = 79;
    /// sched_getaffinity(pid, len, mask)
    pub const SCHED_GETAFFINITY: u64 = 204;
    /// readv(fd, iov, iovcnt); the record carries the iovecs (docs/capture-format.md)
    pub const READV: u64 = 19;
    /// preadv(fd, iov, iovcnt, pos_l, pos_h); the record carries the iovecs
    pub const PREADV: u64 = 295;
    /// preadv2(fd, iov, iovcnt, pos_l, pos_h, flags); the record carries the iovecs
    pub const PREADV2: u64 = 327;
    /// recvfrom(fd, buf, len, flags, src_addr, addrlen); the record carries `*addrlen`
    /// before and after
    pub const RECVFROM: u64 = 45;
    /// recvmsg(fd, msg, flags); the record carries the `struct msghdr`'s fields and iovecs
    pub const RECVMSG: u64 = 47;
    /// accept(fd, addr, addrlen); the record carries `*addrlen` before and after
    pub const ACCEPT: u64 = 43;
    /// accept4(fd, addr, addrlen, flags); as accept
    pub const ACCEPT4: u64 = 288;
    /// getsockname(fd, addr, addrlen); as accept
    pub const GETSOCKNAME: u64 = 51;
    /// getpeername(fd, addr, addrlen); as accept
    pub const GETPEERNAME: u64 = 52;
    /// time(tloc)
    pub const TIME: u64 = 201;
    /// getresuid(ruid, euid, suid)
    pub const GETRESUID: u64 = 118;
    /// getresgid(rgid, egid, sgid)
    pub const GETRESGID: u64 = 120;
    /// getgroups(size, list)
    pub const GETGROUPS: u64 = 115;
    /// sigaltstack(ss, old_ss)
    pub const SIGALTSTACK: u64 = 131;
    /// getitimer(which, value)
    pub const GETITIMER: u64 = 36;
    /// epoll_wait(epfd, events, maxevents, timeout)
    pub const EPOLL_WAIT: u64 = 232;
    /// epoll_pwait(epfd, events, maxevents, timeout, sigmask, sigsetsize)
    pub const EPOLL_PWAIT: u64 = 281;
    /// epoll_pwait2(epfd, events, maxevents, timeout, sigmask, sigsetsize)
    pub const EPOLL_PWAIT2: u64 = 441;
}

mod user_writes;
pub(crate) use user_writes::user_writes;

/// The base page (x86-64's 4K), from `pagelab_core`.
const PAGE: u64 = pagelab_core::PageSize::MIN.bytes();
const MAP_SHARED: u64 = 0x01;
const MAP_SHARED_VALIDATE: u64 = 0x03;
const MAP_ANONYMOUS: u64 = 0x20;
const MREMAP_DONTUNMAP: u64 = 4;
const MADV_DONTNEED: u64 = 4;
const MADV_HUGEPAGE: u64 = 14;
const MADV_NOHUGEPAGE: u64 = 15;

fn page_round(len: u64) -> u64 {
    len.saturating_add(PAGE - 1) & !(PAGE - 1)
}

pub(crate) fn prot(p: u64) -> Prot {
    Prot((p & 7) as u8)
}

fn is_error(ret: i64) -> bool {
    (-4095..0).contains(&ret)
}

/// The kernel's writes of `len` bytes at `buf` (`copy_to_user` of a read and its kind): one
/// store per 4K page, in order. The kernel takes them as the program's own stores: a write
/// fault on a page not present, which allocates (a large folio where its range is empty)
/// where a program's first load of the data would map the zero page and copy it at its
/// first store. QEMU's plugin sees no access of the kernel's, so without these a buffer
/// that `read` fills first and the program then only reads (gzip's window) is all zero
/// pages in the model and faults twice where the kernel faulted once.
pub(crate) fn kernel_writes(buf: u64, len: u64, out: &mut Vec<Event>) {
    let end = buf.saturating_add(len);
    let mut at = buf;
    while at < end {
        let next = (at | (PAGE - 1)).saturating_add(1).min(end);
        out.push(Event::Ref(MemRef {
            addr: VirtAddr(at),
            size: (next - at) as u32,
            kind: AccessKind::Store,
        }));
        at = next;
    }
}

/// The decoder's memory of each process's address space, as far as it needs it.
#[derive(Debug, Default)]
pub(crate) struct AddressSpaces {
    /// File ids by (device, inode), numbered from 1 in order of first mapping.
    files: FxHashMap<(u64, u64), u64>,
    /// Mappings by (pid, start), for mremap, which does not repeat protection or backing.
    maps: BTreeMap<(u32, VirtAddr), MapEvent>,
    /// Last program break per process.
    brk: FxHashMap<u32, u64>,
    /// Each process's registered `struct rseq` (see [`AddressSpaces::register_rseq`]).
    rseq: FxHashMap<u32, u64>,
    /// Processes whose rseq area a fork write-protected and the kernel has not written
    /// since: it does when the process next sleeps (see [`AddressSpaces::forked`]).
    rseq_pending: rustc_hash::FxHashSet<u32>,
}

/// What `wait4` and `waitid` write: an `int` status, a `siginfo_t`, a `struct rusage`.
const STATUS_BYTES: u64 = 4;
const SIGINFO_BYTES: u64 = 128;
const RUSAGE_BYTES: u64 = 144;

/// The bytes of `struct rseq` the kernel writes (cpu_id_start, cpu_id, rseq_cs, flags,
/// node_id, mm_cid: 32 bytes; the area is 32-byte aligned, so one page).
const RSEQ_WRITTEN: u32 = 32;
const RSEQ_FLAG_UNREGISTER: u64 = 1;
const ENOSYS: i64 = -38;

/// One store of `size` bytes at `addr`: a write of the kernel's into user memory.
pub(crate) fn kernel_store(addr: u64, size: u32) -> Event {
    Event::Ref(MemRef {
        addr: VirtAddr(addr),
        size,
        kind: AccessKind::Store,
    })
}

impl AddressSpaces {
    /// Appends the events of one recorded system call of process `pid` to `out`.
    pub(crate) fn syscall(
        &mut self,
        pid: u32,
        num: u64,
        ret: u64,
        a: &[u64; 6],
        file: Option<(u64, u64)>,
        out: &mut Vec<Event>,
    ) {
        let sret = ret as i64;
        if num == nr::BRK {
            if self.brk.insert(pid, ret) != Some(ret) {
                out.push(Event::Brk { end: VirtAddr(ret) });
            }
            return;
        }
        if num == nr::RSEQ {
            return self.register_rseq(pid, sret, a, out);
        }
        if is_error(sret) {
            return;
        }
        match num {
            // wait4 returns the child's pid, 0 when WNOHANG found none (nothing written).
            nr::WAIT4 if sret > 0 => self.waited(pid, num, a, out),
            nr::WAITID => self.waited(pid, num, a, out),
            nr::MMAP => {
                let backing = match file {
                    Some(key) if a[3] & MAP_ANONYMOUS == 0 => {
                        let next = self.files.len() as u64 + 1;
                        Backing::File {
                            file_id: *self.files.entry(key).or_insert(next),
                            offset: a[5],
                        }
                    }
                    _ => Backing::Anon,
                };
                let sharing = match a[3] & 3 {
                    MAP_SHARED | MAP_SHARED_VALIDATE => Sharing::Shared,
                    _ => Sharing::Private,
                };
                let m = MapEvent {
                    start: VirtAddr(ret),
                    len: page_round(a[1]),
                    prot: prot(a[2]),
                    backing,
                    sharing,
                };
                self.forget(pid, m.start, m.len);
                self.maps.insert((pid, m.start), m);
                out.push(Event::MapRequest(Box::new(MapRequest {
                    hint: VirtAddr(a[0]),
                    len: a[1],
                    prot: prot(a[2]),
                    flags: a[3] as u32,
                    file: file
                        .filter(|_| a[3] & MAP_ANONYMOUS == 0)
                        .map(|(dev, ino)| FileIdentity { dev, ino }),
                    offset: a[5],
                })));
                out.push(Event::Map(Box::new(m)));
            }
            nr::MUNMAP => {
                let len = page_round(a[1]);
                self.forget(pid, VirtAddr(a[0]), len);
                out.push(Event::Unmap {
                    start: VirtAddr(a[0]),
                    len,
                });
            }
            nr::MPROTECT => {
                if let Some(m) = self.maps.get_mut(&(pid, VirtAddr(a[0]))) {
                    m.prot = prot(a[2]);
                }
                out.push(Event::Protect {
                    start: VirtAddr(a[0]),
                    len: page_round(a[1]),
                    prot: prot(a[2]),
                });
            }
            nr::MADVISE => {
                let advice = match a[2] {
                    MADV_HUGEPAGE => Advice::HugePage,
                    MADV_NOHUGEPAGE => Advice::NoHugePage,
                    MADV_DONTNEED => Advice::DontNeed,
                    other => Advice::Other(other as u16),
                };
                out.push(Event::Advise {
                    start: VirtAddr(a[0]),
                    len: page_round(a[1]),
                    advice,
                });
            }
            nr::MREMAP => self.mremap(pid, ret, a, out),
            nr::EXIT_GROUP => out.push(Event::Exit {
                status: a[0] as i32,
            }),
            _ => {}
        }
    }

    /// Forgets what the decoder knew of `pid`'s address space: it exec'd.
    pub(crate) fn exec(&mut self, pid: u32) {
        self.brk.remove(&pid);
        // execve drops the registration (rseq_execve); the new program's libc registers again.
        self.rseq.remove(&pid);
        self.rseq_pending.remove(&pid);
        self.forget(pid, VirtAddr(0), u64::MAX);
    }

    /// rseq(2): glibc (2.35 on) registers a `struct rseq` in each thread's TCB, and the
    /// kernel writes it on the thread's return to user mode after it was preempted or
    /// migrated, and on a forked child's first return (`rseq_handle_notify_resume`). QEMU
    /// 7.2 answers the call with ENOSYS, so under QEMU glibc runs without it and the trace
    /// holds none of the kernel's writes. They matter after a fork, which write-protects
    /// the area's page in parent and child: natively each takes a fault there that the
    /// trace does not show (`perf record -e page-faults -d`: a fault at the area's
    /// `rseq_cs` from `__put_user_8` in the forking shell and in each forked child). The
    /// registration is taken as the kernel's success when QEMU refused it as unknown.
    fn register_rseq(&mut self, pid: u32, ret: i64, a: &[u64; 6], out: &mut Vec<Event>) {
        if ret != 0 && ret != ENOSYS {
            return;
        }
        if a[2] & RSEQ_FLAG_UNREGISTER != 0 {
            self.rseq.remove(&pid);
        } else if a[0] != 0 {
            self.rseq.insert(pid, a[0]);
            // The kernel fills the area's CPU ids on the return from registering.
            out.push(kernel_store(a[0], RSEQ_WRITTEN));
        }
    }

    /// A fork of `parent` into `child` with `flags`: the child keeps the parent's rseq
    /// registration unless it shares its memory (`rseq_fork`).
    pub(crate) fn fork(&mut self, parent: u32, child: u32, flags: pagelab_core::CloneFlags) {
        match self.rseq.get(&parent) {
            Some(&area) if !flags.shares_mm() => self.rseq.insert(child, area),
            _ => self.rseq.remove(&child),
        };
    }

    /// The kernel's write of `pid`'s rseq area after a fork (see [`Self::register_rseq`]),
    /// if it registered one.
    pub(crate) fn rseq_write(&self, pid: u32) -> Option<Event> {
        self.rseq.get(&pid).map(|&a| kernel_store(a, RSEQ_WRITTEN))
    }

    /// `pid` forked a child that does not share its memory: the fork write-protected its
    /// rseq area, which the kernel writes the next time `pid` returns to user mode after
    /// sleeping or being preempted. A shell forks its children one after another and
    /// then waits (`perf`: one fault at the area in the shell after two forks), so the
    /// write is made at the process's next wait.
    pub(crate) fn forked(&mut self, pid: u32) {
        if self.rseq.contains_key(&pid) {
            self.rseq_pending.insert(pid);
        }
    }

    /// A wait4 or waitid that returned: the kernel's writes of the status, siginfo and
    /// rusage the caller asked for, and of its rseq area if a fork left it to write.
    fn waited(&mut self, pid: u32, num: u64, a: &[u64; 6], out: &mut Vec<Event>) {
        if self.rseq_pending.remove(&pid) {
            out.extend(self.rseq_write(pid));
        }
        let (info, rusage) = if num == nr::WAIT4 {
            ((a[1], STATUS_BYTES), a[3])
        } else {
            ((a[2], SIGINFO_BYTES), a[4])
        };
        for (buf, len) in [info, (rusage, RUSAGE_BYTES)] {
            if buf != 0 {
                kernel_writes(buf, len, out);
            }
        }
    }

    /// mremap as an unmap of what went away and a map of what came, with the
    /// protection and backing of the mapping that began at the old address
    /// (read-write private anonymous when the decoder never saw it).
    fn mremap(&mut self, pid: u32, new: u64, a: &[u64; 6], out: &mut Vec<Event>) {
        let (old, old_len, new_len) = (VirtAddr(a[0]), page_round(a[1]), page_round(a[2]));
        let new = VirtAddr(new);
        let base = self.maps.get(&(pid, old)).copied().unwrap_or(MapEvent {
            start: old,
            len: old_len,
            prot: Prot(Prot::READ | Prot::WRITE),
            backing: Backing::Anon,
            sharing: Sharing::Private,
        });
        let shifted = |by: u64| match base.backing {
            Backing::File { file_id, offset } => Backing::File {
                file_id,
                offset: offset.wrapping_add(by),
            },
            Backing::Anon => Backing::Anon,
        };
        if new == old {
            if new_len > old_len {
                // Saturating: a range past the top of the address space is
                // refused by the model with its position, never wrapped here.
                out.push(Event::Map(Box::new(MapEvent {
                    start: old.saturating_add(old_len),
                    len: new_len - old_len,
                    backing: shifted(old_len),
                    ..base
                })));
            } else if new_len < old_len {
                out.push(Event::Unmap {
                    start: old.saturating_add(new_len),
                    len: old_len - new_len,
                });
            }
            self.maps.insert(
                (pid, old),
                MapEvent {
                    len: new_len,
                    ..base
                },
            );
            return;
        }
        if a[3] & MREMAP_DONTUNMAP == 0 {
            self.forget(pid, old, old_len);
            out.push(Event::Unmap {
                start: old,
                len: old_len,
            });
        }
        let m = MapEvent {
            start: new,
            len: new_len,
            ..base
        };
        self.forget(pid, new, new_len);
        self.maps.insert((pid, new), m);
        out.push(Event::Map(Box::new(m)));
    }

    /// Forgets the mappings of `pid` that begin inside `[start, start + len)`.
    fn forget(&mut self, pid: u32, start: VirtAddr, len: u64) {
        let end = start.saturating_add(len);
        let keys: Vec<_> = self
            .maps
            .range((pid, start)..(pid, end))
            .map(|(k, _)| *k)
            .collect();
        for k in keys {
            self.maps.remove(&k);
        }
    }
}
