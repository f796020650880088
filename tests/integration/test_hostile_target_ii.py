#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Hostile targets, second part (issue 14): pid reuse in the collectors,
huge maps files, thread dumps of many threads, the per-target fd budget."""
import os
import shutil
import tempfile

from harness import Podprof, Skip, Workload, check, frames, run
from test_hostile_target import spawn_with_pid

WL_SPIN = os.environ.get("WL_SPIN", "")


def test_pid_reuse_not_sampled():
    """The CPU sampler keeps its targets by pid in BPF. A target exits and a
    new process that is no target gets its pid and burns CPU before the
    next discovery pass (an hour away here): none of its samples may land
    in the profile, the old target's or any other."""
    d = tempfile.mkdtemp(prefix="pp-r1-")
    burner = os.path.join(d, "reuseburner")
    shutil.copy(WL_SPIN, burner)
    try:
        wl = Workload(["sleep", "120"], wait_line=False)
        pid = wl.pid
        pp = Podprof("--pid", str(pid), "--set", "discovery.interval_ms=60000")
        pp.wait_log(r"target: pid %d \(sleep\)" % pid, timeout=30)
        # The sampler's tables are filled once a profile was asked for.
        pp.profile("/debug/pprof/profile?seconds=1")
        wl.kill()
        wl2 = spawn_with_pid([burner, "2"], pid)
        if wl2 is None:
            raise Skip("pid %d not had again" % pid)
        prof = pp.profile("/debug/pprof/profile?seconds=2")
        n = sum(s["values"][0] for s in prof["samples"])
        burn = [s for s in prof["samples"] if any("hot_" in f for f in frames(prof, s))]
        check(n == 0 and not burn,
              "%d samples of the process that reused pid %d were taken (%d in hot_*)"
              % (n, pid, len(burn)))
        check(pp.metrics().get("podprof_cpu_exited_targets_total", 0) >= 1,
              "the exit is not counted")
        check(wl2.alive(), "the burner died")
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    run([test_pid_reuse_not_sampled])
