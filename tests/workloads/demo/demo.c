/* SPDX-License-Identifier: Apache-2.0 */
/*
 * podprof-demo: a small service-like program for the README's first
 * command. Threads burn CPU in a few named functions, keep and churn heap
 * memory, sleep, and contend on a mutex, so every profile has something
 * to show. Runs until killed.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile uint64_t g_sink;

static void __attribute__((noinline)) nap_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static uint64_t __attribute__((noinline)) parse_request(uint64_t seed)
{
	uint64_t h = seed;
	for (int i = 0; i < 200000; i++)
		h = h * 6364136223846793005ull + 1442695040888963407ull;
	return h;
}

static uint64_t __attribute__((noinline)) compress_response(uint64_t seed)
{
	uint64_t h = seed;
	for (int i = 0; i < 600000; i++)
		h ^= (h << 13) ^ (h >> 7) ^ (uint64_t)i;
	return h;
}

static void *__attribute__((noinline)) cache_insert(size_t size)
{
	void *p = malloc(size);
	if (p)
		memset(p, 0xab, size);
	return p;
}

static void *worker(void *arg)
{
	uint64_t seed = (uintptr_t)arg;
	for (;;) {
		seed = parse_request(seed);
		seed = compress_response(seed);
		char *tmp = malloc(64 * 1024);
		if (tmp) {
			tmp[0] = (char)seed;
			g_sink += (uint64_t)tmp[0];
			free(tmp);
		}
		nap_ms(2);
	}
	return NULL;
}

static void *cache_filler(void *arg)
{
	(void)arg;
	/* A slow "leak": 256 KiB every 100 ms, up to 256 MiB, then start over. */
	void **keep = calloc(1024, sizeof(void *));
	size_t n = 0;
	for (;;) {
		if (n == 1024) {
			for (size_t i = 0; i < n; i++)
				free(keep[i]);
			n = 0;
		}
		keep[n++] = cache_insert(256 * 1024);
		nap_ms(100);
	}
	return NULL;
}

static void *lock_user(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&g_lock);
		g_sink += parse_request(g_sink);
		nap_ms(5);
		pthread_mutex_unlock(&g_lock);
		nap_ms(1);
	}
	return NULL;
}

int main(void)
{
	pthread_t t;
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (uintptr_t i = 1; i <= 2; i++)
		pthread_create(&t, NULL, worker, (void *)i);
	pthread_create(&t, NULL, cache_filler, NULL);
	pthread_create(&t, NULL, lock_user, NULL);
	pthread_create(&t, NULL, lock_user, NULL);
	printf("podprof-demo running, pid %d\n", getpid());
	for (;;)
		nap_ms(1000);
}
