#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""/debug/pprof/ui/ in a real browser: headless Debian chromium, driven by
drive.mjs (playwright-core), loads the page from a podprof with a bearer
token that profiles podprof-demo (busy workers in compress_response and
parse_request, a slow leak in cache_insert) and the spin workload. This
script checks what the page showed against `go tool pprof -top` run on the
very .pb.gz files the page offered for download, and that no request left
127.0.0.1. Screenshots are kept in $PP_BROWSER_OUT (default: a temp dir,
printed)."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import Podprof, Skip, Workload, check, decode, go_pprof, log, run  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
WEB = os.environ.get("PODPROF_WEB", os.path.join(HERE, "..", "..", "web"))
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
TOKEN = "t0ken-for-the-browser-test"


def go_top(path, *args):
    """`go tool pprof -top` in the base unit: exact integers. Returns (total, {name: (flat, cum)})."""
    out = go_pprof("-top", "-nodecount=1000000", "-nodefraction=0", "-edgefraction=0", *args, path)
    m = re.search(r"of (-?\d+)(\w*) total", out)
    check(m, "no total in go tool pprof -top:\n" + out[:2000])
    rows = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 6 and f[1].endswith("%") and f[4].endswith("%"):
            num = lambda s: int(re.match(r"-?\d+", s).group(0))
            rows.setdefault(" ".join(f[5:]), (num(f[0]), num(f[3])))
    return int(m.group(1)), rows, out


def unit_args(unit):
    u = {"nanoseconds": "-unit=ns", "bytes": "-unit=B"}.get(unit)
    return [u] if u else []


def check_against_go(what, shown, path, extra=()):
    """The page's total and every table row equal go tool pprof -top's."""
    si = "-sample_index=" + shown["si"]
    total, rows, out = go_top(path, si, *unit_args(shown["unit"]), *extra)
    check(shown["total"] == total, "%s: page total %s != go tool pprof total %s" % (what, shown["total"], total))
    page = {r["name"]: (r["flat"], r["cum"]) for r in shown["rows"]}
    compared = 0
    for name, (flat, cum) in rows.items():
        if name in page and list(rows).count(name) == 1:
            check(page[name] == (flat, cum), "%s: %s page flat/cum %s, go tool pprof %s" %
                  (what, name, page[name], (flat, cum)))
            compared += 1
    check(compared >= min(3, len(rows)), "%s: only %d rows compared:\n%s" % (what, compared, out[:1500]))
    log("  %s: total %d %s = go tool pprof -top; %d rows equal" % (what, total, shown["unit"], compared))
    return rows


def test_ui():
    if not os.path.exists(CHROMIUM):
        raise Skip("no %s (scripts/install-deps.sh installs chromium)" % CHROMIUM)
    if not os.path.isdir(os.path.join(WEB, "node_modules", "playwright-core")):
        raise Skip("no web/node_modules/playwright-core (scripts/install-deps.sh runs npm ci in web/)")
    out = os.environ.get("PP_BROWSER_OUT") or tempfile.mkdtemp(prefix="podprof-browser-")
    os.makedirs(out, exist_ok=True)
    demo = Workload([os.environ["WL_DEMO"]])
    spin = Workload([os.environ["WL_SPIN"], "1"])
    tokfile = os.path.join(out, "token")
    with open(tokfile, "w") as f:
        f.write(TOKEN + "\n")
    pp = Podprof("--pid", str(demo.pid), "--pid", str(spin.pid), "--set", "cpu.frequency_hz=199",
                 "--set", "heap.sample_rate=65536", "--set", "http.token_file=" + tokfile)

    # HTTP level: profiles need the token, the page's static files do not.
    st, _, _ = pp.request("/debug/pprof/heap")
    check(st == 401, "heap without token: %d" % st)
    st, hdr, body = pp.request("/debug/pprof/ui/")
    check(st == 200 and b"app.js" in body and "default-src 'none'" in hdr.get("content-security-policy", ""),
          "ui without token: %d %r" % (st, hdr))
    st, hdr, _ = pp.request("/debug/pprof/ui?profile=heap")
    check(st == 301 and hdr.get("location") == "/debug/pprof/ui/?profile=heap", "ui redirect %d %r" % (st, hdr))
    st, hdr, body = pp.request("/debug/pprof/ui/app.js", headers={"Accept-Encoding": "gzip"})
    check(st == 200 and hdr.get("content-encoding") == "gzip" and body[:2] == b"\x1f\x8b", "app.js gzip")
    st, hdr, plain = pp.request("/debug/pprof/ui/app.js")
    with open(os.path.join(WEB, "dist", "app.js"), "rb") as f:
        check(st == 200 and "content-encoding" not in hdr and plain == f.read(), "app.js identity")
    st, _, _ = pp.request("/debug/pprof/ui/nonesuch.js")
    check(st == 404, "unknown asset: %d" % st)
    st, _, body = pp.request("/debug/pprof/", headers={"Authorization": "Bearer " + TOKEN})
    check(st == 200 and b"ui/?profile=heap" in body and b"ui/?profile=profile" in body, "index links")

    base = "http://127.0.0.1:%d" % pp.port
    r = subprocess.run(["node", os.path.join(HERE, "drive.mjs"), base, TOKEN, out, str(spin.pid)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=240,
                       env=dict(os.environ, PODPROF_WEB=WEB, CHROMIUM=CHROMIUM))
    log(r.stdout.decode(errors="replace")[-3000:])
    check(r.returncode == 0, "drive.mjs failed (%d)" % r.returncode)
    with open(os.path.join(out, "result.json")) as f:
        res = json.load(f)
    steps = res["steps"]
    log("  screenshots and downloads in %s" % out)

    # Nothing but podprof: every request the browser made went to 127.0.0.1.
    check(res["requests"], "no request recorded")
    for u in res["requests"]:
        check(u.startswith(base + "/") or u.startswith("blob:") or u.startswith("data:"),
              "request left 127.0.0.1: %s" % u)
    errs = [e for e in res.get("consoleErrors", []) if "401" not in e]
    check(not errs, "console errors: %s" % errs)

    # CPU: the hot functions are in the flame graph, totals equal go tool pprof.
    cpu = steps["cpu"]
    for fn in ("compress_response", "parse_request", "hot_a", "hot_b"):
        check(any(t.startswith(fn + ":") for t in cpu["frames"]), "flame graph lacks %s" % fn)
        check(any(r["name"] == fn for r in cpu["topRows"]), "top table lacks %s" % fn)
    check(cpu["zoomedWidth"] >= 0.99 * cpu["fullWidth"] > cpu["targetWidth"], "zoom did not widen the frame")
    check("view=top" in cpu["topUrl"] and "sort=cum" in cpu["cumUrl"], "view not in the URL")
    flats = [r["flat"] for r in cpu["topRows"]]
    cums = [r["cum"] for r in cpu["cumRows"]]
    check(flats == sorted(flats, reverse=True) and cums == sorted(cums, reverse=True), "table not sorted")
    check_against_go("cpu", dict(cpu, rows=cpu["topRows"]), cpu["file"])

    # One process chosen: only its samples, total = its samples in the file.
    one = steps["cpu_pid"]
    prof = decode(open(one["file"], "rb").read())
    si = [t for t, _ in prof["sample_types"]].index(one["si"])
    want = sum(s["values"][si] for s in prof["samples"] if s.get("num_labels", {}).get("pid", [None])[0] == spin.pid)
    check(str(demo.pid) in one["pids"] and str(spin.pid) in one["pids"], "process list %s" % one["pids"])
    check(one["total"] == want and want > 0, "pid total %d, want %d" % (one["total"], want))
    names = {r["name"] for r in one["rows"]}
    check("compress_response" not in names and "hot_a" in names, "pid filter leaks: %s" % sorted(names)[:20])

    # The heap, then the other profiles: totals equal go tool pprof's.
    heap = steps["heap"]
    check(heap["si"] == "inuse_space" and "alloc_space" in heap["sampleTypes"], "heap sample types")
    check(any(t.startswith("cache_insert:") for t in heap["frames"]), "heap flame graph lacks cache_insert")
    check("si=alloc_space" in heap["allocUrl"] and heap["allocTotal"] >= heap["total"], "sample type switch")
    check_against_go("heap", heap, heap["file"])
    for name, o in steps["others"].items():
        check("profile=" + name in o["url"], "%s: URL %s" % (name, o["url"]))
        if o["total"]:
            check_against_go(name, o, o["file"])
    check(steps["others"]["goroutine"]["total"] >= 3, "goroutine: %s" % steps["others"]["goroutine"]["total"])

    # Leak: the second heap snapshot has more in cache_insert than the first.
    d = steps["heap_diff"]
    rows = {r["name"]: r for r in d["rows"]}
    check("cache_insert" in rows and rows["cache_insert"]["cum"] > 0, "leak not shown as growth: %s" % d["rows"][:5])
    check(d["rows"][0]["cum"] > 0, "largest growth not first")
    check(d["total"] - d["base"] == sum(r["flat"] for r in d["rows"]), "diff rows do not add up")
    b_total, _, _ = go_top(d["before"], "-sample_index=inuse_space", "-unit=B")
    a_total, _, _ = go_top(d["after"], "-sample_index=inuse_space", "-unit=B")
    check((d["base"], d["total"]) == (b_total, a_total), "diff totals %s vs go %s" % ((d["base"], d["total"]), (b_total, a_total)))
    _, gd, _ = go_top(d["after"], "-sample_index=inuse_space", "-unit=B", "-diff_base=" + d["before"])
    check(gd.get("cache_insert", (None, None))[1] == rows["cache_insert"]["cum"],
          "cache_insert growth %s, go tool pprof -diff_base %s" % (rows["cache_insert"]["cum"], gd.get("cache_insert")))

    # Two CPU windows: both recorded, both nonzero, diff rows add up.
    c = steps["cpu_diff"]
    check(c["base"] > 0 and c["total"] > 0, "cpu diff totals %s %s" % (c["base"], c["total"]))
    check(c["total"] - c["base"] == sum(r["flat"] for r in c["rows"]), "cpu diff rows do not add up")
    check(any(t.startswith("compress_response:") for t in c["frames"]), "cpu diff flame graph")
    for png in ("cpu-flame.png", "heap-flame.png", "heap-diff.png"):
        check(os.path.getsize(os.path.join(out, png)) > 10000, "screenshot %s is empty" % png)
    pp.stop()
    if not os.environ.get("PP_BROWSER_OUT"):
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    run([test_ui])
