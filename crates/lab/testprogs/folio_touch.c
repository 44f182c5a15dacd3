/* pagelab's lab test program for the folios mapped at exit (crates/lab/tests/folios.rs).
 *
 * folio_touch N [M]: maps an anonymous region 2M-aligned, writes one byte at the start of
 * N 64K-aligned blocks 128K apart (so no two share a 64K range), then exits. With M, it
 * forks after its N writes; the child writes M more blocks (beyond the parent's) and exits,
 * and the parent waits for it before exiting. Under 64K THP in always mode each write takes
 * one 64K folio, so the processes map N (parent) and N + M (child: the parent's blocks are
 * shared with it) more folios at exit than with N = M = 0.
 *
 * folio_touch cut N: as folio_touch N, then unmaps the last 24K of each block's 64K range
 * (munmap) and the first 8K of the next block's (MADV_DONTNEED) after writing it too: each
 * of the 2N folios is left partly mapped. Linux keeps them whole (queued for a deferred
 * split), so the process still maps 2N folios at exit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define BLOCK (128UL << 10)
#define ALIGN (2UL << 20)

static void touch(char *base, unsigned long from, unsigned long n)
{
	for (unsigned long i = from; i < from + n; i++)
		((volatile char *)base)[i * BLOCK] = 1;
}

/* Writes 2n 64K blocks, then cuts each one's folio (see the top). */
static int cut(unsigned long n)
{
	size_t len = (2 * n + 1) * BLOCK + ALIGN;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	char *base = (char *)(((unsigned long)p + ALIGN - 1) & ~(ALIGN - 1));
	touch(base, 0, 2 * n);
	for (unsigned long i = 0; i < n; i++) {
		char *b = base + 2 * i * BLOCK;
		if (munmap(b + (40UL << 10), 24UL << 10) ||
		    madvise(b + BLOCK, 8UL << 10, MADV_DONTNEED)) {
			perror("munmap/madvise");
			return 1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "cut"))
		return cut(strtoul(argv[2], NULL, 10));
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: folio_touch N [M] | folio_touch cut N\n");
		return 2;
	}
	unsigned long n = strtoul(argv[1], NULL, 10);
	int forks = argc == 3;
	unsigned long m = forks ? strtoul(argv[2], NULL, 10) : 0;
	size_t len = (n + m + 1) * BLOCK + ALIGN;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	char *base = (char *)(((unsigned long)p + ALIGN - 1) & ~(ALIGN - 1));
	touch(base, 0, n);
	if (!forks)
		return 0;
	pid_t child = fork();
	if (child < 0) {
		perror("fork");
		return 1;
	}
	if (child == 0) {
		touch(base, n, m);
		_exit(0);
	}
	int status;
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status))
		return 1;
	return 0;
}
