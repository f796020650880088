/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Build ids: real binaries (checked against readelf), a fixture linked with
 * a chosen id, synthetic ELF32/ELF64 images in both byte orders, and
 * hostile input (every truncation, random corruption, bad header fields).
 */
#include <elf.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "procfs/procfs.h"
#include "util/util.h"

static char *read_whole(const char *path, size_t *ret_len)
{
	char *data = NULL;
	int r = pp_read_file(path, (size_t)64 << 20, &data, ret_len);
	if (r < 0)
		fail_msg("read %s: %s", path, strerror(-r));
	return data;
}

static void hex_of_buf(const void *elf, size_t len, char *out)
{
	uint8_t id[PP_BUILD_ID_MAX];
	size_t n = 0;
	int r = pp_buildid__from_buf(elf, len, id, &n);
	if (r < 0)
		fail_msg("from_buf: %s", strerror(-r));
	pp_buildid__hex(id, n, out);
}

static int hex_of_path(const char *path, char *out)
{
	uint8_t id[PP_BUILD_ID_MAX];
	size_t n = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int r = pp_buildid__from_fd(fd, id, &n);
	close(fd);
	if (r == 0)
		pp_buildid__hex(id, n, out);
	return r;
}

/* Build id as readelf/eu-readelf print it, or "" if the tool is missing or prints none. */
static void readelf_id(const char *path, char *out, size_t n)
{
	static const char *tools[] = { "readelf -n", "eu-readelf -n" };
	out[0] = '\0';
	for (size_t t = 0; t < ARRAY_SIZE(tools) && !out[0]; t++) {
		char cmd[4200], line[512];
		snprintf(cmd, sizeof(cmd), "%s '%s' 2>/dev/null", tools[t], path);
		FILE *f = popen(cmd, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			char *p = strstr(line, "Build ID: ");
			if (p && !out[0]) {
				p += strlen("Build ID: ");
				size_t k = strcspn(p, " \n");
				if (k < n) {
					memcpy(out, p, k);
					out[k] = '\0';
				}
			}
		}
		pclose(f);
	}
}

static void test_fixture(void **state)
{
	(void)state;
	char hex[2 * PP_BUILD_ID_MAX + 1];
	assert_int_equal(hex_of_path(PROCFS_FIXTURE, hex), 0);
	assert_string_equal(hex, PROCFS_FIXTURE_ID);

	size_t len;
	char *data = read_whole(PROCFS_FIXTURE, &len);
	hex_of_buf(data, len, hex);
	assert_string_equal(hex, PROCFS_FIXTURE_ID);
	free(data);
}

static void test_fixture32(void **state)
{
	(void)state;
#ifdef PROCFS_FIXTURE32
	char hex[2 * PP_BUILD_ID_MAX + 1];
	assert_int_equal(hex_of_path(PROCFS_FIXTURE32, hex), 0);
	assert_string_equal(hex, PROCFS_FIXTURE32_ID);
	size_t len;
	char *data = read_whole(PROCFS_FIXTURE32, &len);
	assert_int_equal(data[EI_CLASS], ELFCLASS32);
	hex_of_buf(data, len, hex);
	assert_string_equal(hex, PROCFS_FIXTURE32_ID);
	free(data);
#else
	skip();
#endif
}

/* Our own executable, the libraries we have mapped, and a few system binaries vs readelf. */
static void test_real_binaries(void **state)
{
	(void)state;
	struct pp_maps maps = { 0 };
	const char *paths[64];
	size_t np = 0, compared = 0;
	static const char *sys[] = { "/bin/ls", "/usr/bin/env", "/usr/bin/readelf", "/bin/sh" };

	assert_int_equal(pp_maps__read(getpid(), &maps), 0);
	for (size_t i = 0; i < maps.n && np < 48; i++) {
		const struct pp_map *m = &maps.v[i];
		if (m->path && !m->special && !m->deleted && m->offset == 0 &&
		    (np == 0 || strcmp(paths[np - 1], m->path) != 0))
			paths[np++] = m->path;
	}
	for (size_t i = 0; i < ARRAY_SIZE(sys); i++)
		paths[np++] = sys[i];

	for (size_t i = 0; i < np; i++) {
		char want[2 * PP_BUILD_ID_MAX + 8], got[2 * PP_BUILD_ID_MAX + 1];
		if (access(paths[i], R_OK) < 0)
			continue;
		readelf_id(paths[i], want, sizeof(want));
		int r = hex_of_path(paths[i], got);
		if (!want[0]) {
			/* readelf saw none (or is absent): we must not invent one either,
			 * unless readelf is missing altogether, which the count below catches. */
			if (r == 0)
				continue;
			assert_true(r == -ENOENT || r == -ENOEXEC);
			continue;
		}
		if (r != 0)
			fail_msg("%s: %s, readelf says %s", paths[i], strerror(-r), want);
		if (strcmp(want, got) != 0)
			fail_msg("%s: got %s, readelf says %s", paths[i], got, want);
		compared++;
	}
	pp_maps__free(&maps);
	print_message("compared %zu binaries with readelf\n", compared);
	assert_true(compared >= 3); /* test binary, libc, at least one system binary */
}

/* ---- synthetic images ---- */

struct img {
	uint8_t b[4096];
	size_t len;
	bool is64, be;
};

static void wr(struct img *im, size_t off, uint64_t v, unsigned size)
{
	for (unsigned i = 0; i < size; i++) {
		unsigned shift = im->be ? 8 * (size - 1 - i) : 8 * i;
		im->b[off + i] = (uint8_t)(v >> shift);
	}
}

static void wrw(struct img *im, size_t off, uint64_t v)
{
	wr(im, off, v, im->is64 ? 8 : 4);
}

struct notes {
	uint8_t b[1024];
	size_t len;
};

static void add_note(struct notes *n, bool be, const char *name, size_t namesz, uint32_t type,
		     const uint8_t *desc, size_t descsz, unsigned align)
{
	struct img tmp = { .be = be };
	wr(&tmp, 0, namesz, 4);
	wr(&tmp, 4, descsz, 4);
	wr(&tmp, 8, type, 4);
	memcpy(n->b + n->len, tmp.b, 12);
	n->len += 12;
	/* Padding is relative to the start of the note block (gABI; what
	 * binutils writes for 8-aligned .note.gnu.property). */
	memcpy(n->b + n->len, name, namesz);
	n->len = (n->len + namesz + align - 1) / align * align;
	memcpy(n->b + n->len, desc, descsz);
	n->len = (n->len + descsz + align - 1) / align * align;
}

#define NOTES_OFF 0x200
#define SHDR_OFF 0x800

enum { IN_PHDR = 1, IN_SHDR = 2 };

/* ELF header, one PT_LOAD + one PT_NOTE, sections: null, note, (shstrtab not needed). */
static void build(struct img *im, bool is64, bool be, const struct notes *n, unsigned align,
		  unsigned where)
{
	memset(im, 0, sizeof(*im));
	im->is64 = is64;
	im->be = be;
	memcpy(im->b, ELFMAG, SELFMAG);
	im->b[EI_CLASS] = is64 ? ELFCLASS64 : ELFCLASS32;
	im->b[EI_DATA] = be ? ELFDATA2MSB : ELFDATA2LSB;
	im->b[EI_VERSION] = EV_CURRENT;
	size_t ehsize = is64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
	size_t phsize = is64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr);
	size_t shsize = is64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr);
#define E(f) (is64 ? offsetof(Elf64_Ehdr, f) : offsetof(Elf32_Ehdr, f))
#define P(f) (is64 ? offsetof(Elf64_Phdr, f) : offsetof(Elf32_Phdr, f))
#define S(f) (is64 ? offsetof(Elf64_Shdr, f) : offsetof(Elf32_Shdr, f))
	wr(im, E(e_type), ET_DYN, 2);
	wr(im, E(e_machine), is64 ? EM_X86_64 : EM_386, 2);
	wr(im, E(e_version), EV_CURRENT, 4);
	wrw(im, E(e_phoff), ehsize);
	wrw(im, E(e_shoff), SHDR_OFF);
	wr(im, E(e_ehsize), ehsize, 2);
	wr(im, E(e_phentsize), phsize, 2);
	wr(im, E(e_phnum), 2, 2);
	wr(im, E(e_shentsize), shsize, 2);
	wr(im, E(e_shnum), 2, 2);

	size_t ph = ehsize;
	wr(im, ph + P(p_type), PT_LOAD, 4);
	wrw(im, ph + P(p_filesz), SHDR_OFF);
	wrw(im, ph + P(p_align), 0x1000);
	ph += phsize;
	wr(im, ph + P(p_type), (where & IN_PHDR) ? PT_NOTE : PT_NULL, 4);
	wrw(im, ph + P(p_offset), NOTES_OFF);
	wrw(im, ph + P(p_filesz), n->len);
	wrw(im, ph + P(p_align), align);

	size_t sh = SHDR_OFF + shsize;
	wr(im, sh + S(sh_type), (where & IN_SHDR) ? SHT_NOTE : SHT_PROGBITS, 4);
	wrw(im, sh + S(sh_offset), NOTES_OFF);
	wrw(im, sh + S(sh_size), n->len);
	wrw(im, sh + S(sh_addralign), align);
#undef E
#undef P
#undef S
	memcpy(im->b + NOTES_OFF, n->b, n->len);
	im->len = SHDR_OFF + 2 * shsize;
}

static const uint8_t ID20[20] = { 0xde, 0xad, 0xbe, 0xef, 1,  2,  3,  4,  5,  6,
				  7,	8,    9,    10,	  11, 12, 13, 14, 15, 0x99 };

static int id_of(const struct img *im, char *hex)
{
	uint8_t id[PP_BUILD_ID_MAX];
	size_t n = 0;
	int r = pp_buildid__from_buf(im->b, im->len, id, &n);
	if (r == 0) {
		assert_true(n >= 1 && n <= PP_BUILD_ID_MAX);
		pp_buildid__hex(id, n, hex);
	}
	return r;
}

static void test_synthetic(void **state)
{
	(void)state;
	static const uint8_t prop[16] = { 0 };
	static const uint8_t abi[16] = { 0, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0 };
	const char *want = "deadbeef0102030405060708090a0b0c0d0e0f99";
	char hex[2 * PP_BUILD_ID_MAX + 1];
	struct img im;

	for (int is64 = 0; is64 <= 1; is64++) {
		for (int be = 0; be <= 1; be++) {
			for (unsigned where = IN_PHDR; where <= (IN_PHDR | IN_SHDR); where++) {
				/* other notes first, with odd name sizes and padding */
				struct notes n = { .len = 0 };
				add_note(&n, be, "GNU", 4, NT_GNU_ABI_TAG, abi, 16, 4);
				add_note(&n, be, "abcde", 6, 3, abi, 3,
					 4); /* type 3, wrong owner */
				add_note(&n, be, "GNU", 4, 1, ID20, 7,
					 4); /* right owner, wrong type */
				add_note(&n, be, "GNU", 4, NT_GNU_BUILD_ID, ID20, 20, 4);
				build(&im, is64, be, &n, 4, where);
				hex[0] = '\0';
				if (id_of(&im, hex) != 0 || strcmp(hex, want) != 0)
					fail_msg("is64=%d be=%d where=%u: '%s'", is64, be, where,
						 hex);

				/* 8-aligned note block (like .note.gnu.property) */
				struct notes n8 = { .len = 0 };
				add_note(&n8, be, "GNU", 4, NT_GNU_PROPERTY_TYPE_0, prop, 12, 8);
				add_note(&n8, be, "GNU", 4, NT_GNU_BUILD_ID, ID20, 20, 8);
				build(&im, is64, be, &n8, 8, where);
				assert_int_equal(id_of(&im, hex), 0);
				assert_string_equal(hex, want);

				/* no build id at all */
				struct notes none = { .len = 0 };
				add_note(&none, be, "GNU", 4, NT_GNU_ABI_TAG, abi, 16, 4);
				build(&im, is64, be, &none, 4, where);
				assert_int_equal(id_of(&im, hex), -ENOENT);

				/* build id of length 0 and > PP_BUILD_ID_MAX: ignored */
				uint8_t big[80] = { 1 };
				struct notes bad = { .len = 0 };
				add_note(&bad, be, "GNU", 4, NT_GNU_BUILD_ID, big, 0, 4);
				add_note(&bad, be, "GNU", 4, NT_GNU_BUILD_ID, big, 80, 4);
				build(&im, is64, be, &bad, 4, where);
				assert_int_equal(id_of(&im, hex), -ENOENT);

				/* 1 and 64 bytes: both ends accepted */
				struct notes edge = { .len = 0 };
				add_note(&edge, be, "GNU", 4, NT_GNU_BUILD_ID, big, 64, 4);
				build(&im, is64, be, &edge, 4, where);
				assert_int_equal(id_of(&im, hex), 0);
				assert_int_equal(strlen(hex), 128);
				edge.len = 0;
				add_note(&edge, be, "GNU", 4, NT_GNU_BUILD_ID, ID20, 1, 4);
				build(&im, is64, be, &edge, 4, where);
				assert_int_equal(id_of(&im, hex), 0);
				assert_string_equal(hex, "de");

				/* a note whose sizes run past its block, then the real one is unreachable */
				struct notes trunc = { .len = 0 };
				add_note(&trunc, be, "GNU", 4, NT_GNU_BUILD_ID, ID20, 20, 4);
				struct img t = { .be = be };
				wr(&t, 0, 0xffffffffu, 4);
				memcpy(trunc.b, t.b, 4); /* namesz = 4 GiB */
				build(&im, is64, be, &trunc, 4, where);
				assert_int_equal(id_of(&im, hex), -ENOENT);
				wr(&t, 0, 0xfffffffdu, 4);
				memcpy(trunc.b, t.b, 4);
				memcpy(trunc.b + 4, t.b,
				       4); /* sizes that wrap when aligned in 32 bits */
				build(&im, is64, be, &trunc, 4, where);
				assert_int_equal(id_of(&im, hex), -ENOENT);
			}
		}
	}
}

/* Valid image + pointers into its header for the hostile cases. */
static void make_base(struct img *im, bool is64)
{
	struct notes n = { .len = 0 };
	add_note(&n, false, "GNU", 4, NT_GNU_BUILD_ID, ID20, 20, 4);
	build(im, is64, false, &n, 4, IN_PHDR | IN_SHDR);
}

static void test_hostile_headers(void **state)
{
	(void)state;
	char hex[2 * PP_BUILD_ID_MAX + 1];
	struct img im;

	for (int is64 = 0; is64 <= 1; is64++) {
		size_t phoff = is64 ? offsetof(Elf64_Ehdr, e_phoff) : offsetof(Elf32_Ehdr, e_phoff);
		size_t shoff = is64 ? offsetof(Elf64_Ehdr, e_shoff) : offsetof(Elf32_Ehdr, e_shoff);
		size_t phnum = is64 ? offsetof(Elf64_Ehdr, e_phnum) : offsetof(Elf32_Ehdr, e_phnum);
		size_t shnum = is64 ? offsetof(Elf64_Ehdr, e_shnum) : offsetof(Elf32_Ehdr, e_shnum);
		size_t phent = is64 ? offsetof(Elf64_Ehdr, e_phentsize)
				    : offsetof(Elf32_Ehdr, e_phentsize);
		size_t shent = is64 ? offsetof(Elf64_Ehdr, e_shentsize)
				    : offsetof(Elf32_Ehdr, e_shentsize);
		size_t ehsize = is64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
		size_t phsize = is64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr);
		size_t p_off = is64 ? offsetof(Elf64_Phdr, p_offset)
				    : offsetof(Elf32_Phdr, p_offset);
		size_t p_sz = is64 ? offsetof(Elf64_Phdr, p_filesz)
				   : offsetof(Elf32_Phdr, p_filesz);

		make_base(&im, is64);
		assert_int_equal(id_of(&im, hex), 0);

		make_base(&im, is64);
		wrw(&im, phoff, UINT64_MAX - 8); /* phdrs past the end, offset + size overflows */
		assert_int_equal(id_of(&im, hex), -EBADMSG);

		make_base(&im, is64);
		wr(&im, phnum, 0xfffe, 2); /* more phdrs than the file holds */
		assert_int_equal(id_of(&im, hex), -EBADMSG);

		make_base(&im, is64);
		wr(&im, phent, 8, 2); /* phentsize smaller than a Phdr */
		assert_int_equal(id_of(&im, hex), -EBADMSG);

		make_base(&im, is64);
		wrw(&im, shoff, im.len - 1); /* shdr table runs off the end */
		assert_int_equal(id_of(&im, hex), -EBADMSG);

		make_base(&im, is64);
		wr(&im, shent, 0xffff, 2);
		assert_int_equal(id_of(&im, hex), -EBADMSG);

		make_base(&im, is64);
		wr(&im, shnum, 0,
		   2); /* extended numbering: count from section 0's sh_size (0 here) */
		assert_int_equal(id_of(&im, hex), 0);

		make_base(&im, is64);
		wr(&im, phnum, PN_XNUM, 2); /* extended phnum from sh_info of section 0 (0) */
		assert_int_equal(id_of(&im, hex), 0); /* found through the section */

		/* note segment out of range, or huge: skipped; the section still has it */
		make_base(&im, is64);
		wrw(&im, ehsize + phsize + p_off, UINT64_MAX - 3);
		assert_int_equal(id_of(&im, hex), 0);
		make_base(&im, is64);
		wrw(&im, ehsize + phsize + p_sz, is64 ? UINT64_MAX : UINT32_MAX);
		assert_int_equal(id_of(&im, hex), 0);

		/* overlapping: phdr table aliasing the ELF header and note == phdrs */
		make_base(&im, is64);
		wrw(&im, phoff, 0);
		assert_true(id_of(&im, hex) == 0 || id_of(&im, hex) == -ENOENT);
		make_base(&im, is64);
		wrw(&im, ehsize + phsize + p_off, ehsize);
		assert_int_equal(id_of(&im, hex), 0); /* from the section */

		/* misaligned tables */
		make_base(&im, is64);
		memmove(im.b + ehsize + 1, im.b + ehsize, 2 * phsize);
		wrw(&im, phoff, ehsize + 1);
		assert_int_equal(id_of(&im, hex), 0);
	}

	/* not ELF, bad class, bad data encoding, too short */
	make_base(&im, true);
	im.b[0] = 0x7e;
	assert_int_equal(id_of(&im, hex), -ENOEXEC);
	make_base(&im, true);
	im.b[EI_CLASS] = 3;
	assert_int_equal(id_of(&im, hex), -ENOEXEC);
	make_base(&im, true);
	im.b[EI_DATA] = 0;
	assert_int_equal(id_of(&im, hex), -ENOEXEC);
	uint8_t id[PP_BUILD_ID_MAX];
	size_t n;
	assert_true(pp_buildid__from_buf("\177ELF", 4, id, &n) < 0);
	assert_true(pp_buildid__from_buf(NULL, 0, id, &n) < 0);
	assert_int_equal(pp_buildid__from_buf(NULL, 10, id, &n), -EINVAL);
}

/* Every prefix of a real ELF is an error, through both entry points. */
static void test_truncations(void **state)
{
	(void)state;
	const char *files[] = { PROCFS_FIXTURE,
#ifdef PROCFS_FIXTURE32
				PROCFS_FIXTURE32
#endif
	};
	for (size_t f = 0; f < ARRAY_SIZE(files); f++) {
		size_t len;
		char *data = read_whole(files[f], &len);
		uint8_t id[PP_BUILD_ID_MAX];
		size_t n;

		for (size_t l = 0; l < len; l++) {
			/* a fresh exact-size copy so ASan/valgrind see any overread */
			char *copy = malloc(l ? l : 1);
			assert_non_null(copy);
			memcpy(copy, data, l);
			int r = pp_buildid__from_buf(copy, l, id, &n);
			if (r >= 0)
				fail_msg("%s cut to %zu bytes: accepted", files[f], l);
			free(copy);
		}
		assert_int_equal(pp_buildid__from_buf(data, len, id, &n), 0);

		int fd = memfd_create("trunc", MFD_CLOEXEC);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, data, len), (ssize_t)len);
		assert_int_equal(pp_buildid__from_fd(fd, id, &n), 0);
		for (size_t l = len; l-- > 0;) {
			assert_int_equal(ftruncate(fd, (off_t)l), 0);
			if (pp_buildid__from_fd(fd, id, &n) >= 0)
				fail_msg("%s cut to %zu bytes (fd): accepted", files[f], l);
		}
		close(fd);
		free(data);
	}
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Random byte corruption must never crash or return a bogus length. */
static void test_corruption(void **state)
{
	(void)state;
	size_t len;
	char *orig = read_whole(PROCFS_FIXTURE, &len);
	char *data = malloc(len);
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	unsigned ok = 0, err = 0;
	assert_non_null(data);

	for (unsigned it = 0; it < 20000; it++) {
		memcpy(data, orig, len);
		unsigned flips = 1 + (unsigned)(xorshift(&seed) % 8);
		/* mostly the first KiB (headers, notes), sometimes anywhere */
		size_t range = (xorshift(&seed) % 4) ? PP_MIN(len, (size_t)1024) : len;
		for (unsigned k = 0; k < flips; k++) {
			size_t at = xorshift(&seed) % range;
			data[at] = (char)xorshift(&seed);
		}
		uint8_t id[PP_BUILD_ID_MAX];
		size_t n = 0;
		int r = pp_buildid__from_buf(data, len, id, &n);
		if (r == 0) {
			assert_true(n >= 1 && n <= PP_BUILD_ID_MAX);
			ok++;
		} else {
			assert_true(r == -ENOENT || r == -EBADMSG || r == -ENOEXEC);
			err++;
		}
	}

	/* same on the small synthetic ELF32 and big-endian images, where every byte is a header */
	for (int v = 0; v < 2; v++) {
		struct img base, im;
		make_base(&base, v == 0);
		if (v == 1) {
			struct notes n = { .len = 0 };
			add_note(&n, true, "GNU", 4, NT_GNU_BUILD_ID, ID20, 20, 4);
			build(&base, true, true, &n, 4, IN_PHDR | IN_SHDR);
		}
		for (unsigned it = 0; it < 20000; it++) {
			im = base;
			unsigned flips = 1 + (unsigned)(xorshift(&seed) % 4);
			for (unsigned k = 0; k < flips; k++) {
				size_t at = (xorshift(&seed) % 2) ? xorshift(&seed) % 0x100
								  : xorshift(&seed) % im.len;
				im.b[at] = (uint8_t)(xorshift(&seed) & 0xff);
			}
			uint8_t id[PP_BUILD_ID_MAX];
			size_t n = 0;
			int r = pp_buildid__from_buf(im.b, im.len, id, &n);
			if (r == 0)
				assert_true(n >= 1 && n <= PP_BUILD_ID_MAX);
		}
	}
	print_message("corrupted fixture: %u still had an id, %u errors\n", ok, err);
	assert_true(ok + err == 20000);
	free(data);
	free(orig);
}

static void test_hex(void **state)
{
	(void)state;
	const uint8_t id[] = { 0x00, 0x0f, 0xa0, 0xff, 0x12 };
	char out[11];
	memset(out, 'x', sizeof(out));
	pp_buildid__hex(id, sizeof(id), out);
	assert_string_equal(out, "000fa0ff12");
	pp_buildid__hex(id, 0, out);
	assert_string_equal(out, "");
}

static void test_fd_errors(void **state)
{
	(void)state;
	uint8_t id[PP_BUILD_ID_MAX];
	size_t n;
	assert_int_equal(pp_buildid__from_fd(-1, id, &n), -EINVAL);
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_true(pp_buildid__from_fd(fd, id, &n) < 0);
	close(fd);
	fd = open("/", O_RDONLY | O_CLOEXEC | O_DIRECTORY);
	assert_true(fd >= 0);
	assert_int_equal(pp_buildid__from_fd(fd, id, &n), -ENOEXEC);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fixture),		cmocka_unit_test(test_fixture32),
		cmocka_unit_test(test_real_binaries),	cmocka_unit_test(test_synthetic),
		cmocka_unit_test(test_hostile_headers), cmocka_unit_test(test_truncations),
		cmocka_unit_test(test_corruption),	cmocka_unit_test(test_hex),
		cmocka_unit_test(test_fd_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
