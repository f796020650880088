#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes truncated, corrupted and hostile ELF files derived from a real
small ELF64 little-endian binary (plus a few synthetic ELF32 / big-endian
ones) into OUTDIR, for tests/hostile/test-hostile.c.

usage: gen-hostile.py BASE_ELF OUTDIR

Every file is deterministic (fixed PRNG seeds). Names say what was done;
'ok-*' files are valid and must still yield their build id.
"""
import os
import random
import struct
import sys

EHDR = struct.Struct('<16sHHIQQQIHHHHHH')
PHDR = struct.Struct('<IIQQQQQQ')
SHDR = struct.Struct('<IIQQQQIIQQ')
PH_FIELDS = ('p_type', 'p_flags', 'p_offset', 'p_vaddr', 'p_paddr', 'p_filesz', 'p_memsz',
             'p_align')
SH_FIELDS = ('sh_name', 'sh_type', 'sh_flags', 'sh_addr', 'sh_offset', 'sh_size', 'sh_link',
             'sh_info', 'sh_addralign', 'sh_entsize')
EH_OFF = {'e_phoff': (32, 'Q'), 'e_shoff': (40, 'Q'), 'e_ehsize': (52, 'H'),
          'e_phentsize': (54, 'H'), 'e_phnum': (56, 'H'), 'e_shentsize': (58, 'H'),
          'e_shnum': (60, 'H'), 'e_shstrndx': (62, 'H'), 'e_type': (16, 'H'),
          'e_machine': (18, 'H')}
PT_LOAD, PT_NOTE = 1, 4
SHT_SYMTAB, SHT_STRTAB, SHT_NOTE, SHT_DYNSYM = 2, 3, 7, 11
SHF_COMPRESSED = 0x800
U64 = (1 << 64) - 1
U32 = (1 << 32) - 1


class Elf:
    def __init__(self, data):
        self.b = bytearray(data)
        (_, _, _, _, _, self.phoff, self.shoff, _, _, _, self.phnum, _, self.shnum,
         self.shstrndx) = EHDR.unpack_from(self.b, 0)

    def copy(self):
        return Elf(bytes(self.b))

    def eh(self, field, value):
        off, fmt = EH_OFF[field]
        struct.pack_into('<' + fmt, self.b, off, value & ((1 << (8 * struct.calcsize(fmt))) - 1))
        return self

    def ph(self, i):
        return dict(zip(PH_FIELDS, PHDR.unpack_from(self.b, self.phoff + i * PHDR.size)))

    def set_ph(self, i, **kw):
        d = self.ph(i)
        d.update(kw)
        PHDR.pack_into(self.b, self.phoff + i * PHDR.size, *[d[f] for f in PH_FIELDS])
        return self

    def sh(self, i):
        return dict(zip(SH_FIELDS, SHDR.unpack_from(self.b, self.shoff + i * SHDR.size)))

    def set_sh(self, i, **kw):
        d = self.sh(i)
        d.update(kw)
        SHDR.pack_into(self.b, self.shoff + i * SHDR.size, *[d[f] for f in SH_FIELDS])
        return self

    def sec_name(self, i):
        strtab = self.sh(self.shstrndx)
        off = strtab['sh_offset'] + self.sh(i)['sh_name']
        end = self.b.index(0, off)
        return self.b[off:end].decode('latin-1')

    def find_sec(self, name):
        for i in range(self.shnum):
            if self.sec_name(i) == name:
                return i
        return None

    def secs_of_type(self, t):
        return [i for i in range(self.shnum) if self.sh(i)['sh_type'] == t]

    def phs_of_type(self, t):
        return [i for i in range(self.phnum) if self.ph(i)['p_type'] == t]

    def note_off(self):
        """File offset of the build-id note."""
        i = self.find_sec('.note.gnu.build-id')
        return self.sh(i)['sh_offset']

    def put(self, off, fmt, *v):
        struct.pack_into(fmt, self.b, off, *v)
        return self

    def scribble(self, off, size, seed):
        rnd = random.Random(seed)
        end = min(len(self.b), off + size)
        for k in range(off, end):
            self.b[k] = rnd.randrange(256)
        return self

    def bytes(self):
        return bytes(self.b)


def synth(cls=64, big=False, notes=None, where='both', machine=None, note_align=4,
          extra_phdrs=()):
    """A minimal ELF with one PT_NOTE segment and/or a SHT_NOTE section."""
    e = '>' if big else '<'
    if notes is None:
        notes = [(b'GNU\0', 3, bytes(range(1, 21)))]
    blob = b''
    for name, ntype, desc in notes:
        pad_n = (-(12 + len(name))) % note_align
        pad_d = (-len(desc)) % note_align
        blob += struct.pack(e + 'III', len(name), len(desc), ntype) + name + b'\0' * pad_n
        blob += desc + b'\0' * pad_d
    if cls == 64:
        ehsize, phentsize, shentsize = 64, 56, 64
    else:
        ehsize, phentsize, shentsize = 52, 32, 40
    phdrs = [(PT_NOTE, 4, None)] if where in ('both', 'phdr') else []
    phdrs += list(extra_phdrs)
    phoff = ehsize if phdrs else 0
    note_off = ehsize + phentsize * len(phdrs)
    note_off = (note_off + 7) & ~7
    shstr = b'\0.note.gnu.build-id\0.shstrtab\0'
    shstr_off = note_off + len(blob)
    shoff = (shstr_off + len(shstr) + 7) & ~7
    secs = [(0, 0, 0, 0, 0, 0)]
    if where in ('both', 'shdr'):
        secs.append((1, SHT_NOTE, note_off, len(blob), 0, note_align))
    secs.append((20, SHT_STRTAB, shstr_off, len(shstr), 0, 1))
    out = bytearray(shoff + shentsize * len(secs))
    ident = b'\x7fELF' + bytes([1 if cls == 32 else 2, 2 if big else 1, 1]) + b'\0' * 9
    if machine is None:
        machine = 62 if cls == 64 else 3
    if cls == 64:
        struct.pack_into(e + '16sHHIQQQIHHHHHH', out, 0, ident, 2, machine, 1, 0x401000, phoff,
                         shoff, 0, ehsize, phentsize, len(phdrs), shentsize, len(secs),
                         len(secs) - 1)
    else:
        struct.pack_into(e + '16sHHIIIIIHHHHHH', out, 0, ident, 2, machine, 1, 0x8049000, phoff,
                         shoff, 0, ehsize, phentsize, len(phdrs), shentsize, len(secs),
                         len(secs) - 1)
    for k, (ptype, flags, rng) in enumerate(phdrs):
        off, size = rng if rng else (note_off, len(blob))
        if cls == 64:
            struct.pack_into(e + 'IIQQQQQQ', out, phoff + k * phentsize, ptype, flags, off,
                             0x400000 + off, 0x400000 + off, size, size, note_align)
        else:
            struct.pack_into(e + 'IIIIIIII', out, phoff + k * phentsize, ptype, off,
                             0x8048000 + off, 0x8048000 + off, size, size, flags, note_align)
    out[note_off:note_off + len(blob)] = blob
    out[shstr_off:shstr_off + len(shstr)] = shstr
    for k, (name, stype, off, size, link, align) in enumerate(secs):
        if cls == 64:
            struct.pack_into(e + 'IIQQQQIIQQ', out, shoff + k * shentsize, name, stype, 0, 0, off,
                             size, link, 0, align, 0)
        else:
            struct.pack_into(e + 'IIIIIIIIII', out, shoff + k * shentsize, name, stype, 0, 0,
                             off, size, link, 0, align, 0)
    return bytes(out)


def build_id_note(namesz, descsz, ntype=3, name=b'GNU\0', desc=b'\x42' * 20):
    return struct.pack('<III', namesz, descsz, ntype) + name + desc


def append(e, payload, align=8):
    """Appends payload at the end of e's bytes (aligned); returns its offset."""
    pad = (-len(e.b)) % align
    e.b.extend(b'\0' * pad)
    off = len(e.b)
    e.b.extend(payload)
    return off


def bombs(base):
    """Small files that expand in memory: checked by test-hostile's
    test_bombs (peak RSS growth), and run through every other worker."""
    out = {}
    import zlib
    # .debug_info as an ELF compressed section (Elf64_Chdr: zlib, 512 MiB
    # of zeros), ~0.5 MB on disk
    i = base.find_sec('.debug_info')
    size = 512 << 20
    z = zlib.compressobj(9)
    chunk = b'\0' * (1 << 20)
    stream = b''.join([z.compress(chunk) for _ in range(size >> 20)] + [z.flush()])
    e = base.copy()
    off = append(e, struct.pack('<IIQQ', 1, 0, size, 1) + stream)
    sh = e.sh(i)
    e.set_sh(i, sh_offset=off, sh_size=len(stream) + 24, sh_flags=sh['sh_flags'] | SHF_COMPRESSED,
             sh_addralign=8)
    out['bomb-zlib-debug-info'] = e.bytes()
    # a symbol table of 100k functions in .text sharing one 4000-byte name
    e = base.copy()
    text = e.find_sec('.text')
    tsh = e.sh(text)
    st = e.secs_of_type(SHT_SYMTAB)[0]
    strtab = e.sh(st)['sh_link']
    names = b'\0' + b'n' * 4000 + b'\0'
    soff = append(e, names, 1)
    e.set_sh(strtab, sh_offset=soff, sh_size=len(names))
    n = 100000
    syms = bytearray(24)  # the null symbol
    for k in range(n):
        # st_name, st_info (GLOBAL FUNC), st_other, st_shndx, st_value, st_size
        syms += struct.pack('<IBBHQQ', 1, 0x12, 0, text,
                            tsh['sh_addr'] + (k % max(1, tsh['sh_size'])), 1)
    yoff = append(e, bytes(syms))
    e.set_sh(st, sh_offset=yoff, sh_size=len(syms), sh_info=1)
    out['bomb-symtab-shared-name'] = e.bytes()
    return out


def generate(base):
    out = bombs(base)
    n = len(base.b)

    out['ok-base'] = base.bytes()
    out['ok-synth64'] = synth()
    out['ok-synth64-be'] = synth(big=True)
    out['ok-synth32'] = synth(cls=32)
    out['ok-synth32-be'] = synth(cls=32, big=True, machine=8)
    out['ok-synth64-shdr-only'] = synth(where='shdr')
    out['ok-synth64-phdr-only'] = synth(where='phdr')
    out['ok-synth64-align8'] = synth(note_align=8)
    out['ok-synth64-other-notes-first'] = synth(notes=[
        (b'GNU\0', 1, b'\0' * 16), (b'Go\0\0', 4, b'go-build-id'), (b'GNU\0', 3, b'\x11' * 20)])
    out['ok-synth64-id-1-byte'] = synth(notes=[(b'GNU\0', 3, b'\x01')])
    out['ok-synth64-id-64-bytes'] = synth(notes=[(b'GNU\0', 3, b'\x02' * 64)])

    # -- truncation
    ph_end = base.phoff + base.phnum * PHDR.size
    for cut in sorted({0, 1, 4, 5, 15, 16, 52, 63, 64, ph_end - 1, ph_end,
                       base.note_off() + 8, base.note_off() + 20, n // 2, base.shoff,
                       base.shoff + 100, n - 1}):
        out['trunc-%06d' % cut] = base.bytes()[:cut]

    # -- header tables
    out['eh-phnum-ffff'] = base.copy().eh('e_phnum', 0xffff).bytes()
    out['eh-shnum-ffff'] = base.copy().eh('e_shnum', 0xffff).bytes()
    out['eh-both-ffff'] = base.copy().eh('e_phnum', 0xffff).eh('e_shnum', 0xffff).bytes()
    out['eh-phoff-past-eof'] = base.copy().eh('e_phoff', n + 4096).bytes()
    out['eh-shoff-past-eof'] = base.copy().eh('e_shoff', n + 4096).bytes()
    out['eh-phoff-wrap'] = base.copy().eh('e_phoff', U64 - 7).bytes()
    out['eh-shoff-wrap'] = base.copy().eh('e_shoff', U64 - 63).bytes()
    out['eh-phoff-unaligned'] = base.copy().eh('e_phoff', 1).bytes()
    out['eh-phentsize-0'] = base.copy().eh('e_phentsize', 0).bytes()
    out['eh-phentsize-1'] = base.copy().eh('e_phentsize', 1).bytes()
    out['eh-phentsize-ffff'] = base.copy().eh('e_phentsize', 0xffff).bytes()
    out['eh-shentsize-0'] = base.copy().eh('e_shentsize', 0).bytes()
    out['eh-shentsize-ffff'] = base.copy().eh('e_shentsize', 0xffff).bytes()
    out['eh-shstrndx-range'] = base.copy().eh('e_shstrndx', 0xfffe).bytes()
    out['eh-shstrndx-xindex-garbage'] = (base.copy().eh('e_shstrndx', 0xffff)
                                         .set_sh(0, sh_link=0xfffffff0).bytes())
    out['eh-shnum-0-extended-huge'] = (base.copy().eh('e_shnum', 0)
                                       .set_sh(0, sh_size=U64).bytes())
    out['eh-phnum-xnum-huge'] = (base.copy().eh('e_phnum', 0xffff)
                                 .set_sh(0, sh_info=U32).bytes())
    out['eh-class-32'] = bytes(base.copy().put(4, 'B', 1).bytes())
    out['eh-class-bad'] = bytes(base.copy().put(4, 'B', 7).bytes())
    out['eh-data-be'] = bytes(base.copy().put(5, 'B', 2).bytes())
    out['eh-machine-aarch64'] = base.copy().eh('e_machine', 183).bytes()
    out['eh-type-core'] = base.copy().eh('e_type', 4).bytes()
    out['eh-garbage-after'] = base.copy().scribble(64, n, 1).bytes()
    out['eh-garbage-after-phdrs'] = base.copy().scribble(ph_end, n, 2).bytes()
    out['eh-only'] = base.bytes()[:64] + bytes(4096)

    # -- segments
    loads = base.phs_of_type(PT_LOAD)
    notes = base.phs_of_type(PT_NOTE)
    e = base.copy()
    for i in loads:
        e.set_ph(i, p_offset=0, p_vaddr=loads and base.ph(loads[0])['p_vaddr'], p_filesz=n,
                 p_memsz=n)
    out['ph-loads-overlap'] = e.bytes()
    e = base.copy()
    for i in loads:
        e.set_ph(i, p_filesz=U64 // 2, p_memsz=U64 // 2)
    out['ph-loads-huge'] = e.bytes()
    e = base.copy()
    for i in loads:
        e.set_ph(i, p_offset=n + 0x10000)
    out['ph-loads-past-eof'] = e.bytes()
    e = base.copy()
    for i in loads:
        e.set_ph(i, p_vaddr=U64 - 0xfff, p_align=3)
    out['ph-loads-vaddr-wrap'] = e.bytes()
    e = base.copy()
    for i in range(base.phnum):
        e.set_ph(i, p_type=PT_LOAD if i % 2 else PT_NOTE, p_offset=0, p_filesz=n)
    out['ph-all-notes-and-loads-whole-file'] = e.bytes()
    for tag, kw in (('past-eof', dict(p_offset=n + 8)), ('huge', dict(p_filesz=U64)),
                    ('wrap', dict(p_offset=U64 - 3, p_filesz=16)), ('zero', dict(p_filesz=0)),
                    ('align-0', dict(p_align=0)), ('align-huge', dict(p_align=1 << 63)),
                    ('align-3', dict(p_align=3)), ('whole-file', dict(p_offset=0, p_filesz=n))):
        e = base.copy()
        for i in notes:
            e.set_ph(i, **kw)
        out['ph-note-' + tag] = e.bytes()

    # -- build-id note contents (in place: the PT_NOTE and SHT_NOTE cover it)
    no = base.note_off()
    for tag, (namesz, descsz) in (('namesz-huge', (U32, 20)), ('descsz-huge', (4, U32)),
                                  ('both-huge', (U32, U32)), ('namesz-odd', (5, 20)),
                                  ('namesz-0', (0, 20)), ('descsz-0', (4, 0)),
                                  ('descsz-65', (4, 65)), ('descsz-odd', (4, 3)),
                                  ('descsz-past-section', (4, 24)),
                                  ('namesz-past-section', (32, 0)),
                                  ('wrap', (U32 - 2, U32 - 2))):
        out['note-' + tag] = base.copy().put(no, '<II', namesz, descsz).bytes()
    out['note-name-not-gnu'] = base.copy().put(no + 12, '4s', b'GNX\0').bytes()
    out['note-name-no-nul'] = base.copy().put(no + 12, '4s', b'GNUX').bytes()
    out['note-type-wrong'] = base.copy().put(no + 8, '<I', 4).bytes()
    e = base.copy()
    for i in base.secs_of_type(SHT_NOTE):
        e.set_sh(i, sh_offset=n - 6)
    for i in notes:
        e.set_ph(i, p_offset=n - 6)
    out['note-at-eof-partial'] = e.bytes()
    e = base.copy()
    for i in base.secs_of_type(SHT_NOTE):
        e.set_sh(i, sh_size=U64 - 8)
    for i in notes:
        e.set_ph(i, p_filesz=U64 - 8)
    out['note-sizes-huge-everywhere'] = e.bytes()
    out['synth-truncated-by-1'] = synth()[:-1]
    many = [(b'GNU\0', 1, b'') for _ in range(4000)] + [(b'GNU\0', 3, b'\x05' * 20)]
    out['synth-many-notes'] = synth(notes=many)
    out['synth32-desc-huge'] = synth(cls=32, notes=[(b'GNU\0', 3, b'\x01' * 20)])
    d = bytearray(out['synth32-desc-huge'])
    # the note follows the 52-byte header and one 32-byte phdr, 8-aligned: offset 88
    struct.pack_into('<I', d, 88 + 4, U32)
    out['synth32-desc-huge'] = bytes(d)
    out['synth64-be-namesz-huge'] = bytearray(synth(big=True))
    struct.pack_into('>I', out['synth64-be-namesz-huge'], 120, U32)
    out['synth64-be-namesz-huge'] = bytes(out['synth64-be-namesz-huge'])
    out['synth-notes-hundreds-of-segments'] = synth(
        where='phdr', extra_phdrs=[(PT_NOTE, 4, (0, 64)) for _ in range(600)])

    # -- sections
    e = base.copy()
    for i in range(1, base.shnum):
        e.set_sh(i, sh_offset=n + 0x1000 * i)
    out['sh-all-past-eof'] = e.bytes()
    e = base.copy()
    for i in range(1, base.shnum):
        e.set_sh(i, sh_size=0)
    out['sh-all-zero-size'] = e.bytes()
    e = base.copy()
    for i in range(1, base.shnum):
        e.set_sh(i, sh_size=U64 - i)
    out['sh-all-size-huge'] = e.bytes()
    e = base.copy()
    for i in range(1, base.shnum):
        e.set_sh(i, sh_offset=U64 - 15, sh_size=32)
    out['sh-all-offset-wrap'] = e.bytes()
    e = base.copy()
    for i in range(base.shnum):
        e.set_sh(i, sh_name=U32 - i)
    out['sh-names-out-of-range'] = e.bytes()
    shs = base.sh(base.shstrndx)
    out['sh-shstrtab-no-nul'] = base.copy().scribble(shs['sh_offset'], shs['sh_size'], 3).put(
        shs['sh_offset'] + shs['sh_size'] - 1, 'B', 0x41).bytes()
    out['sh-shstrtab-past-eof'] = base.copy().set_sh(base.shstrndx, sh_offset=n + 1).bytes()
    for t in (SHT_SYMTAB, SHT_DYNSYM):
        tag = 'symtab' if t == SHT_SYMTAB else 'dynsym'
        for i in base.secs_of_type(t):
            sh = base.sh(i)
            out['%s-link-nowhere' % tag] = base.copy().set_sh(i, sh_link=0xfff0).bytes()
            out['%s-link-self' % tag] = base.copy().set_sh(i, sh_link=i).bytes()
            out['%s-link-null' % tag] = base.copy().set_sh(i, sh_link=0).bytes()
            out['%s-entsize-0' % tag] = base.copy().set_sh(i, sh_entsize=0).bytes()
            out['%s-entsize-1' % tag] = base.copy().set_sh(i, sh_entsize=1).bytes()
            out['%s-entsize-huge' % tag] = base.copy().set_sh(i, sh_entsize=U64).bytes()
            out['%s-size-odd' % tag] = base.copy().set_sh(i, sh_size=sh['sh_size'] - 5).bytes()
            out['%s-size-huge' % tag] = base.copy().set_sh(i, sh_size=U64 - 23).bytes()
            out['%s-past-eof' % tag] = base.copy().set_sh(i, sh_offset=n - 24).bytes()
            out['%s-garbage' % tag] = base.copy().scribble(sh['sh_offset'], sh['sh_size'],
                                                           4 + i).bytes()
            e = base.copy()
            for k in range(sh['sh_size'] // 24):
                # st_name out of range, st_info FUNC, st_shndx bogus, value/size covering all
                e.put(sh['sh_offset'] + 24 * k, '<IBBHQQ', U32 - k, 0x12, 0, 0xfff0 + (k % 15),
                      (0x1000 * k) & U64, U64 - k)
            out['%s-hostile-symbols' % tag] = e.bytes()
            strtab = sh['sh_link']
            if strtab and strtab < base.shnum:
                out['%s-strtab-past-eof' % tag] = base.copy().set_sh(strtab,
                                                                     sh_offset=n + 9).bytes()
                out['%s-strtab-size-0' % tag] = base.copy().set_sh(strtab, sh_size=0).bytes()
                st = base.sh(strtab)
                out['%s-strtab-no-nul' % tag] = base.copy().scribble(
                    st['sh_offset'], st['sh_size'], 5).put(
                    st['sh_offset'] + st['sh_size'] - 1, 'B', 0x5a).bytes()

    # -- DWARF, CFI, debuglink
    for name in ('.debug_info', '.debug_abbrev', '.debug_line', '.debug_str', '.debug_aranges',
                 '.debug_rnglists', '.debug_loclists', '.debug_line_str', '.eh_frame',
                 '.eh_frame_hdr', '.gnu_debuglink', '.dynamic', '.dynstr', '.gnu.hash'):
        i = base.find_sec(name)
        if i is None:
            continue
        sh = base.sh(i)
        tag = name.lstrip('.').replace('.', '-')
        for seed in range(3):
            out['dw-%s-garbage-%d' % (tag, seed)] = base.copy().scribble(
                sh['sh_offset'], sh['sh_size'], 100 + 7 * i + seed).bytes()
        # a few bytes changed only, so most of the structure stays plausible
        e = base.copy()
        rnd = random.Random(200 + i)
        for _ in range(max(1, sh['sh_size'] // 16)):
            if sh['sh_size']:
                e.b[sh['sh_offset'] + rnd.randrange(sh['sh_size'])] = rnd.choice(
                    (0, 0xff, 0x7f, 0x80, rnd.randrange(256)))
        out['dw-%s-flips' % tag] = e.bytes()
        out['dw-%s-size-huge' % tag] = base.copy().set_sh(i, sh_size=U64 // 4).bytes()
        out['dw-%s-size-0' % tag] = base.copy().set_sh(i, sh_size=0).bytes()
        out['dw-%s-past-eof' % tag] = base.copy().set_sh(i, sh_offset=n - 2).bytes()
        # SHF_COMPRESSED with a garbage Elf64_Chdr claiming 1 TiB
        e = base.copy().set_sh(i, sh_flags=sh['sh_flags'] | SHF_COMPRESSED)
        if sh['sh_size'] >= 24:
            e.put(sh['sh_offset'], '<IIQQ', 1, 0, 1 << 40, 1)
        out['dw-%s-compressed-bogus' % tag] = e.bytes()
        if name == '.gnu_debuglink':
            out['dw-debuglink-no-nul'] = base.copy().put(
                sh['sh_offset'], '%ds' % sh['sh_size'], b'A' * sh['sh_size']).bytes()
            out['dw-debuglink-path-escape'] = base.copy().put(
                sh['sh_offset'], '%ds' % min(sh['sh_size'], 16),
                b'../../../../etc/passwd'[:min(sh['sh_size'], 16)]).bytes()

    # -- random header-area mutations (deterministic)
    head = min(n, 4096)
    for seed in range(24):
        rnd = random.Random(1000 + seed)
        e = base.copy()
        for _ in range(rnd.choice((1, 2, 4, 8, 32))):
            k = rnd.randrange(16, head)
            e.b[k] = rnd.randrange(256)
        out['rand-head-%02d' % seed] = e.bytes()
    for seed in range(8):
        rnd = random.Random(2000 + seed)
        e = base.copy()
        for _ in range(64):
            k = rnd.randrange(0, n)
            e.b[k] = rnd.randrange(256)
        out['rand-any-%02d' % seed] = e.bytes()
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit('usage: gen-hostile.py BASE_ELF OUTDIR')
    with open(sys.argv[1], 'rb') as f:
        data = f.read()
    if data[:4] != b'\x7fELF' or data[4] != 2 or data[5] != 1:
        sys.exit('base must be an ELF64 little-endian file')
    base = Elf(data)
    os.makedirs(sys.argv[2], exist_ok=True)
    files = generate(base)
    for name, content in files.items():
        with open(os.path.join(sys.argv[2], name), 'wb') as f:
            f.write(content)
    print('%d files' % len(files))


if __name__ == '__main__':
    main()
