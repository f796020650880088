#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Symbolization in podprof (symbolizer.isolate=false) against the isolated
helper (true, the default): a fresh podprof attached to `sleep` is asked,
through POST /debug/pprof/symbol, for N addresses spread over libc's text
(every 97 bytes). "cold" is the first request (libc and its debug file
loaded: the helper gets the fds from podprof), "warm" the median of the
next ones (every address still resolved again: /symbol does not use the
store's names, so each address is one request to the symbolizer, one
round trip to the helper when isolated). Both modes alternate within each
repetition (both podprofs run side by side, their requests interleaved);
reports medians and isolated/in-process ratios, and the RSS of podprof
plus its helper after the requests.

usage: bench/run_symbolize.py [BUILD_DIR [REPS]]   (default build-bench, 3)
"""
import os
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (Podprof, loadavg, machine_line, median, prioritize,  # noqa: E402
                      proc_rss_bytes, rotated)

prioritize(0)
N = 3000
WARM = 8
MODES = ["false", "true"]


def libc_text(pid):
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            p = line.split()
            if len(p) >= 6 and "r-x" in p[1] and "/libc.so" in p[5]:
                lo, hi = (int(x, 16) for x in p[0].split("-"))
                return lo, hi
    raise RuntimeError("no libc text in %d" % pid)


def children(pid):
    out = []
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def rss_mib(pids):
    return sum(proc_rss_bytes(p) for p in pids) / (1 << 20)


def post(port, body):
    t0 = time.monotonic()
    req = urllib.request.Request("http://127.0.0.1:%d/debug/pprof/symbol" % port,
                                 data=body, method="POST")
    with urllib.request.urlopen(req, timeout=300) as r:
        data = r.read()
    return time.monotonic() - t0, data.count(b"\n") - 1


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build-bench"
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    binary = os.path.join(build, "cmd/podprof/podprof")
    wl = subprocess.Popen(["sleep", "3600"])
    try:
        time.sleep(0.2)
        lo, hi = libc_text(wl.pid)
        step = max(97, (hi - lo) // N)
        addrs = ["0x%x" % a for a in range(lo, hi, step)][:N]
        body = "+".join(addrs).encode()
        res = {m: {"cold": [], "warm": [], "named": [], "rss": [], "hrss": []} for m in MODES}
        print("# %s; load %s; %d addresses over libc's text, %d warm requests" %
              (machine_line(), loadavg(), len(addrs), WARM))
        for r in range(reps):
            # both podprofs run at once; their requests alternate, so the
            # machine's load drifts alike for both
            pps = {}
            try:
                for mode in MODES:
                    pps[mode] = Podprof(binary, wl.pid,
                                        ["symbolizer.isolate=" + mode, "cpu.enabled=false",
                                         "heap.enabled=false", "offcpu.enabled=false"])
                for mode in MODES:
                    pps[mode].wait_warm()
                warm = {m: [] for m in MODES}
                for mode in rotated(MODES, r):
                    cold, named = post(pps[mode].port, body)
                    res[mode]["cold"].append(cold)
                    res[mode]["named"].append(named)
                for i in range(WARM):
                    for mode in rotated(MODES, r + i):
                        warm[mode].append(post(pps[mode].port, body)[0])
                for mode in MODES:
                    kids = children(pps[mode].pid)
                    res[mode]["warm"].append(median(warm[mode]))
                    res[mode]["rss"].append(rss_mib([pps[mode].pid] + kids))
                    res[mode]["hrss"].append(rss_mib(kids))
                    print("rep %d isolate=%s: cold %.1f ms, warm %.2f us/address, %d named, "
                          "RSS %.1f MiB (helper %.1f)" %
                          (r, mode, res[mode]["cold"][-1] * 1e3,
                           res[mode]["warm"][-1] / len(addrs) * 1e6, res[mode]["named"][-1],
                           res[mode]["rss"][-1], res[mode]["hrss"][-1]), flush=True)
            finally:
                for pp in pps.values():
                    pp.stop()
        print("\n| isolate | cold request (ms) | warm, us per address | addresses named | "
              "RSS podprof + helper (MiB) | of which helper |")
        print("|---|---|---|---|---|---|")
        for m in MODES:
            print("| %s | %.1f | %.2f | %d | %.1f | %.1f |" % (
                m, median(res[m]["cold"]) * 1e3, median(res[m]["warm"]) / len(addrs) * 1e6,
                median(res[m]["named"]), median(res[m]["rss"]), median(res[m]["hrss"])))
        print("\nisolated / in-process: cold %.2f, warm %.2f (medians)" %
              (median(res["true"]["cold"]) / median(res["false"]["cold"]),
               median(res["true"]["warm"]) / median(res["false"]["warm"])))
    finally:
        wl.kill()
        wl.wait()


if __name__ == "__main__":
    main()
