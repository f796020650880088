#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What the injected heap agent misses, measured: allocator calls the agent
counted against calls a uprobe on the real allocator counted, over the same
window, in one redis-server (Debian's, jemalloc) under redis-benchmark.

Two podprofs attach to the same redis-server: one with heap.mode=inject
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
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import Podprof, free_port, loadavg, machine_line, median, prioritize  # noqa: E402

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


def start_redis():
    port = free_port()
    p = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                          "--save", "", "--appendonly", "no", "--daemonize", "no",
                          "--logfile", ""], stdout=subprocess.DEVNULL)
    for _ in range(100):
        r = subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True)
        if r.stdout.strip() == "PONG":
            return p, port
        time.sleep(0.05)
    p.kill()
    raise RuntimeError("redis-server did not start")


def main():
    rs, port = start_redis()
    res = {"alloc": [], "free": []}
    try:
        print("# %s, nice %d, loadavg before %s, redis-server pid %d, %d repetitions" %
              (machine_line(), NICE, loadavg(), rs.pid, reps))
        subprocess.run(["redis-benchmark", "-p", str(port), "-q", "-P", "16", "-n", "100000",
                        "-t", "set"], capture_output=True, check=True)
        for r in range(reps):
            agent = Podprof(PODPROF, rs.pid, ["heap.mode=inject", "offcpu.enabled=false"])
            probe = None
            try:
                comments = agent.get("/debug/pprof/heap?debug=1").decode(errors="replace")
                cov = [x for x in comments.splitlines() if "coverage" in x or "slots" in x]
                probe = Podprof(PODPROF, rs.pid, ["heap.mode=uprobe", "heap.over_budget=warn",
                                                  "offcpu.enabled=false"])
                agent.wait_warm()
                a0, u0 = calls(agent, rs.pid), calls(probe, rs.pid)
                subprocess.run(["redis-benchmark", "-p", str(port), "-q", "-c", "20", "-d", "64",
                                "-r", "100000", "-t", "set,get,lpush,lpop,hset", "-P", "16",
                                "-n", "20000"], capture_output=True, check=True)
                a1, u1 = calls(agent, rs.pid), calls(probe, rs.pid)
            finally:
                if probe:
                    probe.stop()
                agent.stop()
            for k in res:
                da, du = a1.get(k, 0) - a0.get(k, 0), u1.get(k, 0) - u0.get(k, 0)
                res[k].append((da, du))
                print("rep %d %-5s agent %d uprobe %d coverage %.4f" %
                      (r, k, da, du, da / du if du else float("nan")), file=sys.stderr)
        print("\nredis-benchmark -c 20 -d 64 -r 100000 -t set,get,lpush,lpop,hset -P 16 "
              "-n 20000, one podprof heap.mode=inject and one heap.mode=uprobe on the same "
              "redis-server\n")
        print("| calls | agent (median) | uprobe (median) | coverage agent/uprobe (range) |")
        print("|---|---|---|---|")
        for k, v in res.items():
            cv = [a / u for a, u in v if u]
            print("| %s | %.0f | %.0f | %.4f (%.4f-%.4f) |" %
                  (k, median(a for a, _ in v), median(u for _, u in v), median(cv),
                   min(cv, default=float("nan")), max(cv, default=float("nan"))))
        if cov:
            print("\nagent heap profile comments (slots per module):\n```\n%s\n```" %
                  "\n".join(cov[:4]))
        print("\nloadavg after: %s" % loadavg())
    finally:
        rs.terminate()
        rs.wait()


main()
