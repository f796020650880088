#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Where podprof's RSS goes: podprof (default settings, optionally more
--set) attached to a redis-server under redis-benchmark -P 16 load, with a
99 Hz /debug/pprof/profile window open and /debug/pprof/heap fetched, then
podprof's /proc/PID/smaps summed by kind of mapping:

- BPF maps (anon_inode:bpf-map): the ring buffers (all pages mapped at
  mmap time; libbpf's consumer mapped each data area twice, and both
  mappings count in VmRSS) and small mmapped BPF arrays
- heap: the main arena ([heap])
- thread arenas: glibc per-thread arenas (anonymous, 64 MiB reserved each)
- thread stacks: anonymous mappings directly above a guard page
- other anon: anything else anonymous (large mallocs, libdw/libelf data)
- files: file-backed mappings (code, read-only data, mapped ELF files)

Prints one table per measurement point (load running; 5 s after the load
stopped), for podprof and for its symbolizer helper, and the sidecar's
sums: VmRSS, Pss (the memory cgroup's view when nothing else on the node
maps the same files is closer to "alone": podprof's VmRSS plus the
helper's private pages). usage: bench/run_rss.py [BUILD_DIR [SECONDS [--set k=v ...]]]
(defaults build-bench 10)
"""
import os
import re
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import Podprof, free_port, loadavg, machine_line, prioritize  # noqa: E402

prioritize()

build = sys.argv[1] if len(sys.argv) > 1 else "build-bench"
seconds = int(sys.argv[2]) if len(sys.argv) > 2 else 10
settings = [a for a in sys.argv[3:] if a != "--set"]
PODPROF = os.path.join(build, "cmd/podprof/podprof")
HDR = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ (\d+)\s*(.*)$")


def smaps(pid):
    """[(start, end, perms, name, {field: kB})] of pid."""
    out = []
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            m = HDR.match(line)
            if m:
                out.append((int(m.group(1), 16), int(m.group(2), 16), m.group(3),
                            m.group(5).strip(), {}))
                continue
            k, _, v = line.partition(":")
            v = v.split()
            if out and v and v[0].isdigit():
                out[-1][4][k] = int(v[0])
    return out


def classify(maps):
    kinds = {}
    for i, (start, end, perms, name, f) in enumerate(maps):
        size = (end - start) // 1024
        prev = maps[i - 1] if i else None
        nxt = maps[i + 1] if i + 1 < len(maps) else None
        if "bpf" in name:
            kind = "BPF maps"
        elif name == "[heap]":
            kind = "heap (main arena)"
        elif name.startswith("/"):
            kind = "files"
        elif name:
            kind = "other named (%s)" % name if name != "[stack]" else "thread stacks"
        elif perms.startswith("---"):
            kind = "guard/reserved"
        elif (start & ((64 << 20) - 1)) == 0 and (
                size == 65536 or (nxt and nxt[0] == end and nxt[2].startswith("---"))):
            kind = "thread arenas"
        elif prev and prev[1] == start and prev[2].startswith("---") and \
                (prev[1] - prev[0]) <= (64 << 10):
            kind = "thread stacks"
        else:
            kind = "other anon"
        k = kinds.setdefault(kind, [0, 0, 0])
        k[0] += size
        k[1] += f.get("Rss", 0)
        k[2] += f.get("Pss", 0)
    return kinds


def table(pid, title):
    maps = smaps(pid)
    kinds = classify(maps)
    with open("/proc/%d/status" % pid) as f:
        st = dict(x.split(":", 1) for x in f.read().splitlines() if ":" in x)
    print("\n%s: VmRSS %s, RssAnon %s, RssFile %s, RssShmem %s, threads %s" %
          (title, st["VmRSS"].strip(), st["RssAnon"].strip(), st["RssFile"].strip(),
           st["RssShmem"].strip(), st["Threads"].strip()))
    print("\n| mappings | mapped KiB | Rss KiB | Pss KiB |")
    print("|---|---|---|---|")
    tot = [0, 0, 0]
    for kind, v in sorted(kinds.items(), key=lambda x: -x[1][1]):
        print("| %s | %d | %d | %d |" % (kind, v[0], v[1], v[2]))
        tot = [a + b for a, b in zip(tot, v)]
    print("| total | %d | %d | %d |" % tuple(tot))
    big = sorted(maps, key=lambda m: -m[4].get("Rss", 0))[:12]
    print("\nlargest mappings by Rss: " + ", ".join(
        "%s %s %dK/%dK" % (m[3] or "anon", m[2], m[4].get("Rss", 0), (m[1] - m[0]) // 1024)
        for m in big))


def kb(pid, field, f="status"):
    with open("/proc/%d/%s" % (pid, f)) as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def children(pid):
    """pid's child processes (the symbolizer helper): they are in the
    sidecar's memory cgroup too."""
    out = []
    for task in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/children" % (pid, task)) as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def helpers(pid):
    """pid's symbolizer helper processes."""
    out = []
    for k in children(pid):
        try:
            with open("/proc/%d/cmdline" % k, "rb") as f:
                if b"--symbolizer-helper" in f.read():
                    out.append(k)
        except OSError:
            pass
    return out


def sidecar_line(pid):
    """The sidecar's processes: VmRSS each, and the sum of their Pss (pages
    they share, podprof's code and libraries, counted once, as the memory
    cgroup charges them), and "alone": podprof's VmRSS plus the children's
    private pages, i.e. every page of the sidecar counted once whoever else
    on the node maps the same libraries (Pss divides those pages by their
    mappers: here redis and other processes share libc)."""
    parts, pss = [("podprof", kb(pid, "VmRSS"))], kb(pid, "Pss", "smaps_rollup")
    alone = kb(pid, "VmRSS")
    for k in children(pid):
        try:
            with open("/proc/%d/cmdline" % k, "rb") as f:
                helper = b"--symbolizer-helper" in f.read()
            parts.append(("symbolizer helper" if helper else "child %d" % k, kb(k, "VmRSS")))
            pss += kb(k, "Pss", "smaps_rollup")
            alone += kb(k, "Private_Clean", "smaps_rollup") + kb(k, "Private_Dirty",
                                                                 "smaps_rollup")
        except OSError:
            pass
    print("\nsidecar: %s; VmRSS sum %.1f MiB, Pss sum %.1f MiB, alone %.1f MiB" %
          (", ".join("%s VmRSS %d kB" % p for p in parts), sum(p[1] for p in parts) / 1024,
           pss / 1024, alone / 1024))


def main():
    port = free_port()
    rs = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                           "--save", "", "--appendonly", "no", "--logfile", ""],
                          stdout=subprocess.DEVNULL)
    pp = None
    try:
        for _ in range(100):
            r = subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True,
                               text=True)
            if r.stdout.strip() == "PONG":
                break
            time.sleep(0.05)
        print("# %s, loadavg before %s, settings %s, load %d s" %
              (machine_line(), loadavg(), settings or "defaults", seconds))
        pp = Podprof(PODPROF, rs.pid, settings)
        load = subprocess.Popen(["redis-benchmark", "-p", str(port), "-c", "50", "-d", "64",
                                 "-r", "100000", "-t", "set,get,lpush,lpop,hset", "-P", "16",
                                 "-l", "-q"], stdout=subprocess.DEVNULL)
        th = threading.Thread(target=pp.get, args=("/debug/pprof/profile?seconds=%d" %
                                                   max(seconds - 2, 1),), daemon=True)
        th.start()
        th.join()
        pp.get("/debug/pprof/heap")
        pp.get("/debug/pprof/goroutine?debug=2")
        m = pp.metrics()
        table(pp.pid, "podprof under load (after a %d s CPU window)" % max(seconds - 2, 1))
        for h in helpers(pp.pid):
            table(h, "symbolizer helper %d under load" % h)
        sidecar_line(pp.pid)
        load.terminate()
        load.wait()
        time.sleep(5)
        table(pp.pid, "podprof 5 s after the load stopped")
        for h in helpers(pp.pid):
            table(h, "symbolizer helper %d 5 s after" % h)
        sidecar_line(pp.pid)
        words = ("resident", "symbol", "lost", "drop", "samples_total", "events_total")
        print("\nmetrics: " + ", ".join("%s=%g" % (k, v) for k, v in sorted(m.items())
                                        if any(w in k for w in words)))
    finally:
        if pp:
            pp.stop()
        rs.terminate()
        rs.wait()


main()
