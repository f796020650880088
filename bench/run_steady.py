#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""podprof's own steady cost while it profiles a busy redis-server with its
default settings (heap.mode auto: the injected agent; off-CPU tracing; CPU
sampling only while a window is open): podprof's CPU seconds (utime + stime
from /proc/PID/stat) per second of wall time and per redis request, its RSS,
and redis's throughput. Robust to the machine's load: CPU per request is
what podprof spends, whatever else runs.

One or more podprof builds are compared in the same invocation,
interleaved, the order rotating each repetition; figures are medians, and
ratios are against the first build.

Each run: start podprof on redis-server, wait until warm, start
redis-benchmark (-P 16 by default, looping), let podprof warm up under the
load for WARM seconds (its CPU then is reported apart: new stacks and their
symbols), then measure for SECONDS; the requests served are redis's
total_commands_processed delta (INFO stats).

usage: bench/run_steady.py SECONDS REPS BUILD_DIR [BUILD_DIR...]
env: PIPELINE=16 (redis-benchmark -P), WARM=4, PERF=1 (perf record -g podprof in
     the last repetition of each build, report to /tmp/podprof-steady-N.txt),
     PODPROF_SET="k=v ..." (extra --set for every build)
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (Podprof, loadavg, machine_line, median, prioritize,  # noqa: E402
                      proc_cpu_seconds, proc_rss_bytes, rotated, start_redis)

NICE = prioritize()
WARM = float(os.environ.get("WARM", "4"))


def commands_processed(port):
    out = subprocess.run(["redis-cli", "-p", str(port), "info", "stats"], capture_output=True,
                         text=True, check=True).stdout
    for line in out.splitlines():
        if line.startswith("total_commands_processed:"):
            return int(line.split(":")[1])
    raise RuntimeError("no total_commands_processed")


def start_load(port, pipeline):
    args = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-c", "50", "-d", "64",
            "-r", "100000", "-t", "set,get,lpush,lpop,hset", "-n", "100000000", "-q",
            "-P", str(pipeline), "-l"]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run(build, rs, port, seconds, pipeline, settings, perf_out=None):
    pp = Podprof(os.path.join(build, "cmd/podprof/podprof"), rs.pid, settings)
    lp = None
    try:
        time.sleep(1.0)
        pp.wait_warm()
        # The first seconds under load are podprof's warm-up: new stacks,
        # their symbols (debug files decompressed once). Reported apart.
        lp = start_load(port, pipeline)
        w0 = proc_cpu_seconds(pp.pid)
        time.sleep(WARM)
        warm = proc_cpu_seconds(pp.pid) - w0
        perf = None
        if perf_out:
            perf = subprocess.Popen(["perf", "record", "-q", "-g", "-F", "999", "-o",
                                     perf_out + ".data", "-p", str(pp.pid)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.3)
        c0 = proc_cpu_seconds(pp.pid)
        n0 = commands_processed(port)
        t0 = time.monotonic()
        time.sleep(seconds)
        cpu = proc_cpu_seconds(pp.pid) - c0
        n = commands_processed(port) - n0
        wall = time.monotonic() - t0
        rss = proc_rss_bytes(pp.pid)
        lp.terminate()
        lp.wait()
        lp = None
        if perf:
            perf.send_signal(2)
            perf.wait()
            with open(perf_out + ".txt", "w") as f:
                subprocess.run(["perf", "report", "-i", perf_out + ".data", "--no-children",
                                "--stdio", "--percent-limit", "1"], stdout=f,
                               stderr=subprocess.DEVNULL)
        idle0 = proc_cpu_seconds(pp.pid)
        time.sleep(3.0)
        idle = (proc_cpu_seconds(pp.pid) - idle0) / 3.0
    finally:
        if lp:
            lp.terminate()
            lp.wait()
        pp.stop()
    return {"cpu_frac": cpu / wall, "us_per_req": cpu / n * 1e6, "rps": n / wall,
            "rss": rss, "idle_frac": idle, "warm": warm}


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    seconds, reps, builds = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    pipeline = int(os.environ.get("PIPELINE", "16"))
    settings = os.environ.get("PODPROF_SET", "").split()
    rs, port = start_redis()
    try:
        print("# %s, nice %d, loadavg before %s, redis -P %d, %g s per run, %d repetitions" %
              (machine_line(), NICE, loadavg(), pipeline, seconds, reps))
        res = {b: [] for b in builds}
        for r in range(reps):
            for i, b in enumerate(rotated(list(builds), r)):
                perf_out = None
                if os.environ.get("PERF") and r == reps - 1:
                    perf_out = "/tmp/podprof-steady-%d" % builds.index(b)
                x = run(b, rs, port, seconds, pipeline, settings, perf_out)
                res[b].append(x)
                print("rep %d %-30s cpu %.4f of a CPU, %.3f us/req, idle %.4f, %.0f req/s, "
                      "RSS %.1f MiB, warm-up %.2f s CPU" %
                      (r, b, x["cpu_frac"], x["us_per_req"], x["idle_frac"], x["rps"],
                       x["rss"] / 1048576, x["warm"]), file=sys.stderr, flush=True)
        base = builds[0]
        print("\n| build | podprof CPU (fraction of one CPU, loaded) | us per request | ratio "
              "| idle CPU after the load | redis req/s | RSS | CPU s in the first %g s of load |"
              % WARM)
        print("|---|---|---|---|---|---|---|---|")
        bu = median(x["us_per_req"] for x in res[base])
        for b in builds:
            xs = res[b]
            u = median(x["us_per_req"] for x in xs)
            print("| %s | %.4f (%.4f-%.4f) | %.3f | %.2f | %.4f | %.0f | %.1f MiB | %.2f |" %
                  (b, median(x["cpu_frac"] for x in xs), min(x["cpu_frac"] for x in xs),
                   max(x["cpu_frac"] for x in xs), u, u / bu, median(x["idle_frac"] for x in xs),
                   median(x["rps"] for x in xs), median(x["rss"] for x in xs) / 1048576,
                   median(x["warm"] for x in xs)))
        print("\nloadavg after: %s" % loadavg())
    finally:
        rs.terminate()
        rs.wait()


main()
