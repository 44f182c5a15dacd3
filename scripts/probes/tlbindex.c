// Which strides overfill the L2 D-TLB's sets: N pages S pages apart (4K pages, one line of
// each, the offset stepping 64 bytes a page), loaded in turn as independent loads, ns an
// access (the fastest of 7 rounds of about 4 M loads). Where the sets are the page
// number's low bits, S = 2^k puts the pages in 1/2^k of them; an odd S spreads them.
//
//   tlbindex "S1,S2,..." "N1,N2,..."
//
// Session 54 ran "1,64,127,128,129,256" "8,16,24,32,48,64,96,128", then
// "1,8,16,32,17,33" "80,96,128,160,192,256,384,512", then
// "16,32,17,8,1,64" "128,136,144,152,160,68,72,76". Session 55 ran
// "8,16,32,64" "64,72,80,96,112,128,136,144,160,176,192,224,256,272,288,320", then
// "1,256,2,4" "16,24,48,56,64,72,80,96,128,1536,1792,2048,2176,2304,2560".
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

// A comma-separated list of positive numbers into `out` (at most `most`); -1 on anything else.
static int parse(const char *s, long *out, int most) {
    int n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v <= 0 || n == most || (*end && *end != ','))
            return -1;
        out[n++] = v;
        s = *end ? end + 1 : end;
    }
    return n;
}

int main(int argc, char **argv) {
    long strides[16], counts[16];
    int ns = argc > 2 ? parse(argv[1], strides, 16) : -1;
    int nc = argc > 2 ? parse(argv[2], counts, 16) : -1;
    if (ns <= 0 || nc <= 0) {
        fprintf(stderr, "usage: tlbindex \"S1,S2,...\" \"N1,N2,...\"\n");
        return 2;
    }
    long most = 0;
    for (int a = 0; a < nc; a++)
        for (int k = 0; k < ns; k++)
            if (counts[a] * strides[k] > most)
                most = counts[a] * strides[k];
    size_t len = (size_t)most * 4096 + 4096;
    char *p = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    madvise(p, len, MADV_NOHUGEPAGE);
    printf("pages");
    for (int k = 0; k < ns; k++)
        printf("  S=%-4ld", strides[k]);
    printf("\n");
    for (int a = 0; a < nc; a++) {
        long n = counts[a];
        printf("%5ld", n);
        for (int k = 0; k < ns; k++) {
            size_t s = strides[k];
            for (long i = 0; i < n; i++)
                p[i * s * 4096 + (i * 64) % 4096] = 1;
            double best = 1e9;
            volatile uint64_t sink = 0;
            for (int r = 0; r < 7; r++) {
                size_t iters = 4000000 / n;
                double t = now();
                uint64_t sum = 0;
                for (size_t it = 0; it < iters; it++)
                    for (long i = 0; i < n; i++)
                        sum += *(volatile uint64_t *)(p + i * s * 4096 + (i * 64) % 4096);
                t = (now() - t) / (iters * (double)n) * 1e9;
                if (t < best)
                    best = t;
                sink += sum;
            }
            printf("  %6.2f", best);
        }
        printf("\n");
    }
    return 0;
}
