/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Choosing a uprobe offset inside an allocator function (x86-64).
 *
 * A uprobe on an instruction the kernel cannot emulate is single-stepped
 * out of line: about 15 us per hit against well under 1 us for emulated
 * ones (DESIGN.md, "Heap profiling"). arch/x86/kernel/uprobes.c emulates
 * push reg (optionally REX 0x41), one-byte nop (0x90), jmp rel8/rel32,
 * call rel32 and jcc rel8/rel32, all without legacy prefixes.
 *
 * So we walk the first instructions and stop at the first emulated one.
 * Skipping an instruction is allowed only when, at the probe, the state
 * the BPF programs read is still the state at function entry:
 *   - it is not a branch (every call must reach the probe);
 *   - it writes none of the function's own argument registers (free
 *     and malloc: rdi only; calloc: rdi, rsi; posix_memalign: rdi, rsi,
 *     rdx; ...: the entry program reads them, nothing else);
 *   - it does not change rsp (the return probe hijacks [rsp], which must
 *     still be the caller's return address, and the entry sp identifies
 *     the call). Memory stores are harmless.
 * endbr64, multi-byte nops, test/cmp, and mov/lea/xor/arith into other
 * registers qualify; push/sub rsp/call do not (push is emulated anyway).
 * Anything unknown ends the walk: the caller then probes +0 and counts it.
 */
#include <string.h>

#include "heap.h"

#define RSP 4

/* Registers the entry program reads, as a mask of register numbers
 * (rsp always; the arguments of the function being decoded). */
static __thread unsigned t_protect = (1u << 1) | (1u << 2) | (1u << RSP) | (1u << 6) | (1u << 7) |
				     (1u << 8) | (1u << 9);

static bool reg_protected(unsigned r)
{
	return r < 32 && (t_protect & (1u << r));
}

/* Byte registers without REX: 4..7 are ah, ch, dh, bh (parts of 0..3). */
static unsigned byte_reg(unsigned r, bool rex)
{
	return (!rex && r >= 4 && r < 8) ? r - 4 : r;
}

struct modrm {
	unsigned mod, reg, rm; /* reg/rm with REX extension applied */
	size_t len; /* modrm + sib + displacement bytes */
};

static int decode_modrm(const uint8_t *p, size_t avail, uint8_t rex, struct modrm *m)
{
	size_t len = 1;
	uint8_t b;

	if (avail < 1)
		return -EINVAL;
	b = p[0];
	m->mod = b >> 6;
	m->reg = ((b >> 3) & 7) | ((rex & 4) ? 8 : 0);
	m->rm = (b & 7) | ((rex & 1) ? 8 : 0);
	if (m->mod != 3 && (b & 7) == 4) { /* SIB */
		if (avail < 2)
			return -EINVAL;
		len++;
		if (m->mod == 0 && (p[1] & 7) == 5)
			len += 4;
	}
	if (m->mod == 0 && (b & 7) == 5)
		len += 4; /* rip-relative */
	else if (m->mod == 1)
		len += 1;
	else if (m->mod == 2)
		len += 4;
	if (len > avail)
		return -EINVAL;
	m->len = len;
	return 0;
}

/*
 * Decode one instruction at p. Sets *ret_len and *ret_kind: 1 emulated,
 * 0 safe to skip, -1 stop (unknown, branch we may not skip, or writes a
 * protected register).
 */
static int decode_one(const uint8_t *p, size_t avail, size_t *ret_len, int *ret_kind)
{
	size_t i = 0, imm = 0;
	bool opsize = false, other_prefix = false, rex_present = false;
	uint8_t rex = 0, op;
	struct modrm m;
	int kind = -1;

	if (avail >= 4 && p[0] == 0xf3 && p[1] == 0x0f && p[2] == 0x1e && p[3] == 0xfa) {
		*ret_len = 4; /* endbr64 */
		*ret_kind = 0;
		return 0;
	}
	for (; i < avail && i < 4; i++) {
		if (p[i] == 0x66)
			opsize = true;
		else if (p[i] == 0x64 || p[i] == 0x65 || p[i] == 0x2e || p[i] == 0x3e ||
			 p[i] == 0xf2 || p[i] == 0xf3)
			other_prefix = true;
		else
			break;
	}
	if (i < avail && (p[i] & 0xf0) == 0x40) {
		rex = p[i++];
		rex_present = true;
	}
	if (i >= avail)
		return -EINVAL;
	op = p[i++];
	bool prefixed = opsize || other_prefix;

	if (op >= 0x50 && op <= 0x57) { /* push reg */
		*ret_len = i;
		*ret_kind = (!prefixed && (!rex_present || rex == 0x41)) ? 1 : -1;
		return 0;
	}
	if (op == 0x90) { /* nop (or pause / xchg r8,rax with prefixes) */
		*ret_len = i;
		if (!prefixed && !rex_present)
			*ret_kind = 1;
		else
			*ret_kind = (opsize && !other_prefix && !rex_present) ? 0 : -1;
		return 0;
	}
	if (op == 0xe8 || op == 0xe9 || op == 0xeb || (op >= 0x70 && op <= 0x7f)) {
		size_t n = (op == 0xeb || op <= 0x7f) ? 1 : 4;

		if (i + n > avail)
			return -EINVAL;
		*ret_len = i + n;
		*ret_kind = (!prefixed && !rex_present) ? 1 : -1;
		return 0;
	}
	if (op == 0x0f) {
		uint8_t op2;

		if (i >= avail)
			return -EINVAL;
		op2 = p[i++];
		if (op2 >= 0x80 && op2 <= 0x8f) { /* jcc rel32 */
			if (i + 4 > avail)
				return -EINVAL;
			*ret_len = i + 4;
			*ret_kind = (!prefixed && !rex_present) ? 1 : -1;
			return 0;
		}
		if (op2 == 0x1f) { /* nop r/m */
			if (decode_modrm(p + i, avail - i, rex, &m))
				return -EINVAL;
			*ret_len = i + m.len;
			*ret_kind = 0;
			return 0;
		}
		*ret_len = i;
		*ret_kind = -1;
		return 0;
	}

	switch (op) {
	case 0x84:
	case 0x85: /* test r/m, reg */
	case 0x38:
	case 0x39:
	case 0x3a:
	case 0x3b: /* cmp */
		if (decode_modrm(p + i, avail - i, rex, &m))
			return -EINVAL;
		i += m.len;
		kind = 0;
		break;
	case 0x3c:
	case 0xa8:
		imm = 1;
		kind = 0;
		break;
	case 0x04:
	case 0x0c:
	case 0x24:
	case 0x2c:
	case 0x34: /* add/or/and/sub/xor al, imm8: writes rax */
		imm = 1;
		kind = reg_protected(0) ? -1 : 0;
		break;
	case 0x05:
	case 0x0d:
	case 0x25:
	case 0x2d:
	case 0x35: /* add/or/and/sub/xor eax/rax, imm32 */
		imm = opsize ? 2 : 4;
		kind = reg_protected(0) ? -1 : 0;
		break;
	case 0xc0:
	case 0xc1:
	case 0xd0:
	case 0xd1:
	case 0xd2:
	case 0xd3: /* rotate/shift group: writes r/m */
		if (decode_modrm(p + i, avail - i, rex, &m))
			return -EINVAL;
		i += m.len;
		imm = (op == 0xc0 || op == 0xc1) ? 1 : 0;
		if (m.mod != 3)
			kind = 0;
		else
			kind = reg_protected(op & 1 ? m.rm : byte_reg(m.rm, rex_present)) ? -1 : 0;
		break;
	case 0x3d:
	case 0xa9:
		imm = opsize ? 2 : 4;
		kind = 0;
		break;
	case 0x88:
	case 0x89: /* mov reg -> r/m */
	case 0x00:
	case 0x01:
	case 0x08:
	case 0x09:
	case 0x20:
	case 0x21:
	case 0x28:
	case 0x29:
	case 0x30:
	case 0x31:
		if (decode_modrm(p + i, avail - i, rex, &m))
			return -EINVAL;
		i += m.len;
		if (m.mod != 3)
			kind = 0;
		else
			kind = reg_protected((op & 1) ? m.rm : byte_reg(m.rm, rex_present)) ? -1
											    : 0;
		break;
	case 0x8a:
	case 0x8b:
	case 0x8d: /* mov r/m -> reg, lea */
	case 0x02:
	case 0x03:
	case 0x0a:
	case 0x0b:
	case 0x22:
	case 0x23:
	case 0x2a:
	case 0x2b:
	case 0x32:
	case 0x33:
		if (decode_modrm(p + i, avail - i, rex, &m))
			return -EINVAL;
		i += m.len;
		kind = reg_protected((op & 1) || op == 0x8d ? m.reg : byte_reg(m.reg, rex_present))
			       ? -1
			       : 0;
		break;
	case 0x80:
	case 0x81:
	case 0x83:
	case 0xc6:
	case 0xc7:
	case 0xf6:
	case 0xf7: {
		unsigned sub;

		if (decode_modrm(p + i, avail - i, rex, &m))
			return -EINVAL;
		i += m.len;
		sub = m.reg & 7;
		if (op == 0x80 || op == 0x83 || op == 0xc6 || op == 0xf6)
			imm = 1;
		else
			imm = opsize ? 2 : 4;
		if ((op == 0xf6 || op == 0xf7) && sub != 0)
			return *ret_len = i, *ret_kind = -1, 0; /* not, neg, mul, div... */
		if ((op == 0xc6 || op == 0xc7) && sub != 0)
			return *ret_len = i, *ret_kind = -1, 0;
		if (op == 0xf6 || op == 0xf7 ||
		    ((op == 0x80 || op == 0x81 || op == 0x83) && sub == 7))
			kind = 0; /* test / cmp: flags only */
		else if (m.mod != 3)
			kind = 0; /* writes memory only */
		else
			kind = reg_protected(op == 0x80 || op == 0xc6 ? byte_reg(m.rm, rex_present)
								      : m.rm)
				       ? -1
				       : 0;
		break;
	}
	default:
		if (op >= 0xb0 && op <= 0xbf) { /* mov imm -> reg */
			unsigned r = (op & 7) | ((rex & 1) ? 8 : 0);

			if (op < 0xb8) {
				imm = 1;
				r = byte_reg(r, rex_present);
			} else {
				imm = (rex & 8) ? 8 : (opsize ? 2 : 4);
			}
			kind = reg_protected(r) ? -1 : 0;
			break;
		}
		*ret_len = i;
		*ret_kind = -1;
		return 0;
	}
	if (i + imm > avail)
		return -EINVAL;
	*ret_len = i + imm;
	*ret_kind = kind;
	return 0;
}

int pp_heap__probe_offset_args(const uint8_t *code, size_t len, unsigned nargs, size_t *ret_off,
			       bool *ret_emulated)
{
	/* System V argument registers in order: rdi rsi rdx rcx r8 r9. */
	static const unsigned argreg[6] = { 7, 6, 2, 1, 8, 9 };
	unsigned saved = t_protect, mask = 1u << RSP;
	for (unsigned i = 0; i < nargs && i < 6; i++)
		mask |= 1u << argreg[i];
	t_protect = mask;
	int r = pp_heap__probe_offset(code, len, ret_off, ret_emulated);
	t_protect = saved;
	return r;
}

int pp_heap__probe_offset(const uint8_t *code, size_t len, size_t *ret_off, bool *ret_emulated)
{
	size_t off = 0;
	int n;

	if (!code || !ret_off || !ret_emulated)
		return -EINVAL;
	for (n = 0; n < 16 && off < len; n++) {
		size_t l = 0;
		int kind = -1;

		if (decode_one(code + off, len - off, &l, &kind) < 0)
			break;
		if (kind == 1) {
			*ret_off = off;
			*ret_emulated = true;
			return 0;
		}
		if (kind < 0)
			break;
		off += l;
	}
	*ret_off = 0;
	*ret_emulated = false;
	return 0;
}
