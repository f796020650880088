#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Pid reuse for the heap and off-CPU collectors (issue 14). Heap uprobes,
the injected agent's probes and the off-CPU tracer's targets are bound to
the process podprof attached to: a new process that gets the pid after
the target exited must not be traced as the old one, and its heap profile
must not inherit the old one's live allocations. Pids are had again
through /proc/sys/kernel/ns_last_pid."""
import math
import os
import re
import signal
import sys
import time

from harness import Podprof, Skip, Workload, check, frames, run, write_tmp
from test_heap import settle
from test_hostile_target import spawn_with_pid

SITES = os.environ.get("WL_HEAP_SITES")
RATE = 65536
A_SIZE, A_COUNT = 4000, 16777  # site_a in sites.c's "full" mode, kept live


def spawn_sites_with_pid(pid, tries=200):
    """Starts `heap_sites full` as process `pid` (free again); None when the
    pid was never had (other processes fork too)."""
    for _ in range(tries):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
        wl = Workload([SITES, "full"])
        if wl.pid == pid:
            check(wl.first_line.startswith("waiting"), "workload said %r" % wl.first_line)
            return wl
        wl.kill()
    return None


def allocate(wl):
    wl.p.send_signal(signal.SIGUSR1)
    line = wl.p.stdout.readline().decode().strip()
    check(line == "ready", "workload said %r" % line)


def site_a_inuse(prof, pid):
    idx = [t for t, _ in prof["sample_types"]].index("inuse_space")
    got = 0
    for s in prof["samples"]:
        if s["num_labels"].get("pid", [None])[0] == pid and "site_a" in frames(prof, s):
            got += s["values"][idx]
    return got


def uninherited(mode):
    """The target exits and a new process gets its pid long before the next
    discovery pass (a minute away): the old process's probes must not see
    the new one's allocations (it would count thousands of samples)."""
    wl = Workload([SITES, "full"])
    check(wl.first_line.startswith("waiting"), "workload said %r" % wl.first_line)
    pid = wl.pid
    pp = Podprof("--pid", str(pid), "--set", "heap.sample_rate=%d" % RATE,
                 "--set", "heap.mode=%s" % mode, "--set", "heap.over_budget=warn",
                 "--set", "offcpu.enabled=false", "--set", "discovery.interval_ms=60000")
    try:
        pp.wait_log(r"heap: tracing pid %d" % pid, timeout=30)
        check(mode != "inject" or pp.wait_log(r"heap: tracing pid %d .*injected agent" % pid),
              "not injected")
        allocate(wl)
        n0 = settle(pp)
        # site_a alone: 16777 allocations of 4000 bytes, each sampled with
        # p = 1 - exp(-4000/65536) ~ 0.059: ~990 samples, sd ~31.
        check(n0 > 500, "the first process was not traced: %d heap samples" % n0)
        wl.kill()
        wl2 = spawn_sites_with_pid(pid)
        if wl2 is None:
            raise Skip("pid %d not had again" % pid)
        allocate(wl2)
        n1 = settle(pp)
        print("heap.mode=%s: %d heap samples of the target, %d more once pid %d was reused"
              % (mode, n0, n1 - n0, pid), file=sys.stderr)
        # Every sample after the kill is the new process's: any is a bug.
        check(n1 == n0, "heap.mode=%s: %d allocations of the process that reused pid %d "
              "were traced as the old target's" % (mode, n1 - n0, pid))
        check(pp.alive(), "podprof died")
        wl2.kill()
    finally:
        pp.stop()


def test_heap_uprobe_not_inherited():
    uninherited("uprobe")


def test_heap_agent_not_inherited():
    uninherited("inject")


def test_heap_live_not_inherited():
    """Targets selected by comm: the target exits and a new heap_sites gets
    its pid before discovery notices the exit. The new process is a new
    target, traced afresh, and its heap profile holds its own live
    allocations only (twice site_a's bytes if it inherited the old ones)."""
    cfg = write_tmp(b"targets:\n  - comm: heap_sites\n", ".yaml")
    pp = Podprof("--config", cfg, "--set", "heap.sample_rate=%d" % RATE,
                 "--set", "heap.over_budget=warn", "--set", "offcpu.enabled=false",
                 "--set", "discovery.interval_ms=2000")
    try:
        wl = Workload([SITES, "full"])
        pid = wl.pid
        pp.wait_log(r"heap: tracing pid %d" % pid, timeout=30)
        allocate(wl)
        settle(pp)
        want = A_SIZE * A_COUNT
        p = 1 - math.exp(-A_SIZE / RATE)
        tol = 5 * math.sqrt(A_COUNT * p * (1 - p)) / (A_COUNT * p) + 0.02
        got0 = site_a_inuse(pp.profile("/debug/pprof/heap"), pid)
        check(abs(got0 - want) <= tol * want, "first process: site_a inuse %.1f MiB, expected "
              "%.1f MiB +- %.0f%%" % (got0 / 2**20, want / 2**20, 100 * tol))
        mark = len(pp.lines)
        wl.kill()
        wl2 = spawn_sites_with_pid(pid)
        if wl2 is None:
            raise Skip("pid %d not had again" % pid)
        pp.wait_log(r"heap: tracing pid %d" % pid, timeout=30, start=mark)
        lines = pp.lines[mark:]
        check(any(re.search(r"target: pid %d \(heap_sites\) exited" % pid, l) for l in lines),
              "the old target's exit is not logged:\n%s" % "\n".join(lines))
        allocate(wl2)
        settle(pp)
        got1 = site_a_inuse(pp.profile("/debug/pprof/heap"), pid)
        print("site_a inuse: %.1f MiB for the first process, %.1f MiB for the one that reused "
              "pid %d (expected %.1f MiB +- %.0f%%)" % (got0 / 2**20, got1 / 2**20, pid,
                                                       want / 2**20, 100 * tol), file=sys.stderr)
        check(abs(got1 - want) <= tol * want, "process that reused pid %d: site_a inuse %.1f MiB, "
              "expected %.1f MiB +- %.0f%% (the old process's live allocations inherited?)"
              % (pid, got1 / 2**20, want / 2**20, 100 * tol))
        wl2.kill()
    finally:
        pp.stop()
        os.unlink(cfg)


NAPPER = "import time\nwhile True:\n    time.sleep(0.001)\n"


def test_offcpu_not_inherited():
    """The off-CPU tracer keeps its targets by pid in BPF. The target exits
    and a process that is no target gets its pid and blocks ~1,000 times a
    second (1 ms sleeps, over offcpu.min_block_us) before the next discovery
    pass: none of its blocking may land in the block profile."""
    wl = Workload([sys.executable, "-c", NAPPER], wait_line=False)
    pid = wl.pid
    pp = Podprof("--pid", str(pid), "--set", "discovery.interval_ms=60000",
                 "--set", "heap.enabled=false", "--set", "offcpu.always_on=true")
    try:
        pp.wait_log(r"target: pid %d \(python" % pid, timeout=30)
        # The same napper as the target: its blocking is recorded.
        prof = pp.profile("/debug/pprof/block?seconds=1")
        n0 = sum(s["values"][0] for s in prof["samples"])
        check(n0 > 0, "the target's blocking was not recorded")
        wl.kill()
        wl2 = spawn_with_pid([sys.executable, "-c", NAPPER], pid)
        if wl2 is None:
            raise Skip("pid %d not had again" % pid)
        time.sleep(0.2)
        prof = pp.profile("/debug/pprof/block?seconds=2")
        n = sum(s["values"][0] for s in prof["samples"])
        print("block profile: %d contentions of the target in 1 s, %d in 2 s once pid %d was "
              "reused" % (n0, n, pid), file=sys.stderr)
        check(n == 0, "%d blocking events of the process that reused pid %d were recorded"
              % (n, pid))
        check(pp.metrics().get("podprof_offcpu_exited_targets_total", 0) >= 1,
              "the exit is not counted")
        check(wl2.alive(), "the napper died")
        wl2.kill()
    finally:
        pp.stop()


if __name__ == "__main__":
    run([test_heap_uprobe_not_inherited, test_heap_agent_not_inherited,
         test_heap_live_not_inherited, test_offcpu_not_inherited])
