/*
 * The shim's test program: gets memory one way and touches every 4K of it.
 *
 *   pagelab_shim_testprog mmap SIZE    one anonymous private mmap of SIZE
 *   pagelab_shim_testprog sbrk SIZE    grow the heap by SIZE with sbrk
 *   pagelab_shim_testprog malloc SIZE  malloc(SIZE) (glibc: its own mmap, not the shim's)
 *   pagelab_shim_testprog mremap SIZE  mmap 64K, then grow it to SIZE with mremap
 *
 * then prints "ADDR SIZE" and exits 0 after unmapping what it mapped.
 * SIZE is bytes with an optional K or M suffix.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static size_t size_arg(const char *s)
{
    char *end;
    size_t v = strtoull(s, &end, 10);
    if (*end == 'K' || *end == 'k') {
        v <<= 10;
    } else if (*end == 'M' || *end == 'm') {
        v <<= 20;
    }
    return v;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s mmap|sbrk|malloc|mremap SIZE\n", argv[0]);
        return 2;
    }
    size_t len = size_arg(argv[2]);
    char *p;
    if (strcmp(argv[1], "mmap") == 0) {
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    } else if (strcmp(argv[1], "sbrk") == 0) {
        p = sbrk((intptr_t)len);
    } else if (strcmp(argv[1], "malloc") == 0) {
        p = malloc(len);
    } else if (strcmp(argv[1], "mremap") == 0) {
        p = mmap(NULL, 64 << 10, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) {
            p = mremap(p, 64 << 10, len, MREMAP_MAYMOVE);
        }
    } else {
        fprintf(stderr, "unknown mode %s\n", argv[1]);
        return 2;
    }
    if (p == MAP_FAILED || p == NULL) {
        perror(argv[1]);
        return 1;
    }
    for (size_t off = 0; off < len; off += 4096) {
        ((volatile char *)p)[off] = 1;
    }
    printf("%p %zu\n", (void *)p, len);
    fflush(stdout);
    if (strcmp(argv[1], "mmap") == 0 || strcmp(argv[1], "mremap") == 0) {
        if (munmap(p, len) != 0) {
            perror("munmap");
            return 1;
        }
    }
    return 0;
}
