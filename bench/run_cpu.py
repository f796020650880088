#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""CPU-sampling overhead: the same fixed CPU job (bench/cpubench, 2 threads,
no frame pointers) unprofiled, under podprof at 99 and 999 Hz, and under
`perf record --call-graph dwarf` at the same rates, interleaved in one
invocation. Prints a Markdown table of median wall times and ratios
against the unprofiled median, plus podprof's own CPU per sample and RSS.

usage: bench/run_cpu.py BUILD_DIR [repetitions]
"""
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

build = sys.argv[1] if len(sys.argv) > 1 else "build-bench"
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
PODPROF = os.path.join(build, "cmd/podprof/podprof")
BENCH = os.path.join(build, "bench/cpubench")
THREADS, ROUNDS = "2", "400"


def start_bench():
    p = subprocess.Popen([BENCH, "--wait", THREADS, ROUNDS], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def finish(p):
    p.stdin.write("go\n")
    p.stdin.flush()
    t = float(p.stdout.readline())
    p.wait()
    return t


def run_plain():
    return finish(start_bench()), None


def run_podprof(hz):
    b = start_bench()
    pp = subprocess.Popen([PODPROF, "--listen", "0", "--pid", str(b.pid),
                           "--set", "cpu.always_on=true", "--set", "cpu.frequency_hz=%d" % hz,
                           "--set", "heap.enabled=false", "--set", "offcpu.enabled=false",
                           "--set", "log.memstats_interval_seconds=0"],
                          stderr=subprocess.PIPE, text=True)
    for line in pp.stderr:
        if "target: pid %d" % b.pid in line:
            break
    time.sleep(0.3)
    t0 = os.times()
    t = finish(b)
    with open("/proc/%d/stat" % pp.pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    with open("/proc/%d/status" % pp.pid) as f:
        rss = int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))
    pp.send_signal(signal.SIGTERM)
    pp.communicate(timeout=30)
    samples = hz * float(THREADS) * t
    return t, (cpu, rss, samples)


def run_perf(hz):
    b = start_bench()
    out = tempfile.mktemp(prefix="podprof-bench-perf-")
    pe = subprocess.Popen(["perf", "record", "-q", "-F", str(hz), "--call-graph", "dwarf",
                           "-p", str(b.pid), "-o", out], stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    t = finish(b)
    pe.send_signal(signal.SIGINT)
    pe.wait(timeout=120)
    try:
        os.unlink(out)
    except FileNotFoundError:
        pass
    return t, None


configs = [("unprofiled", run_plain), ("podprof 99 Hz", lambda: run_podprof(99)),
           ("podprof 999 Hz", lambda: run_podprof(999)),
           ("perf record -F 99 --call-graph dwarf", lambda: run_perf(99)),
           ("perf record -F 999 --call-graph dwarf", lambda: run_perf(999))]
times = {name: [] for name, _ in configs}
extra = {name: [] for name, _ in configs}
for r in range(reps):
    for name, fn in configs:
        t, x = fn()
        times[name].append(t)
        if x:
            extra[name].append(x)
        print("rep %d %-40s %.3f s" % (r, name, t), file=sys.stderr)

base = statistics.median(times["unprofiled"])
print("| configuration | median wall s | ratio vs unprofiled | podprof CPU per sample | podprof RSS |")
print("|---|---|---|---|---|")
for name, _ in configs:
    med = statistics.median(times[name])
    per, rss = "", ""
    if extra[name]:
        cpu = statistics.median(c for c, _, _ in extra[name])
        smp = statistics.median(s for _, _, s in extra[name])
        per = "%.1f us" % (cpu / smp * 1e6) if smp else ""
        rss = "%.1f MiB" % (statistics.median(r for _, r, _ in extra[name]) / 1024)
    print("| %s | %.3f | %.4f | %s | %s |" % (name, med, med / base, per, rss))
