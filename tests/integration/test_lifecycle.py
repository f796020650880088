#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Process lifecycle: a pre-fork server recycling its workers (5,000 short
children) keeps having its new children profiled, and podprof releases the
data of the children that exited, so what it holds and its RSS stay flat."""
import os
import time

from harness import (Podprof, Workload, check, held_kb, leaf_function, log, profile_until, rss_kb,
                     run, sanitized, wait_for)

RECYCLER = os.environ.get("WL_RECYCLER")
CHILDREN = 5000
CAP = 256 * 4 + 64  # processes held: limits.max_targets (default 256) * 4 + 64


def held(m):
    """harness.held_kb plus the processes held (exited ones until released):
    128 kB each for their maps, mappings, thread names and the agent's
    per-process unwinder state (measured: about 120 kB of RSS each)."""
    return held_kb(m) + 128 * m.get("podprof_store_processes_held", 0)


def line(wl, deadline):
    check(time.time() < deadline, "recycler too slow")
    s = wl.p.stdout.readline().decode(errors="replace").split()
    check(len(s) == 2, "recycler stopped: %r" % s)
    return s[0], int(s[1])


def test_5000_children():
    # Eight workers, each child burns 2 ms of CPU then idles 50 ms: 5,000
    # lifetimes in about 35 s, a third of a core. At 499 Hz most children
    # are sampled, so adopted into the store (the idle time leaves them
    # alive until their first sample is processed). Linger is 60 s, so most
    # releases happen at the processes cap (limits.max_targets * 4 + 64 =
    # 1088).
    wl = Workload([RECYCLER, str(CHILDREN), "8", "2", "50"])
    pp = Podprof("--pid", str(wl.pid), "--set", "heap.enabled=false",
                 "--set", "offcpu.enabled=false", "--set", "threads.enabled=false",
                 "--set", "cpu.always_on=true",
                 "--set", "cpu.frequency_hz=499")
    deadline = time.time() + 170
    warm = None
    held_max = 0
    trace = []
    t0 = time.time()
    while True:
        what, k = line(wl, deadline)
        m = pp.metrics()
        held_max = max(held_max, m["podprof_store_processes_held"])
        trace.append((k, rss_kb(pp.p.pid), m["podprof_store_processes_held"], int(held(m)),
                      m["podprof_store_released_procs_total"]))
        if what == "reaped" and k == 2500:
            warm = (rss_kb(pp.p.pid), held(m))
        if what == "phase2":
            break
    log("%d children in %.1f s; (children, RSS kB, processes held, held kB, released): %s" %
        (CHILDREN, time.time() - t0, [tuple(int(x) for x in t) for t in trace]))
    check(warm is not None, "no warm-up point")
    # The children started from now on burn in late_child_burn.
    def tally(prof):
        total = late = children = 0
        pids, leaves = set(), {}
        for s in prof["samples"]:
            total += s["values"][0]
            if s["num_labels"]["pid"][0] != wl.pid:
                children += s["values"][0]
            leaf = leaf_function(prof, s)
            leaves[leaf] = leaves.get(leaf, 0) + s["values"][0]
            if leaf == "late_child_burn":
                late += s["values"][0]
                pids.add(s["num_labels"]["pid"][0])
        return total, late, children, pids, leaves

    # The counts checked below need the children to have run: a window in
    # which a loaded machine gave them too little CPU is taken again (the
    # proportions are checked on the window used).
    prof = profile_until(pp, "/debug/pprof/profile?seconds=3",
                         lambda p: tally(p)[1] >= 20 and len(tally(p)[3]) >= 5)
    total, late, children, pids, leaves = tally(prof)
    m = pp.metrics()
    rss_b, held_b = rss_kb(pp.p.pid), held(m)
    log("window after child %d: %d of %d samples in late_child_burn from %d children; "
        "held processes max %d, now %d; released %d, dropped %d; stacks %d, locations %d; "
        "RSS %d -> %d kB, held %d -> %d kB" %
        (CHILDREN, late, total, len(pids), held_max, m["podprof_store_processes_held"],
         m["podprof_store_released_procs_total"], m["podprof_store_dropped_procs_total"],
         m["podprof_store_stacks"], m["podprof_store_locations"], warm[0], rss_b, warm[1],
         held_b))
    log("leaves: %s" % sorted(leaves.items(), key=lambda x: -x[1])[:8])
    # The parent only forks and waits: most of the target's CPU is its
    # children's (their burn, and the kernel's fork, page faults and exit
    # work); before the lifecycle, children past about 1,100 lifetimes were
    # not profiled at all.
    check(late >= 20, "late children's CPU missing: %d of %d samples" % (late, total))
    check(children >= 0.6 * total, "children's CPU only %d of %d samples" % (children, total))
    early = leaves.get("early_child_burn", 0)
    check(late >= 0.8 * (late + early), "late %d, early %d samples" % (late, early))
    check(len(pids) >= 5, "late samples from only %d children" % len(pids))
    # Exited children are released: what is held is bounded by the cap
    # (max_targets * 4 + 64), not by the 5,000 lifetimes.
    check(held_max <= CAP, "processes held reached %d" % held_max)
    check(m["podprof_store_released_procs_total"] > 0, "no process released")
    # No leak: once the target is gone (its live children's unwinders swept,
    # which under load can be many at once and are not in held()), podprof's
    # RSS may exceed its RSS during the warm-up (the processes cap reached and
    # released from) only by the growth of what it holds on purpose (held(),
    # exited processes linger 60 s) plus 16 MiB of slack for allocator
    # arenas, as in the soak test. Freed memory goes back to the kernel at
    # podprof's 10 s malloc_trim, which runs on its own thread whenever a
    # loaded machine lets it: the state at rest is polled (each poll checks
    # the whole condition) until it holds, for at most 90 s (nine trims).
    wl.kill()
    wait_for(lambda: pp.metrics().get("podprof_targets", 0) == 0, "the targets to be gone")
    rest = {}

    def at_rest():
        m = pp.metrics()
        rest.update(m=m, rss=rss_kb(pp.p.pid), held=held(m))
        rest["allowed"] = 16 * 1024 + max(0, rest["held"] - warm[1])
        return m.get("podprof_unwinders", 0) <= 1 and \
            (sanitized() or rest["rss"] - warm[0] <= rest["allowed"])

    t_rest = time.time()
    while not at_rest() and time.time() - t_rest < 90:
        time.sleep(0.5)
    m = rest["m"]
    log("at rest after %.1f s: targets %d, RSS %d kB (warm-up %d), held %d kB (warm-up %d)" %
        (time.time() - t_rest, m.get("podprof_targets", 0), rest["rss"], warm[0], rest["held"],
         warm[1]))
    check(m.get("podprof_unwinders", 0) <= 1,
          "%d unwinders held with no target left" % m.get("podprof_unwinders", 0))
    check(sanitized() or rest["rss"] - warm[0] <= rest["allowed"],
          "RSS grew %d kB after the warm-up (allowance %d kB)" % (rest["rss"] - warm[0],
                                                                 rest["allowed"]))
    check(pp.alive(), "podprof died")
    pp.stop()
    wl.kill()


if __name__ == "__main__":
    run([test_5000_children])
