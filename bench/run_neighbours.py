#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What podprof costs the processes it does not profile: the time per
syscall of an unrelated process (bench/syscallbench, getppid in a loop)
with 0, 1 and 4 podprof instances running next to it, each profiling its
own `sleep` process, idle (no request: the off-CPU programs are detached)
or with a /debug/pprof/block?seconds=60 window open on every instance (the
sys_enter/sys_exit/sched_switch programs attached, filtering every syscall
of the node), and 4 instances with offcpu.always_on (what every instance
cost before 0.2). Interleaved repetitions; ratios against the baseline of
the same repetition. Benchmark: asserts nothing.

usage: bench/run_neighbours.py [BUILD_DIR] [REPS]   (as root, from the source root)
"""
import os
import shutil
import tempfile
import subprocess
import sys
import threading
import time
import urllib.request

from benchlib import Podprof, machine_line, median, prioritize, rotated

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
REPS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
# private copies: a rebuild during the run must not swap the binaries
_TMP = tempfile.mkdtemp(prefix="podprof-neighbours-")
PODPROF = shutil.copy(os.path.join(BUILD, "cmd/podprof/podprof"), _TMP)
BENCH = shutil.copy(os.path.join(BUILD, "bench/syscallbench"), _TMP)
SETTINGS = ["cpu.enabled=false", "heap.enabled=false", "threads.enabled=false",
            "log.memstats_interval_seconds=0"]
CONFIGS = [("none", 0, False, False), ("1 idle", 1, False, False), ("4 idle", 4, False, False),
           ("1 window", 1, True, False), ("4 windows", 4, True, False),
           ("4 always_on", 4, False, True)]


def open_window(pp):
    def run():
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/debug/pprof/block?seconds=60" % pp.port,
                                   timeout=90).read()
        except Exception:
            pass
    threading.Thread(target=run, daemon=True).start()


def tracing(pp):
    return pp.metrics().get("podprof_offcpu_tracing", -1)


def measure():
    out = subprocess.run([BENCH, "11", "200000"], stdout=subprocess.PIPE, text=True,
                         check=True).stdout.split()
    return median(float(x) for x in out[1:])  # the first round warms up


def one(n, window, always_on):
    sleeps, pps = [], []
    try:
        for _ in range(n):
            s = subprocess.Popen(["sleep", "600"])
            sleeps.append(s)
            st = SETTINGS + (["offcpu.always_on=true"] if always_on else [])
            pps.append(Podprof(PODPROF, s.pid, st))
        for pp in pps:
            if window:
                open_window(pp)
        time.sleep(1.0)
        states = [tracing(pp) for pp in pps]
        ns = measure()
        return ns, states
    finally:
        for pp in pps:
            pp.stop()
        for s in sleeps:
            s.kill()
            s.wait()


def main():
    nice = prioritize()
    print("# %s, nice %d, %d repetitions" % (machine_line(), nice, REPS))
    res = {c[0]: [] for c in CONFIGS}
    ratios = {c[0]: [] for c in CONFIGS}
    for r in range(REPS):
        got = {}
        for name, n, window, always in rotated(CONFIGS, r):
            ns, states = one(n, window, always)
            got[name] = ns
            print("rep %d %-12s %7.1f ns/call  tracing %s" % (r, name, ns, states), flush=True)
        for name in got:
            res[name].append(got[name])
            ratios[name].append(got[name] / got["none"])
    print("\n| podprof instances | CPU ns per getppid (median) | ratio to none (median, range) |")
    print("|---|---|---|")
    for name, *_ in CONFIGS:
        rs = ratios[name]
        print("| %s | %.0f | x%.2f (%.2f-%.2f) |" % (name, median(res[name]), median(rs),
                                                      min(rs), max(rs)))


if __name__ == "__main__":
    try:
        main()
    finally:
        shutil.rmtree(_TMP, ignore_errors=True)
