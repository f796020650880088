#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Hostile targets, second part (issue 14): pid reuse in the collectors,
huge maps files, thread dumps of many threads, the per-target fd budget."""
import os
import re
import shutil
import struct
import sys
import subprocess
import tempfile
import time

from harness import (Podprof, Skip, Workload, check, count_fds, frames, profile_until, run,
                     sanitized, wait_for)
from test_hostile_target import spawn_with_pid

WL_SPIN = os.environ.get("WL_SPIN", "")
WL_DEEPSTACKS = os.environ.get("WL_DEEPSTACKS", "")


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
        # counted when podprof reads the exit event, in its own time
        wait_for(lambda: pp.metrics().get("podprof_cpu_exited_targets_total", 0) >= 1,
                 "the exit to be counted")
        check(wl2.alive(), "the burner died")
    finally:
        shutil.rmtree(d, ignore_errors=True)


# Maps one file page by page with alternating protections: every page is a
# mapping of its own (the kernel cannot merge neighbours that differ).
MAPPER = r"""
import ctypes, os, sys
path, n = sys.argv[1], int(sys.argv[2])
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
fd = os.open(path, os.O_RDONLY)
base = libc.mmap(None, n * 4096, 1, 2, fd, 0)  # PROT_READ, MAP_PRIVATE
assert base not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
for i in range(0, n, 2):
    if libc.mprotect(base + i * 4096, 4096, 0):
        sys.exit("mprotect: %d" % ctypes.get_errno())
print(os.getpid(), flush=True)
import signal; signal.pause()
"""


def status_kb(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def test_huge_maps():
    """A target with 150,000 mappings (about 26 MB of /proc/PID/maps text):
    podprof keeps at most 65,536 entries and reads at most 16 MiB, streamed
    (the text is never held whole), counts the cut and logs it once. Before,
    the whole text (up to 64 MiB) and every entry were held: podprof's peak
    RSS grew by more than the text's size."""
    n = 150000
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            old_max = int(f.read())
        if old_max < n + 1000:
            with open("/proc/sys/vm/max_map_count", "w") as f:
                f.write(str(n + 1000))
    except OSError as e:
        raise Skip("vm.max_map_count: %s" % e)
    d = tempfile.mkdtemp(prefix="pp-r1-")
    try:
        sub = os.path.join(d, "m" * 80)
        os.mkdir(sub)
        path = os.path.join(sub, "mapped")
        with open(path, "wb") as f:
            f.truncate(n * 4096)
        # Baseline: the same target with two mappings of the file.
        small = Workload([sys.executable, "-c", MAPPER, path, "2"])
        pp0 = Podprof("--pid", str(small.pid), "--set", "discovery.interval_ms=200")
        pp0.wait_log(r"target: pid %d \(python" % small.pid, timeout=30)
        time.sleep(1.0)
        pp0.profile("/debug/pprof/profile?seconds=1")
        base = status_kb(pp0.p.pid, "VmHWM")
        pp0.stop()
        small.kill()
        wl = Workload([sys.executable, "-c", MAPPER, path, str(n)])
        check(wl.first_line == str(wl.pid), "mapper failed: %r" % wl.first_line)
        with open("/proc/%d/maps" % wl.pid, "rb") as f:
            text_bytes = len(f.read())
        pp = Podprof("--pid", str(wl.pid), "--set", "discovery.interval_ms=200")
        pp.wait_log(r"target: pid %d \(python" % wl.pid, timeout=30)
        hwm0 = status_kb(pp.p.pid, "VmHWM")
        time.sleep(1.0)  # several discovery passes read the maps again
        pp.profile("/debug/pprof/profile?seconds=1")
        rss = status_kb(pp.p.pid, "VmHWM")
        print("maps text %d KiB; podprof VmHWM %d KiB (at registration %d KiB), "
              "%d KiB with 2 mappings" % (text_bytes >> 10, rss, hwm0, base), file=sys.stderr)
        check(text_bytes > (20 << 20), "the mapper made only %d bytes of maps" % text_bytes)
        # Holding the text whole alone would grow the peak by its size (the
        # whole-file reads grew it by five times the text); what is kept is
        # bounded by the entry cap, parsed by several consumers (measured
        # +10-15 MB for 26 MB of text).
        check(sanitized() or (rss - base) * 1024 < text_bytes,
              "podprof's peak RSS grew by %d KiB for %d KiB of maps text"
              % (rss - base, text_bytes >> 10))
        # the cut is logged after it is counted, by a pass a loaded machine
        # may run late
        pp.wait_log(r"maps cut after", timeout=60)
        m = pp.metrics()
        check(m.get("podprof_maps_truncated_total", 0) >= 1, "cut not counted")
        check(m.get("podprof_targets") == 1, "target lost: %r" % m.get("podprof_targets"))
        check(len([l for l in pp.lines if "maps cut after" in l]) == 1, "not logged once")
        wl.kill()
    finally:
        shutil.rmtree(d, ignore_errors=True)
        try:
            with open("/proc/sys/vm/max_map_count", "w") as f:
                f.write(str(old_max))
        except OSError:
            pass


def dump_growth_kb(nthreads, stack):
    """podprof's peak RSS growth over one full thread dump of a deepstacks
    target with nthreads threads, and the dump's text."""
    wl = Workload([WL_DEEPSTACKS, str(nthreads)])
    pp = Podprof("--pid", str(wl.pid), "--set", "discovery.interval_ms=200",
                 "--set", "cpu.stack_bytes=%d" % stack, "--set", "threads.min_interval_ms=0",
                 "--set", "threads.dump_timeout_ms=60000", "--set", "threads.max_pause_ms=1000")
    try:
        pp.wait_log(r"target: pid %d \(deepstacks\)" % wl.pid, timeout=30)
        time.sleep(0.5)
        hwm0 = status_kb(pp.p.pid, "VmHWM")
        st, _h, body = pp.request("/debug/pprof/goroutine?debug=2")
        hwm1 = status_kb(pp.p.pid, "VmHWM")
        check(st == 200, "goroutine?debug=2: %s" % st)
        return hwm1 - hwm0, body.decode(errors="replace")
    finally:
        pp.stop()
        wl.kill()


def test_thread_dump_memory():
    """Full thread dumps of targets with 50 and 600 threads parked under
    ~96 KiB of stack each, copying 64 KiB of stack per thread: podprof
    copies, unwinds and writes out a batch of threads at a time, so the
    550 more threads cost their text, not their stacks. Before, every
    thread's stack copy was held at once (550 x 64 KiB more, 34 MiB)."""
    few, many, stack = 50, 600, 65528
    g_few, _ = dump_growth_kb(few, stack)
    g_many, text = dump_growth_kb(many, stack)
    print("thread dump peak RSS growth: %d KiB with %d threads, %d KiB with %d; "
          "%d bytes of text" % (g_few, few, g_many, many, len(text)), file=sys.stderr)
    check(re.search(r"%d threads" % (many + 1), text), "not every thread listed:\n%s"
          % text[:300])
    check(text.count("dive") >= many, "stacks not unwound: %d dive frames" % text.count("dive"))
    held = (many - few) * stack // 1024
    check(sanitized() or g_many - g_few < held // 2, "peak RSS grew by %d KiB more for %d more threads "
          "(%d KiB of stack copies)" % (g_many - g_few, many - few, held))


# Maps each file given executable, then burns CPU (so the unwinder is built).
EXEC_MAPPER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
for path in sys.argv[1:]:
    fd = os.open(path, os.O_RDONLY)
    if libc.mmap(None, os.fstat(fd).st_size, 5, 2, fd, 0) in (None, 2**64 - 1):
        sys.exit("mmap %s: %d" % (path, ctypes.get_errno()))
    os.close(fd)
print(os.getpid(), flush=True)
x = 0
while True:
    x += 1
"""

def start_mapper(d, nfiles):
    """A target that maps nfiles distinct copies of libwlspin.so (in d)
    executable, and then opens nothing more."""
    lib = os.path.join(os.path.dirname(WL_SPIN), "libwlspin.so")
    paths = []
    for i in range(nfiles):
        p = os.path.join(d, "lib%03d.so" % i)
        shutil.copy(lib, p)
        paths.append(p)
    wl = Workload([sys.executable, "-c", EXEC_MAPPER] + paths)
    check(wl.first_line == str(wl.pid), "mapper failed: %r" % wl.first_line)
    return wl



def test_fd_budget():
    """A target that maps 300 distinct executable ELF files: the unwinder
    keeps two fds per file, so before it held 600+ fds for this one target.
    Now one target's unwinder keeps at most 256 (files past the budget get
    no CFI), the hit is counted and logged, and the target stays a target
    (never "exited")."""
    nfiles, budget = 300, 256
    d = tempfile.mkdtemp(prefix="pp-r1-")
    try:
        wl = start_mapper(d, nfiles)
        pp = Podprof("--pid", str(wl.pid), "--set", "discovery.interval_ms=200")
        pp.wait_log(r"target: pid %d \(python" % wl.pid, timeout=30)
        fds0 = count_fds(pp.p.pid)
        # (a window a loaded machine left without the target's samples is
        # taken again)
        prof = profile_until(pp, "/debug/pprof/profile?seconds=2", lambda p: p["samples"])
        fds1 = count_fds(pp.p.pid)
        print("podprof fds: %d before the profile, %d after (%d files mapped)"
              % (fds0, fds1, nfiles), file=sys.stderr)
        check(sum(s["values"][0] for s in prof["samples"]) > 0, "no samples of the target")
        check(fds1 - fds0 <= budget + 16, "podprof holds %d more fds for one target "
              "(budget %d)" % (fds1 - fds0, budget))
        pp.wait_log(r"fd budget", timeout=60)
        m = pp.metrics()
        check(m.get("podprof_unwind_fd_budget_total", 0) >= 1, "budget hit not counted")
        check(m.get("podprof_targets") == 1, "target lost")
        check(not [l for l in pp.lines if "exited" in l], "the target was taken for exited")
        wl.kill()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_maps_caps_configured():
    """limits.max_maps_entries and limits.max_maps_bytes set the maps read
    caps: a target with ~4,000 mappings (far under the defaults) is cut at
    1,000 entries, or at 64 KiB of text, counted and logged with the caps."""
    n = 4000
    d = tempfile.mkdtemp(prefix="pp-q14-")
    try:
        path = os.path.join(d, "mapped")
        with open(path, "wb") as f:
            f.truncate(n * 4096)
        wl = Workload([sys.executable, "-c", MAPPER, path, str(n)])
        check(wl.first_line == str(wl.pid), "mapper failed: %r" % wl.first_line)
        with open("/proc/%d/maps" % wl.pid, "rb") as f:
            text = f.read()
        check(text.count(b"\n") > 3000 and len(text) > (256 << 10),
              "the mapper made only %d mappings, %d bytes" % (text.count(b"\n"), len(text)))
        for key, val, rx in (("limits.max_maps_entries", "1000",
                              r"maps cut after 1000 entries, \d+ bytes \(caps: 1000 entries"),
                             ("limits.max_maps_bytes", "64KiB",
                              r"maps cut after \d+ entries, (\d+) bytes \(caps: \d+ entries, "
                              r"65536 bytes")):
            pp = Podprof("--pid", str(wl.pid), "--set", "discovery.interval_ms=200",
                         "--set", "%s=%s" % (key, val))
            try:
                pp.wait_log(r"target: pid %d \(python" % wl.pid, timeout=30)
                line = pp.wait_log(rx, timeout=60)
                m = re.search(r"(\d+) bytes \(caps", line)
                check(int(m.group(1)) <= 65536 or key != "limits.max_maps_bytes",
                      "read %s bytes past the 64 KiB cap" % m.group(1))
                time.sleep(0.5)  # more discovery passes: still logged once
                check(len([l for l in pp.lines if "maps cut after" in l]) == 1,
                      "%s: not logged once" % key)
                met = pp.metrics()
                check(met.get("podprof_maps_truncated_total", 0) >= 1, "%s: cut not counted" % key)
                check(met.get("podprof_targets") == 1, "%s: target lost" % key)
            finally:
                pp.stop()
        wl.kill()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_fd_budget_configured():
    """limits.max_target_fds sets the unwinder's budget: 40 distinct
    executable files (80 fds, under the default 256) with a budget of 32."""
    nfiles, budget = 40, 32
    d = tempfile.mkdtemp(prefix="pp-q14-")
    try:
        wl = start_mapper(d, nfiles)
        pp = Podprof("--pid", str(wl.pid), "--set", "discovery.interval_ms=200",
                     "--set", "limits.max_target_fds=%d" % budget)
        pp.wait_log(r"target: pid %d \(python" % wl.pid, timeout=30)
        prof = profile_until(pp, "/debug/pprof/profile?seconds=2", lambda p: p["samples"])
        fdd = "/proc/%d/fd" % pp.p.pid
        held = 0
        for fd in os.listdir(fdd):
            try:
                held += os.readlink(os.path.join(fdd, fd)).startswith(d + "/")
            except OSError:
                pass
        print("podprof holds %d fds on the %d files mapped (budget %d)"
              % (held, nfiles, budget), file=sys.stderr)
        check(sum(s["values"][0] for s in prof["samples"]) > 0, "no samples of the target")
        check(0 < held <= budget, "podprof holds %d fds on the target's files (budget %d)"
              % (held, budget))
        pp.wait_log(r"fd budget \(%d fds" % budget, timeout=60)
        m = pp.metrics()
        check(m.get("podprof_unwind_fd_budget_total", 0) >= 1, "budget hit not counted")
        check(m.get("podprof_targets") == 1, "target lost")
        pp.stop()
        wl.kill()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def count_opens(d, seconds, watching=None):
    """Opens of files in directory d by anyone during the next `seconds`
    (inotify IN_OPEN on d); sets the event watching once the watch is on."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    check(fd >= 0, "inotify_init1: %d" % ctypes.get_errno())
    try:
        check(libc.inotify_add_watch(fd, d.encode(), 0x20) >= 0,  # IN_OPEN
              "inotify_add_watch: %d" % ctypes.get_errno())
        if watching:
            watching.set()
        n, names, deadline = 0, set(), time.time() + seconds
        while time.time() < deadline:
            time.sleep(0.05)
            try:
                buf = os.read(fd, 1 << 16)
            except BlockingIOError:
                continue
            off = 0
            while off + 16 <= len(buf):
                _wd, mask, _cookie, ln = struct.unpack_from("iIII", buf, off)
                if mask & 0x20:
                    n += 1
                    names.add(buf[off + 16:off + 16 + ln].rstrip(b"\0"))
                off += 16 + ln
        return n, len(names)
    finally:
        os.close(fd)


def test_open_budget():
    """A target mapping 300 distinct executable files: before, podprof
    opened every one to read its build id when it registered the target,
    and every one again to scan it for allocator slots when it injected
    the heap agent (600+ opens), whatever the unwinder's budget. Now each
    of these opens at most limits.max_target_fds files a pass; the cut is
    counted and logged once."""
    nfiles, budget = 300, 32
    d = tempfile.mkdtemp(prefix="pp-q14-")
    try:
        wl = start_mapper(d, nfiles)
        # The mapper opens nothing more: every open from now on is podprof's.
        import threading
        res = {}
        watching = threading.Event()
        t = threading.Thread(target=lambda: res.update(r=count_opens(d, 6.0, watching)))
        t.start()
        # podprof starts once the watch is on (the thread may start late)
        check(watching.wait(60), "the inotify watch did not start")
        pp = Podprof("--pid", str(wl.pid), "--set", "discovery.interval_ms=200",
                     "--set", "limits.max_target_fds=%d" % budget)
        try:
            pp.wait_log(r"target: pid %d \(python" % wl.pid, timeout=30)
            t.join()
            opens, distinct = res["r"]
            print("podprof opened the target's files %d times (%d distinct of %d; budget %d)"
                  % (opens, distinct, nfiles, budget), file=sys.stderr)
            # Each consumer opens at most a budget's worth a pass: build ids,
            # the allocator search, the agent's slot scan at injection and
            # its rescan at patching (each + the executable and allocator),
            # the unwinder (two fds a file); the symbolizer opens only files
            # with samples. Unbounded, every file was opened (600+ opens).
            check(distinct < nfiles // 2 and opens <= 6 * budget,
                  "podprof opened the target's files %d times (%d distinct of %d) in its "
                  "first seconds; budget %d a pass" % (opens, distinct, nfiles, budget))
            pp.wait_log(r"opens for it in one pass \(%d" % budget, timeout=60)
            check(len([l for l in pp.lines if "opens for it in one pass" in l]) == 1,
                  "not logged once")
            m = pp.metrics()
            check(m.get("podprof_target_open_budget_total", 0) >= 1, "cut not counted")
            check(m.get("podprof_targets") == 1, "target lost")
        finally:
            pp.stop()
        wl.kill()
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    run([test_pid_reuse_not_sampled, test_huge_maps, test_thread_dump_memory, test_fd_budget,
         test_maps_caps_configured, test_fd_budget_configured, test_open_budget])
