//! One line of Lackey text parsed byte by byte: the careful path, for the lines the fast
//! path ([`super::fast`]) leaves and for the chunks it does not take, and the errors'
//! reasons.

use super::VALID_LINE;
use pagelab_core::{AccessKind, MemRef, VirtAddr};

/// Value of each byte as a hexadecimal digit, or 0xff.
static HEX: [u8; 256] = {
    let mut t = [0xffu8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

/// A parse error's reason, with the syntax of a line when the line broke it
/// (a size above the limit is well formed: the syntax would mislead).
#[cold]
pub(super) fn with_syntax(reason: &str) -> String {
    if reason == crate::REF_TOO_LARGE {
        reason.to_string()
    } else {
        reason.to_string() + "; " + VALID_LINE
    }
}

/// [`parse_line`] for a line the fast path left, `buf[pos..=end]`; out of line
/// to keep the fast loop's registers free.
#[cold]
#[inline(never)]
pub(super) fn parse_odd_line(
    buf: &[u8],
    pos: usize,
    end: usize,
) -> Result<Option<MemRef>, &'static str> {
    let (next, r) = parse_line(buf, pos)?;
    debug_assert_eq!(next, end + 1);
    Ok(r)
}

/// Parses the line at `buf[pos]`, which ends with a newline within `buf`.
///
/// Returns where the next line starts and the reference, if the line holds one.
#[inline(always)]
pub(super) fn parse_line(buf: &[u8], pos: usize) -> Result<(usize, Option<MemRef>), &'static str> {
    let mut p = pos;
    if buf[p] == b'=' && buf[p + 1] == b'=' {
        let nl = memchr::memchr(b'\n', &buf[p..]).ok_or("internal: line without newline")?;
        return Ok((p + nl + 1, None));
    }
    while buf[p] == b' ' {
        p += 1;
    }
    let kind = match buf[p] {
        b'I' => AccessKind::Instr,
        b'L' => AccessKind::Load,
        b'S' => AccessKind::Store,
        b'M' => AccessKind::Modify,
        _ => {
            return end_of_line(buf, p)
                .map(|next| (next, None))
                .map_err(|_| "unknown record type")
        }
    };
    p += 1;
    if buf[p] != b' ' {
        return Err("expected a space after the record letter");
    }
    while buf[p] == b' ' {
        p += 1;
    }
    let digits = p;
    let mut addr = 0u64;
    loop {
        let d = HEX[buf[p] as usize];
        if d > 15 {
            break;
        }
        if addr >> 60 != 0 {
            return Err("address does not fit in 64 bits");
        }
        addr = addr << 4 | d as u64;
        p += 1;
    }
    if p == digits {
        return Err("expected a hexadecimal address");
    }
    if buf[p] != b',' {
        return Err("expected `,` after the address");
    }
    p += 1;
    let digits = p;
    let mut size = 0u64;
    loop {
        let d = buf[p].wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        size = size * 10 + d as u64;
        if size > u32::MAX as u64 {
            return Err("size does not fit in 32 bits");
        }
        p += 1;
    }
    if p == digits {
        return Err("expected a decimal size after `,`");
    }
    if size > u64::from(crate::max_ref_size()) {
        return Err(crate::REF_TOO_LARGE);
    }
    let next = end_of_line(buf, p).map_err(|_| "unexpected text after the size")?;
    Ok((
        next,
        Some(MemRef {
            addr: VirtAddr(addr),
            size: size as u32,
            kind,
        }),
    ))
}

/// Skips trailing spaces and a carriage return; `Ok(next line)` if the line ends there.
#[inline(always)]
fn end_of_line(buf: &[u8], mut p: usize) -> Result<usize, ()> {
    while buf[p] == b' ' || buf[p] == b'\r' {
        p += 1;
    }
    if buf[p] == b'\n' {
        Ok(p + 1)
    } else {
        Err(())
    }
}
