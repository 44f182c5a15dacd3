/*
 * pagelab's capture test program: a known access pattern.
 *
 *   pagelab_testprog touch     map 64 pages (anonymous, private, read-write),
 *                              store 8 bytes into pages 0, 1, 5, 17, 63 and
 *                              load 8 bytes from pages 1 and 40, unmap;
 *                              prints "region 0xADDR 262144 pages 0,1,5,17,40,63"
 *   pagelab_testprog exit N    touch, then exit with status N
 *   pagelab_testprog crash     touch, then store through a null pointer
 *   pagelab_testprog fork [sleep S]
 *                              touch, then fork a child that touches the
 *                              same pattern in a region of its own (and both
 *                              spin for S seconds); wait for it
 *   pagelab_testprog threads   touch from two threads, each in its own region
 *   pagelab_testprog closefd   close fd 2 (as daemons do), then touch
 *   pagelab_testprog sleep S   touch, then spin for S seconds (for Ctrl-C tests)
 *   pagelab_testprog rmw N     touch, then map N pages and first touch each
 *                              with one read-modify-write instruction
 *                              (`addl $1, (page)`): natively one write fault
 *                              a page; prints "rmw N pages"
 *
 * Nothing else touches the region: its data pages in a trace must be exactly
 * the listed ones.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096
#define NPAGES 64

static void touch(const char *who)
{
    size_t len = NPAGES * PAGE;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }
    static const int stores[] = {0, 1, 5, 17, 63};
    for (size_t i = 0; i < sizeof stores / sizeof stores[0]; i++) {
        *(volatile uint64_t *)(p + (size_t)stores[i] * PAGE + 64) = 0x5041474542ULL + i;
    }
    uint64_t sum = *(volatile uint64_t *)(p + 1 * PAGE + 64);
    sum += *(volatile uint64_t *)(p + 40 * PAGE + 128);
    if (munmap(p, len) != 0) {
        perror("munmap");
        exit(2);
    }
    printf("%sregion %p %zu pages 0,1,5,17,40,63 sum %llu\n", who, (void *)p, len,
           (unsigned long long)sum);
    fflush(stdout);
}

static void spin(double secs)
{
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    volatile uint64_t spins = 0;
    do {
        for (int i = 0; i < 100000; i++) {
            spins++;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((double)(now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 < secs);
}

/* Each page's first access is `addl $1, (mem)`, one instruction that reads
 * and writes (compiled C would load and store in two instructions, and the
 * first would take a read fault). */
static void rmw(long n)
{
    size_t len = (size_t)n * PAGE;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }
    for (long i = 0; i < n; i++) {
        int *x = (int *)(p + (size_t)i * PAGE);
#if defined(__x86_64__) || defined(__i386__)
        __asm__ volatile("addl $1, %0" : "+m"(*x));
#else
        __atomic_fetch_add(x, 1, __ATOMIC_RELAXED);
#endif
    }
    printf("rmw %ld pages\n", n);
    fflush(stdout);
}

static void *thread_main(void *arg)
{
    (void)arg;
    touch("thread ");
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "touch";
    if (strcmp(mode, "closefd") == 0) {
        close(2);
    }
    touch("");
    if (strcmp(mode, "exit") == 0) {
        return argc > 2 ? atoi(argv[2]) : 0;
    } else if (strcmp(mode, "crash") == 0) {
        *(volatile int *)(uintptr_t)(argc - 2) = 1;
    } else if (strcmp(mode, "fork") == 0) {
        double secs = argc > 3 && strcmp(argv[2], "sleep") == 0 ? atof(argv[3]) : 0;
        pid_t pid = fork();
        if (pid == 0) {
            touch("child ");
            spin(secs);
            _exit(0);
        }
        spin(secs);
        int status;
        waitpid(pid, &status, 0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    } else if (strcmp(mode, "threads") == 0) {
        pthread_t th;
        pthread_create(&th, NULL, thread_main, NULL);
        pthread_join(th, NULL);
    } else if (strcmp(mode, "rmw") == 0) {
        rmw(argc > 2 ? atol(argv[2]) : 1);
    } else if (strcmp(mode, "sleep") == 0) {
        spin(argc > 2 ? atof(argv[2]) : 10);
    }
    return 0;
}
