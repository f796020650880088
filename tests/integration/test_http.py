#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The HTTP surface of PPROF-COMPAT.md against a real podprof on a real
workload: every endpoint, header and error message a client relies on, and
every profile name answering with a valid profile that go tool pprof reads."""
import os
import socket
import time

from harness import (Podprof, Workload, check, decode, go_pprof, profile_until, run, wait_for,
                     write_tmp)

DEMO = os.environ.get("WL_DEMO")
KINDS = ["heap", "allocs", "goroutine", "threadcreate", "block", "mutex"]


def start():
    wl = Workload([DEMO])
    pp = Podprof("--pid", str(wl.pid), "--set", "cpu.frequency_hz=199")
    return wl, pp


def error_checks(pp, path, status, message):
    st, hdr, body = pp.request(path)
    check(st == status, "%s: status %d, want %d (%r)" % (path, st, status, body[:200]))
    check(hdr.get("content-type") == "text/plain; charset=utf-8", "%s: content-type %r" % (path, hdr.get("content-type")))
    check(hdr.get("x-go-pprof") == "1", "%s: X-Go-Pprof missing" % path)
    check("content-disposition" not in hdr, "%s: error with Content-Disposition" % path)
    check(body == (message + "\n").encode(), "%s: body %r, want %r" % (path, body, message))


def test_surface():
    wl, pp = start()
    st, hdr, _ = pp.request("/debug/pprof")
    check(st == 301 and hdr.get("location") == "/debug/pprof/", "redirect: %d %s" % (st, hdr.get("location")))
    st, hdr, body = pp.request("/debug/pprof/")
    check(st == 200 and hdr["content-type"].startswith("text/html"), "index %d %s" % (st, hdr.get("content-type")))
    page = body.decode()
    for name in ["allocs", "block", "cmdline", "goroutine", "heap", "mutex", "profile", "threadcreate"]:
        check(name + "?debug=1" in page, "index lacks %s" % name)
    st, hdr, body = pp.request("/debug/pprof/cmdline")
    check(st == 200 and body == DEMO.encode(), "cmdline %d %r" % (st, body))
    check(hdr["content-type"] == "text/plain; charset=utf-8", "cmdline content-type")
    error_checks(pp, "/debug/pprof/nonesuch", 404, "Unknown profile")
    error_checks(pp, "/debug/pprof/heap?seconds=abc", 400, 'invalid value for "seconds" - must be a positive integer')
    error_checks(pp, "/debug/pprof/heap?seconds=0", 400, 'invalid value for "seconds" - must be a positive integer')
    error_checks(pp, "/debug/pprof/heap?seconds=100000", 400, "profile duration exceeds server's WriteTimeout")
    error_checks(pp, "/debug/pprof/heap?seconds=1&debug=1", 400, "seconds and debug params are incompatible")
    error_checks(pp, "/debug/pprof/profile?seconds=100000", 400, "profile duration exceeds server's WriteTimeout")
    st, _, body = pp.request("/healthz")
    check(st == 200, "healthz %d" % st)
    m = pp.metrics()
    for k in ["podprof_uptime_seconds", "podprof_targets", "podprof_process_resident_memory_bytes",
              "podprof_process_cpu_seconds_total"]:
        check(k in m, "metric %s missing" % k)
    check(m["podprof_targets"] >= 1, "no target in metrics")
    pp.stop()


def test_every_profile_decodes():
    wl, pp = start()
    time.sleep(2)
    for kind in KINDS:
        prof = pp.profile("/debug/pprof/" + kind)
        st, hdr, _ = pp.request("/debug/pprof/" + kind)
        check(hdr.get("content-disposition") == 'attachment; filename="%s"' % kind,
              "%s: content-disposition %r" % (kind, hdr.get("content-disposition")))
        check(hdr.get("x-content-type-options") == "nosniff", "%s: nosniff missing" % kind)
        check(prof["time_nanos"] > 0, "%s: time_nanos unset" % kind)
        path = write_tmp(prof["_raw"])
        out = go_pprof("-raw", path)
        check("PeriodType" in out or "Samples" in out, "%s: go tool pprof -raw:\n%s" % (kind, out[:500]))
        os.unlink(path)
        st, hdr, body = pp.request("/debug/pprof/%s?debug=1" % kind)
        check(st == 200 and hdr["content-type"].startswith("text/plain"), "%s?debug=1: %d" % (kind, st))
    allocs = pp.profile("/debug/pprof/allocs")
    check(allocs["default_sample_type"] == "alloc_space", "allocs default %r" % allocs["default_sample_type"])
    # Delta mode.
    t0 = time.time()
    d = pp.profile("/debug/pprof/allocs?seconds=2")
    took = time.time() - t0
    check(took >= 1.9, "delta answered before its window")
    st, hdr, _ = pp.request("/debug/pprof/mutex?seconds=1")
    check(hdr.get("content-disposition") == 'attachment; filename="mutex-delta"', "delta disposition %r" % hdr.get("content-disposition"))
    # The window lies within the request's span, however late a loaded
    # machine answers it.
    check(1.5e9 < d["duration_nanos"] <= took * 1e9, "delta duration %d, request took %.2f s" %
          (d["duration_nanos"], took))
    pp.stop()


def test_symbol_endpoint():
    wl, pp = start()
    # a window with samples of the demo's own code (a loaded machine may
    # give it none in 2 s)
    prof = profile_until(pp, "/debug/pprof/profile?seconds=2",
                         lambda p: any(l["lines"] and l["mapping"] == 1 for l in p["locations"]))
    addrs = [l["address"] for l in prof["locations"] if l["lines"] and l["mapping"] == 1][:5]
    check(addrs, "no symbolized location in the main executable")
    body = "+".join(addrs + ["0", "junk", addrs[0]])
    st, hdr, data = pp.request("/debug/pprof/symbol", method="POST", body=body)
    lines = data.decode().split("\n")
    check(st == 200 and lines[0] == "num_symbols: 1", "symbol POST: %d %r" % (st, data[:200]))
    check(data.endswith(b"\n"), "last line must end in newline")
    got = [l.split(" ", 1) for l in lines[1:] if l]
    check(len(got) == len(addrs) + 1, "symbol answered %d lines for %d resolvable words" % (len(got), len(addrs) + 1))
    check(got[-1][0] == got[0][0], "duplicates must repeat in input order")
    st, _, data = pp.request("/debug/pprof/symbol?" + addrs[0])
    check(st == 200 and data.decode().split("\n")[1].startswith(addrs[0].lower()), "symbol GET %r" % data)
    pp.stop()


def test_short_requests_during_long_window():
    """Short requests are answered while a CPU window is open. The window
    is checked open before and after them (not assumed from a sleep), and
    is long enough that no slow machine closes it meanwhile; its own answer
    is tested by the other tests."""
    wl, pp = start()
    s = socket.create_connection(("127.0.0.1", pp.port))
    s.sendall(b"GET /debug/pprof/profile?seconds=120 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    wait_for(lambda: pp.metrics().get("podprof_cpu_windows_open") == 1, "the CPU window to open")
    for path in ["/healthz", "/debug/pprof/heap", "/metrics", "/debug/pprof/goroutine"]:
        st, _, _ = pp.request(path, timeout=60)
        check(st == 200, "%s during a CPU window: %d" % (path, st))
    check(pp.metrics().get("podprof_cpu_windows_open") == 1, "the CPU window ended early")
    s.close()
    wait_for(lambda: pp.metrics().get("podprof_cpu_windows_open") == 0, "the CPU window to close")
    pp.stop()


def test_client_disconnect_ends_window():
    wl, pp = start()
    s = socket.create_connection(("127.0.0.1", pp.port))
    s.sendall(b"GET /debug/pprof/profile?seconds=120 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    # The server opens the window in its own time: wait for it, not a sleep.
    wait_for(lambda: pp.metrics().get("podprof_cpu_windows_open") == 1, "the window to open")
    s.close()
    # Closed on the hang-up, long before the window's 120 s would end it.
    wait_for(lambda: pp.metrics().get("podprof_cpu_windows_open") == 0,
             "the window to close after the disconnect", timeout=90)
    pp.stop()


def test_go_tool_pprof_over_http():
    wl, pp = start()
    # (a window in which a loaded machine gave the demo no sample in them is
    # taken again; 60 s hang guard)
    deadline = time.monotonic() + 60
    while True:
        out = go_pprof("-top", "http://127.0.0.1:%d/debug/pprof/profile?seconds=2" % pp.port)
        if "compress_response" in out or "parse_request" in out or time.monotonic() > deadline:
            break
    check("compress_response" in out or "parse_request" in out, "go tool pprof -top via HTTP:\n%s" % out[:1500])
    out = go_pprof("-top", "-sample_index=alloc_space", "http://127.0.0.1:%d/debug/pprof/allocs" % pp.port)
    check("alloc_space" in out or "Showing" in out, out[:500])
    pp.stop()


if __name__ == "__main__":
    run([test_surface, test_every_profile_decodes, test_symbol_endpoint,
         test_short_requests_during_long_window, test_client_disconnect_ends_window,
         test_go_tool_pprof_over_http])
