#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the seed corpus of fuzz-perf (perf records as the kernel lays
them out) into the directory given as argument. See fuzz-perf.c for the
input layout: byte 0 = mode, then fmt + record, or head/tail + ring."""
import os
import struct
import sys

IP, TID, TIME, ADDR, CALLCHAIN, ID, CPU, PERIOD, STREAM_ID, RAW = (
    0x1, 0x2, 0x4, 0x8, 0x20, 0x40, 0x80, 0x100, 0x200, 0x400)
REGS_USER, STACK_USER, IDENTIFIER = 0x1000, 0x2000, 0x10000
RECORD_LOST, RECORD_SAMPLE, RECORD_COMM = 2, 9, 3
CTX_KERNEL = (1 << 64) - 128
CTX_USER = (1 << 64) - 512
REGS_MASK = 0xff01ff  # the 17 registers pp_regs__perf_mask() asks for
DEFAULT_ST = IP | TID | TIME | CALLCHAIN | REGS_USER | STACK_USER


def u64(*v):
    return struct.pack('<%dQ' % len(v), *v)


def record(rtype, body, misc=2):
    return struct.pack('<IHH', rtype, misc, 8 + len(body)) + body


def sample(st=DEFAULT_ST, kernel=(0xffffffff81000000, 0xffffffff81000100),
           user=(0x401000, 0x401234), regs_abi=2, stack=b'\x11' * 64, dyn=None,
           raw=None):
    b = b''
    if st & IDENTIFIER:
        b += u64(7)
    if st & IP:
        b += u64(0x401000)
    if st & TID:
        b += struct.pack('<II', 1234, 1235)
    if st & TIME:
        b += u64(123456789)
    for bit in (ADDR, ID, STREAM_ID, CPU, PERIOD):
        if st & bit:
            b += u64(1)
    if st & CALLCHAIN:
        ips = []
        if kernel:
            ips += [CTX_KERNEL] + list(kernel)
        if user:
            ips += [CTX_USER] + list(user)
        b += u64(len(ips), *ips)
    if st & RAW:
        data = raw if raw is not None else b'rawdata'
        pad = (8 - (4 + len(data)) % 8) % 8
        b += struct.pack('<I', len(data)) + data + b'\0' * pad
    if st & REGS_USER:
        b += u64(regs_abi)
        if regs_abi:
            b += u64(*range(0x1000, 0x1000 + 17))
    if st & STACK_USER:
        b += u64(len(stack))
        if stack:
            b += stack + u64(len(stack) if dyn is None else dyn)
    return record(RECORD_SAMPLE, b)


def rec_seed(st, regs_mask, rec, mode=0):
    return bytes([mode]) + u64(st, regs_mask) + rec


def ring_seed(records, size, tail):
    ring = bytearray(size)
    data = b''.join(records)
    for i, c in enumerate(data):
        ring[(tail + i) % size] = c
    return bytes([1]) + u64(tail + len(data), tail) + bytes(ring)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    seeds = {
        'sample': rec_seed(DEFAULT_ST, REGS_MASK, sample()),
        'sample-no-callchain': rec_seed(DEFAULT_ST & ~CALLCHAIN, REGS_MASK,
                                        sample(DEFAULT_ST & ~CALLCHAIN)),
        'sample-kthread': rec_seed(DEFAULT_ST, REGS_MASK,
                                   sample(regs_abi=0, stack=b'', user=())),
        'sample-all-fields': rec_seed(
            DEFAULT_ST | IDENTIFIER | ADDR | ID | STREAM_ID | CPU | PERIOD | RAW,
            REGS_MASK,
            sample(DEFAULT_ST | IDENTIFIER | ADDR | ID | STREAM_ID | CPU | PERIOD | RAW)),
        'sample-dyn-short': rec_seed(DEFAULT_ST, REGS_MASK, sample(dyn=8)),
        'sample-dyn-huge': rec_seed(DEFAULT_ST, REGS_MASK, sample(dyn=1 << 40)),
        'sample-abi32': rec_seed(DEFAULT_ST, REGS_MASK, sample(regs_abi=1)),
        'sample-unsupported': rec_seed(DEFAULT_ST | 0x10, REGS_MASK, sample()),
        'sample-bad-size': rec_seed(DEFAULT_ST, REGS_MASK, sample()[:-8], mode=2),
        'lost': rec_seed(DEFAULT_ST, REGS_MASK, record(RECORD_LOST, u64(1, 42))),
        'comm': rec_seed(DEFAULT_ST, REGS_MASK,
                         record(RECORD_COMM, struct.pack('<II', 1, 1) + b'bash\0\0\0\0')),
        'ring-two': ring_seed([sample(), record(RECORD_LOST, u64(1, 3))], 1024, 0),
        'ring-wrap': ring_seed([sample(), sample()], 512, 448),
        'ring-wrap-header': ring_seed([record(RECORD_LOST, u64(1, 3)), sample()], 256, 252),
        'ring-empty': bytes([1]) + u64(64, 64) + bytes(64),
    }
    for name, data in seeds.items():
        with open(os.path.join(out, name), 'wb') as f:
            f.write(data)


if __name__ == '__main__':
    main()
