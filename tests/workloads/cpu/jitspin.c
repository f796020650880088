/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jitspin [NAME]: "JIT" code as a runtime makes it: an anonymous
 * executable mapping holding a busy loop (jmp to itself), named in
 * /tmp/perf-PID.map as NAME (default "jit_spin_loop"). The main thread
 * spins in it for ever. Prints its pid on stdout; the map is removed at
 * SIGTERM.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static char map_path[64];

static void on_term(int sig)
{
	unlink(map_path);
	_exit(0);
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "jit_spin_loop";
	unsigned char *code =
		mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (code == MAP_FAILED)
		return 1;
	memset(code, 0x90, 4096); /* nops sliding into the loop */
	code[256] = 0xeb; /* jmp . */
	code[257] = 0xfe;
	if (mprotect(code, 4096, PROT_READ | PROT_EXEC) < 0)
		return 1;
	snprintf(map_path, sizeof(map_path), "/tmp/perf-%d.map", (int)getpid());
	FILE *f = fopen(map_path, "w");
	if (!f)
		return 1;
	fprintf(f, "%lx 1000 %s\n", (unsigned long)code, name);
	fclose(f);
	signal(SIGTERM, on_term);
	printf("%d\n", (int)getpid());
	fflush(stdout);
	((void (*)(void))(code + 256))();
	return 0;
}
