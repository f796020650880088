#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes cxx-names.tsv: real mangled C++ function names from Debian's C++
libraries and programs, each with the name `go tool pprof` shows for it by
default (its demangler with NoParams + NoTemplateParams).

Run by hand, from anywhere, on Debian 12 with:
  apt-get install -y libstdc++-12-dev libgcc-12-dev librocksdb7.8 rocksdb-tools \
      libboost-filesystem1.74.0 libboost-iostreams1.74.0 \
      libboost-program-options1.74.0 libboost-regex1.74.0 binutils golang-go
  python3 gen-cxx-names.py > cxx-names.tsv

How the expected names are obtained: the names go into a real profile.proto
(one sample per name, a numeric label `row` to find it again), each
function's name equal to its system name, which is the case go tool pprof
demangles itself (symbolizer.Demangle: a function whose name differs from
its system name is taken as already demangled). `go tool pprof -traces`
prints every sample with its label and frame; that frame is the expected
name. Names go's demangler cannot parse come back mangled and are left out
(counted in the header).

The selection is deterministic: every const member function (_ZNK) of
librocksdb and db_bench, then up to PER_SHAPE names of each shape below
from each source, picked by a hash of the name.
"""
import gzip
import hashlib
import os
import re
import subprocess
import sys
import tempfile

LIB = "/usr/lib/x86_64-linux-gnu/"
GCC = "/usr/lib/gcc/x86_64-linux-gnu/12/"
# Shared objects give their dynamic symbols; static archives (libstdc++-12-dev,
# libgcc-12-dev) also give local ones: anonymous namespaces, clones (.cold).
SOURCES = [
    ("db_bench", "/usr/bin/db_bench"),
    ("rocksdb", LIB + "librocksdb.so.7.8"),
    ("libstdc++", LIB + "libstdc++.so.6"),
    ("boost_filesystem", LIB + "libboost_filesystem.so.1.74.0"),
    ("boost_iostreams", LIB + "libboost_iostreams.so.1.74.0"),
    ("boost_program_options", LIB + "libboost_program_options.so.1.74.0"),
    ("boost_regex", LIB + "libboost_regex.so.1.74.0"),
    ("libstdc++.a", GCC + "libstdc++.a"),
    ("libtsan.a", GCC + "libtsan.a"),
]
ALL_CONST = {"db_bench", "rocksdb"}
PER_SHAPE = 12


def top_level_space_before_params(full):
    """True when a space at template/paren depth 0 comes before the first
    top-level '(' : a return type (or a conversion operator)."""
    d = 0
    for c in full:
        if c in "<[{":
            d += 1
        elif c in ">]}" and d:
            d -= 1
        elif c == "(" and d == 0:
            return False
        elif c == " " and d == 0:
            return True
    return False


SHAPES = [
    ("const", lambda f: re.search(r"\) const( &&?)?$", f)),
    ("volatile", lambda f: re.search(r"\) (const )?volatile", f)),
    ("ref-qualifier", lambda f: re.search(r"\)( const)? &&?$", f)),
    ("operator()", lambda f: "operator()" in f),
    ("operator<", lambda f: re.search(r"operator(<|<<|<=|>|>>|>=|<=>) ?[<(]", f)),
    ("operator->", lambda f: "operator->" in f),
    ("operator-other", lambda f: re.search(r"operator(==|!=|\[\]|=|\+|-|\*|&|\||!|~|\+\+|--|\+=|new|delete)", f)),
    ("conversion", lambda f: re.search(r"operator [A-Za-z_:]", f) and not re.search(r"operator (new|delete)", f)),
    ("lambda", lambda f: "{lambda(" in f),
    ("anonymous", lambda f: "(anonymous namespace)" in f),
    ("abi-tag", lambda f: "[abi:" in f),
    ("unnamed", lambda f: "{unnamed type#" in f),
    ("function-pointer", lambda f: "(*)" in f or "(*&)" in f),
    ("member-pointer", lambda f: "::*)" in f),
    ("nested-templates", lambda f: f.count("<") >= 4),
    ("return-type", top_level_space_before_params),
    ("thunk", lambda f: "thunk to " in f),
    ("ctor-dtor", lambda f: re.search(r"(\b(\w+)::\2\(|::~)", f)),
    ("std", lambda f: f.startswith("std::")),
    ("decltype", lambda f: "decltype(" in f),
    ("noexcept", lambda f: "noexcept" in f),
    ("clone", lambda f: "[clone " in f),
    ("other", lambda f: True),
]


def symbols(path):
    dyn = [] if path.endswith(".a") else ["-D"]
    out = subprocess.run(["nm", *dyn, "--defined-only", path], check=True,
                         capture_output=True, text=True).stdout
    names = []
    for line in out.splitlines():
        parts = line.split()
        # functions only: text (T/t), weak (W), indirect (i)
        if len(parts) == 3 and parts[1] in "TtWi" and parts[2].startswith("_Z"):
            names.append(parts[2].split("@")[0])
    return sorted(set(names))


def demangle_full(names):
    out = subprocess.run(["c++filt"], input="\n".join(names) + "\n", check=True,
                         capture_output=True, text=True).stdout
    return out.splitlines()


def pick(names):
    chosen = []
    seen = set()
    for src, path in SOURCES:
        if not os.path.exists(path):
            sys.exit(f"{path} missing: install the packages listed at the top")
        syms = symbols(path)
        full = dict(zip(syms, demangle_full(syms)))
        if src in ALL_CONST:
            for s in syms:
                if s.startswith("_ZNK") and s not in seen:
                    seen.add(s)
                    chosen.append(s)
        by_shape = {}
        for s in syms:
            for shape, test in SHAPES:
                if test(full[s]):
                    by_shape.setdefault(shape, []).append(s)
        for shape, _ in SHAPES:
            cand = sorted(by_shape.get(shape, []),
                          key=lambda s: hashlib.sha1(s.encode()).hexdigest())
            n = 0
            for s in cand:
                if n >= PER_SHAPE:
                    break
                if s in seen:
                    n += 1  # already in: counts for the shape
                    continue
                seen.add(s)
                chosen.append(s)
                n += 1
    return chosen


# profile.proto, written by hand (field numbers from pprof's profile.proto)
def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def vi(f, n):
    return varint(f << 3) + varint(n)


def ld(f, b):
    return varint(f << 3 | 2) + varint(len(b)) + b


def profile(names):
    strs = ["", "samples", "count", "row"]
    body = ld(1, vi(1, 1) + vi(2, 2))  # sample_type samples/count
    for i, n in enumerate(names):
        fid = i + 1
        strs.append(n)
        si = len(strs) - 1
        body += ld(5, vi(1, fid) + vi(2, si) + vi(3, si))  # name == system_name
        body += ld(4, vi(1, fid) + vi(3, 0x1000 + i) + ld(4, vi(1, fid)))
        body += ld(2, ld(1, varint(fid)) + ld(2, varint(1)) + ld(3, vi(1, 3) + vi(3, fid)))
    for s in strs:
        body += ld(6, s.encode())
    return gzip.compress(body)


def pprof_names(names):
    with tempfile.NamedTemporaryFile(suffix=".pb.gz") as f:
        f.write(profile(names))
        f.flush()
        out = subprocess.run(["go", "tool", "pprof", "-traces", f.name], check=True,
                             capture_output=True, text=True).stdout
    got = {}
    row = None
    for line in out.splitlines():
        m = re.match(r"^\s+row:\s+(\d+)$", line)
        if m:
            row = int(m.group(1))
            continue
        m = re.match(r"^\s+1\s+(.*)$", line)
        if m and row is not None:
            got[row] = m.group(1)
            row = None
    if len(got) != len(names):
        sys.exit(f"go tool pprof printed {len(got)} of {len(names)} samples")
    return [got[i + 1] for i in range(len(names))]


def main():
    names = pick(SOURCES)
    shown = pprof_names(names)
    go = subprocess.run(["go", "version"], check=True, capture_output=True,
                        text=True).stdout.strip()
    rows = [(m, e) for m, e in zip(names, shown) if e != m and "\t" not in e]
    print("# mangled<TAB>what go tool pprof -traces shows (default demangling)")
    print(f"# written by gen-cxx-names.py with {go}; {len(rows)} names, "
          f"{len(names) - len(rows)} left out (go's demangler left them mangled)")
    for m, e in rows:
        print(f"{m}\t{e}")


if __name__ == "__main__":
    main()
