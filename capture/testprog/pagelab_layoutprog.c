/*
 * pagelab's layout test program: maps regions of many sizes, flags and hints
 * natively and prints where the kernel put each, so that a test can hold
 * pagelab's model of Linux's mmap placement to the kernel itself. Run it
 * under `setarch -R` (no randomisation). Output, one line each:
 *
 *   rlimit_stack BYTES|inf
 *   mmap_min_addr BYTES
 *   vma START END GROWSDOWN        the address space before the first request
 *   map HINT LEN PROT FLAGS FILE OFFSET -> RESULT   (RESULT -errno on failure)
 *   unmap START LEN
 *
 * It makes no mapping of its own between requests: output goes to a static
 * buffer written at the end, /proc files are read with read(2).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

static char out[1 << 16];
static size_t used;
static char text[1 << 16];

static void emit(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out + used, sizeof out - used, fmt, ap);
    va_end(ap);
    if (n > 0 && (size_t)n < sizeof out - used) {
        used += (size_t)n;
    }
}

static size_t slurp(const char *path)
{
    int fd = open(path, O_RDONLY);
    size_t n = 0;
    ssize_t r;
    while (fd >= 0 && n < sizeof text - 1 && (r = read(fd, text + n, sizeof text - 1 - n)) > 0) {
        n += (size_t)r;
    }
    if (fd >= 0) {
        close(fd);
    }
    text[n] = 0;
    return n;
}

#define K 1024UL
#define M (1024 * K)
#define G (1024 * M)
#define ANON (MAP_PRIVATE | MAP_ANONYMOUS)

struct req {
    uintptr_t hint;
    size_t len;
    int prot, flags, file;
    off_t offset;
    int unmap; /* >0: unmap the result of request number `unmap` (1-based) instead */
};

static const struct req reqs[] = {
    {0, 4 * K, PROT_READ | PROT_WRITE, ANON, 0, 0, 0},
    {0, 64 * K, PROT_READ | PROT_WRITE, ANON, 0, 0, 0},
    {0, 1 * M, PROT_READ | PROT_WRITE, ANON, 0, 0, 0},
    {0, 2 * M, PROT_READ | PROT_WRITE, ANON, 0, 0, 0},
    {0, 2 * M + 4 * K, PROT_READ | PROT_WRITE, ANON, 0, 0, 0},
    {0, 4 * M, PROT_READ, ANON, 0, 0, 0},
    {0, 6 * M, PROT_READ | PROT_WRITE, ANON, 0, 0, 0},
    {0, 10 * M + 64 * K, PROT_NONE, ANON, 0, 0, 0},
    {0, 0, 0, 0, 0, 0, 3},
    {0, 512 * K, PROT_READ | PROT_WRITE, ANON, 0, 0, 0},
    {0, 12 * K + 5, PROT_READ | PROT_WRITE, ANON, 0, 0, 0},
    {0x600000000000, 4 * K, PROT_READ | PROT_WRITE, ANON, 0, 0, 0},
    {0x600000000000, 4 * K, PROT_READ | PROT_WRITE, ANON, 0, 0, 0},
    {0x600000200123, 8 * K, PROT_READ | PROT_WRITE, ANON, 0, 0, 0},
    {0x600000400000, 2 * M, PROT_READ | PROT_WRITE, ANON, 0, 0, 0},
    {0x600000801000, 2 * M, PROT_READ | PROT_WRITE, ANON, 0, 0, 0},
    {0x600000bff000, 2 * M, PROT_READ | PROT_WRITE, ANON, 0, 0, 0},
    {0x600001000000, 64 * K, PROT_READ, ANON | MAP_FIXED_NOREPLACE, 0, 0, 0},
    {0x600001000000, 4 * K, PROT_READ | PROT_WRITE, ANON | MAP_FIXED, 0, 0, 0},
    {0, 8 * K, PROT_READ, MAP_PRIVATE, 1, 4 * K, 0},
    {0, 16 * K, PROT_READ, MAP_SHARED, 1, 0, 0},
    {0, 1 * G, PROT_NONE, ANON | MAP_NORESERVE, 0, 0, 0},
    {0, 2 * M, PROT_READ | PROT_WRITE, ANON | MAP_STACK, 0, 0, 0},
    {0, 8 * M, PROT_READ | PROT_WRITE, ANON | MAP_NORESERVE, 0, 0, 0},
    {0x1000, 4 * K, PROT_READ, ANON, 0, 0, 0},
    {0x7ffffff00000, 4 * K, PROT_READ, ANON, 0, 0, 0},
    {0x7fffffe00000, 4 * K, PROT_READ, ANON, 0, 0, 0},
    {0, 0, 0, 0, 0, 0, 7},
    {0, 4 * M, PROT_READ | PROT_WRITE, ANON, 0, 0, 0},
    {0, 2 * M, PROT_READ | PROT_WRITE, ANON, 0, 0, 0},
    {0, 3 * M, PROT_READ | PROT_WRITE, ANON, 0, 0, 0},
    /* below a 1M boundary: alignment shows */
    {0, 2 * M, PROT_READ | PROT_WRITE, ANON | MAP_STACK, 0, 0, 0},
    {0, 1 * M, PROT_READ | PROT_WRITE, ANON, 0, 0, 0},
    {0, 2 * M, PROT_READ | PROT_WRITE, ANON | MAP_GROWSDOWN, 0, 0, 0},
    {0, 64 * K, PROT_READ | PROT_WRITE, ANON, 0, 0, 0},
    {0, 2 * M, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, 0, 0, 0},
    {0, 8 * M, PROT_READ | PROT_WRITE, ANON, 0, 0, 0},
};

int main(int argc, char **argv)
{
    int fd = argc > 1 ? open(argv[1], O_RDONLY) : -1;
    if (fd < 0) {
        fprintf(stderr, "usage: %s FILE (a file of 16 KiB or more to map)\n", argv[0]);
        return 2;
    }
    struct rlimit rl;
    getrlimit(RLIMIT_STACK, &rl);
    if (rl.rlim_cur == RLIM_INFINITY) {
        emit("rlimit_stack inf\n");
    } else {
        emit("rlimit_stack %llu\n", (unsigned long long)rl.rlim_cur);
    }
    slurp("/proc/sys/vm/mmap_min_addr");
    emit("mmap_min_addr %s", text);
    slurp("/proc/self/maps");
    for (char *line = text; *line;) {
        char *nl = strchr(line, '\n');
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2) {
            emit("vma %lx %lx %d\n", lo, hi, strstr(line, "[stack]") != NULL && (!nl || strstr(line, "[stack]") < nl));
        }
        if (nl == NULL) {
            break;
        }
        line = nl + 1;
    }
    void *got[sizeof reqs / sizeof reqs[0]];
    for (size_t i = 0; i < sizeof reqs / sizeof reqs[0]; i++) {
        const struct req *r = &reqs[i];
        got[i] = MAP_FAILED;
        if (r->unmap > 0) {
            const struct req *u = &reqs[r->unmap - 1];
            size_t len = (u->len + 4095) & ~4095UL;
            munmap(got[r->unmap - 1], len);
            emit("unmap %lx %lx\n", (unsigned long)(uintptr_t)got[r->unmap - 1], (unsigned long)len);
            continue;
        }
        void *p = mmap((void *)r->hint, r->len, r->prot, r->flags, r->file ? fd : -1, r->offset);
        got[i] = p;
        long res = p == MAP_FAILED ? -(long)errno : (long)(uintptr_t)p;
        emit("map %lx %lx %x %x %d %lx -> %lx\n", (unsigned long)r->hint, (unsigned long)r->len,
             r->prot, r->flags, r->file, (unsigned long)r->offset, (unsigned long)res);
    }
    if (write(1, out, used) != (ssize_t)used) {
        return 1;
    }
    return 0;
}
