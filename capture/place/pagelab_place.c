/*
 * pagelab's placement library: preloaded into a program captured under QEMU
 * user mode (qemu -E LD_PRELOAD=...) so that the mappings it asks for land
 * where Linux would put them (docs/layout.md, "A capture at Linux's
 * addresses").
 *
 * QEMU 7.2 places a mapping without MAP_FIXED bottom-up from 0x4000000000,
 * so a program that does something with the address it gets (CPython aligns
 * its pools inside each arena, GCC's collector takes a table per 16M region)
 * behaves under QEMU as it would not natively. A free hint QEMU keeps. Before
 * each mmap without MAP_FIXED this library asks pagelab, through a system
 * call number no kernel has, which QEMU's plugin sees and answers by writing
 * the address the model's Linux layout gives the request; it then maps with
 * that address as the hint. The plugin records the program's own hint.
 *
 * Natively, or under a QEMU without the plugin, the call fails with ENOSYS,
 * the answer stays 0 and the request goes through unchanged.
 *
 * Only calls that reach `mmap` through the dynamic linker can be seen: glibc's
 * own (malloc's) and ld.so's mmaps are not, and stay where QEMU puts them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Must match PLACE_NR in capture/qemu/pagelab_plugin.c. */
#define PLACE_NR 0x5047

/* Read by the plugin, `answer` written by it. */
struct place_req {
    uint64_t hint, len, prot, flags, fd, offset;
    uint64_t answer;
};

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

__attribute__((visibility("default"))) void *mmap(void *addr, size_t len, int prot, int flags,
                                                  int fd, off_t offset)
{
    if (!(flags & (MAP_FIXED | MAP_FIXED_NOREPLACE))) {
        struct place_req r = {(uint64_t)(uintptr_t)addr, len, (uint64_t)(unsigned)prot,
                              (uint64_t)(unsigned)flags, (uint64_t)(int64_t)fd,
                              (uint64_t)offset, 0};
        /* The call fails (ENOSYS natively, and under QEMU, whose plugin answers
         * it only through r.answer): a program must not see that errno after
         * an mmap that succeeded, so it is saved and put back. */
        int saved = errno;
        (void)syscall(PLACE_NR, &r);
        errno = saved;
        if (r.answer != 0) {
            addr = (void *)(uintptr_t)r.answer;
        }
    }
    long ret = syscall(SYS_mmap, addr, len, prot, flags, fd, offset);
    return ret == -1 ? MAP_FAILED : (void *)ret;
}

/* glibc's mmap64 is mmap on 64-bit targets; programs may link either. */
__attribute__((visibility("default"))) void *mmap64(void *addr, size_t len, int prot, int flags,
                                                    int fd, off_t offset)
{
    return mmap(addr, len, prot, flags, fd, offset);
}
