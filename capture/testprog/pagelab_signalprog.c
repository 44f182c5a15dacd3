/*
 * pagelab_signalprog N: call getppid and write a byte to /dev/null in a loop while a
 * timer sends SIGALRM every 200 us, until N signals have come; print "signalprog alarms
 * A calls M" (A at least N: more can come after the loop's last check) and exit with the
 * timer still running, so that signals also come while the C library prints and exits.
 *
 * A capture test program (crates/capture/tests/signals.rs). QEMU 7.2 can leave an
 * instruction's memory callbacks armed after its block has ended (QEMU issue 1381, fixed
 * in 8.0), so QEMU's own stores of a signal frame and loads of segment descriptors, when
 * it delivers a signal after a later block has begun, arrive as that old instruction's.
 * Before the plugin checked the block, this program's capture failed in 6 runs of 6 with
 * "memory access by instruction 7 of a block of 2" or the like (an index in the old
 * block, past the end of the one executing), and where the index fitted, the access was
 * silently pinned on an instruction that never made it. Now such accesses are dropped.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static volatile long alarms;

static void on_alarm(int sig)
{
    (void)sig;
    alarms++;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 300;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    int fd = open("/dev/null", O_WRONLY);
    if (fd < 0) {
        perror("/dev/null");
        return 2;
    }
    struct itimerval every = {{0, 200}, {0, 200}};
    setitimer(ITIMER_REAL, &every, NULL);
    long calls = 0;
    while (alarms < n) {
        getppid();
        if (write(fd, "x", 1) == 1) {
            calls++;
        }
    }
    printf("signalprog alarms %ld calls %ld\n", (long)alarms, calls);
    return 0;
}
