/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The injected agent's fast path in isolation: maps the agent image
 * (build/lib/inject/agent-blob.bin) into this process, points its malloc
 * and free wrappers at libc, and times malloc(64)+free pairs called
 * directly and through the wrappers, interleaved, 9 rounds; prints the
 * fastest round of each (ns per pair) and the difference. Then the same
 * with every allocation sampled and recorded in the agent's ring (4 KiB of
 * stack copied per sample, the consumer keeping up): the in-process cost
 * of one sampled allocation and its free, without podprof.
 * usage: agentbench AGENT_BLOB [PAIRS_PER_ROUND]
 */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "agent-abi.h"

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Every allocation sampled into the ring, the main thread's stack range
 * given as podprof would ([stack] from /proc/self/maps). */
static int ring_bench(struct pp_agent_data *d, void *(*wm)(size_t), void (*wf)(void *), long n,
		      double unsampled)
{
	uint64_t tp, lo = 0, hi = 0;
	struct pp_agent_thread *t = NULL;
	double best = 1e9;
	char line[512];
	FILE *f;

	__asm__("mov %%fs:0, %0" : "=r"(tp));
	wf(wm(64)); /* claims this thread's slot */
	for (size_t i = 0; i < (1u << PP_AGENT_THREAD_BITS); i++)
		if (d->threads[i].key == tp)
			t = &d->threads[i];
	f = fopen("/proc/self/maps", "r");
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "[stack]"))
			sscanf(line, "%" SCNx64 "-%" SCNx64, &lo, &hi);
	if (f)
		fclose(f);
	if (!t || !hi)
		return 1;
	t->stack_lo = lo;
	t->stack_hi = hi;
	d->ring_copy = 4096;
	d->ring_on = 1;
	d->sample_rate = 1;
	for (int round = 0; round < 9; round++) {
		double t0 = now(), t1;

		for (long i = 0; i < n; i++) {
			wf(wm(64));
			d->ring_tail = d->ring_head; /* a consumer that keeps up */
		}
		t1 = now();
		if (t1 - t0 < best)
			best = t1 - t0;
	}
	printf("every allocation sampled into the ring (4 KiB stack copies): %.1f ns per "
	       "malloc+free, %.1f ns more than unsampled; %" PRIu64 " sent to the kernel path\n",
	       best / (double)n * 1e9, (best / (double)n - unsampled) * 1e9,
	       d->ring_full + d->ring_nostack);
	return 0;
}

int main(int argc, char **argv)
{
	static unsigned char img[1 << 20];
	void *(*volatile pm)(size_t) = malloc;
	void (*volatile pf)(void *) = free;
	void *(*wm)(size_t);
	void (*wf)(void *);
	struct pp_agent_data *d;
	struct pp_agent_hdr *h;
	double best_d = 1e9, best_a = 1e9;
	long n = argc > 2 ? atol(argv[2]) : 5000000;
	uint8_t *base;
	size_t len;
	FILE *f;

	if (argc < 2 || !(f = fopen(argv[1], "rb")))
		return 2;
	len = fread(img, 1, sizeof(img), f);
	fclose(f);
	h = (struct pp_agent_hdr *)img;
	if (len < sizeof(*h) || h->magic != PP_AGENT_MAGIC)
		return 2;
	base = mmap(NULL, h->total_size, PROT_READ | PROT_WRITE | PROT_EXEC,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED)
		return 1;
	memcpy(base, img, len);
	d = (struct pp_agent_data *)(base + h->data_off);
	d->sample_rate = 524288;
	d->seed = 12345;
	for (int i = 0; i < PP_AGENT_EXP_TABLE; i++)
		d->exp_table[i] = (uint32_t)(-log((i + 0.5) / PP_AGENT_EXP_TABLE) * 65536 + 0.5);
	d->real[PP_AG_MALLOC] = (uint64_t)(uintptr_t)malloc;
	d->real[PP_AG_FREE] = (uint64_t)(uintptr_t)free;
	wm = (void *(*)(size_t))(uintptr_t)(base + h->wrap_off[PP_AG_MALLOC]);
	wf = (void (*)(void *))(uintptr_t)(base + h->wrap_off[PP_AG_FREE]);
	for (int round = 0; round < 9; round++) {
		double t0 = now(), t1, t2;

		for (long i = 0; i < n; i++)
			pf(pm(64));
		t1 = now();
		for (long i = 0; i < n; i++)
			wf(wm(64));
		t2 = now();
		if (t1 - t0 < best_d)
			best_d = t1 - t0;
		if (t2 - t1 < best_a)
			best_a = t2 - t1;
	}
	printf("direct %.2f ns, through the agent %.2f ns, agent adds %.2f ns per malloc+free\n",
	       best_d / (double)n * 1e9, best_a / (double)n * 1e9,
	       (best_a - best_d) / (double)n * 1e9);
	return ring_bench(d, wm, wf, n / 20, best_a / (double)n);
}
