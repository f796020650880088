#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What the heap agent costs a process, per malloc+free pair and in RSS:
bench/mallocbench (one thread, malloc(64)+free in a loop, glibc malloc)

  unprofiled   no agent, no podprof
  dormant      LD_PRELOAD=libpodprof-agent.so, no podprof (the agent only
               forwards to glibc)
  preloaded    the same, podprof --pid PID with heap.mode auto (it enables
               the preloaded agent; the run waits for "heap: tracing pid N
               ... (preloaded agent)" and for podprof to go idle)
  injected     no LD_PRELOAD, podprof --pid PID --set heap.mode=inject

all in one invocation, interleaved (the order rotates every repetition), at
the default heap.sample_rate (512 KiB). Each run times ROUNDS loops of PAIRS
pairs in one process and keeps their median; the ratios are against the
unprofiled run of the same repetition. podprof runs with CPU, off-CPU and
thread profiling off (heap only, as run_heap.py); its CPU over the timed
loops (utime+stime from /proc, as a share of one CPU) is shown, since on a
small machine it competes with the target.

RSS: the target's VmRSS (/proc/PID/status) after its timed loops (podprof
still attached where there is one), the Rss of the agent's ring (the
anonymous mapping of exactly the ring's size: 4 MiB at the default rate;
the injected agent's ring is inside its image and not in this column),
and for the podprof runs VmRSS again after podprof stopped and the target
ran one more loop (the preloaded agent gives its ring back on the first
allocation after podprof left); that loop's ns per pair is shown too.

usage: bench/run_preload.py [BUILD_DIR [REPS [PAIRS [ROUNDS]]]]
       (defaults build-bench 5 20000000 3)
"""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (Podprof, loadavg, machine_line, median, prioritize, proc_cpu_seconds,  # noqa: E402
                      proc_rss_bytes, rotated)

NICE = prioritize()

build = sys.argv[1] if len(sys.argv) > 1 else "build-bench"
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
PAIRS = int(sys.argv[3]) if len(sys.argv) > 3 else 20000000
ROUNDS = int(sys.argv[4]) if len(sys.argv) > 4 else 3
PODPROF = os.path.join(build, "cmd/podprof/podprof")
BENCH = os.path.join(build, "bench/mallocbench")
AGENT = os.path.abspath(os.path.join(build, "lib/inject/libpodprof-agent.so"))
RING_BYTES = 4 << 20  # heap.ring_mib 0 at the default rate
COMMON = ["cpu.enabled=false", "offcpu.enabled=false", "threads.enabled=false",
          "log.memstats_interval_seconds=0"]


class Bench:
    def __init__(self, preload):
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        if preload:
            env["LD_PRELOAD"] = AGENT
        self.p = subprocess.Popen([BENCH, "--wait", "--repeat", str(PAIRS), "64"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  env=env)
        self.pid = self.p.pid
        if self.p.stdout.readline().strip() != "ready":
            raise RuntimeError("mallocbench did not start")
        if preload and not self.agent_mapped():
            self.quit()
            raise RuntimeError("libpodprof-agent.so not mapped (LD_PRELOAD=%s)" % AGENT)

    def agent_mapped(self):
        with open("/proc/%d/maps" % self.pid) as f:
            return any("libpodprof-agent" in x for x in f)

    def round(self):
        self.p.stdin.write("go\n")
        self.p.stdin.flush()
        return float(self.p.stdout.readline())

    def rounds(self, n):
        return median(self.round() for _ in range(n))

    def ring_rss(self):
        """Rss of the anonymous mappings of exactly the ring's size, bytes."""
        with open("/proc/%d/smaps" % self.pid) as f:
            text = f.read()
        total = 0
        for block in re.split(r"\n(?=[0-9a-f]+-[0-9a-f]+ )", text):
            head = block.split("\n", 1)[0].split()
            lo, hi = (int(x, 16) for x in head[0].split("-"))
            if hi - lo == RING_BYTES and len(head) < 6:
                total += int(re.search(r"^Rss:\s+(\d+) kB", block, re.M).group(1)) * 1024
        return total

    def quit(self):
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.close()
        except OSError:
            pass
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


def wait_log(pp, pattern, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for x in pp.log:
            if re.search(pattern, x):
                return x.strip()
        if pp.proc.poll() is not None:
            break
        time.sleep(0.05)
    raise RuntimeError("no log line /%s/: %s" % (pattern, " / ".join(
        x.strip() for x in pp.log[-5:])))


def run_plain(preload):
    b = Bench(preload)
    try:
        ns = b.rounds(ROUNDS)
        return {"ns": ns, "rss": proc_rss_bytes(b.pid), "ring": b.ring_rss()}
    finally:
        b.quit()


def run_podprof(mode):
    preload = mode == "auto"
    b = Bench(preload)
    pp = None
    try:
        pp = Podprof(PODPROF, b.pid, COMMON + ["heap.mode=" + mode])
        want = "preloaded agent" if preload else "injected agent"
        wait_log(pp, r"heap: tracing pid %d .*%s" % (b.pid, want))
        pp.wait_warm()
        m0 = pp.metrics()
        c0, t0 = proc_cpu_seconds(pp.pid), time.monotonic()
        ns = b.rounds(ROUNDS)
        c1, t1 = proc_cpu_seconds(pp.pid), time.monotonic()
        r = {"ns": ns, "prof_cpu": (c1 - c0) / (t1 - t0), "rss": proc_rss_bytes(b.pid), "ring": b.ring_rss()}
        time.sleep(0.3)  # podprof's read interval: let it drain the ring
        m1 = pp.metrics()
        pp.stop()
        pp = None
        r["ns_after"] = b.round()
        r["rss_after"] = proc_rss_bytes(b.pid)
        r["ring_after"] = b.ring_rss()
        r["events"] = (m1.get("podprof_heap_events_total", 0) -
                       m0.get("podprof_heap_events_total", 0)) / (ROUNDS * PAIRS)
        return r
    finally:
        if pp is not None:
            pp.stop()
        b.quit()


configs = [("(a) unprofiled", lambda: run_plain(False)),
           ("(b) agent preloaded, dormant (no podprof)", lambda: run_plain(True)),
           ("(c) agent preloaded, enabled by podprof (heap.mode auto)", lambda: run_podprof("auto")),
           ("(d) injected agent (heap.mode=inject, no LD_PRELOAD)", lambda: run_podprof("inject"))]


def main():
    for f in (PODPROF, BENCH, AGENT):
        if not os.path.exists(f):
            sys.exit("missing %s (build it first)" % f)
    res = {name: [] for name, _ in configs}
    errors = {}
    print("# %s, nice %d, loadavg before %s, %d repetitions, %d rounds of %d pairs per run" %
          (machine_line(), NICE, loadavg(), reps, ROUNDS, PAIRS))
    for r in range(reps):
        rep = {}
        for name, fn in rotated(configs, r):
            try:
                rep[name] = fn()
            except RuntimeError as e:
                errors.setdefault(name, str(e))
                print("rep %d %s: %s" % (r, name, e), file=sys.stderr, flush=True)
                continue
            print("rep %d %-58s %s" % (r, name, " ".join("%s=%.4g" % kv
                                                          for kv in rep[name].items())),
                  file=sys.stderr, flush=True)
        base = rep.get(configs[0][0])
        if base is None:
            continue
        for name in rep:
            rep[name]["extra"] = rep[name]["ns"] - base["ns"]
            rep[name]["ratio"] = rep[name]["ns"] / base["ns"]
            res[name].append(rep[name])

    print("loadavg after: %s" % loadavg())
    print()
    print("| configuration | ns per malloc+free (median, range) | extra ns per pair (median, range) "
          "| ratio to (a) (median, range) | heap events per pair | podprof CPU during the loops "
          "(median, max) |")
    print("|---|---|---|---|---|---|")
    for name, _ in configs:
        xs = res[name]
        if not xs:
            print("| %s | failed: %s | | | | |" % (name, errors.get(name, "?").replace("|", "/")))
            continue

        def mr(k, fmt):
            v = [x[k] for x in xs]
            return (fmt + " (" + fmt + " to " + fmt + ")") % (median(v), min(v), max(v))
        ev = cpu = ""
        if "events" in xs[0]:
            ev = "%.5f" % median(x["events"] for x in xs)
            cpu = "%.1f%% (%.1f%%)" % (100 * median(x["prof_cpu"] for x in xs),
                                       100 * max(x["prof_cpu"] for x in xs))
        print("| %s | %s | %s | %s | %s | %s |" % (name, mr("ns", "%.2f"), mr("extra", "%.2f"),
                                                   mr("ratio", "%.3f"), ev, cpu))
    print()
    print("| configuration | target VmRSS after the loops | preloaded agent's ring Rss "
          "(4 MiB mapping) | VmRSS after podprof stopped + one loop | ring Rss then "
          "| ns per pair of that loop |")
    print("|---|---|---|---|---|---|")
    mib = 1048576.0
    for name, _ in configs:
        xs = res[name]
        if not xs:
            continue
        row = ["%.2f MiB (%.2f-%.2f)" % (median(x["rss"] for x in xs) / mib,
                                         min(x["rss"] for x in xs) / mib,
                                         max(x["rss"] for x in xs) / mib),
               "%.2f MiB" % (median(x["ring"] for x in xs) / mib)]
        if "rss_after" in xs[0]:
            row += ["%.2f MiB (%.2f-%.2f)" % (median(x["rss_after"] for x in xs) / mib,
                                              min(x["rss_after"] for x in xs) / mib,
                                              max(x["rss_after"] for x in xs) / mib),
                    "%.2f MiB" % (median(x["ring_after"] for x in xs) / mib),
                    "%.2f" % median(x["ns_after"] for x in xs)]
        else:
            row += ["", "", ""]
        print("| %s | %s |" % (name, " | ".join(row)))


main()
