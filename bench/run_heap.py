#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Heap-tracing cost per malloc+free pair (bench/mallocbench, one thread,
64-byte blocks, glibc malloc): unprofiled, podprof with the default
heap.sample_rate (512 KiB), podprof with heap.sample_rate=1 (every
allocation recorded), and bcc's memleak-bpfcc (every allocation, with a
stack id per allocation), interleaved in one invocation; the configuration
order rotates every repetition. The table shows median ns per pair, the
extra ns per pair against the unprofiled run of the same repetition, and
the ratio.

Every configuration waits for its tracer to be attached before the timed
loop (mallocbench --wait). The traced configurations run fewer pairs so
that each run takes seconds, not minutes; ns per pair does not depend on
the count.

memleak needs kernel headers: on a kernel without a headers package set
BCC_KERNEL_SOURCE to a merged Debian header tree (see BENCHMARKS.md);
without a working memleak its row says why.

usage: bench/run_heap.py [BUILD_DIR [REPS]]   (defaults build-bench 5)
"""
import os
import re
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import Podprof, loadavg, prioritize, machine_line, median, rotated  # noqa: E402

NICE = prioritize()

build = sys.argv[1] if len(sys.argv) > 1 else "build-bench"
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
PODPROF = os.path.join(build, "cmd/podprof/podprof")
BENCH = os.path.join(build, "bench/mallocbench")
MEMLEAK = os.environ.get("MEMLEAK", "/usr/sbin/memleak-bpfcc")
SIZE = "64"
PODPROF_COMMON = ["cpu.enabled=false", "offcpu.enabled=false", "threads.enabled=false",
                  "log.memstats_interval_seconds=0"]


def start_bench(pairs):
    p = subprocess.Popen([BENCH, "--wait", str(pairs), SIZE], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    if p.stdout.readline().strip() != "ready":
        raise RuntimeError("mallocbench did not start")
    return p


def finish(p):
    p.stdin.write("go\n")
    p.stdin.flush()
    ns = float(p.stdout.readline())
    p.wait()
    return ns


def run_plain():
    return {"ns": finish(start_bench(20000000))}


def run_podprof(rate, pairs, mode="auto"):
    b = start_bench(pairs)
    try:
        pp = Podprof(PODPROF, b.pid, PODPROF_COMMON + ["heap.sample_rate=%d" % rate,
                                                      "heap.mode=" + mode,
                                                      "heap.over_budget=warn"])
    except RuntimeError:
        b.kill()
        b.wait()
        raise
    try:
        bad = [x.strip() for x in pp.log if "heap:" in x and (" warn " in x or " error " in x)]
        if bad:
            b.kill()
            b.wait()
            raise RuntimeError("podprof: " + "; ".join(bad))
        time.sleep(1.0)
        pause = None
        for x in pp.log:
            m = re.search(r"injected agent.*pause ([0-9.]+) ms", x)
            if m:
                pause = float(m.group(1))
        if mode == "inject" and pause is None:
            b.kill()
            b.wait()
            raise RuntimeError("podprof did not inject: " + "".join(pp.log[-5:]))
        m0 = pp.metrics()
        ns = finish(b)
        time.sleep(0.5)
        m1 = pp.metrics()
    finally:
        pp.stop()

    def d(k):
        return m1.get(k, 0) - m0.get(k, 0)

    r = {"ns": ns, "events": d("podprof_heap_events_total"), "pairs": pairs,
            "prof_cpu": d("podprof_process_cpu_seconds_total"),
            "rss": m1.get("podprof_process_resident_memory_bytes", 0)}
    if pause is not None:
        r["pause_ms"] = pause
    return r


def run_memleak(pairs):
    b = start_bench(pairs)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if "BCC_KERNEL_SOURCE" not in env and os.path.isdir("/tmp/bench-kh/merged"):
        env["BCC_KERNEL_SOURCE"] = "/tmp/bench-kh/merged"
    ml = subprocess.Popen([MEMLEAK, "-p", str(b.pid), "1"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, env=env)
    out = []
    ready = threading.Event()

    def drain():
        for line in ml.stdout:
            out.append(line)
            if "stacks with outstanding allocations" in line:
                ready.set()  # printed after attaching and one interval
    th = threading.Thread(target=drain, daemon=True)
    th.start()
    try:
        deadline = time.time() + 120
        while not ready.is_set():
            if ml.poll() is not None or time.time() > deadline:
                b.kill()
                b.wait()
                raise RuntimeError("memleak did not attach: " +
                                   " / ".join(x.strip() for x in out[-5:]))
            time.sleep(0.05)
        ns = finish(b)
    finally:
        if ml.poll() is None:
            ml.terminate()
            try:
                ml.wait(timeout=30)
            except subprocess.TimeoutExpired:
                ml.kill()
                ml.wait()
    return {"ns": ns}


configs = [("unprofiled", run_plain),
           ("podprof heap.mode=inject, sample_rate 512 KiB (default)",
            lambda: run_podprof(524288, 20000000, "inject")),
           ("podprof heap.mode=uprobe, sample_rate 512 KiB (default)",
            lambda: run_podprof(524288, 500000, "uprobe")),
           ("podprof heap.mode=inject, sample_rate=1 (every allocation)",
            lambda: run_podprof(1, 100000, "inject")),
           ("podprof heap.mode=uprobe, sample_rate=1 (every allocation)",
            lambda: run_podprof(1, 100000, "uprobe"))]
if not os.environ.get("NO_MEMLEAK"):
    configs.append(("memleak-bpfcc (bcc, every allocation)", lambda: run_memleak(200000)))
res = {name: [] for name, _ in configs}
errors = {}
print("# %s, nice %d, loadavg before %s, %d repetitions" % (machine_line(), NICE, loadavg(), reps))
for r in range(reps):
    rep = {}
    for name, fn in rotated(configs, r):
        try:
            rep[name] = fn()
        except RuntimeError as e:
            errors.setdefault(name, str(e))
            print("rep %d %s: %s" % (r, name, e), file=sys.stderr, flush=True)
            continue
        print("rep %d %-48s %s" % (r, name, " ".join("%s=%.4g" % kv for kv in rep[name].items())),
              file=sys.stderr, flush=True)
    for name in rep:
        rep[name]["extra"] = rep[name]["ns"] - rep["unprofiled"]["ns"]
        rep[name]["ratio"] = rep[name]["ns"] / rep["unprofiled"]["ns"]
        res[name].append(rep[name])

print("loadavg after: %s" % loadavg())
print()
print("| configuration | ns per malloc+free | extra ns per pair | ratio | heap events per pair "
      "| tracer CPU per pair | tracer RSS | injection pause |")
print("|---|---|---|---|---|---|---|---|")
for name, _ in configs:
    rs = res[name]
    if not rs:
        print("| %s | failed: %s | | | | | | |" % (name, errors.get(name, "?").replace("|", "/")))
        continue
    ev = cpu = rss = ""
    if any("events" in x for x in rs):
        ev = "%.4f" % median(x["events"] / x["pairs"] for x in rs)
        cpu = "%.1f ns" % (median(x["prof_cpu"] / x["pairs"] for x in rs) * 1e9)
        rss = "%.1f MiB" % (median(x["rss"] for x in rs) / 1048576)
    pause = ""
    if any("pause_ms" in x for x in rs):
        pause = "%.2f ms" % median(x["pause_ms"] for x in rs if "pause_ms" in x)
    print("| %s | %.1f | %.1f | %.2f | %s | %s | %s | %s |" %
          (name, median(x["ns"] for x in rs), median(x["extra"] for x in rs),
           median(x["ratio"] for x in rs), ev, cpu, rss, pause))
