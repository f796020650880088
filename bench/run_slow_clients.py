#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Slow-client flood: what 1000 connections that trickle their headers plus
100 open 60 s CPU windows cost podprof, and how fast it answers valid
requests meanwhile. For each build given (the first is the one measured,
others e.g. an older podprof for comparison), each repetition measures
"idle" (no flood) and "flood" back to back on a fresh podprof attached to a
`sleep` process: the latency of 10 rounds of /healthz, /metrics and
/debug/pprof/goroutine?debug=1 (valid requests from 127.0.0.1; the flood
comes from 127.0.1.0/24 and 127.0.2.0/24, so no per-address limit
applies), how many were refused (no answer, or not 200), podprof's RSS and
thread count. Reports medians and flood/idle ratios of the same repetition.

usage: bench/run_slow_clients.py [BUILD_DIR [OTHER_BUILD_DIR ...]]   (default build-bench)
"""
import http.client
import os
import resource
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import Podprof, machine_line, median, prioritize, proc_rss_bytes  # noqa: E402

prioritize(0)
REPS = 3
SLOW = 1000
WINDOWS = 100
PATHS = ["/healthz", "/metrics", "/debug/pprof/goroutine?debug=1"]


def request(port, path):
    t0 = time.monotonic()
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", path)
        r = c.getresponse()
        r.read()
        c.close()
        ok = r.status == 200
    except OSError:
        ok = False
    return time.monotonic() - t0, ok


def measure(pp):
    lat, refused = [], 0
    for _ in range(10):
        for p in PATHS:
            dt, ok = request(pp.port, p)
            lat.append(dt)
            refused += not ok
        time.sleep(0.05)
    return {"latency": median(lat), "max": max(lat), "refused": refused,
            "rss": proc_rss_bytes(pp.pid) / 1048576,
            "threads": len(os.listdir("/proc/%d/task" % pp.pid))}


def flood(port):
    socks = []
    for i in range(SLOW + WINDOWS):
        s = socket.socket()
        s.bind(("127.0.%d.%d" % (1 + i // 250, 1 + i % 250), 0))
        try:
            s.connect(("127.0.0.1", port))
            if i < WINDOWS:
                s.sendall(b"GET /debug/pprof/profile?seconds=60 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            else:
                s.sendall(b"GET /debug/pprof/heap HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: a")
        except OSError:
            pass
        socks.append(s)
    stop = threading.Event()

    def trickle():
        while not stop.wait(1.0):
            for s in socks[WINDOWS:]:
                try:
                    s.send(b"a")
                except OSError:
                    pass
    t = threading.Thread(target=trickle, daemon=True)
    t.start()
    return socks, stop, t


def one(binary, target):
    pp = Podprof(binary, target, ["heap.enabled=false", "offcpu.enabled=false"])
    try:
        request(pp.port, "/debug/pprof/goroutine")  # warm the symbols
        idle = measure(pp)
        socks, stop, t = flood(pp.port)
        time.sleep(1.0)
        fl = measure(pp)
        stop.set()
        t.join()
        for s in socks:
            s.close()
    finally:
        pp.stop()
    return idle, fl


def main():
    builds = sys.argv[1:] or ["build-bench"]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    print(machine_line())
    target = subprocess.Popen(["sleep", "3600"])
    try:
        for b in builds:
            binary = os.path.join(b, "cmd/podprof/podprof")
            rows = [one(binary, target.pid) for _ in range(REPS)]
            print("%s: %d slow-header connections + %d open 60 s CPU windows, %d reps" %
                  (b, SLOW, WINDOWS, REPS))
            for name, k in (("idle", 0), ("flood", 1)):
                print("  %-5s latency median %.4f s (max %.3f s), refused %d of %d, "
                      "RSS %.1f MiB, threads %d" %
                      (name, median(r[k]["latency"] for r in rows),
                       max(r[k]["max"] for r in rows), sum(r[k]["refused"] for r in rows),
                       REPS * 10 * len(PATHS), median(r[k]["rss"] for r in rows),
                       median(r[k]["threads"] for r in rows)))
            print("  flood/idle: latency x%.2f, RSS x%.2f" %
                  (median(r[1]["latency"] / r[0]["latency"] for r in rows),
                   median(r[1]["rss"] / r[0]["rss"] for r in rows)))
    finally:
        target.kill()
        target.wait()


if __name__ == "__main__":
    main()
