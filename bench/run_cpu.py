#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""CPU-sampling overhead: the same fixed CPU job (bench/cpubench, 2 threads,
no frame pointers) unprofiled, under podprof at 99 and 999 Hz (DWARF
unwinding, default 32 KiB stack copies), and under
`perf record -F <hz> --call-graph dwarf` at the same rates, interleaved in
one invocation (the configuration order rotates every repetition).

For every profiled run the ratio against the unprofiled run of the *same*
repetition is taken; the table shows the median of those paired ratios and
their range. Two slowdowns are reported:
  wall   - the job's wall time (includes the profiler competing for the 2
           vCPUs, and everyone else on the machine)
  target CPU - the job's own user+sys time (kernel sample handling and stack
           copies are charged to it; the profiler's own CPU is not)
plus the profiler's CPU per sample (podprof: /metrics
podprof_process_cpu_seconds_total and podprof_cpu_samples_total deltas over
the timed window, i.e. read + unwind + aggregate; perf: `perf record` CPU,
which only copies to perf.data, and `perf report` CPU, where perf does its
DWARF unwinding afterwards) and the profiler's RSS at the end.

usage: bench/run_cpu.py [BUILD_DIR [REPS [ROUNDS [THREADS]]]]
       (defaults build-bench 5 10000 2; ROUNDS is per thread, so with 128
       threads pass ROUNDS * 2 / 128 for the same total work)
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (Podprof, loadavg, prioritize, machine_line, median, proc_cpu_seconds,  # noqa: E402
                      proc_rss_bytes, rotated)

NICE = prioritize()

build = sys.argv[1] if len(sys.argv) > 1 else "build-bench"
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
ROUNDS = sys.argv[3] if len(sys.argv) > 3 else "10000"
THREADS = sys.argv[4] if len(sys.argv) > 4 else "2"
PODPROF = os.path.join(build, "cmd/podprof/podprof")
BENCH = os.path.join(build, "bench/cpubench")


def start_bench():
    p = subprocess.Popen([BENCH, "--wait", THREADS, ROUNDS], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    if p.stdout.readline().strip() != "ready":
        raise RuntimeError("cpubench did not start")
    return p


def finish(p):
    p.stdin.write("go\n")
    p.stdin.flush()
    wall, cpu = (float(x) for x in p.stdout.readline().split())
    p.wait()
    return wall, cpu


def run_plain():
    wall, cpu = finish(start_bench())
    return {"wall": wall, "cpu": cpu}


def run_podprof(hz):
    b = start_bench()
    try:
        pp = Podprof(PODPROF, b.pid, ["cpu.always_on=true", "cpu.frequency_hz=%d" % hz,
                                      "heap.enabled=false", "offcpu.enabled=false",
                                      "log.memstats_interval_seconds=0"])
    except RuntimeError:
        b.kill()
        b.wait()
        raise
    trace = []  # (seconds since go, podprof CPU s, samples), every 0.5 s
    stop = threading.Event()

    def scrape():
        t0 = time.monotonic()
        while not stop.wait(0.5):
            m = pp.metrics()
            trace.append((time.monotonic() - t0, m["podprof_process_cpu_seconds_total"],
                          m["podprof_cpu_samples_total"]))

    try:
        time.sleep(0.5)
        m0 = pp.metrics()
        th = threading.Thread(target=scrape, daemon=True)
        th.start()
        wall, cpu = finish(b)
        stop.set()
        th.join()
        time.sleep(0.3)  # let podprof drain the rings
        m1 = pp.metrics()
    finally:
        pp.stop()

    def d(k):
        return m1.get(k, 0) - m0.get(k, 0)

    r = {"wall": wall, "cpu": cpu, "prof_cpu": d("podprof_process_cpu_seconds_total"),
         "samples": d("podprof_cpu_samples_total"),
         "lost": d("podprof_cpu_lost_samples_total"),
         "complete": d("podprof_unwinds_complete_total"),
         "unwinds": d("podprof_unwinds_total"),
         "rss": m1.get("podprof_process_resident_memory_bytes", 0),
         "symcache": m1.get("podprof_symbol_cache_bytes", 0)}
    # Steady state: from the first scrape >= 1 s after go to the last one
    # >= 0.3 s before the job ended (start-up loading and exit excluded).
    mid = [x for x in trace if 1.0 <= x[0] <= wall - 0.3]
    if len(mid) >= 2 and mid[-1][2] > mid[0][2]:
        r["steady"] = (mid[-1][1] - mid[0][1]) / (mid[-1][2] - mid[0][2])
    return r


def run_perf(hz):
    b = start_bench()
    fd, out = tempfile.mkstemp(prefix="podprof-bench-perf-")
    os.close(fd)
    pe = subprocess.Popen(["perf", "record", "-F", str(hz), "--call-graph", "dwarf",
                           "-p", str(b.pid), "-o", out], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)  # perf prints nothing when attached; give it time
        wall, cpu = finish(b)
        prof_cpu = proc_cpu_seconds(pe.pid)
        rss = proc_rss_bytes(pe.pid)
        pe.send_signal(signal.SIGINT)
        err = pe.communicate(timeout=120)[1]
        m = re.search(r"Captured and wrote ([\d.]+) MB .*\((\d+) samples\)", err)
        samples = int(m.group(2)) if m else 0
        mb = float(m.group(1)) if m else 0
        t0 = os.times()
        subprocess.run(["perf", "report", "-i", out, "--stdio", "--no-children"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        t1 = os.times()
        report_cpu = (t1.children_user - t0.children_user) + (t1.children_system -
                                                              t0.children_system)
    finally:
        if pe.poll() is None:
            pe.kill()
            pe.wait()
        os.unlink(out)
    return {"wall": wall, "cpu": cpu, "prof_cpu": prof_cpu, "samples": samples, "rss": rss,
            "mb": mb, "report_cpu": report_cpu}


configs = [("unprofiled", run_plain),
           ("podprof 99 Hz", lambda: run_podprof(99)),
           ("podprof 999 Hz", lambda: run_podprof(999)),
           ("perf record -F 99 --call-graph dwarf", lambda: run_perf(99)),
           ("perf record -F 999 --call-graph dwarf", lambda: run_perf(999))]
res = {name: [] for name, _ in configs}
print("# %s, nice %d, loadavg before %s, %s threads x %s rounds, %d repetitions" %
      (machine_line(), NICE, loadavg(), THREADS, ROUNDS, reps))
for r in range(reps):
    rep = {}
    for name, fn in rotated(configs, r):
        rep[name] = fn()
        print("rep %d %-40s %s" % (r, name, " ".join("%s=%.4g" % kv for kv in rep[name].items())),
              file=sys.stderr, flush=True)
    for name in rep:
        rep[name]["wall_ratio"] = rep[name]["wall"] / rep["unprofiled"]["wall"]
        rep[name]["cpu_ratio"] = rep[name]["cpu"] / rep["unprofiled"]["cpu"]
        res[name].append(rep[name])


def med(name, key):
    return median(x[key] for x in res[name] if key in x)


def rng(name, key):
    xs = [x[key] for x in res[name]]
    return "%.3f-%.3f" % (min(xs), max(xs))


print("loadavg after: %s" % loadavg())
print()
print("| configuration | wall s | wall ratio (range) | target CPU s | target CPU ratio (range) "
      "| profiler CPU s | samples (lost) | profiler CPU per sample: all-in; steady | "
      "profiler RSS |")
print("|---|---|---|---|---|---|---|---|---|")
for name, _ in configs:
    prof = per = smp = rss = ""
    rs = res[name]
    if any("prof_cpu" in x for x in rs):
        prof = "%.3f" % med(name, "prof_cpu")
        smp = "%.0f" % med(name, "samples")
        if any("lost" in x for x in rs):
            smp += " (%.0f)" % med(name, "lost")
        per = "%.0f us" % (median(x["prof_cpu"] / x["samples"] for x in rs if x["samples"]) * 1e6)
        if any("steady" in x for x in rs):
            per += "; %.0f us" % (med(name, "steady") * 1e6)
        if any("report_cpu" in x for x in rs):
            per += " record + %.0f us `perf report`" % (
                median(x["report_cpu"] / x["samples"] for x in rs if x["samples"]) * 1e6)
            prof += " + %.2f report" % med(name, "report_cpu")
        rss = "%.1f MiB" % (med(name, "rss") / 1048576)
    print("| %s | %.3f | %.4f (%s) | %.3f | %.4f (%s) | %s | %s | %s | %s |" %
          (name, med(name, "wall"), med(name, "wall_ratio"), rng(name, "wall_ratio"),
           med(name, "cpu"), med(name, "cpu_ratio"), rng(name, "cpu_ratio"), prof, smp, per, rss))
print()
for name, _ in configs:
    rs = res[name]
    if any("unwinds" in x for x in rs):
        u = sum(x["unwinds"] for x in rs)
        c = sum(x["complete"] for x in rs)
        print("- %s: %.0f unwinds, %.1f%% complete to the thread root; symbol cache %.1f MiB" %
              (name, u, 100.0 * c / u if u else 0, med(name, "symcache") / 1048576))
    if any("mb" in x for x in rs):
        print("- %s: perf.data %.1f MB per run (median)" % (name, med(name, "mb")))
