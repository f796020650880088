#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A target maps a file from a FUSE file system that then stops answering
(issue 25 item 3). podprof serves, keeps discovering new targets and stops
on SIGTERM, whether the file system froze before podprof started or after.

The file system is tests/workloads/faults/fusefreeze.c, a FUSE server on
/dev/fuse; it freezes when the name "freeze" is looked up."""
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

from harness import Podprof, Skip, Workload, check, run, wait_for, write_tmp

SPIN = os.environ.get("WL_SPIN")
FUSEFREEZE = os.environ.get("WL_FUSEFREEZE")
FUSEMAPPER = os.environ.get("WL_FUSEMAPPER")
CHURNLIB = os.environ.get("WL_CHURNLIB")


class FrozenFs:
    """fusefreeze mounted on a fresh directory; .lib is its one file."""

    def __init__(self, mode="noread"):
        if not os.path.exists("/dev/fuse"):
            raise Skip("no /dev/fuse")
        self.dir = tempfile.mkdtemp(prefix="pp-fuse-")
        self.lib = os.path.join(self.dir, "lib")
        self.p = subprocess.Popen([FUSEFREEZE, self.dir, CHURNLIB, mode],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  stdin=subprocess.DEVNULL)
        line = self.p.stdout.readline().decode().strip()
        if line != "ready":
            err = self.p.stderr.read().decode(errors="replace")
            self.p.wait()
            os.rmdir(self.dir)
            if self.p.returncode == 77:
                raise Skip("cannot mount a FUSE file system: " + err.strip())
            raise AssertionError("fusefreeze: %r %s" % (line, err))

    def freeze(self):
        # The lookup never gets an answer: done from a thread left behind
        # (it ends with ENOTCONN when the server is killed).
        def look():
            try:
                os.stat(os.path.join(self.dir, "freeze"))
            except OSError:
                pass
        threading.Thread(target=look, daemon=True).start()
        wait_for(lambda: b"frozen" in self._err_peek(), "fusefreeze to freeze", timeout=20)

    def _err_peek(self):
        # stderr holds one short line once frozen; read it without blocking
        os.set_blocking(self.p.stderr.fileno(), False)
        try:
            chunk = self.p.stderr.read() or b""
        except (BlockingIOError, TypeError):
            chunk = b""
        self._err = getattr(self, "_err", b"") + chunk
        return self._err

    def close(self):
        # Killing the server aborts the connection: every request waiting
        # on it ends (ENOTCONN), then the mount can go.
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        subprocess.run(["umount", "-l", self.dir], stderr=subprocess.DEVNULL)
        try:
            os.rmdir(self.dir)
        except OSError:
            pass


def config(*exes):
    text = "targets:\n" + "".join("  - exe: %s\n" % os.path.realpath(e) for e in exes)
    return write_tmp(text.encode(), ".yaml")


def start_podprof(cfg):
    return Podprof("--config", cfg, "--set", "discovery.interval_ms=200",
                   "--set", "cpu.frequency_hz=99")


def check_serving(pp):
    st, _, body = pp.request("/healthz", timeout=20)
    check(st == 200, "/healthz %d: %r" % (st, body[:200]))
    st, _, _ = pp.request("/debug/pprof/", timeout=20)
    check(st == 200, "/debug/pprof/ %d" % st)


def check_discovers(pp):
    """A process started now is found and profiled: discovery goes on."""
    wl = Workload([SPIN, "1"])
    pp.wait_log(r"target: pid %d " % wl.pid, timeout=60)
    prof = pp.profile("/debug/pprof/profile?seconds=2")
    n = sum(s["values"][0] for s in prof["samples"])
    check(n > 0, "no CPU sample in a 2 s window of a spinning target")
    wl.kill()


def file_hangs(pp):
    m = pp.metrics()
    return m.get("podprof_target_file_hangs_total", 0) + m.get(
        "podprof_target_file_skipped_total", 0)


def stop_in_time(pp):
    """SIGTERM ends podprof well before a generous bound (no tight timing)."""
    t0 = time.time()
    pp.stop()  # SIGTERM, fails after 20 s
    check(time.time() - t0 < 20, "podprof took over 20 s to stop")


def test_frozen_before_start():
    fs = FrozenFs()
    try:
        wl = Workload([FUSEMAPPER, fs.lib])
        check(fs.lib in open("/proc/%d/maps" % wl.pid).read(), "the file is not mapped")
        fs.freeze()
        pp = Podprof("--config", config(FUSEMAPPER, SPIN), "--set", "discovery.interval_ms=200",
                     "--set", "cpu.frequency_hz=99", wait_port=False)
        pp.wait_log(r"\(port (\d+)\)", timeout=60)
        pp.port = pp.ports[0]
        # the server answers while the first pass waits on the frozen file
        check_serving(pp)
        pp.wait_log(r"discovery: first pass done", timeout=60)
        at = lambda pat: [i for i, l in enumerate(pp.lines) if pat in l][0]
        check(at("(port ") < at("discovery: first pass done"),
              "the server started after the first discovery pass")
        pp.wait_log(r"target: pid %d " % wl.pid, timeout=60)
        wait_for(lambda: file_hangs(pp) > 0, "an access to the frozen file to be cut", timeout=60)
        check_discovers(pp)
        check_serving(pp)
        stop_in_time(pp)
    finally:
        fs.close()


def test_frozen_after_start():
    fs = FrozenFs()
    try:
        pp = start_podprof(config(FUSEMAPPER, SPIN))
        check_serving(pp)
        wl = Workload([FUSEMAPPER, fs.lib])
        fs.freeze()
        pp.wait_log(r"target: pid %d " % wl.pid, timeout=60)
        # Another process mapping the same (now frozen) file cannot start:
        # its open waits for ever. Discovery goes on regardless.
        for _ in range(2):
            check_discovers(pp)
        check_serving(pp)
        stop_in_time(pp)
    finally:
        fs.close()


def live_threads(pid):
    """Threads of pid that have not exited (an exited leader stays as a
    zombie while a thread lives on)."""
    n = 0
    try:
        for t in os.listdir("/proc/%d/task" % pid):
            try:
                stat = open("/proc/%d/task/%s/stat" % (pid, t)).read()
            except OSError:
                continue
            if stat.rpartition(")")[2].split()[0] not in ("Z", "X"):
                n += 1
    except FileNotFoundError:
        pass
    return n


def test_frozen_server_reads_and_drops():
    """The server reads requests and never answers: a thread of podprof
    waiting on one cannot be killed (the kernel waits uninterruptibly for
    the answer). podprof still serves and discovers; on SIGTERM every
    other thread ends, and the process is gone once the server is."""
    fs = FrozenFs("noanswer")
    try:
        wl = Workload([FUSEMAPPER, fs.lib])
        fs.freeze()
        pp = start_podprof(config(FUSEMAPPER, SPIN))
        check_serving(pp)
        pp.wait_log(r"target: pid %d " % wl.pid, timeout=60)
        wait_for(lambda: pp.metrics().get("podprof_target_file_stuck_threads", 0) >= 1,
                 "an opener thread stuck on the frozen file", timeout=60)
        check_discovers(pp)
        check_serving(pp)
        stuck = pp.metrics()["podprof_target_file_stuck_threads"]
        pp.p.send_signal(signal.SIGTERM)
        # the main thread and every thread not stuck in the kernel end
        wait_for(lambda: pp.p.poll() is not None or live_threads(pp.p.pid) <= stuck,
                 "podprof's threads but the stuck ones to end", timeout=30)
        fs.close()  # the connection ends: so does the stuck request
        pp.p.wait(timeout=20)
    finally:
        fs.close()


if __name__ == "__main__":
    run([test_frozen_before_start, test_frozen_after_start, test_frozen_server_reads_and_drops])
