#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""RSS soak: podprof (default settings) attached to a redis-server kept busy
by a redis-benchmark loop (-P 16, random keys), for DURATION seconds. Every
10 s: podprof's RSS (VmRSS, which counts the double-mapped BPF ring buffers
twice), its CPU, the symbol cache and store sizes from /metrics. Like a
scraper would, it fetches /debug/pprof/heap every 30 s and a 10 s
/debug/pprof/profile every 60 s. Prints the samples and start/end/max RSS.

usage: bench/run_soak.py [BUILD_DIR [DURATION_SECONDS]]   (defaults build-bench 240)
"""
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (Podprof, free_port, loadavg, machine_line, prioritize,  # noqa: E402
                      proc_rss_bytes)

prioritize(0)

build = sys.argv[1] if len(sys.argv) > 1 else "build-bench"
duration = int(sys.argv[2]) if len(sys.argv) > 2 else 240
PODPROF = os.path.join(build, "cmd/podprof/podprof")


def main():
    port = free_port()
    rs = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                           "--save", "", "--appendonly", "no", "--logfile", ""],
                          stdout=subprocess.DEVNULL)
    stop = threading.Event()
    load = None
    pp = None
    try:
        for _ in range(100):
            r = subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True,
                               text=True)
            if r.stdout.strip() == "PONG":
                break
            time.sleep(0.05)
        pp = Podprof(PODPROF, rs.pid, [])
        print("# %s, loadavg before %s, %d s, redis-server pid %d, podprof pid %d" %
              (machine_line(), loadavg(), duration, rs.pid, pp.pid))

        def loop():
            while not stop.is_set():
                subprocess.run(["redis-benchmark", "-p", str(port), "-c", "20", "-P", "16",
                                "-d", "64", "-r", "1000000", "-n", "200000", "-q",
                                "-t", "set,get,lpush,lpop,hset"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        load = threading.Thread(target=loop, daemon=True)
        load.start()

        def scraper():
            t0 = time.monotonic()
            n = 0
            while not stop.wait(1.0):
                el = time.monotonic() - t0
                if el >= 30 * (n + 1):
                    n += 1
                    pp.get("/debug/pprof/heap")
                    if n % 2 == 0:
                        pp.get("/debug/pprof/profile?seconds=10")
        sc = threading.Thread(target=scraper, daemon=True)
        sc.start()

        print("\n| t (s) | podprof RSS (MiB) | podprof CPU (s) | symbol cache (MiB) | store stacks "
              "| live allocations | heap events | redis RSS (MiB) |")
        print("|---|---|---|---|---|---|---|---|")
        rows = []
        t0 = time.monotonic()
        while True:
            m = pp.metrics()
            el = time.monotonic() - t0
            rss = proc_rss_bytes(pp.pid)
            rows.append(rss)
            print("| %.0f | %.1f | %.2f | %.1f | %.0f | %.0f | %.0f | %.1f |" %
                  (el, rss / 1048576, m.get("podprof_process_cpu_seconds_total", 0),
                   m.get("podprof_symbol_cache_bytes", 0) / 1048576,
                   m.get("podprof_store_stacks", 0), m.get("podprof_store_live_allocations", 0),
                   m.get("podprof_heap_events_total", 0), proc_rss_bytes(rs.pid) / 1048576),
                  flush=True)
            if el >= duration:
                break
            time.sleep(10 - (time.monotonic() - t0) % 10)
        print("\nRSS start %.1f MiB, end %.1f MiB, max %.1f MiB; loadavg after %s" %
              (rows[0] / 1048576, rows[-1] / 1048576, max(rows) / 1048576, loadavg()))
    finally:
        stop.set()
        if pp:
            pp.stop()
        rs.terminate()
        rs.wait()
        if load:
            load.join(timeout=60)


main()
