// Where the kernel puts a heap's frames: the 2M blocks they fall in, the share of 4K pages
// whose frame is right above the page before's, and the share of 64K pieces right above
// the piece before (pagemap: run as root). With a second argument the heap is advised
// MADV_NOHUGEPAGE (4K pages); without, it takes whatever the THP knobs give.
//
//   folios HEAP_MB [4k]
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define BLOCK (2UL << 20)
#define PFN(e) ((e) & ((1ULL << 55) - 1))

static int by_value(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: folios HEAP_MB [4k]\n");
        return 2;
    }
    size_t mb = atol(argv[1]), n = mb * 256, len = mb << 20;
    char *p = mmap(0, len + BLOCK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    p = (char *)(((uintptr_t)p + BLOCK - 1) & ~(uintptr_t)(BLOCK - 1));
    if (argc > 2)
        madvise(p, len, MADV_NOHUGEPAGE);
    for (size_t i = 0; i < len; i += 4096)
        p[i] = 1;
    uint64_t *f = malloc(n * sizeof *f), *blocks = malloc(n * sizeof *blocks);
    int fd = open("/proc/self/pagemap", O_RDONLY);
    if (fd < 0 || pread(fd, f, n * 8, (uintptr_t)p / 4096 * 8) != (ssize_t)(n * 8)) {
        perror("pagemap");
        return 1;
    }
    size_t above = 0, pieces_above = 0, pieces = 0;
    for (size_t i = 0; i < n; i++) {
        blocks[i] = PFN(f[i]) >> 9;
        if (i > 0 && PFN(f[i]) == PFN(f[i - 1]) + 1)
            above++;
        if (i >= 16 && i % 16 == 0) {
            pieces++;
            pieces_above += PFN(f[i]) == PFN(f[i - 16]) + 16;
        }
    }
    qsort(blocks, n, sizeof *blocks, by_value);
    size_t distinct = 0;
    for (size_t i = 0; i < n; i++)
        distinct += i == 0 || blocks[i] != blocks[i - 1];
    printf("%zuM: %zu blocks, pages right above the last %.3f, 64K pieces right above the last %.3f\n",
           mb, distinct, (double)above / (n - 1), (double)pieces_above / pieces);
    return 0;
}
