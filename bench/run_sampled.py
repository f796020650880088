#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What a sampled allocation costs the target with the injected agent:
bench/mallocbench (one thread, malloc+free of 64 bytes) under podprof with
heap.mode=inject and heap.sample_rate=1, so every allocation and its free
reach podprof through the agent's notification points (uprobe + BPF stack
copy); the ns per pair is then almost all notification cost. Several podprof
builds in one invocation, interleaved, the order rotating; the mallocbench
binary is the first build's for all. Also reports which notification the
kernel used: [uprobes-trampoline] in the target's maps means the uprobe on
the agent's leading 5-byte nop was optimized into a call and a syscall.

usage: bench/run_sampled.py REPS PAIRS BUILD_DIR [BUILD_DIR...]
env: PODPROF_SET="k=v ..." (extra --set for every build)
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import Podprof, loadavg, machine_line, median, prioritize, rotated  # noqa: E402

NICE = prioritize()
SETTINGS = ["cpu.enabled=false", "offcpu.enabled=false", "threads.enabled=false",
            "log.memstats_interval_seconds=0", "heap.sample_rate=1", "heap.mode=inject",
            "heap.over_budget=warn"] + os.environ.get("PODPROF_SET", "").split()


def one(bench, build, pairs):
    b = subprocess.Popen([bench, "--wait", str(pairs), "64"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    if b.stdout.readline().strip() != "ready":
        raise RuntimeError("mallocbench did not start")
    try:
        pp = Podprof(os.path.join(build, "cmd/podprof/podprof"), b.pid, SETTINGS)
    except RuntimeError:
        b.kill()
        b.wait()
        raise
    try:
        time.sleep(1.0)
        m0 = pp.metrics()
        b.stdin.write("go\n")
        b.stdin.flush()
        time.sleep(0.2)
        with open("/proc/%d/maps" % b.pid) as f:
            tramp = any("[uprobes-trampoline]" in x for x in f)
        ns = float(b.stdout.readline())
        b.wait()
        time.sleep(0.5)
        m1 = pp.metrics()
    finally:
        pp.stop()
    ev = m1["podprof_heap_events_total"] - m0["podprof_heap_events_total"]
    cpu = m1["podprof_process_cpu_seconds_total"] - m0["podprof_process_cpu_seconds_total"]
    return {"ns": ns, "events": ev, "tramp": tramp, "prof_ns": cpu / pairs * 1e9}


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    reps, pairs, builds = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    bench = os.path.join(builds[0], "bench/mallocbench")
    print("# %s, nice %d, loadavg before %s, %d pairs, %d repetitions" %
          (machine_line(), NICE, loadavg(), pairs, reps))
    res = {b: [] for b in builds}
    for r in range(reps):
        for b in rotated(list(builds), r):
            x = one(bench, b, pairs)
            res[b].append(x)
            print("rep %d %-28s %.0f ns/pair, %d events, podprof %.0f ns/pair, trampoline %s" %
                  (r, b, x["ns"], x["events"], x["prof_ns"], x["tramp"]), file=sys.stderr,
                  flush=True)
    base = median(x["ns"] for x in res[builds[0]])
    print("\n| build | ns per malloc+free, every allocation sampled (median, range) | ratio "
          "| podprof CPU ns per pair | uprobes-trampoline |")
    print("|---|---|---|---|---|")
    for b in builds:
        xs = res[b]
        m = median(x["ns"] for x in xs)
        print("| %s | %.0f (%.0f-%.0f) | %.2f | %.0f | %s |" %
              (b, m, min(x["ns"] for x in xs), max(x["ns"] for x in xs), m / base,
               median(x["prof_ns"] for x in xs), "yes" if all(x["tramp"] for x in xs) else
               "no" if not any(x["tramp"] for x in xs) else "some"))
    print("\nloadavg after: %s" % loadavg())


main()
