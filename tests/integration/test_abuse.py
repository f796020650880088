#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""HTTP under load and abuse: slow clients, idle half-open connections,
thousands of bad requests and oversized headers and bodies. The server
answers within its timeouts and valid requests keep succeeding."""
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

from harness import Podprof, Workload, check, held_kb, log, rss_kb, run, sanitized, wait_for

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


def raw(port, req, timeout=5, host="127.0.0.1"):
    """Send req as is on a new connection; everything the server sends until it closes."""
    s = socket.create_connection((host, port), timeout=timeout)
    s.sendall(req)
    out = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            out += d
    except (socket.timeout, ConnectionResetError):
        pass
    s.close()
    return out


def own_addresses():
    """The machine's global addresses, as a scraper in its network sees them (a pod IP)."""
    out = subprocess.run(["ip", "-o", "addr", "show", "scope", "global"], capture_output=True,
                         text=True).stdout
    return re.findall(r"\sinet6?\s([0-9a-f.:]+)/", out)


DATA_PATHS = ["/debug/pprof/cmdline", "/metrics", "/debug/pprof/goroutine?debug=2",
              "/debug/pprof/heap", "/debug/pprof/symbol?0x1"]


def test_dns_rebinding():
    """Issue 25 item 5: a page of evil.example whose name was rebound to
    127.0.0.1 (a kubectl port-forward) gets 421 for everything but
    /healthz; loopback names, the pod's own address (a Prometheus, Parca
    or Alloy scrape sends the pod IP as Host), a request without Host and
    the names of http.allowed_hosts are served."""
    wl = Workload([DEMO])
    pp = Podprof("--pid", str(wl.pid), "--set", "heap.enabled=false",
                 "--set", "http.allowed_hosts=podprof.example,*.svc.example", listen=":0")
    for path in DATA_PATHS:
        st, hdr, body = pp.request(path, headers={"Host": "evil.example:%d" % pp.port})
        check(st == 421, "%s with a rebinding Host: %d %r" % (path, st, body[:100]))
        check(hdr.get("content-type") == "text/plain; charset=utf-8" and
              b"http.allowed_hosts" in body, "421 %s: %r %r" % (path, hdr, body))
    for host in ["evil.example", "x.podprof.example", "svc.example", "127.0.0.1.evil.example",
                 "[fe80::dead:beef]"]:
        st, _, _ = pp.request("/debug/pprof/cmdline", headers={"Host": host})
        check(st == 421, "Host %s: %d" % (host, st))
    st, _, _ = pp.request("/healthz", headers={"Host": "evil.example"})
    check(st == 200, "/healthz with any Host (kubelet probes): %d" % st)
    for host in ["localhost:%d" % pp.port, "LOCALHOST.", "app.localhost", "127.0.0.1",
                 "127.1.2.3:80", "[::1]:%d" % pp.port, "podprof.example:6060", "a.b.svc.example",
                 socket.gethostname()]:
        st, _, body = pp.request("/debug/pprof/cmdline", headers={"Host": host})
        check(st == 200, "Host %s: %d %r" % (host, st, body[:100]))
    # HTTP/1.0 without Host.
    resp = raw(pp.port, b"GET /debug/pprof/cmdline HTTP/1.0\r\n\r\n")
    check(resp.startswith(b"HTTP/1.1 200") or resp.startswith(b"HTTP/1.0 200"),
          "no Host: %r" % resp[:100])
    # A scrape of the pod IP, as Prometheus, Parca and Alloy send it.
    addrs = own_addresses()
    log("  own addresses: %s" % addrs)
    for a in addrs[:4]:
        fam = socket.AF_INET6 if ":" in a else socket.AF_INET
        hostport = ("[%s]:%d" if fam == socket.AF_INET6 else "%s:%d") % (a, pp.port)
        try:
            s = socket.socket(fam, socket.SOCK_STREAM)
            s.settimeout(10)
            s.connect((a, pp.port))
        except OSError as e:
            log("  %s not reachable here (%s): Host only" % (a, e))
            st, _, _ = pp.request("/debug/pprof/cmdline", headers={"Host": hostport})
            check(st == 200, "Host %s: %d" % (hostport, st))
            continue
        s.sendall(b"GET /debug/pprof/allocs HTTP/1.1\r\nHost: %s\r\nUser-Agent: "
                  b"Prometheus/2.53\r\nConnection: close\r\n\r\n" % hostport.encode())
        resp = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            resp += d
        s.close()
        check(resp.startswith(b"HTTP/1.1 200"), "scrape of %s: %r" % (hostport, resp[:200]))
    m = pp.metrics()
    check(m.get('podprof_http_refused_total{reason="host"}', 0) >= len(DATA_PATHS) + 5,
          "host refusals %s" % m.get('podprof_http_refused_total{reason="host"}'))
    check(m.get('podprof_http_requests_total{path="/metrics",code="421"}', 0) >= 1,
          "421 not counted per path")
    check(re.search(r"refusing connections \(421", pp.log_text()), "no log line for the 421")
    pp.stop()


def test_cross_site():
    """A page of another site (or another port of localhost) cannot start
    CPU windows and thread dumps or read data: Sec-Fetch-Site cross-site or
    same-site gets 403; a typed URL (none), podprof's own UI (same-origin)
    and non-browser clients are served; the index may be linked to."""
    wl = Workload([DEMO])
    pp = Podprof("--pid", str(wl.pid), "--set", "heap.enabled=false")
    for site in ["cross-site", "same-site"]:
        for path in DATA_PATHS + ["/debug/pprof/profile?seconds=1"]:
            st, _, body = pp.request(path, headers={"Sec-Fetch-Site": site,
                                                    "Sec-Fetch-Mode": "no-cors"})
            check(st == 403, "%s from %s: %d %r" % (path, site, st, body[:100]))
    m = pp.metrics()
    check(m.get("podprof_cpu_windows_open") == 0, "a cross-site request opened a CPU window")
    for site in ["none", "same-origin"]:
        st, _, body = pp.request("/debug/pprof/cmdline", headers={"Sec-Fetch-Site": site})
        check(st == 200, "cmdline, Sec-Fetch-Site %s: %d" % (site, st))
    for path in ["/debug/pprof/", "/healthz"]:
        st, _, _ = pp.request(path, headers={"Sec-Fetch-Site": "cross-site"})
        check(st == 200, "%s linked from another site: %d" % (path, st))
    # POST from a foreign Origin (a browser without Sec-Fetch-*): refused.
    st, _, _ = pp.request("/debug/pprof/symbol", method="POST", body="0x1",
                          headers={"Origin": "http://evil.example"})
    check(st == 403, "POST symbol from a foreign Origin: %d" % st)
    st, _, _ = pp.request("/debug/pprof/symbol", method="POST", body="0x1",
                          headers={"Origin": "null"})
    check(st == 403, "POST symbol from Origin null: %d" % st)
    st, _, _ = pp.request("/debug/pprof/symbol", method="POST", body="0x1",
                          headers={"Origin": "http://127.0.0.1:%d" % pp.port})
    check(st == 200, "POST symbol from podprof's own origin: %d" % st)
    m = pp.metrics()
    check(m.get('podprof_http_refused_total{reason="cross_site"}', 0) >= 2 * 6 + 2,
          "cross_site refusals %s" % m.get('podprof_http_refused_total{reason="cross_site"}'))
    pp.stop()


def test_smuggling():
    """Content-Length with Transfer-Encoding, or two different lengths:
    400 and the connection closed, so the bytes after the headers are never
    read as a second request."""
    wl = Workload([DEMO])
    pp = Podprof("--pid", str(wl.pid), "--set", "heap.enabled=false")
    smuggled = b"GET /debug/pprof/cmdline HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    cases = [
        b"POST /debug/pprof/symbol HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled,
        b"POST /debug/pprof/symbol HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
        b"Content-Length: 5\r\n\r\n0\r\n\r\n" + smuggled,
        b"POST /debug/pprof/symbol HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 4\r\n"
        b"Content-Length: 62\r\n\r\n0x10" + smuggled,
        b"POST /debug/pprof/symbol HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 4, 62\r\n\r\n"
        b"0x10" + smuggled,
        b"POST /debug/pprof/symbol HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: gzip, chunked"
        b"\r\n\r\n0\r\n\r\n" + smuggled,
    ]
    for req in cases:
        resp = raw(pp.port, req)
        check(resp.startswith(b"HTTP/1.1 400"), "%r: %r" % (req[:120], resp[:200]))
        # (libmicrohttpd refuses "4, 62" itself, its 400 header written twice)
        check(re.findall(rb"HTTP/1\.1 (\d+)", resp) in ([b"400"], [b"400", b"400"]),
              "a smuggled request was answered: %r" % resp[:600])
    # The same request framed once is served.
    resp = raw(pp.port, b"POST /debug/pprof/symbol HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n4\r\n0x10\r\n0\r\n\r\n")
    check(resp.startswith(b"HTTP/1.1 200"), "chunked POST: %r" % resp[:200])
    m = pp.metrics()
    check(m.get('podprof_http_refused_total{reason="framing"}', 0) >= len(cases) - 1,
          "framing refusals %s" % m.get('podprof_http_refused_total{reason="framing"}'))
    pp.stop()


def test_token_with_nul():
    """A token file holding a NUL byte is a configuration error naming the
    file: never auth off (leading NUL), never a shorter token."""
    for content in [b"\0secret-token\n", b"ab\0cdef\n"]:
        with tempfile.NamedTemporaryFile(prefix="podprof-token-", delete=False) as f:
            f.write(content)
            path = f.name
        try:
            pp = Podprof("--set", "http.token_file=" + path, wait_port=False)
            rc = pp.p.wait(timeout=60)
            pp._t.join(timeout=10)
            text = pp.log_text()
            check(rc != 0, "podprof started with token file %r (rc %d)" % (content, rc))
            check(path in text and "NUL" in text, "message does not name the file: %r" % text)
            check(not pp.ports, "podprof served with a NUL token file")
        finally:
            os.unlink(path)


# Names itself (a process may rename only its own threads): argv[1] the
# process, argv[2] its second thread, both in hex.
NAMED_THREADS = """
import sys, threading, time
ready = threading.Event()
def worker():
    with open("/proc/self/task/%d/comm" % threading.get_native_id(), "wb") as f:
        f.write(bytes.fromhex(sys.argv[2]))
    ready.set()
    time.sleep(3600)
threading.Thread(target=worker, daemon=True).start()
ready.wait()
with open("/proc/self/comm", "wb") as f:
    f.write(bytes.fromhex(sys.argv[1]))
print("ready", flush=True)
time.sleep(3600)
"""


def test_hostile_thread_names():
    """Issue 25 item 8: a process and a thread named with a truncated UTF-8
    sequence and a newline: /metrics stays valid UTF-8 exposition (Prometheus
    rejected the whole scrape) and the debug=2 dump shows one entry per
    thread, none forged."""
    # 15 bytes, the kernel's limit: invalid UTF-8, then a forged thread header.
    wl = Workload([sys.executable, "-c", NAMED_THREADS, b'ev\xff\xc3\n"}\\ 1'.hex(),
                   b'x\xe2\x82\nthread 9 "f'.hex()])
    tids = sorted(int(t) for t in os.listdir("/proc/%d/task" % wl.pid))
    check(len(tids) == 2, "workload threads %s" % tids)
    pp = Podprof("--pid", str(wl.pid), "--set", "heap.enabled=false")

    def renamed():
        st, _, body = pp.request("/metrics")
        check(st == 200, "/metrics %d" % st)
        return body if b'comm="ev' in body else None

    body = wait_for(renamed, "the renamed process in /metrics")
    text = body.decode("utf-8")  # strict: raises on invalid UTF-8
    sample = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\.)*",?)*\})? '
                        r'[-+0-9.eE]+(inf|Inf|NaN)?$')
    for line in text.split("\n"):
        if line and not line.startswith("#"):
            check(sample.match(line), "not an exposition line: %r" % line)
    check('comm="ev\ufffd\ufffd\\n\\"}\\\\ 1"' in text, "comm label: %r" %
          [l for l in text.split("\n") if "comm=" in l])
    pp.metrics()  # the harness's own parser
    st, _, dump = pp.request("/debug/pprof/goroutine?debug=2", timeout=60)
    check(st == 200, "debug=2: %d" % st)
    dump.decode("utf-8")
    heads = [l for l in dump.split(b"\n") if l.startswith(b"thread ")]
    check(len(heads) == 2, "thread headers in the dump: %r" % heads)
    check(not any(l.startswith(b'thread 9 "f') for l in dump.split(b"\n")), "a forged thread line")
    check(any(b'"x\\xe2\\x82\\nthread 9 \\"f"' in l for l in heads), "escaped name: %r" % heads)
    st, _, text1 = pp.request("/debug/pprof/goroutine?debug=1", timeout=60)
    check(st == 200, "debug=1: %d" % st)
    check(not any(l.startswith(b"thread 9") for l in text1.split(b"\n")), "debug=1 forged line")
    pp.stop()


if __name__ == "__main__":
    run([test_idle_and_slow_connections, test_many_bad_requests, test_oversized, test_dns_rebinding,
         test_cross_site, test_smuggling, test_token_with_nul, test_hostile_thread_names])
