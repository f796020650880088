#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""goroutine, threadcreate, block and mutex end to end on a workload with
threads blocked in known places (tests/workloads/threads/blocked.c)."""
import os
import re
import signal
import time

from harness import Podprof, Workload, check, frames, go_pprof, run, wait_for, write_tmp

BLOCKED = os.environ.get("WL_BLOCKED")


def stats(wl):
    wl.p.send_signal(signal.SIGUSR1)
    line = wl.p.stdout.readline().decode()
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}


def start(*extra):
    wl = Workload([BLOCKED])
    pp = Podprof("--pid", str(wl.pid), "--set", "heap.enabled=false", *extra)
    return wl, pp


def by_function(prof, index):
    out = {}
    for s in prof["samples"]:
        for fn in set(frames(prof, s)):
            out[fn] = out.get(fn, 0) + s["values"][index]
    return out


def test_goroutine_dump():
    # This test polls dumps to catch a transient state: without the rate
    # limit (threads.min_interval_ms), which would serve the last dump.
    wl, pp = start("--set", "threads.min_interval_ms=0")
    before = stats(wl)["spin"]
    # The contender alternates between waiting for the lock and resting:
    # take dumps until one catches it waiting, with every other thread's
    # stack captured too (on a loaded machine a thread that has just woken
    # may stay runnable past the 50 ms stop deadline: "not captured"; the
    # threads reach their places in their own time). A deadline, not a
    # count of tries: only a hang guard.
    want = ("contend_lock(", "sleeper_nap(", "reader(", "spinner(")
    deadline = time.monotonic() + 60
    while True:
        st, hdr, body = pp.request("/debug/pprof/goroutine?debug=2")
        check(st == 200, "debug=2 status %d" % st)
        dump = body.decode()
        if all(w in dump for w in want) or time.monotonic() > deadline:
            break
        time.sleep(0.13)
    # Each thread in its place, with the right state.
    blocks = dump.split("\n\n")

    def block_with(fn):
        for b in blocks:
            if fn + "(" in b:
                return b
        raise AssertionError("no thread shows %s in the dump:\n%s" % (fn, dump[:3000]))

    check("[sleeping" in block_with("sleeper_nap"), "sleeper not sleeping")
    check("[sleeping" in block_with("reader"), "reader not sleeping")
    check("[sleeping" in block_with("contend_lock") or "futex" in block_with("contend_lock"),
          "contender state")
    check(re.search(r"\[(running|sleeping)", block_with("spinner")), "spinner state")
    check(re.search(r"blocked\.c:\d+", dump), "no file:line in the dump")
    check("stopped for" in dump, "pause not reported")
    # No thread left stopped or traced; the target keeps running.
    for tid in os.listdir("/proc/%d/task" % wl.pid):
        status = open("/proc/%d/task/%s/status" % (wl.pid, tid)).read()
        check("TracerPid:\t0" in status, "thread %s still traced" % tid)
        check("State:\tt" not in status and "State:\tT" not in status, "thread %s stopped" % tid)
    # The spinner runs again after the snapshot, whenever the scheduler
    # gives it a CPU.
    wait_for(lambda: stats(wl)["spin"] > before, "the spinner to advance after the snapshot")
    prof = pp.profile("/debug/pprof/goroutine")
    check(prof["sample_types"] == [["goroutine", "count"]], "types %s" % prof["sample_types"])
    total = sum(s["values"][0] for s in prof["samples"])
    nthreads = len(os.listdir("/proc/%d/task" % wl.pid))
    check(abs(total - nthreads) <= 3, "goroutine total %d, process has %d threads" % (total, nthreads))
    st, _, body = pp.request("/debug/pprof/goroutine?debug=1")
    check(body.startswith(b"goroutine profile: total "), "debug=1 header %r" % body[:60])
    m = pp.metrics()
    check(m.get("podprof_thread_snapshot_pause_max_nanoseconds", 0) > 0, "pause metric missing")
    pp.stop()


def test_offcpu_on_demand():
    """The off-CPU programs are attached only while block/mutex/threadcreate
    data is asked for: not at start, on a request, and off again
    offcpu.linger_seconds after the last one."""
    wl, pp = start("--set", "offcpu.linger_seconds=1")
    time.sleep(0.5)
    check(pp.metrics().get("podprof_offcpu_tracing") == 0, "tracing before any request")
    st, _, _ = pp.request("/debug/pprof/mutex")
    check(st == 200, "mutex: %s" % st)
    check(pp.metrics().get("podprof_offcpu_tracing") == 1, "not tracing after a request")
    # a window keeps it on past the linger time
    prof = pp.profile("/debug/pprof/block?seconds=2", timeout=30)
    check(prof["samples"], "no block samples in a window")
    # Detached by podprof's own timer, whenever it runs.
    wait_for(lambda: pp.metrics().get("podprof_offcpu_tracing") == 0,
             "tracing to stop after the linger time")
    pp.stop()
    wl.kill()


def test_block_mutex_threadcreate():
    wl, pp = start()
    time.sleep(0.5)
    t0, s0 = time.time(), stats(wl)
    block = pp.profile("/debug/pprof/block?seconds=4", timeout=30)
    t1, s1 = time.time(), stats(wl)
    check(block["sample_types"] == [["contentions", "count"], ["delay", "nanoseconds"]],
          "block types %s" % block["sample_types"])
    delay = by_function(block, 1)
    # Off-CPU time measured by podprof vs the time the thread measured itself:
    # the thread's own rate of waiting (over the span of the two stats calls,
    # which includes the request's latency) times the profile's own window.
    window = block["duration_nanos"] / (t1 - t0) / 1e9
    slept = (s1["sleep_ns"] - s0["sleep_ns"]) * window
    got = delay.get("sleeper_nap", 0)
    check(0.7 * slept <= got <= 1.15 * slept, "sleeper: block delay %.2f s, slept %.2f s in the window" %
          (got / 1e9, slept / 1e9))
    read = (s1["read_ns"] - s0["read_ns"]) * window
    check(0.6 * read <= delay.get("reader", 0) <= 1.15 * read,
          "reader: block delay %.2f s, read() waited %.2f s in the window" %
          (delay.get("reader", 0) / 1e9, read / 1e9))
    mutex = pp.profile("/debug/pprof/mutex")
    s2 = stats(wl)
    md = by_function(mutex, 1)
    # The mutex profile counts since podprof attached: at least the wait the
    # workload measured during the block window, at most all it ever waited.
    waited = (s1["lock_wait_ns"] - s0["lock_wait_ns"]) * window
    check(0.6 * waited <= md.get("contend_lock", 0) <= 1.15 * s2["lock_wait_ns"],
          "mutex: contend_lock delay %.2f s; the workload waited %.2f s in the window, %.2f s in all" %
          (md.get("contend_lock", 0) / 1e9, waited / 1e9, s2["lock_wait_ns"] / 1e9))
    st, _, body = pp.request("/debug/pprof/mutex?debug=1")
    check(body.startswith(b"--- mutex:\ncycles/second=1000000000\n"), "mutex debug=1 %r" % body[:80])
    tc = pp.profile("/debug/pprof/threadcreate")
    tcf = by_function(tc, 0)
    check(tcf.get("spawn_worker", 0) >= 1, "threadcreate lacks spawn_worker: %s" % sorted(k for k in tcf if isinstance(k, str))[:30])
    for name, prof in (("block", block), ("mutex", mutex), ("threadcreate", tc)):
        path = write_tmp(prof["_raw"])
        go_pprof("-top", path)
        os.unlink(path)
    pp.stop()


if __name__ == "__main__":
    run([test_goroutine_dump, test_offcpu_on_demand, test_block_mutex_threadcreate])
