//! Writes references exactly as Lackey prints them.

use pagelab_core::{AccessKind, Event, MemRef};
use std::io::{self, Write};

/// Bytes gathered before each write to the inner writer.
const BUF: usize = 1 << 16;

/// Writes [`Event::Ref`]s as Lackey text, byte for byte as Lackey prints them:
/// `I  %08lx,%lu` for instruction fetches and ` L %08lx,%lu` (`S`, `M`) for data.
///
/// Lackey has no way to say anything but references, so other events are not
/// written but counted ([`LackeyWriter::dropped`]). The writer buffers by
/// itself; call [`LackeyWriter::finish`] to flush.
pub struct LackeyWriter<W: Write> {
    inner: W,
    buf: Vec<u8>,
    written: u64,
    dropped: u64,
}

impl<W: Write> LackeyWriter<W> {
    /// A writer into `inner`.
    pub fn new(inner: W) -> Self {
        LackeyWriter {
            inner,
            buf: Vec::with_capacity(BUF + 64),
            written: 0,
            dropped: 0,
        }
    }

    /// Writes a reference; counts any other event as dropped.
    #[inline]
    pub fn write(&mut self, event: &Event) -> io::Result<()> {
        match event {
            Event::Ref(r) => self.write_ref(r),
            _ => {
                self.dropped += 1;
                Ok(())
            }
        }
    }

    /// Writes one reference line.
    #[inline]
    pub fn write_ref(&mut self, r: &MemRef) -> io::Result<()> {
        let head: &[u8; 3] = match r.kind {
            AccessKind::Instr => b"I  ",
            AccessKind::Load => b" L ",
            AccessKind::Store => b" S ",
            AccessKind::Modify => b" M ",
        };
        self.buf.extend_from_slice(head);
        push_hex(&mut self.buf, r.addr.0);
        self.buf.push(b',');
        push_dec(&mut self.buf, r.size);
        self.buf.push(b'\n');
        self.written += 1;
        if self.buf.len() >= BUF {
            self.inner.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// References written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Events that were not references and so were not written.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Flushes everything and returns the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.inner.write_all(&self.buf)?;
        self.buf.clear();
        self.inner.flush()?;
        Ok(self.inner)
    }
}

/// Each byte value as two lower-case hexadecimal digits.
static HEX2: [[u8; 2]; 256] = {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut t = [[0u8; 2]; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = [DIGITS[i >> 4], DIGITS[i & 15]];
        i += 1;
    }
    t
};

/// Appends `v` in lower-case hexadecimal, at least 8 digits, zero padded (`%08lx`).
#[inline]
fn push_hex(buf: &mut Vec<u8>, v: u64) {
    let mut tmp = [0u8; 16];
    for (pair, byte) in tmp.chunks_exact_mut(2).zip(v.to_be_bytes()) {
        pair.copy_from_slice(&HEX2[byte as usize]);
    }
    let digits = (64 - v.leading_zeros() as usize).div_ceil(4).max(8);
    buf.extend_from_slice(&tmp[16 - digits..]);
}

/// Appends `v` in decimal (`%lu`).
#[inline]
fn push_dec(buf: &mut Vec<u8>, mut v: u32) {
    if v < 10 {
        buf.push(b'0' + v as u8);
        return;
    }
    let mut tmp = [0u8; 10];
    let mut i = tmp.len();
    while v > 0 {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
    }
    buf.extend_from_slice(&tmp[i..]);
}
