/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which allocator does a process use? The dynamic linker binds malloc to
 * the first object in its global search order that defines it: the main
 * executable, then LD_PRELOAD objects, then DT_NEEDED libraries breadth
 * first. We rebuild that order from /proc/PID/maps, /proc/PID/environ and
 * each object's .dynamic (objects the walk does not reach, e.g. dlopen'ed
 * ones, come last in map order), and take the first object whose .dynsym
 * defines malloc; a static executable (no PT_INTERP) is searched in
 * .symtab too. Files are opened through pp_proc__open_mapped, never by
 * their maps path.
 */
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "../../bpf/heap.h"
#include "heap.h"
#include "procfs/procfs.h"
#include "util/log.h"
#include "util/sigbus.h"
#include "util/util.h"

_Static_assert((int)PP_HEAP_NFN == (int)HEAP_FN_COUNT, "function table size");

/* Integer arguments each function takes (what its entry program reads). */
static unsigned fn_nargs(int fn)
{
	switch (fn) {
	case HEAP_FN_CALLOC:
	case HEAP_FN_REALLOC:
		return 2;
	case HEAP_FN_REALLOCARRAY:
	case HEAP_FN_POSIX_MEMALIGN:
		return 3;
	case HEAP_FN_MALLOC:
	case HEAP_FN_FREE:
		return 1;
	default:
		return 2; /* aligned_alloc, memalign: (alignment, size); valloc/pvalloc use 1 */
	}
}

const char *const pp_heap_fn_names[PP_HEAP_NFN] = {
	[HEAP_FN_MALLOC] = "malloc",
	[HEAP_FN_CALLOC] = "calloc",
	[HEAP_FN_REALLOC] = "realloc",
	[HEAP_FN_REALLOCARRAY] = "reallocarray",
	[HEAP_FN_FREE] = "free",
	[HEAP_FN_POSIX_MEMALIGN] = "posix_memalign",
	[HEAP_FN_ALIGNED_ALLOC] = "aligned_alloc",
	[HEAP_FN_MEMALIGN] = "memalign",
	[HEAP_FN_VALLOC] = "valloc",
	[HEAP_FN_PVALLOC] = "pvalloc",
};

#define MAX_OBJS 4096
#define MAX_NEEDED 256
#define ENVIRON_MAX (1u << 20)

struct obj {
	const struct pp_map *m;
	const char *base;
	bool loaded, load_failed, is_static;
	int fd;
	Elf *elf;
	char *soname;
	char **needed;
	size_t nneeded;
};

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');

	return s ? s + 1 : p;
}

static void obj_release(struct obj *o)
{
	size_t i;

	if (o->elf)
		elf_end(o->elf);
	if (o->fd >= 0)
		close(o->fd);
	free(o->soname);
	for (i = 0; i < o->nneeded; i++)
		free(o->needed[i]);
	free(o->needed);
	memset(o, 0, sizeof(*o));
	o->fd = -1;
}

/*
 * The next section after scn (NULL: the first) of `type` with fixed-size
 * entries and data: its header, data and entry count. NULL when none is left.
 */
static Elf_Scn *next_table(Elf *elf, Elf_Scn *scn, Elf64_Word type, GElf_Shdr *sh,
			   Elf_Data **ret_data, size_t *ret_n)
{
	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, sh) || sh->sh_type != type || !sh->sh_entsize)
			continue;
		*ret_data = elf_getdata(scn, NULL);
		if (!*ret_data)
			continue;
		*ret_n = (*ret_data)->d_size / sh->sh_entsize;
		return scn;
	}
	return NULL;
}

static int obj_load(pid_t pid, struct obj *o, struct pp_open_budget *budget)
{
	size_t nph = 0, i;
	Elf_Scn *scn = NULL;
	bool interp = false;

	if (o->loaded)
		return 0;
	if (o->load_failed)
		return -ENOEXEC;
	o->load_failed = true;
	if (!pp_open_budget__take(budget))
		return -EMFILE; /* this search's budget: fds held at once, too */
	o->fd = pp_proc__open_mapped(pid, o->m);
	if (o->fd < 0)
		return o->fd;
	/* read, not mapped: the target can truncate the file */
	o->elf = elf_begin(o->fd, ELF_C_READ, NULL);
	if (!o->elf || elf_kind(o->elf) != ELF_K_ELF || gelf_getclass(o->elf) != ELFCLASS64)
		return -ENOEXEC;
	if (elf_getphdrnum(o->elf, &nph) == 0) {
		for (i = 0; i < nph; i++) {
			GElf_Phdr ph;

			if (gelf_getphdr(o->elf, (int)i, &ph) && ph.p_type == PT_INTERP)
				interp = true;
		}
	}
	o->is_static = !interp;
	GElf_Shdr sh;
	Elf_Data *d;
	size_t n;

	while ((scn = next_table(o->elf, scn, SHT_DYNAMIC, &sh, &d, &n))) {
		for (size_t j = 0; j < n; j++) {
			GElf_Dyn dyn;
			const char *s;

			if (!gelf_getdyn(d, (int)j, &dyn) || dyn.d_tag == DT_NULL)
				break;
			if (dyn.d_tag != DT_NEEDED && dyn.d_tag != DT_SONAME)
				continue;
			s = elf_strptr(o->elf, sh.sh_link, dyn.d_un.d_val);
			if (!s)
				continue;
			if (dyn.d_tag == DT_SONAME) {
				if (!o->soname)
					o->soname = strdup(s);
			} else if (o->nneeded < MAX_NEEDED) {
				char **nv = realloc(o->needed, (o->nneeded + 1) * sizeof(*nv));
				char *c = strdup(s);

				if (!nv || !c) {
					free(c);
					if (nv)
						o->needed = nv;
					return -ENOMEM;
				}
				o->needed = nv;
				o->needed[o->nneeded++] = c;
			}
		}
	}
	o->loaded = true;
	o->load_failed = false;
	return 0;
}

/* Symbols of interest defined in one symbol table section type. */
static int collect_syms(Elf *elf, Elf64_Word type, GElf_Sym *found, bool *have)
{
	Elf_Scn *scn = NULL;
	int nfound = 0;
	GElf_Shdr sh;
	Elf_Data *d;
	size_t n;

	while ((scn = next_table(elf, scn, type, &sh, &d, &n))) {
		for (size_t j = 0; j < n; j++) {
			GElf_Sym sym;
			const char *name;
			int k;

			if (!gelf_getsym(d, (int)j, &sym) || sym.st_shndx == SHN_UNDEF)
				continue;
			if (GELF_ST_TYPE(sym.st_info) != STT_FUNC &&
			    GELF_ST_TYPE(sym.st_info) != STT_GNU_IFUNC)
				continue;
			if (GELF_ST_BIND(sym.st_info) != STB_GLOBAL &&
			    GELF_ST_BIND(sym.st_info) != STB_WEAK)
				continue;
			name = elf_strptr(elf, sh.sh_link, sym.st_name);
			if (!name)
				continue;
			for (k = 0; k < PP_HEAP_NFN; k++) {
				if (!have[k] && strcmp(name, pp_heap_fn_names[k]) == 0) {
					found[k] = sym;
					have[k] = true;
					nfound++;
				}
			}
		}
	}
	return nfound;
}

static int obj_syms(struct obj *o, GElf_Sym *found, bool *have)
{
	memset(have, 0, sizeof(bool) * PP_HEAP_NFN);
	collect_syms(o->elf, SHT_DYNSYM, found, have);
	if (o->is_static && !have[HEAP_FN_MALLOC]) {
		memset(have, 0, sizeof(bool) * PP_HEAP_NFN);
		collect_syms(o->elf, SHT_SYMTAB, found, have);
	}
	return have[HEAP_FN_MALLOC] ? 0 : -ENOENT;
}

static int vaddr_to_off(Elf *elf, uint64_t v, uint64_t *ret_off, uint64_t *ret_avail)
{
	size_t nph = 0, i;

	if (elf_getphdrnum(elf, &nph))
		return -ENOEXEC;
	for (i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (v >= ph.p_vaddr && v < ph.p_vaddr + ph.p_filesz) {
			*ret_off = v - ph.p_vaddr + ph.p_offset;
			*ret_avail = ph.p_vaddr + ph.p_filesz - v;
			return 0;
		}
	}
	return -ERANGE;
}

static int fill_probes(struct obj *o, const GElf_Sym *found, const bool *have,
		       struct pp_heap_allocator *a)
{
	int k;
	unsigned j;

	a->n = 0;
	for (k = 0; k < PP_HEAP_NFN; k++) {
		struct pp_heap_fn_probe *p;
		uint8_t code[64];
		uint64_t off, avail;
		size_t insn = 0;
		bool emulated = false, dup = false;
		ssize_t r;

		if (!have[k] || GELF_ST_TYPE(found[k].st_info) == STT_GNU_IFUNC)
			continue;
		for (j = 0; j < a->n; j++)
			dup |= a->fns[j].vaddr == found[k].st_value;
		if (dup)
			continue; /* alias (memalign == aligned_alloc in glibc): one probe */
		if (vaddr_to_off(o->elf, found[k].st_value, &off, &avail))
			continue;
		r = pread(o->fd, code, PP_MIN(sizeof(code), avail), (off_t)off);
		if (r > 0)
			pp_heap__probe_offset_args(code, (size_t)r, fn_nargs(k), &insn, &emulated);
		p = &a->fns[a->n++];
		p->fn = k;
		p->vaddr = found[k].st_value;
		p->file_off = off;
		p->probe_off = off + insn;
		p->emulated = emulated;
	}
	return a->n ? 0 : -ENOENT;
}

static bool in_order(const size_t *order, size_t n, size_t idx)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (order[i] == idx)
			return true;
	return false;
}

static ssize_t find_obj(struct obj *objs, size_t nobjs, const char *name, bool by_soname, pid_t pid,
			struct pp_open_budget *budget)
{
	size_t i;

	for (i = 0; i < nobjs; i++) {
		if (strchr(name, '/') ? strcmp(objs[i].m->path, name) == 0
				      : strcmp(objs[i].base, name) == 0)
			return (ssize_t)i;
	}
	if (!by_soname)
		return -1;
	for (i = 0; i < nobjs; i++) {
		if (obj_load(pid, &objs[i], budget) == 0 && objs[i].soname &&
		    strcmp(objs[i].soname, name) == 0)
			return (ssize_t)i;
	}
	return -1;
}

static void read_preload(pid_t pid, char ***ret, size_t *ret_n)
{
	char path[64], *env = NULL, *p, *end, **v = NULL;
	size_t len = 0, n = 0;

	*ret = NULL;
	*ret_n = 0;
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	if (pp_read_file(path, ENVIRON_MAX, &env, &len) < 0)
		return;
	for (p = env, end = env + len; p < end; p += strlen(p) + 1) {
		char *tok, *save = NULL;

		if (strncmp(p, "LD_PRELOAD=", 11) != 0)
			continue;
		for (tok = strtok_r(p + 11, " :", &save); tok && n < 64;
		     tok = strtok_r(NULL, " :", &save)) {
			char **nv = realloc(v, (n + 1) * sizeof(*nv));

			if (!nv)
				break;
			v = nv;
			v[n] = strdup(tok);
			if (!v[n])
				break;
			n++;
		}
		break;
	}
	free(env);
	*ret = v;
	*ret_n = n;
}

int pp_heap__find_allocator(pid_t pid, struct pp_heap_allocator *ret)
{
	struct pp_maps maps = { 0 };
	struct obj *objs = NULL;
	size_t nobjs = 0, norder = 0, i, j, npre = 0;
	size_t *order = NULL;
	char exe[PATH_MAX], link[64], **pre = NULL;
	struct pp_open_budget budget;

	pp_sigbus_guard_install();
	pp_open_budget__init(&budget);
	ssize_t n;
	int r;

	if (!ret || pid <= 0)
		return -EINVAL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
	n = readlink(link, exe, sizeof(exe) - 1);
	if (n < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	exe[n] = '\0';
	if (n > 10 && strcmp(exe + n - 10, " (deleted)") == 0)
		exe[n - 10] = '\0';
	r = pp_maps__read(pid, &maps);
	if (r < 0)
		return r == -ENOENT ? -ESRCH : r;

	objs = calloc(PP_MIN(maps.n, (size_t)MAX_OBJS) + 1, sizeof(*objs));
	order = calloc(PP_MIN(maps.n, (size_t)MAX_OBJS) + 1, sizeof(*order));
	if (!objs || !order) {
		r = -ENOMEM;
		goto out;
	}
	for (i = 0; i < maps.n && nobjs < MAX_OBJS; i++) {
		const struct pp_map *m = &maps.v[i];
		bool seen = false;

		if (!m->path || m->special || !m->inode)
			continue;
		for (j = 0; j < nobjs && !seen; j++)
			seen = objs[j].m->inode == m->inode &&
			       objs[j].m->dev_major == m->dev_major &&
			       objs[j].m->dev_minor == m->dev_minor;
		if (seen)
			continue;
		objs[nobjs].m = m;
		objs[nobjs].base = base_name(m->path);
		objs[nobjs].fd = -1;
		nobjs++;
	}
	if (!nobjs) {
		r = -ENOENT;
		goto out;
	}

	/* Main executable, then preloads, then DT_NEEDED breadth first. */
	for (i = 0; i < nobjs; i++) {
		if (strcmp(objs[i].m->path, exe) == 0)
			break;
	}
	order[norder++] = i < nobjs ? i : 0;
	read_preload(pid, &pre, &npre);
	for (i = 0; i < npre; i++) {
		ssize_t k = find_obj(objs, nobjs, pre[i], false, pid, &budget);

		if (k >= 0 && !in_order(order, norder, (size_t)k))
			order[norder++] = (size_t)k;
	}
	for (i = 0; i < norder; i++) {
		struct obj *o = &objs[order[i]];

		if (obj_load(pid, o, &budget) < 0)
			continue;
		for (j = 0; j < o->nneeded; j++) {
			ssize_t k = find_obj(objs, nobjs, o->needed[j], true, pid, &budget);

			if (k >= 0 && !in_order(order, norder, (size_t)k))
				order[norder++] = (size_t)k;
		}
	}
	for (i = 0; i < nobjs; i++) {
		if (!in_order(order, norder, i))
			order[norder++] = i;
	}

	r = -ENOENT;
	for (i = 0; i < norder; i++) {
		struct obj *o = &objs[order[i]];
		GElf_Sym found[PP_HEAP_NFN];
		bool have[PP_HEAP_NFN];
		struct pp_heap_allocator *a;

		if (obj_load(pid, o, &budget) < 0 || obj_syms(o, found, have) < 0)
			continue;
		a = calloc(1, sizeof(*a));
		if (!a) {
			r = -ENOMEM;
			break;
		}
		r = fill_probes(o, found, have, a);
		if (r == 0)
			r = pp_proc__mapped_path(pid, o->m, a->path, sizeof(a->path));
		if (r == 0) {
			bool main_exe = order[i] == order[0];

			a->is_static = main_exe;
			snprintf(a->map_path, sizeof(a->map_path), "%s", o->m->path);
			if (main_exe)
				snprintf(a->name, sizeof(a->name), "static:%s", o->m->path);
			else
				snprintf(a->name, sizeof(a->name), "%s", o->base);
			*ret = *a;
		}
		free(a);
		if (r < 0)
			pp_dbg("heap: pid %d: allocator candidate %s unusable: %s", (int)pid,
			       o->m->path, strerror(-r));
		break;
	}
out:
	for (i = 0; i < npre; i++)
		free(pre[i]);
	free(pre);
	for (i = 0; objs && i < nobjs; i++)
		obj_release(&objs[i]);
	free(objs);
	free(order);
	pp_maps__free(&maps);
	return r;
}
