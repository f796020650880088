# SPDX-License-Identifier: Apache-2.0
"""Helpers shared by the bench/run_*.py scripts: starting podprof on a free
loopback port, scraping its /metrics, reading /proc, medians of paired
ratios. Benchmarks, not tests: nothing here asserts timings."""
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request


def free_port():
    """A loopback TCP port that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_cpu_seconds(pid):
    """utime + stime of pid (all threads), in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_rss_bytes(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)) * 1024


class Podprof:
    """podprof attached to one pid, serving on a free loopback port. Its
    stderr is drained by a thread (a full pipe would block its logging) and
    kept in .log."""

    def __init__(self, binary, pid, settings, timeout=30):
        self.port = free_port()
        self.pid_target = pid
        args = [binary, "--listen", "127.0.0.1:%d" % self.port, "--pid", str(pid)]
        for s in settings:
            args += ["--set", s]
        self.args = args
        # PODPROF_SET is the bench scripts' knob, not podprof's: podprof
        # refuses unknown PODPROF_* variables.
        env = {k: v for k, v in os.environ.items() if k != "PODPROF_SET"}
        self.proc = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     text=True, env=env)
        self.log = []
        self._attached = threading.Event()
        self._serving = threading.Event()
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()
        deadline = time.time() + timeout
        while not (self._attached.is_set() and self._serving.is_set()):
            if self.proc.poll() is not None or time.time() > deadline:
                self.stop()
                raise RuntimeError("podprof did not attach/serve:\n" + "".join(self.log[-20:]))
            time.sleep(0.02)

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)
            if "target: pid %d " % self.pid_target in line:
                self._attached.set()
            if "http: serving" in line:
                self._serving.set()

    @property
    def pid(self):
        return self.proc.pid

    def get(self, path, timeout=120):
        url = "http://127.0.0.1:%d%s" % (self.port, path)
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.read()

    def metrics(self):
        """/metrics as {name or name{labels}: float}."""
        return parse_metrics(self.get("/metrics"))

    def wait_warm(self, idle=0.02, interval=0.5, timeout=15.0):
        """Wait until podprof is warm: attached, injected, symbols loaded,
        using less than `idle` of one CPU over `interval` seconds (so a run
        timed after this measures the steady state, not podprof's start-up
        competing for the cores). Returns seconds waited."""
        t0 = time.monotonic()
        c = proc_cpu_seconds(self.proc.pid)
        while time.monotonic() - t0 < timeout:
            time.sleep(interval)
            c1 = proc_cpu_seconds(self.proc.pid)
            if c1 - c < idle * interval:
                break
            c = c1
        return time.monotonic() - t0

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout=5)
        return self.proc.returncode


def parse_metrics(body):
    """Prometheus text (bytes) as {name or name{labels}: float}."""
    out = {}
    for line in body.decode().splitlines():
        if not line or line.startswith("#"):
            continue
        k, _, v = line.rpartition(" ")
        try:
            out[k] = float(v)
        except ValueError:
            pass
    return out


def median(xs):
    xs = list(xs)
    return statistics.median(xs) if xs else float("nan")


def rotated(items, r):
    """items rotated by r: each repetition starts with a different
    configuration, so slow drifts of the machine's load do not always hit the
    same one."""
    r %= len(items)
    return items[r:] + items[:r]


def prioritize(nice=-10):
    """Run this script and its children (workload and profiler alike) at a
    higher priority than the other tenants of the shared VM, so that their
    load disturbs the comparison less. Returns the niceness in force."""
    # SIGTERM (e.g. from timeout) runs the scripts' finally blocks too, so
    # servers are stopped and kernel.bpf_stats_enabled is restored.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except OSError:
        pass
    return os.getpriority(os.PRIO_PROCESS, 0)


def machine_line():
    kernel = os.uname().release
    try:
        with open("/etc/debian_version") as f:
            deb = "Debian " + f.read().strip()
    except OSError:
        deb = "?"
    return "%d vCPU, kernel %s, %s" % (os.cpu_count(), kernel, deb)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def start_redis():
    port = free_port()
    p = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                          "--save", "", "--appendonly", "no", "--daemonize", "no",
                          "--logfile", ""], stdout=subprocess.DEVNULL)
    for _ in range(100):
        r = subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True)
        if r.stdout.strip() == "PONG":
            return p, port
        time.sleep(0.05)
    p.kill()
    raise RuntimeError("redis-server did not start")
