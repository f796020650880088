#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Targets (and their environment) working against podprof (issue 14):
podprof's file descriptors exhausted while a target lives, a pid reused,
names and paths full of quotes, backslashes and newlines. podprof keeps
its targets, keeps serving, and says what it refused."""
import os
import re
import resource
import subprocess
import time

from harness import Podprof, Workload, check, run


def prlimit_nofile(pid, soft, hard):
    subprocess.run(["prlimit", "--pid", str(pid), "--nofile=%d:%d" % (soft, hard)], check=True)


def test_emfile_is_not_exit():
    """With no file descriptor left (EMFILE), a live target cannot be read
    but has not exited: it must not be dropped (and re-attached when fds
    come back), and the failures are counted."""
    wl = Workload(["sleep", "120"], wait_line=False)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # started with a soft limit below the hard one (prlimit execs podprof)
    pp = Podprof("--pid", str(wl.pid), "--set", "discovery.interval_ms=200",
                 wrap=("prlimit", "--nofile=256:%d" % hard))
    pp.wait_log(r"target: pid %d " % wl.pid, timeout=30)
    # podprof raised its soft limit to the hard one at start
    with open("/proc/%d/limits" % pp.p.pid) as f:
        lim = re.search(r"Max open files\s+(\d+)\s+(\d+)", f.read())
    check(lim and lim.group(1) == lim.group(2),
          "podprof's RLIMIT_NOFILE not raised to its hard limit: %s" % (lim and lim.group(0)))
    mark = len(pp.lines)
    # no fd left: every open podprof makes now fails with EMFILE (only the
    # soft limit moves: raising a hard limit needs CAP_SYS_RESOURCE)
    # (the limit bounds fd numbers: a new fd takes the lowest free one)
    fds = set(int(x) for x in os.listdir("/proc/%d/fd" % pp.p.pid))
    lowest_free = min(set(range(len(fds) + 1)) - fds)
    prlimit_nofile(pp.p.pid, lowest_free, hard)
    time.sleep(2.0)  # ten discovery passes
    prlimit_nofile(pp.p.pid, hard, hard)
    time.sleep(0.6)
    check(wl.alive(), "the target died")
    lines = pp.lines[mark:]
    exited = [l for l in lines if re.search(r"target: pid %d .*exited" % wl.pid, l)]
    check(not exited, "a live target was taken for exited under EMFILE:\n%s" % "\n".join(lines[:20]))
    m = pp.metrics()
    errs = sum(v for k, v in m.items() if k.startswith("podprof_target_read_errors_total"))
    check(errs > 0, "no podprof_target_read_errors_total counted: %s" %
          {k: v for k, v in m.items() if "error" in k})
    check(any(re.search(r"too many open files|EMFILE", l, re.I) for l in lines),
          "no log line says why:\n%s" % "\n".join(lines[:20]))
    st, _, _ = pp.request("/healthz")
    check(st == 200, "/healthz %d" % st)


if __name__ == "__main__":
    run([test_emfile_is_not_exit])
