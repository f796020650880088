/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ELF/DWARF symbolizer with a bounded, reference-counted LRU cache of files.
 *
 * Address translation: a runtime address in mapping m is first turned into
 * a file offset (addr - m->start + m->offset), then into an ELF virtual
 * address through the PT_LOAD segment whose file range holds that offset.
 * That is right for PIE, non-PIE, shared objects and static binaries alike,
 * and the same virtual address is valid in a separate debug file.
 *
 * Symbol rule: FUNC and IFUNC symbols (and sized NOTYPE ones in executable
 * sections) from .symtab, else .dynsym. A symbol covers [value, value+size).
 * A zero-size FUNC symbol (hand-written assembly) covers up to the next
 * symbol in the table or the end of its section, whichever comes first.
 * An address no symbol covers is "<basename>+0x<file offset>", never the
 * nearest preceding symbol.
 *
 * Locking: s->lock protects the cache lists, the counters, the kallsyms
 * and perf-map tables. Loading a file happens outside it; each file has its
 * own lock serializing its libdw use (libdw objects are not thread-safe).
 * An entry in use (refs > 0) is never evicted.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <zlib.h>

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>
#include <libelf.h>

#include "sym-internal.h"
#include "util/elfdebug.h"
#include "util/log.h"
#include "util/sigbus.h"
#include "util/util.h"

#define DEFAULT_CACHE_BYTES ((uint64_t)64 << 20)
#define MAX_FILES 256u /* cached files (each may hold an fd) */
#define MAX_SEGS 64u /* PT_LOAD segments kept per file */
#define MAX_SYMS (8u << 20) /* symbols per file */
#define MAX_NAMES ((size_t)512 << 20)
#define NAME_REUSE 1024u /* recently copied names, by st_name */
#define MAX_INLINE 64u /* frames in one inline chain */
#define DWARF_COMPRESSED_MAX ((uint64_t)256 << 20) /* a compressed section read for its header */
#define MAX_CU_RANGES (4u << 20) /* own CU address table when .debug_aranges is missing */
#define FAILED_RETRY_NS (30ull * 1000000000ull)
#define DEBUGLINK_CRC_MAX ((uint64_t)4 << 30)
#define ENTRY_BASE_BYTES 1024u
#define MEMO_SLOTS 1024u /* remembered DWARF answers per file (direct-mapped) */

struct sym {
	uint64_t addr, size;
	uint32_t name;
	uint16_t shndx;
	uint8_t rank; /* higher = better name among aliases */
	uint8_t pad;
};

struct seg {
	uint64_t off, filesz, vaddr;
};

struct cu_range {
	uint64_t lo, hi;
	Dwarf_Off die;
};

/* A remembered answer: libdw scope walks cost tens of microseconds each. */
struct memo {
	uint64_t vaddr;
	bool used;
	int r; /* 0 or -ENOENT */
	struct pp_sym_result res;
	uint64_t bytes;
};

struct devino {
	uint32_t major, minor;
	uint64_t ino;
};

#define MAX_ALIASES 4

struct sym_file {
	struct sym_file *prev, *next; /* LRU: head is the most recently used */
	unsigned refs;
	pthread_mutex_t lock;

	uint8_t build_id[PP_BUILD_ID_MAX];
	size_t build_id_len;
	struct devino keys[MAX_ALIASES];
	size_t n_keys;

	bool failed;
	bool dwarf_refused; /* DWARF over the cache budget (or of unknown size): symbols only */
	uint64_t failed_at;

	struct seg segs[MAX_SEGS];
	size_t n_segs;
	struct sym *syms;
	size_t n_syms;
	char *names;
	size_t names_len;

	/* PLT stubs, named "<symbol>@plt" (x86-64 and aarch64) */
	uint64_t plt_start, plt_entsize;
	size_t plt_n;
	char *plt_names; /* plt_n NUL-terminated names, in order */
	char **plt_name; /* pointers into plt_names, NULL for unnamed slots */

	int dw_fd;
	Elf *dw_elf;
	Dwarf *dw;
	int alt_fd; /* dwz common file (.gnu_debugaltlink) */
	Elf *alt_elf;
	Dwarf *alt_dw;
	struct cu_range *cus; /* built on the first aranges miss */
	size_t n_cus;
	bool cus_built;
	struct cu_range *ar; /* .debug_aranges, read by us (die: the CU's offset) */
	size_t n_ar;
	bool ar_built;
	uint64_t *ar_cus; /* sorted offsets of the CUs .debug_aranges describes */
	size_t n_ar_cus;
	struct memo *memo; /* MEMO_SLOTS, allocated with the first DWARF lookup */

	uint64_t bytes;
};

struct pp_symbolizer {
	pthread_mutex_t lock;
	uint64_t cache_max;
	bool no_dwarf;
	struct sym_file *head, *tail;
	size_t n_files;
	uint64_t bytes;
	struct pp_ksyms *ksyms;
	struct pp_jitmaps *jit;
	struct pp_symbolizer_stats st;
};

static pthread_once_t elf_once = PTHREAD_ONCE_INIT;
static void elf_init(void)
{
	elf_version(EV_CURRENT);
}

/* ---------- results ---------- */

void pp_sym_result__free(struct pp_sym_result *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++) {
		free(r->frames[i].function);
		free(r->frames[i].system_name);
		free(r->frames[i].file);
	}
	free(r->frames);
	memset(r, 0, sizeof(*r));
}

static int frame_set(struct pp_sym_frame *f, const char *name)
{
	char *d = pp_demangle(name);
	f->system_name = strdup(name);
	f->function = d ? d : strdup(name);
	if (!f->system_name || !f->function) {
		free(f->system_name);
		free(f->function);
		f->system_name = f->function = NULL;
		return -ENOMEM;
	}
	return 0;
}

int pp_sym__result_one(struct pp_sym_result *ret, const char *name, bool has_function)
{
	struct pp_sym_frame *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	if (frame_set(f, name) < 0) {
		free(f);
		return -ENOMEM;
	}
	memset(ret, 0, sizeof(*ret));
	ret->frames = f;
	ret->n = 1;
	ret->has_function = has_function;
	return 0;
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');
	return b && b[1] ? b + 1 : path;
}

static int result_fallback(struct pp_sym_result *ret, const char *path, uint64_t off)
{
	char name[PATH_MAX + 32];
	snprintf(name, sizeof(name), "%s+0x%" PRIx64, base_name(path), off);
	struct pp_sym_frame *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->function = strdup(name);
	f->system_name = strdup(name);
	if (!f->function || !f->system_name) {
		free(f->function);
		free(f->system_name);
		free(f);
		return -ENOMEM;
	}
	memset(ret, 0, sizeof(*ret));
	ret->frames = f;
	ret->n = 1;
	return 0;
}

static char *strdup_or_null(const char *p, bool *fail)
{
	if (!p)
		return NULL;
	char *d = strdup(p);
	if (!d)
		*fail = true;
	return d;
}

/* Deep copy of a result. 0 or -ENOMEM. */
static int result_copy(const struct pp_sym_result *src, struct pp_sym_result *dst)
{
	struct pp_sym_frame *v = calloc(src->n ? src->n : 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	bool fail = false;
	for (size_t i = 0; i < src->n; i++) {
		v[i].function = strdup_or_null(src->frames[i].function, &fail);
		v[i].system_name = strdup_or_null(src->frames[i].system_name, &fail);
		v[i].file = strdup_or_null(src->frames[i].file, &fail);
		v[i].line = src->frames[i].line;
		v[i].start_line = src->frames[i].start_line;
	}
	*dst = *src;
	dst->frames = v;
	if (fail) {
		pp_sym_result__free(dst);
		return -ENOMEM;
	}
	return 0;
}

static uint64_t result_bytes(const struct pp_sym_result *r)
{
	uint64_t b = sizeof(*r) + r->n * sizeof(r->frames[0]);
	for (size_t i = 0; i < r->n; i++) {
		const struct pp_sym_frame *f = &r->frames[i];
		b += (f->function ? strlen(f->function) + 1 : 0) +
		     (f->system_name ? strlen(f->system_name) + 1 : 0) +
		     (f->file ? strlen(f->file) + 1 : 0);
	}
	return b;
}

/* ---------- files in the target's root ---------- */

static const struct pp_sym_opener *opener;

void pp_sym__set_opener(const struct pp_sym_opener *o)
{
	opener = o;
}

int pp_sym__open_mapped(pid_t pid, const struct pp_map *m)
{
	if (opener)
		return opener->open_mapped(opener->ctx, pid, m);
	return pp_proc__open_mapped(pid, m);
}

int pp_sym__open_debug_id(pid_t pid, const uint8_t *id, size_t id_len)
{
	if (opener)
		return opener->open_debug_id(opener->ctx, pid, id, id_len);
	return pp_sym__open_debug_id_direct(pid, id, id_len);
}

int pp_sym__open_debuglink(pid_t pid, const char *mapped_path, const char *name, unsigned cand)
{
	if (opener)
		return opener->open_debuglink(opener->ctx, pid, mapped_path, name, cand);
	return pp_sym__open_debuglink_direct(pid, mapped_path, name, cand);
}

int pp_sym__open_perf_map(pid_t pid)
{
	if (opener)
		return opener->open_perf_map(opener->ctx, pid);
	return pp_sym__open_perf_map_direct(pid);
}

/* fd if it is a regular file (O_NONBLOCK cleared), else closed and -ENOENT. */
static int regular_only(int fd)
{
	struct stat st;
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -ENOENT;
	}
	/* regular file: O_NONBLOCK is meaningless, clear it anyway */
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	return fd;
}

#define OPEN_DEBUG_FLAGS (O_RDONLY | O_NONBLOCK)

int pp_sym__open_in_root_direct(pid_t pid, const char *path)
{
	if (pid <= 0 || !path || path[0] != '/')
		return -EINVAL;
	return regular_only(pp_proc__open_in_root(pid, path, OPEN_DEBUG_FLAGS, 0));
}

/* path (absolute) under podprof's own /usr/lib/debug, which it cannot leave. */
static int open_in_own_debug_dir(const char *path)
{
	_cleanup_close_ int dfd = open(OWN_DEBUG_DIR, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	return regular_only(pp_proc__openat_in_root(dfd, path, OPEN_DEBUG_FLAGS, 0));
}

int pp_sym__open_debug_id_direct(pid_t pid, const uint8_t *id, size_t id_len)
{
	char hex[2 * PP_BUILD_ID_MAX + 1], rel[2 * PP_BUILD_ID_MAX + 32];

	if (!id || id_len == 0 || id_len > PP_BUILD_ID_MAX)
		return -ENOENT;
	pp_buildid__hex(id, id_len, hex);
	snprintf(rel, sizeof(rel), "/.build-id/%.2s/%s.debug", hex, hex + 2);
	for (int i = 0; i < 2; i++) {
		int fd;
		if (i == 0) {
			char path[sizeof(rel) + sizeof(OWN_DEBUG_DIR)];
			snprintf(path, sizeof(path), "%s%s", OWN_DEBUG_DIR, rel);
			fd = pid > 0 ? pp_sym__open_in_root_direct(pid, path) : -ENOENT;
		} else {
			fd = open_in_own_debug_dir(rel);
		}
		if (fd < 0)
			continue;
		uint8_t got[PP_BUILD_ID_MAX];
		size_t gl;
		if (pp_buildid__from_fd(fd, got, &gl) == 0 && gl == id_len && !memcmp(got, id, gl))
			return fd;
		close(fd);
	}
	return -ENOENT;
}

bool pp_sym__debuglink_name_ok(const char *name)
{
	size_t n = name ? strnlen(name, 256) : 0;
	return n > 0 && n < 256 && !strchr(name, '/') && strcmp(name, ".") && strcmp(name, "..");
}

int pp_sym__open_debuglink_direct(pid_t pid, const char *mapped_path, const char *name,
				  unsigned cand)
{
	char dir[PATH_MAX], buf[PATH_MAX];

	if (!mapped_path || mapped_path[0] != '/' || !pp_sym__debuglink_name_ok(name) ||
	    cand >= PP_SYM_DEBUGLINK_CANDIDATES)
		return -ENOENT;
	const char *slash = strrchr(mapped_path, '/');
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - mapped_path), mapped_path);
	/* dir/link, dir/.debug/link, /usr/lib/debug/dir/link (target's root), the
	 * same under podprof's /usr/lib/debug */
	static const char *const mid[] = { "", "/.debug", "", "" };
	int n = snprintf(buf, sizeof(buf), "%s%s%s/%s", cand == 2 ? OWN_DEBUG_DIR : "", dir,
			 mid[cand], name);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return -ENOENT;
	if (cand == 0 && !strcmp(buf, mapped_path))
		return -ENOENT; /* the file itself */
	if (cand == 3)
		return open_in_own_debug_dir(buf);
	return pid > 0 ? pp_sym__open_in_root_direct(pid, buf) : -ENOENT;
}

/* ---------- ELF helpers ---------- */

static Elf_Scn *find_section(Elf *elf, const char *name, GElf_Shdr *ret_shdr)
{
	size_t shstrndx;
	if (elf_getshdrstrndx(elf, &shstrndx) < 0)
		return NULL;
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh))
			continue;
		const char *n = elf_strptr(elf, shstrndx, sh.sh_name);
		if (n && strcmp(n, name) == 0) {
			if (ret_shdr)
				*ret_shdr = sh;
			return scn;
		}
	}
	return NULL;
}

static Elf_Scn *find_section_type(Elf *elf, Elf64_Word type)
{
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (gelf_getshdr(scn, &sh) && sh.sh_type == type)
			return scn;
	}
	return NULL;
}

/*
 * Bytes of DWARF sections with data in memory (0 = no usable DWARF,
 * UINT64_MAX = a section whose size is unknown).
 */
static uint64_t dwarf_size(Elf *elf)
{
	uint64_t total;
	bool info;

	if (pp_elf_debug_bytes(elf, DWARF_COMPRESSED_MAX, &total, &info) < 0)
		return 0;
	if (total == UINT64_MAX)
		return UINT64_MAX;
	return info ? total : 0;
}

/*
 * libdw (0.188) runs strlen on string sections: one without a final NUL
 * (truncated or corrupt) would be read past its end. Called after
 * dwarf_begin_elf, which has decompressed the sections in place.
 */
static bool dwarf_strings_ok(Elf *elf)
{
	static const char *const names[] = { ".debug_str", ".debug_line_str", ".zdebug_str",
					     ".zdebug_line_str" };
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		GElf_Shdr sh;
		Elf_Scn *scn = find_section(elf, names[i], &sh);
		if (!scn || sh.sh_type == SHT_NOBITS)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (!d)
			return false;
		if (d->d_size && (!d->d_buf || ((const char *)d->d_buf)[d->d_size - 1] != '\0'))
			return false;
	}
	return true;
}

/*
 * Debug sections libdw would load (and decompress) in dwarf_begin_elf but
 * names, lines and inline chains never read: variable locations, call
 * frame information, macros and the name indexes. In libc6-dbg's libc they
 * are 1.4 MB of the 10 MB. Marked SHT_NOBITS in libelf's in-memory copy of
 * the section headers (the file is opened read-only and never written),
 * which dwarf_begin_elf skips as stripped; dwarf_size then leaves them out
 * of the budget too.
 */
static void hide_unused_debug(Elf *elf)
{
	static const char *const unused[] = { "loclists", "loc",	  "frame",
					      "macro",	  "macinfo",	  "pubnames",
					      "pubtypes", "gnu_pubnames", "gnu_pubtypes" };
	size_t shstrndx;
	if (elf_getshdrstrndx(elf, &shstrndx) < 0)
		return;
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		const char *n = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!n)
			continue;
		if (!strncmp(n, ".debug_", 7))
			n += 7;
		else if (!strncmp(n, ".zdebug_", 8))
			n += 8;
		else
			continue;
		for (size_t i = 0; i < ARRAY_SIZE(unused); i++) {
			if (strcmp(n, unused[i]) != 0)
				continue;
			sh.sh_type = SHT_NOBITS;
			gelf_update_shdr(scn, &sh);
			break;
		}
	}
}

static Elf *elf_open(int fd)
{
	pthread_once(&elf_once, elf_init);
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf)
		return NULL;
	if (elf_kind(elf) != ELF_K_ELF) {
		elf_end(elf);
		return NULL;
	}
	hide_unused_debug(elf);
	return elf;
}

static int load_segments(struct sym_file *f, Elf *elf)
{
	size_t n;
	if (elf_getphdrnum(elf, &n) < 0)
		return -EBADMSG;
	for (size_t i = 0; i < n && f->n_segs < MAX_SEGS; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (ph.p_filesz > UINT64_MAX - ph.p_offset)
			continue;
		f->segs[f->n_segs++] = (struct seg){ ph.p_offset, ph.p_filesz, ph.p_vaddr };
	}
	return f->n_segs ? 0 : -ENOENT;
}

/* File offset -> ELF virtual address. false when no PT_LOAD holds it. */
static bool off_to_vaddr(const struct sym_file *f, uint64_t off, uint64_t *ret)
{
	for (size_t i = 0; i < f->n_segs; i++) {
		const struct seg *s = &f->segs[i];
		if (off >= s->off && off - s->off < s->filesz) {
			*ret = off - s->off + s->vaddr;
			return true;
		}
	}
	return false;
}

static int sym_cmp(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank > y->rank ? -1 : 1; /* best first */
	return 0;
}

/* Among aliases at one address: GLOBAL > WEAK > LOCAL, FUNC > NOTYPE, fewer leading '_'. */
static uint8_t sym_rank(const GElf_Sym *s, const char *name)
{
	unsigned bind = GELF_ST_BIND(s->st_info), type = GELF_ST_TYPE(s->st_info);
	unsigned r = 0;
	r += bind == STB_GLOBAL ? 32 : bind == STB_WEAK ? 16 : 0;
	r += type == STT_FUNC || type == STT_GNU_IFUNC ? 8 : 0;
	unsigned u = 0;
	while (name[u] == '_' && u < 3)
		u++;
	r += 3 - u;
	return (uint8_t)r;
}

/* Loads FUNC symbols of symbol table scn into f. */
static int load_symbols(struct sym_file *f, Elf *elf, Elf_Scn *scn)
{
	GElf_Shdr sh;
	if (!gelf_getshdr(scn, &sh) || sh.sh_entsize == 0)
		return -EBADMSG;
	Elf_Data *data = elf_getdata(scn, NULL);
	if (!data)
		return -EBADMSG;
	size_t n = sh.sh_size / sh.sh_entsize;
	if (n > MAX_SYMS)
		n = MAX_SYMS;

	/* section bounds for the zero-size rule, and which sections hold code */
	size_t nsec = 0;
	if (elf_getshdrnum(elf, &nsec) < 0)
		nsec = 0;
	if (nsec > 65535)
		nsec = 65535;
	_cleanup_free_ uint64_t *sec_end = calloc(nsec ? nsec : 1, sizeof(uint64_t));
	_cleanup_free_ uint8_t *sec_exec = calloc(nsec ? nsec : 1, 1);
	if (!sec_end || !sec_exec)
		return -ENOMEM;
	for (size_t i = 1; i < nsec; i++) {
		Elf_Scn *s = elf_getscn(elf, i);
		GElf_Shdr ssh;
		if (s && gelf_getshdr(s, &ssh) && (ssh.sh_flags & SHF_ALLOC)) {
			sec_end[i] = ssh.sh_addr + ssh.sh_size;
			sec_exec[i] = !!(ssh.sh_flags & SHF_EXECINSTR);
		}
	}

	/*
	 * Names are copied per symbol: entries sharing one long name (or
	 * pointing into one at many offsets) would multiply the string table.
	 * A name already copied for the same st_name is reused, and the copies
	 * stay within twice the string table (plus 1 MiB for tail-merged
	 * strings); the symbols past that are dropped.
	 */
	GElf_Shdr strsh;
	Elf_Scn *strscn = elf_getscn(elf, sh.sh_link);
	uint64_t names_max = MAX_NAMES;
	if (strscn && gelf_getshdr(strscn, &strsh) && strsh.sh_size < MAX_NAMES / 2 - (1u << 20))
		names_max = strsh.sh_size * 2 + (1u << 20);
	uint32_t seen_key[NAME_REUSE], seen_off[NAME_REUSE];
	memset(seen_key, 0xff, sizeof(seen_key));

	struct sym *v = NULL;
	size_t nv = 0, cap = 0;
	struct pp_buf names = { .max = names_max };
	int r = 0;
	for (size_t i = 0; i < n; i++) {
		GElf_Sym s;
		if (!gelf_getsym(data, (int)i, &s))
			break;
		unsigned type = GELF_ST_TYPE(s.st_info);
		if (s.st_shndx == SHN_UNDEF || s.st_shndx >= SHN_LORESERVE || s.st_shndx >= nsec)
			continue;
		bool code = type == STT_FUNC || type == STT_GNU_IFUNC ||
			    (type == STT_NOTYPE && s.st_size > 0 && sec_exec[s.st_shndx]);
		if (!code || s.st_value == 0)
			continue;
		const char *name = elf_strptr(elf, sh.sh_link, s.st_name);
		if (!name || !*name)
			continue;
		size_t nl = strnlen(name, 4096);
		const char *at = memchr(name, '@', nl);
		if (at && at != name)
			nl = (size_t)(at - name); /* "memcpy@GLIBC_2.2.5" -> "memcpy" */
		if (pp_grow(&v, &cap, nv + 1, sizeof(*v), 1024) < 0) {
			r = -ENOMEM;
			goto fail;
		}
		size_t off = names.len, slot = (s.st_name ^ (s.st_name >> 10)) % NAME_REUSE;
		if (seen_key[slot] == s.st_name && s.st_name != UINT32_MAX) {
			off = seen_off[slot];
		} else {
			if (off > UINT32_MAX - nl - 1 || pp_buf_append(&names, name, nl) < 0 ||
			    pp_buf_append(&names, "", 1) < 0)
				break; /* name space exhausted */
			seen_key[slot] = s.st_name;
			seen_off[slot] = (uint32_t)off;
		}
		uint64_t size = s.st_size;
		if (size > UINT64_MAX - s.st_value)
			size = UINT64_MAX - s.st_value;
		v[nv++] = (struct sym){ .addr = s.st_value,
					.size = size,
					.name = (uint32_t)off,
					.shndx = (uint16_t)s.st_shndx,
					.rank = sym_rank(&s, name) };
	}
	if (nv == 0) {
		free(v);
		pp_buf_free(&names);
		return -ENOENT;
	}
	qsort(v, nv, sizeof(*v), sym_cmp);
	/* keep the best name per address, with the largest size among the aliases */
	size_t w = 0;
	for (size_t i = 0; i < nv; i++) {
		if (w && v[w - 1].addr == v[i].addr) {
			if (v[i].size > v[w - 1].size)
				v[w - 1].size = v[i].size;
			continue;
		}
		v[w++] = v[i];
	}
	nv = w;
	/* zero-size symbols: up to the next symbol or the end of their section */
	for (size_t i = 0; i < nv; i++) {
		if (v[i].size)
			continue;
		uint64_t end = sec_end[v[i].shndx];
		if (i + 1 < nv && v[i + 1].addr < end)
			end = v[i + 1].addr;
		v[i].size = end > v[i].addr ? end - v[i].addr : 0;
	}
	f->syms = v;
	f->n_syms = nv;
	f->names_len = names.len;
	f->names = pp_buf_steal(&names, NULL);
	return 0;
fail:
	free(v);
	pp_buf_free(&names);
	return r;
}

#define MAX_PLT 65536u

/*
 * PLT stubs: the i-th JUMP_SLOT relocation of .rela.plt belongs to the
 * i-th 16-byte entry of .plt.sec (IBT layout) or of .plt after its header
 * (16 bytes on x86-64, 32 on aarch64). Best effort: anything unexpected
 * leaves the PLT unnamed.
 */
static void load_plt(struct sym_file *f, Elf *elf)
{
	GElf_Ehdr eh;
	if (!gelf_getehdr(elf, &eh))
		return;
	uint64_t hdr;
	unsigned jump_slot;
	if (eh.e_machine == EM_X86_64) {
		hdr = 16, jump_slot = R_X86_64_JUMP_SLOT;
	} else if (eh.e_machine == EM_AARCH64) {
		hdr = 32, jump_slot = R_AARCH64_JUMP_SLOT;
	} else {
		return;
	}
	GElf_Shdr rsh, psh, dsh;
	Elf_Scn *rscn = find_section(elf, ".rela.plt", &rsh);
	if (!rscn || rsh.sh_type != SHT_RELA || rsh.sh_entsize == 0)
		return;
	Elf_Scn *pscn = find_section(elf, ".plt.sec", &psh);
	if (pscn && psh.sh_type == SHT_PROGBITS) {
		hdr = 0;
	} else {
		pscn = find_section(elf, ".plt", &psh);
		if (!pscn || psh.sh_type != SHT_PROGBITS)
			return;
	}
	Elf_Scn *dscn = elf_getscn(elf, rsh.sh_link);
	if (!dscn || !gelf_getshdr(dscn, &dsh) || dsh.sh_entsize == 0)
		return;
	Elf_Data *rd = elf_getdata(rscn, NULL), *dd = elf_getdata(dscn, NULL);
	if (!rd || !dd || psh.sh_size < hdr)
		return;
	size_t n = rsh.sh_size / rsh.sh_entsize;
	size_t slots = (psh.sh_size - hdr) / 16;
	if (n > slots)
		n = slots;
	if (n == 0 || n > MAX_PLT)
		return;
	struct pp_buf names = { .max = (size_t)16 << 20 };
	size_t *offs = calloc(n, sizeof(*offs));
	char **ptrs = calloc(n, sizeof(*ptrs));
	if (!offs || !ptrs)
		goto out;
	size_t named = 0;
	for (size_t i = 0; i < n; i++) {
		GElf_Rela rel;
		GElf_Sym sym;
		offs[i] = SIZE_MAX;
		if (!gelf_getrela(rd, (int)i, &rel) || GELF_R_TYPE(rel.r_info) != jump_slot ||
		    !gelf_getsym(dd, (int)GELF_R_SYM(rel.r_info), &sym))
			continue;
		const char *nm = elf_strptr(elf, dsh.sh_link, sym.st_name);
		if (!nm || !*nm)
			continue;
		offs[i] = names.len;
		if (pp_buf_printf(&names, "%.*s@plt", 1024, nm) < 0 ||
		    pp_buf_append(&names, "", 1) < 0) {
			offs[i] = SIZE_MAX;
			break;
		}
		named++;
	}
	if (!named)
		goto out;
	f->bytes += n * sizeof(char *) + names.len;
	f->plt_names = pp_buf_steal(&names, NULL);
	for (size_t i = 0; i < n; i++)
		ptrs[i] = offs[i] == SIZE_MAX ? NULL : f->plt_names + offs[i];
	f->plt_name = ptrs;
	ptrs = NULL;
	f->plt_start = psh.sh_addr + hdr;
	f->plt_entsize = 16;
	f->plt_n = n;
out:
	free(offs);
	free(ptrs);
	pp_buf_free(&names);
}

static const char *plt_lookup(const struct sym_file *f, uint64_t vaddr)
{
	if (!f->plt_n || vaddr < f->plt_start)
		return NULL;
	uint64_t i = (vaddr - f->plt_start) / f->plt_entsize;
	return i < f->plt_n ? f->plt_name[i] : NULL;
}

static const struct sym *sym_lookup(const struct sym_file *f, uint64_t vaddr)
{
	size_t lo = PP_UPPER_BOUND(f->syms, f->n_syms, addr, vaddr);
	/* nested symbols: a few earlier ones may still cover vaddr */
	for (size_t i = lo, k = 0; i > 0 && k < 16; i--, k++) {
		const struct sym *s = &f->syms[i - 1];
		if (vaddr - s->addr < s->size)
			return s;
	}
	return NULL;
}

/* ---------- separate debug files ---------- */

static bool crc_matches(int fd, uint32_t want)
{
	unsigned char buf[65536];
	uLong crc = crc32(0L, Z_NULL, 0);
	uint64_t total = 0, off = 0;
	for (;;) {
		ssize_t n = pread(fd, buf, sizeof(buf), (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return false;
		}
		if (n == 0)
			break;
		crc = crc32(crc, buf, (uInt)n);
		off += (uint64_t)n;
		total += (uint64_t)n;
		if (total > DEBUGLINK_CRC_MAX)
			return false;
	}
	return (uint32_t)crc == want;
}

/* Debug file candidate fd: must match id (or crc when no id). fd, or closed and -ESTALE. */
static int check_debug(int fd, const char *what, pid_t pid, const uint8_t *id, size_t id_len,
		       bool check_crc, uint32_t crc)
{
	if (fd < 0)
		return fd;
	uint8_t got[PP_BUILD_ID_MAX];
	size_t gl;
	int r = pp_buildid__from_fd(fd, got, &gl);
	bool ok;
	if (r == 0 && id_len)
		ok = gl == id_len && !memcmp(got, id, id_len); /* both have ids: they decide */
	else if (check_crc)
		ok = crc_matches(fd, crc);
	else
		ok = false;
	if (!ok) {
		pp_dbg("symbolize: debug file %s (pid %d) does not match, rejected", what,
		       (int)pid);
		close(fd);
		return -ESTALE;
	}
	return fd;
}

/*
 * Opens the separate debug file of elf (mapped as path in pid): by build
 * id, else by .gnu_debuglink name. The paths are derived by the opener, not
 * here: in the isolated helper, by podprof. fd or -errno.
 */
static int find_debug_file(pid_t pid, const char *path, Elf *elf, const uint8_t *id, size_t id_len,
			   char *ret_path, size_t ret_size)
{
	if (id_len) {
		int fd = check_debug(pp_sym__open_debug_id(pid, id, id_len), "by build id", pid, id,
				     id_len, false, 0);
		if (fd >= 0) {
			char hex[2 * PP_BUILD_ID_MAX + 1];
			pp_buildid__hex(id, id_len, hex);
			snprintf(ret_path, ret_size, OWN_DEBUG_DIR "/.build-id/%.2s/%s.debug", hex,
				 hex + 2);
			return fd;
		}
	}

	GElf_Shdr sh;
	Elf_Scn *scn = find_section(elf, ".gnu_debuglink", &sh);
	if (!scn || sh.sh_type == SHT_NOBITS)
		return -ENOENT;
	Elf_Data *d = elf_getdata(scn, NULL);
	if (!d || !d->d_buf || d->d_size < 8 || d->d_size > 4096)
		return -ENOENT;
	const char *link = d->d_buf;
	size_t ll = strnlen(link, d->d_size);
	size_t crc_off = (ll + 4) & ~(size_t)3;
	if (ll == 0 || ll >= 256 || crc_off + 4 > d->d_size || !pp_sym__debuglink_name_ok(link))
		return -ENOENT;
	uint32_t crc;
	memcpy(&crc, (const char *)d->d_buf + crc_off, 4);
	GElf_Ehdr eh;
	if (gelf_getehdr(elf, &eh) &&
	    (eh.e_ident[EI_DATA] == ELFDATA2MSB) != (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__))
		crc = __builtin_bswap32(crc);

	for (unsigned k = 0; k < PP_SYM_DEBUGLINK_CANDIDATES; k++) {
		int fd = check_debug(pp_sym__open_debuglink(pid, path, link, k), link, pid, id,
				     id_len, true, crc);
		if (fd >= 0) {
			/* for logs: where it was found */
			const char *slash = strrchr(path, '/');
			snprintf(ret_path, ret_size, "%s%.*s%s/%s", k >= 2 ? OWN_DEBUG_DIR : "",
				 (int)(slash ? slash - path : 0), path, k == 1 ? "/.debug" : "",
				 link);
			return fd;
		}
	}
	return -ENOENT;
}

/* ---------- DWARF ---------- */

static int cu_range_cmp(const void *a, const void *b)
{
	const struct cu_range *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Own CU table for files without .debug_aranges (clang, some linkers), or
 * for the CUs it leaves out. */
static void build_cu_table(struct sym_file *f)
{
	Dwarf_Off off = 0, next;
	size_t hsize;
	struct cu_range *v = NULL;
	size_t n = 0, cap = 0;
	f->cus_built = true;
	while (dwarf_nextcu(f->dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cu;
		/* a CU .debug_aranges describes is not set up again (libdw keeps ~1 KB a CU) */
		bool described = f->n_ar_cus &&
				 bsearch(&off, f->ar_cus, f->n_ar_cus, sizeof(*f->ar_cus), u64_cmp);
		if (!described && dwarf_offdie(f->dw, off + hsize, &cu)) {
			Dwarf_Addr base, lo, hi;
			ptrdiff_t it = 0;
			while ((it = dwarf_ranges(&cu, it, &base, &lo, &hi)) > 0) {
				if (n >= MAX_CU_RANGES || hi <= lo)
					break;
				if (pp_grow(&v, &cap, n + 1, sizeof(*v), 256) < 0)
					goto done;
				v[n++] = (struct cu_range){ lo, hi, off + hsize };
			}
		}
		if (next <= off)
			break;
		off = next;
	}
done:
	if (n)
		qsort(v, n, sizeof(*v), cu_range_cmp);
	f->cus = v;
	f->n_cus = n;
	f->bytes += n * sizeof(*v);
}

static uint64_t rd_u(const uint8_t *p, size_t n)
{
	uint32_t v4;
	uint64_t v8;
	if (n == 4) {
		memcpy(&v4, p, 4);
		return v4;
	}
	memcpy(&v8, p, 8);
	return v8;
}

/*
 * .debug_aranges read by us (version 2 sets, no segment selectors, the
 * host's byte order) into f->ar. dwarf_addrdie would have libdw set up
 * every CU of the file to answer its first address (~1 KB a CU: 2.2 MB for
 * libc6-dbg's libc); a lookup here sets up only the CU it finds.
 */
static void build_aranges(struct sym_file *f)
{
	GElf_Ehdr eh;
	GElf_Shdr sh;
	struct cu_range *v = NULL;
	size_t n = 0, cap = 0;

	f->ar_built = true;
	Elf_Scn *scn = find_section(f->dw_elf, ".debug_aranges", &sh);
	if (!scn)
		scn = find_section(f->dw_elf, ".zdebug_aranges", &sh);
	if (!scn || sh.sh_type == SHT_NOBITS || (sh.sh_flags & SHF_COMPRESSED) ||
	    !gelf_getehdr(f->dw_elf, &eh) ||
	    eh.e_ident[EI_DATA] !=
		    (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB))
		return;
	Elf_Data *d = elf_getdata(scn, NULL); /* decompressed by dwarf_begin_elf */
	if (!d || !d->d_buf)
		return;
	const uint8_t *p = d->d_buf, *end = p + d->d_size;
	uint64_t *cus = NULL;
	size_t n_cus = 0, cap_cus = 0;
	if (d->d_size >= 4 && !memcmp(p, "ZLIB", 4))
		return; /* still compressed: leave it to libdw */
	while (end - p >= 4) {
		const uint8_t *set = p, *body;
		uint64_t len = rd_u(p, 4);
		size_t osz = 4;
		if (len == 0xffffffffu) {
			if (end - p < 12)
				break;
			len = rd_u(p + 4, 8);
			osz = 8;
			body = p + 12;
		} else if (len >= 0xfffffff0u) {
			break;
		} else {
			body = p + 4;
		}
		if (len > (uint64_t)(end - body) || len < 2 + osz + 2)
			break;
		const uint8_t *send = body + len;
		p = send;
		uint64_t ver = rd_u(body, 4) & 0xffff;
		uint64_t cu_off = rd_u(body + 2, osz);
		size_t asz = body[2 + osz], ssz = body[3 + osz];
		if (ver != 2 || (asz != 4 && asz != 8) || ssz != 0)
			continue;
		if (n_cus < MAX_CU_RANGES &&
		    pp_grow(&cus, &cap_cus, n_cus + 1, sizeof(*cus), 256) == 0)
			cus[n_cus++] = cu_off;
		size_t tup = 2 * asz, hdr = (size_t)(body + 4 + osz - set);
		const uint8_t *t = set + (hdr + tup - 1) / tup * tup;
		while (t <= send && (size_t)(send - t) >= tup) {
			uint64_t a = rd_u(t, asz), l = rd_u(t + asz, asz);
			t += tup;
			if (!a && !l)
				break;
			if (!l || a + l < a)
				continue;
			if (n >= MAX_CU_RANGES || pp_grow(&v, &cap, n + 1, sizeof(*v), 256) < 0)
				goto done;
			v[n++] = (struct cu_range){ a, a + l, cu_off };
		}
	}
done:
	if (n)
		qsort(v, n, sizeof(*v), cu_range_cmp);
	f->ar = v;
	f->n_ar = n;
	if (n_cus)
		qsort(cus, n_cus, sizeof(*cus), u64_cmp);
	f->ar_cus = cus;
	f->n_ar_cus = n_cus;
	f->bytes += n * sizeof(*v) + n_cus * sizeof(*cus);
}

/* The CU whose header is at off: its DIE. */
static bool cu_die_at(struct sym_file *f, Dwarf_Off off, Dwarf_Die *ret)
{
	Dwarf_Off next;
	size_t hsize;
	if (dwarf_next_unit(f->dw, off, &next, &hsize, NULL, NULL, NULL, NULL, NULL, NULL) != 0)
		return false;
	return dwarf_offdie(f->dw, off + hsize, ret) != NULL;
}

static bool cu_for_addr(struct sym_file *f, uint64_t vaddr, Dwarf_Die *ret)
{
	if (!f->ar_built)
		build_aranges(f);
	if (f->n_ar) {
		size_t lo = PP_UPPER_BOUND(f->ar, f->n_ar, lo, vaddr);
		for (size_t i = lo, k = 0; i > 0 && k < 64; i--, k++) {
			const struct cu_range *c = &f->ar[i - 1];
			if (vaddr >= c->lo && vaddr < c->hi)
				return cu_die_at(f, c->die, ret);
		}
	} else if (dwarf_addrdie(f->dw, vaddr, ret)) {
		return true;
	}
	if (!f->cus_built)
		build_cu_table(f);
	size_t lo = PP_UPPER_BOUND(f->cus, f->n_cus, lo, vaddr);
	for (size_t i = lo, k = 0; i > 0 && k < 64; i--, k++) {
		const struct cu_range *c = &f->cus[i - 1];
		if (vaddr >= c->lo && vaddr < c->hi)
			return dwarf_offdie(f->dw, c->die, ret) != NULL;
	}
	return false;
}

static const char *die_name(Dwarf_Die *die)
{
	Dwarf_Attribute a;
	const char *n = NULL;
	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &a) ||
	    dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a))
		n = dwarf_formstring(&a);
	if (!n && dwarf_attr_integrate(die, DW_AT_name, &a))
		n = dwarf_formstring(&a);
	return n && *n ? n : NULL;
}

struct dframe {
	const char *name;
	const char *file;
	const char *comp_dir; /* for a relative file */
	uint32_t line, start_line;
};

static bool is_func_tag(int tag)
{
	return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine ||
	       tag == DW_TAG_entry_point;
}

static const char *cu_file(Dwarf_Die *cu, Dwarf_Word idx)
{
	Dwarf_Files *files;
	size_t n;
	if (dwarf_getsrcfiles(cu, &files, &n) != 0 || idx >= n)
		return NULL;
	return dwarf_filesrc(files, idx, NULL, NULL);
}

/*
 * Fills fr[] innermost first. Frame 0's file:line comes from the line
 * table; frame k+1's is the DW_AT_call_file/line of frame k, which is an
 * inlined_subroutine (the call site inside frame k+1). Returns the count.
 */
static size_t dwarf_frames(struct sym_file *f, uint64_t vaddr, struct dframe *fr, size_t max)
{
	Dwarf_Die cu;
	if (!cu_for_addr(f, vaddr, &cu))
		return 0;
	const char *file = NULL;
	int line = 0;
	Dwarf_Line *dl = dwarf_getsrc_die(&cu, vaddr);
	if (dl) {
		file = dwarf_linesrc(dl, NULL, NULL);
		if (dwarf_lineno(dl, &line) != 0 || line < 0)
			line = 0;
	}
	Dwarf_Attribute cda;
	const char *comp_dir = dwarf_formstring(dwarf_attr(&cu, DW_AT_comp_dir, &cda));
	Dwarf_Die *scopes = NULL;
	int ns = dwarf_getscopes(&cu, vaddr, &scopes);
	Dwarf_Die cur;
	bool have = false;
	for (int i = 0; i < ns; i++) {
		if (is_func_tag(dwarf_tag(&scopes[i]))) {
			cur = scopes[i];
			have = true;
			break;
		}
	}
	free(scopes);
	/*
	 * dwarf_getscopes continues an inlined_subroutine with its abstract
	 * origin, not the function it was inlined into: walk the concrete
	 * parents of each inlined_subroutine with dwarf_getscopes_die instead.
	 */
	size_t n = 0;
	while (have && n < max) {
		int tag = dwarf_tag(&cur);
		int dline = 0;
		if (dwarf_decl_line(&cur, &dline) != 0 || dline < 0)
			dline = 0;
		fr[n] = (struct dframe){ .name = die_name(&cur),
					 .file = file,
					 .comp_dir = comp_dir,
					 .line = (uint32_t)line,
					 .start_line = (uint32_t)dline };
		n++;
		if (tag != DW_TAG_inlined_subroutine)
			break; /* the physical function */
		/* the next (outer) frame is at this inlined call's call site */
		Dwarf_Attribute a;
		Dwarf_Word w;
		file = NULL;
		line = 0;
		if (dwarf_attr(&cur, DW_AT_call_file, &a) && dwarf_formudata(&a, &w) == 0)
			file = cu_file(&cu, w);
		if (dwarf_attr(&cur, DW_AT_call_line, &a) && dwarf_formudata(&a, &w) == 0 &&
		    w <= UINT32_MAX)
			line = (int)w;
		Dwarf_Die *up = NULL;
		int nu = dwarf_getscopes_die(&cur, &up);
		have = false;
		for (int i = 1; i < nu; i++) {
			if (is_func_tag(dwarf_tag(&up[i]))) {
				cur = up[i];
				have = true;
				break;
			}
		}
		free(up);
	}
	if (n == 0 && (file || line) && max) {
		fr[0] = (struct dframe){ .file = file,
					 .comp_dir = comp_dir,
					 .line = (uint32_t)line };
		n = 1;
	}
	return n;
}

/* ---------- file entries ---------- */

static void file_free(struct sym_file *f)
{
	if (!f)
		return;
	if (f->dw)
		dwarf_end(f->dw);
	if (f->dw_elf)
		elf_end(f->dw_elf);
	if (f->dw_fd >= 0)
		close(f->dw_fd);
	if (f->alt_dw)
		dwarf_end(f->alt_dw);
	if (f->alt_elf)
		elf_end(f->alt_elf);
	if (f->alt_fd >= 0)
		close(f->alt_fd);
	free(f->syms);
	free(f->names);
	free(f->cus);
	free(f->ar);
	free(f->ar_cus);
	free(f->plt_names);
	free(f->plt_name);
	if (f->memo) {
		for (size_t i = 0; i < MEMO_SLOTS; i++)
			pp_sym_result__free(&f->memo[i].res);
		free(f->memo);
	}
	pthread_mutex_destroy(&f->lock);
	free(f);
}

static struct sym_file *file_new(void)
{
	struct sym_file *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->dw_fd = -1;
	f->alt_fd = -1;
	if (pthread_mutex_init(&f->lock, NULL) != 0) {
		free(f);
		return NULL;
	}
	return f;
}

/*
 * dwz moves DWARF shared by several files into one "alt" file named by
 * .gnu_debugaltlink (path + build id). libdw would look for it in podprof's
 * root only: find it through the opener (see below), check its build id,
 * and hand it to libdw. Without it the shared parts stay unresolved.
 */
static void attach_alt(struct sym_file *f, pid_t pid, const char *mapped_path, bool own_dwarf,
		       uint64_t max)
{
	GElf_Shdr sh;
	Elf_Scn *scn = find_section(f->dw_elf, ".gnu_debugaltlink", &sh);
	if (!scn || sh.sh_type == SHT_NOBITS)
		return;
	Elf_Data *d = elf_getdata(scn, NULL);
	if (!d || !d->d_buf || d->d_size < 3 || d->d_size > PATH_MAX + PP_BUILD_ID_MAX)
		return;
	const char *name = d->d_buf;
	size_t nl = strnlen(name, d->d_size);
	if (nl == 0 || nl + 1 >= d->d_size || d->d_size - nl - 1 > PP_BUILD_ID_MAX)
		return;
	const uint8_t *id = (const uint8_t *)name + nl + 1;
	size_t id_len = d->d_size - nl - 1;

	/*
	 * Where the opener can derive it: a plain name next to the mapped file
	 * (when the DWARF is the mapped file's own), and the common file's build
	 * id under .build-id (Debian and Fedora link dwz files there). Absolute
	 * names and names relative to a separate debug file are not followed:
	 * they would be paths of the file's choosing.
	 */
	for (int c = 0; c < 2; c++) {
		int fd;
		if (c == 0)
			fd = own_dwarf && pp_sym__debuglink_name_ok(name)
				     ? pp_sym__open_debuglink(pid, mapped_path, name, 0)
				     : -ENOENT;
		else
			fd = pp_sym__open_debug_id(pid, id, id_len);
		fd = check_debug(fd, name, pid, id, id_len, false, 0);
		{
			if (fd < 0)
				continue;
			Elf *e = elf_open(fd);
			/* its DWARF is decompressed and kept too: within the same budget */
			Dwarf *dw = e && dwarf_size(e) <= max
					    ? dwarf_begin_elf(e, DWARF_C_READ, NULL)
					    : NULL;
			if (dw && !dwarf_strings_ok(e)) {
				dwarf_end(dw);
				dw = NULL;
			}
			if (!dw) {
				if (e)
					elf_end(e);
				close(fd);
				continue;
			}
			dwarf_setalt(f->dw, dw);
			f->alt_fd = fd;
			f->alt_elf = e;
			f->alt_dw = dw;
			f->bytes += dwarf_size(e);
			return;
		}
	}
	pp_dbg("symbolize: dwz file %s not found for %s", name, mapped_path);
}

/*
 * Reads symbols, segments and (unless no_dwarf or too big) DWARF of the
 * file open as fd, mapped as path by pid. Takes ownership of fd.
 */
static void file_load(struct sym_file *f, pid_t pid, const char *path, int fd, bool no_dwarf,
		      uint64_t cache_max)
{
	Elf *elf = elf_open(fd);
	Elf *dbg = NULL;
	int dbg_fd = -1;
	char dbg_path[PATH_MAX] = "";
	if (!elf) {
		f->failed = true;
		close(fd);
		return;
	}
	if (load_segments(f, elf) < 0) {
		f->failed = true;
		goto out;
	}
	load_plt(f, elf);
	Elf_Scn *symtab = find_section_type(elf, SHT_SYMTAB);
	uint64_t dsize = dwarf_size(elf);
	if (!symtab || (!dsize && !no_dwarf)) {
		dbg_fd = find_debug_file(pid, path, elf, f->build_id, f->build_id_len, dbg_path,
					 sizeof(dbg_path));
		if (dbg_fd >= 0) {
			dbg = elf_open(dbg_fd);
			if (!dbg) {
				close(dbg_fd);
				dbg_fd = -1;
			}
		}
	}
	Elf_Scn *dsymtab = dbg ? find_section_type(dbg, SHT_SYMTAB) : NULL;
	if (symtab && load_symbols(f, elf, symtab) == 0)
		;
	else if (dsymtab && load_symbols(f, dbg, dsymtab) == 0)
		;
	else {
		Elf_Scn *dyn = find_section_type(elf, SHT_DYNSYM);
		if (dyn)
			load_symbols(f, elf, dyn);
	}

	if (!no_dwarf) {
		/* a file whose DWARF alone would take half the cache is used for symbols only */
		Elf *de = NULL;
		int dfd = -1;
		uint64_t ds = 0;
		if (dsize) {
			de = elf, dfd = fd, ds = dsize;
		} else if (dbg) {
			ds = dwarf_size(dbg);
			if (ds)
				de = dbg, dfd = dbg_fd;
		}
		if (de && ds > cache_max / 2)
			f->dwarf_refused = true;
		if (de && ds <= cache_max / 2) {
			Dwarf *dw = dwarf_begin_elf(de, DWARF_C_READ, NULL);
			if (dw && !dwarf_strings_ok(de)) {
				pp_dbg("symbolize: %s: malformed DWARF string section, no DWARF",
				       path);
				dwarf_end(dw);
				dw = NULL;
			}
			if (dw) {
				f->dw = dw;
				f->dw_elf = de;
				f->dw_fd = dfd;
				f->bytes += ds;
				attach_alt(f, pid, path, de == elf, cache_max / 2 - ds);
				if (de == elf)
					elf = NULL, fd = -1;
				else
					dbg = NULL, dbg_fd = -1;
			}
		}
	}
out:
	if (dbg)
		elf_end(dbg);
	if (dbg_fd >= 0)
		close(dbg_fd);
	if (elf)
		elf_end(elf);
	if (fd >= 0)
		close(fd);
	f->bytes += ENTRY_BASE_BYTES + f->n_syms * sizeof(struct sym) + f->names_len;
}

static void lru_unlink(struct pp_symbolizer *s, struct sym_file *f)
{
	if (f->prev)
		f->prev->next = f->next;
	else
		s->head = f->next;
	if (f->next)
		f->next->prev = f->prev;
	else
		s->tail = f->prev;
	f->prev = f->next = NULL;
}

static void lru_push_front(struct pp_symbolizer *s, struct sym_file *f)
{
	f->prev = NULL;
	f->next = s->head;
	if (s->head)
		s->head->prev = f;
	s->head = f;
	if (!s->tail)
		s->tail = f;
}

static bool has_key(const struct sym_file *f, const struct pp_map *m)
{
	for (size_t i = 0; i < f->n_keys; i++)
		if (f->keys[i].ino == m->inode && f->keys[i].major == m->dev_major &&
		    f->keys[i].minor == m->dev_minor)
			return true;
	return false;
}

static void add_key(struct sym_file *f, const struct pp_map *m)
{
	if (has_key(f, m))
		return;
	if (f->n_keys < MAX_ALIASES)
		f->n_keys++;
	else
		memmove(&f->keys[1], &f->keys[0], sizeof(f->keys[0]) * (MAX_ALIASES - 1));
	f->keys[f->n_keys - 1] = (struct devino){ m->dev_major, m->dev_minor, m->inode };
}

/* With s->lock held. */
static struct sym_file *cache_find(struct pp_symbolizer *s, const struct pp_map *m,
				   const uint8_t *id, size_t id_len)
{
	for (struct sym_file *f = s->head; f; f = f->next) {
		bool match =
			id_len ? (f->build_id_len == id_len && !memcmp(f->build_id, id, id_len))
			       : has_key(f, m);
		if (match)
			return f;
	}
	return NULL;
}

/* With s->lock held: drop unused entries from the LRU end until within budget. */
static void cache_evict(struct pp_symbolizer *s)
{
	struct sym_file *f = s->tail;
	while (f && (s->bytes > s->cache_max || s->n_files > MAX_FILES)) {
		struct sym_file *prev = f->prev;
		if (f->refs == 0) {
			lru_unlink(s, f);
			s->bytes -= f->bytes;
			s->n_files--;
			s->st.files_evicted++;
			file_free(f);
		}
		f = prev;
	}
	s->st.cache_bytes = s->bytes;
}

/* With s->lock held: make f the most recently used and take a reference. */
static void cache_touch(struct pp_symbolizer *s, struct sym_file *f)
{
	lru_unlink(s, f);
	lru_push_front(s, f);
	f->refs++;
}

/* Returns a referenced entry (maybe failed) or NULL on -ENOMEM; *ret_err on open failure. */
static struct sym_file *cache_get(struct pp_symbolizer *s, pid_t pid, const struct pp_map *m,
				  const uint8_t *id, size_t id_len)
{
	pthread_mutex_lock(&s->lock);
	struct sym_file *f = cache_find(s, m, id, id_len);
	if (f && f->failed && pp_now_mono_ns() - f->failed_at >= FAILED_RETRY_NS && !f->refs) {
		lru_unlink(s, f);
		s->bytes -= f->bytes;
		s->n_files--;
		file_free(f);
		f = NULL;
	}
	if (f) {
		cache_touch(s, f);
		pthread_mutex_unlock(&s->lock);
		return f;
	}
	pthread_mutex_unlock(&s->lock);

	/* Load outside the lock. */
	struct sym_file *nf = file_new();
	if (!nf)
		return NULL;
	nf->keys[0] = (struct devino){ m->dev_major, m->dev_minor, m->inode };
	nf->n_keys = 1;
	int fd = pp_sym__open_mapped(pid, m);
	if (fd >= 0) {
		uint8_t fid[PP_BUILD_ID_MAX];
		size_t fl;
		if (pp_buildid__from_fd(fd, fid, &fl) == 0) {
			memcpy(nf->build_id, fid, fl);
			nf->build_id_len = fl;
		}
		if (nf->build_id_len) {
			/* the same file under another inode (other container) may be cached */
			pthread_mutex_lock(&s->lock);
			f = cache_find(s, m, nf->build_id, nf->build_id_len);
			if (f && !f->failed) {
				add_key(f, m);
				cache_touch(s, f);
				pthread_mutex_unlock(&s->lock);
				close(fd);
				file_free(nf);
				return f;
			}
			pthread_mutex_unlock(&s->lock);
		}
		file_load(nf, pid, m->path, fd, s->no_dwarf, s->cache_max);
	} else {
		pp_dbg("symbolize: cannot open %s of pid %d: %s", m->path, (int)pid, strerror(-fd));
		nf->failed = true;
	}
	if (nf->failed) {
		nf->failed_at = pp_now_mono_ns();
		nf->bytes = ENTRY_BASE_BYTES;
	}

	pthread_mutex_lock(&s->lock);
	/* another thread may have loaded it meanwhile */
	f = cache_find(s, m, nf->build_id, nf->build_id_len);
	if (f && (!f->failed || nf->failed)) {
		add_key(f, m);
		cache_touch(s, f);
		pthread_mutex_unlock(&s->lock);
		file_free(nf);
		return f;
	}
	if (nf->failed)
		s->st.files_failed++;
	else
		s->st.files_loaded++;
	if (nf->dwarf_refused)
		s->st.dwarf_refused++;
	lru_push_front(s, nf);
	nf->refs = 1;
	s->n_files++;
	s->bytes += nf->bytes;
	cache_evict(s);
	pthread_mutex_unlock(&s->lock);
	return nf;
}

static void cache_put(struct pp_symbolizer *s, struct sym_file *f, int64_t extra_bytes)
{
	pthread_mutex_lock(&s->lock);
	f->refs--;
	s->bytes += (uint64_t)extra_bytes; /* may be negative: wraps back correctly */
	cache_evict(s);
	pthread_mutex_unlock(&s->lock);
}

/* ---------- public ---------- */

struct pp_symbolizer *pp_symbolizer__new(const struct pp_symbolizer_opts *opts)
{
	struct pp_symbolizer *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	pp_sigbus_guard_install(); /* files are read (ELF_C_READ); libdw may still map */
	if (pthread_mutex_init(&s->lock, NULL) != 0) {
		free(s);
		errno = ENOMEM;
		return NULL;
	}
	s->cache_max = opts && opts->cache_bytes ? opts->cache_bytes : DEFAULT_CACHE_BYTES;
	s->no_dwarf = opts && opts->no_dwarf;
	pthread_once(&elf_once, elf_init);
	return s;
}

void pp_symbolizer__free(struct pp_symbolizer *s)
{
	if (!s)
		return;
	struct sym_file *f = s->head;
	while (f) {
		struct sym_file *n = f->next;
		file_free(f);
		f = n;
	}
	pp_ksyms__free(s->ksyms);
	pp_jitmaps__free(s->jit);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

void pp_symbolizer__stats(struct pp_symbolizer *s, struct pp_symbolizer_stats *ret)
{
	if (!s || !ret)
		return;
	pthread_mutex_lock(&s->lock);
	*ret = s->st;
	ret->cache_bytes = s->bytes + pp_ksyms__bytes(s->ksyms) + pp_jitmaps__bytes(s->jit);
	ret->jit_reloads_deferred = pp_jitmaps__reloads_deferred(s->jit);
	ret->names_bounded = pp_demangle_bounded();
	pthread_mutex_unlock(&s->lock);
}

/* Builds the result for vaddr in f (f->lock held). */
static int resolve_in_file(struct sym_file *f, bool no_dwarf, uint64_t vaddr,
			   struct pp_sym_result *ret)
{
	const struct sym *sy = sym_lookup(f, vaddr);
	struct dframe fr[MAX_INLINE];
	size_t n = 0;
	if (!no_dwarf && f->dw)
		n = dwarf_frames(f, vaddr, fr, MAX_INLINE);
	if (!sy && (n == 0 || !fr[n - 1].name)) {
		const char *plt = plt_lookup(f, vaddr);
		if (plt)
			return pp_sym__result_one(ret, plt, true);
		return -ENOENT; /* nothing names this address */
	}

	if (n == 0) {
		fr[0] = (struct dframe){ 0 };
		n = 1;
	}
	/* the physical function: DWARF name when present, else the covering symbol */
	if (!fr[n - 1].name)
		fr[n - 1].name = f->names + sy->name;

	struct pp_sym_frame *out = calloc(n, sizeof(*out));
	if (!out)
		return -ENOMEM;
	bool has_file = false, has_line = false;
	for (size_t i = 0; i < n; i++) {
		const char *name = fr[i].name;
		if (!name)
			name = "??"; /* inlined function without a name (corrupt DWARF) */
		if (frame_set(&out[i], name) < 0)
			goto nomem;
		if (fr[i].file) {
			/* relative names (DWARF 5 line tables) are relative to the CU's comp_dir */
			if (fr[i].file[0] != '/' && fr[i].comp_dir && fr[i].comp_dir[0]) {
				if (asprintf(&out[i].file, "%s/%s", fr[i].comp_dir, fr[i].file) < 0)
					out[i].file = NULL;
			} else {
				out[i].file = strdup(fr[i].file);
			}
			if (!out[i].file)
				goto nomem;
			has_file = true;
		}
		out[i].line = fr[i].line;
		out[i].start_line = fr[i].start_line;
		if (fr[i].line)
			has_line = true;
	}
	ret->frames = out;
	ret->n = n;
	ret->has_function = true;
	ret->has_file = has_file;
	ret->has_line = has_line;
	ret->has_inline = n > 1;
	return 0;
nomem : {
	struct pp_sym_result tmp = { .frames = out, .n = n };
	pp_sym_result__free(&tmp);
	return -ENOMEM;
}
}

/* resolve_in_file with the answers of DWARF files remembered (f->lock held). */
static int resolve_memo(struct sym_file *f, bool no_dwarf, uint64_t vaddr,
			struct pp_sym_result *ret)
{
	if (no_dwarf || !f->dw)
		return resolve_in_file(f, no_dwarf, vaddr, ret);
	if (!f->memo) {
		f->memo = calloc(MEMO_SLOTS, sizeof(*f->memo));
		if (!f->memo)
			return resolve_in_file(f, no_dwarf, vaddr, ret);
		f->bytes += MEMO_SLOTS * sizeof(*f->memo);
	}
	uint64_t h = vaddr * 0x9e3779b97f4a7c15ull;
	struct memo *m = &f->memo[(h >> 40) % MEMO_SLOTS];
	if (m->used && m->vaddr == vaddr)
		return m->r < 0 ? m->r : result_copy(&m->res, ret);
	int r = resolve_in_file(f, no_dwarf, vaddr, ret);
	if (r != 0 && r != -ENOENT)
		return r;
	pp_sym_result__free(&m->res);
	f->bytes -= m->bytes;
	m->used = false;
	m->bytes = 0;
	if (r == 0 && result_copy(ret, &m->res) < 0)
		return r; /* not remembered */
	m->vaddr = vaddr;
	m->used = true;
	m->r = r;
	m->bytes = r == 0 ? result_bytes(&m->res) : 0;
	f->bytes += m->bytes;
	return r;
}

int pp_symbolizer__resolve(struct pp_symbolizer *s, pid_t pid, const struct pp_map *m,
			   const uint8_t *build_id, size_t build_id_len, uint64_t addr,
			   struct pp_sym_result *ret)
{
	if (!s || !m || !ret || build_id_len > PP_BUILD_ID_MAX)
		return -EINVAL;
	if (addr < m->start || addr >= m->end)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	s->st.lookups++;
	pthread_mutex_unlock(&s->lock);

	uint64_t off = addr - m->start + m->offset;
	if (!m->path)
		return -ENOENT;
	if (m->special) {
		if (strcmp(m->path, "[vdso]") == 0)
			return result_fallback(ret, m->path, off);
		return -ENOENT;
	}
	if (!build_id)
		build_id_len = 0;

	struct sym_file *f = cache_get(s, pid, m, build_id, build_id_len);
	if (!f)
		return -ENOMEM;
	struct pp_sym_result res = { 0 };
	int r = -ENOENT;
	int64_t extra = 0;
	if (!f->failed) {
		uint64_t vaddr;
		pthread_mutex_lock(&f->lock);
		if (off_to_vaddr(f, off, &vaddr)) {
			uint64_t before = f->bytes;
			r = resolve_memo(f, s->no_dwarf, vaddr, &res);
			extra = (int64_t)(f->bytes - before); /* CU table, memo */
		}
		pthread_mutex_unlock(&f->lock);
	}
	cache_put(s, f, extra);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return result_fallback(ret, m->path, off);
	*ret = res;
	return 0;
}

int pp_symbolizer__resolve_kernel(struct pp_symbolizer *s, uint64_t addr, struct pp_sym_result *ret)
{
	if (!s || !ret)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	s->st.lookups++;
	int r = pp_ksyms__resolve(&s->ksyms, addr, ret);
	pthread_mutex_unlock(&s->lock);
	return r;
}

int pp_symbolizer__resolve_jit(struct pp_symbolizer *s, pid_t pid, uint64_t addr,
			       struct pp_sym_result *ret)
{
	if (!s || !ret || pid <= 0)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	s->st.lookups++;
	int r = pp_jitmaps__resolve(&s->jit, pid, addr, ret);
	pthread_mutex_unlock(&s->lock);
	return r;
}
