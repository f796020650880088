#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The sidecar's memory model (issue 13): one unwinder per target process
shared by every consumer (CPU sampler, heap tracer, off-CPU tracer, thread
snapshots), and the CPU and off-CPU BPF ring buffers sized from the
sampling rate and the stack copy size rather than fixed, and every ring's
data pages mapped once (libbpf maps them twice, and both count in RSS).
Real podprof on the demo workload; what is checked is podprof's own
/proc/PID/fd and /proc/PID/smaps."""
import collections
import os
import re
import time

from harness import Podprof, Workload, check, profile_until, run

DEMO = os.environ.get("WL_DEMO")


def fd_targets(pid):
    c = collections.Counter()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            c[os.readlink("/proc/%d/fd/%s" % (pid, fd))] += 1
        except OSError:
            pass
    return c


def unwinder_fds(pid, exe):
    """fds podprof holds on the target's executable and on vdso images (the
    vdso image is opened by unwinders only)."""
    c = fd_targets(pid)
    vdso = sum(n for k, n in c.items() if "pp-vdso" in k)
    return vdso, c.get(exe, 0)


def start():
    wl = Workload([DEMO])
    pp = Podprof("--pid", str(wl.pid), "--set", "heap.sample_rate=4096")
    pp.wait_log("target: pid %d " % wl.pid)
    # the heap tracer's attach (an injected agent changes the maps, and the
    # unwinder rebuilds at its next use): done before the fds are counted
    pp.wait_log("heap: tracing pid %d " % wl.pid, timeout=60)
    return wl, pp


def test_one_unwinder_per_process():
    wl, pp = start()
    exe = os.readlink("/proc/%d/exe" % wl.pid)
    try:
        # a window with samples to unwind (a loaded machine may give none)
        profile_until(pp, "/debug/pprof/profile?seconds=2", lambda p: p["samples"])
        m1 = pp.metrics()
        check(m1.get("podprof_unwinds_total", 0) > 0, "the CPU window unwound nothing")
        vdso1, exe1 = unwinder_fds(pp.p.pid, exe)
        check(vdso1 > 0, "no unwinder fd after a CPU window: %s" % fd_targets(pp.p.pid))
        # Every other consumer unwinds the same process.
        deadline = time.time() + 20
        while pp.metrics().get("podprof_heap_events_total", 0) == 0 and time.time() < deadline:
            time.sleep(0.2)
        pp.profile("/debug/pprof/heap")
        st, _, body = pp.request("/debug/pprof/goroutine?debug=2")
        check(st == 200 and body, "goroutine dump status %d" % st)
        pp.profile("/debug/pprof/block?seconds=2")
        m2 = pp.metrics()
        for k in ("podprof_heap_events_total", "podprof_offcpu_events_total",
                  "podprof_thread_snapshots_total"):
            check(m2.get(k, 0) > 0, "%s is 0: that consumer did not run" % k)
        check(m2["podprof_unwinds_total"] > m1["podprof_unwinds_total"],
              "the other consumers unwound nothing")
        vdso2, exe2 = unwinder_fds(pp.p.pid, exe)
        # Not equal: the heap agent's injection changes the maps, and the
        # unwinder rebuilt for the new generation reopens files lazily, so
        # the count may fall (seen under ASan, where the window outlasts the
        # injection). One unwinder each would have at least doubled it.
        check(vdso2 <= vdso1 and exe2 <= exe1,
              "fds grew with the consumers (one unwinder each?): vdso %d -> %d, %s %d -> %d" %
              (vdso1, vdso2, exe, exe1, exe2))
        check(m2.get("podprof_unwinders") == 1,
              "podprof_unwinders is %s for one target process" % m2.get("podprof_unwinders"))
    finally:
        pp.stop()
        wl.kill()


def pow2_at_least(v, lo, hi):
    b = lo
    while b < v and b < hi:
        b *= 2
    return b


def possible_cpus():
    n = 0
    with open("/sys/devices/system/cpu/possible") as f:
        for part in f.read().strip().split(","):
            a, _, b = part.partition("-")
            n += int(b or a) - int(a) + 1
    return n


def bpf_mapped(pid):
    total = 0
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            m = re.match(r"^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \d+\s+anon_inode:bpf-map", line)
            if m:
                total += int(m.group(2), 16) - int(m.group(1), 16)
    return total


def test_bpf_rings_sized_from_rate():
    mib = 1 << 20
    # Defaults: 99 Hz, 32 KiB stacks (a record header is < 2 KiB); the CPU
    # ring holds 250 ms at the full rate on every possible CPU, the off-CPU
    # ring 1 MiB. The heap ring (heap.ring_mib 0) follows heap.sample_rate:
    # 16 MiB at 4 KiB, 4 MiB at the default 512 KiB. Each ring's data pages
    # are mapped once (libbpf maps them twice); the rest is small mmapped
    # BPF data.
    cpu = pow2_at_least(possible_cpus() * 99 * (32768 + 2048 + 8) // 4, mib, 64 * mib)
    cpu = min(cpu, pow2_at_least(possible_cpus() * 4 * mib, mib, 64 * mib))
    totals = {}
    for rate, heap in ((4096, 16 * mib), (None, 4 * mib)):
        wl = Workload([DEMO])
        pp = Podprof("--pid", str(wl.pid), *(("--set", "heap.sample_rate=%d" % rate) if rate else ()))
        try:
            pp.wait_log("target: pid %d " % wl.pid)
            pp.profile("/debug/pprof/profile?seconds=1")
            total = bpf_mapped(pp.p.pid)
        finally:
            pp.stop()
            wl.kill()
        bound = cpu + heap + mib + mib
        check(total >= 3 * mib, "BPF ring mappings not found: %d bytes" % total)
        check(total <= bound, "rate %s: BPF maps mapped %.1f MiB, more than rings sized from the "
              "rate (%.1f MiB)" % (rate, total / mib, bound / mib))
        totals[rate] = total
    # The same CPU and off-CPU rings both times: the difference is the heap
    # ring's, 16 - 4 MiB.
    check(totals[4096] - totals[None] == 12 * mib,
          "heap ring not sized from the rate: %.1f MiB at 4 KiB, %.1f at the default" %
          (totals[4096] / mib, totals[None] / mib))


if __name__ == "__main__":
    run([test_one_unwinder_per_process, test_bpf_rings_sized_from_rate])
