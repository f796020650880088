#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""podprof when the kernel refuses what a collector needs, without a
container runtime: podprof runs under a seccomp filter that fails bpf and
perf_event_open with EPERM (what podman's and CRI-O's default profiles do
without CAP_SYS_ADMIN), or with CAP_BPF/CAP_PERFMON taken away (setpriv).
The refused profiles must answer 500 "Could not enable ... profiling: <why
and fix>" (for curl-like clients, debug=1 and go tool pprof alike), /metrics
and the index page must show each collector's state and reason, the log must
say it once, and what still works must keep working.

Also without a runtime: a pod's PID namespace whose PID 1 is catatonit (the
pause process podman uses) and whose app is started by a shell wrapper:
podprof must leave catatonit out and name the busy app as the main binary."""
import os
import re
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import harness  # noqa: E402
from harness import Podprof, Skip, Workload, check, frames, go_pprof, run  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SPIN = os.environ.get("WL_SPIN")


def wrapper(prefix):
    """A one-file executable that runs podprof behind prefix (the harness takes one path)."""
    fd, path = tempfile.mkstemp(prefix="podprof-wrap-", suffix=".sh")
    with os.fdopen(fd, "w") as f:
        f.write("#!/bin/sh\nexec %s %s \"$@\"\n" % (" ".join(prefix), harness.PODPROF))
    os.chmod(path, 0o755)
    return path


def start(prefix, *args):
    real = harness.PODPROF
    w = wrapper(prefix)
    try:
        harness.PODPROF = w
        return Podprof("--set", "discovery.interval_ms=100", *args)
    finally:
        harness.PODPROF = real
        os.unlink(w)


def metric_lines(pp, name):
    st, _, body = pp.request("/metrics")
    check(st == 200, "/metrics status %d" % st)
    return [l for l in body.decode().splitlines() if l.startswith(name + "{")]


def collector_state(pp):
    out = {}
    for l in metric_lines(pp, "podprof_collector_state"):
        m = re.match(r'podprof_collector_state\{collector="(\w+)",state="(\w+)",reason="(.*)"\} 1$', l)
        check(m, "malformed line %r" % l)
        out[m.group(1)] = (m.group(2), m.group(3).replace('\\"', '"').replace("\\\\", "\\"))
    for l in metric_lines(pp, "podprof_collector_up"):
        m = re.match(r'podprof_collector_up\{collector="(\w+)"\} ([01])$', l)
        check(m and (m.group(2) == "1") == (out[m.group(1)][0] == "ok"),
              "collector_up disagrees with collector_state: %r %s" % (l, out))
    return out


def expect_refused(pp, path, label, words):
    t0 = time.time()
    st, hdr, body = pp.request(path, timeout=30)
    text = body.decode(errors="replace")
    check(st == 500, "GET %s: status %d (want 500): %r" % (path, st, text[:300]))
    check(hdr.get("content-type", "").startswith("text/plain"), "GET %s: content-type %r" %
          (path, hdr.get("content-type")))
    check(hdr.get("x-go-pprof") == "1", "GET %s: no X-Go-Pprof header" % path)
    check(text.startswith("Could not enable %s profiling: " % label), "GET %s: body %r" % (path, text))
    for w in words:
        check(w in text, "GET %s: %r not in %r" % (path, w, text))
    # Refused at once, not after the window: the windows asked for are
    # longer than any answer's latency on a loaded machine.
    secs = re.search(r"seconds=(\d+)", path)
    if secs:
        check(time.time() - t0 < int(secs.group(1)), "GET %s took %.1fs" % (path, time.time() - t0))
    return text


def test_seccomp_refuses_bpf_and_perf():
    if not SPIN:
        raise Skip("WL_SPIN not built")
    app = Workload([SPIN, "1"])
    pp = start(["python3", os.path.join(HERE, "seccomp_exec.py"), "bpf,perf_event_open"],
               "--pid", str(app.p.pid))
    try:
        pp.wait_log(r"target: pid %d " % app.p.pid, timeout=60)
        time.sleep(1.5)  # several discovery passes: every one retries the attach
        seccomp = ["seccomp profile", "deploy/seccomp/podprof.json"]
        expect_refused(pp, "/debug/pprof/profile?seconds=25", "CPU",
                       ["perf_event_open", "Operation not permitted", "CAP_PERFMON"] + seccomp)
        for path, label in [("/debug/pprof/heap", "heap"), ("/debug/pprof/heap?debug=1", "heap"),
                            ("/debug/pprof/allocs", "allocs"),
                            ("/debug/pprof/heap?seconds=25", "heap"),
                            ("/debug/pprof/block", "block"), ("/debug/pprof/mutex?debug=1", "mutex"),
                            ("/debug/pprof/threadcreate", "threadcreate")]:
            expect_refused(pp, path, label, ["bpf", "CAP_BPF"] + seccomp)
        # go tool pprof shows the same message.
        r = go_pprof_fails("http://127.0.0.1:%d/debug/pprof/profile?seconds=1" % pp.port)
        check("500" in r and "Could not enable CPU profiling" in r and "seccomp" in r,
              "go tool pprof output: %s" % r[-800:])
        # ptrace is not refused: the thread dump still works and names the app.
        g = pp.profile("/debug/pprof/goroutine")
        check(g["samples"], "goroutine profile empty under the filter")
        states = collector_state(pp)
        check(states["cpu"][0] == "unavailable" and "seccomp" in states["cpu"][1],
              "cpu state %s" % (states,))
        check(states["heap"][0] == "unavailable" and "bpf" in states["heap"][1], "heap state %s" % (states,))
        check(states["offcpu"][0] == "unavailable", "offcpu state %s" % (states,))
        check(states["threads"] == ("ok", ""), "threads state %s" % (states,))
        st, _, idx = pp.request("/debug/pprof/")
        idx = idx.decode()
        check(st == 200 and "unavailable" in idx and "Collectors:" in idx and
              "deploy/seccomp/podprof.json" in idx, "index page: %s" % idx[-1500:])
        log = pp.log_text()
        for what in ("CPU profiles unavailable", "heap and allocs profiles unavailable",
                     "block, mutex and threadcreate profiles unavailable"):
            n = log.count(what)
            check(n == 1, "%r logged %d times (want once):\n%s" % (what, n, log))
        check("cannot sample pid" not in log, "per-pid refusal warnings:\n" + log)
        check(log.count("deploy/seccomp/podprof.json") == 3, "fix not named once per collector:\n" + log)
    finally:
        pp.kill()
        app.kill()


def go_pprof_fails(url):
    try:
        go_pprof("-raw", url, timeout=60)
    except AssertionError as e:
        return str(e)
    raise AssertionError("go tool pprof succeeded on a refused profile")


def test_missing_cap_bpf():
    """CAP_BPF and CAP_SYS_ADMIN removed: every BPF collector (the CPU
    sampler too) refused with the capability named."""
    if not SPIN:
        raise Skip("WL_SPIN not built")
    if not shutil.which("setpriv"):
        raise Skip("setpriv (util-linux) missing")
    with open("/proc/sys/kernel/unprivileged_bpf_disabled") as f:
        if f.read().strip() == "0":
            raise Skip("kernel.unprivileged_bpf_disabled=0: bpf works without CAP_BPF here")
    app = Workload([SPIN, "1"])
    pp = start(["setpriv", "--bounding-set=-all,+perfmon,+sys_ptrace", "--inh-caps=-all"],
               "--pid", str(app.p.pid))
    try:
        pp.wait_log(r"target: pid %d " % app.p.pid, timeout=60)
        expect_refused(pp, "/debug/pprof/heap", "heap", ["CAP_BPF missing", "add BPF"])
        expect_refused(pp, "/debug/pprof/block?debug=1", "block", ["CAP_BPF missing"])
        # The CPU sampler is a BPF program on per-CPU perf events: refused too.
        expect_refused(pp, "/debug/pprof/profile?seconds=25", "CPU", ["CAP_BPF missing"])
        states = collector_state(pp)
        check(states["cpu"][0] == "unavailable" and "CAP_BPF missing" in states["cpu"][1],
              "cpu state %s" % (states,))
        check(states["heap"][0] == "unavailable" and "CAP_BPF missing" in states["heap"][1],
              "heap state %s" % (states,))
    finally:
        pp.kill()
        app.kill()


def test_pause_left_out():
    catatonit = shutil.which("catatonit") or "/usr/libexec/podman/catatonit"
    if not SPIN:
        raise Skip("WL_SPIN not built")
    if not os.path.exists(catatonit) or not shutil.which("unshare"):
        raise Skip("catatonit (Debian package catatonit) or unshare missing")
    import subprocess
    import threading
    # PID 1 catatonit; its child, a shell, starts the app through a wrapper
    # shell that does not exec it (sh registered before the app, with a
    # lower pid), then becomes podprof.
    script = ('sh -c \'"$1" 1; :\' wrapper "$1" >/dev/null &\n'
              'sleep 0.3\nexec "$2" --listen 127.0.0.1:0 --set discovery.interval_ms=100\n')
    pp = Podprof.__new__(Podprof)
    pp.argv = ["unshare", "--pid", "--fork", "--kill-child", "--mount", "--mount-proc",
               catatonit, "--", "sh", "-c", script, "pod", SPIN, harness.PODPROF]
    e = {k: v for k, v in os.environ.items() if not k.startswith("PODPROF_")}
    pp.p = subprocess.Popen(pp.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=e)
    harness._children.append(pp)
    pp.lines, pp.ports = [], []
    pp._cv = threading.Condition()
    pp._t = threading.Thread(target=pp._reader, daemon=True)
    pp._t.start()
    try:
        pp.wait_log(r"\(port (\d+)\)", timeout=30)
        pp.port = pp.ports[0]
        spin = int(re.search(r"target: pid (\d+) \(spin\)",
                             pp.wait_log(r"target: pid \d+ \(spin\)", timeout=60)).group(1))
        log = pp.log_text()
        check(re.search(r"target: pid 1 \(catatonit\) left out", log), "catatonit not left out:\n" + log)
        check(not re.search(r"target: pid 1 \(catatonit\) /", log), "catatonit profiled:\n" + log)
        check(re.search(r"target: pid \d+ \(sh\)", log), "the wrapper shell is no target:\n" + log)
        # Mapping 1 is the main binary of the process with the most samples,
        # else of the first live process (the shell). The app is the only
        # process that runs: a window in which a loaded machine let it run
        # for no sample says nothing, so windows are taken until one has its
        # samples (60 s hang guard).
        deadline = time.time() + 60
        while True:
            cpu = pp.profile("/debug/pprof/profile?seconds=2", timeout=40)
            if any(s["num_labels"].get("pid", [None])[0] == spin for s in cpu["samples"]):
                break
            check(time.time() < deadline, "no sample of the app %d in 60 s of windows" % spin)
            harness.log("  a window without a sample of the app (%d samples): another" %
                        len(cpu["samples"]))
        m1 = os.path.basename(cpu["mappings"][0]["file"])
        check(m1 == os.path.basename(SPIN), "main binary %s, want the busy app" % m1)
        files = {os.path.basename(m["file"]) for m in cpu["mappings"]}
        check("catatonit" not in files, "catatonit in the profile: %s" % files)
        # The main binary follows the profile: the goroutine profile counts
        # one thread of the shell and one of spin, so either may lead, never catatonit.
        g = pp.profile("/debug/pprof/goroutine")
        check(os.path.basename(g["mappings"][0]["file"]) in ("spin", "dash", "sh", "bash"),
              "goroutine main binary %s" % g["mappings"][0]["file"])
    finally:
        pp.kill()


if __name__ == "__main__":
    run([test_seccomp_refuses_bpf_and_perf, test_missing_cap_bpf, test_pause_left_out])
