/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Allocation storm for injection tests: 8 threads malloc/calloc/realloc/
 * posix_memalign/free blocks filled with a pattern derived from a seed,
 * verify each block before freeing it, and add its contents to a
 * checksum. On SIGTERM each thread finishes its round; main then
 * recomputes the checksum of the rounds done without touching the heap
 * and prints "ok <rounds> <checksum>" or "MISMATCH ..." (exit 3). A
 * corrupted block aborts (exit 4). Prints "running" once started.
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NTHREADS 8
#define OPS 256
#define LIVE 64

static volatile sig_atomic_t stop;
static uint64_t sums[NTHREADS], rounds[NTHREADS];

static uint64_t next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

/* One round's operations, as sizes and fill values: the same sequence for
 * the heap run and the pure recomputation. */
static uint64_t round_pure(unsigned t, uint64_t r)
{
	uint64_t s = (t + 1) * 0x9e3779b97f4a7c15ull ^ (r + 1) * 0xbf58476d1ce4e5b9ull, sum = 0;

	for (int i = 0; i < OPS; i++) {
		uint64_t v = next(&s);
		size_t n = 16 + (v % 3000);

		sum += (uint64_t)(uint8_t)v * n;
	}
	return sum;
}

static void *worker(void *arg)
{
	unsigned t = (unsigned)(uintptr_t)arg;
	unsigned char *live[LIVE] = { 0 };
	size_t lsize[LIVE] = { 0 };
	uint8_t lval[LIVE] = { 0 };

	for (uint64_t r = 0; !stop; r++) {
		uint64_t s = (t + 1) * 0x9e3779b97f4a7c15ull ^ (r + 1) * 0xbf58476d1ce4e5b9ull;

		for (int i = 0; i < OPS; i++) {
			uint64_t v = next(&s);
			size_t n = 16 + (v % 3000);
			int k = (int)((v >> 32) % LIVE);
			unsigned char *p;
			uint64_t sum = 0;

			if (live[k]) {
				for (size_t j = 0; j < lsize[k]; j++) {
					if (live[k][j] != lval[k])
						_exit(4);
					sum += live[k][j];
				}
				sums[t] += sum;
				free(live[k]);
				live[k] = NULL;
			}
			switch ((v >> 40) & 3) {
			case 0:
				p = malloc(n);
				break;
			case 1:
				p = calloc(1, n);
				break;
			case 2:
				p = realloc(malloc(8), n);
				break;
			default:
				if (posix_memalign((void **)&p, 64, n))
					p = NULL;
				break;
			}
			if (!p)
				_exit(5);
			memset(p, (uint8_t)v, n);
			live[k] = p;
			lsize[k] = n;
			lval[k] = (uint8_t)v;
		}
		/* free what is left: every block of the round is counted */
		for (int k = 0; k < LIVE; k++) {
			if (!live[k])
				continue;
			for (size_t j = 0; j < lsize[k]; j++)
				sums[t] += live[k][j];
			free(live[k]);
			live[k] = NULL;
		}
		rounds[t] = r + 1;
	}
	return NULL;
}

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

int main(void)
{
	pthread_t th[NTHREADS];
	uint64_t total = 0, want = 0, nr = 0;

	signal(SIGTERM, on_term);
	for (unsigned t = 0; t < NTHREADS; t++)
		pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t);
	printf("running\n");
	fflush(stdout);
	for (unsigned t = 0; t < NTHREADS; t++) {
		pthread_join(th[t], NULL);
		total += sums[t];
		nr += rounds[t];
		for (uint64_t r = 0; r < rounds[t]; r++)
			want += round_pure(t, r);
	}
	if (total != want) {
		printf("MISMATCH rounds=%llu got=%llu want=%llu\n", (unsigned long long)nr,
		       (unsigned long long)total, (unsigned long long)want);
		return 3;
	}
	printf("ok %llu %llu\n", (unsigned long long)nr, (unsigned long long)total);
	return 0;
}
