#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What the injected heap agent misses, measured: allocator calls the agent
counted against calls a uprobe on the real allocator counted, over the same
window, in one redis-server (Debian's, jemalloc) under redis-benchmark.

First target: bench/covbench, a known mix (per iteration one malloc
through the executable's GOT, one strdup whose malloc goes through libc's
own GOT slot, one call through a pointer to malloc read before the
redirection, three frees through the GOT), 20000 iterations per window:
the expected coverage is 2/3 of the allocations and every free, which shows
the method sees what the agent misses.

Two podprofs attach to the same process: one with heap.mode=inject
(the agent counts every call made through a redirected GOT slot), one with
heap.mode=uprobe (BPF counts every hit of the allocator's entry points,
which includes the agent's forwarded calls, calls inside the allocator's
own module that go through its exported entry points, and calls through
function pointers taken before the redirection). Both report
podprof_heap_calls_total{pid,kind}; coverage = agent / uprobe for each
kind. The uprobe podprof slows redis down a lot: throughput here means
nothing, only the two counts of the same calls.

usage: bench/run_coverage.py [BUILD_DIR [REPS]]   (defaults build-bench 2)
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (Podprof, loadavg, machine_line, median, prioritize,  # noqa: E402
                      start_redis)

NICE = prioritize()
build = sys.argv[1] if len(sys.argv) > 1 else "build-bench"
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 2
PODPROF = os.path.join(build, "cmd/podprof/podprof")


def calls(pp, pid):
    out = {}
    for k, v in pp.metrics().items():
        m = re.match(r'podprof_heap_calls_total\{pid="%d",kind="(\w+)"\}' % pid, k)
        if m:
            out[m.group(1)] = v
    return out


def measure(pid, load):
    """(agent, uprobe) call counts per kind over one run of load()."""
    agent = Podprof(PODPROF, pid, ["heap.mode=inject", "offcpu.enabled=false"])
    probe = None
    try:
        comments = agent.get("/debug/pprof/heap?debug=1").decode(errors="replace")
        cov = [x for x in comments.splitlines() if "slots in" in x]
        probe = Podprof(PODPROF, pid, ["heap.mode=uprobe", "heap.over_budget=warn",
                                       "offcpu.enabled=false"])
        agent.wait_warm()
        # both counters read twice, in opposite order, so the window of the
        # two is the same up to the calls made while one /metrics is served
        a0, u0 = calls(agent, pid), calls(probe, pid)
        load()
        u1, a1 = calls(probe, pid), calls(agent, pid)
    finally:
        if probe:
            probe.stop()
        agent.stop()
    return {k: (a1.get(k, 0) - a0.get(k, 0), u1.get(k, 0) - u0.get(k, 0))
            for k in ("alloc", "free")}, cov


def table(title, res):
    print("\n%s\n" % title)
    print("| calls | agent (median) | uprobe (median) | coverage agent/uprobe (range) |")
    print("|---|---|---|---|")
    for k, v in res.items():
        cv = [a / u for a, u in v if u]
        print("| %s | %.0f | %.0f | %.4f (%.4f-%.4f) |" %
              (k, median(a for a, _ in v), median(u for _, u in v), median(cv),
               min(cv, default=float("nan")), max(cv, default=float("nan"))))


def covbench(reps):
    res = {"alloc": [], "free": []}
    wl = subprocess.Popen([os.path.join(build, "bench/covbench")], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True)

    def run_iterations():
        wl.stdin.write("20000\n")
        wl.stdin.flush()
        assert wl.stdout.readline().strip() == "done"

    try:
        assert wl.stdout.readline().strip() == "ready"
        for r in range(reps):
            m, _ = measure(wl.pid, run_iterations)
            for k, (a, u) in m.items():
                res[k].append((a, u))
                print("covbench rep %d %-5s agent %d uprobe %d coverage %.4f" %
                      (r, k, a, u, a / u if u else float("nan")), file=sys.stderr)
    finally:
        wl.kill()
        wl.wait()
    table("bench/covbench, 20000 iterations (expected: alloc 2/3, free 1)", res)


def main():
    print("# %s, nice %d, loadavg before %s, %d repetitions" %
          (machine_line(), NICE, loadavg(), reps))
    covbench(reps)
    rs, port = start_redis()
    res = {"alloc": [], "free": []}
    try:
        subprocess.run(["redis-benchmark", "-p", str(port), "-q", "-P", "16", "-n", "100000",
                        "-t", "set"], capture_output=True, check=True)
        cov = []
        for r in range(reps):
            m, cov = measure(rs.pid, lambda: subprocess.run(
                ["redis-benchmark", "-p", str(port), "-q", "-c", "20", "-d", "64", "-r",
                 "100000", "-t", "set,get,lpush,lpop,hset", "-P", "16", "-n", "20000"],
                capture_output=True, check=True))
            for k, (da, du) in m.items():
                res[k].append((da, du))
                print("redis rep %d %-5s agent %d uprobe %d coverage %.4f" %
                      (r, k, da, du, da / du if du else float("nan")), file=sys.stderr)
        table("redis-server, redis-benchmark -c 20 -d 64 -r 100000 -t "
              "set,get,lpush,lpop,hset -P 16 -n 20000", res)
        if cov:
            print("\nagent heap profile comments (slots per module):\n```\n%s\n```" %
                  "\n".join(cov[:4]))
        print("\nloadavg after: %s" % loadavg())
    finally:
        rs.terminate()
        rs.wait()


main()
