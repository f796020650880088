/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libdw unwinder over copied stacks.
 *
 * One Dwfl per process, built from /proc/PID/maps: every file with an
 * executable mapping is reported with dwfl_report_elf (the fd comes from
 * pp_proc__open_mapped, never from a path in our own mount namespace), the
 * vdso from an image read once from the target's memory. The Dwfl is
 * attached with our own thread callbacks, so libdw never touches the live
 * process: registers come from the sample, memory reads are served from the
 * copied stack or from the read-only file-backed segments (through the
 * file, not the process).
 *
 * libdw unwinds with .eh_frame (and .debug_frame if present in the file);
 * when a PC has no CFI its x86-64 backend falls back to the frame-pointer
 * rule. We detect that case (CFI lookup per PC, cached) to set
 * PP_UNWIND_FP_FALLBACK and to reject frame-pointer frames that do not land
 * in executable memory. When libdw stops with an error we try to continue
 * with our own frame-pointer walk from the last frame's registers.
 */
#include "unwind.h"

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <pthread.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <stdatomic.h>
#include <sys/uio.h>
#include <unistd.h>

#include "procfs/procfs.h"
#include "util/elfdebug.h"
#include "util/log.h"
#include "util/sigbus.h"
#include "util/util.h"

#define MAX_FILES 1024 /* files reported per process */
#define MAX_RANGES 8192 /* executable / read-only ranges kept per process */
#define VDSO_MAX (1u << 20)
#define REBUILD_MIN_NS (100ull * 1000 * 1000)
#define CFI_CACHE_SIZE 4096 /* power of two */
/*
 * libdw loads a file's DWARF (every .debug_* section, compressed ones
 * decompressed eagerly to the size their header claims) when it looks for
 * .debug_frame. A file whose debug sections would take more is not given to
 * libdw: no CFI for it, frame pointers only.
 */
#define DEBUG_MEM_MAX ((uint64_t)64 << 20)

struct range {
	uint64_t start, end; /* [start, end) */
	uint64_t offset; /* file offset of start (ro ranges) */
	int fd; /* ro ranges: borrowed from files[] (-1 none) */
};

struct cfi_entry {
	uint64_t pc; /* 0 = empty */
	int8_t has_cfi;
};

struct pp_unwinder {
	pid_t pid;
	struct pp_unwinder_opts opts;

	/* Built from maps. */
	bool built;
	bool stale;
	uint64_t last_build_ns;
	Dwfl *dwfl; /* NULL when CFI is unavailable (fp-only) */
	struct range *exec; /* every executable mapping, sorted */
	size_t n_exec;
	struct range *ro; /* read-only file-backed mappings, sorted */
	size_t n_ro;
	int *fds; /* our own fds, for ro reads */
	size_t n_fds;

	struct cfi_entry cfi_cache[CFI_CACHE_SIZE];

	/* Current sample (valid during pp_unwinder__unwind). */
	const struct pp_regs *regs;
	const uint8_t *stack;
	size_t stack_len;
	uint64_t sp;
	pid_t tid_given;

	/* Frame callback state. */
	uint64_t *pcs;
	size_t max, n;
	bool hit_max, hit_zero, bogus, read_past_stack, mem_failed, unknown_pc, fp_used;
	bool last_act; /* isactivation of the last frame stored */
	size_t stack_used; /* highest byte of the copy read, from sp */
	bool last_regs_ok;
	uint64_t last_bp, last_sp;
};

/* ---- maps ------------------------------------------------------------- */

static const struct range *range_find(const struct range *v, size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (addr < v[mid].start)
			hi = mid;
		else if (addr >= v[mid].end)
			lo = mid + 1;
		else
			return &v[mid];
	}
	return NULL;
}

static bool in_exec(const struct pp_unwinder *u, uint64_t pc)
{
	return range_find(u->exec, u->n_exec, pc) != NULL;
}

/*
 * Descriptors for reading targets' read-only segments, shared by every
 * unwinder: one per file (the identity a stat shows: device, inode, size,
 * mtime), refcounted, so N processes of one binary hold one descriptor for
 * it here (libdw still gets its own per Dwfl). Reads are pread, so sharing
 * needs no lock around them; the table has its own.
 */
struct shared_fd {
	int fd; /* -1 = free slot */
	unsigned refs;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
};

static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shared_fd *shared;
static size_t n_shared, cap_shared;

static bool same_file(const struct shared_fd *f, const struct stat *st)
{
	return f->fd >= 0 && f->dev == st->st_dev && f->ino == st->st_ino &&
	       f->size == st->st_size && f->mtime.tv_sec == st->st_mtim.tv_sec &&
	       f->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

/*
 * The shared descriptor for the file open on fd (a reference; fd itself is
 * closed when the file already has one), or fd when it cannot be shared
 * (no stat, no memory). Release with shared_fd_put.
 */
static int shared_fd_get(int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return fd;
	pthread_mutex_lock(&shared_lock);
	size_t i, free_i = SIZE_MAX;
	for (i = 0; i < n_shared; i++) {
		if (same_file(&shared[i], &st))
			break;
		if (shared[i].fd < 0 && free_i == SIZE_MAX)
			free_i = i;
	}
	if (i < n_shared) {
		shared[i].refs++;
		pthread_mutex_unlock(&shared_lock);
		close(fd);
		return shared[i].fd;
	}
	if (free_i == SIZE_MAX) {
		if (pp_grow(&shared, &cap_shared, n_shared + 1, sizeof(*shared), 16) < 0) {
			pthread_mutex_unlock(&shared_lock);
			return fd;
		}
		free_i = n_shared++;
	}
	shared[free_i] = (struct shared_fd){ .fd = fd,
					     .refs = 1,
					     .dev = st.st_dev,
					     .ino = st.st_ino,
					     .size = st.st_size,
					     .mtime = st.st_mtim };
	pthread_mutex_unlock(&shared_lock);
	return fd;
}

/*
 * m's file as pp_proc__open_mapped opens it, but without opening it again
 * when it already has a shared descriptor: the stat pp_proc__mapped_stat
 * checked against m, matched to the table, gives a
 * duplicate of that descriptor (the same file: device, inode, size, mtime).
 */
static int open_mapped_shared(pid_t pid, const struct pp_map *m)
{
	struct stat st;
	if (pp_proc__mapped_stat(pid, m, &st) == 0 && S_ISREG(st.st_mode)) {
		int fd = -1;
		pthread_mutex_lock(&shared_lock);
		for (size_t i = 0; i < n_shared && fd < 0; i++)
			if (same_file(&shared[i], &st))
				fd = fcntl(shared[i].fd, F_DUPFD_CLOEXEC, 0);
		pthread_mutex_unlock(&shared_lock);
		if (fd >= 0)
			return fd;
	}
	return pp_proc__open_mapped(pid, m);
}

/* Drops a reference taken by shared_fd_get (closes fd if it is not shared). */
static void shared_fd_put(int fd)
{
	pthread_mutex_lock(&shared_lock);
	for (size_t i = 0; i < n_shared; i++) {
		if (shared[i].fd != fd)
			continue;
		if (!--shared[i].refs) {
			close(fd);
			shared[i].fd = -1;
		}
		pthread_mutex_unlock(&shared_lock);
		return;
	}
	pthread_mutex_unlock(&shared_lock);
	close(fd);
}

static void unwinder_reset(struct pp_unwinder *u)
{
	if (u->dwfl)
		dwfl_end(u->dwfl);
	u->dwfl = NULL;
	for (size_t i = 0; i < u->n_fds; i++)
		shared_fd_put(u->fds[i]);
	free(u->fds);
	u->fds = NULL;
	u->n_fds = 0;
	free(u->exec);
	u->exec = NULL;
	u->n_exec = 0;
	free(u->ro);
	u->ro = NULL;
	u->n_ro = 0;
	memset(u->cfi_cache, 0, sizeof(u->cfi_cache));
	u->built = false;
}

/*
 * Load bias of a file mapped at m: find the PT_LOAD that holds file offset
 * m->offset; an address inside it is bias + p_vaddr + (off - p_offset).
 * Works for PIE, non-PIE (bias 0), shared libraries and linkers that give
 * segments different vaddr-offset deltas.
 */
static int elf_bias(Elf *elf, const struct pp_map *m, uint64_t *ret)
{
	size_t phnum;
	long pg = sysconf(_SC_PAGESIZE);
	uint64_t pagemask = (uint64_t)(pg > 0 ? pg : 4096) - 1;

	if (elf_getphdrnum(elf, &phnum) != 0)
		return -EINVAL;
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < phnum; i++) {
			GElf_Phdr mem, *ph = gelf_getphdr(elf, (int)i, &mem);
			if (!ph || ph->p_type != PT_LOAD)
				continue;
			/* pass 0: segments whose exec bit matches the mapping */
			if (pass == 0 && !!(ph->p_flags & PF_X) != !!(m->prot & PP_PROT_X))
				continue;
			uint64_t lo = ph->p_offset & ~pagemask;
			if (m->offset < lo || m->offset >= ph->p_offset + PP_MAX(ph->p_filesz, 1))
				continue;
			*ret = m->start - ph->p_vaddr - m->offset + ph->p_offset;
			return 0;
		}
	}
	return -ENOENT;
}

static int no_find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		       char **file_name, Elf **elfp)
{
	return -1;
}

static int no_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
			     Dwarf_Addr base, const char *file_name, const char *debuglink_file,
			     GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	/* Never look up files in podprof's own filesystem: it is not the target's. */
	return -1;
}

static char *no_debuginfo_path;
static const Dwfl_Callbacks dwfl_cbs = {
	.find_elf = no_find_elf,
	.find_debuginfo = no_find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &no_debuginfo_path,
};

static int push_range(struct range **v, size_t *n, size_t *cap, struct range r)
{
	if (*n >= MAX_RANGES)
		return -E2BIG;
	if (pp_grow(v, cap, *n + 1, sizeof(**v), 64) < 0)
		return -ENOMEM;
	(*v)[(*n)++] = r;
	return 0;
}

/* The vdso image, copied from the target into a memfd libdw can open. */
static int vdso_fd(pid_t pid, const struct pp_map *m)
{
	uint64_t len = m->end - m->start;
	char path[64];

	if (len == 0 || len > VDSO_MAX)
		return -E2BIG;
	_cleanup_free_ uint8_t *buf = malloc(len);
	if (!buf)
		return -ENOMEM;
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)m->start, len };
	ssize_t r = process_vm_readv(pid, &local, 1, &remote, 1, 0);
	if (r != (ssize_t)len) {
		snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
		_cleanup_close_ int mfd = open(path, O_RDONLY | O_CLOEXEC);
		if (mfd < 0)
			return -errno;
		r = pread(mfd, buf, len, (off_t)m->start);
		if (r != (ssize_t)len)
			return r < 0 ? -errno : -EIO;
	}
	int fd = memfd_create("pp-vdso", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, buf, len) != (ssize_t)len) {
		int e = errno ? -errno : -EIO;
		close(fd);
		return e;
	}
	return fd;
}

static _Atomic uint64_t debug_refused;
static _Atomic uint64_t fd_budget_hits;
static _Atomic unsigned fd_budget = PP_UNWIND_FD_BUDGET;

void pp_unwind__set_fd_budget(unsigned fds)
{
	if (fds)
		atomic_store(&fd_budget, fds);
}

unsigned pp_unwind__fd_budget(void)
{
	return atomic_load(&fd_budget);
}

uint64_t pp_unwind_fd_budget_hits(void)
{
	return atomic_load_explicit(&fd_budget_hits, memory_order_relaxed);
}

uint64_t pp_unwind_debug_refused(void)
{
	return atomic_load_explicit(&debug_refused, memory_order_relaxed);
}

static bool debug_fits(Elf *elf)
{
	uint64_t total;
	bool info;

	if (pp_elf_debug_bytes(elf, DEBUG_MEM_MAX, &total, &info) < 0)
		return false;
	return total <= DEBUG_MEM_MAX;
}

struct reported {
	uint32_t dev_major, dev_minor;
	uint64_t inode, bias;
	int fd; /* our fd for ro reads */
};

static int report_file(struct pp_unwinder *u, const struct pp_map *m, struct reported *rep,
		       size_t *n_rep)
{
	bool vdso = m->special && m->path && strcmp(m->path, "[vdso]") == 0;
	int fd;

	for (size_t i = 0; i < *n_rep; i++)
		if (!vdso && rep[i].inode == m->inode && rep[i].dev_major == m->dev_major &&
		    rep[i].dev_minor == m->dev_minor && rep[i].fd >= 0)
			return 0; /* already reported (several exec mappings of one file) */
	if (*n_rep >= MAX_FILES)
		return -E2BIG;
	/* Two fds per file (libdw's and ours), one more for the opening. */
	if ((*n_rep + 1) * 2 > pp_unwind__fd_budget())
		return -EMFILE;

	fd = vdso ? vdso_fd(u->pid, m) : open_mapped_shared(u->pid, m);
	if (fd < 0)
		return fd;

	/* read, not mapped: the target can truncate the file (libdw maps it: sigbus.h) */
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	uint64_t bias = 0;
	int r = -EINVAL;
	if (elf && elf_kind(elf) == ELF_K_ELF) {
		GElf_Ehdr ehdr;
		if (gelf_getehdr(elf, &ehdr) && ehdr.e_machine == EM_X86_64)
			r = elf_bias(elf, m, &bias);
		if (r == 0 && !debug_fits(elf)) {
			atomic_fetch_add_explicit(&debug_refused, 1, memory_order_relaxed);
			r = -EFBIG;
		}
	}
	if (elf)
		elf_end(elf);
	if (r < 0) {
		close(fd);
		return r;
	}

	int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (own < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	if (!vdso)
		own = shared_fd_get(own); /* one per file for every unwinder */
	if (u->dwfl) {
		const char *name = m->path ? m->path : "?";
		const char *base = strrchr(name, '/');
		/* On success libdw owns fd (closed by dwfl_end). */
		if (!dwfl_report_elf(u->dwfl, base ? base + 1 : name, name, fd, bias, true)) {
			pp_dbg("unwind: pid %d: dwfl_report_elf %s: %s", (int)u->pid, name,
			       dwfl_errmsg(-1));
			close(fd);
		}
	} else {
		close(fd);
	}
	rep[*n_rep] = (struct reported){ m->dev_major, m->dev_minor, m->inode, bias, own };
	(*n_rep)++;
	return 0;
}

static pid_t cb_next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	struct pp_unwinder *u = arg;

	if (*thread_argp)
		return 0;
	*thread_argp = u;
	return u->tid_given > 0 ? u->tid_given : u->pid;
}

static bool cb_get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
	*thread_argp = arg;
	return true;
}

static bool read_file_word(struct pp_unwinder *u, uint64_t addr, uint64_t *ret)
{
	const struct range *r = range_find(u->ro, u->n_ro, addr);

	if (!r || r->fd < 0 || addr + 8 > r->end || addr + 8 < addr)
		return false;
	return pread(r->fd, ret, 8, (off_t)(r->offset + (addr - r->start))) == 8;
}

static bool cb_memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	struct pp_unwinder *u = arg;

	if (u->stack && u->stack_len >= 8 && addr >= u->sp && addr - u->sp <= u->stack_len - 8) {
		memcpy(result, u->stack + (addr - u->sp), 8);
		u->stack_used = PP_MAX(u->stack_used, (size_t)(addr - u->sp) + 8);
		return true;
	}
	if (read_file_word(u, addr, result))
		return true;
	u->mem_failed = true;
	/* Above the copy, but close: the stack continues there (we copied too little). */
	if (addr >= u->sp + u->stack_len && addr - u->sp < (64ull << 20))
		u->read_past_stack = true;
	return false;
}

static bool cb_set_initial_registers(Dwfl_Thread *thread, void *arg)
{
	struct pp_unwinder *u = arg;
	Dwarf_Word regs[PP_NREGS];

	for (int i = 0; i < PP_NREGS; i++)
		regs[i] = u->regs->r[i];
	if (!dwfl_thread_state_registers(thread, 0, PP_NREGS, regs))
		return false;
	dwfl_thread_state_register_pc(thread, u->regs->r[PP_REG_IP]);
	return true;
}

static const Dwfl_Thread_Callbacks thread_cbs = {
	.next_thread = cb_next_thread,
	.get_thread = cb_get_thread,
	.memory_read = cb_memory_read,
	.set_initial_registers = cb_set_initial_registers,
};

static int range_cmp(const void *a, const void *b)
{
	const struct range *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static int unwinder_build(struct pp_unwinder *u)
{
	struct pp_maps maps = { 0 };
	size_t cap_exec = 0, cap_ro = 0, n_rep = 0;
	struct reported *rep = NULL;
	bool budget_hit = false;
	int r;

	unwinder_reset(u);
	u->last_build_ns = pp_now_mono_ns();
	u->stale = false;

	r = pp_maps__read(u->pid, &maps);
	if (r < 0)
		return r;
	rep = calloc(MAX_FILES, sizeof(*rep));
	if (!rep) {
		r = -ENOMEM;
		goto out;
	}
	if (!u->opts.frame_pointers_only) {
		u->dwfl = dwfl_begin(&dwfl_cbs);
		if (!u->dwfl) {
			r = -ENOMEM;
			goto out;
		}
		dwfl_report_begin(u->dwfl);
	}

	for (size_t i = 0; i < maps.n; i++) {
		const struct pp_map *m = &maps.v[i];
		bool vdso = m->special && m->path && strcmp(m->path, "[vdso]") == 0;
		bool file = m->path && !m->special;

		if (m->prot & PP_PROT_X) {
			r = push_range(&u->exec, &u->n_exec, &cap_exec,
				       (struct range){ m->start, m->end, m->offset, -1 });
			if (r < 0)
				break;
			if ((file || vdso) && !budget_hit) {
				r = report_file(u, m, rep, &n_rep);
				if (r == -EMFILE && (n_rep + 1) * 2 > pp_unwind__fd_budget()) {
					/* This target's fd budget: the files of higher
					 * mappings get no CFI (one count per build). */
					budget_hit = true;
					atomic_fetch_add_explicit(&fd_budget_hits, 1,
								  memory_order_relaxed);
				}
				if (r < 0)
					pp_dbg("unwind: pid %d: %s: %s, no CFI for it", (int)u->pid,
					       m->path, strerror(-r));
				r = 0;
			}
		}
	}
	/* Read-only file-backed ranges (second pass: the files are open now). */
	for (size_t i = 0; i < maps.n; i++) {
		const struct pp_map *m = &maps.v[i];
		int fd = -1;

		if (!m->path || m->special || (m->prot & PP_PROT_W) || !(m->prot & PP_PROT_R))
			continue;
		for (size_t j = 0; j < n_rep; j++)
			if (rep[j].inode == m->inode && rep[j].dev_major == m->dev_major &&
			    rep[j].dev_minor == m->dev_minor)
				fd = rep[j].fd;
		if (fd < 0)
			continue;
		if (push_range(&u->ro, &u->n_ro, &cap_ro,
			       (struct range){ m->start, m->end, m->offset, fd }) < 0)
			break;
	}
	/* A process that exited meanwhile has no ranges (and NULL arrays). */
	if (u->n_exec)
		qsort(u->exec, u->n_exec, sizeof(*u->exec), range_cmp);
	if (u->n_ro)
		qsort(u->ro, u->n_ro, sizeof(*u->ro), range_cmp);

	u->fds = calloc(n_rep ? n_rep : 1, sizeof(int));
	if (!u->fds) {
		for (size_t j = 0; j < n_rep; j++)
			shared_fd_put(rep[j].fd);
		n_rep = 0;
		r = -ENOMEM;
		goto out;
	}
	for (size_t j = 0; j < n_rep; j++)
		u->fds[u->n_fds++] = rep[j].fd;
	n_rep = 0;

	r = 0;
	if (u->dwfl) {
		if (dwfl_report_end(u->dwfl, NULL, NULL) != 0 ||
		    !dwfl_attach_state(u->dwfl, NULL, u->pid, &thread_cbs, u)) {
			pp_dbg("unwind: pid %d: dwfl attach: %s, frame pointers only", (int)u->pid,
			       dwfl_errmsg(-1));
			dwfl_end(u->dwfl);
			u->dwfl = NULL;
		}
	}
	u->built = true;
out:
	if (rep) {
		for (size_t j = 0; j < n_rep; j++)
			shared_fd_put(rep[j].fd);
		free(rep);
	}
	pp_maps__free(&maps);
	if (r < 0 && r != -E2BIG)
		unwinder_reset(u);
	else {
		u->built = true;
		r = 0;
	}
	return r;
}

/* ---- public ----------------------------------------------------------- */

struct pp_unwinder *pp_unwinder__new(pid_t pid, const struct pp_unwinder_opts *opts)
{
	struct pp_unwinder *u;

	if (pid <= 0) {
		errno = EINVAL;
		return NULL;
	}
	elf_version(EV_CURRENT);
	pp_sigbus_guard_install(); /* libdw maps the files it is given */
	u = calloc(1, sizeof(*u));
	if (!u) {
		errno = ENOMEM;
		return NULL;
	}
	u->pid = pid;
	if (opts)
		u->opts = *opts;
	u->stale = true;
	return u;
}

void pp_unwinder__invalidate(struct pp_unwinder *u)
{
	if (u)
		u->stale = true;
}

void pp_unwinder__free(struct pp_unwinder *u)
{
	if (!u)
		return;
	unwinder_reset(u);
	free(u);
}

static bool stack_word(struct pp_unwinder *u, uint64_t addr, uint64_t *ret)
{
	if (!u->stack || u->stack_len < 8 || addr < u->sp || addr - u->sp > u->stack_len - 8)
		return false;
	memcpy(ret, u->stack + (addr - u->sp), 8);
	u->stack_used = PP_MAX(u->stack_used, (size_t)(addr - u->sp) + 8);
	return true;
}

/* Does libdw have CFI for pc (already adjusted to lie inside the call)? Cached. */
static bool has_cfi(struct pp_unwinder *u, uint64_t pc)
{
	struct cfi_entry *e = &u->cfi_cache[(pc ^ (pc >> 12)) & (CFI_CACHE_SIZE - 1)];
	Dwarf_Addr bias;
	Dwarf_Frame *frame = NULL;
	bool found = false;

	if (e->pc == pc && pc)
		return e->has_cfi;
	Dwfl_Module *mod = dwfl_addrmodule(u->dwfl, pc);
	if (mod) {
		Dwarf_CFI *cfi = dwfl_module_eh_cfi(mod, &bias);
		if (cfi && dwarf_cfi_addrframe(cfi, pc - bias, &frame) == 0)
			found = true;
		free(frame);
		if (!found) {
			frame = NULL;
			cfi = dwfl_module_dwarf_cfi(mod, &bias);
			if (cfi && dwarf_cfi_addrframe(cfi, pc - bias, &frame) == 0)
				found = true;
			free(frame);
		}
	}
	e->pc = pc;
	e->has_cfi = found;
	return found;
}

static int frame_cb(Dwfl_Frame *f, void *arg)
{
	struct pp_unwinder *u = arg;
	Dwarf_Addr pc;
	bool act = false;

	if (!dwfl_frame_pc(f, &pc, &act))
		return DWARF_CB_ABORT;
	if (u->n > 0) {
		if (pc == 0) {
			u->hit_zero = true;
			return DWARF_CB_ABORT;
		}
		/* Did libdw get this frame by frame pointer (no CFI at the previous PC)? */
		uint64_t prev = u->pcs[u->n - 1] - (u->last_act ? 0 : 1);
		if (!has_cfi(u, prev)) {
			if (!in_exec(u, pc)) {
				u->bogus = true;
				return DWARF_CB_ABORT;
			}
			u->fp_used = true;
		}
	}
	if (u->n >= u->max) {
		u->hit_max = true;
		return DWARF_CB_ABORT;
	}
	if (!in_exec(u, pc))
		u->unknown_pc = true;
	u->pcs[u->n++] = pc;
	u->last_act = act;
	Dwarf_Word bp, sp;
	u->last_regs_ok = dwfl_frame_reg(f, PP_REG_BP, &bp) == 0 &&
			  dwfl_frame_reg(f, PP_REG_SP, &sp) == 0;
	if (u->last_regs_ok) {
		u->last_bp = bp;
		u->last_sp = sp;
	}
	return DWARF_CB_OK;
}

/*
 * Frame-pointer walk from bp over the copied stack, appending return
 * addresses. Returns PP_UNWIND_* bits describing how it ended.
 */
static unsigned fp_walk(struct pp_unwinder *u, uint64_t bp, uint64_t floor)
{
	while (u->n < u->max) {
		uint64_t next_bp, ra;

		if (bp < floor || bp < u->sp)
			return 0;
		if (u->stack_len < 16 || bp - u->sp > u->stack_len - 16) {
			if (bp - u->sp >= (64ull << 20))
				return 0;
			u->read_past_stack = true; /* the frame chain goes on above the copy */
			return PP_UNWIND_TRUNCATED;
		}
		if (!stack_word(u, bp, &next_bp) || !stack_word(u, bp + 8, &ra))
			return PP_UNWIND_TRUNCATED;
		if (ra == 0)
			return PP_UNWIND_COMPLETE;
		if (!in_exec(u, ra))
			return 0;
		u->pcs[u->n++] = ra;
		u->fp_used = true;
		if (next_bp == 0)
			return PP_UNWIND_COMPLETE;
		if (next_bp <= bp)
			return 0;
		bp = next_bp;
	}
	return PP_UNWIND_TRUNCATED;
}

static bool may_rebuild(const struct pp_unwinder *u)
{
	return pp_now_mono_ns() - u->last_build_ns >= REBUILD_MIN_NS;
}

static unsigned unwind_once(struct pp_unwinder *u)
{
	unsigned flags = 0;

	u->n = 0;
	u->hit_max = u->hit_zero = u->bogus = u->read_past_stack = u->mem_failed = false;
	u->unknown_pc = u->fp_used = u->last_regs_ok = false;
	u->last_act = true;
	u->stack_used = 0;

	if (u->dwfl) {
		int rc = dwfl_getthread_frames(u->dwfl, u->tid_given > 0 ? u->tid_given : u->pid,
					       frame_cb, u);
		if (u->hit_max)
			flags |= PP_UNWIND_TRUNCATED;
		else if (u->read_past_stack)
			flags |= PP_UNWIND_TRUNCATED;
		else if (u->hit_zero || (rc == 0 && !u->mem_failed))
			/* libdw ends "normally" when the RA is undefined, which is also what a
			 * failed read of a saved RA looks like: only trust it without one. */
			flags |= PP_UNWIND_COMPLETE;
		else if (!u->bogus && u->n > 0 && u->last_regs_ok && u->last_bp >= u->last_sp) {
			/* libdw gave up (no CFI, no usable rule): frame pointers from here. */
			size_t before = u->n;
			unsigned f = fp_walk(u, u->last_bp, u->last_sp);
			if (u->n > before || f)
				flags |= f;
		}
	}
	if (u->n == 0) {
		/* No Dwfl (or it failed at once): exact IP, then frame pointers. */
		if (u->max == 0)
			return PP_UNWIND_TRUNCATED;
		u->pcs[u->n++] = u->regs->r[PP_REG_IP];
		flags = fp_walk(u, u->regs->r[PP_REG_BP], u->sp);
	}
	if (u->fp_used)
		flags |= PP_UNWIND_FP_FALLBACK;
	if ((flags & PP_UNWIND_TRUNCATED) && u->read_past_stack && !u->hit_max)
		flags |= PP_UNWIND_SHORT_COPY;
	return flags;
}

static int prepare_module(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr start,
			  void *arg)
{
	Dwarf_Addr bias;

	(void)userdata;
	(void)name;
	(void)start;
	(void)arg;
	dwfl_module_eh_cfi(mod, &bias);
	return DWARF_CB_OK;
}

size_t pp_unwinder__stack_used(const struct pp_unwinder *u)
{
	return u ? u->stack_used : 0;
}

int pp_unwinder__prepare(struct pp_unwinder *u)
{
	if (!u)
		return -EINVAL;
	if (u->stale || !u->built) {
		int r = unwinder_build(u);
		if (r < 0)
			return r;
	}
	if (u->dwfl)
		dwfl_getmodules(u->dwfl, prepare_module, NULL, 0);
	return 0;
}

int pp_unwinder__unwind(struct pp_unwinder *u, const struct pp_regs *regs, const void *stack,
			size_t stack_len, uint64_t *ret_pcs, size_t max, size_t *ret_n,
			unsigned *ret_flags)
{
	unsigned flags;

	if (!u || !regs || !ret_pcs || !ret_n || !ret_flags || (!stack && stack_len))
		return -EINVAL;
	if (max == 0) {
		*ret_n = 0;
		*ret_flags = PP_UNWIND_TRUNCATED;
		return 0;
	}
	if (u->stale || (!u->built && may_rebuild(u))) {
		int r = unwinder_build(u);
		if (r < 0)
			pp_dbg("unwind: pid %d: build: %s", (int)u->pid, strerror(-r));
	}
	if (u->built && !in_exec(u, regs->r[PP_REG_IP]) && may_rebuild(u))
		unwinder_build(u);

	u->regs = regs;
	u->stack = stack;
	u->stack_len = stack_len;
	u->sp = regs->r[PP_REG_SP];
	u->pcs = ret_pcs;
	u->max = max;
	u->tid_given = u->pid;

	flags = unwind_once(u);
	if (u->unknown_pc && !(flags & PP_UNWIND_COMPLETE) && may_rebuild(u) &&
	    unwinder_build(u) == 0)
		flags = unwind_once(u);

	u->regs = NULL;
	u->stack = NULL;
	u->stack_len = 0;
	u->pcs = NULL;
	*ret_n = u->n;
	*ret_flags = flags;
	return 0;
}
