#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""redis-benchmark throughput against one redis-server (Debian's, jemalloc),
unprofiled and with podprof attached to redis-server with its default
settings (heap tracing at 512 KiB, off-CPU tracing, CPU only while a window
is open), and with podprof attached while a 99 Hz /debug/pprof/profile
window is open for the first seconds of the run. Interleaved repetitions,
the configuration order rotating; podprof is started and stopped around each
of its runs; ratios are against the unprofiled run of the same repetition.

Each timed run also reads redis-server's own CPU (utime + stime) and
reports it per request; "redis CPU ratio" is unprofiled's CPU per request
over the configuration's, per repetition: the throughput ratio a CPU-bound
redis would show, much less moved by the VM's noise than req/s.

Two workloads: pipelined (-P 16, many requests per syscall, so allocation is
a large share of redis's work) and unpipelined (-P 1, syscall-bound).

Then one breakdown run (not timed against anything) with
kernel.bpf_stats_enabled=1: podprof's heap events per request and CPU per
request from /metrics, and run_cnt / run_time_ns of podprof's BPF programs
from `bpftool prog show` (the uprobe trap and return-probe costs are not in
run_time_ns; they show as the difference between the measured per-call cost
and the BPF time).

Every timed run, profiled or not, follows an untimed run of a quarter of its
requests (WARM_LOAD=0.25; 0 turns it off): podprof's warm-up under load is
reported apart as "warm-up CPU".

usage: bench/run_redis.py [BUILD_DIR [REPS]]   (defaults build-bench 3; REPS 0: breakdown only)
"""
import json
import os
import re
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (Podprof, loadavg, prioritize, machine_line, median,  # noqa: E402
                      proc_cpu_seconds, rotated, start_redis)

NICE = prioritize()

build = sys.argv[1] if len(sys.argv) > 1 else "build-bench"
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
PODPROF = os.path.join(build, "cmd/podprof/podprof")
TESTS = "set,get,lpush,lpop,hset"
# (name, arguments, -n unprofiled and with the agent, -n with uprobes): the
# uprobe path slows redis down so much that its runs use fewer requests. The
# agent rows use the unprofiled count: a short run would time podprof's
# start-up rather than its steady state.
WORKLOADS = [("-P 16", ["-P", "16"], 400000, 40000), ("-P 1", [], 40000, 10000)]
BPFTOOL = "/usr/sbin/bpftool"
# An untimed run of the same workload (this fraction of its requests) before
# each timed one, in every configuration: podprof's warm-up under load (new
# stacks, their symbols, debug files decompressed once: 0.15-0.2 s of CPU
# in the first seconds of a busy redis, BENCHMARKS section 8) would otherwise
# fall inside a timed run of a few seconds. Its CPU is reported apart
# ("warm-up CPU"). WARM_LOAD=0: no warm-up run (timing starts at wait_warm).
WARM_LOAD = float(os.environ.get("WARM_LOAD", "0.25"))


def redis_benchmark(port, extra, n):
    """Total requests / total seconds over all tests, and per-test rps."""
    args = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-c", "50", "-d", "64",
            "-r", "100000", "-t", TESTS, "--csv", "-n", str(n)] + extra
    t0 = time.monotonic()
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    wall = time.monotonic() - t0
    per = {}
    for line in out.splitlines()[1:]:
        f = [x.strip('"') for x in line.split(",")]
        per[f[0]] = float(f[1])
    # Aggregate throughput: requests over the time the tests took (from the
    # per-test rps, so client start-up is not counted).
    busy = sum(n / r for r in per.values())
    return {"rps": n * len(per) / busy, "wall": wall, "per": per, "n": n * len(per)}


def warm_load(port, extra, n):
    if WARM_LOAD > 0:
        redis_benchmark(port, extra, max(1000, int(n * WARM_LOAD)))


def timed(rs, port, extra, n):
    """redis_benchmark plus redis-server's own CPU (utime + stime) over the
    run: the cost to the target per request, which the machine's noise
    (neighbours, the hypervisor) moves much less than the throughput."""
    c0 = proc_cpu_seconds(rs.pid)
    r = redis_benchmark(port, extra, n)
    r["redis_cpu"] = proc_cpu_seconds(rs.pid) - c0
    return r


def run_plain(rs, port, extra, n, _n):
    warm_load(port, extra, n)
    return timed(rs, port, extra, n)


def run_podprof(rs, port, extra, n_full, n_short, cpu_window=0, settings=(), short=False):
    n = n_short if short else n_full
    pp = Podprof(PODPROF, rs.pid, list(settings))
    try:
        bad = [x.strip() for x in pp.log if "heap:" in x and (" warn " in x or " error " in x)]
        if bad:
            raise RuntimeError("podprof: " + "; ".join(bad))
        time.sleep(1.0)
        pp.wait_warm()
        w0 = proc_cpu_seconds(pp.pid)
        warm_load(port, extra, n)
        warm_cpu = proc_cpu_seconds(pp.pid) - w0
        pp.wait_warm()
        m0 = pp.metrics()
        th = None
        if cpu_window:
            th = threading.Thread(target=pp.get,
                                  args=("/debug/pprof/profile?seconds=%d" % cpu_window,),
                                  daemon=True)
            th.start()
        r = timed(rs, port, extra, n)
        if th:
            th.join()
        m1 = pp.metrics()
    finally:
        pp.stop()

    def d(k):
        return m1.get(k, 0) - m0.get(k, 0)

    def dsum(prefix, label):
        return sum(m1[k] - m0.get(k, 0) for k in m1 if k.startswith(prefix) and label in k)

    ring = dsum("podprof_heap_agent_samples_total", 'path="ring"')
    kern = dsum("podprof_heap_agent_samples_total", 'path="kernel"')
    r.update({"ring_share": ring / (ring + kern) if ring + kern else None})
    r.update({"events": d("podprof_heap_events_total"),
              "prof_cpu": d("podprof_process_cpu_seconds_total"),
              "rss": m1.get("podprof_process_resident_memory_bytes", 0),
              "warm_cpu": warm_cpu})
    return r


def bpf_progs():
    """{id: (name, run_cnt, run_time_ns)} of every loaded BPF program."""
    out = subprocess.run([BPFTOOL, "-j", "prog", "show"], capture_output=True, text=True,
                         check=True).stdout
    return {p["id"]: (p.get("name", "?"), p.get("run_cnt", 0), p.get("run_time_ns", 0))
            for p in json.loads(out)}


def memstats(log, pid):
    """mallocs and frees of pid from podprof's last memstats log line."""
    for line in reversed(log):
        if "memstats pid=%d " % pid in line:
            m = re.search(r"mallocs=(\d+) frees=(\d+)", line)
            if m:
                return int(m.group(1)), int(m.group(2))
    return 0, 0


def breakdown(rs, port, extra, n):
    """One run with BPF statistics on: where podprof's cost per request goes.
    podprof's programs are the ones loaded after it started (bpftool here
    cannot show which process holds a program)."""
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        old = f.read().strip()
    before = set(bpf_progs())
    pp = Podprof(PODPROF, rs.pid, ["log.memstats_interval_seconds=1"])
    try:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write("1")
        time.sleep(1.5)
        m0 = pp.metrics()
        b0 = bpf_progs()
        c0 = memstats(pp.log, rs.pid)
        r = redis_benchmark(port, extra, n)
        b1 = bpf_progs()
        m1 = pp.metrics()
        time.sleep(1.2)
        c1 = memstats(pp.log, rs.pid)
        heap = pp.get("/debug/pprof/heap?debug=1").decode(errors="replace")
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(old)
        pp.stop()
    print("\nBreakdown (redis-benchmark %s -n %d, one run, kernel.bpf_stats_enabled=1): "
          "%.0f requests, %.0f req/s" % (" ".join(extra), n, r["n"], r["rps"]))
    ev = m1["podprof_heap_events_total"] - m0["podprof_heap_events_total"]
    cpu = m1["podprof_process_cpu_seconds_total"] - m0["podprof_process_cpu_seconds_total"]
    print("- podprof heap events: %.0f (%.4f per request); podprof process CPU %.3f s "
          "(%.2f us per request)" % (ev, ev / r["n"], cpu, cpu / r["n"] * 1e6))
    print("- allocator calls seen by the heap tracer (memstats, run plus ~1 s): "
          "%d mallocs, %d frees (%.1f + %.1f per request)" %
          (c1[0] - c0[0], c1[1] - c0[1], (c1[0] - c0[0]) / r["n"], (c1[1] - c0[1]) / r["n"]))
    print("\n| BPF program | calls | calls per request | ns per call (BPF run time) "
          "| BPF us per request |")
    print("|---|---|---|---|---|")
    for pid_ in sorted(set(b1) - before):
        name, c1_, t1 = b1[pid_]
        _, c0_, t0 = b0.get(pid_, (name, 0, 0))
        c, t = c1_ - c0_, t1 - t0
        if c:
            print("| %s | %d | %.2f | %.0f | %.3f |" % (name, c, c / r["n"], t / c,
                                                        t / r["n"] / 1e3))
    comments = [x for x in heap.splitlines() if x.startswith("#") and "\t0x" not in x]
    print("\nheap profile (debug=1) comment lines:\n```\n%s\n```" % "\n".join(comments[:20]))


def main():
    configs = [("unprofiled", run_plain),
               ("podprof default (heap + off-CPU)", run_podprof),
               ("podprof default + 99 Hz CPU window (3 s)",
                lambda *a: run_podprof(*a, cpu_window=3))]
    if os.environ.get("HEAP_MODES"):
        # heap.mode compared: the injected agent (the default, auto) against
        # uprobes (not paused: over_budget warn)
        configs = [("unprofiled", run_plain),
                   ("podprof default (heap.mode=auto: injected agent)",
                    lambda *a: run_podprof(*a, settings=["heap.mode=inject"])),
                   ("podprof heap.mode=uprobe",
                    lambda *a: run_podprof(*a, short=True,
                                           settings=["heap.mode=uprobe",
                                                     "heap.over_budget=warn"]))]
    if os.environ.get("PODPROF_SET"):
        # one extra configuration, to find where the time goes: e.g.
        # PODPROF_SET="offcpu.enabled=false heap.mode=inject"
        extra_set = os.environ["PODPROF_SET"].split()
        configs.append(("podprof " + " ".join(extra_set),
                        lambda *a: run_podprof(*a, settings=extra_set)))
    if os.environ.get("ONLY"):
        keep = os.environ["ONLY"].split(",")  # e.g. ONLY=unprofiled,default
        configs = [c for c in configs if any(k in c[0] for k in keep)]
    rs, port = start_redis()
    try:
        print("# %s, nice %d, loadavg before %s, redis-server pid %d port %d, %d repetitions" %
              (machine_line(), NICE, loadavg(), rs.pid, port, reps))
        redis_benchmark(port, ["-P", "16"], 200000)  # warm up, populate keys
        for wname, extra, n_plain, n_prof in (WORKLOADS if reps else []):
            res = {name: [] for name, _ in configs}
            for r in range(reps):
                rep = {}
                for name, fn in rotated(configs, r):
                    rep[name] = fn(rs, port, extra, n_plain, n_prof)
                    print("%s rep %d %-44s %.0f req/s %s" %
                          (wname, r, name, rep[name]["rps"],
                           " ".join("%s=%.4g" % (k, v) for k, v in rep[name].items()
                                    if k in ("events", "prof_cpu", "rss", "warm_cpu",
                                             "redis_cpu"))),
                          file=sys.stderr, flush=True)
                u = rep["unprofiled"]
                for name in rep:
                    x = rep[name]
                    x["ratio"] = x["rps"] / u["rps"]
                    # redis's CPU per request, unprofiled over this one:
                    # the throughput ratio a CPU-bound redis would show
                    x["cpu_ratio"] = ((u["redis_cpu"] / u["n"]) / (x["redis_cpu"] / x["n"])
                                      if x["redis_cpu"] > 0 else 0)
                    res[name].append(x)
            print("\nredis-benchmark -c 50 -d 64 -r 100000 -t %s %s -n %d (unprofiled, agent) / "
                  "%d (uprobe)\n" % (TESTS, " ".join(extra), n_plain, n_prof))
            print("| configuration | req/s (median) | throughput ratio (range) | redis CPU per "
                  "request | redis CPU ratio, unprofiled/this (range) | heap events "
                  "per request | podprof CPU per request | podprof RSS | warm-up CPU "
                  "| samples through the agent's ring |")
            print("|---|---|---|---|---|---|---|---|---|---|")
            for name, _ in configs:
                rr = res[name]
                ratios = [x["ratio"] for x in rr]
                cratios = [x["cpu_ratio"] for x in rr]
                rcpu = "%.2f us" % (median(x["redis_cpu"] / x["n"] for x in rr) * 1e6)
                ev = cpu = rss = warm = share = ""
                shares = [x["ring_share"] for x in rr if x.get("ring_share") is not None]
                if shares:
                    share = "%.1f%%" % (100 * median(shares))
                if any("events" in x for x in rr):
                    ev = "%.3f" % median(x["events"] / x["n"] for x in rr)
                    cpu = "%.2f us" % (median(x["prof_cpu"] / x["n"] for x in rr) * 1e6)
                    rss = "%.1f MiB" % (median(x["rss"] for x in rr) / 1048576)
                    warm = "%.2f s" % median(x["warm_cpu"] for x in rr)
                print("| %s | %.0f | %.4f (%.3f-%.3f) | %s | %.4f (%.3f-%.3f) | %s | %s | %s | %s | %s |" %
                      (name, median(x["rps"] for x in rr), median(ratios), min(ratios),
                       max(ratios), rcpu, median(cratios), min(cratios), max(cratios), ev, cpu,
                       rss, warm, share))
        if not os.environ.get("HEAP_MODES"):
            breakdown(rs, port, WORKLOADS[0][1], WORKLOADS[0][3])
        print("\nloadavg after: %s" % loadavg())
    finally:
        rs.terminate()
        rs.wait()


main()
