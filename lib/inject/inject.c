/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Injecting the sampling agent and redirecting GOT slots (see inject.h).
 */
#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>

#include "agent-abi.h"
#include "inject/headroom.h"
#include "inject/inject.h"
#include "procfs/procfs.h"
#include "tracee/tracee.h"
#include "util/util.h"

#define PAGE_SZ 4096u /* x86-64 */

extern const unsigned char pp_agent_image[];
extern const size_t pp_agent_image_len;

#define MAX_SLOTS 4096
#define MAX_MODULES 1024
#define ALLOC_IDX_NONE -1

/* Symbol names per enum pp_agent_fn. */
static const char *const fn_names[PP_AG_NFN] = PP_AGENT_FN_NAMES;

struct slot {
	uint64_t addr; /* GOT slot in the target */
	uint64_t orig; /* what it held (restored on detach) */
	int fn;
	unsigned module;
	bool patched;
};

struct module {
	uint32_t dev_major, dev_minor;
	uint64_t inode, start;
	char name[64];
	unsigned nslots;
	bool scanned;
	/* How the loader may bind this module's lazy slots (drop_lazy_elsewhere) */
	bool exe; /* the executable */
	bool symbolic; /* DT_SYMBOLIC / DF_SYMBOLIC: its own definitions first */
	uint64_t defines; /* bit per enum pp_agent_fn it defines (.dynsym) */
	char soname[64]; /* DT_SONAME ("" if none) */
	char *needed; /* DT_NEEDED names, each NUL-terminated (owned) */
	size_t needed_len;
};

_Static_assert(PP_AG_NFN <= 64, "struct module's defines: one bit per function");

struct pp_inject {
	pid_t pid;
	int memfd; /* podprof's descriptor of the agent's memfd */
	char probe_path[64];
	struct pp_agent_hdr hdr;
	uint64_t base; /* agent image address in the target */
	uint64_t real[PP_AG_NFN]; /* what the agent forwards to (0: not wrapped) */
	uint64_t def[PP_AG_NFN]; /* definitions in the allocator's module */
	char alloc_path[4096]; /* maps path of the module the loader binds malloc to */
	uint64_t sample_rate;
	unsigned max_pause_ms;
	bool reused;
	bool ever_patched; /* a slot was written: the code must stay mapped */
	long target_fd; /* the agent's memfd in the target (-1 unknown) */
	uint64_t pause_ns;
	struct slot *slots;
	size_t nslots;
	struct module *mods;
	size_t nmods;
	unsigned skipped;
	/* a preloaded agent (libpodprof-agent.so): nothing mapped, nothing
	 * redirected; base is its header, hdr.data_off relative to it */
	bool preloaded;
	int memrw; /* preloaded: its /proc/PID/mem, read+write (-1: another user's) */
	int mmfd; /* preloaded: its /proc/PID/maps, naming its address space */
};

/* The reading side of the agent's ring: independent of struct pp_inject
 * (its own descriptor), so that one thread reads while another detaches. */
struct pp_inject_ring {
	pid_t pid;
	int fd; /* /proc/PID/mem, read+write; -1: process_vm_readv/writev */
	int mmfd; /* with fd -1: /proc/PID/maps of the address space written */
	uint64_t data; /* address of struct pp_agent_data in the target */
	uint64_t ring, ring_size; /* where the records are (0: a preloaded agent's
				   * ring not mapped yet) and their bytes */
	bool preloaded;
	bool reused;
	uint64_t tail; /* what podprof consumed */
	uint64_t stall_tail, stall_ns; /* the tail where a record was seen incomplete, since */
	uint64_t records, skipped;
};

/* ---------------------------------------------------------------- memory */

static int mem_fd(pid_t pid, int flags)
{
	char p[64];
	int fd;

	snprintf(p, sizeof(p), "/proc/%d/mem", (int)pid);
	fd = open(p, flags | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* Without CAP_DAC_OVERRIDE podprof cannot open /proc/PID/mem of a process
 * running as another user (the file is its owner's, mode 0600), but may
 * read and write its memory with process_vm_readv/writev (CAP_SYS_PTRACE).
 * Unlike a /proc/PID/mem descriptor these name the process by its pid,
 * and an exec gives that pid a new address space: a write goes only while
 * mmfd, /proc/PID/maps opened when the address space was the one podprof
 * knows, still reads it (the descriptor holds that address space: after an
 * exec or the exit it reads nothing). What is left is the instant between
 * that check and the write. */
static int vm_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec l = { buf, len }, r = { (void *)(uintptr_t)addr, len };
	ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);

	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

static int vm_write(int mmfd, pid_t pid, uint64_t addr, const void *buf, size_t len)
{
	struct iovec l = { (void *)buf, len }, r = { (void *)(uintptr_t)addr, len };
	ssize_t n;
	char c;

	if (mmfd < 0 || pread(mmfd, &c, 1, 0) != 1)
		return -ESRCH;
	n = process_vm_writev(pid, &l, 1, &r, 1, 0);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

static void preload_release(struct pp_inject *inj);

/* /proc/PID/maps: a descriptor that holds the address space it was opened
 * on (see vm_write); -errno. */
static int open_maps(pid_t pid)
{
	char p[64];
	int fd;

	snprintf(p, sizeof(p), "/proc/%d/maps", (int)pid);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* pid's soft RLIMIT_NOFILE, or -1 (unknown, unlimited). */
static long nofile_soft(pid_t pid)
{
	char p[64], *text = NULL, *l;
	size_t len = 0;
	long v = -1;

	snprintf(p, sizeof(p), "/proc/%d/limits", (int)pid);
	if (pp_read_file(p, 1 << 16, &text, &len) < 0)
		return -1;
	l = strstr(text, "Max open files");
	if (l && sscanf(l + 14, " %ld", &v) != 1)
		v = -1;
	free(text);
	return v > 1 << 20 ? 1 << 20 : v;
}

/* The first of the descriptors 0, 1, 2 pid has closed, or -1. */
static int std_fd_closed(pid_t pid)
{
	for (int fd = 0; fd < 3; fd++) {
		char p[64], l[16];

		snprintf(p, sizeof(p), "/proc/%d/fd/%d", (int)pid, fd);
		if (readlink(p, l, sizeof(l)) < 0 && errno == ENOENT)
			return fd;
	}
	return -1;
}

static int read_mem(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	int fd = mem_fd(pid, O_RDONLY);
	ssize_t r;

	if (fd == -EACCES || fd == -EPERM)
		return vm_read(pid, addr, buf, len);
	if (fd < 0)
		return fd;
	r = pread(fd, buf, len, (off_t)addr);
	close(fd);
	if (r < 0)
		return -errno;
	return (size_t)r == len ? 0 : -EIO;
}

static int write_mem(pid_t pid, uint64_t addr, const void *buf, size_t len)
{
	int fd = mem_fd(pid, O_RDWR);
	ssize_t r;

	if (fd < 0)
		return fd;
	r = pwrite(fd, buf, len, (off_t)addr);
	close(fd);
	if (r < 0)
		return -errno;
	return (size_t)r == len ? 0 : -EIO;
}

/* Address in the target of a field of the agent's struct pp_agent_data. */
#define data_addr(inj, field) \
	((inj)->base + (inj)->hdr.data_off + offsetof(struct pp_agent_data, field))

/* ---------------------------------------------------------- remote calls */

struct stopped {
	struct pp_tracee t;
	uint64_t gadget; /* address of a `syscall` instruction */
};

static uint64_t find_gadget(pid_t pid, uint64_t rip)
{
	struct pp_maps maps = { 0 };
	uint8_t b[2];
	uint64_t g = 0;

	if (rip >= 2 && read_mem(pid, rip - 2, b, 2) == 0 && b[0] == 0x0f && b[1] == 0x05)
		return rip - 2;
	if (pp_maps__read(pid, &maps) < 0)
		return 0;
	for (size_t i = 0; i < maps.n && !g; i++) {
		const struct pp_map *m = &maps.v[i];
		uint8_t *buf;
		size_t len = m->end - m->start;

		if (!m->path || strcmp(m->path, "[vdso]") != 0 || len > (1u << 20))
			continue;
		buf = malloc(len);
		if (buf && read_mem(pid, m->start, buf, len) == 0) {
			for (size_t k = 0; k + 1 < len; k++) {
				if (buf[k] == 0x0f && buf[k + 1] == 0x05) {
					g = m->start + k;
					break;
				}
			}
		}
		free(buf);
	}
	pp_maps__free(&maps);
	return g;
}

#define MAX_CANDIDATES 8
#define WINDOW_NS (1000ull * 1000 * 1000) /* how long stop_one waits for a thread fit to stop */

/*
 * Threads worth trying, best first: blocked in a call the kernel restarts
 * unnoticed, then running; a thread whose interruption would be visible
 * (tracee.h rule 2) or with a seccomp filter of its own is left out.
 */
static size_t candidates(pid_t pid, pid_t *ret, size_t max, char *why, size_t n)
{
	char p[64];
	DIR *d;
	struct dirent *e;
	pid_t quiet[MAX_CANDIDATES], running[MAX_CANDIDATES];
	size_t nq = 0, nr = 0, k = 0;

	snprintf(p, sizeof(p), "/proc/%d/task", (int)pid);
	d = opendir(p);
	if (!d)
		return 0;
	while ((e = readdir(d))) {
		pid_t tid = (pid_t)strtol(e->d_name, NULL, 10);
		struct pp_tracee_sys sys;

		if (tid <= 0 || pp_tracee__syscall_of(pid, tid, &sys) < 0)
			continue;
		if (pp_tracee__visible(pid, &sys, why, n))
			continue;
		if (pp_tracee__seccomp(pid, tid)) {
			snprintf(why, n, "thread %d has a seccomp filter", (int)tid);
			continue;
		}
		if (sys.nr >= 0 && nq < MAX_CANDIDATES)
			quiet[nq++] = tid;
		else if (sys.nr < 0 && nr < MAX_CANDIDATES)
			running[nr++] = tid;
	}
	closedir(d);
	for (size_t i = 0; i < nq && k < max; i++)
		ret[k++] = quiet[i];
	for (size_t i = 0; i < nr && k < max; i++)
		ret[k++] = running[i];
	return k;
}

/* Stops one thread of pid fit to run syscalls in (tracee.h rules), and
 * finds a `syscall` instruction to run them with. Inside pp_tracee__run. */
static int stop_one(pid_t pid, unsigned max_pause_ms, struct stopped *s, char *reason, size_t n)
{
	pid_t tids[MAX_CANDIDATES];
	size_t nt;
	int r;

	memset(s, 0, sizeof(*s));
	r = pp_tracee__process_check(pid, reason, n);
	if (r < 0)
		return r;
	/* Every thread may be in a call it would see interrupted: wait a
	 * little for one to come out (a busy server's do, between calls). */
	uint64_t until = pp_now_mono_ns() + WINDOW_NS;
	unsigned wait_us = 200;
	for (;;) {
		snprintf(reason, n, "no thread can be stopped unnoticed");
		nt = candidates(pid, tids, MAX_CANDIDATES, reason, n);
		if (nt > 0)
			break;
		if (kill(pid, 0) < 0 && errno == ESRCH) {
			snprintf(reason, n, "process gone");
			return -ESRCH;
		}
		if (pp_now_mono_ns() >= until)
			return -EAGAIN;
		struct timespec ts = { 0, (long)wait_us * 1000 };
		nanosleep(&ts, NULL);
		wait_us = PP_MIN(wait_us * 2, 100000u);
	}
	r = -EAGAIN;
	for (size_t i = 0; i < nt; i++) {
		r = pp_tracee__stop(&s->t, pid, tids[i], PP_TRACEE_RUN, max_pause_ms, reason, n);
		if (r == -EAGAIN || (r == -ESRCH && i + 1 < nt))
			continue;
		if (r < 0)
			return r;
		break;
	}
	if (r < 0)
		return r;
	s->gadget = find_gadget(pid, s->t.regs.rip);
	if (!s->gadget) {
		pp_tracee__release(&s->t);
		snprintf(reason, n, "no syscall instruction to reuse");
		return -ENOEXEC;
	}
	return 0;
}

static uint64_t resume(struct stopped *s)
{
	return pp_tracee__release(&s->t);
}

/* Run one syscall in the stopped thread; *ret gets its return value. */
static int remote_syscall(struct stopped *s, long nr, uint64_t a1, uint64_t a2, uint64_t a3,
			  uint64_t a4, uint64_t a5, uint64_t a6, long *ret)
{
	return pp_tracee__syscall(&s->t, s->gadget, nr, a1, a2, a3, a4, a5, a6, ret);
}

/* --------------------------------------------------------- module scan */

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');

	return s ? s + 1 : p;
}

static bool skip_module(const char *path)
{
	const char *b = base_name(path);

	return strncmp(b, "ld-linux", 8) == 0 || strncmp(b, "ld64.so", 7) == 0 ||
	       strncmp(b, "ld-musl", 7) == 0 || strncmp(path, "/memfd:", 7) == 0;
}

static int fn_index(const char *name)
{
	for (int i = 0; i < PP_AG_NFN; i++)
		if (strcmp(name, fn_names[i]) == 0)
			return i;
	return ALLOC_IDX_NONE;
}

struct found_slot {
	uint64_t addr;
	int fn;
};

/* Load bias of a module mapped from m (the offset-0 mapping). */
static int module_bias(Elf *elf, const struct pp_map *m, uint64_t *ret)
{
	size_t nph = 0;

	if (elf_getphdrnum(elf, &nph))
		return -ENOEXEC;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		*ret = m->start - m->offset - (ph.p_vaddr - ph.p_offset);
		return 0;
	}
	return -ENOEXEC;
}

/* The dynamic section's names and flags that decide where the loader may
 * bind the module's symbols (see drop_lazy_elsewhere): DT_NEEDED, DT_SONAME,
 * DT_SYMBOLIC. At most 64 KiB of needed names. */
static int read_dynamic(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh, struct module *info)
{
	Elf_Data *d = elf_getdata(scn, NULL);

	if (!d || !sh->sh_entsize)
		return 0;
	for (size_t j = 0; j < d->d_size / sh->sh_entsize; j++) {
		GElf_Dyn dy;
		const char *nm;
		size_t l;
		char *v;

		if (!gelf_getdyn(d, (int)j, &dy) || dy.d_tag == DT_NULL)
			break;
		if (dy.d_tag == DT_SYMBOLIC ||
		    (dy.d_tag == DT_FLAGS && (dy.d_un.d_val & DF_SYMBOLIC)))
			info->symbolic = true;
		if (dy.d_tag != DT_NEEDED && dy.d_tag != DT_SONAME)
			continue;
		nm = elf_strptr(elf, sh->sh_link, dy.d_un.d_val);
		if (!nm)
			continue;
		if (dy.d_tag == DT_SONAME) {
			snprintf(info->soname, sizeof(info->soname), "%s", nm);
			continue;
		}
		l = strlen(nm) + 1;
		if (info->needed_len + l > 65536)
			return -E2BIG;
		v = realloc(info->needed, info->needed_len + l);
		if (!v)
			return -ENOMEM;
		memcpy(v + info->needed_len, nm, l);
		info->needed = v;
		info->needed_len += l;
	}
	return 0;
}

/* GOT slots (JUMP_SLOT, GLOB_DAT) of the wrapped names in one module,
 * plus its PLT range (a lazy slot not yet bound points there); info gets
 * the wrapped names it defines and its dynamic section's names. */
static int scan_module(pid_t pid, const struct pp_map *m, struct found_slot *out, size_t max,
		       size_t *ret_n, uint64_t *plt_lo, uint64_t *plt_hi, bool *ret_static,
		       uint64_t *defs, uint64_t *ret_relro, struct module *info)
{
	Elf *elf;
	Elf_Scn *scn = NULL;
	size_t shstr = 0, n = 0, nph = 0;
	uint64_t bias = 0, relro = 0;
	bool dyn = false, has_relro = false;
	int fd, r = 0;

	*ret_n = 0;
	*plt_lo = *plt_hi = 0;
	*ret_static = false;
	*ret_relro = 0;
	fd = pp_proc__open_mapped(pid, m);
	if (fd < 0)
		return fd;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF || gelf_getclass(elf) != ELFCLASS64) {
		r = -ENOEXEC;
		goto out;
	}
	if (elf_getphdrnum(elf, &nph) == 0) {
		for (size_t i = 0; i < nph; i++) {
			GElf_Phdr ph;

			if (!gelf_getphdr(elf, (int)i, &ph))
				continue;
			if (ph.p_type == PT_DYNAMIC)
				dyn = true;
			/* the pages the loader makes read-only: whole pages
			 * within the segment (none if it spans no page end) */
			if (ph.p_type == PT_GNU_RELRO &&
			    (ph.p_vaddr & ~4095ull) != ((ph.p_vaddr + ph.p_memsz) & ~4095ull)) {
				has_relro = true;
				relro = ph.p_vaddr & ~4095ull;
			}
		}
	}
	*ret_static = !dyn;
	if (!dyn || module_bias(elf, m, &bias) < 0 || elf_getshdrstrndx(elf, &shstr)) {
		r = dyn ? -ENOEXEC : 0;
		goto out;
	}
	if (has_relro)
		*ret_relro = bias + relro;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *sn;

		if (!gelf_getshdr(scn, &sh))
			continue;
		sn = elf_strptr(elf, shstr, sh.sh_name);
		if (sn && (strcmp(sn, ".plt") == 0 || strcmp(sn, ".plt.sec") == 0)) {
			uint64_t lo = bias + sh.sh_addr, hi = lo + sh.sh_size;

			if (!*plt_lo || lo < *plt_lo)
				*plt_lo = lo;
			if (hi > *plt_hi)
				*plt_hi = hi;
		}
	}
	scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Scn *symscn;
		GElf_Shdr symsh;
		Elf_Data *d, *symd;

		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_DYNAMIC) {
			r = read_dynamic(elf, scn, &sh, info);
			if (r < 0)
				goto out;
			continue;
		}
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_DYNSYM && sh.sh_entsize &&
		    (d = elf_getdata(scn, NULL))) {
			for (size_t j = 0; j < d->d_size / sh.sh_entsize; j++) {
				GElf_Sym sym;
				const char *name;
				int fn;

				if (!gelf_getsym(d, (int)j, &sym) || sym.st_shndx == SHN_UNDEF ||
				    GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
				    GELF_ST_BIND(sym.st_info) == STB_LOCAL)
					continue;
				name = elf_strptr(elf, sh.sh_link, sym.st_name);
				if (!name || (fn = fn_index(name)) < 0)
					continue;
				info->defines |= 1ull << fn;
				if (defs && !defs[fn])
					defs[fn] = bias + sym.st_value;
			}
			continue;
		}
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || !sh.sh_entsize)
			continue;
		symscn = elf_getscn(elf, sh.sh_link);
		if (!symscn || !gelf_getshdr(symscn, &symsh) || symsh.sh_type != SHT_DYNSYM)
			continue;
		d = elf_getdata(scn, NULL);
		symd = elf_getdata(symscn, NULL);
		if (!d || !symd)
			continue;
		for (size_t j = 0; j < d->d_size / sh.sh_entsize; j++) {
			GElf_Rela rel;
			GElf_Sym sym;
			const char *name;
			unsigned type;
			int fn;

			if (!gelf_getrela(d, (int)j, &rel))
				break;
			type = (unsigned)GELF_R_TYPE(rel.r_info);
			if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT)
				continue;
			if (!gelf_getsym(symd, (int)GELF_R_SYM(rel.r_info), &sym))
				continue;
			name = elf_strptr(elf, symsh.sh_link, sym.st_name);
			if (!name || (fn = fn_index(name)) < 0)
				continue;
			if (n < max) {
				out[n].addr = bias + rel.r_offset;
				out[n].fn = fn;
				n++;
			}
		}
	}
	*ret_n = n;
out:
	if (elf)
		elf_end(elf);
	close(fd);
	return r;
}

static bool same_file(const struct module *mo, const struct pp_map *m)
{
	return mo->inode == m->inode && mo->dev_major == m->dev_major &&
	       mo->dev_minor == m->dev_minor && mo->start == m->start;
}

/* Mapping of the module a code address belongs to. */
static const struct pp_map *owner(const struct pp_maps *maps, uint64_t addr)
{
	const struct pp_map *m = pp_maps__find(maps, addr);

	return m && m->path && !m->special ? m : NULL;
}

/* Does the file that defines a function also define malloc? C++ operators
 * are wrapped only there (jemalloc, tcmalloc): libstdc++'s forward to
 * malloc, which is wrapped already, and wrapping both counts twice. */
static bool defines_malloc(const struct pp_maps *maps, uint64_t fn_addr, uint64_t malloc_addr)
{
	const struct pp_map *a = owner(maps, fn_addr), *b = owner(maps, malloc_addr);

	return a && b && a->inode == b->inode && a->dev_major == b->dev_major &&
	       a->dev_minor == b->dev_minor;
}

static int add_slot(struct pp_inject *inj, uint64_t addr, uint64_t orig, int fn, unsigned module)
{
	struct slot *v;

	if (inj->nslots >= MAX_SLOTS)
		return -E2BIG;
	v = realloc(inj->slots, (inj->nslots + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	inj->slots = v;
	v[inj->nslots++] = (struct slot){ .addr = addr, .orig = orig, .fn = fn, .module = module };
	return 0;
}

static bool is_wrapper(const struct pp_inject *inj, uint64_t v, int *ret_fn)
{
	for (int i = 0; i < PP_AG_NFN; i++) {
		if (v == inj->base + inj->hdr.wrap_off[i]) {
			*ret_fn = i;
			return true;
		}
	}
	return false;
}

/* Scan modules not scanned yet; new slots are recorded (not written). */
static int scan(struct pp_inject *inj, bool *ret_static_exe)
{
	struct pp_maps maps = { 0 };
	struct found_slot *found;
	char exe[PATH_MAX], link[64];
	struct pp_open_budget budget;
	ssize_t el;
	int r;

	if (ret_static_exe)
		*ret_static_exe = false;
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)inj->pid);
	el = readlink(link, exe, sizeof(exe) - 1);
	if (el < 0)
		return -ESRCH;
	exe[el] = '\0';
	if (el > 10 && strcmp(exe + el - 10, " (deleted)") == 0)
		exe[el - 10] = '\0';
	r = pp_maps__read(inj->pid, &maps);
	if (r < 0)
		return r == -ENOENT ? -ESRCH : r;
	found = calloc(MAX_SLOTS, sizeof(*found));
	if (!found) {
		pp_maps__free(&maps);
		return -ENOMEM;
	}
	pp_open_budget__init(&budget);
	for (size_t i = 0; i < maps.n; i++) {
		const struct pp_map *m = &maps.v[i];
		uint64_t lo, hi, relro;
		size_t nf = 0, k;
		bool seen = false, is_static = false;
		struct module *mo, info = { 0 };

		if (!m->path || m->special || !m->inode || skip_module(m->path))
			continue;
		/* a module's first mapping of its file */
		for (k = 0; k < inj->nmods && !seen; k++)
			seen = same_file(&inj->mods[k], m) ||
			       (inj->mods[k].inode == m->inode && i > 0 &&
				maps.v[i - 1].inode == m->inode && maps.v[i - 1].path &&
				strcmp(maps.v[i - 1].path, m->path) == 0);
		if (seen || (i > 0 && maps.v[i - 1].inode == m->inode && maps.v[i - 1].path &&
			     strcmp(maps.v[i - 1].path, m->path) == 0))
			continue;
		if (inj->nmods >= MAX_MODULES)
			break;
		/* Past this pass's open budget only the executable and the
		 * allocator are scanned (the rest: at the next rescan). */
		if (strcmp(m->path, exe) != 0 &&
		    !(inj->alloc_path[0] && strcmp(m->path, inj->alloc_path) == 0) &&
		    !pp_open_budget__take(&budget))
			continue;
		if (scan_module(inj->pid, m, found, MAX_SLOTS, &nf, &lo, &hi, &is_static,
				inj->alloc_path[0] && strcmp(m->path, inj->alloc_path) == 0
					? inj->def
					: NULL,
				&relro, &info) < 0) {
			free(info.needed);
			continue;
		}
		/* A module the loader is still loading (dlopen in progress): its
		 * slots may not be relocated yet, and a scan would record them
		 * as they are. The loader makes the RELRO segment read-only
		 * after relocating, which changes the maps: the module is
		 * scanned at that change (pp_inject__patch), not now. */
		const struct pp_map *rm = relro ? pp_maps__find(&maps, relro) : NULL;
		if (rm && (rm->prot & PP_PROT_W)) {
			free(info.needed);
			continue;
		}
		if (is_static && ret_static_exe && strcmp(m->path, exe) == 0)
			*ret_static_exe = true;
		mo = realloc(inj->mods, (inj->nmods + 1) * sizeof(*mo));
		if (!mo) {
			free(info.needed);
			r = -ENOMEM;
			break;
		}
		inj->mods = mo;
		mo = &inj->mods[inj->nmods];
		*mo = info; /* defines, symbolic, soname, needed */
		mo->exe = strcmp(m->path, exe) == 0;
		mo->inode = m->inode;
		mo->dev_major = m->dev_major;
		mo->dev_minor = m->dev_minor;
		mo->start = m->start;
		snprintf(mo->name, sizeof(mo->name), "%s", base_name(m->path));
		mo->scanned = true;
		for (k = 0; k < nf; k++) {
			uint64_t v = 0;
			int wfn;

			if (read_mem(inj->pid, found[k].addr, &v, sizeof(v)) < 0 || !v) {
				inj->skipped++;
				continue;
			}
			if (is_wrapper(inj, v, &wfn)) {
				/* patched by an earlier podprof: restore to what the
				 * agent forwards to */
				if (wfn == found[k].fn && inj->real[wfn] &&
				    add_slot(inj, found[k].addr, inj->real[wfn], wfn,
					     (unsigned)inj->nmods) == 0)
					inj->slots[inj->nslots - 1].patched = true;
				continue;
			}
			if (v >= lo && v < hi)
				v = 0; /* lazy slot, not bound yet: resolved below */
			add_slot(inj, found[k].addr, v, found[k].fn, (unsigned)inj->nmods);
		}
		inj->nmods++;
	}
	free(found);
	pp_maps__free(&maps);
	return r < 0 ? r : 0;
}

/* Decide each function's real target: the value most slots are bound to
 * (the global definition); slots bound elsewhere (symbolic binding,
 * DEEPBIND, namespaces) or unbound lazy slots with no known target stay
 * unpatched. */
static ssize_t module_of(const struct pp_inject *inj, const struct pp_maps *maps, uint64_t addr);

/* The allocator's definitions (def[]) come from the first mapping of its
 * file. With a second copy of it (a dlmopen() namespace with its own libc)
 * that may be the other namespace's: move them to the copy the
 * executable's bound slots point into (the executable is always in the
 * first namespace), at the same offsets. */
static void def_in_exe_namespace(struct pp_inject *inj, const struct pp_maps *maps)
{
	ssize_t used = -1;

	for (size_t i = 0; i < inj->nslots && used < 0; i++)
		if (inj->slots[i].orig && inj->mods[inj->slots[i].module].exe)
			used = module_of(inj, maps, inj->slots[i].orig);
	for (int fn = 0; used >= 0 && fn < PP_AG_NFN; fn++) {
		ssize_t d = inj->def[fn] ? module_of(inj, maps, inj->def[fn]) : -1;
		const struct module *a = &inj->mods[used];

		if (d >= 0 && d != used && inj->mods[d].inode == a->inode &&
		    inj->mods[d].dev_major == a->dev_major &&
		    inj->mods[d].dev_minor == a->dev_minor)
			inj->def[fn] = inj->def[fn] - inj->mods[d].start + a->start;
	}
}

static void choose_real(struct pp_inject *inj)
{
	struct pp_maps maps = { 0 };
	bool have_maps = pp_maps__read(inj->pid, &maps) == 0;

	if (have_maps)
		def_in_exe_namespace(inj, &maps);

	for (int fn = 0; fn < PP_AG_NFN; fn++) {
		uint64_t best = 0;
		size_t best_n = 0;

		if (inj->real[fn])
			continue;
		if (inj->def[fn]) {
			inj->real[fn] = inj->def[fn]; /* the allocator's own definition */
			continue;
		}
		for (size_t i = 0; i < inj->nslots; i++) {
			size_t c = 0;

			if (inj->slots[i].fn != fn || !inj->slots[i].orig)
				continue;
			for (size_t j = 0; j < inj->nslots; j++)
				c += inj->slots[j].fn == fn &&
				     inj->slots[j].orig == inj->slots[i].orig;
			if (c > best_n) {
				best_n = c;
				best = inj->slots[i].orig;
			}
		}
		inj->real[fn] = best;
	}
	/* C++ operators only where their definition also defines malloc. */
	for (int fn = PP_AG_FIRST_CXX; fn < PP_AG_NFN; fn++) {
		if (inj->real[fn] &&
		    (!have_maps || !inj->real[PP_AG_MALLOC] ||
		     !defines_malloc(&maps, inj->real[fn], inj->real[PP_AG_MALLOC])))
			inj->real[fn] = 0;
	}
	pp_maps__free(&maps);
}

/*
 * Lazy slots a module's loader scope may bind elsewhere (issue 24 item 9).
 *
 * A lazy slot (not bound yet: it points into the module's PLT) is
 * redirected to a wrapper that forwards to real[fn], the definition the
 * other slots are bound to, and restored to real[fn]. That is where the
 * loader would bind it only when the module looks symbols up in the global
 * scope. A module dlopen()ed with RTLD_DEEPBIND looks in its own DT_NEEDED
 * closure first, one in a dlmopen() namespace only there (with its own
 * libc), one with DT_SYMBOLIC in itself first: a plugin with its own
 * malloc would get glibc's malloc for some calls and its own free for the
 * block (or the reverse), "free(): invalid size". The link map does not
 * say how a module was loaded, so:
 *
 * - Modules loaded with the executable (its DT_NEEDED closure, names
 *   resolved to exactly one loaded module) use the global scope; only one
 *   with DT_SYMBOLIC that defines fn itself binds elsewhere.
 * - Any other module (dlopen()ed) may have been loaded with RTLD_DEEPBIND
 *   or into a namespace: its lazy slot of fn is left alone when a module
 *   of its closure (itself included) other than real[fn]'s defines fn, or
 *   when a needed name cannot be resolved among the scanned modules. A
 *   second copy of a library (a namespace's libc) makes its name resolve
 *   to both copies, so their users are left alone too.
 *
 * The cost is coverage: in a process whose allocator is not libc (jemalloc
 * linked), a dlopen()ed module's lazy slots are left alone, since libc is
 * in its closure. Bound slots are exact and need none of this: one bound
 * elsewhere than real[fn] is never redirected (patch_slots).
 */

/* The module (index) a definition belongs to, or -1. */
static ssize_t module_of(const struct pp_inject *inj, const struct pp_maps *maps, uint64_t addr)
{
	const struct pp_map *m = owner(maps, addr);
	ssize_t best = -1;

	for (size_t k = 0; m && k < inj->nmods; k++) {
		const struct module *mo = &inj->mods[k];

		if (mo->inode == m->inode && mo->dev_major == m->dev_major &&
		    mo->dev_minor == m->dev_minor && mo->start <= addr &&
		    (best < 0 || mo->start > inj->mods[best].start))
			best = (ssize_t)k;
	}
	return best;
}

/* Mark (in mark[], queue it in q) the scanned modules a DT_NEEDED name
 * resolves to; -ENOENT if none (the dynamic linker itself is not needed
 * for this: it defines none of the wrapped names). */
static int resolve_needed(const struct pp_inject *inj, const char *name, bool unique_only,
			  unsigned char *mark, size_t *q, size_t *qn)
{
	size_t hits = 0, first = 0;

	if (skip_module(name))
		return 0;
	for (size_t k = 0; k < inj->nmods; k++) {
		const struct module *mo = &inj->mods[k];

		if (strcmp(mo->soname, name) != 0 && strcmp(mo->name, name) != 0)
			continue;
		if (!hits++)
			first = k;
		if (!unique_only && !mark[k]) {
			mark[k] = 1;
			q[(*qn)++] = k;
		}
	}
	if (unique_only && hits == 1 && !mark[first]) {
		mark[first] = 1;
		q[(*qn)++] = first;
	}
	return hits ? 0 : -ENOENT;
}

/* Breadth-first over DT_NEEDED from q[0..*qn) (marked); returns false if
 * a name did not resolve. */
static bool closure(const struct pp_inject *inj, bool unique_only, unsigned char *mark, size_t *q,
		    size_t *qn)
{
	bool complete = true;

	for (size_t h = 0; h < *qn; h++) {
		const struct module *mo = &inj->mods[q[h]];

		for (size_t o = 0; o < mo->needed_len; o += strlen(mo->needed + o) + 1)
			if (resolve_needed(inj, mo->needed + o, unique_only, mark, q, qn) < 0)
				complete = false;
	}
	return complete;
}

/* Drop the unpatched lazy slots whose module may bind fn elsewhere than
 * real[fn] (above); counted in skipped. */
static void drop_lazy_elsewhere(struct pp_inject *inj)
{
	struct pp_maps maps = { 0 };
	ssize_t real_mod[PP_AG_NFN];
	unsigned char *startup = NULL, *mark = NULL;
	uint64_t *elsewhere = NULL; /* per module: fns its lazy slots may bind elsewhere */
	bool *done = NULL;
	size_t *q = NULL, qn = 0, k = 0;

	if (!inj->nslots || !inj->nmods)
		return;
	for (int fn = 0; fn < PP_AG_NFN; fn++)
		real_mod[fn] = -1;
	startup = calloc(inj->nmods, 1);
	mark = calloc(inj->nmods, 1);
	done = calloc(inj->nmods, sizeof(*done));
	elsewhere = calloc(inj->nmods, sizeof(*elsewhere));
	q = calloc(inj->nmods, sizeof(*q));
	if (!startup || !mark || !done || !elsewhere || !q || pp_maps__read(inj->pid, &maps) < 0) {
		/* cannot tell: leave every pending lazy slot alone */
		for (size_t i = 0; i < inj->nmods && elsewhere; i++)
			elsewhere[i] = ~0ull;
		goto drop;
	}
	for (int fn = 0; fn < PP_AG_NFN; fn++)
		if (inj->real[fn])
			real_mod[fn] = module_of(inj, &maps, inj->real[fn]);
	/* the executable's closure: the modules loaded with it */
	for (size_t i = 0; i < inj->nmods; i++) {
		if (inj->mods[i].exe) {
			startup[i] = 1;
			q[qn++] = i;
		}
	}
	closure(inj, true, startup, q, &qn);
	for (size_t i = 0; i < inj->nslots; i++) {
		const struct slot *sl = &inj->slots[i];
		const struct module *mo = &inj->mods[sl->module];

		if (sl->patched || sl->orig || sl->fn < 0 || done[sl->module])
			continue;
		done[sl->module] = true;
		if (startup[sl->module]) {
			elsewhere[sl->module] = mo->symbolic ? mo->defines : 0;
			continue;
		}
		memset(mark, 0, inj->nmods);
		qn = 0;
		mark[sl->module] = 1;
		q[qn++] = sl->module;
		if (!closure(inj, false, mark, q, &qn)) {
			elsewhere[sl->module] = ~0ull;
			continue;
		}
		for (size_t h = 0; h < qn; h++)
			for (int fn = 0; fn < PP_AG_NFN; fn++)
				if ((inj->mods[q[h]].defines >> fn & 1) &&
				    real_mod[fn] != (ssize_t)q[h])
					elsewhere[sl->module] |= 1ull << fn;
	}
drop:
	for (size_t i = 0; i < inj->nslots; i++) {
		const struct slot *sl = &inj->slots[i];

		if (elsewhere && !sl->patched && !sl->orig && sl->fn >= 0 &&
		    real_mod[sl->fn] != (ssize_t)sl->module &&
		    (elsewhere[sl->module] >> sl->fn & 1)) {
			inj->skipped++;
			continue;
		}
		inj->slots[k++] = *sl;
	}
	inj->nslots = k;
	pp_maps__free(&maps);
	free(startup);
	free(mark);
	free(done);
	free(elsewhere);
	free(q);
}

/* ------------------------------------------------------------- the agent */

static void fill_exp_table(uint32_t *t)
{
	for (int i = 0; i < PP_AGENT_EXP_TABLE; i++) {
		double u = (i + 0.5) / PP_AGENT_EXP_TABLE;

		t[i] = (uint32_t)(-log(u) * (double)(1u << PP_AGENT_EXP_SHIFT) + 0.5);
	}
}

static int image_hdr(struct pp_agent_hdr *h)
{
	if (pp_agent_image_len < sizeof(*h))
		return -ENOEXEC;
	memcpy(h, pp_agent_image, sizeof(*h));
	if (h->magic != PP_AGENT_MAGIC || h->version != PP_AGENT_VERSION || h->nfn != PP_AG_NFN ||
	    h->data_off < h->image_size || h->total_size <= h->data_off ||
	    h->total_size - h->data_off < sizeof(struct pp_agent_data))
		return -ENOEXEC;
	return 0;
}

/* An agent already mapped by an earlier podprof: its memfd mapping with
 * our header at its start. */
static int find_existing(struct pp_inject *inj)
{
	struct pp_maps maps = { 0 };
	int r = -ENOENT;

	if (pp_maps__read(inj->pid, &maps) < 0)
		return -ESRCH;
	for (size_t i = 0; i < maps.n; i++) {
		const struct pp_map *m = &maps.v[i];
		struct pp_agent_hdr h;

		if (!m->path || strncmp(m->path, "/memfd:" PP_AGENT_MEMFD_NAME, 20) != 0 ||
		    m->offset != 0 || !(m->prot & PP_PROT_X))
			continue;
		if (read_mem(inj->pid, m->start, &h, sizeof(h)) < 0 || h.magic != PP_AGENT_MAGIC)
			continue;
		if (h.version != PP_AGENT_VERSION || memcmp(&h, &inj->hdr, sizeof(h)) != 0) {
			r = -EEXIST; /* another version: never load a second one */
			break;
		}
		inj->base = m->start;
		r = 0;
		break;
	}
	pp_maps__free(&maps);
	return r;
}

/* podprof's own descriptor for the memfd behind the agent: through the
 * target's descriptor table (the agent keeps its memfd open). */
static int open_agent_fd(struct pp_inject *inj)
{
	char p[96], l[128], name[64];
	DIR *d;
	struct dirent *e;
	int fd = -ENOENT;

	snprintf(name, sizeof(name), "/memfd:%s", PP_AGENT_MEMFD_NAME);
	snprintf(p, sizeof(p), "/proc/%d/fd", (int)inj->pid);
	d = opendir(p);
	if (!d)
		return -errno;
	while ((e = readdir(d)) && fd < 0) {
		char fp[400];
		ssize_t n;
		struct stat st;

		if (e->d_name[0] == '.')
			continue;
		snprintf(fp, sizeof(fp), "%s/%s", p, e->d_name);
		n = readlink(fp, l, sizeof(l) - 1);
		if (n <= 0)
			continue;
		l[n] = '\0';
		if (strncmp(l, name, strlen(name)) != 0)
			continue;
		fd = open(fp, O_RDONLY | O_CLOEXEC);
		if (fd >= 0 && (fstat(fd, &st) < 0 || (uint64_t)st.st_size < inj->hdr.total_size)) {
			close(fd);
			fd = -ENOENT;
		}
	}
	closedir(d);
	return fd;
}

static int write_data(struct pp_inject *inj, int fd)
{
	/* only the head (up to the thread table) needs writing: the rest is 0,
	 * and the whole struct (its ring) is megabytes; fields at their offsets */
	const size_t head = offsetof(struct pp_agent_data, overflow);
	uint8_t *b = calloc(1, head);
	uint64_t v;
	ssize_t w;

#define PUT(field, src, len) memcpy(b + offsetof(struct pp_agent_data, field), (src), (len))
	if (!b)
		return -ENOMEM;
	v = PP_AGENT_MAGIC;
	PUT(magic, &v, sizeof(v));
	PUT(sample_rate, &inj->sample_rate, sizeof(v));
	v = pp_now_mono_ns() ^ ((uint64_t)inj->pid << 32) ^ 0x5bd1e995u;
	PUT(seed, &v, sizeof(v));
	PUT(real, inj->real, sizeof(inj->real));
	{
		uint32_t t[PP_AGENT_EXP_TABLE];

		fill_exp_table(t);
		PUT(exp_table, t, sizeof(t));
	}
#undef PUT
	w = pwrite(fd, b, head, (off_t)inj->hdr.data_off);
	free(b);
	return w == (ssize_t)head ? 0 : -EIO;
}

struct map_args {
	struct pp_inject *inj;
	char *reason;
	size_t n;
};

/* Seize a thread and map a fresh agent (inside pp_tracee__run). */
static int map_agent_stopped(void *p)
{
	struct map_args *a = p;
	struct pp_inject *inj = a->inj;
	char *reason = a->reason;
	size_t n = a->n;
	struct stopped s;
	const char name[16] = PP_AGENT_MEMFD_NAME;
	long scratch = -1, tfd = -1, addr = -1, rr;
	char fdpath[64];
	uint64_t pause;
	int fd = -1, r;

	r = stop_one(inj->pid, inj->max_pause_ms, &s, reason, n);
	if (r < 0)
		return r;
	/* The memfd's name goes in a page mapped for it, never below the
	 * thread's stack pointer: that may be an alternate signal stack
	 * carved out of someone else's data. */
	r = remote_syscall(&s, SYS_mmap, 0, PAGE_SZ, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, (uint64_t)-1, 0, &scratch);
	if (r == 0 && scratch < 0 && scratch > -4096)
		r = (int)scratch;
	if (r < 0) {
		scratch = -1;
		snprintf(reason, n, "mmap in the target failed: %s%s", strerror(-r),
			 r == -EPERM ? " (seccomp?)" : "");
		goto out;
	}
	/* through the seized thread: /proc/PID/mem may not open for writing
	 * (a dumpable process of another uid, podprof without DAC_OVERRIDE) */
	for (size_t i = 0; i < sizeof(name); i += 8) {
		uint64_t wv;

		memcpy(&wv, name + i, 8);
		if (ptrace(PTRACE_POKEDATA, s.t.tid, (void *)((uint64_t)scratch + i), (void *)wv) <
		    0) {
			r = -errno;
			snprintf(reason, n, "cannot write the agent's name into the target: %s",
				 strerror(errno));
			goto unmap;
		}
	}
	r = remote_syscall(&s, SYS_memfd_create, (uint64_t)scratch, MFD_CLOEXEC, 0, 0, 0, 0, &tfd);
	if (r == 0 && tfd < 0)
		r = (int)tfd;
	if (r < 0) {
		tfd = -1;
		snprintf(reason, n, "memfd_create in the target failed: %s%s", strerror(-r),
			 r == -EPERM || r == -ENOSYS ? " (seccomp?)" : "");
		goto unmap;
	}
	/* The descriptor the agent keeps (a restarted podprof takes the
	 * agent over through it) moves to the top of the process's range: its
	 * own next open() gets the number it would have got without podprof. */
	{
		long hi = -1, lim = nofile_soft(inj->pid);

		if (lim > 64 &&
		    remote_syscall(&s, SYS_fcntl, (uint64_t)tfd, F_DUPFD_CLOEXEC,
				   (uint64_t)(lim - 16), 0, 0, 0, &hi) == 0 &&
		    hi >= lim - 16) {
			remote_syscall(&s, SYS_close, (uint64_t)tfd, 0, 0, 0, 0, 0, &rr);
			tfd = hi;
		}
	}
	snprintf(fdpath, sizeof(fdpath), "/proc/%d/fd/%ld", (int)inj->pid, tfd);
	fd = open(fdpath, O_RDWR | O_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)inj->hdr.total_size) < 0 ||
	    pwrite(fd, pp_agent_image, pp_agent_image_len, 0) != (ssize_t)pp_agent_image_len ||
	    write_data(inj, fd) < 0) {
		r = -errno ? -errno : -EIO;
		snprintf(reason, n, "cannot write the agent's memfd: %s", strerror(-r));
		goto close_remote;
	}
	r = remote_syscall(&s, SYS_mmap, 0, inj->hdr.total_size, PROT_READ | PROT_EXEC, MAP_PRIVATE,
			   (uint64_t)tfd, 0, &addr);
	if (r == 0 && addr < 0 && addr > -4096)
		r = (int)addr;
	if (r < 0) {
		snprintf(reason, n, "mmap in the target failed: %s", strerror(-r));
		goto close_remote;
	}
	r = remote_syscall(&s, SYS_mmap, (uint64_t)addr + inj->hdr.data_off,
			   inj->hdr.total_size - inj->hdr.data_off, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_FIXED, (uint64_t)tfd, inj->hdr.data_off, &rr);
	if (r == 0 && rr != addr + (long)inj->hdr.data_off)
		r = rr < 0 && rr > -4096 ? (int)rr : -EFAULT;
	if (r < 0) {
		snprintf(reason, n, "mmap of the agent's data failed: %s", strerror(-r));
		remote_syscall(&s, SYS_munmap, (uint64_t)addr, inj->hdr.total_size, 0, 0, 0, 0,
			       &rr);
		goto close_remote;
	}
	inj->base = (uint64_t)addr;
	/* keep a read-only descriptor: uprobes are refused on files podprof
	 * holds open for writing */
	inj->memfd = open(fdpath, O_RDONLY | O_CLOEXEC);
	if (inj->memfd < 0) {
		char self[64];

		snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
		inj->memfd = open(self, O_RDONLY | O_CLOEXEC);
	}
	inj->target_fd = tfd;
	tfd = -1; /* stays open in the target: a restarted podprof finds it */
close_remote:
	if (tfd >= 0)
		remote_syscall(&s, SYS_close, (uint64_t)tfd, 0, 0, 0, 0, 0, &rr);
unmap:
	remote_syscall(&s, SYS_munmap, (uint64_t)scratch, PAGE_SZ, 0, 0, 0, 0, &rr);
out:
	pause = resume(&s);
	inj->pause_ns = PP_MAX(inj->pause_ns, pause);
	if (fd >= 0)
		close(fd);
	return r;
}

static int map_agent(struct pp_inject *inj, char *reason, size_t n)
{
	struct map_args a = { inj, reason, n };
	int r = pp_tracee__run(map_agent_stopped, &a);

	if (r == -ECANCELED)
		snprintf(reason, n, "podprof is stopping");
	return r;
}

static bool seccomp_filtered(pid_t pid)
{
	char p[64], *text = NULL, *l;
	size_t len = 0;
	bool f = false;

	snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
	if (pp_read_file(p, 1 << 20, &text, &len) < 0)
		return false;
	l = strstr(text, "\nSeccomp:");
	if (l)
		f = strtol(l + 9, NULL, 10) != 0;
	free(text);
	return f;
}

int pp_inject__prepare(pid_t pid, const struct pp_inject_opts *opts, struct pp_inject **ret,
		       char *reason, size_t n)
{
	struct pp_inject *inj;
	bool static_exe = false;
	size_t patchable = 0;
	int r;

	if (!ret || pid <= 0 || !reason || !n)
		return -EINVAL;
	reason[0] = '\0';
	if (pid == getpid()) {
		snprintf(reason, n, "podprof itself");
		return -EDEADLK;
	}
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	inj = calloc(1, sizeof(*inj));
	if (!inj)
		return -ENOMEM;
	inj->pid = pid;
	inj->memfd = -1;
	inj->target_fd = -1;
	inj->sample_rate = opts ? opts->sample_rate : 524288;
	inj->max_pause_ms = opts && opts->max_pause_ms ? opts->max_pause_ms : 100;
	if (opts && opts->allocator_path)
		snprintf(inj->alloc_path, sizeof(inj->alloc_path), "%s", opts->allocator_path);
	r = image_hdr(&inj->hdr);
	if (r < 0) {
		snprintf(reason, n, "agent image invalid");
		goto fail;
	}
	if (seccomp_filtered(pid)) {
		snprintf(reason, n, "the target runs under a seccomp filter");
		r = -EPERM;
		goto fail;
	}
	/* RLIMIT_AS and the memory cgroup: the agent must not make the
	 * target's own allocations fail or get it OOM-killed */
	if (pp_headroom__check(pid, inj->hdr.total_size, reason, n) < 0) {
		r = -ENOMEM;
		goto fail;
	}
	r = find_existing(inj);
	if (r == -EEXIST) {
		snprintf(reason, n, "an agent of another podprof version is loaded");
		goto fail;
	}
	if (r == 0) {
		uint64_t magic = 0;

		inj->reused = true;
		if (read_mem(pid, data_addr(inj, magic), &magic, sizeof(magic)) < 0 ||
		    magic != PP_AGENT_MAGIC ||
		    read_mem(pid, data_addr(inj, real), inj->real, sizeof(inj->real)) < 0) {
			snprintf(reason, n, "existing agent unreadable");
			r = -EIO;
			goto fail;
		}
	}
	/* 1. Everything from outside first. */
	r = scan(inj, &static_exe);
	if (r < 0) {
		snprintf(reason, n, "cannot read the target's modules: %s", strerror(-r));
		goto fail;
	}
	if (static_exe) {
		snprintf(reason, n, "static executable");
		r = -ENOEXEC;
		goto fail;
	}
	choose_real(inj);
	drop_lazy_elsewhere(inj);
	for (size_t i = 0; i < inj->nslots; i++)
		patchable += inj->real[inj->slots[i].fn] != 0;
	if (!inj->real[PP_AG_MALLOC] || !inj->real[PP_AG_FREE] || !patchable) {
		snprintf(reason, n,
			 "no malloc/free relocation to redirect (allocator linked "
			 "into the executable?)");
		r = -ENOEXEC;
		goto fail;
	}
	/* 2. Map the agent (or reuse it). */
	if (inj->reused) {
		inj->memfd = open_agent_fd(inj);
		if (inj->memfd < 0) {
			r = inj->memfd;
			snprintf(reason, n, "existing agent's memfd is closed");
			goto fail;
		}
		if (inj->sample_rate)
			write_mem(pid,
				  inj->base + inj->hdr.data_off +
					  offsetof(struct pp_agent_data, sample_rate),
				  &inj->sample_rate, sizeof(inj->sample_rate));
	} else if ((r = std_fd_closed(pid)) >= 0) {
		/* memfd_create takes the lowest free descriptor: with fd r
		 * closed, the agent's file would become the process's fd r,
		 * and a daemon writing its log there would write into the
		 * agent's code */
		snprintf(reason, n, "its fd %d is closed (the agent's file would take it)", r);
		r = -EBADF;
		goto fail;
	} else {
		r = map_agent(inj, reason, n);
		if (r < 0)
			goto fail;
	}
	snprintf(inj->probe_path, sizeof(inj->probe_path), "/proc/self/fd/%d", inj->memfd);
	*ret = inj;
	return 0;
fail:
	pp_inject__detach(inj);
	return r;
}

static int static_exe_unbounded(void *arg);

/* The executable may sit on a file system that never answers: read on an
 * opener thread, under its deadline (procfs.h); "no" when it times out. */
bool pp_inject__static_exe(pid_t pid)
{
	return pp_proc__call_bounded(static_exe_unbounded, &pid, sizeof(pid)) == 1;
}

static int static_exe_unbounded(void *arg)
{
	pid_t pid = *(pid_t *)arg;
	char p[64];
	size_t nph = 0;
	bool dyn = false;
	Elf *elf;
	int fd;

	snprintf(p, sizeof(p), "/proc/%d/exe", (int)pid);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || elf_version(EV_CURRENT) == EV_NONE) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (elf && elf_getphdrnum(elf, &nph) == 0) {
		for (size_t i = 0; i < nph; i++) {
			GElf_Phdr ph;

			if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_DYNAMIC)
				dyn = true;
		}
	} else {
		dyn = true; /* unreadable: let the scan decide */
	}
	if (elf)
		elf_end(elf);
	close(fd);
	return !dyn;
}

const char *pp_inject__probe_path(const struct pp_inject *inj)
{
	return inj ? inj->probe_path : "";
}

/*
 * Where podprof's uprobe goes in a notification point (see agent-blob.c):
 * 5 bytes past its leading 5-byte nop, on `push %rbp`, which every kernel
 * emulates. Never on the nop itself: Linux 6.18 optimizes a uprobe on a
 * 5-byte nop into a call to a per-process [uprobes-trampoline] page, which
 * fork children do not inherit, and a child forked while the probe was
 * optimized (a pre-fork server's worker) keeps the call after the probe is
 * gone: SIGSEGV at its next sampled allocation. The nop stays in the agent
 * for older podprofs' agents (ABI).
 */
#define NOTIFY_NOP5_BYTES 5

static uint64_t notify_skip(void)
{
	return NOTIFY_NOP5_BYTES;
}

uint64_t pp_inject__alloc_off(const struct pp_inject *inj)
{
	return inj ? inj->hdr.notify_alloc_off + notify_skip() : 0;
}

uint64_t pp_inject__free_off(const struct pp_inject *inj)
{
	return inj ? inj->hdr.notify_free_off + notify_skip() : 0;
}

/*
 * GOT slot writes. A slot may be loaded by a running thread at any moment,
 * so it must change with one aligned 8-byte store. Neither /proc/PID/mem
 * nor PTRACE_POKEDATA promises that: both copy through the kernel's
 * memcpy (access_remote_vm -> copy_to_user_page), which on CPUs with fast
 * short rep movsb (FSRM, this machine) is a `rep movsb` whose stores are
 * architecturally byte-sized. So a target thread makes the store itself:
 * one thread is stopped (stop_one), its rip set to the agent's
 * pp_agent_store (`mov %rsi,(%rdi)`) and single-stepped through that one
 * instruction. A RELRO page is made writable around its stores by remote
 * mprotect calls in the same thread and put back as the maps showed it;
 * other threads only ever read the slot, so the short window changes
 * nothing they can observe. Used for every slot write: the first patch,
 * modules loaded later (dlopen) and the restore on detach.
 */
struct slot_writer {
	struct stopped s;
	bool tried; /* stop_one was attempted */
	struct pp_maps maps;
	bool have_maps;
	uint64_t open_page; /* page made writable, 0: none */
	uint32_t open_prot; /* its protection before (PROT_*) */
};

static uint32_t to_prot(uint32_t pp)
{
	return ((pp & PP_PROT_R) ? PROT_READ : 0) | ((pp & PP_PROT_W) ? PROT_WRITE : 0) |
	       ((pp & PP_PROT_X) ? PROT_EXEC : 0);
}

static int close_page(struct slot_writer *w)
{
	long rr = 0;
	int r;

	if (!w->open_page)
		return 0;
	r = remote_syscall(&w->s, SYS_mprotect, w->open_page, PAGE_SZ, w->open_prot, 0, 0, 0, &rr);
	w->open_page = 0;
	return r < 0 ? r : (rr < 0 ? (int)rr : 0);
}

/* Single-step the stopped thread through pp_agent_store. */
static int remote_store(struct stopped *s, uint64_t gadget, uint64_t addr, uint64_t v)
{
	struct user_regs_struct r = s->t.regs;

	r.rip = gadget;
	r.rdi = addr;
	r.rsi = v;
	return pp_tracee__step(&s->t, &r, 3); /* mov %rsi,(%rdi) */
}

/*
 * Writes v into the slot at addr of module mo (NULL: no module check),
 * which must hold expect (when expect is not 0): the module must still be
 * mapped, the same file at the same place, as the maps read at the stop
 * show, and the slot's value is read again right before the store; else
 * -ESTALE and nothing is written (a library unloaded and another loaded
 * in its place keeps its data).
 */
static int write_slot(struct pp_inject *inj, struct slot_writer *w, const struct module *mo,
		      uint64_t addr, uint64_t expect, uint64_t v)
{
	uint64_t page = addr & ~(uint64_t)(PAGE_SZ - 1), cur = 0;
	const struct pp_map *m;
	char why[128];
	long rr = 0;
	int r;

	if (addr & 7)
		return -EINVAL;
	if (read_mem(inj->pid, addr, &cur, sizeof(cur)) == 0 && cur == v)
		return 0;
	if (!w->s.t.seized) {
		if (w->tried)
			return -ESRCH;
		w->tried = true;
		r = stop_one(inj->pid, inj->max_pause_ms, &w->s, why, sizeof(why));
		if (r < 0)
			return r;
		w->have_maps = pp_maps__read(inj->pid, &w->maps) == 0;
	}
	if (!w->have_maps)
		return -EIO;
	if (mo) {
		const struct pp_map *first = pp_maps__find(&w->maps, mo->start);

		m = pp_maps__find(&w->maps, addr);
		if (!first || !same_file(mo, first) || !m || m->inode != mo->inode ||
		    m->dev_major != mo->dev_major || m->dev_minor != mo->dev_minor)
			return -ESTALE;
	}
	if (page != w->open_page) {
		r = close_page(w);
		if (r < 0)
			return r;
		m = pp_maps__find(&w->maps, addr);
		if (!m)
			return -EFAULT;
		if (!(m->prot & PP_PROT_W)) {
			r = remote_syscall(&w->s, SYS_mprotect, page, PAGE_SZ,
					   to_prot(m->prot) | PROT_WRITE, 0, 0, 0, &rr);
			if (r < 0)
				return r;
			if (rr < 0)
				return (int)rr;
			w->open_page = page;
			w->open_prot = to_prot(m->prot);
		}
	}
	if (expect && (read_mem(inj->pid, addr, &cur, sizeof(cur)) < 0 || cur != expect))
		return -ESTALE;
	return remote_store(&w->s, inj->base + inj->hdr.store_off, addr, v);
}

/* Put the last page back and let the thread go; the pause it took. */
static uint64_t writer_done(struct slot_writer *w)
{
	uint64_t pause;

	if (w->s.t.seized)
		close_page(w);
	pause = resume(&w->s);
	if (w->have_maps)
		pp_maps__free(&w->maps);
	w->have_maps = false;
	return pause;
}

static int sync_real(struct pp_inject *inj)
{
	return write_mem(inj->pid,
			 inj->base + inj->hdr.data_off + offsetof(struct pp_agent_data, real),
			 inj->real, sizeof(inj->real));
}

/* pp_inject__patch's redirections, inside pp_tracee__run. */
static int patch_slots(void *p)
{
	struct pp_inject *inj = p;
	struct slot_writer w = { 0 };
	int r = 0, done = 0;

	for (size_t i = 0; i < inj->nslots; i++) {
		struct slot *sl = &inj->slots[i];
		uint64_t real = inj->real[sl->fn], expect = sl->orig;

		if (sl->patched)
			continue;
		if (!real || (sl->orig && sl->orig != real)) {
			if (!sl->orig || sl->orig != real) {
				sl->patched = false;
				sl->fn = -1 - sl->fn; /* counted once as skipped */
			}
			continue;
		}
		r = write_slot(inj, &w, &inj->mods[sl->module], sl->addr, expect,
			       inj->base + inj->hdr.wrap_off[sl->fn]);
		if (r == -ESTALE) {
			/* its module went away, or the slot changed: forget it */
			sl->fn = -1 - sl->fn;
			r = 0;
			continue;
		}
		if (r < 0)
			break;
		if (!sl->orig)
			sl->orig = real; /* lazy slot: restore to the bound function */
		sl->patched = true;
		inj->ever_patched = true;
		inj->mods[sl->module].nslots++;
		done++;
	}
	uint64_t pause = writer_done(&w);
	inj->pause_ns = PP_MAX(inj->pause_ns, pause);
	return r < 0 ? r : done;
}

int pp_inject__patch(struct pp_inject *inj)
{
	uint64_t before[PP_AG_NFN];
	int r = 0;

	struct pp_agent_hdr h;

	if (!inj)
		return -EINVAL;
	if (inj->preloaded)
		return 0; /* the loader binds every module to it */
	/* still the image we injected (not exec'd since) */
	if (read_mem(inj->pid, inj->base, &h, sizeof(h)) < 0 || memcmp(&h, &inj->hdr, sizeof(h)))
		return -ESTALE;
	memcpy(before, inj->real, sizeof(before));
	r = scan(inj, NULL);
	if (r < 0)
		return r;
	choose_real(inj);
	/* A target a wrapper already forwards to never changes (a thread may
	 * be loading it); only entries still 0 are filled, before any slot
	 * leads to their wrapper, so no thread reads them while written. */
	for (int fn = 0; fn < PP_AG_NFN; fn++)
		if (before[fn])
			inj->real[fn] = before[fn];
	drop_lazy_elsewhere(inj);
	if (memcmp(before, inj->real, sizeof(before)) != 0) {
		r = sync_real(inj);
		if (r < 0)
			return r;
	}
	bool pending = false;
	for (size_t i = 0; i < inj->nslots && !pending; i++)
		pending = !inj->slots[i].patched;
	if (pending)
		r = pp_tracee__run(patch_slots, inj);
	/* slots marked skipped: drop them from the list */
	size_t k = 0;
	for (size_t i = 0; i < inj->nslots; i++) {
		if (inj->slots[i].fn < 0) {
			inj->skipped++;
			continue;
		}
		inj->slots[k++] = inj->slots[i];
	}
	inj->nslots = k;
	return r;
}

static int unmap_agent(void *p)
{
	struct pp_inject *inj = p;
	struct stopped s;
	char why[128];
	long rr;

	if (stop_one(inj->pid, inj->max_pause_ms, &s, why, sizeof(why)) < 0)
		return -EAGAIN;
	remote_syscall(&s, SYS_munmap, inj->base, inj->hdr.total_size, 0, 0, 0, 0, &rr);
	remote_syscall(&s, SYS_close, (uint64_t)inj->target_fd, 0, 0, 0, 0, 0, &rr);
	resume(&s);
	return 0;
}

void pp_inject__unload(struct pp_inject *inj)
{
	struct pp_agent_hdr h;

	if (!inj)
		return;
	if (inj->preloaded) {
		preload_release(inj);
		return;
	}
	/* Only an agent this pp_inject mapped and never redirected a slot to:
	 * no thread can be running its code. */
	if (!inj->reused && !inj->ever_patched && inj->base && inj->target_fd >= 0 &&
	    read_mem(inj->pid, inj->base, &h, sizeof(h)) == 0 &&
	    memcmp(&h, &inj->hdr, sizeof(h)) == 0)
		pp_tracee__run(unmap_agent, inj);
	pp_inject__detach(inj);
}

int pp_inject__stats(struct pp_inject *inj, struct pp_inject_stats *ret)
{
	struct pp_agent_thread th[64];
	size_t nth = (1u << PP_AGENT_THREAD_BITS) + 1;
	uint64_t off;
	int fd;
	uint64_t set_full = 0;

	if (!inj || !ret)
		return -EINVAL;
	memset(ret, 0, sizeof(*ret));
	ret->reused = inj->reused;
	ret->skipped = inj->skipped;
	ret->pause_ns = inj->pause_ns;
	for (size_t i = 0; i < inj->nmods; i++) {
		size_t l = strlen(ret->coverage);

		if (!inj->mods[i].nslots)
			continue;
		ret->modules++;
		if (l + 2 < sizeof(ret->coverage))
			snprintf(ret->coverage + l, sizeof(ret->coverage) - l, "%s%s:%u",
				 l ? " " : "", inj->mods[i].name, inj->mods[i].nslots);
	}
	for (size_t i = 0; i < inj->nslots; i++)
		ret->slots += inj->slots[i].patched;
	/* Chunks into a stack buffer through one descriptor: a 256 KiB heap
	 * buffer per call (twice a second: tick and /metrics) meant an mmap,
	 * 64 page faults and an munmap with a TLB-shootdown IPI each time,
	 * visible in a perf profile of podprof next to a busy redis. */
	off = inj->base + inj->hdr.data_off + offsetof(struct pp_agent_data, overflow);
	fd = mem_fd(inj->pid, O_RDONLY);
	for (size_t i = 0; (fd >= 0 || fd == -EACCES || fd == -EPERM) && i < nth;) {
		size_t k = PP_MIN(nth - i, sizeof(th) / sizeof(th[0]));

		if (fd >= 0 ? pread(fd, th, k * sizeof(*th), (off_t)(off + i * sizeof(*th))) !=
				      (ssize_t)(k * sizeof(*th))
			    : vm_read(inj->pid, off + i * sizeof(*th), th, k * sizeof(*th)) < 0)
			break;
		for (size_t j = 0; j < k; j++) {
			ret->calls += th[j].calls;
			ret->bytes += th[j].bytes;
			ret->frees += th[j].frees;
		}
		i += k;
	}
	if (fd >= 0)
		close(fd);
	if (read_mem(inj->pid,
		     inj->base + inj->hdr.data_off + offsetof(struct pp_agent_data, set_full),
		     &set_full, sizeof(set_full)) == 0)
		ret->set_full = set_full;
	{
		uint64_t v[2];

		if (read_mem(inj->pid, data_addr(inj, ring_full), v, sizeof(v)) == 0) {
			ret->ring_full = v[0];
			ret->ring_nostack = v[1];
		}
	}
	return 0;
}

/* ---------------------------------------------------- the preloaded agent */

/* A write into the preloaded agent's data (never anywhere else). */
static int preload_write(struct pp_inject *inj, uint64_t addr, const void *buf, size_t len)
{
	if (inj->memrw < 0)
		return vm_write(inj->mmfd, inj->pid, addr, buf, len);
	return pwrite(inj->memrw, buf, len, (off_t)addr) == (ssize_t)len ? 0 : -EIO;
}

static void preload_free(struct pp_inject *inj)
{
	if (inj->memrw >= 0)
		close(inj->memrw);
	if (inj->mmfd >= 0)
		close(inj->mmfd);
	free(inj);
}

/* Is [a, a + len) inside readable, writable, private mappings? */
static bool rw_range(const struct pp_maps *maps, uint64_t a, uint64_t len)
{
	uint64_t end = a + len;

	if (end < a)
		return false;
	for (size_t i = 0; i < maps->n && a < end; i++) {
		const struct pp_map *m = &maps->v[i];

		if (m->end <= a)
			continue;
		if (m->start > a || !(m->prot & PP_PROT_R) || !(m->prot & PP_PROT_W) || m->shared)
			return false;
		a = m->end;
	}
	return a >= end;
}

/* The header of a preloaded agent in the file-backed mappings of a module
 * named like it: *ret_at its address; -ENOENT none, -EPROTO another
 * version (*ret_version). Everything read is the target's: checked. */
static int preload_hdr(pid_t pid, const struct pp_maps *maps, struct pp_agent_hdr *ret,
		       uint64_t *ret_at, uint32_t *ret_version)
{
	const size_t cap = 1u << 20;
	uint8_t *buf = NULL;
	int r = -ENOENT;

	for (size_t i = 0; i < maps->n && r == -ENOENT; i++) {
		const struct pp_map *m = &maps->v[i];
		const char *base = m->path ? strrchr(m->path, '/') : NULL;
		size_t len = (size_t)PP_MIN(m->end - m->start, (uint64_t)cap);

		if (!base || m->special || !(m->prot & PP_PROT_R) ||
		    !strstr(base, "podprof-agent") || strncmp(m->path, "/memfd:", 7) == 0)
			continue;
		if (!buf && !(buf = malloc(cap)))
			return -ENOMEM;
		if (read_mem(pid, m->start, buf, len) < 0)
			continue;
		for (size_t o = 0; o + sizeof(*ret) <= len; o += 64) {
			struct pp_agent_hdr h;

			memcpy(&h, buf + o, sizeof(h));
			if (h.magic != PP_AGENT_MAGIC)
				continue;
			if (h.version != PP_AGENT_VERSION || h.nfn != PP_AG_NFN) {
				*ret_version = h.version;
				r = -EPROTO;
				continue;
			}
			*ret = h;
			*ret_at = m->start + o;
			r = 0;
			break;
		}
	}
	free(buf);
	return r;
}

int pp_inject__preload_find(pid_t pid, const struct pp_inject_opts *opts, struct pp_inject **ret,
			    char *reason, size_t n)
{
	struct pp_maps maps = { 0 };
	struct pp_agent_hdr h = { 0 };
	struct pp_inject *inj = NULL;
	uint64_t at = 0, data, v[3] = { 0 };
	uint32_t version = 0;
	/* first: the address space everything below reads and writes */
	int mmfd = open_maps(pid), memrw = mem_fd(pid, O_RDWR), r;

	*ret = NULL;
	if (memrw == -EACCES || memrw == -EPERM)
		memrw = -1; /* another user's: process_vm_writev, checked on mmfd */
	r = mmfd < 0 ? mmfd : memrw < -1 ? memrw : pp_maps__read(pid, &maps);
	if (r < 0) {
		snprintf(reason, n, "cannot read its maps (%s)", strerror(-r));
		goto fail;
	}
	r = preload_hdr(pid, &maps, &h, &at, &version);
	data = h.data_off;
	if (r == -ENOENT) {
		snprintf(reason, n, "no preloaded agent");
	} else if (r == -EPROTO) {
		snprintf(reason, n, "preloaded agent of another version (%u, podprof has %u)",
			 version, PP_AGENT_VERSION);
	} else if (r == 0 && !rw_range(&maps, data, offsetof(struct pp_agent_data, ring))) {
		snprintf(reason, n, "preloaded agent's data not where its header says");
		r = -EBADMSG;
	} else if (r == 0 && pp_headroom__check(pid, opts->ring_bytes, reason, n) < 0) {
		/* the ring the agent would map counts against the limits */
		r = -ENOMEM;
	} else if (r == 0 && (read_mem(pid, data + offsetof(struct pp_agent_data, enabled), v,
				       sizeof(v)) < 0 ||
			      v[1] != 1)) {
		snprintf(reason, n, "preloaded agent not initialised");
		r = -EAGAIN;
	}
	pp_maps__free(&maps);
	if (r < 0)
		goto fail;
	inj = calloc(1, sizeof(*inj));
	if (!inj) {
		r = -ENOMEM;
		goto fail;
	}
	inj->pid = pid;
	inj->memfd = -1;
	inj->target_fd = -1;
	inj->preloaded = true;
	inj->reused = v[0] != 0; /* enabled by an earlier podprof */
	inj->base = at;
	inj->hdr = (struct pp_agent_hdr){
		.magic = h.magic, .version = h.version, .nfn = h.nfn, .data_off = data - at
	};
	inj->sample_rate = opts->sample_rate;
	inj->mmfd = mmfd;
	inj->memrw = memrw;
	mmfd = memrw = -1;
	{
		uint32_t t[PP_AGENT_EXP_TABLE];
		uint64_t seed = pp_now_mono_ns() ^ ((uint64_t)pid << 32) ^ 0x5bd1e995u, on = 1;

		fill_exp_table(t);
		r = preload_write(inj, data_addr(inj, seed), &seed, sizeof(seed));
		if (!r)
			r = preload_write(inj, data_addr(inj, exp_table), t, sizeof(t));
		if (!r)
			r = preload_write(inj, data_addr(inj, sample_rate), &inj->sample_rate,
					  sizeof(inj->sample_rate));
		if (!r)
			r = preload_write(inj, data_addr(inj, ring_req), &opts->ring_bytes,
					  sizeof(opts->ring_bytes));
		if (!r) /* this process records (a fork child is adopted here) */
			r = preload_write(inj, data_addr(inj, owner_pid),
					  &(uint64_t){ (uint64_t)pid }, sizeof(uint64_t));
		if (!r) /* an earlier podprof's request to give the ring back */
			r = preload_write(inj, data_addr(inj, release), &(uint64_t){ 0 },
					  sizeof(uint64_t));
		if (!r)
			r = preload_write(inj, data_addr(inj, enabled), &on, sizeof(on));
	}
	if (r < 0) {
		snprintf(reason, n, "cannot enable the preloaded agent (%s)", strerror(-r));
		preload_free(inj);
		return r;
	}
	*ret = inj;
	return 0;
fail:
	if (mmfd >= 0)
		close(mmfd);
	if (memrw >= 0)
		close(memrw);
	return r;
}

extern const unsigned char pp_agent_so[];
extern const size_t pp_agent_so_len;

int pp_inject__install_preload(const char *dir, char *ret_path, size_t n)
{
	char tmp[PATH_MAX];
	size_t off = 0;
	int fd, r = 0;

	if (!dir || dir[0] != '/')
		return -EINVAL;
	if ((size_t)snprintf(ret_path, n, "%s/libpodprof-agent.so", dir) >= n ||
	    (size_t)snprintf(tmp, sizeof(tmp), "%s/.libpodprof-agent.so.%d", dir, (int)getpid()) >=
		    sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	while (off < pp_agent_so_len && !r) {
		ssize_t w = write(fd, pp_agent_so + off, pp_agent_so_len - off);

		if (w < 0 && errno != EINTR)
			r = -errno;
		else if (w > 0)
			off += (size_t)w;
	}
	if (!r && (fchmod(fd, 0644) < 0 || fsync(fd) < 0))
		r = -errno;
	if (close(fd) < 0 && !r)
		r = -errno;
	if (!r && rename(tmp, ret_path) < 0)
		r = -errno;
	if (r)
		unlink(tmp);
	return r;
}

bool pp_inject__preloaded(const struct pp_inject *inj)
{
	return inj && inj->preloaded;
}

/* Dormant again: the wrappers forward only; what it sampled stays. */
static void preload_release(struct pp_inject *inj)
{
	uint64_t off = 0, on = 1;

	preload_write(inj, data_addr(inj, ring_on), &off, sizeof(off));
	preload_write(inj, data_addr(inj, enabled), &off, sizeof(off));
	preload_write(inj, data_addr(inj, release), &on, sizeof(on));
	preload_free(inj);
}

/* ------------------------------------------------------ the in-process ring */

#define RING_CHUNK (PP_AGENT_MAX_COPY + sizeof(struct pp_agent_rec_alloc) + 32768)
#define RING_STALL_NS 1000000000ull /* a record left incomplete this long is skipped */

#define ring_addr(rg, field) ((rg)->data + offsetof(struct pp_agent_data, field))

static int ring_write64(struct pp_inject_ring *rg, uint64_t addr, uint64_t v)
{
	if (rg->fd < 0)
		return vm_write(rg->mmfd, rg->pid, addr, &v, sizeof(v));
	return pwrite(rg->fd, &v, sizeof(v), (off_t)addr) == (ssize_t)sizeof(v) ? 0 : -EIO;
}

/* len bytes at addr: 0, or -errno */
static int ring_pread(struct pp_inject_ring *rg, void *buf, size_t len, uint64_t addr)
{
	if (rg->fd < 0)
		return vm_read(rg->pid, addr, buf, len);
	return pread(rg->fd, buf, len, (off_t)addr) == (ssize_t)len ? 0 : -EIO;
}

struct pp_inject_ring *pp_inject__ring_open(struct pp_inject *inj, uint32_t copy_bytes,
					    int *ret_err)
{
	struct pp_agent_thread th[64];
	const size_t nth = 1u << PP_AGENT_THREAD_BITS;
	struct pp_inject_ring *rg;
	int r = -EINVAL;

	if (!inj || !inj->base)
		goto fail0;
	r = -ENOMEM;
	rg = calloc(1, sizeof(*rg));
	if (!rg)
		goto fail0;
	rg->pid = inj->pid;
	rg->data = inj->base + inj->hdr.data_off;
	rg->preloaded = inj->preloaded;
	if (!inj->preloaded) {
		rg->ring = ring_addr(rg, ring);
		rg->ring_size = PP_AGENT_RING_SIZE;
	}
	/* a preloaded agent's ranges stay: its threads wrote no record the
	 * kernel path would bring again, and each range is its thread's */
	rg->reused = inj->reused && !inj->preloaded;
	rg->mmfd = -1;
	/* a preloaded agent's: the descriptor of the address space it was
	 * found in (an exec since then must not make it another's) */
	if (inj->preloaded)
		rg->fd = inj->memrw >= 0 ? fcntl(inj->memrw, F_DUPFD_CLOEXEC, 0) : -EACCES;
	else
		rg->fd = mem_fd(inj->pid, O_RDWR);
	if (rg->fd == -EACCES || rg->fd == -EPERM) {
		/* another user's process: process_vm_*, guarded (vm_write); the
		 * agent's data checked still there: an exec since inj found it
		 * would leave this descriptor another address space's */
		char c;

		rg->fd = -1;
		rg->mmfd = inj->preloaded ? fcntl(inj->mmfd, F_DUPFD_CLOEXEC, 0)
					  : open_maps(inj->pid);
		if (rg->mmfd < 0 || pread(rg->mmfd, &c, 1, 0) != 1) {
			r = -ESRCH;
			goto fail;
		}
	} else if (rg->fd < 0) {
		r = rg->fd;
		goto fail;
	}
	r = -EIO;
	if (ring_pread(rg, &rg->tail, sizeof(rg->tail), ring_addr(rg, ring_tail)) < 0)
		goto fail;
	/* An earlier podprof's stack ranges: their threads' ids are not known
	 * here; each thread's next sample takes the kernel path once again. */
	for (size_t i = 0; rg->reused && i < nth;) {
		size_t k = PP_MIN(nth - i, ARRAY_SIZE(th));
		uint64_t off = ring_addr(rg, threads) + i * sizeof(*th);

		if (ring_pread(rg, th, k * sizeof(*th), off) < 0)
			goto fail;
		for (size_t j = 0; j < k; j++)
			if (th[j].stack_hi)
				ring_write64(rg,
					     off + j * sizeof(*th) +
						     offsetof(struct pp_agent_thread, stack_hi),
					     0);
		i += k;
	}
	if (inj->preloaded) {
		/* the main thread's range now (its slot takes it when the
		 * thread claims one): a program that allocates in a burst at
		 * once would otherwise sample it without stacks until its
		 * THREAD record is read */
		uint64_t sp;
		struct pp_maps maps = { 0 };

		if (ring_pread(rg, &sp, sizeof(sp), ring_addr(rg, main_sp)) == 0 &&
		    pp_maps__read(rg->pid, &maps) == 0) {
			for (size_t i = 0; i < maps.n; i++) {
				const struct pp_map *m = &maps.v[i];

				if (m->start <= sp && sp < m->end && m->path &&
				    strcmp(m->path, "[stack]") == 0 && (m->prot & PP_PROT_W)) {
					ring_write64(rg, ring_addr(rg, main_lo), m->start);
					ring_write64(rg, ring_addr(rg, main_hi), m->end);
				}
			}
			pp_maps__free(&maps);
		}
	}
	r = pp_inject__ring_copy(rg, copy_bytes);
	if (r == 0)
		r = ring_write64(rg, ring_addr(rg, ring_on), 1);
	if (r == 0)
		return rg;
fail:
	pp_inject__ring_close(rg);
fail0:
	if (ret_err)
		*ret_err = r;
	return NULL;
}

void pp_inject__ring_close(struct pp_inject_ring *rg)
{
	if (!rg)
		return;
	if (rg->fd >= 0)
		close(rg->fd);
	if (rg->mmfd >= 0)
		close(rg->mmfd);
	free(rg);
}

void pp_inject__ring_stats(const struct pp_inject_ring *rg, uint64_t *ret_records,
			   uint64_t *ret_skipped)
{
	*ret_records = rg ? __atomic_load_n(&rg->records, __ATOMIC_RELAXED) : 0;
	*ret_skipped = rg ? __atomic_load_n(&rg->skipped, __ATOMIC_RELAXED) : 0;
}

int pp_inject__ring_copy(struct pp_inject_ring *rg, uint32_t copy_bytes)
{
	if (!rg)
		return -EINVAL;
	return ring_write64(rg, ring_addr(rg, ring_copy), PP_MIN(copy_bytes, PP_AGENT_MAX_COPY));
}

/* len bytes of the ring from position pos (wrapping) into buf. */
static int ring_read(struct pp_inject_ring *rg, uint64_t pos, size_t len, uint8_t *buf)
{
	while (len) {
		uint64_t o = pos & (rg->ring_size - 1);
		size_t k = PP_MIN(len, (size_t)(rg->ring_size - o));

		if (ring_pread(rg, buf, k, rg->ring + o) < 0)
			return -EIO;
		buf += k;
		pos += k;
		len -= k;
	}
	return 0;
}

/* Bytes of complete records at the start of buf[0..len) (positions from
 * pos); -EBADMSG when a complete record is malformed (the target wrote
 * it: nothing in the ring is trusted). */
static ssize_t ring_complete(const uint8_t *buf, size_t len, uint64_t pos)
{
	size_t off = 0;

	while (off + sizeof(struct pp_agent_rec) <= len) {
		struct pp_agent_rec h;

		memcpy(&h, buf + off, sizeof(h));
		if (h.pos != pos + off + 1)
			break;
		if (h.len % 8 || h.len < sizeof(h) || h.len > RING_CHUNK - 32768 ||
		    (h.type == PP_AGENT_REC_ALLOC && h.len < sizeof(struct pp_agent_rec_alloc)) ||
		    (h.type == PP_AGENT_REC_THREAD && h.len != PP_AGENT_THREAD_REC) ||
		    h.type > PP_AGENT_REC_THREAD)
			return -EBADMSG;
		if (off + h.len > len)
			break;
		off += h.len;
	}
	return (ssize_t)off;
}

static int thread_stack_in(struct pp_inject_ring *rg, uint64_t slot_addr, uint64_t sp, pid_t tid,
			   const struct pp_maps *maps, unsigned *ret_index);

/* At most this many THREAD records are acted on per drain (each is a look
 * at one maps snapshot): a target writing nothing else cannot keep podprof
 * busy. The agent asks again with its thread's next sample. */
#define RING_NOTES_MAX 256

/* A preloaded agent's ring, once it mapped one: where and how big (its
 * word, as everything in the target, is checked before use). */
static int ring_locate(struct pp_inject_ring *rg)
{
	uint64_t m;

	if (ring_pread(rg, &m, sizeof(m), ring_addr(rg, ring_map)) < 0)
		return -ESRCH;
	if ((m & 63) < 16 || (m & 63) > 30 || !(m & ~4095ull))
		return -EAGAIN;
	rg->ring_size = 1ull << (m & 63);
	rg->ring = m & ~4095ull;
	return 0;
}

ssize_t pp_inject__ring_drain(struct pp_inject_ring *rg, pp_inject_rec_fn fn, void *ctx)
{
	uint64_t head, start;
	uint8_t *buf = NULL; /* RING_CHUNK bytes while records are read */
	ssize_t total = 0;
	struct pp_maps tm = { 0 }; /* for THREAD records: read once, at the first */
	unsigned notes = 0;
	int tm_r = 1;

	if (!rg || !fn)
		return -EINVAL;
	start = rg->tail;
	for (;;) {
		uint64_t tail = rg->tail;
		size_t want, off = 0, n = 0;
		ssize_t done;

		if (ring_pread(rg, &head, sizeof(head), ring_addr(rg, ring_head)) < 0) {
			total = total ? total : -ESRCH;
			break;
		}
		if (head == tail || (!rg->ring && ring_locate(rg) < 0) ||
		    tail - start >= rg->ring_size)
			break; /* empty, or a ring's worth read: the rest next time */
		if (head - tail > rg->ring_size)
			goto skip; /* not a position the agent wrote */
		want = (size_t)PP_MIN(head - tail, (uint64_t)RING_CHUNK);
		if (!buf && !(buf = malloc(RING_CHUNK))) {
			total = total ? total : -ENOMEM;
			break;
		}
		if (ring_read(rg, tail, want, buf) < 0) {
			total = total ? total : -ESRCH;
			break;
		}
		done = ring_complete(buf, want, tail);
		if (done < 0)
			goto skip;
		if (done == 0) {
			/* the next record is being written, or its writer died
			 * (a thread killed, a fork child): wait, then skip */
			uint64_t now = pp_now_mono_ns();

			if (rg->stall_tail != tail || !rg->stall_ns) {
				rg->stall_tail = tail;
				rg->stall_ns = now;
				break;
			}
			if (now - rg->stall_ns < RING_STALL_NS)
				break;
			goto skip;
		}
		rg->stall_ns = 0;
		/* Read the complete records again: the commit words were seen,
		 * and the first read may have taken words written before them
		 * from older copies (the kernel's copy is not ordered word by
		 * word); everything a commit covers is in place by now. */
		if (ring_read(rg, tail, (size_t)done, buf) < 0 ||
		    ring_complete(buf, (size_t)done, tail) != done)
			goto skip;
		while (off < (size_t)done) {
			const struct pp_agent_rec *h = (const void *)(buf + off);
			struct pp_inject_rec r = { 0 };

			if (h->type == PP_AGENT_REC_ALLOC) {
				const struct pp_agent_rec_alloc *a = (const void *)h;

				r.alloc = true;
				r.thread = a->thread;
				r.size = a->size;
				memcpy(r.regs, a->regs, sizeof(r.regs));
				r.stack = (const uint8_t *)(a + 1);
				r.stack_len = PP_MIN((size_t)a->stack_len, h->len - sizeof(*a));
			}
			r.addr = h->addr;
			if (h->type == PP_AGENT_REC_THREAD) {
				/* a preloaded agent's thread took a slot: its stack range */
				uint64_t sp;

				memcpy(&sp, h + 1, sizeof(sp));
				if (tm_r == 1 && h->addr < (1u << PP_AGENT_THREAD_BITS))
					tm_r = pp_maps__read(rg->pid, &tm);
				if (tm_r == 0 && notes++ < RING_NOTES_MAX &&
				    h->addr < (1u << PP_AGENT_THREAD_BITS)) {
					int e = thread_stack_in(
						rg,
						ring_addr(rg, threads) +
							h->addr * sizeof(struct pp_agent_thread),
						sp, 0, &tm, NULL);

					if (e < 0)
						pp_dbg("inject: pid %d: slot %llu: no stack range "
						       "for sp %#llx: %s",
						       (int)rg->pid, (unsigned long long)h->addr,
						       (unsigned long long)sp, strerror(-e));
				}
			} else if (h->type != PP_AGENT_REC_PAD) {
				fn(ctx, &r);
				n++;
			}
			off += h->len;
		}
		rg->tail = tail + (uint64_t)done;
		total += (ssize_t)n;
		__atomic_store_n(&rg->records, rg->records + n, __ATOMIC_RELAXED);
		if (ring_write64(rg, ring_addr(rg, ring_tail), rg->tail) < 0)
			break;
		continue;
skip:
		/* nothing between tail and head can be read as records: drop it,
		 * counted (a record written later into that space fails its
		 * position check and is skipped the same way) */
		__atomic_store_n(&rg->skipped, rg->skipped + 1, __ATOMIC_RELAXED);
		rg->tail = head;
		rg->stall_ns = 0;
		ring_write64(rg, ring_addr(rg, ring_tail), head);
		break;
	}
	free(buf);
	pp_maps__free(&tm);
	return total;
}

int pp_inject__thread_index(const struct pp_inject_ring *rg, uint64_t slot_addr)
{
	uint64_t t0 = rg ? ring_addr(rg, threads) : 0, idx;

	if (!rg || slot_addr < t0 || (slot_addr - t0) % sizeof(struct pp_agent_thread))
		return -EINVAL;
	idx = (slot_addr - t0) / sizeof(struct pp_agent_thread);
	return idx < (1u << PP_AGENT_THREAD_BITS) ? (int)idx : -EINVAL;
}

int pp_inject__thread_stack(struct pp_inject_ring *rg, uint64_t slot_addr, uint64_t sp, pid_t tid,
			    unsigned *ret_index)
{
	struct pp_maps maps = { 0 };
	int r = pp_maps__read(rg ? rg->pid : 0, &maps);

	if (r < 0)
		return r;
	r = thread_stack_in(rg, slot_addr, sp, tid, &maps, ret_index);
	pp_maps__free(&maps);
	return r;
}

static int thread_stack_in(struct pp_inject_ring *rg, uint64_t slot_addr, uint64_t sp, pid_t tid,
			   const struct pp_maps *maps, unsigned *ret_index)
{
	uint64_t tp, at;
	const struct pp_map *m = NULL;
	int idx = pp_inject__thread_index(rg, slot_addr), r;
	bool ok, main_stack;

	if (idx < 0)
		return idx;
	if (ring_pread(rg, &tp, sizeof(tp), slot_addr) < 0)
		return -ESRCH;
	for (size_t i = 0; i < maps->n; i++)
		if (maps->v[i].start <= sp && sp < maps->v[i].end) {
			m = &maps->v[i];
			break;
		}
	/* A range the copy can rely on for as long as the thread lives: the
	 * main thread's [stack], or the mapping that holds both the stack
	 * pointer and the thread's own thread pointer (glibc and musl put the
	 * thread descriptor at the top of the stack they map). A fiber or
	 * signal stack is neither and stays on the kernel path. */
	/* tid 0 (a preloaded agent's THREAD record): either */
	main_stack = m && m->path && strcmp(m->path, "[stack]") == 0 &&
		     (tid == rg->pid || tid == 0);
	ok = m && (m->prot & PP_PROT_R) && (m->prot & PP_PROT_W) && !m->shared &&
	     (main_stack || (tid != rg->pid && tp >= m->start && tp < m->end));
	if (ok) {
		/* A thread's copies end at the page holding its thread pointer:
		 * its own mapping reaches at least that far, even when the
		 * mapping seen here is merged with a neighbour above that may be
		 * unmapped later; and its frames are all below the thread
		 * pointer (x86-64 puts TLS below it, the stack below the TLS). */
		uint64_t hi = m->end;

		if (!main_stack)
			hi = PP_MIN(hi, (tp | 4095) + 1);
		at = slot_addr + offsetof(struct pp_agent_thread, stack_lo);
		r = ring_write64(rg, at + 8, 0);
		if (!r)
			r = ring_write64(rg, at, m->start);
		if (!r)
			r = ring_write64(rg, at + 8, hi);
	} else {
		r = -ENOENT;
	}
	if (!r && ret_index)
		*ret_index = (unsigned)idx;
	return r;
}

/* pp_inject__detach's restores, inside pp_tracee__run. */
static int restore_slots(void *p)
{
	struct pp_inject *inj = p;
	struct slot_writer w = { 0 };

	for (size_t i = 0; i < inj->nslots; i++) {
		struct slot *sl = &inj->slots[i];
		uint64_t wrap = inj->base + inj->hdr.wrap_off[sl->fn], cur = 0;

		if (!sl->patched || !sl->orig)
			continue;
		if (read_mem(inj->pid, sl->addr, &cur, sizeof(cur)) < 0 || cur != wrap)
			continue;
		if (write_slot(inj, &w, &inj->mods[sl->module], sl->addr, wrap, sl->orig) ==
		    -ECANCELED)
			break;
	}
	writer_done(&w);
	return 0;
}

void pp_inject__detach(struct pp_inject *inj)
{
	struct pp_agent_hdr h;
	bool same_image;

	if (!inj)
		return;
	if (inj->preloaded) {
		preload_release(inj);
		return;
	}
	/* After an exec (or pid reuse) the slot addresses mean nothing: only
	 * restore while our agent is still mapped where we put it, and only
	 * slots that still point at its wrappers. During podprof's shutdown
	 * (pp_tracee__close) nothing is stopped: the redirections stay, the
	 * wrappers forward to the allocator and sample into a ring nobody
	 * reads, and a podprof started later takes the agent over. */
	same_image = inj->base && read_mem(inj->pid, inj->base, &h, sizeof(h)) == 0 &&
		     memcmp(&h, &inj->hdr, sizeof(h)) == 0;
	if (same_image && inj->ever_patched)
		pp_tracee__run(restore_slots, inj);
	if (same_image) {
		uint64_t off = 0; /* samples in flight take the kernel path */

		write_mem(inj->pid, data_addr(inj, ring_on), &off, sizeof(off));
	}
	if (inj->memfd >= 0)
		close(inj->memfd);
	free(inj->slots);
	for (size_t i = 0; i < inj->nmods; i++)
		free(inj->mods[i].needed);
	free(inj->mods);
	free(inj);
}
