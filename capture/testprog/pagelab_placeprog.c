/*
 * The placement test program (crates/capture/tests/placement.rs): maps an
 * anonymous region of each size given after the output file with mmap (no
 * hint, no MAP_FIXED) and writes where each went to the file, one hex
 * address a line. Run natively under `setarch -R` it shows Linux's
 * addresses; under a capture placed at Linux's addresses it must show the
 * same. A successful mmap must leave errno as it was (glibc's does; the
 * placement library's question to pagelab fails with ENOSYS and must not
 * leak it).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s OUT SIZE...\n", argv[0]);
        return 2;
    }
    FILE *out = fopen(argv[1], "w");
    if (out == NULL) {
        perror(argv[1]);
        return 1;
    }
    for (int i = 2; i < argc; i++) {
        size_t len = strtoull(argv[i], NULL, 0);
        errno = 0;
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            perror("mmap");
            return 1;
        }
        if (errno != 0) {
            fprintf(stderr, "a successful mmap of %zu bytes set errno %d\n", len, errno);
            return 1;
        }
        *(volatile char *)p = 1;
        fprintf(out, "%lx\n", (unsigned long)p);
    }
    return fclose(out) == 0 ? 0 : 1;
}
