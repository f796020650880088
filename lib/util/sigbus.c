/* SPDX-License-Identifier: Apache-2.0 */
#include "sigbus.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static struct sigaction prev_action;
static _Atomic uint64_t repaired;
static uintptr_t page_mask;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	if (si && si->si_code == BUS_ADRERR && si->si_addr) {
		void *page = (void *)((uintptr_t)si->si_addr & page_mask);
		/* mmap is a system call: safe here, and errno is restored */
		int saved = errno;
		void *p = mmap(page, ~page_mask + 1, PROT_READ,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		errno = saved;
		if (p == page) {
			atomic_fetch_add_explicit(&repaired, 1, memory_order_relaxed);
			return; /* the access is retried and reads zeros */
		}
	}
	/* anything else: what would have happened without the guard */
	if ((prev_action.sa_flags & SA_SIGINFO) && prev_action.sa_sigaction) {
		prev_action.sa_sigaction(sig, si, uc);
		return;
	}
	if (prev_action.sa_handler != SIG_DFL && prev_action.sa_handler != SIG_IGN &&
	    prev_action.sa_handler) {
		prev_action.sa_handler(sig);
		return;
	}
	signal(SIGBUS, SIG_DFL);
	raise(SIGBUS);
}

/* Installs the guard unless it is the current handler (someone may have replaced it). */
int pp_sigbus_guard_install(void)
{
	struct sigaction sa, cur;
	long pg = sysconf(_SC_PAGESIZE);
	int r = 0;

	pthread_mutex_lock(&lock);
	if (sigaction(SIGBUS, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
	    cur.sa_sigaction == on_sigbus)
		goto out;
	page_mask = ~((uintptr_t)(pg > 0 ? pg : 4096) - 1);
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGBUS, &sa, &prev_action) < 0)
		r = -errno;
out:
	pthread_mutex_unlock(&lock);
	return r;
}

uint64_t pp_sigbus_guard_repaired(void)
{
	return atomic_load_explicit(&repaired, memory_order_relaxed);
}
