#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Heap and allocs profiles end to end: podprof attaches eBPF uprobes to
the allocator of a workload that allocates known amounts at known call
sites (tests/workloads/heap/sites.c), with glibc, jemalloc and static musl.
Values are unbiased estimates of Poisson-sampled allocations, so the
tolerances follow from the expected number of samples at the sampling
rate used."""
import math
import os
import signal
import time

from harness import Podprof, Skip, Workload, check, frames, go_pprof, run, wait_for, write_tmp

SITES = os.environ.get("WL_HEAP_SITES")
JEMALLOC = os.environ.get("WL_HEAP_SITES_JEMALLOC")
MUSL = os.environ.get("WL_HEAP_SITES_MUSL")
RATE = 65536

# (function, object size, count) from sites.c in "full" mode.
SITE_A = ("site_a", 4000, 16777)        # kept live
SITE_B = ("site_b", 16010, 1048)        # calloc(10, 1601), kept live
SITE_C = ("site_c", 65000, 2 * 8260)    # allocated and freed


def tol(size, count, sigmas=5.0):
    """Relative tolerance of a scaled estimate: the number of samples is
    binomial(count, p) with p = 1 - exp(-size/RATE)."""
    p = 1 - math.exp(-size / RATE)
    k = count * p
    return sigmas * math.sqrt(count * p * (1 - p)) / k + 0.02


def run_sites(path, extra=()):
    wl = Workload([path, "full"])
    check(wl.first_line.startswith("waiting"), "workload said %r" % wl.first_line)
    pp = Podprof("--pid", str(wl.pid), "--set", "heap.sample_rate=%d" % RATE,
                 "--set", "offcpu.enabled=false", "--set", "heap.over_budget=warn", *extra)
    pp.wait_log(r"heap: tracing pid %d" % wl.pid, timeout=60)
    wl.p.send_signal(signal.SIGUSR1)
    line = wl.p.stdout.readline().decode().strip()
    check(line == "ready", "workload said %r" % line)
    settle(pp)
    return wl, pp


def settle(pp, timeout=20):
    """podprof drains the ring buffer without wakeups: wait until the
    stored heap samples stop changing; returns their count."""
    last, same, deadline = -1, 0, time.time() + timeout
    while time.time() < deadline and same < 2:
        time.sleep(0.5)
        n = pp.metrics().get("podprof_store_heap_samples_total", 0)
        same = same + 1 if n == last else 0
        last = n
    return last


def per_function(prof, name):
    idx = [t for t, _ in prof["sample_types"]].index(name)
    out = {}
    for s in prof["samples"]:
        for fn in set(frames(prof, s)):
            out[fn] = out.get(fn, 0) + s["values"][idx]
    return out


def check_sites(prof, label):
    inuse = per_function(prof, "inuse_space")
    alloc = per_function(prof, "alloc_space")
    for fn, size, count in (SITE_A, SITE_B):
        want = size * count
        t = tol(size, count)
        got = inuse.get(fn, 0)
        check(abs(got - want) <= t * want,
              "%s: %s inuse_space %.1f MiB, expected %.1f MiB +- %.0f%%" %
              (label, fn, got / 2**20, want / 2**20, 100 * t))
        check(alloc.get(fn, 0) >= got, "%s: %s alloc < inuse" % (label, fn))
    fn, size, count = SITE_C
    want = size * count
    t = tol(size, count)
    got = alloc.get(fn, 0)
    # site_c's burst (16520 allocations in a fraction of a second, 63% of
    # them sampled at this rate) can outrun the ring buffer; podprof must
    # then say so, and every dropped event stands for size/p bytes.
    import re
    m = re.search(r"ringbuf_drops=(\d+)", " ".join(prof["comments"]))
    drops = int(m.group(1)) if m else 0
    print("%s: ringbuf_drops=%d" % (label, drops))
    got += drops * size / (1 - math.exp(-size / RATE))
    check(abs(got - want) <= t * want, "%s: site_c alloc_space %.1f MiB, expected %.1f MiB +- %.0f%% (%s)" %
          (label, got / 2**20, want / 2**20, 100 * t, prof["comments"][:1]))
    check(inuse.get(fn, 0) <= 0.01 * want, "%s: freed memory of site_c still in use: %d bytes" %
          (label, inuse.get(fn, 0)))
    # Stacks are complete: main is below every site.
    for s in prof["samples"]:
        fr = frames(prof, s)
        if "site_a" in fr:
            check("main" in fr, "%s: site_a stack without main: %s" % (label, fr))


def test_glibc():
    wl, pp = run_sites(SITES)
    heap = pp.profile("/debug/pprof/heap")
    check(heap["sample_types"] == [["alloc_objects", "count"], ["alloc_space", "bytes"],
                                   ["inuse_objects", "count"], ["inuse_space", "bytes"]],
          "types %s" % heap["sample_types"])
    check(heap["period_type"] == ["space", "bytes"] and heap["period"] == RATE,
          "period %s %s" % (heap["period_type"], heap["period"]))
    check(heap["default_sample_type"] in ("", None, "inuse_space"), "heap default %r" % heap["default_sample_type"])
    check_sites(heap, "glibc")
    # Each sample carries the object size.
    for s in heap["samples"]:
        check("bytes" in s["num_labels"], "sample without bytes label")
    # The other allocation functions are seen (every one of them is probed).
    objs = per_function(heap, "alloc_objects")
    check(objs.get("site_realloc", 0) > 0 or objs.get("site_aligned", 0) >= 0, "realloc chain unseen")
    allocs = pp.profile("/debug/pprof/allocs")
    check(allocs["default_sample_type"] == "alloc_space", "allocs default %r" % allocs["default_sample_type"])
    path = write_tmp(heap["_raw"])
    for idx in ("alloc_objects", "alloc_space", "inuse_objects", "inuse_space"):
        out = go_pprof("-top", "-sample_index=" + idx, path)
        check("site_a" in out, "go tool pprof -sample_index=%s:\n%s" % (idx, out[:800]))
    os.unlink(path)
    st, _, body = pp.request("/debug/pprof/heap?debug=1")
    text = body.decode()
    check(text.startswith("heap profile: ") and "@ heap/%d" % (2 * RATE) in text, "debug=1 header %r" % text[:100])
    check("# pid %d: allocator=libc.so.6" % wl.pid in text, "debug=1 lacks memory stats comment")
    # Alloc values never decrease; a delta shows nothing new for an idle workload.
    d = pp.profile("/debug/pprof/allocs?seconds=1")
    check(sum(s["values"][1] for s in d["samples"]) < 0.01 * SITE_C[1] * SITE_C[2],
          "idle delta not empty")
    m = pp.metrics()
    check(m.get("podprof_heap_events_total", 0) > 100, "heap events metric %s" % m.get("podprof_heap_events_total"))
    # Freeing everything: the workload exits -> its live heap is gone, podprof keeps serving.
    wl.p.send_signal(signal.SIGTERM)
    wl.p.wait(timeout=60)
    # podprof notices the exit at its next discovery pass, whenever a loaded
    # machine runs it; the live heap goes with it.
    pp.wait_log(r"target: pid %d .*exited" % wl.pid, timeout=60)

    def released():
        prof = pp.profile("/debug/pprof/heap")
        return prof if per_function(prof, "inuse_space").get("site_a", 0) == 0 else None

    after = wait_for(released, "the exited process's live heap to be released")
    check(per_function(after, "alloc_space").get("site_a", 0) > 0, "alloc history lost at exit")
    pp.stop()


def test_jemalloc():
    if not JEMALLOC:
        raise Skip("jemalloc workload not built")
    wl, pp = run_sites(JEMALLOC)
    check("allocator libjemalloc" in pp.log_text(), "jemalloc not detected:\n" + pp.log_text()[-800:])
    check_sites(pp.profile("/debug/pprof/heap"), "jemalloc")
    pp.stop()


def test_musl_static():
    if not MUSL:
        raise Skip("musl workload not built")
    wl, pp = run_sites(MUSL)
    check_sites(pp.profile("/debug/pprof/heap"), "musl-static")
    pp.stop()


def test_new_process_is_traced():
    cfg = write_tmp(b"targets:\n  - comm: heap_sites\n", ".yaml")
    pp = Podprof("--config", cfg, "--set", "heap.sample_rate=%d" % RATE,
                 "--set", "discovery.interval_ms=200", "--set", "offcpu.enabled=false")
    for round_ in range(2):
        wl = Workload([SITES, "full"])
        pp.wait_log(r"heap: tracing pid %d" % wl.pid, timeout=60)
        wl.p.send_signal(signal.SIGUSR1)
        check(wl.p.stdout.readline().decode().strip() == "ready", "workload not ready")
        settle(pp)
        heap = pp.profile("/debug/pprof/heap")
        mine = [s for s in heap["samples"] if s["num_labels"]["pid"][0] == wl.pid]
        check(mine, "round %d: no samples of the new process" % round_)
        wl.kill()
        pp.wait_log(r"target: pid %d .* exited" % wl.pid, timeout=60)
    check(pp.alive(), "podprof died")
    pp.stop()
    os.unlink(cfg)


if __name__ == "__main__":
    run([test_glibc, test_jemalloc, test_musl_static, test_new_process_is_traced])
