/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GNU build id (NT_GNU_BUILD_ID) from ELF32/ELF64 images, either in
 * memory or read piecewise from a file. Every offset and size comes from
 * the (possibly hostile) file, so each is range-checked before use.
 *
 * Search order: PT_NOTE segments, then SHT_NOTE sections. The section
 * header table, when the header declares one, must lie inside the image:
 * it is normally the last thing in a file, so this rejects truncated
 * copies instead of trusting their first bytes.
 */
#include <byteswap.h>
#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "procfs.h"
#include "util/util.h"

#define MAX_PHNUM 65535u /* PN_XNUM - 1 real entries and more via sh_info */
#define MAX_SHNUM (1u << 20)
#define MAX_NOTE_BYTES (1u << 20) /* a note segment/section larger than this is skipped */
#define FD_HEAD 4096 /* first pread: ELF header, phdrs, usually the note */
#define FD_SCRATCH_MAX (16u << 20)

/* Where the bytes come from. get() returns a pointer valid until the next call. */
struct reader {
	const uint8_t *(*get)(struct reader *rd, uint64_t off, uint64_t len);
	uint64_t size; /* image size */
	/* memory */
	const uint8_t *buf;
	/* fd */
	int fd;
	uint8_t head[FD_HEAD];
	size_t head_len;
	uint8_t *scratch;
	size_t scratch_cap;
	int err; /* first I/O error */
};

static bool in_range(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

static const uint8_t *mem_get(struct reader *rd, uint64_t off, uint64_t len)
{
	if (!in_range(off, len, rd->size))
		return NULL;
	return rd->buf + off;
}

static const uint8_t *fd_get(struct reader *rd, uint64_t off, uint64_t len)
{
	if (!in_range(off, len, rd->size))
		return NULL;
	if (in_range(off, len, rd->head_len))
		return rd->head + off;
	if (len > FD_SCRATCH_MAX)
		return NULL;
	if (len > rd->scratch_cap) {
		size_t ncap = PP_MAX((size_t)len, (size_t)4096);
		uint8_t *p = realloc(rd->scratch, ncap);
		if (!p) {
			rd->err = rd->err ? rd->err : -ENOMEM;
			return NULL;
		}
		rd->scratch = p;
		rd->scratch_cap = ncap;
	}
	size_t done = 0;
	while (done < len) {
		ssize_t n =
			pread(rd->fd, rd->scratch + done, (size_t)len - done, (off_t)(off + done));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rd->err = rd->err ? rd->err : -errno;
			return NULL;
		}
		if (n == 0) {
			/* shrank under us */
			rd->err = rd->err ? rd->err : -EIO;
			return NULL;
		}
		done += (size_t)n;
	}
	return rd->scratch;
}

struct elf_info {
	bool is64, swap;
	uint64_t phoff, shoff;
	uint32_t phentsize, shentsize;
	uint32_t phnum, shnum;
};

static uint16_t rd16(const struct elf_info *e, const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, sizeof(v));
	return e->swap ? bswap_16(v) : v;
}

static uint32_t rd32(const struct elf_info *e, const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return e->swap ? bswap_32(v) : v;
}

static uint64_t rd64(const struct elf_info *e, const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return e->swap ? bswap_64(v) : v;
}

/* A word-sized field: 8 bytes in ELF64, 4 in ELF32. */
static uint64_t rdw(const struct elf_info *e, const uint8_t *p)
{
	return e->is64 ? rd64(e, p) : rd32(e, p);
}

#define F64(s, f) offsetof(Elf64_##s, f)
#define F32(s, f) offsetof(Elf32_##s, f)
#define FLD(e, s, f) ((e)->is64 ? F64(s, f) : F32(s, f))

static bool host_le(void)
{
	const uint16_t one = 1;
	return *(const uint8_t *)&one == 1;
}

static int parse_ehdr(struct reader *rd, struct elf_info *e)
{
	const uint8_t *h = rd->get(rd, 0, EI_NIDENT);
	if (!h)
		return rd->err ? rd->err : -ENOEXEC;
	if (memcmp(h, ELFMAG, SELFMAG) != 0)
		return -ENOEXEC;
	if (h[EI_CLASS] == ELFCLASS64)
		e->is64 = true;
	else if (h[EI_CLASS] == ELFCLASS32)
		e->is64 = false;
	else
		return -ENOEXEC;
	if (h[EI_DATA] == ELFDATA2LSB)
		e->swap = !host_le();
	else if (h[EI_DATA] == ELFDATA2MSB)
		e->swap = host_le();
	else
		return -ENOEXEC;

	size_t ehsize = e->is64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
	h = rd->get(rd, 0, ehsize);
	if (!h)
		return rd->err ? rd->err : -EBADMSG;
	e->phoff = rdw(e, h + FLD(e, Ehdr, e_phoff));
	e->shoff = rdw(e, h + FLD(e, Ehdr, e_shoff));
	e->phentsize = rd16(e, h + FLD(e, Ehdr, e_phentsize));
	e->shentsize = rd16(e, h + FLD(e, Ehdr, e_shentsize));
	e->phnum = rd16(e, h + FLD(e, Ehdr, e_phnum));
	e->shnum = rd16(e, h + FLD(e, Ehdr, e_shnum));
	uint32_t shstrndx = rd16(e, h + FLD(e, Ehdr, e_shstrndx));
	(void)shstrndx;

	size_t phsz = e->is64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr);
	size_t shsz = e->is64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr);

	if (e->shoff == 0)
		e->shnum = 0;
	/* Extended numbering: real counts live in section header 0. */
	if (e->shoff != 0 && (e->shnum == 0 || e->phnum == PN_XNUM)) {
		if (e->shentsize < shsz)
			return -EBADMSG;
		const uint8_t *s0 = rd->get(rd, e->shoff, shsz);
		if (!s0)
			return rd->err ? rd->err : -EBADMSG;
		if (e->shnum == 0) {
			uint64_t n = rdw(e, s0 + FLD(e, Shdr, sh_size));
			if (n > MAX_SHNUM)
				return -EBADMSG;
			e->shnum = (uint32_t)n;
		}
		if (e->phnum == PN_XNUM)
			e->phnum = rd32(e, s0 + FLD(e, Shdr, sh_info));
	}
	if (e->phnum > MAX_PHNUM)
		return -EBADMSG;

	if (e->phnum) {
		if (e->phentsize < phsz ||
		    !in_range(e->phoff, (uint64_t)e->phnum * e->phentsize, rd->size))
			return -EBADMSG;
	}
	if (e->shnum) {
		if (e->shentsize < shsz ||
		    !in_range(e->shoff, (uint64_t)e->shnum * e->shentsize, rd->size))
			return -EBADMSG;
	}
	return 0;
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/* Scan a block of notes. 0 = found, -ENOENT = not here. */
static int scan_notes(const struct elf_info *e, const uint8_t *p, uint64_t len, uint64_t align,
		      uint8_t *ret, size_t *ret_len)
{
	uint64_t off = 0;

	while (len - off >= 12) {
		uint64_t namesz = rd32(e, p + off);
		uint64_t descsz = rd32(e, p + off + 4);
		uint32_t type = rd32(e, p + off + 8);
		uint64_t name_off = off + 12;
		/* In 8-aligned note blocks the padding is relative to the block. */
		uint64_t desc_off = align_up(name_off + namesz, align);

		if (desc_off > len || descsz > len - desc_off)
			break; /* truncated or garbage: stop scanning this block */
		if (type == NT_GNU_BUILD_ID && namesz == 4 && memcmp(p + name_off, "GNU", 4) == 0 &&
		    descsz > 0 && descsz <= PP_BUILD_ID_MAX) {
			memcpy(ret, p + desc_off, (size_t)descsz);
			*ret_len = (size_t)descsz;
			return 0;
		}
		uint64_t next = align_up(desc_off + descsz, align);
		if (next <= off || next > len)
			break;
		off = next;
	}
	return -ENOENT;
}

static uint64_t note_align(uint64_t a)
{
	/* Notes are 4-aligned except in 8-aligned blocks (e.g. .note.gnu.property). */
	return a == 8 ? 8 : 4;
}

/*
 * One note block (a PT_NOTE segment or SHT_NOTE section) at [off, off+sz):
 * 1 when it holds the build id, 0 when not (*skipped set when it could not
 * be read), -errno on a read error.
 */
static int scan_block(struct reader *rd, const struct elf_info *e, uint64_t off, uint64_t sz,
		      uint64_t al, uint8_t *id, size_t *id_len, bool *skipped)
{
	if (sz > MAX_NOTE_BYTES || !in_range(off, sz, rd->size)) {
		*skipped = true;
		return 0;
	}
	const uint8_t *notes = rd->get(rd, off, sz);
	if (!notes) {
		if (rd->err)
			return rd->err;
		*skipped = true;
		return 0;
	}
	return scan_notes(e, notes, sz, note_align(al), id, id_len) == 0;
}

static int find_build_id(struct reader *rd, uint8_t *ret, size_t *ret_len)
{
	struct elf_info e = { 0 };
	uint8_t id[PP_BUILD_ID_MAX];
	size_t id_len = 0;
	bool skipped = false;
	int r;

	r = parse_ehdr(rd, &e);
	if (r < 0)
		return r;

	for (uint32_t i = 0; i < e.phnum; i++) {
		const uint8_t *ph = rd->get(rd, e.phoff + (uint64_t)i * e.phentsize, e.phentsize);
		if (!ph)
			return rd->err ? rd->err : -EBADMSG;
		if (rd32(&e, ph + FLD(&e, Phdr, p_type)) != PT_NOTE)
			continue;
		uint64_t off = rdw(&e, ph + FLD(&e, Phdr, p_offset));
		uint64_t sz = rdw(&e, ph + FLD(&e, Phdr, p_filesz));
		uint64_t al = rdw(&e, ph + FLD(&e, Phdr, p_align));
		r = scan_block(rd, &e, off, sz, al, id, &id_len, &skipped);
		if (r < 0)
			return r;
		if (r > 0)
			goto found;
	}

	for (uint32_t i = 0; i < e.shnum; i++) {
		const uint8_t *sh = rd->get(rd, e.shoff + (uint64_t)i * e.shentsize, e.shentsize);
		if (!sh)
			return rd->err ? rd->err : -EBADMSG;
		if (rd32(&e, sh + FLD(&e, Shdr, sh_type)) != SHT_NOTE)
			continue;
		uint64_t off = rdw(&e, sh + FLD(&e, Shdr, sh_offset));
		uint64_t sz = rdw(&e, sh + FLD(&e, Shdr, sh_size));
		uint64_t al = rdw(&e, sh + FLD(&e, Shdr, sh_addralign));
		r = scan_block(rd, &e, off, sz, al, id, &id_len, &skipped);
		if (r < 0)
			return r;
		if (r > 0)
			goto found;
	}
	return skipped ? -EBADMSG : -ENOENT;

found:
	memcpy(ret, id, id_len);
	*ret_len = id_len;
	return 0;
}

int pp_buildid__from_buf(const void *elf, size_t len, uint8_t *ret, size_t *ret_len)
{
	struct reader rd = { .get = mem_get, .buf = elf, .size = len, .fd = -1 };

	if ((!elf && len) || !ret || !ret_len)
		return -EINVAL;
	return find_build_id(&rd, ret, ret_len);
}

int pp_buildid__from_fd(int fd, uint8_t *ret, size_t *ret_len)
{
	struct reader *rd;
	struct stat st;
	int r;

	if (fd < 0 || !ret || !ret_len)
		return -EINVAL;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -ENOEXEC;

	rd = calloc(1, sizeof(*rd));
	if (!rd)
		return -ENOMEM;
	rd->get = fd_get;
	rd->fd = fd;
	rd->size = (uint64_t)st.st_size;
	/* One read covers the ELF header, the program headers and usually the note. */
	{
		size_t want = (size_t)PP_MIN(rd->size, (uint64_t)FD_HEAD), done = 0;
		while (done < want) {
			ssize_t n = pread(fd, rd->head + done, want - done, (off_t)done);
			if (n < 0) {
				if (errno == EINTR)
					continue;
				r = -errno;
				goto out;
			}
			if (n == 0)
				break;
			done += (size_t)n;
		}
		rd->head_len = done;
		if (done < want)
			rd->size = done; /* file shrank */
	}
	r = find_build_id(rd, ret, ret_len);
out:
	free(rd->scratch);
	free(rd);
	return r;
}

void pp_buildid__hex(const uint8_t *id, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < len; i++) {
		out[2 * i] = digits[id[i] >> 4];
		out[2 * i + 1] = digits[id[i] & 0xf];
	}
	out[2 * len] = '\0';
}
