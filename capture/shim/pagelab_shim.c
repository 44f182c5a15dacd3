/*
 * pagelab's LD_PRELOAD shim: large pages for programs whose allocator calls
 * mmap, mremap, sbrk or brk itself (glibc's own malloc does not go through
 * these symbols; `pagelab run` sets its `glibc.malloc.hugetlb` tunable
 * instead). This is what Winwood et al.'s (OLS 2002) preloaded sbrk did, with today's
 * kernel interfaces.
 *
 * Environment (read once at load):
 *   PAGELAB_SHIM_ADVISE=1       madvise(MADV_HUGEPAGE) every anonymous private
 *                               mapping of at least PAGELAB_SHIM_MIN bytes, every
 *                               mapping grown by mremap to at least that size,
 *                               and every growth of the heap by sbrk/brk
 *                               (THP in madvise mode only serves advised memory)
 *   PAGELAB_SHIM_MIN=<bytes>    the threshold; 64K when unset (K, M, G suffixes)
 *   PAGELAB_SHIM_HUGETLB=<size> 2M or 1G: map anonymous private mappings of at
 *                               least max(MIN, size) with MAP_HUGETLB and that
 *                               page size, the length rounded up to it; when the
 *                               pool has no free pages, the normal mapping (advised
 *                               with ADVISE=1) is made instead
 *   PAGELAB_SHIM_REPORT=<fd|path>
 *                               at exit, write one line:
 *     pagelab-shim: advised N mappings, B bytes; hugetlb M mappings, H bytes, F fell back;
 *     peak rss K kB; pid P
 *                               (on one line; the peak is the process's own VmHWM, which a
 *                               parent's wait4 cannot give: it also counts the parent's
 *                               address space the child was started from)
 *
 * mmap, mremap and munmap are raw system calls (no libc state to keep in
 * step; async-signal-safe, no allocation); sbrk and brk call the next
 * definition (glibc keeps the current break) and then advise the new range.
 * Counts are atomics; a forked child starts from zero. The report is written
 * by a destructor, so a process ended by a signal or _exit writes none.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

_Static_assert(sizeof(long) == 8, "the shim passes mmap offsets as one register: 64-bit only");

#define EXPORT __attribute__((visibility("default")))

extern char **environ;

static int inited;
static int advise;
static size_t min_bytes = 64 << 10;
static size_t hugetlb_bytes;
static int hugetlb_shift;
static long page_bytes = 4096;

static unsigned long advised_n, advised_b, hugetlb_n, hugetlb_b, fellback_n;

static void *(*next_sbrk)(intptr_t);
static int (*next_brk)(void *);

/* getenv without allocation, usable before libc's own initialisation is done. */
static const char *env(const char *name)
{
    size_t n = strlen(name);
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') {
            return *e + n + 1;
        }
    }
    return NULL;
}

/* "4096", "64K", "2M", "1G" (a trailing B or iB is allowed); 0 when malformed. */
static size_t parse_size(const char *s)
{
    size_t v = 0;
    int digits = 0;
    for (; *s >= '0' && *s <= '9'; s++, digits++) {
        v = v * 10 + (size_t)(*s - '0');
    }
    if (!digits) {
        return 0;
    }
    switch (*s) {
    case 'k': case 'K': v <<= 10; s++; break;
    case 'm': case 'M': v <<= 20; s++; break;
    case 'g': case 'G': v <<= 30; s++; break;
    default: break;
    }
    if (*s == 'i') {
        s++;
    }
    if (*s == 'b' || *s == 'B') {
        s++;
    }
    return *s ? 0 : v;
}

static void init(void)
{
    if (__atomic_load_n(&inited, __ATOMIC_ACQUIRE)) {
        return;
    }
    long ps = sysconf(_SC_PAGESIZE);
    if (ps > 0) {
        page_bytes = ps;
    }
    const char *a = env("PAGELAB_SHIM_ADVISE");
    advise = a && a[0] == '1';
    const char *m = env("PAGELAB_SHIM_MIN");
    if (m && parse_size(m)) {
        min_bytes = parse_size(m);
    }
    const char *h = env("PAGELAB_SHIM_HUGETLB");
    size_t hb = h ? parse_size(h) : 0;
    if (hb && (hb & (hb - 1)) == 0 && hb > (size_t)page_bytes) {
        hugetlb_bytes = hb;
        hugetlb_shift = __builtin_ctzl(hb);
    }
    __atomic_store_n(&inited, 1, __ATOMIC_RELEASE);
}

static void count(unsigned long *n, unsigned long *b, size_t bytes)
{
    __atomic_fetch_add(n, 1, __ATOMIC_RELAXED);
    if (b) {
        __atomic_fetch_add(b, bytes, __ATOMIC_RELAXED);
    }
}

static void advise_range(void *addr, size_t len)
{
    if (syscall(SYS_madvise, addr, len, MADV_HUGEPAGE) == 0) {
        count(&advised_n, &advised_b, len);
    }
}

static int anon_private(int flags)
{
    return (flags & MAP_ANONYMOUS) && (flags & MAP_TYPE) == MAP_PRIVATE && !(flags & MAP_HUGETLB);
}

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    init();
    int saved = errno;
    if (hugetlb_bytes && anon_private(flags) && !(flags & MAP_FIXED) &&
        len >= min_bytes && len >= hugetlb_bytes) {
        size_t rounded = (len + hugetlb_bytes - 1) & ~(hugetlb_bytes - 1);
        int hflags = flags | MAP_HUGETLB | (hugetlb_shift << MAP_HUGE_SHIFT);
        long r = syscall(SYS_mmap, addr, rounded, prot, hflags, fd, off);
        if (r != -1) {
            count(&hugetlb_n, &hugetlb_b, rounded);
            return (void *)r;
        }
        count(&fellback_n, NULL, 0);
        errno = saved;
    }
    long r = syscall(SYS_mmap, addr, len, prot, flags, fd, off);
    if (r != -1 && advise && anon_private(flags) && len >= min_bytes) {
        advise_range((void *)r, len);
        errno = saved;
    }
    return (void *)r;
}

EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return mmap(addr, len, prot, flags, fd, off);
}

EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
    init();
    void *new_addr = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        new_addr = va_arg(ap, void *);
        va_end(ap);
    }
    long r = syscall(SYS_mremap, old, old_len, new_len, flags, new_addr);
    /* mremap does not say whether the mapping is anonymous; the advice only
     * matters to anonymous memory, and a grown mapping the shim already
     * advised keeps its advice anyway (the kernel carries it). */
    if (r != -1 && advise && new_len > old_len && new_len >= min_bytes) {
        int saved = errno;
        advise_range((void *)r, new_len);
        errno = saved;
    }
    return (void *)r;
}

EXPORT int munmap(void *addr, size_t len)
{
    init();
    long r = syscall(SYS_munmap, addr, len);
    /* A hugetlb mapping the shim rounded up cannot be split at the caller's
     * length: unmap to the end of its huge page, which stays inside it. */
    if (r == -1 && errno == EINVAL && hugetlb_bytes &&
        ((uintptr_t)addr & (hugetlb_bytes - 1)) == 0 && len > 0) {
        size_t rounded = (len + hugetlb_bytes - 1) & ~(hugetlb_bytes - 1);
        r = syscall(SYS_munmap, addr, rounded);
    }
    return (int)r;
}

static void resolve_next(void)
{
    if (!next_sbrk) {
        next_sbrk = (void *(*)(intptr_t))dlsym(RTLD_NEXT, "sbrk");
    }
    if (!next_brk) {
        next_brk = (int (*)(void *))dlsym(RTLD_NEXT, "brk");
    }
}

static void advise_heap(uintptr_t from, uintptr_t to)
{
    uintptr_t mask = (uintptr_t)page_bytes - 1;
    uintptr_t start = (from + mask) & ~mask, end = (to + mask) & ~mask;
    if (advise && end > start) {
        int saved = errno;
        advise_range((void *)start, end - start);
        errno = saved;
    }
}

EXPORT void *sbrk(intptr_t increment)
{
    init();
    resolve_next();
    if (!next_sbrk) {
        errno = ENOSYS;
        return (void *)-1;
    }
    void *old = next_sbrk(increment);
    if (old != (void *)-1 && increment > 0) {
        advise_heap((uintptr_t)old, (uintptr_t)old + (uintptr_t)increment);
    }
    return old;
}

EXPORT int brk(void *end)
{
    init();
    resolve_next();
    if (!next_brk || !next_sbrk) {
        errno = ENOSYS;
        return -1;
    }
    uintptr_t before = (uintptr_t)next_sbrk(0);
    int r = next_brk(end);
    if (r == 0 && (uintptr_t)end > before) {
        advise_heap(before, (uintptr_t)end);
    }
    return r;
}

static void child_after_fork(void)
{
    advised_n = advised_b = hugetlb_n = hugetlb_b = fellback_n = 0;
}

__attribute__((constructor)) static void shim_load(void)
{
    init();
    resolve_next();
    pthread_atfork(NULL, NULL, child_after_fork);
}

/* This process's own peak resident set (VmHWM), in kB; 0 when unreadable. */
static unsigned long peak_rss_kb(void)
{
    char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) {
        return 0;
    }
    buf[n] = 0;
    const char *p = strstr(buf, "VmHWM:");
    if (!p) {
        return 0;
    }
    for (p += 6; *p == ' ' || *p == '\t'; p++) {
    }
    unsigned long kb = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        kb = kb * 10 + (unsigned long)(*p - '0');
    }
    return kb;
}

__attribute__((destructor)) static void shim_unload(void)
{
    const char *where = env("PAGELAB_SHIM_REPORT");
    if (!where || !*where) {
        return;
    }
    char line[320];
    int n = snprintf(line, sizeof line,
                     "pagelab-shim: advised %lu mappings, %lu bytes; hugetlb %lu mappings, "
                     "%lu bytes, %lu fell back; peak rss %lu kB; pid %ld\n",
                     advised_n, advised_b, hugetlb_n, hugetlb_b, fellback_n, peak_rss_kb(),
                     (long)getpid());
    if (n <= 0) {
        return;
    }
    int digits = 1;
    for (const char *p = where; *p; p++) {
        digits &= *p >= '0' && *p <= '9';
    }
    int fd = digits ? (int)parse_size(where)
                    : open(where, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) {
        return;
    }
    ssize_t w = write(fd, line, (size_t)n);
    (void)w;
    if (!digits) {
        close(fd);
    }
}
