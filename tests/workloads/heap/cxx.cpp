// SPDX-License-Identifier: Apache-2.0
// C++ new/delete for the injected heap agent: prints "waiting", on SIGUSR1
// news 3000 x 7000-byte arrays (kept) and 3000 objects it deletes, prints
// "ready", waits for SIGUSR1/SIGTERM.
#include <csignal>
#include <cstdio>
#include <vector>

struct Obj {
	char b[5000];
};

static std::vector<char *> keep;
static volatile unsigned long sink;

static void wait_sig()
{
	sigset_t set;
	int sig = 0;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGTERM);
	sigwait(&set, &sig);
}

__attribute__((noinline)) void cxx_site()
{
	for (int i = 0; i < 3000; i++) {
		char *p = new char[7000];
		sink += (unsigned long)p;
		keep.push_back(p);
	}
}

__attribute__((noinline)) void cxx_temp()
{
	for (int i = 0; i < 3000; i++) {
		Obj *o = new Obj;
		sink += (unsigned long)o;
		delete o;
	}
}

int main()
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, nullptr);
	keep.reserve(3000);
	std::printf("waiting\n");
	std::fflush(stdout);
	wait_sig();
	cxx_site();
	cxx_temp();
	std::printf("ready\n");
	std::fflush(stdout);
	wait_sig();
	return 0;
}
