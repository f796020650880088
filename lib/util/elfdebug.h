/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How much memory a file's DWARF takes once libdw has loaded it, read from
 * the section headers before anything is decompressed. Shared by the
 * symbolizer and the unwinder, which both refuse files whose debug sections
 * would take more than they allow. Header-only so that lib/util itself does
 * not need libelf; include it only where libelf is linked.
 */
#ifndef PP_UTIL_ELFDEBUG_H
#define PP_UTIL_ELFDEBUG_H

#include <errno.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/*
 * Bytes one debug section takes in libdw's memory: a compressed one
 * (SHF_COMPRESSED with its Elf_Chdr, or GNU .zdebug_ with its "ZLIB"
 * header) is decompressed eagerly by dwarf_begin_elf to the size its header
 * claims, so that size counts. A compressed section larger than header_max
 * is not read for its header. UINT64_MAX when unknown.
 */
static inline uint64_t pp_elf_debug_section_bytes(Elf_Scn *scn, const GElf_Shdr *sh,
						  const char *name, uint64_t header_max)
{
	if (sh->sh_type == SHT_NOBITS)
		return 0;
	if (sh->sh_flags & SHF_COMPRESSED) {
		GElf_Chdr ch;

		if (sh->sh_size > header_max || !gelf_getchdr(scn, &ch))
			return UINT64_MAX;
		return ch.ch_size;
	}
	if (name[1] == 'z') {
		Elf_Data *d = sh->sh_size > header_max ? NULL : elf_rawdata(scn, NULL);
		const uint8_t *b = d ? d->d_buf : NULL;
		uint64_t v = 0;

		if (!b || d->d_size < 12 || memcmp(b, "ZLIB", 4) != 0)
			return UINT64_MAX;
		for (int i = 4; i < 12; i++)
			v = v << 8 | b[i]; /* big-endian */
		return v;
	}
	return sh->sh_size;
}

/*
 * Sum of pp_elf_debug_section_bytes over the .debug_* and .zdebug_
 * sections into *ret_total (UINT64_MAX when one is unknown or the sum
 * passes UINT64_MAX / 2); *ret_info tells whether a non-empty .debug_info
 * is among them. -EBADMSG when the section names cannot be read.
 */
static inline int pp_elf_debug_bytes(Elf *elf, uint64_t header_max, uint64_t *ret_total,
				     bool *ret_info)
{
	uint64_t total = 0;
	bool info = false;
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	*ret_total = 0;
	*ret_info = false;
	if (elf_getshdrstrndx(elf, &shstrndx) < 0)
		return -EBADMSG;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *n;
		uint64_t sz;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		n = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!n || (strncmp(n, ".debug_", 7) != 0 && strncmp(n, ".zdebug_", 8) != 0))
			continue;
		sz = pp_elf_debug_section_bytes(scn, &sh, n, header_max);
		if (sz == UINT64_MAX || sz > UINT64_MAX / 2 - total) {
			total = UINT64_MAX;
			break;
		}
		total += sz;
		if (!strcmp(n, ".debug_info") || !strcmp(n, ".zdebug_info"))
			info = sh.sh_size > 0;
	}
	*ret_total = total;
	*ret_info = info;
	return 0;
}

#endif
