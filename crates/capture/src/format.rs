//! The record stream the QEMU plugin writes (`docs/capture-format.md`).
//!
//! The stream is a sequence of little-endian 64-bit words. The two top bits of
//! a word give its type:
//!
//! | bits 63..62 | record | layout |
//! |---|---|---|
//! | `00` | block executed | bits 47..0: block id |
//! | `01` | memory access | bit 61 store, bits 60..58 log2 size, bits 57..48 instruction index, bits 47..0 address |
//! | `10` | extended | bits 61..56 subtype, bits 55..40 number of words that follow, bits 39..0 value |
//! | `11` | instruction executed | bits 57..48 instruction index, bits 47..0 block id |
//!
//! The functions here build words; tests use them to write streams by hand.

/// Mask of the 48-bit address or block-id field.
pub const ADDR_MASK: u64 = (1 << 48) - 1;
/// Mask of an extended record's 40-bit value field.
pub const EXT_VALUE_MASK: u64 = (1 << 40) - 1;
/// Largest instruction index a record can carry (TCG stops blocks at 512).
pub const MAX_INSNS: usize = 1023;

/// Subtype of an extended record: the block's writer, `pid | tid << 32` in one word.
pub const X_THREAD: u8 = 1;
/// Subtype: a block definition (value: block id).
pub const X_TBDEF: u8 = 2;
/// Subtype: a memory access above 2^48 (value: index | store << 10 | log2 size << 11; word: address).
pub const X_MEMX: u8 = 3;
/// Subtype: a system call (value: its number; words: result, six arguments, then for an mmap
/// of a file its dev and inode, for readv, preadv, preadv2, recvfrom and recvmsg what the
/// plugin read of the memory their arguments point at: docs/capture-format.md).
pub const X_SYSCALL: u8 = 4;
/// Subtype: first record of a forked child (words: parent `pid | tid << 32`, then the
/// call's clone flags; older streams: the parent only).
pub const X_CHILD: u8 = 5;
/// Subtype: the current process forked a child (value: child pid; word: the call's clone
/// flags, as the guest asked for them; older streams: none).
pub const X_FORK: u8 = 6;
/// Subtype: the first record of a program the current process exec'd (value 0, no words).
pub const X_EXEC: u8 = 7;
/// Extended subtype: a placement question from pagelab's placement library
/// (hint, length, protection, flags, offset, file device, file inode of the
/// mmap it is about to make); the capture answers it with the model's address.
pub const X_PLACE: u8 = 8;

/// Block-definition flag: the block reports each instruction (`11` records) instead of itself.
pub const TB_PER_INSN: u64 = 1;
/// Block-definition flag: instruction addresses are listed (the block is not contiguous).
pub const TB_ADDRS: u64 = 2;

/// A block-executed word.
pub fn tb_exec(id: u64) -> u64 {
    id & ADDR_MASK
}

/// An instruction-executed word (blocks defined with [`TB_PER_INSN`]).
pub fn insn_exec(id: u64, index: usize) -> u64 {
    (3 << 62) | ((index as u64 & MAX_INSNS as u64) << 48) | (id & ADDR_MASK)
}

/// A memory-access word: `index` is the instruction's position in its block.
pub fn mem(index: usize, addr: u64, log2_size: u8, store: bool) -> u64 {
    (1 << 62)
        | ((store as u64) << 61)
        | (((log2_size & 7) as u64) << 58)
        | ((index as u64 & MAX_INSNS as u64) << 48)
        | (addr & ADDR_MASK)
}

/// The first word of an extended record followed by `words` words.
pub fn ext(subtype: u8, words: usize, value: u64) -> u64 {
    (2 << 62)
        | (((subtype & 63) as u64) << 56)
        | (((words as u64) & 0xffff) << 40)
        | (value & EXT_VALUE_MASK)
}

/// A THREAD record: the words that follow were written by this process and thread.
pub fn thread(pid: u32, tid: u32) -> [u64; 2] {
    [ext(X_THREAD, 1, 0), pid as u64 | (tid as u64) << 32]
}

/// A contiguous block definition: instruction `i` starts at `start` plus the sizes before it.
pub fn tb_def(id: u64, start: u64, sizes: &[u8], per_insn: bool) -> Vec<u64> {
    let size_words = sizes.len().div_ceil(8);
    let mut v = vec![
        ext(X_TBDEF, 2 + size_words, id),
        start,
        sizes.len() as u64 | (if per_insn { TB_PER_INSN } else { 0 }) << 32,
    ];
    for chunk in sizes.chunks(8) {
        let mut b = [0u8; 8];
        b[..chunk.len()].copy_from_slice(chunk);
        v.push(u64::from_le_bytes(b));
    }
    v
}

/// A SYSCALL record with its result and six arguments (and `dev`, `ino` for a file mmap).
pub fn syscall(num: u64, ret: i64, args: [u64; 6], file: Option<(u64, u64)>) -> Vec<u64> {
    let n = if file.is_some() { 9 } else { 7 };
    let mut v = vec![ext(X_SYSCALL, n, num), ret as u64];
    v.extend_from_slice(&args);
    if let Some((dev, ino)) = file {
        v.push(dev);
        v.push(ino);
    }
    v
}

/// Serialises words as the plugin writes them (little-endian).
pub fn to_bytes(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}
