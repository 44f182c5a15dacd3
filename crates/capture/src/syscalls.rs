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

/// The most one call of the buffer-writing kind returns: Linux's `MAX_RW_COUNT`
/// (`INT_MAX` rounded down to a page, include/linux/fs.h); `getrandom` and the rest return
/// less. A recorded result beyond it is not a kernel's.
pub(crate) const MAX_RW_COUNT: u64 = 0x7fff_f000;
/// The most `recvfrom` and `recvmsg` return, and the most control bytes `recvmsg`
/// writes: they return an `int` (`__sys_recvfrom`, `__sys_recvmsg` in net/socket.c).
const MAX_SOCKET_COUNT: u64 = i32::MAX as u64;
/// `getcwd` returns at most `PATH_MAX` bytes with the NUL (fs/d_path.c).
const PATH_MAX: u64 = 4096;
/// `sched_getaffinity` returns at most `cpumask_size()`: x86-64's largest `NR_CPUS` is
/// 8192 (arch/x86/Kconfig, `MAXSMP`), 1024 bytes.
const MAX_CPUMASK: u64 = 8192 / 8;
/// The most events one epoll_wait returns: `EP_MAX_EVENTS` (`INT_MAX / sizeof(struct
/// epoll_event)`, fs/eventpoll.c; a larger `maxevents` is `EINVAL`).
const MAX_EPOLL_EVENTS: u64 = i32::MAX as u64 / size::EPOLL_EVENT;
/// The most groups getgroups returns (`NGROUPS_MAX`, linux/limits.h).
const NGROUPS_MAX: u64 = 65536;
/// Most iovecs one call takes (`UIO_MAXIOV`, `IOV_MAX`: more is `EINVAL`).
pub(crate) const IOV_MAX: usize = 1024;
/// The most address bytes a socket call writes (`struct __kernel_sockaddr_storage`,
/// linux/socket.h; `move_addr_to_user` never returns a longer one).
const SOCKADDR_MAX: u64 = 128;

/// x86-64 sizes of what the fixed-size calls write (linux/ UAPI headers, checked with
/// `sizeof` against linux-libc-dev 6.1).
mod size {
    /// `struct stat` (asm/stat.h): stat, fstat, lstat, newfstatat.
    pub const STAT: u64 = 144;
    /// `struct statx` (linux/stat.h).
    pub const STATX: u64 = 256;
    /// `struct statfs` (asm-generic/statfs.h): statfs, fstatfs.
    pub const STATFS: u64 = 120;
    /// `struct new_utsname` (linux/utsname.h): six fields of 65 bytes.
    pub const UTSNAME: u64 = 390;
    /// Two `int` descriptors: pipe, pipe2, socketpair.
    pub const FDS: u64 = 8;
    /// The kernel's `struct sigaction` (asm/signal.h: handler, flags, restorer, an
    /// 8-byte `sigset_t`), which rt_sigaction copies whole (`copy_to_user(oact,
    /// &old_ka.sa, sizeof(old_ka.sa))`); not glibc's 152-byte one.
    pub const SIGACTION: u64 = 32;
    /// The kernel's `sigset_t`: the only `sigsetsize` rt_sigaction and rt_sigprocmask
    /// accept.
    pub const SIGSET: u64 = 8;
    /// `struct timespec` (linux/time_types.h `__kernel_timespec`), `struct timeval`.
    pub const TIMESPEC: u64 = 16;
    /// `struct epoll_event` (linux/eventpoll.h: packed on x86-64, a 4-byte mask and 8
    /// bytes of data).
    pub const EPOLL_EVENT: u64 = 12;
    /// `struct timezone` (linux/time.h).
    pub const TIMEZONE: u64 = 8;
    /// `struct sysinfo` (linux/sysinfo.h).
    pub const SYSINFO: u64 = 112;
    /// `struct rlimit` / `struct rlimit64` (linux/resource.h).
    pub const RLIMIT: u64 = 16;
    /// `struct rusage` (linux/resource.h).
    pub const RUSAGE: u64 = 144;
    /// `struct tms` (linux/times.h).
    pub const TMS: u64 = 32;
    /// `time_t` (`__kernel_old_time_t`, a `long`): time.
    pub const TIME: u64 = 8;
    /// A `uid_t` or `gid_t`: getresuid, getresgid, getgroups.
    pub const ID: u64 = 4;
    /// `stack_t` (asm-generic/signal.h: pointer, int flags, padding, size): sigaltstack.
    pub const STACK: u64 = 24;
    /// `struct itimerval` (linux/time.h: two `struct timeval`s): getitimer.
    pub const ITIMERVAL: u64 = 32;
    /// Offsets of `struct msghdr`'s fields the kernel writes back (linux/socket.h
    /// `user_msghdr`): `msg_namelen` (4 bytes), `msg_controllen` (8), `msg_flags` (4).
    pub const MSG_NAMELEN_AT: u64 = 8;
    pub const MSG_CONTROLLEN_AT: u64 = 40;
    pub const MSG_FLAGS_AT: u64 = 48;
}

/// Ranges of user memory a system call wrote, as (address, bytes), in the kernel's order.
pub(crate) type Writes = Vec<(u64, u64)>;

/// What the kernel wrote into user memory in recorded system call `num` that returned
/// `ret` with arguments `a` and the record's further words `extra` (the iovecs of readv,
/// preadv, preadv2; `struct msghdr`'s fields and iovecs for recvmsg; `*addrlen` for
/// recvfrom, accept, accept4, getsockname and getpeername: docs/capture-format.md),
/// except wait4's, waitid's and rseq's, which [`AddressSpaces::syscall`] writes. Null
/// pointers are written nothing. `Err` says why the record is none a kernel makes (a
/// result, length or count no call returns or takes): a corrupt stream, which decoded
/// could be millions of stores.
pub(crate) fn user_writes(
    num: u64,
    ret: u64,
    a: &[u64; 6],
    extra: &[u64],
) -> Result<Writes, String> {
    let mut w = Writes::new();
    if is_error(ret as i64) {
        return Ok(w);
    }
    let most = |max: u64, what: &str| {
        if ret > max {
            Err(format!(
                "system call {num} returned {ret} bytes into a buffer, more than Linux \
                 returns from one {what} ({max})"
            ))
        } else {
            Ok(())
        }
    };
    let mut put = |at: u64, len: u64| {
        if at != 0 && len != 0 {
            w.push((at, len));
        }
    };
    match num {
        nr::READ
        | nr::PREAD64
        | nr::READLINK
        | nr::GETDENTS64
        | nr::READLINKAT
        | nr::GETRANDOM
        | nr::GETCWD
        | nr::SCHED_GETAFFINITY => {
            let (buf, size, max, what) = returned_bytes(num);
            most(max, what)?;
            put(a[buf], ret.min(a[size]));
        }
        nr::STAT | nr::FSTAT | nr::LSTAT => put(a[1], size::STAT),
        nr::NEWFSTATAT => put(a[2], size::STAT),
        nr::STATX => put(a[4], size::STATX),
        nr::STATFS | nr::FSTATFS => put(a[1], size::STATFS),
        nr::UNAME => put(a[0], size::UTSNAME),
        nr::PIPE | nr::PIPE2 => put(a[0], size::FDS),
        nr::SOCKETPAIR => put(a[3], size::FDS),
        nr::RT_SIGACTION | nr::RT_SIGPROCMASK => {
            if a[3] != size::SIGSET {
                return Err(format!(
                    "system call {num} succeeded with sigsetsize {}, which Linux refuses",
                    a[3]
                ));
            }
            let len = if num == nr::RT_SIGACTION {
                size::SIGACTION
            } else {
                size::SIGSET
            };
            put(a[2], len);
        }
        nr::CLOCK_GETTIME | nr::CLOCK_GETRES => put(a[1], size::TIMESPEC),
        nr::GETTIMEOFDAY => {
            put(a[0], size::TIMESPEC);
            put(a[1], size::TIMEZONE);
        }
        nr::SYSINFO => put(a[0], size::SYSINFO),
        nr::GETRLIMIT => put(a[1], size::RLIMIT),
        nr::PRLIMIT64 => put(a[3], size::RLIMIT),
        nr::GETRUSAGE => put(a[1], size::RUSAGE),
        nr::TIMES => put(a[0], size::TMS),
        nr::TIME => put(a[0], size::TIME),
        nr::GETRESUID | nr::GETRESGID => {
            for id in &a[..3] {
                put(*id, size::ID);
            }
        }
        // A size of 0 asks for the count only.
        nr::GETGROUPS if a[0] != 0 => {
            if ret > NGROUPS_MAX {
                return Err(format!(
                    "getgroups returned {ret} groups, more than Linux returns \
                     ({NGROUPS_MAX})"
                ));
            }
            put(a[1], ret * size::ID);
        }
        nr::SIGALTSTACK => put(a[1], size::STACK),
        nr::GETITIMER => put(a[1], size::ITIMERVAL),
        nr::READV | nr::PREADV | nr::PREADV2 => {
            most(MAX_RW_COUNT, "call")?;
            spread(ret, iovecs(num, extra)?, &mut put);
        }
        nr::RECVFROM => {
            most(MAX_SOCKET_COUNT, "recvfrom")?;
            put(a[1], ret.min(a[2]));
            source_address(num, a[4], a[5], extra, &mut put)?;
        }
        nr::ACCEPT | nr::ACCEPT4 | nr::GETSOCKNAME | nr::GETPEERNAME => {
            source_address(num, a[1], a[2], extra, &mut put)?;
        }
        nr::EPOLL_WAIT | nr::EPOLL_PWAIT | nr::EPOLL_PWAIT2 => {
            if ret > MAX_EPOLL_EVENTS {
                return Err(format!(
                    "system call {num} returned {ret} events, more than Linux returns \
                     ({MAX_EPOLL_EVENTS})"
                ));
            }
            put(a[1], ret * size::EPOLL_EVENT);
        }
        nr::RECVMSG => {
            most(MAX_SOCKET_COUNT, "recvmsg")?;
            let [name, before, after, control, controllen, ref iov @ ..] = *extra else {
                if extra.is_empty() {
                    return Ok(w);
                }
                return Err(format!(
                    "recvmsg record with {} extra words, not 0 or 5 and more",
                    extra.len()
                ));
            };
            if controllen > MAX_SOCKET_COUNT {
                return Err(format!(
                    "recvmsg wrote {controllen} control bytes, more than Linux writes \
                     ({MAX_SOCKET_COUNT})"
                ));
            }
            // ____sys_recvmsg: the data (and the control messages, as the protocol
            // receives), then the address and its length, then msg_flags and
            // msg_controllen in the caller's struct msghdr.
            spread(ret, iovecs(num, iov)?, &mut put);
            put(control, controllen);
            if name != 0 {
                put(name, address_bytes(num, before, after)?);
                put(a[1].saturating_add(size::MSG_NAMELEN_AT), 4);
            }
            put(a[1].saturating_add(size::MSG_FLAGS_AT), 4);
            put(a[1].saturating_add(size::MSG_CONTROLLEN_AT), 8);
        }
        _ => {}
    }
    Ok(w)
}

/// A call that writes as many bytes as it returns into one buffer: the argument indexes of
/// the buffer and of its size, and the most it returns.
fn returned_bytes(num: u64) -> (usize, usize, u64, &'static str) {
    match num {
        nr::READLINKAT => (2, 3, MAX_RW_COUNT, "call"),
        nr::GETRANDOM => (0, 1, MAX_RW_COUNT, "call"),
        nr::GETCWD => (0, 1, PATH_MAX, "getcwd"),
        nr::SCHED_GETAFFINITY => (2, 1, MAX_CPUMASK, "sched_getaffinity"),
        // read, pread64, readlink, getdents64
        _ => (1, 2, MAX_RW_COUNT, "call"),
    }
}

/// The iovecs a record carries as (base, length) pairs, refused when more than
/// [`IOV_MAX`], not whole pairs, or of a length the kernel refuses (beyond `SSIZE_MAX`).
fn iovecs(num: u64, words: &[u64]) -> Result<impl Iterator<Item = (u64, u64)> + '_, String> {
    if !words.len().is_multiple_of(2) || words.len() / 2 > IOV_MAX {
        return Err(format!(
            "system call {num} recorded {} iovec words, not up to {IOV_MAX} pairs",
            words.len()
        ));
    }
    let pairs = words.chunks_exact(2).map(|p| (p[0], p[1]));
    if let Some((_, len)) = pairs.clone().find(|&(_, len)| len > i64::MAX as u64) {
        return Err(format!(
            "system call {num} succeeded with an iovec of {len} bytes, which Linux refuses"
        ));
    }
    Ok(pairs)
}

/// `ret` bytes written over `iov` in order, each iovec filled before the next.
fn spread(ret: u64, iov: impl Iterator<Item = (u64, u64)>, put: &mut impl FnMut(u64, u64)) {
    let mut left = ret;
    for (base, len) in iov {
        if left == 0 {
            break;
        }
        let n = left.min(len);
        put(base, n);
        left -= n;
    }
}

/// A socket address the call wrote at `addr` with its length at `len_at` (an `int`), from
/// the record's words `[the caller's length, the address's length]` (none: nothing known).
fn source_address(
    num: u64,
    addr: u64,
    len_at: u64,
    extra: &[u64],
    put: &mut impl FnMut(u64, u64),
) -> Result<(), String> {
    match *extra {
        [] => {}
        [before, after] => {
            // move_addr_to_user, only when the caller asked for the address.
            if addr != 0 {
                put(addr, address_bytes(num, before, after)?);
                put(len_at, 4);
            }
        }
        _ => {
            return Err(format!(
                "system call {num}'s record has {} extra words, not 0 or 2",
                extra.len()
            ))
        }
    }
    Ok(())
}

/// The bytes of a source address the kernel copies (`move_addr_to_user`): the shorter of
/// the caller's buffer (`before`, an `int`) and the address (`after`, what it writes back).
fn address_bytes(num: u64, before: u64, after: u64) -> Result<u64, String> {
    if after > SOCKADDR_MAX {
        return Err(format!(
            "system call {num} returned a source address of {after} bytes, more than \
             Linux's {SOCKADDR_MAX}"
        ));
    }
    Ok(after.min(u64::from(before as u32)))
}

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
