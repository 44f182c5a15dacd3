//! What the kernel writes into user memory in a recorded system call (the buffers, structs
//! and iovecs of the calls that return data: docs/capture-format.md, "The kernel's
//! writes"), with the bounds that tell a kernel's record from a corrupt one.

use super::{is_error, nr};

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
