/*
 * pagelab's exec layout test program: prints the program break and the
 * address space the kernel gave it at exec, before it maps anything of its
 * own (no stdio, no malloc), so that a test can hold pagelab's model of
 * binfmt_elf's placement to the kernel. Run it under `setarch -R`.
 *
 *   brk ADDRESS
 *   then /proc/self/maps as the kernel writes it
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

static char text[1 << 16];

int main(void)
{
    int n = snprintf(text, sizeof text, "brk %lx\n", (unsigned long)sbrk(0));
    if (write(1, text, (size_t)n) != n) {
        return 1;
    }
    int fd = open("/proc/self/maps", O_RDONLY);
    ssize_t r;
    while (fd >= 0 && (r = read(fd, text, sizeof text)) > 0) {
        if (write(1, text, (size_t)r) != r) {
            return 1;
        }
    }
    return fd >= 0 ? 0 : 1;
}
