#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Soak: podprof profiles busy, allocating, thread- and library-churning
targets for a few minutes (PP_TEST_SOAK_SECONDS, default 150) while every
endpoint is scraped the way Parca and Alloy do. Its RSS must level off
after the warm-up (caches fill, then stay bounded) and it must keep
answering. Longer runs: bench/run_soak.py."""
import os
import time

from harness import Podprof, Workload, check, log, run, sanitized

DEMO = os.environ.get("WL_DEMO")
DLCHURN = os.environ.get("WL_DLCHURN")
CHURNLIB = os.environ.get("WL_CHURNLIB")
SECONDS = int(os.environ.get("PP_TEST_SOAK_SECONDS", "150"))


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
        m = pp.metrics()
        samples.append((time.time() - t0, rss_kb(pp.p.pid), m["podprof_store_stacks"],
                        m["podprof_store_locations"], m["podprof_store_live_allocations"],
                        m.get("podprof_symbol_cache_bytes", 0) / 1024))
    check(pp.alive(), "podprof died")
    log("soak: %d profiles in %.0f s; (s, RSS kB, stacks, locations, live): %s" %
        (n, time.time() - t0, [tuple(int(x) for x in s) for s in samples[::max(1, len(samples) // 12)]]))
    # After the warm-up (caches loaded), RSS may only grow with what podprof
    # holds on purpose: stacks and locations (the dlopen'ed library lands at
    # new addresses each time) and the demo's deliberately leaked objects.
    # Anything beyond a generous per-item allowance is a leak.
    w = [s for s in samples if s[0] >= SECONDS / 3]
    t_a, rss_a, st_a, loc_a, live_a, sym_a = w[0]
    t_b, rss_b, st_b, loc_b, live_b, sym_b = w[-1]
    # Per item: a stack with its frames and labels, a location with its
    # symbolized strings, a live entry; plus the symbol cache's own growth
    # and 16 MiB for allocator slack (arenas of the worker threads). This
    # catches leaks per request or per sample; exact leak checks are the
    # LeakSanitizer runs of the ASan build.
    allowed = 16 * 1024 + 4 * (st_b - st_a) + 1 * (loc_b - loc_a) + 0.25 * abs(live_b - live_a) \
        + max(0, sym_b - sym_a)
    check(sanitized() or rss_b - rss_a <= allowed,
          "RSS grew %d kB from %.0f s to %.0f s; the data held grew by %d stacks, %d locations, "
          "%d live allocations, %d kB of symbols (allowance %d kB)" %
          (rss_b - rss_a, t_a, t_b, st_b - st_a, loc_b - loc_a, live_b - live_a, sym_b - sym_a, allowed))
    m = pp.metrics()
    check(m["podprof_store_stacks"] < 200000, "stacks unbounded")
    pp.stop()


if __name__ == "__main__":
    run([test_soak])
