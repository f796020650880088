#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes seed records for fuzz-cpurec (layout: bpf/cpu.h, struct cpu_rec)
into DIR: valid records with and without stack and callchains, and a few
malformed ones."""
import os
import struct
import sys

NREGS, MAXIPS = 17, 64


def rec(pid=1234, tid=1240, flags=1, stack=b"", n_kernel=0, n_user=0, stack_len=None, parent=0):
    hdr = struct.pack("<IIQIIIIII", pid, tid, 987654321, flags,
                      len(stack) if stack_len is None else stack_len, n_kernel, n_user, parent, 0)
    regs = struct.pack("<%dQ" % NREGS, *[0x1000 + i for i in range(NREGS)])
    kips = struct.pack("<%dQ" % MAXIPS, *[0xffffffff81000000 + 16 * i for i in range(MAXIPS)])
    uips = struct.pack("<%dQ" % MAXIPS, *[0x401000 + 16 * i for i in range(MAXIPS)])
    return hdr + regs + kips + uips + stack


def main(out):
    os.makedirs(out, exist_ok=True)
    seeds = {
        "plain": rec(),
        "stack": rec(stack=bytes(range(256)) * 16),
        "kernel-user": rec(n_kernel=5, n_user=3, stack=b"\x01" * 64),
        "no-regs": rec(flags=0),
        "adopted": rec(flags=3, parent=77, stack=b"\x02" * 8),
        "stack-too-long": rec(stack=b"\x00" * 16, stack_len=4096),
        "too-many-ips": rec(n_kernel=65),
        "zero-pid": rec(pid=0),
        "short": rec()[:100],
    }
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus", "cpurec"))
