#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Soak: podprof profiles busy, allocating, thread- and library-churning
targets for a few minutes (PODPROF_SOAK_SECONDS, default 150) while every
endpoint is scraped the way Parca and Alloy do. Its RSS must level off
after the warm-up (caches fill, then stay bounded) and it must keep
answering. Longer runs: bench/run_soak.py."""
import os
import time

from harness import Podprof, Workload, check, log, run

DEMO = os.environ.get("WL_DEMO")
DLCHURN = os.environ.get("WL_DLCHURN")
CHURNLIB = os.environ.get("WL_CHURNLIB")
SECONDS = int(os.environ.get("PODPROF_SOAK_SECONDS", "150"))


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_soak():
    demo = Workload([DEMO])
    churn = Workload([DLCHURN, CHURNLIB])
    pp = Podprof("--pid", str(demo.pid), "--pid", str(churn.pid),
                 "--set", "cpu.always_on=true", "--set", "cpu.frequency_hz=199",
                 "--set", "heap.sample_rate=65536", "--set", "log.memstats_interval_seconds=10")
    t0 = time.time()
    samples = []
    n = 0
    while time.time() - t0 < SECONDS:
        for path in ("/debug/pprof/profile?seconds=1", "/debug/pprof/allocs", "/debug/pprof/heap",
                     "/debug/pprof/goroutine", "/debug/pprof/block", "/debug/pprof/mutex",
                     "/debug/pprof/threadcreate"):
            pp.profile(path, timeout=30)
            n += 1
        st, _, _ = pp.request("/metrics")
        check(st == 200, "/metrics %d" % st)
        samples.append((time.time() - t0, rss_kb(pp.p.pid)))
    check(pp.alive(), "podprof died")
    log("soak: %d profiles in %.0f s; RSS (s, kB): %s" % (n, time.time() - t0, samples[::max(1, len(samples) // 12)]))
    warm = [r for t, r in samples if t >= SECONDS / 3]
    growth = warm[-1] - warm[0]
    check(growth < 12 * 1024, "RSS still growing after warm-up: %d kB -> %d kB" % (warm[0], warm[-1]))
    m = pp.metrics()
    check(m["podprof_store_stacks"] < 200000, "stacks unbounded")
    pp.stop()


if __name__ == "__main__":
    run([test_soak])
