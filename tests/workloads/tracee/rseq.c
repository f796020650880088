/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Hostile target: a thread that lives inside an rseq critical section.
 *
 * The worker arms the rseq area glibc registered for it (struct rseq at
 * the thread pointer + __rseq_offset) with a critical section that is a
 * long counting loop, and checks on every iteration that the area still
 * names its section. The kernel, when the thread is preempted, migrated or
 * signalled inside the section, moves it to the abort handler and clears
 * the field: that is counted as an abort (fine). The field found cleared
 * while still inside the loop means a return to user space happened with
 * the instruction pointer elsewhere (a ptrace tracer that ran code in the
 * thread and put it back): the abort the section was owed was skipped,
 * counted as bad. Between sections the worker allocates and frees (the
 * heap injector has slots to redirect). It is the process's only thread,
 * so it is the one a tracer must stop to do anything; it ends the run
 * itself (the seconds given, or a pending SIGTERM, looked at between
 * passes) and prints the result.
 */
#include "tracee.h"

#include <sys/rseq.h>

struct cs_desc {
	uint32_t version, flags;
	uint64_t start_ip, post_commit_offset, abort_ip;
};

static uint64_t g_runs, g_aborts, g_lost;

/* One pass: 0 committed, 1 aborted by the kernel, 2 the field was found
 * cleared inside the section (a lost abort). */
static long cs_pass(volatile uint64_t *rseq_cs, long n)
{
	long ret;

	/* clang-format off */
	__asm__ volatile(
		"lea 9f(%%rip), %%rax\n\t"
		"mov %%rax, (%[cs])\n\t"
		"1:\n\t"
		"cmpq $0, (%[cs])\n\t"
		"je 4f\n\t"
		"dec %[n]\n\t"
		"jnz 1b\n\t"
		"2:\n\t"
		"movq $0, (%[cs])\n\t"
		"xor %[ret], %[ret]\n\t"
		"jmp 5f\n\t"
		".long 0x53053053\n\t"
		"3:\n\t"
		"mov $1, %[ret]\n\t"
		"jmp 5f\n\t"
		"4:\n\t"
		"mov $2, %[ret]\n\t"
		"5:\n\t"
		".pushsection .data.rel.local, \"aw\"\n\t"
		".balign 32\n\t"
		"9:\n\t"
		".long 0, 0\n\t"
		".quad 1b, (2b - 1b), 3b\n\t"
		".popsection\n\t"
		: [ret] "=&r"(ret), [n] "+r"(n)
		: [cs] "r"(rseq_cs)
		: "rax", "memory", "cc");
	/* clang-format on */
	return ret;
}

static double g_secs;
static uint64_t g_t0;

static bool end_reached(void)
{
	sigset_t pend;

	if (tr_now_ns() - g_t0 >= (uint64_t)(g_secs * 1e9))
		return true;
	return sigpending(&pend) == 0 && sigismember(&pend, SIGTERM);
}

static void worker(void *arg)
{
	struct rseq *rs = (struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
	char detail[160];

	(void)arg;
	while (!end_reached()) {
		long r = cs_pass((volatile uint64_t *)&rs->rseq_cs, 20000000);
		void *p;

		__atomic_add_fetch(&g_runs, 1, __ATOMIC_RELAXED);
		if (r == 1)
			__atomic_add_fetch(&g_aborts, 1, __ATOMIC_RELAXED);
		if (r == 2) {
			__atomic_add_fetch(&g_lost, 1, __ATOMIC_RELAXED);
			rs->rseq_cs = 0;
		}
		p = malloc(64 + (g_runs % 512));
		if (p)
			memset(p, 1, 64);
		free(p);
	}
	snprintf(detail, sizeof(detail), "runs=%llu aborts=%llu lost=%llu",
		 (unsigned long long)g_runs, (unsigned long long)g_aborts,
		 (unsigned long long)g_lost);
	tr_result(g_runs, g_lost, detail);
}

int main(int argc, char **argv)
{
	g_secs = argc > 1 ? tr_parse_secs(argv[1]) : 10;
	g_t0 = tr_now_ns();
	if (__rseq_size == 0) {
		/* glibc did not register rseq (GLIBC_TUNABLES=glibc.pthread.rseq=0,
		 * or a kernel without it): nothing to check */
		printf("running\n");
		fflush(stdout);
		tr_result(0, 0, "rseq=unregistered");
	}
	tr_block_term();
	printf("running\n");
	fflush(stdout);
	worker(NULL);
	return 0;
}
