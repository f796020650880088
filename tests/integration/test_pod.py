#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A simulated pod, as Kubernetes builds one with shareProcessNamespace:
the application runs in its own PID and mount namespace, chrooted into a
root filesystem where libc lives at another path than on the host
(/opt/podlibs), and podprof runs in the same PID namespace but its own
mount namespace with only CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE. podprof
must serve CPU and heap profiles of the application with function names
read from the application's own files."""
import os
import secrets
import shutil
import subprocess
import tempfile
import time

from harness import Podprof, Skip, check, frames, leaf_function, log, profile_until, run, wait_for
from test_container import Container, cgroup2_root

DEMO = os.environ.get("WL_DEMO")
PODPROF = os.environ.get("PODPROF")


def make_rootfs():
    root = tempfile.mkdtemp(prefix="podprof-pod-")
    os.makedirs(os.path.join(root, "app"))
    os.makedirs(os.path.join(root, "opt/podlibs"))
    os.makedirs(os.path.join(root, "lib64"))
    os.makedirs(os.path.join(root, "tmp"))
    shutil.copy(DEMO, os.path.join(root, "app/demo"))
    out = subprocess.run(["ldd", DEMO], stdout=subprocess.PIPE, text=True, check=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if "=>" in parts and len(parts) >= 3 and parts[2].startswith("/"):
            shutil.copy(os.path.realpath(parts[2]), os.path.join(root, "opt/podlibs", parts[0]))
        elif parts and parts[0].startswith("/") and "ld-linux" in parts[0]:
            shutil.copy(os.path.realpath(parts[0]), os.path.join(root, "lib64", os.path.basename(parts[0])))
    return root


def test_simulated_pod():
    if not shutil.which("unshare") or not shutil.which("setpriv"):
        raise Skip("util-linux unshare/setpriv missing")
    root = make_rootfs()
    mnt = None
    cid = secrets.token_hex(32)
    base = tempfile.mkdtemp(prefix="podprof-kubelet-")
    cg = Container.__new__(Container)
    cg.id = cid
    cgroot = cgroup2_root()
    cg.slice = os.path.join(cgroot or base, "podprof-test-kubepods.slice",
                            "kubepods-besteffort-pod0a1b2c3d_4e5f.slice")
    cg.cg = os.path.join(cg.slice, "cri-containerd-%s.scope" % cid)
    cg.w = None
    have_cg = False
    if cgroot:
        try:
            os.makedirs(cg.cg)
            have_cg = True
        except OSError as e:
            log("no container_id check: cannot create a cgroup (%s)" % e)
    if not have_cg:
        # a plain directory: the app writes its pid into a file, no cgroup moves
        cg.cg = os.path.join(base, "not-a-cgroup")
        os.makedirs(cg.cg)
    logdir = os.path.join(base, "var/lib/kubelet/pods/0a1b2c3d-4e5f/containers/app")
    os.makedirs(logdir)
    tlog = os.path.join(logdir, "7c9e2f10")
    open(tlog, "w").close()
    # pid 1 of the pod is a shell that starts the app in its own mount
    # namespace (chroot), then becomes podprof in another mount namespace
    # with three capabilities.
    # The application container: its own mount namespace whose root is a
    # tmpfs (pivot_root, as container runtimes do), so its files are not
    # reachable from podprof's mount namespace at all.
    # It runs in a cgroup named as containerd names a container's cgroup
    # and sees its kubelet termination log on /dev/termination-log.
    app = (
        'echo $$ > "$3/cgroup.procs" && '
        'mount --make-rprivate / && mount -t tmpfs tmpfs "$1" && cp -a "$2/." "$1/" && '
        'mkdir -p "$1/dev" && : > "$1/dev/termination-log" && '
        'mount --bind "$4" "$1/dev/termination-log" && '
        'mkdir "$1/.old" && cd "$1" && pivot_root . .old && '
        'LD_LIBRARY_PATH=/opt/podlibs exec /app/demo')
    script = (
        'unshare --mount sh -c \'%s\' app "$1" "$3" "$4" "$5" >/dev/null 2>&1 &\n'
        'sleep 0.7\n'
        'exec unshare --mount setpriv --bounding-set=-all,+bpf,+perfmon,+sys_ptrace,+setuid,+setgid '
        '--inh-caps=-all "$2" --listen 127.0.0.1:0 --set cpu.frequency_hz=199 '
        '--set heap.sample_rate=65536 --set discovery.interval_ms=300\n') % app
    pp = Podprof.__new__(Podprof)
    # Start through the harness machinery but with our own argv.
    import threading, re
    mnt = tempfile.mkdtemp(prefix="podprof-podroot-")
    pp.argv = ["unshare", "--pid", "--fork", "--kill-child", "--mount", "--mount-proc", "sh", "-c",
               script, "pod", mnt, PODPROF, root, cg.cg, tlog]
    e = {k: v for k, v in os.environ.items() if not k.startswith("PODPROF_")}
    pp.p = subprocess.Popen(pp.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=e)
    from harness import _children
    _children.append(pp)
    pp.lines, pp.ports = [], []
    pp._cv = threading.Condition()
    pp._t = threading.Thread(target=pp._reader, daemon=True)
    pp._t.start()
    try:
        pp.wait_log(r"\(port (\d+)\)", timeout=60)
        pp.port = pp.ports[0]
        pp.wait_log(r"target: pid \d+ \(demo\).* container=app" +
                    (" container_id=%s" % cid[:12] if have_cg else ""), timeout=60)
        log = pp.log_text()
        check("CAP_BPF missing" not in log and "CAP_PERFMON missing" not in log,
              "capabilities not seen:\n" + log)
        check("CAP_CHECKPOINT_RESTORE absent" in log, "expected the /proc/PID/root fallback:\n" + log)
        # heap.mode auto: the agent is injected when podprof gets to it
        pp.wait_log(r"heap: tracing pid \d+ \(demo\) .*injected agent", timeout=60)
        want = {"parse_request", "compress_response", "worker"}

        def named(prof):
            names = set()
            for s in prof["samples"]:
                names.update(frames(prof, s))
            return names

        # (a window a loaded machine starved of some of them is taken again)
        cpu = profile_until(pp, "/debug/pprof/profile?seconds=3", lambda p: want <= named(p))
        names = named(cpu)
        check(want <= names,
              "CPU names from the pod's files missing: %s" % sorted(n for n in names if isinstance(n, str))[:40])
        for s in cpu["samples"]:
            check((s["labels"].get("container_id") == cid or not have_cg) and
                  s["labels"].get("container") == "app",
                  "container labels of a sample: %s" % s["labels"])
        files = {m["file"] for m in cpu["mappings"]}
        check("/app/demo" in files, "main executable mapping %s" % files)
        check(any(f.startswith("/opt/podlibs/libc") for f in files), "libc mapping %s" % files)
        def inuse_by_function():
            heap = pp.profile("/debug/pprof/heap")
            idx = [t for t, _ in heap["sample_types"]].index("inuse_space")
            inuse = {}
            for s in heap["samples"]:
                for fn in frames(heap, s):
                    inuse[fn] = inuse.get(fn, 0) + s["values"][idx]
            return inuse

        # the demo's cache grows in its own time from the injection on
        wait_for(lambda: inuse_by_function().get("cache_insert", 0) > 0,
                 lambda: "live heap attributed to cache_insert: %s" %
                 sorted(k for k, v in inuse_by_function().items() if isinstance(k, str) and v))
        # heap.mode auto: the agent was injected with only BPF, PERFMON and
        # SYS_PTRACE, into a process whose files podprof cannot see.
        check(re.search(r"heap: tracing pid \d+ \(demo\) .*injected agent", pp.log_text()),
              "heap agent not injected in the pod:\n" + pp.log_text()[-1500:])
    finally:
        pp.kill()
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(mnt, ignore_errors=True)
        cg.cleanup()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    run([test_simulated_pod])
