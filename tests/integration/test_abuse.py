#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""HTTP under load and abuse: slow clients, idle half-open connections,
thousands of bad requests and oversized headers and bodies. The server
answers within its timeouts and valid requests keep succeeding."""
import os
import socket
import time

from harness import Podprof, Workload, check, held_kb, rss_kb, run, sanitized

DEMO = os.environ.get("WL_DEMO")


def start(*extra):
    wl = Workload([DEMO])
    pp = Podprof("--pid", str(wl.pid), "--set", "http.max_connections=16",
                 "--set", "http.timeout_seconds=2", "--set", "heap.enabled=false", *extra)
    return wl, pp


def test_idle_and_slow_connections():
    wl, pp = start()
    idle = []
    for _ in range(16):
        s = socket.create_connection(("127.0.0.1", pp.port))
        s.sendall(b"GET /debug/pprof/heap HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")  # never finished
        idle.append(s)
    # The slots are full now; within the idle timeout they are reclaimed.
    deadline = time.time() + 8
    ok = False
    while time.time() < deadline and not ok:
        try:
            st, _, _ = pp.request("/healthz", timeout=3)
            ok = st == 200
        except OSError:
            time.sleep(0.3)
    check(ok, "no request succeeded within 8 s while 16 slow clients held the server")
    for s in idle:
        s.close()
    m = pp.metrics()
    check(m.get("podprof_http_connections_rejected_total", 0) >= 0, "metrics missing")
    pp.stop()


def test_many_bad_requests():
    wl, pp = start()
    bad = ["/debug/pprof/nope", "/debug/pprof/heap?seconds=-1", "/debug/pprof/heap?seconds=1&debug=1",
           "/debug/pprof/profile?seconds=99999", "/x" * 300, "/debug/pprof/symbol?0xzz+%%%",
           "/debug/pprof/heap?debug=abc&gc=1&seconds=abc"]
    codes = {}

    def flood(n):
        for i in range(n):
            path = bad[i % len(bad)]
            st, _, _ = pp.request(path, timeout=10)
            codes[st] = codes.get(st, 0) + 1

    # The first flood warms what a cold podprof loads once (symbols for the
    # valid heap request in the list, allocator arenas of the server
    # threads); the second, identical one may grow RSS only by what podprof
    # reports it holds, plus a fixed slack for the allocator.
    flood(700)
    rss0, held0 = rss_kb(pp.p.pid), held_kb(pp.metrics())
    flood(2000)
    rss1, held1 = rss_kb(pp.p.pid), held_kb(pp.metrics())
    check(set(codes) <= {200, 400, 404}, "unexpected statuses %s" % codes)
    st, _, _ = pp.request("/debug/pprof/goroutine")
    check(st == 200, "valid request after the flood: %d" % st)
    allowed = 8 * 1024 + max(0, held1 - held0)
    if not sanitized():
        check(rss1 - rss0 <= allowed,
              "RSS grew %d kB over 2000 bad requests after a warm-up; data held grew %d kB "
              "(allowance %d kB)" % (rss1 - rss0, held1 - held0, allowed))
    pp.stop()


def test_oversized():
    wl, pp = start()
    s = socket.create_connection(("127.0.0.1", pp.port), timeout=10)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 200000 + b"\r\n\r\n")
    try:
        data = s.recv(200)
    except OSError:
        data = b""
    s.close()
    check(not data or data.split(b" ")[1] in (b"400", b"413", b"431"), "oversized header got %r" % data[:60])
    st, _, _ = pp.request("/debug/pprof/symbol", method="POST", body=b"0x1+" * 100000)
    check(st == 413, "oversized POST body: %d" % st)
    st, _, _ = pp.request("/healthz")
    check(st == 200, "healthz after abuse: %d" % st)
    pp.stop()


if __name__ == "__main__":
    run([test_idle_and_slow_connections, test_many_bad_requests, test_oversized])
