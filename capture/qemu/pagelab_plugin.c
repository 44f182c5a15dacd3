/*
 * pagelab's QEMU TCG plugin: records a user-mode guest's instruction fetches,
 * loads, stores and address-space system calls as a stream of 64-bit words
 * (docs/capture-format.md) written in large blocks to a file descriptor.
 *
 *   qemu-x86_64 -plugin libpagelab_qemu_v1.so,fd=N PROGRAM ARGS...
 *
 * Cost model: one callback per executed translation block (its instructions
 * are rebuilt by the reader from the block's definition, written once at
 * translation) and one per memory access, each appending one word to a
 * per-thread buffer; a buffer is written with one write() per 1 MiB.
 *
 * Why things are the way they are:
 * - QEMU 7.2 lists an instruction that crosses a page boundary at the end of
 *   a block although it is not executed there (it is retranslated as the head
 *   of the next block): such blocks get one callback per instruction instead.
 * - The guest shares QEMU's file table and may close low descriptors: the
 *   output descriptor is a high one chosen by pagelab, marked close-on-exec
 *   so that programs the guest execs do not hold the pipe open.
 * - After fork both processes own a copy of every buffer: buffers are flushed
 *   before fork (and execve, which loses them, and exit), and the child drops
 *   the other threads' copies.
 * - Several threads and processes write to one pipe, and pipe writes above
 *   PIPE_BUF bytes are not atomic: every block is written under a robust
 *   mutex in memory shared by all processes of the capture, and starts with
 *   a THREAD record naming its writer. Block ids come from a counter in the
 *   same shared page, so ids are unique across processes and a forked child
 *   can execute blocks its parent translated.
 * - QEMU 7.2 calls no plugin callback when the guest dies of a signal, so
 *   buffers live in slots of a memory file pagelab created and passed as
 *   mem=M: after the last process is gone pagelab reads what was never
 *   written. A flushed buffer is zeroed, so a slot's records end at the
 *   first zero word at a record boundary (block ids start at 1).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "pagelab_qemu_api.h"

#ifndef PAGELAB_PLUGIN_API
#define PAGELAB_PLUGIN_API 1
#endif

QEMU_PLUGIN_EXPORT int qemu_plugin_version = PAGELAB_PLUGIN_API;

/* ---- record layout (docs/capture-format.md) ---- */
#define T_MEM (1ULL << 62)
#define T_EXT (2ULL << 62)
#define T_INSN (3ULL << 62)
#define ADDR_MASK ((1ULL << 48) - 1)
#define MEM_STORE (1ULL << 61)
#define MEM_SHIFT_POS 58
#define IDX_POS 48
#define MAX_INSNS 1023
#define EXT_VALUE_MASK ((1ULL << 40) - 1)
#define EXT(sub, n, val) \
    (T_EXT | ((uint64_t)(sub) << 56) | ((uint64_t)(n) << 40) | ((uint64_t)(val) & EXT_VALUE_MASK))

enum {
    X_THREAD = 1, X_TBDEF = 2, X_MEMX = 3, X_SYSCALL = 4, X_CHILD = 5, X_FORK = 6, X_EXEC = 7,
    X_PLACE = 8,
};
enum { TB_PER_INSN = 1, TB_ADDRS = 2 };

/* x86-64 system call numbers. */
enum {
    NR_MMAP = 9, NR_MPROTECT = 10, NR_MUNMAP = 11, NR_BRK = 12, NR_MREMAP = 25,
    NR_MADVISE = 28, NR_CLONE = 56, NR_FORK = 57, NR_VFORK = 58, NR_EXECVE = 59,
    NR_EXIT = 60, NR_EXIT_GROUP = 231, NR_EXECVEAT = 322, NR_CLONE3 = 435,
    /* System calls that write a user buffer of their result's length: the kernel's
     * writes fault there as the program's own would, and the plugin sees none of them. */
    NR_READ = 0, NR_PREAD64 = 17, NR_READLINK = 89, NR_GETDENTS64 = 217,
    NR_READLINKAT = 267, NR_GETRANDOM = 318,
    /* rseq: QEMU 7.2 answers ENOSYS, the kernel registers the area and writes it after
     * each fork, in parent and child; recorded failed or not. */
    NR_RSEQ = 334,
    /* wait4 and waitid: the kernel writes the status (siginfo, rusage) into user memory,
     * and the caller sleeps, which is when the kernel writes its rseq area again. */
    NR_WAIT4 = 61, NR_WAITID = 247,
    /* System calls that write user memory of a fixed size (or as many bytes as they
     * return): the decoder knows how much from the number and the arguments. */
    NR_STAT = 4, NR_FSTAT = 5, NR_LSTAT = 6, NR_NEWFSTATAT = 262, NR_STATX = 332,
    NR_STATFS = 137, NR_FSTATFS = 138, NR_UNAME = 63, NR_PIPE = 22, NR_PIPE2 = 293,
    NR_SOCKETPAIR = 53, NR_RT_SIGACTION = 13, NR_RT_SIGPROCMASK = 14,
    NR_CLOCK_GETTIME = 228, NR_CLOCK_GETRES = 229, NR_GETTIMEOFDAY = 96, NR_SYSINFO = 99,
    NR_GETRLIMIT = 97, NR_GETRUSAGE = 98, NR_TIMES = 100, NR_PRLIMIT64 = 302,
    NR_GETCWD = 79, NR_SCHED_GETAFFINITY = 204, NR_TIME = 201, NR_GETRESUID = 118,
    NR_GETRESGID = 120, NR_GETGROUPS = 115, NR_SIGALTSTACK = 131, NR_GETITIMER = 36,
    NR_EPOLL_WAIT = 232, NR_EPOLL_PWAIT = 281, NR_EPOLL_PWAIT2 = 441,
    /* System calls that write memory the arguments only point at (is_vector): the record
     * carries what the plugin reads of it (docs/capture-format.md). */
    NR_READV = 19, NR_PREADV = 295, NR_PREADV2 = 327, NR_RECVFROM = 45, NR_RECVMSG = 47,
    NR_ACCEPT = 43, NR_ACCEPT4 = 288, NR_GETSOCKNAME = 51, NR_GETPEERNAME = 52,
    /* No kernel's: pagelab's placement library asks where a mapping goes
     * (capture/place/pagelab_place.c; QEMU answers ENOSYS). */
    PLACE_NR = 0x5047,
};
#define CLONE_VM_FLAG 0x100
#define CLONE_VFORK_FLAG 0x4000
#define CLONE_CHILD_SETTID_FLAG 0x01000000
#define CSIGNAL_MASK 0xffULL
#define MAP_ANON_FLAG 0x20

/* Buffers are 1 MiB slots: [0] state, [1] pid | tid << 32, [2..4) room for
 * the THREAD record that heads a written block, [4..) records. Slot 0 of the
 * arena is its header: [0] magic, [1] next block id, then the write lock. */
#define SLOT_WORDS (128 * 1024)
#define SLOT_BYTES (SLOT_WORDS * 8)
#define HDR_WORDS 2 /* room for the THREAD record at the head of a block */
#define ARENA_MAGIC 0x414e455241424c50ULL /* "PLBARENA" */
enum { SLOT_FREE = 0, SLOT_THREAD = 1, SLOT_DEFS = 2 };

struct buf {
    uint64_t *slot; /* NULL: not allocated */
    uint64_t *pos, *end;
    int in_arena;   /* else malloc'd: nothing to recover after a crash */
};

struct tstate {
    struct buf b;
    uint32_t pid, tid;
    struct tstate *next, *prev; /* registry of live threads */
    uint64_t cur_tb;            /* the id of the block executing (see on_mem) */
    int64_t sc_num;             /* system call awaiting its result, or -1 */
    uint64_t sc_args[6];
    uint64_t sc_clone;          /* a fork-like call's clone flags, as the guest asked */
    uint64_t sc_child_tid;      /* where the child's tid goes (CLONE_CHILD_SETTID), or 0 */
    uint64_t placed;            /* the address last given as a hint, until its mmap */
    uint64_t placed_hint;       /* the program's own hint for that mmap */
    uint64_t sc_len_in;         /* an address length at entry: recvfrom's, accept's,
                                 * getsockname's *addrlen, recvmsg's msg_namelen */
    int sc_len_ok;              /* ... was read */
};

struct arena_header {
    uint64_t magic;
    uint64_t next_tb;      /* block id counter, shared across processes */
    pthread_mutex_t lock;  /* serialises block writes across processes */
    uint64_t next_exec;    /* exec counter, shared across processes: names page logs */
    pthread_mutex_t place_lock; /* one placement question at a time (one answer pipe) */
};

static int out_fd = -1;
static int dead;                   /* the output failed in this process: record nothing more */
static uint64_t *arena;
static size_t nslots;
static struct arena_header *hdr;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER; /* registry and defs */
static struct tstate registry = {.next = &registry, .prev = &registry};
static struct buf defs;            /* block definitions not yet written */
static __thread struct tstate *tls __attribute__((tls_model("initial-exec")));
static int mem_fd = -1;
static uint64_t exec_pending;      /* this image was started by follow_exec: its number, said first */
static uint64_t exec_strings;      /* the bytes of the strings its execve copied */
static char page_log[4096];        /* pagelog=DIR: the directory of QEMU's page logs, or "" */
static int place_fd = -1;          /* place=N: pagelab's answers to placement questions */
static char preload[4200];         /* preload=PATH: "LD_PRELOAD=PATH", the placement library */

static void complain(const char *what, int err)
{
    char msg[200];
    int n = snprintf(msg, sizeof msg, "pagelab plugin: %s: %s (fd %d); recording stops\n", what,
                     strerror(err), out_fd);
    if (n > 0 && write(2, msg, (size_t)n) < 0) {
        /* nothing else to do: the guest may have closed fd 2 as well */
    }
}

static void write_all(const uint64_t *words, size_t n)
{
    const char *p = (const char *)words;
    size_t left = n * sizeof *words;
    while (left > 0 && !dead) {
        ssize_t w = write(out_fd, p, left);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            dead = 1;
            complain("writing the trace", errno);
            return;
        }
        p += w;
        left -= (size_t)w;
    }
}

static void buf_get(struct buf *b, int kind, uint32_t pid, uint32_t tid)
{
    b->slot = NULL;
    for (size_t i = 1; i < nslots && b->slot == NULL; i++) {
        uint64_t *slot = arena + i * SLOT_WORDS;
        uint64_t expect = SLOT_FREE;
        if (__atomic_compare_exchange_n(&slot[0], &expect, (uint64_t)kind, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            b->slot = slot;
            b->in_arena = 1;
        }
    }
    if (b->slot == NULL) {
        b->slot = calloc(SLOT_WORDS, sizeof *b->slot);
        b->in_arena = 0;
        if (b->slot == NULL) {
            fprintf(stderr, "pagelab plugin: out of memory for a buffer\n");
            abort();
        }
    }
    b->slot[1] = (uint64_t)pid | ((uint64_t)tid << 32);
    b->pos = b->slot + 2 + HDR_WORDS;
    b->end = b->slot + SLOT_WORDS;
}

/* Gives the slot back; its records must have been written. */
static void buf_put(struct buf *b)
{
    if (b->slot == NULL) {
        return;
    }
    if (b->in_arena) {
        __atomic_store_n(&b->slot[0], SLOT_FREE, __ATOMIC_RELEASE);
    } else {
        free(b->slot);
    }
    b->slot = NULL;
}

/* Writes the buffer's records as one block headed by a THREAD record, then zeroes them. */
static void buf_flush(struct buf *b, uint32_t pid, uint32_t tid)
{
    if (b->slot == NULL) {
        return;
    }
    uint64_t *words = b->slot + 2;
    size_t n = (size_t)(b->pos - words);
    if (n == HDR_WORDS) {
        return;
    }
    if (!dead) {
        words[0] = EXT(X_THREAD, 1, 0);
        words[1] = (uint64_t)pid | ((uint64_t)tid << 32);
        int r = pthread_mutex_lock(&hdr->lock);
        if (r == EOWNERDEAD) {
            /* a process died mid-write; its block is lost, the stream goes on */
            pthread_mutex_consistent(&hdr->lock);
        }
        write_all(words, n);
        pthread_mutex_unlock(&hdr->lock);
    }
    memset(words + HDR_WORDS, 0, (n - HDR_WORDS) * sizeof *words);
    b->pos = words + HDR_WORDS;
}

/* Caller holds reg_lock. */
static void flush_defs_locked(uint32_t pid, uint32_t tid)
{
    buf_flush(&defs, pid, tid);
}

static void flush_thread(struct tstate *t)
{
    pthread_mutex_lock(&reg_lock);
    flush_defs_locked(t->pid, t->tid);
    buf_flush(&t->b, t->pid, t->tid);
    pthread_mutex_unlock(&reg_lock);
}

/* The EXEC record that opens an exec'd image: its number, the strings its
 * execve copied, and the file that runs as an absolute path (the words
 * after `strings` hold its bytes up to a NUL). Called on the first record,
 * once QEMU has loaded the program; the slot is new, so there is room. */
static void put_exec(struct tstate *t)
{
    char path[4096] = "";
    const char *bin = qemu_plugin_path_to_binary();
    if (bin == NULL || realpath(bin, path) == NULL) {
        path[0] = 0;
    }
    free((void *)bin);
    size_t path_words = strlen(path) / 8 + 1;
    *t->b.pos++ = EXT(X_EXEC, 1 + path_words, exec_pending);
    *t->b.pos++ = exec_strings;
    memset(t->b.pos, 0, path_words * 8);
    memcpy(t->b.pos, path, strlen(path));
    t->b.pos += path_words;
    exec_pending = 0;
}

static struct tstate *thread_init(void)
{
    struct tstate *t = calloc(1, sizeof *t);
    if (t == NULL) {
        fprintf(stderr, "pagelab plugin: out of memory for a thread\n");
        abort();
    }
    t->pid = (uint32_t)getpid();
    t->tid = (uint32_t)syscall(SYS_gettid);
    t->sc_num = -1;
    buf_get(&t->b, SLOT_THREAD, t->pid, t->tid);
    if (exec_pending) {
        put_exec(t);
    }
    pthread_mutex_lock(&reg_lock);
    t->next = registry.next;
    t->prev = &registry;
    registry.next->prev = t;
    registry.next = t;
    pthread_mutex_unlock(&reg_lock);
    tls = t;
    return t;
}

/* Forgets the calling thread; its records must have been written. */
static void thread_free(struct tstate *t)
{
    pthread_mutex_lock(&reg_lock);
    t->prev->next = t->next;
    t->next->prev = t->prev;
    pthread_mutex_unlock(&reg_lock);
    buf_put(&t->b);
    free(t);
    tls = NULL;
}

static inline struct tstate *me(void)
{
    struct tstate *t = tls;
    return __builtin_expect(t != NULL, 1) ? t : thread_init();
}

static inline void put(struct tstate *t, uint64_t w)
{
    *t->b.pos++ = w;
    if (__builtin_expect(t->b.pos == t->b.end, 0)) {
        flush_thread(t);
    }
}

/* Makes room for an n-word record. */
static inline void reserve(struct tstate *t, size_t n)
{
    if ((size_t)(t->b.end - t->b.pos) < n) {
        flush_thread(t);
    }
}

/* ---- execution callbacks: the hot path ---- */

/* A block's start: its id. */
static void on_tb_exec(unsigned int vcpu, void *ud)
{
    (void)vcpu;
    struct tstate *t = me();
    t->cur_tb = (uint64_t)(uintptr_t)ud;
    put(t, (uint64_t)(uintptr_t)ud);
}

/* An instruction of a block that crosses a page, each reported as it runs: its index and
 * its block's id. */
static void on_insn_exec(unsigned int vcpu, void *ud)
{
    (void)vcpu;
    struct tstate *t = me();
    t->cur_tb = (uint64_t)(uintptr_t)ud & ADDR_MASK;
    put(t, (uint64_t)(uintptr_t)ud);
}

/* A memory access: `ud` is the instruction's index (above IDX_POS) and its block's id
 * (below). QEMU 7.2 leaves the memory callbacks of an instruction that ends its block
 * through a helper armed after the block (QEMU issue 1381, fixed in 8.0 by clearing
 * plugin_mem_cbs on a block's exit), so a later block's helper that loads memory itself
 * (a segment descriptor, say) reports that load as the old instruction's. An access whose
 * block is not the one executing is such a load: dropped, not pinned on an instruction of
 * another block (docs/layout.md). */
static void on_mem(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *ud)
{
    (void)vcpu;
    struct tstate *t = me();
    uint64_t u = (uint64_t)(uintptr_t)ud;
    if (__builtin_expect((u & ADDR_MASK) != t->cur_tb, 0)) {
        return;
    }
    u &= ~ADDR_MASK;
    uint64_t shift = qemu_plugin_mem_size_shift(info) & 7;
    uint64_t store = qemu_plugin_mem_is_store(info) ? 1 : 0;
    if (__builtin_expect((vaddr >> 48) == 0, 1)) {
        put(t, T_MEM | u | (store << 61) | (shift << MEM_SHIFT_POS) | vaddr);
    } else {
        uint64_t idx = (u >> IDX_POS) & MAX_INSNS;
        reserve(t, 2);
        *t->b.pos++ = EXT(X_MEMX, 1, idx | (store << 10) | (shift << 11));
        put(t, vaddr);
    }
}

/* ---- translation ---- */

static void on_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    if (n == 0) {
        return;
    }
    if (n > MAX_INSNS) {
        n = MAX_INSNS; /* TCG stops at 512; never reached */
    }
    uint64_t tbid = __atomic_fetch_add(&hdr->next_tb, 1, __ATOMIC_RELAXED) & ADDR_MASK;
    uint64_t addrs[MAX_INSNS];
    uint8_t sizes[MAX_INSNS + 8];
    int contiguous = 1;
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        size_t sz = qemu_plugin_insn_size(insn);
        addrs[i] = qemu_plugin_insn_vaddr(insn);
        sizes[i] = (uint8_t)(sz > 255 ? 255 : sz);
        if (i > 0 && addrs[i] != addrs[i - 1] + sizes[i - 1]) {
            contiguous = 0;
        }
    }
    uint64_t last = addrs[n - 1], last_end = last + (sizes[n - 1] ? sizes[n - 1] - 1 : 0);
    int per_insn = ((last ^ last_end) >> 12) != 0;
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint64_t idx = (uint64_t)i << IDX_POS;
        if (per_insn) {
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_insn_exec, QEMU_PLUGIN_CB_NO_REGS,
                                                   (void *)(uintptr_t)(T_INSN | idx | tbid));
        }
        qemu_plugin_register_vcpu_mem_cb(insn, on_mem, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW,
                                         (void *)(uintptr_t)(idx | tbid));
    }
    if (!per_insn) {
        qemu_plugin_register_vcpu_tb_exec_cb(tb, on_tb_exec, QEMU_PLUGIN_CB_NO_REGS,
                                             (void *)(uintptr_t)tbid);
    }

    memset(sizes + n, 0, 8);
    size_t size_words = (n + 7) / 8;
    size_t words = 2 + (contiguous ? 0 : n) + size_words;
    uint64_t flags = (per_insn ? TB_PER_INSN : 0) | (contiguous ? 0 : TB_ADDRS);
    struct tstate *t = me();
    pthread_mutex_lock(&reg_lock);
    if (defs.slot == NULL) {
        buf_get(&defs, SLOT_DEFS, t->pid, 0);
    }
    if ((size_t)(defs.end - defs.pos) < words + 1) {
        flush_defs_locked(t->pid, t->tid);
    }
    *defs.pos++ = EXT(X_TBDEF, words, tbid);
    *defs.pos++ = addrs[0];
    *defs.pos++ = (uint64_t)n | (flags << 32);
    if (!contiguous) {
        for (size_t i = 0; i < n; i++) {
            *defs.pos++ = addrs[i];
        }
    }
    for (size_t w = 0; w < size_words; w++) {
        uint64_t packed;
        memcpy(&packed, sizes + 8 * w, 8);
        *defs.pos++ = packed;
    }
    pthread_mutex_unlock(&reg_lock);
}

/* ---- following exec ---- */

/* QEMU user mode runs a program the guest execs natively, untraced. To trace
 * it, the plugin execs QEMU itself on it, with this plugin, the same output
 * descriptors and exec=1 (the arena is shared, not reset), before QEMU's own
 * execve: the new image's first record is EXEC. A `#!` script is resolved
 * as binfmt_script does (its interpreter runs with the script's path as an
 * argument), since QEMU user mode runs ELF files only. What the plugin
 * cannot follow (an exec that will fail, a file that is no x86-64 ELF, an
 * execveat on a descriptor) is left to QEMU: it fails as it should, or runs
 * untraced. Guest pointers are read as host ones: QEMU 7.2 runs a 64-bit
 * guest on a 64-bit host with guest_base 0; process_vm_readv turns a bad
 * pointer into an error, never a crash. */
#define AT_FDCWD_NUM (-100)
#define AT_SYMLINK_NOFOLLOW_FLAG 0x100
#define MAX_SCRIPT_DEPTH 4
#define BINPRM_BUF 256

static char plugin_file[4096];     /* this library, for the QEMU an exec starts */

static void complain_exec(const char *qemu, int err)
{
    char msg[4200];
    int n = snprintf(msg, sizeof msg,
                     "pagelab plugin: cannot start %s on an exec'd program (%s): it runs untraced\n",
                     qemu, strerror(err));
    if (n > 0 && write(2, msg, (size_t)n) < 0) {
        /* the guest may have closed fd 2 */
    }
}

static size_t guest_read(uint64_t addr, void *dst, size_t n)
{
    struct iovec local = {dst, n}, remote = {(void *)(uintptr_t)addr, n};
    ssize_t r = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    return r < 0 ? 0 : (size_t)r;
}

/* A guest string, malloc'd; NULL when unreadable or longer than 128 KiB. */
static char *guest_str(uint64_t addr)
{
    size_t cap = 256, len = 0;
    char *s = malloc(cap);
    while (s != NULL && cap <= (128 << 10)) {
        /* Never across a page boundary: the next page may be unmapped. */
        size_t chunk = 4096 - (size_t)((addr + len) & 4095);
        if (len + chunk > cap) {
            chunk = cap - len;
        }
        size_t got = guest_read(addr + len, s + len, chunk);
        if (got == 0) {
            break;
        }
        char *nul = memchr(s + len, 0, got);
        if (nul != NULL) {
            return s;
        }
        len += got;
        if (len == cap) {
            char *bigger = realloc(s, cap * 2);
            if (bigger == NULL) {
                break;
            }
            s = bigger;
            cap *= 2;
        }
    }
    free(s);
    return NULL;
}

/* A guest argv or envp: its strings, NULL-terminated, with room for `extra`
 * entries in front; *n their number. A NULL vector is empty, as for Linux. */
static char **guest_vec(uint64_t addr, size_t extra, size_t *n)
{
    size_t cap = 64;
    char **v = calloc(cap + extra + 1, sizeof *v);
    *n = 0;
    for (; v != NULL && addr != 0; addr += 8) {
        uint64_t p;
        if (guest_read(addr, &p, 8) != 8) {
            goto fail;
        }
        if (p == 0) {
            return v;
        }
        if (*n == cap) {
            char **bigger = realloc(v, (2 * cap + extra + 1) * sizeof *v);
            if (bigger == NULL || cap > (1 << 20)) {
                free(bigger != NULL ? bigger : v);
                return NULL;
            }
            v = bigger;
            cap *= 2;
        }
        v[extra + *n] = guest_str(p);
        if (v[extra + *n] == NULL) {
            goto fail;
        }
        (*n)++;
        v[extra + *n] = NULL;
    }
    return v;
fail:
    for (size_t i = 0; i < *n; i++) {
        free(v[extra + i]);
    }
    free(v);
    return NULL;
}

/* What `file` is to execve: 1 an x86-64 ELF, 2 a `#!` script (its line in
 * `line`), 0 anything else (the exec fails, or runs natively untraced). */
static int exec_kind(const char *file, char line[BINPRM_BUF + 1])
{
    struct stat st;
    if (access(file, X_OK) != 0 || stat(file, &st) != 0 || !S_ISREG(st.st_mode)) {
        return 0;
    }
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    ssize_t n = read(fd, line, BINPRM_BUF);
    close(fd);
    if (n < 0) {
        return 0;
    }
    line[n] = 0;
    const unsigned char *h = (const unsigned char *)line;
    if (n >= 20 && memcmp(h, "\177ELF", 4) == 0) {
        /* ELFCLASS64, little-endian, e_machine EM_X86_64 (62) */
        return h[4] == 2 && h[5] == 1 && h[18] == 62 && h[19] == 0 ? 1 : 0;
    }
    return n >= 2 && line[0] == '#' && line[1] == '!' ? 2 : 0;
}

/* Splits a `#!` line as binfmt_script does: the interpreter, then one
 * optional argument (the rest of the line, blanks around it dropped). */
static int parse_shebang(char *line, char **interp, char **arg)
{
    char *end = strchr(line, '\n');
    if (end == NULL) {
        end = line + strlen(line);
    }
    *end = 0;
    while (end > line + 2 && (end[-1] == ' ' || end[-1] == '\t')) {
        *--end = 0;
    }
    char *p = line + 2;
    while (*p == ' ' || *p == '\t') {
        p++;
    }
    if (*p == 0) {
        return 0;
    }
    *interp = p;
    while (*p && *p != ' ' && *p != '\t') {
        p++;
    }
    *arg = NULL;
    if (*p) {
        *p++ = 0;
        while (*p == ' ' || *p == '\t') {
            p++;
        }
        if (*p) {
            *arg = p;
        }
    }
    return 1;
}

static void free_vec(char **v, size_t from)
{
    if (v != NULL) {
        for (size_t i = from; v[i] != NULL; i++) {
            free(v[i]);
        }
        free(v);
    }
}

/* Reruns this exec as QEMU with this plugin on the same program; returns
 * only when it cannot (then QEMU goes on with the guest's own execve). */
static void follow_exec(uint64_t path_p, uint64_t argv_p, uint64_t envp_p)
{
    /* Twelve slots in front: qemu -plugin SPEC [-d page -D LOG] [-E LD_PRELOAD=LIB] -0 ARGV0
     * FILE; a script adds up to two per level in front of the guest's argv[1..]. */
    enum { FRONT = 12 + 2 * MAX_SCRIPT_DEPTH };
    char *path = guest_str(path_p);
    size_t argc = 0, envc = 0;
    char **argv = path != NULL ? guest_vec(argv_p, FRONT, &argc) : NULL;
    char **envp = argv != NULL ? guest_vec(envp_p, 0, &envc) : NULL;
    char line[MAX_SCRIPT_DEPTH + 1][BINPRM_BUF + 1];
    char spec[4200];
    char *orig0 = NULL;
    /* A guest that closed every descriptor before exec (Python's subprocess
     * does) took the output with them: its program runs natively, untraced,
     * rather than under a QEMU whose plugin would refuse to start. */
    if (envp == NULL || plugin_file[0] == 0 || mem_fd < 0 || dead ||
        fcntl(out_fd, F_GETFD) < 0 || fcntl(mem_fd, F_GETFD) < 0) {
        goto out;
    }
    if (argc == 0) {
        /* An empty argv: the program gets its path as argv[0]. */
        argv[FRONT] = strdup(path);
        argv[FRONT + 1] = NULL;
        argc = 1;
    }
    orig0 = argv[FRONT]; /* freed at the end, wherever it moved */
    /* argv[first..] is the program's argv. */
    size_t first = FRONT;
    char *file = path;
    char *argv0 = argv[first];
    int depth = 0;
    for (;;) {
        int kind = argv0 == NULL ? 0 : exec_kind(file, line[depth]);
        if (kind == 0) {
            goto out;
        }
        if (kind == 1) {
            break;
        }
        char *interp, *arg;
        if (depth == MAX_SCRIPT_DEPTH || !parse_shebang(line[depth], &interp, &arg)) {
            goto out;
        }
        /* argv becomes: interp [arg] file argv[1..] */
        argv[first] = file;
        if (arg != NULL) {
            argv[--first] = arg;
        }
        argv[--first] = interp;
        argv0 = interp;
        file = interp;
        depth++;
    }
    /* The strings the kernel copies to the new stack: the file name, the
     * arguments, the environment (binfmt_script's rewriting is approximated
     * by the rewritten argv). */
    uint64_t strings = strlen(file) + 1;
    for (size_t i = first; argv[i] != NULL; i++) {
        strings += strlen(argv[i]) + 1;
    }
    /* The placement library's LD_PRELOAD is the capture's: not counted,
     * and given to the new QEMU's guest (-E), never to QEMU itself. */
    int preloaded = 0;
    for (size_t i = 0, j = 0;; i++) {
        if (envp[i] != NULL && preload[0] != 0 && strcmp(envp[i], preload) == 0) {
            free(envp[i]);
            preloaded = 1;
            continue;
        }
        envp[j++] = envp[i];
        if (envp[i] == NULL) {
            break;
        }
        strings += strlen(envp[i]) + 1;
    }
    uint64_t seq = __atomic_fetch_add(&hdr->next_exec, 1, __ATOMIC_RELAXED);
    char log[4200];
    int len = snprintf(spec, sizeof spec, "%s,fd=%d,mem=%d,exec=%llu,strings=%llu", plugin_file,
                       out_fd, mem_fd, (unsigned long long)seq, (unsigned long long)strings);
    if (page_log[0] != 0) {
        len += snprintf(spec + len, sizeof spec - (size_t)len, ",pagelog=%s", page_log);
        snprintf(log, sizeof log, "%s/exec-%llu.log", page_log, (unsigned long long)seq);
    }
    if (preloaded && place_fd >= 0) {
        snprintf(spec + len, sizeof spec - (size_t)len, ",place=%d,preload=%s", place_fd,
                 preload + strlen("LD_PRELOAD="));
    }
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        goto out;
    }
    exe[n] = 0;
    /* argv[first] is argv0's slot: QEMU takes argv[0] from -0, the rest
     * after FILE. With page logs on, the new image's goes to
     * DIR/exec-SEQ.log, SEQ being the number its EXEC record carries. */
    int front = 5 + (page_log[0] != 0 ? 4 : 0) + (preloaded ? 2 : 0);
    char **q = argv + first - front;
    q[0] = exe, q[1] = "-plugin", q[2] = spec;
    if (page_log[0] != 0) {
        q[3] = "-d", q[4] = "page", q[5] = "-D", q[6] = log;
        q += 4;
    }
    if (preloaded) {
        q[3] = "-E", q[4] = preload;
        q += 2;
    }
    q[3] = "-0", q[4] = argv0, q[5] = file;
    q = argv + first - front;
    /* The new QEMU inherits the output and the arena; a failed execve
     * leaves this one as it was. */
    fcntl(out_fd, F_SETFD, 0);
    fcntl(mem_fd, F_SETFD, 0);
    if (place_fd >= 0) {
        fcntl(place_fd, F_SETFD, 0);
    }
    execve(exe, q, envp);
    int err = errno;
    fcntl(out_fd, F_SETFD, FD_CLOEXEC);
    fcntl(mem_fd, F_SETFD, FD_CLOEXEC);
    if (place_fd >= 0) {
        fcntl(place_fd, F_SETFD, FD_CLOEXEC);
    }
    complain_exec(exe, err);
out:
    if (argv != NULL) {
        argv[FRONT] = orig0;
    }
    free(path);
    free_vec(argv, FRONT);
    free_vec(envp, 0);
}

/* ---- system calls ---- */

static int is_fork_like(int64_t num)
{
    return num == NR_CLONE || num == NR_CLONE3 || num == NR_FORK || num == NR_VFORK;
}

/* The clone flags a fork-like call asks for, read at its entry, before
 * QEMU runs a vfork as a plain fork (its do_fork clears CLONE_VFORK and
 * CLONE_VM in a copy; the guest's registers and struct keep them):
 * fork none, vfork CLONE_VM | CLONE_VFORK (kernel/fork.c's sys_vfork),
 * clone its first argument without the exit signal, clone3 the first
 * field of its struct clone_args. */
static uint64_t clone_flags(int64_t num, uint64_t a1)
{
    uint64_t f = 0;
    switch (num) {
    case NR_VFORK:
        return CLONE_VM_FLAG | CLONE_VFORK_FLAG;
    case NR_CLONE:
        return a1 & ~CSIGNAL_MASK;
    case NR_CLONE3:
        return guest_read(a1, &f, sizeof f) == sizeof f ? f : 0;
    default:
        return 0;
    }
}

/* Where a fork-like call asks the kernel to write the child's tid in the child's memory
 * (CLONE_CHILD_SETTID: glibc's fork passes its thread's tid field), or 0. */
static uint64_t child_tid(int64_t num, uint64_t a1, uint64_t a4)
{
    uint64_t args[3] = {0, 0, 0}; /* struct clone_args: flags, pidfd, child_tid */
    switch (num) {
    case NR_CLONE:
        return (a1 & CLONE_CHILD_SETTID_FLAG) ? a4 : 0;
    case NR_CLONE3:
        if (guest_read(a1, args, sizeof args) != sizeof args) {
            return 0;
        }
        return (args[0] & CLONE_CHILD_SETTID_FLAG) ? args[2] : 0;
    default:
        return 0;
    }
}

/* A placement question from pagelab's library in the guest: `req_p` points
 * to its struct place_req (hint, length, protection, flags, descriptor,
 * offset, answer). The PLACE record goes to pagelab with everything before
 * it; pagelab's relocation answers with the address Linux's layout gives the
 * request (0: none), which goes into the struct's answer. Questions are
 * asked one at a time across the capture's processes, which share the
 * answer pipe. The mmap that follows with the answer as its hint is
 * recorded with the program's own hint. */
static void place(struct tstate *t, uint64_t req_p)
{
    t->placed = 0;
    uint64_t r[6];
    if (place_fd < 0 || dead || guest_read(req_p, r, sizeof r) != sizeof r) {
        return;
    }
    uint64_t dev = 0, ino = 0;
    struct stat st;
    if (!(r[3] & MAP_ANON_FLAG) && (int)r[4] >= 0 && fstat((int)r[4], &st) == 0) {
        dev = (uint64_t)st.st_dev;
        ino = (uint64_t)st.st_ino;
    }
    if (pthread_mutex_lock(&hdr->place_lock) == EOWNERDEAD) {
        pthread_mutex_consistent(&hdr->place_lock);
    }
    reserve(t, 8);
    *t->b.pos++ = EXT(X_PLACE, 7, 0);
    *t->b.pos++ = r[0], *t->b.pos++ = r[1], *t->b.pos++ = r[2], *t->b.pos++ = r[3];
    *t->b.pos++ = r[5], *t->b.pos++ = dev, *t->b.pos++ = ino;
    flush_thread(t);
    uint64_t answer = 0;
    size_t got = 0;
    while (got < sizeof answer && !dead) {
        ssize_t n = read(place_fd, (char *)&answer + got, sizeof answer - got);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            /* pagelab stopped answering: ask no more */
            place_fd = -1;
            answer = 0;
            break;
        }
        got += (size_t)n;
    }
    pthread_mutex_unlock(&hdr->place_lock);
    if (answer == 0) {
        return;
    }
    struct iovec local = {&answer, sizeof answer};
    struct iovec remote = {(void *)(uintptr_t)(req_p + 6 * 8), sizeof answer};
    if (process_vm_writev(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)sizeof answer) {
        t->placed = answer;
        t->placed_hint = r[0];
    }
}

/* What the vector system calls write, read from guest memory at their return with
 * process_vm_readv (see guest_read): an unreadable pointer records nothing more, never
 * crashes the guest. */
#define IOV_MAX_NUM 1024 /* UIO_MAXIOV: the kernel refuses more iovecs */
#define MSGHDR_BYTES 56  /* struct msghdr on x86-64 */
#define MSG_NAMELEN_AT 8
#define MAX_EXTRA (5 + 2 * IOV_MAX_NUM)

/* Whether a call's record carries words read from guest memory (extra_words). */
static int is_vector(int64_t num)
{
    switch (num) {
    case NR_READV: case NR_PREADV: case NR_PREADV2: case NR_RECVFROM: case NR_RECVMSG:
    case NR_ACCEPT: case NR_ACCEPT4: case NR_GETSOCKNAME: case NR_GETPEERNAME:
        return 1;
    default:
        return 0;
    }
}

/* The iovecs at `iov` (at most `cnt`, and IOV_MAX) that `ret` bytes reach, as (base,
 * length) word pairs at `dst` (struct iovec's own layout); the words written, 0 when the
 * array cannot be read whole. */
static size_t put_iovecs(uint64_t *dst, uint64_t iov, uint64_t cnt, uint64_t ret)
{
    if (cnt > IOV_MAX_NUM) {
        cnt = IOV_MAX_NUM;
    }
    size_t bytes = (size_t)cnt * 16;
    if (ret == 0 || cnt == 0 || guest_read(iov, dst, bytes) != bytes) {
        return 0;
    }
    uint64_t left = ret;
    size_t k = 0;
    while (k < cnt && left > 0) {
        uint64_t len = dst[2 * k + 1];
        left -= len < left ? len : left;
        k++;
    }
    return 2 * k;
}

/* The words a vector call's SYSCALL record carries after its arguments, written at
 * `dst` (room for MAX_EXTRA); how many. readv, preadv, preadv2: the iovecs the result
 * reaches. recvfrom with a source address, accept, accept4, getsockname and getpeername
 * with an address: *addrlen before and after the call.
 * recvmsg: msg_name, msg_namelen before and after, msg_control, msg_controllen after,
 * then the iovecs the result reaches. */
static size_t extra_words(struct tstate *t, int64_t num, uint64_t ret, uint64_t *dst)
{
    uint64_t *a = t->sc_args;
    switch (num) {
    case NR_READV: case NR_PREADV: case NR_PREADV2:
        return put_iovecs(dst, a[1], a[2], ret);
    case NR_RECVFROM: case NR_ACCEPT: case NR_ACCEPT4: case NR_GETSOCKNAME:
    case NR_GETPEERNAME: {
        uint32_t after = 0;
        uint64_t addr = num == NR_RECVFROM ? a[4] : a[1];
        uint64_t len_at = num == NR_RECVFROM ? a[5] : a[2];
        if (addr == 0 || !t->sc_len_ok ||
            guest_read(len_at, &after, sizeof after) != sizeof after) {
            return 0;
        }
        dst[0] = t->sc_len_in;
        dst[1] = after;
        return 2;
    }
    case NR_RECVMSG: {
        uint64_t m[MSGHDR_BYTES / 8];
        if (guest_read(a[1], m, sizeof m) != sizeof m) {
            return 0;
        }
        dst[0] = m[0];                       /* msg_name */
        dst[1] = t->sc_len_ok ? t->sc_len_in : 0;
        dst[2] = (uint32_t)m[1];             /* msg_namelen, as the call left it */
        dst[3] = m[4];                       /* msg_control */
        dst[4] = m[5];                       /* msg_controllen, as the call left it */
        return 5 + put_iovecs(dst + 5, m[2], m[3], ret);
    }
    default:
        return 0;
    }
}

static void on_syscall(qemu_plugin_id_t id, unsigned int vcpu, int64_t num, uint64_t a1,
                       uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5, uint64_t a6,
                       uint64_t a7, uint64_t a8)
{
    (void)id, (void)vcpu, (void)a7, (void)a8;
    struct tstate *t = me();
    switch (num) {
    case PLACE_NR:
        place(t, a1);
        return;
    case NR_MMAP: case NR_MUNMAP: case NR_MREMAP: case NR_MPROTECT: case NR_MADVISE:
    case NR_BRK: case NR_CLONE: case NR_CLONE3: case NR_FORK: case NR_VFORK:
    case NR_READ: case NR_PREAD64: case NR_READLINK: case NR_GETDENTS64:
    case NR_READLINKAT: case NR_GETRANDOM: case NR_RSEQ: case NR_WAIT4: case NR_WAITID:
    case NR_STAT: case NR_FSTAT: case NR_LSTAT: case NR_NEWFSTATAT: case NR_STATX:
    case NR_STATFS: case NR_FSTATFS: case NR_UNAME: case NR_PIPE: case NR_PIPE2:
    case NR_SOCKETPAIR: case NR_RT_SIGACTION: case NR_RT_SIGPROCMASK:
    case NR_CLOCK_GETTIME: case NR_CLOCK_GETRES: case NR_GETTIMEOFDAY: case NR_SYSINFO:
    case NR_GETRLIMIT: case NR_GETRUSAGE: case NR_TIMES: case NR_PRLIMIT64:
    case NR_GETCWD: case NR_SCHED_GETAFFINITY: case NR_TIME: case NR_GETRESUID:
    case NR_GETRESGID: case NR_GETGROUPS: case NR_SIGALTSTACK: case NR_GETITIMER:
    case NR_READV: case NR_PREADV: case NR_PREADV2: case NR_RECVFROM: case NR_RECVMSG:
    case NR_ACCEPT: case NR_ACCEPT4: case NR_GETSOCKNAME: case NR_GETPEERNAME:
    case NR_EPOLL_WAIT: case NR_EPOLL_PWAIT: case NR_EPOLL_PWAIT2:
        t->sc_num = num;
        t->sc_len_ok = 0;
        if (is_vector(num) && num != NR_READV && num != NR_PREADV && num != NR_PREADV2) {
            /* The caller's address length, which bounds what the kernel copies: the
             * call writes the address's own length over it. */
            uint32_t len = 0;
            uint64_t at = num == NR_RECVFROM  ? a6
                          : num == NR_RECVMSG ? a2 + MSG_NAMELEN_AT
                                              : a3;
            t->sc_len_ok = at != 0 && guest_read(at, &len, sizeof len) == sizeof len;
            t->sc_len_in = len;
        }
        t->sc_args[0] = a1, t->sc_args[1] = a2, t->sc_args[2] = a3;
        t->sc_args[3] = a4, t->sc_args[4] = a5, t->sc_args[5] = a6;
        if (num == NR_MMAP && t->placed != 0) {
            /* The hint the placement library added is the capture's, not the program's. */
            if (a1 == t->placed) {
                t->sc_args[0] = t->placed_hint;
            }
            t->placed = 0;
        }
        if (is_fork_like(num)) {
            t->sc_clone = clone_flags(num, a1);
            t->sc_child_tid = child_tid(num, a1, a4);
            flush_thread(t);
        }
        return;
    case NR_EXECVE: case NR_EXECVEAT:
        /* A successful exec ends this image: give the slots back (a failed
         * one finds new ones on its next record). */
        flush_thread(t);
        pthread_mutex_lock(&reg_lock);
        buf_put(&defs);
        pthread_mutex_unlock(&reg_lock);
        thread_free(t);
        if (num == NR_EXECVE) {
            follow_exec(a1, a2, a3);
        } else if ((int)a1 == AT_FDCWD_NUM && (a5 & ~(uint64_t)AT_SYMLINK_NOFOLLOW_FLAG) == 0) {
            follow_exec(a2, a3, a4);
        }
        return;
    case NR_EXIT: case NR_EXIT_GROUP: {
        pthread_mutex_lock(&reg_lock);
        int last = registry.next == t && t->next == &registry;
        pthread_mutex_unlock(&reg_lock);
        /* The last thread's exit ends the process: record it as exit_group. */
        int64_t rec = (num == NR_EXIT && last) ? NR_EXIT_GROUP : num;
        reserve(t, 8);
        *t->b.pos++ = EXT(X_SYSCALL, 7, (uint64_t)rec);
        *t->b.pos++ = 0;
        *t->b.pos++ = a1, *t->b.pos++ = a2, *t->b.pos++ = a3;
        *t->b.pos++ = a4, *t->b.pos++ = a5, *t->b.pos++ = a6;
        flush_thread(t);
        if (num == NR_EXIT && !last) {
            thread_free(t);
        }
        return;
    }
    default:
        return;
    }
}

static void on_syscall_ret(qemu_plugin_id_t id, unsigned int vcpu, int64_t num, int64_t ret)
{
    (void)id, (void)vcpu;
    struct tstate *t = me();
    if (t->sc_num != num) {
        return;
    }
    t->sc_num = -1;
    if (is_fork_like(num)) {
        if (ret <= 0) {
            return; /* the child (its set-up is in on_fork_child) or an error */
        }
        int process = num == NR_FORK || num == NR_VFORK;
        if (num == NR_CLONE) {
            uint64_t f = t->sc_args[0];
            /* QEMU runs vfork-style clones as fork, and CLONE_VM ones as threads. */
            process = !(f & CLONE_VM_FLAG) || (f & CLONE_VFORK_FLAG);
        } else if (num == NR_CLONE3) {
            char path[64];
            snprintf(path, sizeof path, "/proc/self/task/%lld", (long long)ret);
            process = access(path, F_OK) != 0;
        }
        if (process) {
            reserve(t, 2);
            *t->b.pos++ = EXT(X_FORK, 1, (uint64_t)ret);
            *t->b.pos++ = t->sc_clone;
            flush_thread(t); /* so that it precedes the child's first block */
        }
        return;
    }
    if (ret < 0 && ret > -4096 && num != NR_BRK && num != NR_RSEQ) {
        return; /* failed: the address space did not change */
    }
    uint64_t dev = 0, ino = 0;
    int file = num == NR_MMAP && !(t->sc_args[3] & MAP_ANON_FLAG) && (int)t->sc_args[4] >= 0;
    if (file) {
        struct stat st;
        if (fstat((int)t->sc_args[4], &st) == 0) {
            dev = (uint64_t)st.st_dev;
            ino = (uint64_t)st.st_ino;
        } else {
            file = 0;
        }
    }
    size_t n = file ? 9 : 7;
    int vector = is_vector(num);
    reserve(t, n + 1 + (vector ? MAX_EXTRA : 0));
    uint64_t *head = t->b.pos++;
    *t->b.pos++ = (uint64_t)ret;
    for (int i = 0; i < 6; i++) {
        *t->b.pos++ = t->sc_args[i];
    }
    if (file) {
        *t->b.pos++ = dev;
        *t->b.pos++ = ino;
    }
    if (vector) {
        size_t extra = extra_words(t, num, (uint64_t)ret, t->b.pos);
        t->b.pos += extra;
        n += extra;
    }
    *head = EXT(X_SYSCALL, n, (uint64_t)num);
    if (t->b.pos == t->b.end) {
        flush_thread(t);
    }
}

/* ---- fork and exit ---- */

static void on_fork_prepare(void)
{
    pthread_mutex_lock(&reg_lock);
    struct tstate *t = tls;
    if (t != NULL) {
        flush_defs_locked(t->pid, t->tid);
    } else {
        flush_defs_locked((uint32_t)getpid(), (uint32_t)syscall(SYS_gettid));
    }
}

static void on_fork_parent(void)
{
    pthread_mutex_unlock(&reg_lock);
}

static void on_fork_child(void)
{
    /* Only the forking thread survives. The slots are shared with the parent,
     * which goes on using them: forget the others' without touching them, and
     * take new ones. */
    struct tstate *self = tls;
    struct tstate *t = registry.next;
    while (t != &registry) {
        struct tstate *next = t->next;
        if (t != self) {
            if (!t->b.in_arena) {
                free(t->b.slot);
            }
            free(t);
        }
        t = next;
    }
    registry.next = registry.prev = &registry;
    if (!defs.in_arena) {
        free(defs.slot);
    }
    defs.slot = NULL;
    if (self != NULL) {
        self->next = self->prev = &registry;
        registry.next = registry.prev = self;
    }
    pthread_mutex_unlock(&reg_lock);
    if (self == NULL) {
        return;
    }
    uint64_t parent = (uint64_t)self->pid | ((uint64_t)self->tid << 32);
    self->pid = (uint32_t)getpid();
    self->tid = (uint32_t)syscall(SYS_gettid);
    if (!self->b.in_arena) {
        free(self->b.slot);
    }
    buf_get(&self->b, SLOT_THREAD, self->pid, self->tid);
    /* The fork-like call is in progress: its flags are the parent's copy's. QEMU
     * writes the child's tid itself (CLONE_CHILD_SETTID), unseen by the plugin, as the
     * kernel does in the child's first return to user (schedule_tail). */
    *self->b.pos++ = EXT(X_CHILD, 3, 0);
    *self->b.pos++ = parent;
    *self->b.pos++ = self->sc_clone;
    *self->b.pos++ = self->sc_child_tid;
}

static void on_exit_all(qemu_plugin_id_t id, void *ud)
{
    (void)id, (void)ud;
    /* QEMU stops the other vCPUs before the at-exit callbacks. */
    struct tstate *t;
    for (t = registry.next; t != &registry; t = t->next) {
        flush_thread(t);
        buf_put(&t->b);
    }
    pthread_mutex_lock(&reg_lock);
    flush_defs_locked((uint32_t)getpid(), (uint32_t)syscall(SYS_gettid));
    buf_put(&defs);
    pthread_mutex_unlock(&reg_lock);
}

/* ---- installation ---- */

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                           int argc, char **argv)
{
    int exec = 0;
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "fd=", 3) == 0) {
            out_fd = atoi(argv[i] + 3);
        } else if (strncmp(argv[i], "mem=", 4) == 0) {
            mem_fd = atoi(argv[i] + 4);
        } else if (strncmp(argv[i], "exec=", 5) == 0) {
            exec_pending = strtoull(argv[i] + 5, NULL, 10);
            exec = 1;
        } else if (strncmp(argv[i], "strings=", 8) == 0) {
            exec_strings = strtoull(argv[i] + 8, NULL, 10);
        } else if (strncmp(argv[i], "pagelog=", 8) == 0 &&
                   strlen(argv[i] + 8) < sizeof page_log - 32) {
            strcpy(page_log, argv[i] + 8);
        } else if (strncmp(argv[i], "place=", 6) == 0) {
            place_fd = atoi(argv[i] + 6);
        } else if (strncmp(argv[i], "preload=", 8) == 0 &&
                   strlen(argv[i] + 8) < sizeof preload - 16) {
            snprintf(preload, sizeof preload, "LD_PRELOAD=%s", argv[i] + 8);
        } else {
            fprintf(stderr,
                    "pagelab plugin: unknown argument `%s` (expected fd=N, mem=M, exec=SEQ, "
                    "strings=N, pagelog=DIR, place=N or preload=PATH)\n",
                    argv[i]);
            return -1;
        }
    }
    if (place_fd >= 0 && fcntl(place_fd, F_SETFD, FD_CLOEXEC) != 0) {
        fprintf(stderr, "pagelab plugin: place=%d is not an open descriptor\n", place_fd);
        return -1;
    }
    if (out_fd < 0 || fcntl(out_fd, F_SETFD, FD_CLOEXEC) != 0) {
        fprintf(stderr, "pagelab plugin: give an open output descriptor as fd=N (got %d)\n",
                out_fd);
        return -1;
    }
    if (info->system_emulation || strcmp(info->target_name, "x86_64") != 0) {
        fprintf(stderr, "pagelab plugin: only user-mode x86_64 guests are supported (got %s%s)\n",
                info->target_name, info->system_emulation ? ", system emulation" : "");
        return -1;
    }
    /* The arena: pagelab's memory file, or (without mem=) anonymous shared
     * memory, which a crash loses. */
    size_t bytes = 64 * (size_t)SLOT_BYTES;
    struct stat st;
    if (mem_fd >= 0) {
        if (fstat(mem_fd, &st) != 0 || st.st_size < 2 * SLOT_BYTES ||
            fcntl(mem_fd, F_SETFD, FD_CLOEXEC) != 0) {
            fprintf(stderr, "pagelab plugin: mem=%d is not a memory file of 2 MiB or more\n",
                    mem_fd);
            return -1;
        }
        bytes = (size_t)st.st_size;
    }
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_SHARED | (mem_fd >= 0 ? 0 : MAP_ANONYMOUS), mem_fd, 0);
    if (m == MAP_FAILED) {
        fprintf(stderr, "pagelab plugin: cannot map its buffers: %s\n", strerror(errno));
        return -1;
    }
    arena = m;
    nslots = bytes / SLOT_BYTES;
    hdr = m;
    Dl_info self;
    if (dladdr((void *)qemu_plugin_install, &self) != 0 && self.dli_fname != NULL &&
        strlen(self.dli_fname) < sizeof plugin_file) {
        strcpy(plugin_file, self.dli_fname);
    }
    pthread_atfork(on_fork_prepare, on_fork_parent, on_fork_child);
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb_trans);
    qemu_plugin_register_vcpu_syscall_cb(id, on_syscall);
    qemu_plugin_register_vcpu_syscall_ret_cb(id, on_syscall_ret);
    qemu_plugin_register_atexit_cb(id, on_exit_all, NULL);
    if (exec) {
        /* An exec of a traced process: the arena and its lock are in use. */
        if (mem_fd < 0 || hdr->magic != ARENA_MAGIC) {
            fprintf(stderr, "pagelab plugin: exec=1 needs the capture's arena as mem=M\n");
            return -1;
        }
        if (exec_pending == 0) {
            fprintf(stderr, "pagelab plugin: exec=SEQ needs a number from 1\n");
            return -1;
        }
        return 0;
    }
    hdr->magic = ARENA_MAGIC;
    hdr->next_tb = 1; /* 0 would read as the end of a slot's records */
    hdr->next_exec = 1;
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&hdr->lock, &attr);
    pthread_mutex_init(&hdr->place_lock, &attr);
    return 0;
}
