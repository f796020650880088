// SPDX-License-Identifier: Apache-2.0
// C++ symbolizer fixture: namespaces, templates, a class method.
#include <cstdio>
#include <unistd.h>

volatile int pp_cxx_sink;

namespace ppfix {
namespace inner {

template <typename T> struct Box {
	T v;
	__attribute__((noinline)) T twice(T a)
	{
		pp_cxx_sink += (int)a;
		return a + a + v;
	}
};

template <typename T> __attribute__((noinline)) T add(T a, T b)
{
	pp_cxx_sink++;
	return a + b;
}

} // namespace inner
} // namespace ppfix

int main(int argc, char **)
{
	ppfix::inner::Box<long> b{ argc };
	long (ppfix::inner::Box<long>::*volatile mp)(long) = &ppfix::inner::Box<long>::twice;
	int (*volatile fp)(int, int) = ppfix::inner::add<int>;
	(b.*mp)(3);
	fp(argc, 2);
	union {
		long (ppfix::inner::Box<long>::*m)(long);
		void *p[2];
	} u;
	u.m = mp;
	std::printf("twice %p\n", u.p[0]);
	std::printf("add %p\n", (void *)fp);
	std::printf("ready\n");
	std::fflush(stdout);
	for (;;)
		pause();
	return 0;
}
