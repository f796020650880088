#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Two "containers" of one pod, as a node's runtime leaves them for podprof
to find: each process sits in a cgroup named the way containerd names a
container's cgroup (cri-containerd-<64 hex>.scope under a kubepods slice)
and sees the kubelet's termination-log file of its container mounted on
/dev/termination-log. The "app" is the demo, the "mesh proxy" (istio-proxy)
is the spin workload. podprof must label samples with container_id and
container, and a `container:` selector must pick the app only."""
import os
import secrets
import shutil
import subprocess
import tempfile
import time

from harness import Podprof, Skip, Workload, check, profile_until, run, wait_for

DEMO = os.environ.get("WL_DEMO")
SPIN = os.environ.get("WL_SPIN")


def cgroup2_root():
    with open("/proc/self/mounts") as f:
        for line in f:
            parts = line.split()
            if len(parts) > 2 and parts[2] == "cgroup2":
                return parts[1]
    return None


class Container:
    """A process in a containerd-named cgroup with a kubelet-style termination log."""

    def __init__(self, base, pod_uid, name, argv):
        self.id = secrets.token_hex(32)
        root = cgroup2_root()
        if not root:
            raise Skip("no cgroup2 hierarchy mounted")
        self.slice = os.path.join(root, "podprof-test-kubepods.slice",
                                  "kubepods-burstable-pod%s.slice" % pod_uid.replace("-", "_"))
        self.cg = os.path.join(self.slice, "cri-containerd-%s.scope" % self.id)
        try:
            os.makedirs(self.cg)
        except OSError as e:
            raise Skip("cannot create a cgroup (%s)" % e)
        logdir = os.path.join(base, "var/lib/kubelet/pods", pod_uid, "containers", name)
        os.makedirs(logdir, exist_ok=True)
        self.log = os.path.join(logdir, secrets.token_hex(4))
        open(self.log, "w").close()
        # Own mount namespace: a fresh /dev holding only the termination log.
        script = ('echo $$ > "$1/cgroup.procs" && mount --make-rprivate / && '
                  'mount -t tmpfs -o size=64k tmpfs /dev && : > /dev/termination-log && '
                  'mount --bind "$2" /dev/termination-log && shift 2 && exec "$@"')
        self.w = Workload(["unshare", "--mount", "sh", "-c", script, "c", self.cg, self.log] + argv,
                          wait_line=False)
        self.pid = self.w.pid

    def running(self, prog):
        """True once the process is in its cgroup and has exec'd prog."""
        try:
            with open("/proc/%d/cgroup" % self.pid) as f:
                joined = self.id in f.read()
            return joined and os.path.realpath("/proc/%d/exe" % self.pid) == \
                os.path.realpath(prog)
        except OSError:
            return False

    def cleanup(self):
        if self.w:
            self.w.kill()
        for d in (self.cg, self.slice, os.path.dirname(self.slice)):
            for _ in range(50):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)


def labels_of(prof):
    out = []
    for s in prof["samples"]:
        l = dict(s.get("labels", {}))
        for k, v in s.get("num_labels", {}).items():
            l[k] = v[0]
        out.append(l)
    return out


def test_two_containers():
    if not shutil.which("unshare"):
        raise Skip("util-linux unshare missing")
    base = tempfile.mkdtemp(prefix="podprof-kubelet-")
    uid = "6f2b9c1e-0d3a-4e5f-8a7b-1c2d3e4f5a6b"
    app = proxy = None
    try:
        app = Container(base, uid, "app", [DEMO])
        proxy = Container(base, uid, "istio-proxy", [SPIN])
        # Each container's shell joins its cgroup, mounts its /dev and execs
        # the program in its own time: wait until both run their program.
        for c, prog in ((app, DEMO), (proxy, SPIN)):
            wait_for(lambda: c.running(prog), lambda: "%s to run %s in its cgroup" % (c.cg, prog))
        cfg = os.path.join(base, "podprof.yaml")
        with open(cfg, "w") as f:
            # the pod's processes only (this machine has others), then the app's container
            # the app's container only (the mesh proxy is left alone); the
            # id prefix also keeps this machine's other processes out
            f.write("targets:\n  - name: app\n    container: app\n"
                    "    container_id: \"%s\"\n" % app.id[:12])
        pp = Podprof("--config", cfg, "--set", "cpu.frequency_hz=199",
                     "--set", "discovery.interval_ms=200")
        pp.wait_log(r"target: pid %d .*container=app container_id=%s" % (app.pid, app.id[:12]),
                    timeout=60)
        # (a window in which a loaded machine gave the app no sample is
        # taken again)
        prof = profile_until(pp, "/debug/pprof/profile?seconds=2", lambda p: p["samples"])
        labs = labels_of(prof)
        check(labs, "no samples from the app")
        pids = {l.get("pid") for l in labs}
        check(pids == {app.pid}, "profiled %s, want only the app %d (proxy %d)" %
              (pids, app.pid, proxy.pid))
        for l in labs:
            check(l.get("container_id") == app.id, "container_id label %s" % l)
            check(l.get("container") == "app", "container label %s" % l)
        check("target: pid %d " % proxy.pid not in pp.log_text(), "the proxy was profiled")
        pp.stop()
        # every process of the pod: the proxy's samples carry its own container
        with open(cfg, "w") as f:
            f.write("targets:\n  - name: pod\n    container_id: \"%s\"\n"
                    "  - name: proxy\n    container: \"istio-*\"\n" % app.id[:12])
        pp = Podprof("--config", cfg, "--set", "cpu.frequency_hz=199",
                     "--set", "discovery.interval_ms=200")
        pp.wait_log(r"target: pid %d .*\[proxy\] container=istio-proxy container_id=%s" %
                    (proxy.pid, proxy.id[:12]), timeout=60)
        prof = profile_until(pp, "/debug/pprof/profile?seconds=2",
                             lambda p: {app.pid, proxy.pid} <= {l.get("pid") for l in labels_of(p)})
        by_pid = {}
        for l in labels_of(prof):
            by_pid.setdefault(l.get("pid"), set()).add((l.get("container"), l.get("container_id")))
        check(by_pid.get(proxy.pid) == {("istio-proxy", proxy.id)} and
              by_pid.get(app.pid) == {("app", app.id)}, "labels by pid: %s" % by_pid)
        pp.stop()
    finally:
        for c in (app, proxy):
            if c:
                c.cleanup()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    run([test_two_containers])
