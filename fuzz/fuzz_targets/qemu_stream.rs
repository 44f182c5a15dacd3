//! The QEMU plugin's record stream decoder (`docs/capture-format.md`).
//!
//! Input: a mode byte, then either the stream itself (mode even) or
//! records built from the bytes with the format's own word builders (block
//! definitions, executions, accesses, system calls, threads, forks, and now
//! and then a word of anything), so that deep states are reached. Checks:
//! the fast path against the general path, `fill` in any batch size against
//! `fill` in one, and `fill_pages` against a page filter over `fill`'s events.
#![no_main]

use arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use pagelab_capture::format::{self, ext, insn_exec, mem, syscall, tb_def, tb_exec, thread};
use pagelab_capture::syscalls::nr;
use pagelab_capture::PluginReader;
use pagelab_fuzz::events::addr;
use pagelab_fuzz::{drain, drain_pages, filter_events};
use pagelab_trace::PageFilter;

/// A block definition listing every instruction's address (flag `TB_ADDRS`).
fn tb_def_listed(u: &mut Unstructured<'_>, id: u64) -> Result<Vec<u64>> {
    let n = u.int_in_range(1..=12usize)?;
    let per_insn = u.arbitrary::<bool>()?;
    let mut v = vec![
        ext(format::X_TBDEF, 2 + n + n.div_ceil(8), id),
        addr(u)?,
        n as u64 | (format::TB_ADDRS | if per_insn { format::TB_PER_INSN } else { 0 }) << 32,
    ];
    for _ in 0..n {
        v.push(addr(u)?);
    }
    for _ in 0..n.div_ceil(8) {
        v.push(u.arbitrary()?);
    }
    Ok(v)
}

fn record(u: &mut Unstructured<'_>, words: &mut Vec<u64>) -> Result<()> {
    let id = u.int_in_range(0..=12u64)?;
    let index = u.int_in_range(0..=20usize)?;
    match u.int_in_range(0..=15u8)? {
        0 => words.extend(thread(u.int_in_range(1..=3)?, u.int_in_range(1..=3)?)),
        1 | 2 => {
            let n = u.int_in_range(1..=16usize)?;
            let sizes: Vec<u8> = (0..n)
                .map(|_| u.int_in_range(0..=15u8))
                .collect::<Result<_>>()?;
            words.extend(tb_def(id, addr(u)?, &sizes, u.arbitrary()?));
        }
        3 => words.extend(tb_def_listed(u, id)?),
        4 | 5 => words.push(tb_exec(id)),
        6 => words.push(insn_exec(id, index)),
        7..=9 => words.push(mem(index, addr(u)?, u.int_in_range(0..=7)?, u.arbitrary()?)),
        10 => {
            let value = index as u64
                | u64::from(u.arbitrary::<bool>()?) << 10
                | u64::from(u.int_in_range(0..=7u8)?) << 11;
            words.extend([ext(format::X_MEMX, 1, value), addr(u)?]);
        }
        11 => {
            let num = *u.choose(&[
                nr::MMAP,
                nr::MUNMAP,
                nr::MPROTECT,
                nr::BRK,
                nr::MREMAP,
                nr::MADVISE,
                nr::EXIT,
                nr::EXIT_GROUP,
                0,
                nr::FSTAT,
                nr::RT_SIGACTION,
                nr::GETCWD,
                nr::READV,
                nr::RECVFROM,
                nr::RECVMSG,
                nr::ACCEPT,
                nr::EPOLL_WAIT,
                nr::GETGROUPS,
                nr::GETRESUID,
            ])?;
            let ret = if u.arbitrary()? {
                addr(u)? as i64
            } else {
                -i64::from(u.int_in_range(1..=4095)?)
            };
            let mut args = [0u64; 6];
            for a in &mut args {
                *a = if u.arbitrary()? {
                    addr(u)?
                } else {
                    u.int_in_range(0..=0x10_0000)?
                };
            }
            let file = if u.arbitrary()? {
                Some((u.arbitrary()?, u.arbitrary()?))
            } else {
                None
            };
            let mut r = syscall(num, ret, args, file);
            // The words the plugin appends to a vector call's record (iovecs, msghdr
            // fields, address lengths): a few of anything.
            if file.is_none() && u.arbitrary()? {
                let n = u.int_in_range(0..=9usize)?;
                for _ in 0..n {
                    r.push(if u.arbitrary()? { addr(u)? } else { u.arbitrary()? });
                }
                r[0] = ext(format::X_SYSCALL, r.len() - 1, num);
            }
            words.extend(r);
        }
        12 => words.push(ext(format::X_FORK, 0, u.int_in_range(1..=4)?)),
        13 => words.extend([
            ext(format::X_CHILD, 1, 0),
            u.int_in_range(1..=3u64)? | 1 << 32,
        ]),
        14 => {
            // An extended record of any type with a few words.
            let n = u.int_in_range(0..=3usize)?;
            words.push(ext(u.int_in_range(0..=63)?, n, u.arbitrary()?));
            for _ in 0..n {
                words.push(u.arbitrary()?);
            }
        }
        _ => words.push(u.arbitrary()?),
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let stream = if mode & 1 == 0 {
        rest.to_vec()
    } else {
        let mut u = Unstructured::new(rest);
        let mut words = Vec::new();
        while !u.is_empty() && record(&mut u, &mut words).is_ok() {}
        let mut bytes = format::to_bytes(&words);
        // Mode bit 1: the stream ends inside its last record.
        if mode & 2 != 0 {
            bytes.truncate(bytes.len().saturating_sub(1 + (mode as usize >> 5)));
        }
        bytes
    };
    let batch = 1 + (mode as usize >> 2) * 5;
    let name = "fuzz.qemu";
    let cap = 1 << 20;

    let want = drain(
        &mut PluginReader::new(&stream[..], name).without_fast_path(),
        &[usize::MAX],
        cap,
    );
    let got = drain(
        &mut PluginReader::new(&stream[..], name),
        &[usize::MAX],
        cap,
    );
    assert_eq!(got, want, "fast path against the general path");
    let got = drain(
        &mut PluginReader::new(&stream[..], name),
        &[batch, 1, usize::MAX],
        cap,
    );
    assert_eq!(got, want, "batches of {batch}, 1 and any");

    if want.error.as_deref() == Some("(cap reached)") {
        return;
    }
    let depth = 1 + (mode as usize >> 6);
    let want_pages = filter_events(
        &want.events,
        PageFilter::new(depth, false),
        want.error.clone(),
    );
    let mut r = PluginReader::new(&stream[..], name);
    let got = drain_pages(&mut r, &mut PageFilter::new(depth, false), &[usize::MAX]);
    assert_eq!(got, want_pages, "fill_pages against a filter over fill");
    let mut r = PluginReader::new(&stream[..], name);
    let got = drain_pages(
        &mut r,
        &mut PageFilter::new(depth, false),
        &[batch, 7, usize::MAX],
    );
    assert_eq!(
        got, want_pages,
        "fill_pages in batches of {batch}, 7 and any"
    );
});
