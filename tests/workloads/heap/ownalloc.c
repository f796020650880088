/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A plugin with its own allocator (deepbind.c loads it with RTLD_DEEPBIND):
 * malloc, calloc, realloc and free over an mmap()ed arena. Every block
 * carries a magic header; free() and realloc() abort() on a pointer that is
 * not one of its blocks, and the arena check aborts on a block this
 * allocator did not hand out. Built without -z now: its calls to these
 * names go through lazily bound PLT slots, which DEEPBIND binds to these
 * definitions. Not thread-safe (deepbind.c calls it from one thread).
 * Built with -DUSE_LIBC it defines no allocator (plug_work then uses its
 * namespace's libc: deepbind.c loads that build with dlmopen()).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define ARENA (64u << 20)
#define MAGIC 0x6f776e616c6c6f63ull /* "ownalloc" */
#define FREED 0x6465656672656564ull

uint64_t plug_work(uint64_t seed, int lazy);

struct hdr {
	uint64_t magic;
	size_t size;
};

#ifndef USE_LIBC
static unsigned char *arena;
static size_t top, live;

void *malloc(size_t n);
void *calloc(size_t k, size_t n);
void *realloc(void *p, size_t n);
void free(void *p);

void *malloc(size_t n)
{
	struct hdr *h;
	size_t need = (sizeof(*h) + n + 15) & ~(size_t)15;

	if (!arena) {
		arena = mmap(NULL, ARENA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
			     0);
		if (arena == MAP_FAILED)
			abort();
	}
	if (!live)
		top = 0;
	if (need > ARENA - top)
		return NULL;
	h = (struct hdr *)(arena + top);
	top += need;
	live++;
	h->magic = MAGIC;
	h->size = n;
	return h + 1;
}

static struct hdr *own(void *p)
{
	struct hdr *h = (struct hdr *)p - 1;

	if (!arena || (unsigned char *)h < arena || (unsigned char *)h >= arena + ARENA ||
	    h->magic != MAGIC)
		abort(); /* not a block of this allocator */
	return h;
}

void free(void *p)
{
	if (!p)
		return;
	own(p)->magic = FREED;
	live--;
}

void *calloc(size_t k, size_t n)
{
	void *p = malloc(k * n);

	if (p)
		memset(p, 0, k * n);
	return p;
}

void *realloc(void *p, size_t n)
{
	void *q;

	if (!p)
		return malloc(n);
	q = malloc(n);
	if (q) {
		size_t old = own(p)->size;

		memcpy(q, p, old < n ? old : n);
		free(p);
	}
	return q;
}
#else
static void *own(void *p)
{
	return p;
}
#endif

/* One round: blocks from malloc (and, with lazy set, calloc and realloc:
 * names not called before), filled, checked and freed; a checksum of
 * their contents. Calls through the PLT (the names are global). */
uint64_t plug_work(uint64_t seed, int lazy)
{
	uint64_t *v[32], sum = 0;

	for (int i = 0; i < 32; i++) {
		size_t n = 8 + (size_t)((seed + i) % 61);

		if (lazy && i % 3 == 1)
			v[i] = calloc(n, sizeof(uint64_t));
		else
			v[i] = malloc(n * sizeof(uint64_t));
		if (!v[i])
			abort();
		own(v[i]);
		for (size_t j = 0; j < n; j++)
			v[i][j] = seed * 31 + i + j;
		if (lazy && i % 3 == 2) {
			v[i] = realloc(v[i], 2 * n * sizeof(uint64_t));
			if (!v[i])
				abort();
		}
		for (size_t j = 0; j < n; j++)
			sum += v[i][j];
	}
	for (int i = 0; i < 32; i++)
		free(v[i]);
	return sum;
}
