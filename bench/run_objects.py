#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Processes of one binary: what podprof opens and holds for them.

Two workloads, each profiled by every build given (in turn, same
invocation):
- spin8: a parent running 8 `spin 1` processes (separate execs, so each
  loads the binary at its own address), niced to 19;
- recycler: tests/workloads/cpu/recycler, a pre-fork server keeping 8
  workers that each burn 2 ms and exit after 50 ms idle (forks, no exec).

podprof runs with its defaults plus cpu.always_on, cpu.frequency_hz=99 and
heap.ring_mib=4 (main's default since 2bf51ca; a branch made before it
defaults to 16 MiB, which would be 12 MiB of RSS apart),
under `strace -f --seccomp-bpf -y -e trace=open,openat` (only those calls
stop), for SECONDS; then /debug/pprof/profile?seconds=3 is fetched (every
location named) and /metrics read. Reported per build:
- opens of the workload's binary (strace lines whose fd resolves to it,
  whichever path was opened: /proc/PID/map_files/..., /proc/PID/root/...),
- opens of any file mapped by the targets (same, for every path in the
  targets' maps),
- podprof's fds on the binary at the end,
- podprof_store_locations (the store's cache of names: one per location),
  podprof_symbol_cache_bytes, podprof_objects (new builds),
- podprof's VmRSS and VmHWM at the end.

usage: [WORKLOADS=spin8,recycler] [REPS=1] bench/run_objects.py SPIN_RECYCLER_BUILD SECONDS BUILD...
(SPIN_RECYCLER_BUILD: a build dir with tests/workloads/cpu/{spin,recycler})
"""
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import free_port, loadavg, machine_line, parse_metrics  # noqa: E402
import urllib.request  # noqa: E402

wl_build = sys.argv[1]
seconds = int(sys.argv[2])
builds = sys.argv[3:]
SPIN = os.path.realpath(os.path.join(wl_build, "tests/workloads/cpu/spin"))
RECYCLER = os.path.realpath(os.path.join(wl_build, "tests/workloads/cpu/recycler"))

PARENT = r"""
import os, subprocess, sys, time
print(os.getpid(), flush=True)
ps = [subprocess.Popen(["nice", "-n", "19", sys.argv[1], "1"], stdout=subprocess.DEVNULL)
      for _ in range(8)]
while True:
    time.sleep(1)
"""


def get(port, path, timeout=60):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=timeout) as r:
        return r.read()


def metrics(port):
    return parse_metrics(get(port, "/metrics"))


def status(pid, key):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(key + r":\s+(\d+)", f.read()).group(1))


def mapped_files(pids):
    out = set()
    for p in pids:
        try:
            with open("/proc/%d/maps" % p) as f:
                for line in f:
                    s = line.split(None, 5)
                    if len(s) == 6 and s[5].startswith("/"):
                        out.add(os.path.realpath(s[5].strip()))
        except OSError:
            pass
    return out


def descendants(pid):
    kids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        kids.append(int(d))
            except OSError:
                pass
    return kids


def one(build, workload):
    if workload == "spin8":
        wl = subprocess.Popen([sys.executable, "-c", PARENT, SPIN], stdout=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, start_new_session=True)
    else:
        wl = subprocess.Popen([RECYCLER, "100000", "8", "2", "50"], stdout=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, start_new_session=True)
    wl.stdout.readline()
    port = free_port()
    trace = tempfile.mktemp(prefix="podprof-objects-", suffix=".strace")
    pp = subprocess.Popen(["strace", "-f", "--seccomp-bpf", "-y", "-qq", "-e",
                           "trace=open,openat", "-o", trace,
                           os.path.join(build, "cmd/podprof/podprof"), "--listen",
                           "127.0.0.1:%d" % port, "--pid", str(wl.pid), "--set",
                           "cpu.always_on=true", "--set", "cpu.frequency_hz=99",
                           "--set", "heap.ring_mib=4"],
                          stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    target = None
    try:
        deadline = time.time() + 30
        while True:
            try:
                metrics(port)
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.2)
        files = set()
        t_end = time.time() + seconds
        while time.time() < t_end:
            files |= mapped_files([wl.pid] + descendants(wl.pid))
            time.sleep(0.5)
        get(port, "/debug/pprof/profile?seconds=3")
        m = metrics(port)
        ppid = [p for p in descendants(pp.pid)]
        target = ppid[0] if ppid else pp.pid
        fds = 0
        for fd in os.listdir("/proc/%d/fd" % target):
            try:
                fds += os.readlink("/proc/%d/fd/%s" % (target, fd)) == (
                    SPIN if workload == "spin8" else RECYCLER)
            except OSError:
                pass
        rss = status(target, "VmRSS") / 1024
        hwm = status(target, "VmHWM") / 1024
    finally:
        # podprof itself (strace's child) first: strace exits with it.
        for k in descendants(pp.pid):
            os.kill(k, 15)
        try:
            pp.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pp.kill()
            pp.wait()
        os.killpg(wl.pid, 9)  # the workload and its children (own session)
        wl.wait()
    binary = SPIN if workload == "spin8" else RECYCLER
    opens_bin = opens_any = 0
    rx = re.compile(r"= \d+<([^>]*)>")
    with open(trace) as f:
        for line in f:
            mm = rx.search(line)
            if not mm:
                continue
            path = mm.group(1)
            if path == binary:
                opens_bin += 1
            if path in files:
                opens_any += 1
    os.unlink(trace)
    return dict(opens_bin=opens_bin, opens_any=opens_any, fds=fds,
                locations=m.get("podprof_store_locations", 0),
                cache=m.get("podprof_symbol_cache_bytes", 0) / 1e6,
                objects=m.get("podprof_objects", float("nan")),
                procs=m.get("podprof_store_released_procs_total", 0) +
                m.get("podprof_store_processes_held", 0),
                rss=rss, hwm=hwm)


print(machine_line())
print("load average before: %s" % (loadavg(),))
cols = ("opens_bin", "opens_any", "fds", "locations", "cache", "objects", "procs", "rss", "hwm")
# WORKLOADS=spin8,recycler (default both), REPS=n (runs of each build, alternating)
for workload in os.environ.get("WORKLOADS", "spin8,recycler").split(","):
    print("\n%s, %d s:" % (workload, seconds))
    print("| build | opens of the binary | opens of the targets' files | fds on the binary | "
          "store locations | symbol cache MB | objects | processes seen | VmRSS MiB | "
          "VmHWM MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for b in builds * int(os.environ.get("REPS", "1")):
        r = one(b, workload)
        print("| %s | %s |" % (b, " | ".join(
            ("%.1f" % r[c]) if isinstance(r[c], float) and c in ("cache", "rss", "hwm")
            else ("%d" % r[c] if r[c] == r[c] else "-") for c in cols)), flush=True)
print("load average after: %s" % (loadavg(),))
