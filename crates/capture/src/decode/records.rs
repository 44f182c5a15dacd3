//! The extended records (system calls, maps, exec, clone, the kernel's writes) and block
//! definitions of the plugin's stream (docs/capture-format.md, "Extended records").

use super::*;

impl<R: Read> PluginReader<R> {
    pub(super) fn extended(
        &mut self,
        at: usize,
        w: u64,
        words: usize,
        out: &mut Vec<Event>,
    ) -> Result<(), TraceError> {
        let subtype = ((w >> 56) & 63) as u8;
        let value = w & format::EXT_VALUE_MASK;
        let need = |n: usize| -> Result<(), TraceError> {
            if words < n {
                Err(self.corrupt(
                    at,
                    format!("record of type {subtype} has {words} words, needs {n}"),
                ))
            } else {
                Ok(())
            }
        };
        match subtype {
            format::X_THREAD => {
                need(1)?;
                let id = thread_id(self.word(at, 1));
                self.root.get_or_insert(id.pid);
                if id != self.cur.id {
                    let next = self.threads.remove(&id).unwrap_or(Thread::new(id));
                    let prev = std::mem::replace(&mut self.cur, next);
                    if prev.id != ThreadId::default() {
                        self.threads.insert(prev.id, prev);
                    }
                }
            }
            format::X_TBDEF => self.define(at, value, words)?,
            format::X_PLACE => {
                need(7)?;
                if let Some(q) = &self.questions {
                    let w = |i| self.word(at, i);
                    let flags = w(4) as u32;
                    let file = (flags & pagelab_core::MapRequest::ANONYMOUS == 0)
                        .then(|| pagelab_core::FileIdentity {
                            dev: w(6),
                            ino: w(7),
                        })
                        .filter(|f| f.dev != 0 || f.ino != 0);
                    let req = pagelab_core::MapRequest {
                        hint: VirtAddr(w(1)),
                        len: w(2),
                        prot: crate::syscalls::prot(w(3)),
                        flags,
                        file,
                        offset: w(5),
                    };
                    let index = self.pushed + (out.len() - self.decode_start) as u64;
                    q.lock()
                        .expect("never poisoned")
                        .push_back(crate::placement::Question {
                            index,
                            pid: self.cur.id.pid,
                            req,
                        });
                    self.paused = true;
                }
            }
            format::X_MEMX => {
                need(1)?;
                let index = (value & MAX_INSNS as u64) as u32;
                let store = value >> 10 & 1 == 1;
                let shift = ((value >> 11) & 7) as u32;
                let addr = self.word(at, 1);
                self.access(at, index, addr, shift, store, out)?;
            }
            format::X_SYSCALL => {
                need(7)?;
                self.finish_block(out);
                let ret = self.word(at, 1);
                let mut a = [0u64; 6];
                for (i, x) in a.iter_mut().enumerate() {
                    *x = self.word(at, 2 + i);
                }
                let mut extra = std::mem::take(&mut self.extra);
                extra.clear();
                extra.extend((8..=words).map(|i| self.word(at, i)));
                let file = match extra[..] {
                    [dev, ino] if value == nr::MMAP => Some((dev, ino)),
                    _ => None,
                };
                let writes = crate::syscalls::user_writes(value, ret, &a, &extra);
                self.extra = extra;
                let writes = writes.map_err(|reason| self.corrupt(at, reason))?;
                if value == nr::EXIT {
                    // One thread of several ended: forget it.
                    self.cur = Thread::new(ThreadId::default());
                    return Ok(());
                }
                let mark = out.len();
                self.switch_to_cur(out);
                let before = out.len();
                self.spaces
                    .syscall(self.cur.id.pid, value, ret, &a, file, out);
                for (buf, len) in writes {
                    crate::syscalls::kernel_writes(buf, len, out);
                }
                if out.len() == before {
                    out.truncate(mark);
                    if mark < before {
                        self.emitted = None;
                    }
                } else if value == nr::EXIT_GROUP {
                    self.exited.insert(self.cur.id.pid);
                }
            }
            format::X_FORK => {
                self.finish_block(out);
                // Older streams carry no flags: a plain fork.
                let flags = CloneFlags(if words >= 1 { self.word(at, 1) } else { 0 });
                let parent = self.cur.id.pid;
                if self.forks.insert(value as u32) {
                    self.switch_to_cur(out);
                    self.spaces.fork(parent, value as u32, flags);
                    out.push(Event::Fork {
                        child: value as u32,
                        flags,
                    });
                }
                if !flags.shares_mm() {
                    self.spaces.forked(parent);
                }
            }
            format::X_EXEC => {
                // The rest of the block that called execve ran in the old image.
                self.finish_block(out);
                self.switch_to_cur(out);
                self.spaces.exec(self.cur.id.pid);
                out.push(Event::Exec(self.exec_image(at, value, words)));
            }
            format::X_CHILD => {
                need(1)?;
                let parent = thread_id(self.word(at, 1));
                let flags = CloneFlags(if words >= 2 { self.word(at, 2) } else { 0 });
                if self.forks.insert(self.cur.id.pid) {
                    if self.emitted != Some(parent) {
                        out.push(Event::Switch(parent));
                        self.emitted = Some(parent);
                    }
                    self.spaces.fork(parent.pid, self.cur.id.pid, flags);
                    out.push(Event::Fork {
                        child: self.cur.id.pid,
                        flags,
                    });
                }
                // The kernel's writes in the child's first return to user mode, which QEMU
                // makes itself or not at all: the child's tid (CLONE_CHILD_SETTID, a
                // 4-byte store at the pointer the call passed; older streams: none) and
                // its rseq area (see `AddressSpaces::register_rseq`).
                let tid_at = if words >= 3 { self.word(at, 3) } else { 0 };
                let rseq = self.spaces.rseq_write(self.cur.id.pid);
                if tid_at != 0 || rseq.is_some() {
                    self.switch_to_cur(out);
                }
                if tid_at != 0 {
                    out.push(crate::syscalls::kernel_store(tid_at, 4));
                }
                out.extend(rseq);
            }
            other => return Err(self.corrupt(at, format!("unknown record type {other}"))),
        }
        Ok(())
    }

    /// The new program an EXEC record names (`value` its number, its words
    /// the strings' bytes then the path up to a NUL); `None` for the older
    /// record without words, or when the plugin could not name the file.
    fn exec_image(&self, at: usize, value: u64, words: usize) -> Option<Box<ExecImage>> {
        if words < 2 {
            return None;
        }
        let mut path: Vec<u8> = (2..=words)
            .flat_map(|i| self.word(at, i).to_le_bytes())
            .collect();
        path.truncate(path.iter().position(|&b| b == 0).unwrap_or(path.len()));
        // realpath gives at most PATH_MAX (4096) bytes with its NUL.
        (!path.is_empty() && path.len() < 4096).then(|| {
            Box::new(ExecImage {
                path,
                strings: self.word(at, 1),
                capture_id: value,
            })
        })
    }

    fn define(&mut self, at: usize, id: u64, words: usize) -> Result<(), TraceError> {
        if words < 2 {
            return Err(self.corrupt(at, "block definition shorter than 3 words"));
        }
        let start = self.word(at, 1);
        let meta = self.word(at, 2);
        let n = (meta & 0xffff_ffff) as usize;
        let flags = meta >> 32;
        let listed = flags & TB_ADDRS != 0;
        let expect = 2 + if listed { n } else { 0 } + n.div_ceil(8);
        if n == 0 || n > MAX_INSNS || words != expect {
            return Err(self.corrupt(
                at,
                format!(
                    "block definition of {n} instructions has {words} words, expected {expect}"
                ),
            ));
        }
        let sizes_at = 3 + if listed { n } else { 0 };
        let first = self.insns.len().saturating_sub(PAD);
        self.insns.truncate(first);
        self.insns.reserve(n + PAD);
        let mut addr = start;
        let page = VirtAddr(start).vpn(PageSize::MIN);
        let mut one_page = true;
        for i in 0..n {
            let size = (self.word(at, sizes_at + i / 8) >> (8 * (i % 8))) as u8;
            if listed {
                addr = self.word(at, 3 + i);
            }
            let r = MemRef {
                addr: VirtAddr(addr),
                size: size as u32,
                kind: AccessKind::Instr,
            };
            one_page &=
                r.addr.vpn(PageSize::MIN) == page && r.last_byte().vpn(PageSize::MIN) == page;
            self.insns.push(Event::Ref(r));
            addr = addr.wrapping_add(size as u64);
        }
        self.insns
            .extend(std::iter::repeat_n(Event::Ref(DUMMY), PAD));
        self.defined += 1;
        // Ids come from one counter, so they stay near the number of blocks
        // defined; a far larger one is damage, not a reason to allocate.
        let id = id as usize;
        if id >= self.blocks.len() {
            if id > 2 * self.defined + (1 << 20) {
                return Err(self.corrupt(at, format!("block id {id} is implausibly large")));
            }
            self.blocks.resize(id + 1, UNKNOWN);
        }
        self.blocks[id] = Block {
            start: first,
            len: n as u32,
            per_insn: flags & TB_PER_INSN != 0,
            one_page,
        };
        Ok(())
    }
}

/// The thread a THREAD or CHILD record's first word names: the pid in its low half, the
/// tid in its high half (docs/capture-format.md).
fn thread_id(word: u64) -> ThreadId {
    ThreadId {
        pid: word as u32,
        tid: (word >> 32) as u32,
    }
}
