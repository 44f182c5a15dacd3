// The every-page stride over a heap whose frames are laid out on purpose, in ns an access
// (the fastest of 7 rounds of 32 passes; one load a page, the offset stepping 64 bytes a
// page as `pagelab bench`'s stride does). Prints the 2M blocks the heap's frames fell in
// (pagemap: run as root) and its AnonHugePages.
//
//   layout MODE HEAP_MB [POOL_MB]
//
// MODE: thp (2M THP pages: needs THP enabled for madvise), split (the same frames, every
// PMD split to PTEs by a partial mprotect), piece64 and piece4 (64K or 4K pieces moved
// with mremap, in random order, from a pool of POOL_MB of 2M THP pages), mthp64 (64K mTHP
// folios as the kernel hands them out: set hugepages-64kB/enabled to madvise and
// hugepages-2048kB/enabled to never first, and back after).
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MB (1UL << 20)
#define BLOCK (2 * MB)
#define PAGE 4096UL

static char *aligned_map(size_t len) {
    char *p = mmap(0, len + BLOCK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    return (char *)(((uintptr_t)p + BLOCK - 1) & ~(uintptr_t)(BLOCK - 1));
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static uint64_t state = 88172645463325252ULL;
static uint64_t next_random(void) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

static int by_value(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

// Splits every PMD mapping of [p, p + len) to PTEs; the frames stay where they are.
static void split(char *p, size_t len) {
    for (size_t o = 0; o < len; o += BLOCK) {
        mprotect(p + o, PAGE, PROT_READ);
        mprotect(p + o, PAGE, PROT_READ | PROT_WRITE);
    }
}

static void report(char *p, size_t len) {
    size_t n = len / PAGE;
    uint64_t *f = malloc(n * sizeof *f);
    int fd = open("/proc/self/pagemap", O_RDONLY);
    if (fd < 0 || pread(fd, f, n * 8, (uintptr_t)p / PAGE * 8) != (ssize_t)(n * 8)) {
        perror("pagemap");
        exit(1);
    }
    close(fd);
    for (size_t i = 0; i < n; i++)
        f[i] = (f[i] & ((1ULL << 55) - 1)) >> 9;
    qsort(f, n, sizeof *f, by_value);
    size_t blocks = 0;
    for (size_t i = 0; i < n; i++)
        blocks += i == 0 || f[i] != f[i - 1];
    long huge = 0;
    char line[256];
    FILE *s = fopen("/proc/self/smaps_rollup", "r");
    while (s && fgets(line, sizeof line, s))
        if (!strncmp(line, "AnonHugePages:", 14))
            huge = atol(line + 14);
    if (s)
        fclose(s);
    fprintf(stderr, "blocks %zu AnonHugePages %ld kB\n", blocks, huge);
    free(f);
}

static double stride(char *p, size_t len) {
    size_t n = len / PAGE;
    double best = 1e9;
    volatile uint64_t sink = 0;
    for (int r = 0; r < 7; r++) {
        double t = now();
        uint64_t sum = 0;
        for (int pass = 0; pass < 32; pass++) {
            size_t off = 0;
            for (size_t i = 0; i < n; i++) {
                sum += *(volatile uint64_t *)(p + i * PAGE + off);
                off = (off + 64) & (PAGE - 1);
            }
        }
        t = (now() - t) / (32.0 * n) * 1e9;
        if (t < best)
            best = t;
        sink += sum;
    }
    return best;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: layout thp|split|piece64|piece4|mthp64 HEAP_MB [POOL_MB]\n");
        return 2;
    }
    const char *mode = argv[1];
    size_t len = atol(argv[2]) * MB, pool = argc > 3 ? atol(argv[3]) * MB : 0;
    char *p;
    if (!strcmp(mode, "thp") || !strcmp(mode, "split") || !strcmp(mode, "mthp64")) {
        p = aligned_map(len);
        madvise(p, len, MADV_HUGEPAGE);
        memset(p, 1, len);
        if (!strcmp(mode, "split"))
            split(p, len);
    } else if (!strcmp(mode, "piece64") || !strcmp(mode, "piece4")) {
        size_t piece = !strcmp(mode, "piece64") ? 65536 : PAGE;
        if (pool < len) {
            fprintf(stderr, "layout: the pool must hold the heap\n");
            return 2;
        }
        char *q = aligned_map(pool);
        madvise(q, pool, MADV_HUGEPAGE);
        memset(q, 1, pool);
        p = aligned_map(len);
        size_t pieces = pool / piece;
        size_t *order = malloc(pieces * sizeof *order);
        for (size_t i = 0; i < pieces; i++)
            order[i] = i;
        for (size_t i = pieces - 1; i > 0; i--) {
            size_t j = next_random() % (i + 1), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        for (size_t i = 0; i < len / piece; i++)
            if (mremap(q + order[i] * piece, piece, piece, MREMAP_MAYMOVE | MREMAP_FIXED,
                       p + i * piece) == MAP_FAILED) {
                perror("mremap");
                return 1;
            }
    } else {
        fprintf(stderr, "layout: unknown mode %s\n", mode);
        return 2;
    }
    report(p, len);
    printf("%s heap %zuM pool %zuM: %.2f ns/access\n", mode, len / MB, pool / MB, stride(p, len));
    return 0;
}
