# SPDX-License-Identifier: Apache-2.0
"""Shared helpers for podprof's integration tests.

Each test file is a script: it starts real workloads and a real podprof,
fetches profiles over 127.0.0.1, decodes them with tests/tools/pprof-dump
(and `go tool pprof` where it matters) and asserts on the numbers with
tolerances derived from sampling statistics. Exit status 0 = pass,
77 = skipped, anything else = fail.
"""
import http.client
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

PODPROF = os.environ.get("PODPROF", "")
PPROF_DUMP = os.environ.get("PPROF_DUMP", "")
_children = []


def log(*a):
    print(*a, file=sys.stderr, flush=True)


class Skip(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def wait_for(probe, what, timeout=60, interval=0.1):
    """Polls probe() until it returns a true value and returns that value.
    For a state another process or thread produces in its own time: the
    deadline only guards against a hang (a loaded machine may take many
    seconds), it is never what the test measures. what: a string, or a
    function giving one (the state at the deadline)."""
    deadline = time.monotonic() + timeout
    while True:
        v = probe()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise AssertionError("timeout (%d s) waiting for %s" %
                                 (timeout, what() if callable(what) else what))
        time.sleep(interval)


def profile_until(pp, path, pred, timeout=60, **kw):
    """pp.profile(path) taken again until pred(profile) holds: one short
    window may hold too few samples of a workload a loaded machine starves
    for what a test checks (a name, a process). The deadline only guards
    against a hang; the caller checks the profile returned (the last)."""
    deadline = time.monotonic() + timeout
    while True:
        prof = pp.profile(path, **kw)
        if pred(prof) or time.monotonic() >= deadline:
            return prof
        log("  %s: not yet what the test needs (%d samples): another window" %
            (path, len(prof["samples"])))


def binom_tol(n, p, sigmas=5.0, systematic=0.03):
    """Tolerance on an observed fraction of n samples whose true value is p."""
    if n <= 0:
        return 1.0
    return sigmas * math.sqrt(max(p * (1 - p), 1e-9) / n) + systematic


class Workload:
    """A child process; the first stdout line is its pid when wait_line is set."""

    def __init__(self, argv, wait_line=True, env=None, **kw):
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  stdin=subprocess.DEVNULL, env=env, **kw)
        _children.append(self)
        self.pid = self.p.pid
        self.first_line = None
        if wait_line:
            self.first_line = self.p.stdout.readline().decode(errors="replace").strip()

    def alive(self):
        return self.p.poll() is None

    def kill(self):
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, signal.SIGKILL) if self._own_group() else self.p.kill()
            except ProcessLookupError:
                pass
            self.p.wait(timeout=10)

    def _own_group(self):
        try:
            return os.getpgid(self.p.pid) == self.p.pid
        except ProcessLookupError:
            return False


class Podprof:
    def __init__(self, *args, env=None, listen="127.0.0.1:0", wait_port=True, wrap=()):
        check(PODPROF and os.path.exists(PODPROF), "PODPROF not built")
        if not wrap and os.environ.get("PP_TEST_SIDECAR_CAPS") and PODPROF == os.environ.get("PODPROF"):
            wrap = SIDECAR_CAPS  # every podprof with only the sidecar's capabilities
        argv = list(wrap) + [PODPROF]
        if listen is not None:
            argv += ["--listen", listen]
        argv += list(args)
        e = dict(os.environ)
        for k in list(e):
            if k.startswith("PODPROF_"):
                del e[k]
        if env:
            e.update(env)
        self.argv = argv
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  stdin=subprocess.DEVNULL, env=e)
        _children.append(self)
        self.lines = []
        self.ports = []
        self._cv = threading.Condition()
        self._t = threading.Thread(target=self._reader, daemon=True)
        self._t.start()
        if wait_port:
            self.wait_log(r"\(port (\d+)\)", timeout=60)  # BPF verification on a loaded machine
            self.port = self.ports[0]
            # The server answers before the first discovery pass (which a
            # slow file system may lengthen); tests start once it is done.
            self.wait_log(r"discovery: first pass done", timeout=60)

    def _reader(self):
        for raw in self.p.stderr:
            line = raw.decode(errors="replace").rstrip("\n")
            m = re.search(r"\(port (\d+)\)", line)
            with self._cv:
                if m:
                    self.ports.append(int(m.group(1)))
                self.lines.append(line)
                self._cv.notify_all()
            if os.environ.get("PP_TEST_VERBOSE"):
                log("  podprof: " + line)
        with self._cv:
            self._cv.notify_all()

    def wait_log(self, pattern, timeout=30, start=0):
        rx = re.compile(pattern)
        deadline = time.time() + timeout
        with self._cv:
            while True:
                for line in self.lines[start:]:
                    if rx.search(line):
                        return line
                if self.p.poll() is not None and not self._t.is_alive():
                    raise AssertionError("podprof exited (%s) before logging %r:\n%s" %
                                         (self.p.returncode, pattern, "\n".join(self.lines[-30:])))
                left = deadline - time.time()
                if left <= 0:
                    raise AssertionError("timeout waiting for %r in podprof log:\n%s" %
                                         (pattern, "\n".join(self.lines[-30:])))
                self._cv.wait(min(left, 0.5))

    def log_text(self):
        with self._cv:
            return "\n".join(self.lines)

    def request(self, path, method="GET", body=None, headers=None, timeout=60, port=None):
        c = http.client.HTTPConnection("127.0.0.1", port or self.port, timeout=timeout)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            data = r.read()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, data
        finally:
            c.close()

    def profile(self, path, timeout=60, port=None):
        st, hdr, body = self.request(path, timeout=timeout, port=port)
        check(st == 200, "GET %s: status %d: %r" % (path, st, body[:300]))
        check(hdr.get("content-type", "").startswith("application/octet-stream"),
              "GET %s: content-type %r" % (path, hdr.get("content-type")))
        check("content-encoding" not in hdr, "GET %s: Content-Encoding must not be set" % path)
        prof = decode(body)
        check(prof["check"] == "ok", "GET %s: invalid profile: %s" % (path, prof["check"]))
        prof["_raw"] = body
        return prof

    def metrics(self):
        st, _, body = self.request("/metrics")
        check(st == 200, "/metrics status %d" % st)
        out = {}
        for line in body.decode().splitlines():
            if not line or line.startswith("#"):
                continue
            name, _, val = line.rpartition(" ")
            try:
                out[name] = float(val)
            except ValueError:
                pass
        return out

    def alive(self):
        return self.p.poll() is None

    def stop(self, expect_code=0):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                bt = ""
                if shutil.which("gdb"):
                    r = subprocess.run(["gdb", "-p", str(self.p.pid), "-batch", "-ex",
                                        "thread apply all bt 12"], stdout=subprocess.PIPE,
                                       stderr=subprocess.DEVNULL, timeout=60)
                    bt = r.stdout.decode(errors="replace")[-6000:]
                self.p.kill()
                self.p.wait()
                raise AssertionError("podprof did not stop within 20 s of SIGTERM; log:\n%s\n%s" %
                                     ("\n".join(self.lines[-20:]), bt))
        self._t.join(timeout=5)
        if expect_code is not None:
            check(self.p.returncode == expect_code,
                  "podprof exit code %s, log:\n%s" % (self.p.returncode, "\n".join(self.lines[-40:])))
        return self.p.returncode

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


_asan = None


def sanitized():
    """True when podprof is an ASan build: its quarantine keeps freed memory
    resident, so RSS says nothing about leaks there (LeakSanitizer does)."""
    global _asan
    if _asan is None:
        try:
            with open(PODPROF, "rb") as f:
                _asan = b"__asan_init" in f.read()
        except OSError:
            _asan = False
    return _asan


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


# podprof as the sidecar runs it: only these capabilities (README, Privileges).
SIDECAR_CAPS = ("setpriv", "--bounding-set=-all,+bpf,+perfmon,+sys_ptrace,+setuid,+setgid", "--inh-caps=-all",
                "--no-new-privs")


def proc_cpu_ns(pid):
    """The process's CPU time, exited threads included, to the nanosecond:
    the scheduler's runtime through its CPU clock (clock_getcpuclockid's
    encoding: ~pid << 3 | CPUCLOCK_SCHED). /proc/PID/stat's tick-based
    utime+stime is far off for threads that run in short bursts."""
    return int(time.clock_gettime((~pid << 3) | 2) * 1e9)


class CpuTrack:
    """Records a process's CPU time (proc_cpu_ns) so the CPU time of the exact
    span a profile covers (its time_nanos and duration_nanos) can be read
    afterwards, whatever the request's latency. A point is taken when the
    track starts and when it stops, both in the caller's thread (so the track
    covers from before the request to after its response however late the
    sampling thread runs), and every 20 ms in between by a thread; a read of
    a time the track does not cover yet waits until it does."""

    def __init__(self, pid):
        self.pid = pid
        self.points = []
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._point()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _point(self):
        """Appends (time, CPU time); False once the process is gone."""
        t0 = time.time()
        try:
            cpu = proc_cpu_ns(self.pid)
        except OSError:
            return os.path.exists("/proc/%d" % self.pid)  # else: a transient failure
        with self._cond:
            # the CPU clock was read between t0 and now: its midpoint
            self.points.append(((t0 + time.time()) / 2, cpu))
            self._cond.notify_all()
        return True

    def _run(self):
        while not self._stop.is_set() and self._point():
            self._stop.wait(0.02)

    def stop(self):
        self._stop.set()
        self._t.join()
        self._point()

    def _at(self, t):
        with self._cond:
            # the sampling thread may lag: wait for a point at or after t
            # while it runs (the deadline only guards against a hang)
            self._cond.wait_for(lambda: (self.points and self.points[-1][0] >= t) or
                                not self._t.is_alive(), timeout=120)
            pts = list(self.points)
        check(pts and pts[0][0] <= t <= pts[-1][0],
              "CPU track does not cover %.3f (%s)" %
              (t, "%.3f..%.3f" % (pts[0][0], pts[-1][0]) if pts else "no points"))
        for (t0, c0), (t1, c1) in zip(pts, pts[1:]):
            if t0 <= t <= t1:
                return c0 + (c1 - c0) * ((t - t0) / (t1 - t0) if t1 > t0 else 0)
        return pts[-1][1]

    def during(self, prof):
        """CPU time of the process within the profile's window."""
        end = prof["time_nanos"] / 1e9
        return self._at(end) - self._at(end - prof["duration_nanos"] / 1e9)


def thread_runtimes(pid):
    """{tid: scheduler runtime in ns} of the live threads of pid."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                out[int(tid)] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return out


def check_cpu_rate(samples, cpu_ns, hz, what):
    """A process's samples follow its CPU time: every CPU's timer fires once
    a period and samples whatever runs, so the count is cpu_ns / period,
    give or take the phase of each burst and the window's edges. 10% is far
    above that for the hundreds of samples the tests take."""
    want = cpu_ns * hz / 1e9
    log("%s: %d samples, %.0f predicted by %.2f s of CPU time" % (what, samples, want, cpu_ns / 1e9))
    check(want >= 100, "%s: only %.2f s of CPU time in the window" % (what, cpu_ns / 1e9))
    check(abs(samples - want) <= 0.10 * want,
          "%s: %d samples, %.0f predicted by its CPU time (+-10%%)" % (what, samples, want))


def held_kb(m):
    """What podprof reports it holds on purpose, in kB, from its /metrics:
    a generous per-item size for each stack (frames, labels), location
    (symbolized strings) and live allocation, plus the symbol cache. RSS
    growth beyond the growth of this (and a fixed slack for the allocator's
    arenas) is a leak."""
    return (4 * m.get("podprof_store_stacks", 0) + 1 * m.get("podprof_store_locations", 0)
            + 0.25 * m.get("podprof_store_live_allocations", 0)
            + m.get("podprof_symbol_cache_bytes", 0) / 1024)


def decode(body):
    check(PPROF_DUMP and os.path.exists(PPROF_DUMP), "PPROF_DUMP not built")
    r = subprocess.run([PPROF_DUMP, "-"], input=body, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    check(r.returncode == 0, "pprof-dump failed: %s" % r.stderr.decode(errors="replace")[:500])
    return json.loads(r.stdout)


def sample_type_index(prof, name):
    for i, (t, _u) in enumerate(prof["sample_types"]):
        if t == name:
            return i
    raise AssertionError("no sample type %s in %s" % (name, prof["sample_types"]))


def frames(prof, sample):
    """Function names of a sample, leaf first (inlined functions expanded)."""
    locs = prof.setdefault("_locs", {l["id"]: l for l in prof["locations"]})
    out = []
    for lid in sample["locations"]:
        loc = locs[lid]
        if not loc["lines"]:
            out.append(loc["address"])
        for line in loc["lines"]:
            out.append(line["function"])
    return out


def leaf_function(prof, sample):
    f = frames(prof, sample)
    return f[0] if f else None


def total(prof, index=0):
    return sum(s["values"][index] for s in prof["samples"])


def fraction_by(prof, pred, index=0):
    tot = total(prof, index)
    hit = sum(s["values"][index] for s in prof["samples"] if pred(s))
    return (hit / tot if tot else 0.0), tot


_go_env = None


def go_pprof(*args, timeout=120):
    """Runs `go tool pprof ARGS` the way a user does; returns stdout."""
    global _go_env
    go = shutil.which("go")
    if not go:
        raise Skip("go not installed")
    if _go_env is None:
        home = tempfile.mkdtemp(prefix="podprof-go-")
        _go_env = dict(os.environ, HOME=home, GOCACHE=os.path.join(home, "cache"),
                       GOPATH=os.path.join(home, "gopath"), GOTOOLCHAIN="local",
                       GOFLAGS="", PPROF_TMPDIR=home)
    r = subprocess.run([go, "tool", "pprof"] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=_go_env, timeout=timeout)
    check(r.returncode == 0, "go tool pprof %s failed (%d): %s" %
          (" ".join(args), r.returncode, r.stderr.decode(errors="replace")[-1500:]))
    return r.stdout.decode(errors="replace")


def write_tmp(data, suffix=".pb.gz"):
    fd, path = tempfile.mkstemp(prefix="podprof-test-", suffix=suffix)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def count_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def run(tests):
    """Runs test functions; prints a line each; exits with the suite's status."""
    failed = 0
    skipped = 0
    ran = 0
    only = os.environ.get("PP_TEST_ONLY")
    for t in tests:
        if only and only not in t.__name__:
            continue
        ran += 1
        t0 = time.time()
        try:
            t()
            log("ok   %s (%.1fs)" % (t.__name__, time.time() - t0))
        except Skip as e:
            skipped += 1
            log("skip %s: %s" % (t.__name__, e))
        except Exception:
            failed += 1
            log("FAIL %s (%.1fs)\n%s" % (t.__name__, time.time() - t0, traceback.format_exc()))
        finally:
            for c in reversed(_children):
                try:
                    c.kill()
                except Exception:
                    pass
            _children.clear()
    # only what ran: a PP_TEST_ONLY filter that matches nothing says 0 passed
    log("%d passed, %d failed, %d skipped" % (ran - failed - skipped, failed, skipped))
    if failed or not ran:
        sys.exit(1)
    if skipped == len(tests):
        sys.exit(77)
    sys.exit(0)
