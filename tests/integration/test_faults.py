#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Targets that misbehave under podprof's feet: they exit or are killed
mid-window, exec another binary, fork hundreds of children, map and unmap
a library in a loop, and start and end threads. podprof keeps serving valid
profiles, picks up new processes, and leaks no file descriptors."""
import os
import signal
import tempfile
import threading
import time

from harness import (CpuTrack, Podprof, Workload, check, count_fds, frames, leaf_function,
                     profile_until, run, wait_for)

SPIN = os.environ.get("WL_SPIN")
DLCHURN = os.environ.get("WL_DLCHURN")
CHURNLIB = os.environ.get("WL_CHURNLIB")
DEMO = os.environ.get("WL_DEMO")


def kernel_fds(pid):
    """perf events, BPF links and other kernel objects podprof holds (not
    the ELF files its bounded symbol and unwind caches keep open)."""
    n = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("anon_inode:"):
                n += 1
        except OSError:
            pass
    return n


def names(prof):
    out = set()
    for s in prof["samples"]:
        out.update(f for f in frames(prof, s) if isinstance(f, str))
    return out


def profile_naming(pp, want, seconds):
    """A CPU window whose samples name every function in want."""
    return profile_until(pp, "/debug/pprof/profile?seconds=%d" % seconds,
                         lambda prof: want <= names(prof))


def test_killed_mid_window():
    wl = Workload([SPIN, "2"])
    pp = Podprof("--pid", str(wl.pid), "--set", "cpu.frequency_hz=199")
    pp.wait_log(r"target: pid %d " % wl.pid, timeout=30)
    # Everything podprof attaches on demand (off-CPU tracing) attached first.
    for kind in ("heap", "allocs", "goroutine", "block", "mutex", "threadcreate"):
        pp.profile("/debug/pprof/" + kind)
    base_fds = kernel_fds(pp.p.pid)
    res = {}
    track = CpuTrack(wl.pid)
    t = threading.Thread(target=lambda: res.update(p=pp.profile("/debug/pprof/profile?seconds=3")))
    t.start()
    time.sleep(1.2)
    wl.p.send_signal(signal.SIGKILL)
    wl.p.wait()
    t.join()
    track.stop()
    prof = res["p"]
    # What the process ran in the window up to its last CPU reading before
    # the kill (the 20 ms after it may add a few samples).
    start = prof["time_nanos"] / 1e9 - prof["duration_nanos"] / 1e9
    before = [c for (ts, c) in track.points if ts >= start]
    want = (before[-1] - before[0]) * 199 / 1e9 if len(before) > 1 else 0
    n = sum(s["values"][0] for s in prof["samples"])
    check(n > 0 and n >= 0.85 * want - 3,
          "samples before the kill lost: %d, %.0f predicted by its CPU time" % (n, want))
    check("hot_a" in names(prof), "names of the dead process lost")
    pp.wait_log(r"target: pid %d .*exited" % wl.pid, timeout=60)
    for kind in ("heap", "allocs", "goroutine", "block", "mutex", "threadcreate"):
        pp.profile("/debug/pprof/" + kind)
    # The dead target's perf events and links are closed by podprof's own
    # threads, in their own time: wait for it.
    wait_for(lambda: kernel_fds(pp.p.pid) < base_fds,
             lambda: "kernel fds below the %d held before the exit (now %d)" %
             (base_fds, kernel_fds(pp.p.pid)))
    pp.stop()


def test_exec():
    # A shell that execs the spin workload once podprof follows it: same pid,
    # new image.
    go = tempfile.mktemp(prefix="podprof-exec-")
    wl = Workload(["sh", "-c", "while [ ! -e %s ]; do sleep 0.05; done; exec %s 1" % (go, SPIN)],
                  wait_line=False)
    pp = Podprof("--pid", str(wl.pid), "--set", "cpu.frequency_hz=199",
                 "--set", "discovery.interval_ms=200")
    pp.wait_log(r"target: pid %d " % wl.pid, timeout=30)
    open(go, "w").close()
    pp.wait_log(r"exec'd", timeout=30)
    os.unlink(go)
    prof = profile_naming(pp, {"hot_a", "hot_b", "worker_loop"}, 2)
    check({"hot_a", "hot_b", "worker_loop"} <= names(prof), "after exec: %s" % sorted(names(prof))[:30])
    check("exec'd" in pp.log_text(), "exec not noticed:\n" + pp.log_text()[-1000:])
    pp.stop()


def test_fork_storm():
    # 300 short-lived children (each one a new process to discover, attach and drop).
    script = "i=0; while [ $i -lt 300 ]; do /bin/true; i=$((i+1)); done; exec %s 1" % SPIN
    wl = Workload(["sh", "-c", script], wait_line=False)
    pp = Podprof("--pid", str(wl.pid), "--set", "cpu.frequency_hz=199",
                 "--set", "discovery.interval_ms=100")
    base_fds = kernel_fds(pp.p.pid)
    prof = pp.profile("/debug/pprof/profile?seconds=3")
    check(pp.alive(), "podprof died")
    heap = pp.profile("/debug/pprof/heap")
    # The exited children are dropped at podprof's next discovery passes,
    # whenever they run on a loaded machine: wait for it.
    wait_for(lambda: pp.metrics()["podprof_targets"] <= 3 and
             kernel_fds(pp.p.pid) <= base_fds + 2,
             lambda: "targets dropped and their kernel fds closed (%s targets, kernel fds "
             "%d -> %d)" % (pp.metrics()["podprof_targets"], base_fds, kernel_fds(pp.p.pid)))
    check(count_fds(pp.p.pid) < 200, "%d fds open" % count_fds(pp.p.pid))
    # A few windows: on a loaded machine one second of the spinner may get
    # no sample at 199 Hz.
    check(any("hot_a" in names(pp.profile("/debug/pprof/profile?seconds=1")) for _ in range(5)),
          "spin after the storm not sampled")
    pp.stop()


def test_library_unmapped_and_threads_churn():
    wl = Workload([DLCHURN, CHURNLIB])
    pp = Podprof("--pid", str(wl.pid), "--set", "cpu.frequency_hz=499")
    prof = profile_naming(pp, {"churn_work", "short_thread"}, 3)
    n = names(prof)
    check("churn_work" in n, "code of the dlopen'ed library not named: %s" % sorted(n)[:30])
    check("short_thread" in n, "short-lived threads not sampled: %s" % sorted(n)[:30])
    for _ in range(3):
        pp.profile("/debug/pprof/goroutine")
    pp.profile("/debug/pprof/heap")
    check(pp.alive(), "podprof died")
    m = pp.metrics()
    check(m["podprof_unwind_errors_total"] < 0.05 * max(1, m["podprof_unwinds_total"]),
          "unwind errors %s of %s" % (m["podprof_unwind_errors_total"], m["podprof_unwinds_total"]))
    pp.stop()


if __name__ == "__main__":
    run([test_killed_mid_window, test_exec, test_fork_storm, test_library_unmapped_and_threads_churn])
