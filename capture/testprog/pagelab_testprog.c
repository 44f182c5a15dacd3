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
 *   pagelab_testprog kwrites   touch, then map 20 pages whose first touch is the kernel's
 *                              writes: fstat, pipe2, uname, readv, clock_gettime,
 *                              rt_sigaction's old action, recvmsg (data and an
 *                              SCM_RIGHTS control message), epoll_wait, getsockname,
 *                              recvfrom, time, getresuid, sigaltstack, getitimer
 *                              into them (page by page:
 *                              see kwrites()); then load from each page and store into
 *                              it; prints "kwrites region 0xADDR 81920 faults N" (N: the
 *                              minor faults of the stores, natively 0)
 *
 * Nothing else touches the region: its data pages in a trace must be exactly
 * the listed ones.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <signal.h>
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

static void fail(const char *what)
{
    perror(what);
    exit(2);
}

/* The kernel writes first into fresh pages of a region; the program then only loads from
 * them, then stores once into each. System calls are made directly (glibc's wrappers may
 * copy through buffers of their own). Where the kernel writes, by page of the region:
 *   0: struct stat (144 bytes) at 0           fstat
 *   1: two ints at 16                         pipe2
 *   2, 3: struct new_utsname (390) at 2*4096+4000: 96 bytes in page 2, 294 in page 3
 *   4, 5, 6: readv of 3000 bytes into iovecs {4*4096+4000, 200}, {6*4096, 5000}:
 *      96 bytes in page 4, 104 in page 5, 2800 in page 6 (page 7 untouched)
 *   8: struct timespec (16) at 8*4096          clock_gettime
 *   9: the kernel's struct sigaction (32) at 9*4096   rt_sigaction(SIGUSR1)'s old action
 *   10: 100 bytes at 10*4096+8; 11: an SCM_RIGHTS message (24 bytes) at 11*4096   recvmsg
 *   12, 13: one struct epoll_event (12 bytes, packed) at 12*4096+4090: 6 bytes in each
 *      epoll_wait
 *   14: a unix socket's unnamed address (2 bytes, its family) at 14*4096   getsockname
 *   15: 10 bytes at 15*4096, then 8 of the sender's 13-byte abstract address (its family,
 *      a NUL, 10 bytes of name) at 15*4096+2048: recvfrom with an address length of 8
 *   16: a time_t (8) at 16*4096   time
 *   17: three uid_ts (4 each) at 17*4096, +4, +8   getresuid
 *   18: the old stack_t (24) at 18*4096   sigaltstack
 *   19: struct itimerval (32) at 19*4096   getitimer
 */
static void kwrites(void)
{
    size_t len = 20 * PAGE;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        fail("mmap");
    }
    int *fds = (int *)(p + 1 * PAGE + 16);
    if (syscall(SYS_pipe2, fds, 0) != 0) {
        fail("pipe2");
    }
    if (syscall(SYS_fstat, fds[0], p) != 0) {
        fail("fstat");
    }
    if (syscall(SYS_uname, p + 2 * PAGE + 4000) != 0) {
        fail("uname");
    }
    static char data[3000];
    memset(data, 'k', sizeof data);
    if (write(fds[1], data, sizeof data) != (ssize_t)sizeof data) {
        fail("write");
    }
    struct iovec iov[2] = {{p + 4 * PAGE + 4000, 200}, {p + 6 * PAGE, 5000}};
    if (syscall(SYS_readv, fds[0], iov, 2) != (long)sizeof data) {
        fail("readv");
    }
    if (syscall(SYS_clock_gettime, CLOCK_MONOTONIC, p + 8 * PAGE) != 0) {
        fail("clock_gettime");
    }
    if (syscall(SYS_rt_sigaction, SIGUSR1, NULL, p + 9 * PAGE, 8) != 0) {
        fail("rt_sigaction");
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) != 0) {
        fail("socketpair");
    }
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec out = {data, 100};
    struct msghdr m = {.msg_iov = &out, .msg_iovlen = 1, .msg_control = ctl.buf,
                       .msg_controllen = sizeof ctl.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fds[0], sizeof(int));
    if (sendmsg(sv[0], &m, 0) != 100) {
        fail("sendmsg");
    }
    struct iovec in = {p + 10 * PAGE + 8, 100};
    struct msghdr r = {.msg_iov = &in, .msg_iovlen = 1, .msg_control = p + 11 * PAGE,
                       .msg_controllen = 64};
    if (syscall(SYS_recvmsg, sv[1], &r, 0) != 100 || r.msg_controllen != CMSG_SPACE(sizeof(int))) {
        fail("recvmsg");
    }
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLOUT, .data.u64 = 0x6b77726974657321ULL};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fds[1], &ev) != 0) {
        fail("epoll");
    }
    if (syscall(SYS_epoll_wait, ep, p + 12 * PAGE + 4090, 1, 0) != 1) {
        fail("epoll_wait");
    }
    socklen_t alen = 16;
    if (syscall(SYS_getsockname, sv[0], p + 14 * PAGE, &alen) != 0 || alen != 2) {
        fail("getsockname");
    }
    /* An abstract address of 13 bytes; the byte after it is not NUL, or QEMU would take
     * it as part of the name (target_to_host_sockaddr). */
    struct sockaddr_un un;
    memset(&un, 'x', sizeof un);
    un.sun_family = AF_UNIX;
    un.sun_path[0] = 0;
    char name[16];
    snprintf(name, sizeof name, "pk%08u", (unsigned)getpid() % 100000000u);
    memcpy(un.sun_path + 1, name, 10);
    socklen_t unlen = offsetof(struct sockaddr_un, sun_path) + 11;
    int tx = socket(AF_UNIX, SOCK_DGRAM, 0), rx = socket(AF_UNIX, SOCK_DGRAM, 0);
    struct sockaddr_un rxaddr = un;
    rxaddr.sun_path[1] = 'r';
    if (tx < 0 || rx < 0 || bind(tx, (struct sockaddr *)&un, unlen) != 0 ||
        bind(rx, (struct sockaddr *)&rxaddr, unlen) != 0 ||
        sendto(tx, data, 10, 0, (struct sockaddr *)&rxaddr, unlen) != 10) {
        fail("sendto");
    }
    socklen_t fromlen = 8;
    if (syscall(SYS_recvfrom, rx, p + 15 * PAGE, 100, 0, p + 15 * PAGE + 2048, &fromlen) != 10 ||
        fromlen != unlen) {
        fail("recvfrom");
    }
    if (syscall(SYS_time, p + 16 * PAGE) <= 0) {
        fail("time");
    }
    if (syscall(SYS_getresuid, p + 17 * PAGE, p + 17 * PAGE + 4, p + 17 * PAGE + 8) != 0) {
        fail("getresuid");
    }
    if (syscall(SYS_sigaltstack, NULL, p + 18 * PAGE) != 0) {
        fail("sigaltstack");
    }
    if (syscall(SYS_getitimer, ITIMER_REAL, p + 19 * PAGE) != 0) {
        fail("getitimer");
    }
    static const size_t at[] = {0, 1 * PAGE + 16, 2 * PAGE + 4000, 3 * PAGE, 4 * PAGE + 4000,
                                5 * PAGE, 6 * PAGE, 8 * PAGE, 9 * PAGE, 10 * PAGE + 8,
                                11 * PAGE, 12 * PAGE + 4090, 13 * PAGE, 14 * PAGE,
                                15 * PAGE, 16 * PAGE, 17 * PAGE, 18 * PAGE, 19 * PAGE};
    if (memcmp(p + 2 * PAGE + 4000, "Linux", 5) != 0 || p[6 * PAGE + 2799] != 'k') {
        fprintf(stderr, "kwrites: the kernel's writes are not where expected\n");
        exit(2);
    }
    unsigned sum = 0;
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        sum += *(volatile unsigned char *)(p + at[i]);
    }
    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        *(volatile unsigned char *)(p + at[i]) += 1;
    }
    getrusage(RUSAGE_SELF, &after);
    printf("kwrites region %p %zu faults %ld sum %u\n", (void *)p, len,
           after.ru_minflt - before.ru_minflt, sum);
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
    } else if (strcmp(mode, "kwrites") == 0) {
        kwrites();
    } else if (strcmp(mode, "sleep") == 0) {
        spin(argc > 2 ? atof(argv[2]) : 10);
    }
    return 0;
}
