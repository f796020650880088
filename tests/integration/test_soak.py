#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Soak: podprof profiles busy, allocating, thread- and library-churning
targets for a minute (PP_TEST_SOAK_SECONDS, default 60) while every
endpoint is scraped the way Parca and Alloy do. Its RSS must level off
after the warm-up (caches fill, then stay bounded) and it must keep
answering. Longer runs: bench/run_soak.py."""
import os
import time

from harness import Podprof, Workload, check, held_kb, log, rss_kb, run, sanitized

DEMO = os.environ.get("WL_DEMO")
DLCHURN = os.environ.get("WL_DLCHURN")
CHURNLIB = os.environ.get("WL_CHURNLIB")
SECONDS = int(os.environ.get("PP_TEST_SOAK_SECONDS", "60"))


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
                        m.get("podprof_symbol_cache_bytes", 0) / 1024, held_kb(m)))
    check(pp.alive(), "podprof died")
    log("soak: %d profiles in %.0f s; (s, RSS kB, stacks, locations, live, symbols kB, held kB): %s" %
        (n, time.time() - t0, [tuple(int(x) for x in s) for s in samples[::max(1, len(samples) // 12)]]))
    # After the warm-up (caches loaded), RSS may only grow with what podprof
    # holds on purpose (harness.held_kb: stacks and locations, as the
    # dlopen'ed library lands at new addresses each time, the demo's
    # deliberately leaked objects, the symbol cache) plus 16 MiB of slack
    # for the worker threads' allocator arenas. This catches leaks per
    # request or per sample; exact leak checks are the LeakSanitizer runs of
    # the ASan build.
    w = [s for s in samples if s[0] >= SECONDS / 3]
    t_a, rss_a, st_a, loc_a, live_a, sym_a, held_a = w[0]
    t_b, rss_b, st_b, loc_b, live_b, sym_b, held_b = w[-1]
    allowed = 16 * 1024 + max(0, held_b - held_a)
    check(sanitized() or rss_b - rss_a <= allowed,
          "RSS grew %d kB from %.0f s to %.0f s; the data held grew by %d stacks, %d locations, "
          "%d live allocations, %d kB of symbols (allowance %d kB)" %
          (rss_b - rss_a, t_a, t_b, st_b - st_a, loc_b - loc_a, live_b - live_a, sym_b - sym_a, allowed))
    m = pp.metrics()
    check(m["podprof_store_stacks"] < 200000, "stacks unbounded")
    pp.stop()


if __name__ == "__main__":
    run([test_soak])
