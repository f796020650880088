#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The real deployment: the image built from deploy/Containerfile on a
locally debootstrapped Debian 12 base, the project's own manifests (the
chart's and kustomize's output) played with `podman kube play`, and CPU,
heap, goroutine and block profiles fetched from the pod by go tool pprof.

podman 4.3 does not run native sidecars (an init container with
restartPolicy: Always never finishes), so podprof is played as an ordinary
container: the chart renders that for Kubernetes < 1.29, and the kustomize
output gets the same move here. The host settings podman needs on this
machine live in containers.conf (CONTAINERS_CONF), not in /etc.

The heap agent preloaded at start (heap.agent_dir, LD_PRELOAD, the
sidecar's startup probe holding back the app) needs two podman-only
stand-ins, applied only to manifests that preload: the app container's
command waits until podprof wrote the agent file, then execs the unchanged
command (wait_for_agent: the kubelet's startup-probe gating), and each
emptyDir is created afresh, root's, mode 0777, as the kubelet makes it
(Pod.empty_dirs: podman would chown it to whichever container mounts it
first).

Scenarios:
  default seccomp (RuntimeDefault), chart for 1.28: podman's profile allows
    bpf and perf_event_open only with CAP_SYS_ADMIN. podprof must refuse the
    CPU and heap profiles with a 500 naming seccomp and
    deploy/seccomp/podprof.json, and show the states in /metrics.
  deploy/seccomp/podprof.json (Localhost): every profile works, with
    - the chart for 1.28: no native sidecar, nothing preloaded (injection);
    - the chart for 1.29, the kustomize demo (deploy/), and deploy/sidecar
      with a copy of preload-patch.yaml on the demo's app as a user would
      write it: the agent preloaded. The app's process maps
      /podprof-agent/libpodprof-agent.so, podprof's log, /metrics and heap
      profile comments say mode preload, the heap profile (go tool pprof
      -raw) has samples, and TracerPid of every task of the app container
      stays 0 from the play to the end (polled from the host; the goroutine
      profile, which stops threads by design, is not requested there).

Exits 77 (skip, with the reason) only where podman cannot run at all."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from harness import Skip, check, decode, go_pprof, log  # noqa: E402

BASE = "localhost/podprof-base:bookworm"
IMAGE = "localhost/podprof:0.1.0"  # what the manifests' "podprof:0.1.0" resolves to
ENV = dict(os.environ, CONTAINERS_CONF=os.path.join(HERE, "containers.conf"))
ENV.pop("CONTAINERS_STORAGE_CONF", None)


def skip(reason):
    print("SKIP: " + reason, flush=True)
    sys.exit(77)


def sh(argv, timeout=120, ok=True, **kw):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV,
                       timeout=timeout, **kw)
    if ok and r.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s\n%s" % (" ".join(argv), r.returncode,
                             r.stdout.decode(errors="replace")[-2000:],
                             r.stderr.decode(errors="replace")[-3000:]))
    return r


def podman_usable():
    if not shutil.which("podman"):
        skip("podman not installed (Debian package podman; scripts/install-deps.sh installs it)")
    if os.geteuid() != 0:
        skip("rootless: the pod needs CAP_BPF and CAP_PERFMON, which only rootful podman grants")
    r = subprocess.run(["podman", "info", "--format", "{{.Host.OCIRuntime.Name}}"], env=ENV,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    if r.returncode != 0:
        skip("podman cannot run here: " + r.stderr.decode(errors="replace").strip()[-500:])


def images():
    t0 = time.time()
    if sh(["podman", "image", "exists", BASE], ok=False).returncode != 0 and not shutil.which("debootstrap"):
        skip("no base image and no debootstrap to make one")
    sh([os.path.join(HERE, "base-image.sh"), BASE], timeout=900)
    t1 = time.time()
    key = source_key()
    have = sh(["podman", "image", "inspect", "-f", '{{index .Labels "podprof.src"}}', IMAGE], ok=False)
    if have.returncode == 0 and have.stdout.decode().strip() == key:
        log("images: cached (base and podprof image for source %s)" % key)
        return
    old = sh(["podman", "image", "inspect", "-f", "{{.Id}}", IMAGE], ok=False).stdout.decode().strip()
    sh(["podman", "build", "--label", "podprof.src=" + key, "--pull=never", "--network=host", "--layers", "-q",
        "-f", "deploy/Containerfile", "--build-arg", "BASE_IMAGE=" + BASE,
        "--build-arg", "RUNTIME_IMAGE=" + BASE, "-t", IMAGE, "."], timeout=1200, cwd=ROOT)
    size = sh(["podman", "image", "inspect", "-f", "{{.Size}}", IMAGE]).stdout.decode().strip()
    new = sh(["podman", "image", "inspect", "-f", "{{.Id}}", IMAGE]).stdout.decode().strip()
    if old and old != new:
        sh(["podman", "rmi", old], ok=False)  # the replaced image; the layer cache stays
    log("images: base %.0fs, podprof image %.0fs (%.0f MB)" % (t1 - t0, time.time() - t1,
                                                               int(size) / 1e6))


def source_key():
    """Hash of everything the image build reads (the Containerfile's COPY lines)."""
    import hashlib
    h = hashlib.sha256()
    paths = ["deploy/Containerfile", "meson.build", "meson_options.txt"]
    for top in ("bpf", "lib", "cmd", "bench", "web/dist"):
        for d, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__")
            paths += [os.path.relpath(os.path.join(d, f), ROOT) for f in sorted(files)]
    for p in paths:
        h.update(p.encode() + b"\0")
        with open(os.path.join(ROOT, p), "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


def tool(name):
    p = os.path.join(ROOT, ".tools", "bin", name)
    if not os.path.exists(p):
        r = subprocess.run([os.path.join(ROOT, "tests", "k8s", "setup-tools.sh")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600)
        if r.returncode != 0 or not os.path.exists(p):
            raise AssertionError("%s unavailable (tests/k8s/setup-tools.sh): %s" %
                                 (name, r.stderr.decode(errors="replace")[-800:]))
    return p


def yaml_docs(text):
    import yaml
    return [d for d in yaml.safe_load_all(text) if d]


AGENT = "/podprof-agent/libpodprof-agent.so"
RATE = 16  # heap.sample_rate of the preload scenarios (see main())


def preloads(c):
    """The container loads podprof's heap agent at start (LD_PRELOAD and the
    agent volume mounted read-only where LD_PRELOAD points)."""
    env = {e["name"]: e.get("value", "") for e in c.get("env") or []}
    if AGENT not in env.get("LD_PRELOAD", "").replace(":", " ").split():
        return False
    mounts = [m for m in c.get("volumeMounts") or [] if m["name"] == "podprof-agent"]
    check(mounts and mounts[0]["mountPath"] == os.path.dirname(AGENT) and mounts[0].get("readOnly"),
          "%s: LD_PRELOAD without the read-only agent mount: %s" % (c["name"], mounts))
    return True


def agent_dir_configured(docs):
    import yaml
    for d in docs:
        if d.get("kind") == "ConfigMap":
            for v in (d.get("data") or {}).values():
                cfg = yaml.safe_load(v)
                if isinstance(cfg, dict) and (cfg.get("heap") or {}).get("agent_dir") == os.path.dirname(AGENT):
                    return True
    return False


def wait_for_agent(c):
    """podman-only stand-in for the kubelet's startup-probe gating: in a
    cluster the native sidecar's startup probe (podprof healthcheck, which
    passes once podprof wrote the agent) holds back the app container; podman
    4.3 has no native sidecars and starts all containers together, so the app
    container's command waits here until the agent file exists, then execs the
    unchanged command and args. The process keeps its PID, its environment
    (LD_PRELOAD) and its user; only the wait is added."""
    check(c.get("command"), "%s: no command to wrap" % c["name"])
    wait = 'a=$1; shift; while [ ! -e "$a" ]; do sleep 0.1; done; exec "$@"'
    c["command"] = ["/bin/sh", "-c", wait, "podman-wait-agent", AGENT] + c["command"] + \
        list(c.pop("args", None) or [])


def kustomize_component(kubectl):
    """What deploy/sidecar/kustomization.yaml tells a user to do, with the
    demo's Deployment as the user's own: the app alone (podprof's container,
    its volumes and the app's LD_PRELOAD and agent mount taken out),
    annotated podprof/inject, the component, and a copy of
    preload-patch.yaml with APP_CONTAINER replaced by "app"."""
    import yaml
    with open(os.path.join(ROOT, "deploy", "deployment.yaml")) as f:
        dep = yaml.safe_load(f)
    dep["metadata"].pop("namespace", None)
    dep["metadata"].setdefault("annotations", {})["podprof/inject"] = "true"
    tpl = dep["spec"]["template"]
    tpl["metadata"]["annotations"].pop("checksum/config", None)
    spec = tpl["spec"]
    for k in ("initContainers", "volumes", "shareProcessNamespace"):
        spec.pop(k, None)
    (app,) = spec["containers"]
    app.pop("env")
    app.pop("volumeMounts")
    check(not preloads(app), "app container still preloads")
    with open(os.path.join(ROOT, "deploy", "sidecar", "preload-patch.yaml")) as f:
        patch = f.read()
    check(patch.count("- name: APP_CONTAINER\n") == 1, "preload-patch.yaml: no APP_CONTAINER placeholder")
    d = tempfile.mkdtemp(prefix="podprof-kust-")
    try:
        with open(os.path.join(d, "deployment.yaml"), "w") as f:
            yaml.safe_dump(dep, f)
        with open(os.path.join(d, "preload-patch.yaml"), "w") as f:
            f.write(patch.replace("- name: APP_CONTAINER\n", "- name: app\n"))
        with open(os.path.join(d, "kustomization.yaml"), "w") as f:
            yaml.safe_dump({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                            "resources": ["deployment.yaml"],
                            "components": [os.path.relpath(os.path.join(ROOT, "deploy", "sidecar"), d)],
                            "patches": [{"path": "preload-patch.yaml",
                                         "target": {"kind": "Deployment", "name": dep["metadata"]["name"]}}]},
                           f)
        return yaml_docs(sh([kubectl, "kustomize", d]).stdout.decode())
    finally:
        shutil.rmtree(d)


def for_podman(docs, seccomp, preload=False):
    """What podman 4.3 needs that a cluster does not: only the kinds it plays,
    podprof as an ordinary container, the demo app on the local base image,
    and the seccomp choice as the annotation podman reads (it ignores the
    securityContext.seccompProfile field). With the heap agent preloaded
    (preload: the manifests must say so), the app containers wait for the
    agent file (wait_for_agent)."""
    out = []
    for d in docs:
        if d.get("kind") not in ("Deployment", "ConfigMap"):
            continue
        if d["kind"] == "Deployment":
            tpl = d["spec"]["template"]
            spec = tpl["spec"]
            native = False
            for ic in list(spec.get("initContainers") or []):
                if ic.get("restartPolicy") == "Always":
                    spec["initContainers"].remove(ic)
                    del ic["restartPolicy"]
                    spec["containers"].insert(0, ic)  # started first, as by the kubelet
                    native = True
            if not spec.get("initContainers"):
                spec.pop("initContainers", None)
            names = [c["name"] for c in spec["containers"]]
            check("podprof" in names, "no podprof container in %s" % names)
            pre = [c for c in spec["containers"] if preloads(c)]
            check(bool(pre) == preload, "containers preloading the agent: %s, want preload %s" %
                  ([c["name"] for c in pre], preload))
            if preload:
                podprof = [c for c in spec["containers"] if c["name"] == "podprof"][0]
                check(native, "preload without a native sidecar")
                check("startupProbe" in podprof, "preload without the sidecar's startup probe")
                check(agent_dir_configured(docs), "preload without heap.agent_dir in the config")
                for c in pre:
                    wait_for_agent(c)
            for c in spec["containers"]:
                if c["name"] != "podprof":
                    c["image"] = BASE
                else:
                    sp = c["securityContext"].get("seccompProfile", {})
                    check(sp.get("type") == seccomp, "manifest seccomp %s, want %s" % (sp, seccomp))
                    caps = c["securityContext"]["capabilities"]
                    check(caps == {"drop": ["ALL"], "add": ["BPF", "PERFMON", "SYS_PTRACE", "SETUID", "SETGID"]},
                          "capabilities %s" % caps)
                    if seccomp == "Localhost":
                        ann = tpl["metadata"].setdefault("annotations", {})
                        ann["container.seccomp.security.alpha.kubernetes.io/podprof"] = \
                            "localhost/" + sp["localhostProfile"]
            check(spec.get("shareProcessNamespace") is True, "shareProcessNamespace not set")
        out.append(d)
    return out


class TracerWatch:
    """Polls, from the host (a podman container's processes are host
    processes), TracerPid in /proc/PID/task/*/status of every task of a
    container's processes: its main process and all its descendants, found
    again at every poll through /proc/PID/task/TID/children. Runs from right
    after `podman kube play` returns until stop()."""

    def __init__(self, ctr):
        self.ctr, self.root, self.seen, self.tasks, self.polls = ctr, 0, [], set(), 0
        self.stop_ = False
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _tree(self):
        out, todo = [], [self.root]
        while todo:
            pid = todo.pop()
            out.append(pid)
            try:
                for tid in os.listdir("/proc/%d/task" % pid):
                    with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                        todo += [int(x) for x in f.read().split()]
            except (FileNotFoundError, ProcessLookupError):
                pass
        return out

    def _poll(self):
        for pid in self._tree():
            try:
                for tid in os.listdir("/proc/%d/task" % pid):
                    with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                        st = f.read()
                    tracer = int(re.search(r"^TracerPid:\s+(\d+)", st, re.M).group(1))
                    name = re.search(r"^Name:\s+(.*)$", st, re.M).group(1)
                    self.tasks.add((pid, int(tid), name))
                    if tracer:
                        self.seen.append((pid, int(tid), name, tracer))
            except (FileNotFoundError, ProcessLookupError):
                pass  # exited between the listing and the read
        self.polls += 1

    def _run(self):
        while not self.stop_:
            if not self.root:
                r = sh(["podman", "inspect", "-f", "{{.State.Pid}}", self.ctr], ok=False)
                pid = r.stdout.decode().strip()
                self.root = int(pid) if r.returncode == 0 and pid.isdigit() else 0
                if not self.root:
                    time.sleep(0.1)
                continue
            self._poll()
            time.sleep(0.02)

    def stop(self):
        self.stop_ = True
        self.t.join(timeout=30)
        check(self.root and self.polls and any(t[0] == self.root for t in self.tasks),
              "TracerPid never polled for %s (root %s, %d polls)" % (self.ctr, self.root, self.polls))
        check(not self.seen, "app tasks traced (pid, tid, comm, TracerPid): %s" % self.seen[:20])
        return self.tasks


class Pod:
    def __init__(self, name, docs, on_play=None):
        import yaml
        self.name = name
        fd, self.file = tempfile.mkstemp(prefix="podprof-kube-", suffix=".yaml")
        with os.fdopen(fd, "w") as f:
            yaml.safe_dump_all(docs, f)
        dep = [d for d in docs if d["kind"] == "Deployment"][0]
        self.pod = dep["metadata"]["name"] + "-pod-0"  # podman's name for a Deployment's pod
        self.ctr = self.pod + "-podprof"
        self.empty = [v["name"] for v in dep["spec"]["template"]["spec"].get("volumes") or []
                      if "emptyDir" in v]
        sh(["podman", "kube", "play", "--down", self.file], ok=False)
        self.empty_dirs()
        t0 = time.time()
        try:
            self._up(on_play)
        except BaseException:
            self.down()
            raise
        log("%s: pod up in %.1fs" % (name, time.time() - t0))

    def _up(self, on_play):
        sh(["podman", "kube", "play", "--seccomp-profile-root",
            os.path.join(ROOT, "deploy", "seccomp"), self.file], timeout=180)
        if on_play:
            on_play(self)
        infra = sh(["podman", "pod", "inspect", "-f", "{{.InfraContainerID}}", self.pod]).stdout.decode().strip()
        ip = sh(["podman", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
                 infra]).stdout.decode().strip()
        check(re.match(r"^\d+\.\d+\.\d+\.\d+$", ip), "pod IP %r" % ip)
        self.base = "http://%s:6060" % ip
        self.wait_log(r"http: serving /debug/pprof/", 30)

    def empty_dirs(self):
        """podman 4.3 plays an emptyDir as a volume of that name and, on the
        first mount by any of the pod's containers (they start in no fixed
        order), chowns it to that container's user: the app's (65534) makes
        it unwritable for podprof (uid 0 without CAP_DAC_OVERRIDE). The
        kubelet makes an emptyDir root's, mode 0777, empty, once per pod; so
        here each is created afresh before the play, its first-mount chown
        taken by a root container, and made 0777 (and removed at down())."""
        for v in self.empty:
            sh(["podman", "volume", "rm", "-f", v], ok=False)
            sh(["podman", "volume", "create", v])
            sh(["podman", "run", "--rm", "--pull=never", "--network=none", "-v", v + ":/empty",
                BASE, "true"])
            mp = sh(["podman", "volume", "inspect", "-f", "{{.Mountpoint}}", v]).stdout.decode().strip()
            check(os.path.isdir(mp) and not os.listdir(mp), "volume %s: %s not an empty directory" % (v, mp))
            os.chown(mp, 0, 0)
            os.chmod(mp, 0o777)

    def logs(self):
        r = sh(["podman", "logs", self.ctr], ok=False)
        return (r.stdout + r.stderr).decode(errors="replace")

    def wait_log(self, pattern, timeout):
        deadline = time.time() + timeout
        while True:
            text = self.logs()
            if re.search(pattern, text):
                return text
            if time.time() > deadline:
                raise AssertionError("%s: no %r in podprof's log:\n%s" % (self.name, pattern, text[-3000:]))
            time.sleep(0.3)

    def get(self, path, timeout=60):
        try:
            with urllib.request.urlopen(self.base + path, timeout=timeout) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def down(self):
        sh(["podman", "kube", "play", "--down", self.file], ok=False, timeout=120)
        for v in self.empty:
            sh(["podman", "volume", "rm", "-f", v], ok=False)
        os.unlink(self.file)


def metrics(pod):
    st, _, body = pod.get("/metrics")
    check(st == 200, "/metrics %d" % st)
    return body.decode()


def check_common(pod, default_targets):
    """The pause process (catatonit, PID 1) is no target; with the default
    targets (no `targets:`), podprof says it left it out."""
    text = pod.wait_log(r"target: pid \d+ \((gzip|head|sh)\)", 30)
    if default_targets:
        check(re.search(r"pid 1 \(catatonit\) left out", text), "catatonit not left out:\n" + text[-2000:])
    check(not re.search(r"target: pid 1 \(\S+\) /", text), "PID 1 became a target:\n" + text[-2000:])


def scenario_default_seccomp(docs, default_targets=False):
    pod = Pod("chart, RuntimeDefault seccomp", for_podman(docs, "RuntimeDefault"))
    try:
        check_common(pod, default_targets)
        st, hdr, body = pod.get("/debug/pprof/profile?seconds=2")
        text = body.decode(errors="replace")
        check(st == 500 and text.startswith("Could not enable CPU profiling: ") and
              "seccomp" in text and "deploy/seccomp/podprof.json" in text,
              "CPU under podman's default seccomp: %d %r" % (st, text[:400]))
        st, _, body = pod.get("/debug/pprof/heap")
        check(st == 500 and b"Could not enable heap profiling" in body, "heap: %d %r" % (st, body[:300]))
        m = metrics(pod)
        for c in ("cpu", "heap", "offcpu"):
            check('podprof_collector_up{collector="%s"} 0' % c in m, "%s not down:\n%s" % (
                c, "\n".join(l for l in m.splitlines() if "collector" in l)))
        logs = pod.logs()
        check(logs.count("CPU profiles unavailable") == 1, "CPU refusal not logged once:\n" + logs[-3000:])
        log("default seccomp: refused as expected: " + text.strip()[:160])
    finally:
        pod.down()


def top(url, *args):
    return go_pprof("-top", *args, url, timeout=120)


def raw_samples(out):
    """The sample lines of `go tool pprof -raw` (between "Samples:" plus its
    header line and "Locations")."""
    m = re.search(r"^Samples:\n[^\n]*\n(.*?)^Locations", out, re.M | re.S)
    check(m, "no Samples section in -raw output:\n" + out[:1500])
    return [l for l in m.group(1).splitlines() if re.match(r"^\s*\d+", l)]


def check_preload(pod, watch, name):
    """The heap agent preloaded into the app container's process: mapped from
    the agent volume, used by podprof (log, /metrics, profile comments), a
    heap profile with samples, and no ptrace of the app (TracerWatch)."""
    host = watch.root
    with open("/proc/%d/status" % host) as f:
        ns = int(re.search(r"^NSpid:\s+(.*)$", f.read(), re.M).group(1).split()[-1])
    pod.wait_log(r"heap: tracing pid %d \(\S+\) allocator \S+ \(preloaded agent" % ns, 60)
    with open("/proc/%d/maps" % host) as f:
        maps = f.read()
    check(AGENT in maps, "%s: app pid %d (pod pid %d) does not map %s:\n%s" % (name, host, ns, AGENT, maps[-3000:]))
    m = metrics(pod)
    check('podprof_heap_mode{pid="%d",mode="preload"} 1' % ns in m,
          "heap mode metric for pid %d:\n%s" % (ns, "\n".join(l for l in m.splitlines() if "heap_mode" in l)))
    check(not re.search(r'podprof_heap_mode\{[^}]*mode="inject"', m), "a process injected:\n" + m[-2000:])
    # The heap profile: samples (go tool pprof -raw), and its comments name
    # the mode (decoded by the harness's decoder, which keeps them).
    deadline = time.time() + 120
    while True:
        raw = go_pprof("-raw", pod.base + "/debug/pprof/heap", timeout=120)
        samples = raw_samples(raw)
        if samples or time.time() > deadline:
            break
        time.sleep(2)
    check(samples, "%s: heap profile without samples:\n%s" % (name, raw[:2000]))
    st, _, body = pod.get("/debug/pprof/heap")
    check(st == 200, "heap status %d: %r" % (st, body[:200]))
    prof = decode(body)
    check(prof["check"] == "ok", "heap profile invalid: %s" % prof["check"])
    check("pid %d: heap mode=preload (agent loaded at start" % ns in "\n".join(prof["comments"]),
          "heap comments without mode=preload for pid %d: %s" % (ns, prof["comments"]))
    check(not any("heap mode=inject" in c for c in prof["comments"]), "comments %s" % prof["comments"])
    check("slots redirected" not in pod.logs(), "podprof redirected slots:\n" + pod.logs()[-2000:])
    return ns, len(samples)


def scenario_podprof_seccomp(name, docs, default_targets=False, preload=False):
    watch = []

    def on_play(pod):
        watch.append(TracerWatch(pod.pod + "-app"))

    try:
        pod = Pod(name, for_podman(docs, "Localhost", preload), on_play if preload else None)
    except BaseException:
        for w in watch:
            w.stop_ = True
        raise
    try:
        if preload:
            # The app is past its wait for the agent (wait_for_agent): what
            # follows profiles the app, not the wait loop's sleeps.
            pod.wait_log(r"heap: tracing pid \d+ \((sh|head|gzip)\) allocator \S+ \(preloaded agent", 60)
        check_common(pod, default_targets)
        m = metrics(pod)
        for c in ("cpu", "heap", "offcpu", "threads"):
            check('podprof_collector_up{collector="%s"} 1' % c in m, "%s down with podprof.json:\n%s" % (
                c, "\n".join(l for l in m.splitlines() if "collector" in l)))
        time.sleep(1)
        out = top(pod.base + "/debug/pprof/profile?seconds=3")
        fm = re.search(r"^File: (\S+)", out, re.M)
        check(fm and fm.group(1) != "catatonit", "main binary:\n" + out[:600])
        check(fm.group(1) in ("gzip", "head", "dash", "sh"), "main binary %s not the app's" % fm.group(1))
        check(re.search(r"Type: cpu", out) and re.search(r"Total samples = [1-9]", out),
              "CPU profile:\n" + out[:800])
        # The same profile decoded by our decoder: samples from the app's processes only.
        st, _, body = pod.get("/debug/pprof/profile?seconds=2")
        check(st == 200, "CPU status %d: %r" % (st, body[:200]))
        prof = decode(body)
        check(prof["check"] == "ok" and prof["samples"], "CPU profile invalid/empty: %s" % prof["check"])
        files = {os.path.basename(mp["file"]) for mp in prof["mappings"]}
        check("catatonit" not in files, "catatonit sampled: %s" % files)
        check(files & {"gzip", "head"}, "no app binary in mappings %s" % files)
        out = top(pod.base + "/debug/pprof/heap", "-sample_index=alloc_space")
        check("Type: alloc_space" in out, "heap:\n" + out[:600])
        if not preload:
            # goroutine stops each thread in turn (PTRACE_SEIZE + INTERRUPT)
            # by design: not requested where TracerPid must stay 0.
            out = top(pod.base + "/debug/pprof/goroutine")
            check("Type: goroutine" in out and re.search(r"Showing nodes accounting for [1-9]", out),
                  "goroutine:\n" + out[:600])
        out = top(pod.base + "/debug/pprof/block")
        check("Type: delay" in out, "block:\n" + out[:600])
        check(pod.logs().count("unavailable") == 0, "a collector is unavailable:\n" + pod.logs()[-2000:])
        log("%s: cpu, heap, %sblock fetched with go tool pprof (File: %s)" % (
            name, "" if preload else "goroutine, ", fm.group(1)))
        if preload:
            ns, n = check_preload(pod, watch[0], name)
            tasks = watch[0].stop()
            log("%s: heap agent preloaded into pid %d (%d heap samples, mode=preload); TracerPid 0 "
                "in all %d polls of %d app tasks" % (name, ns, n, watch[0].polls, len(tasks)))
    finally:
        for w in watch:
            w.stop_ = True
        pod.down()


def main():
    podman_usable()
    if not shutil.which("go"):
        skip("go (golang-go) missing: the profiles are read with go tool pprof")
    t0 = time.time()
    try:
        images()
        helm, kubectl = tool("helm"), tool("kubectl")
        # The chart selects the demo's app container by name, which podprof
        # learns from the kubelet's termination-log mount; podman kube play
        # makes no such mount, so the demo's processes are selected by
        # executable instead (the pause process stays out either way).
        values = ["--set", "demo.enabled=true", "--set", "listen=:6060",
                  "--set", "config.targets[0].name=app", "--set", "config.targets[0].exe=/usr/bin/*"]
        # < 1.29: podprof an ordinary container, nothing preloaded (injection).
        v128 = ["--kube-version", "1.28.0"] + values
        # >= 1.29: the native sidecar and the heap agent preloaded (the
        # chart's default). The demo's shell mallocs 32 bytes once per loop
        # (about every 10 s) after podprof enabled the agent, and gzip and
        # head allocate only before that: at the default 512 KiB rate its
        # heap profile would stay empty, so this scenario samples every 16
        # bytes on average.
        v129 = ["--kube-version", "1.29.0"] + values + ["--set", "config.heap.sample_rate=%d" % RATE]
        chart = [helm, "template", "rel", os.path.join(ROOT, "charts", "podprof")]
        chart_default = yaml_docs(sh(chart + v128).stdout.decode())
        chart_local = yaml_docs(sh(chart + v128 + ["--set", "seccompProfile.type=Localhost"]).stdout.decode())
        chart_preload = yaml_docs(sh(chart + v129 + ["--set", "seccompProfile.type=Localhost"]).stdout.decode())
        kust = yaml_docs(sh([kubectl, "kustomize", os.path.join(ROOT, "deploy")]).stdout.decode())
        comp = kustomize_component(kubectl)
        # kustomize output with the node's seccomp profile, as the README tells CRI-O users.
        for d in kust + comp:
            for c in (d.get("spec", {}).get("template", {}).get("spec", {}).get("initContainers") or []) + \
                    (d.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or []):
                if c.get("name") == "podprof":
                    c["securityContext"]["seccompProfile"] = {"type": "Localhost",
                                                              "localhostProfile": "podprof.json"}
        # The manifests listen on 127.0.0.1 (kubectl port-forward reaches it);
        # podman has no port-forward, so the pod is reached on its own IP.
        # The demo's heap rate as in v129 above.
        for d in kust + comp:
            if d.get("kind") == "ConfigMap":
                for k, v in (d.get("data") or {}).items():
                    check("  sample_rate: 524288\n" in v, "kustomize config without heap.sample_rate 524288")
                    d["data"][k] = v.replace('listen: "127.0.0.1:6060"', 'listen: ":6060"').replace(
                        "  sample_rate: 524288\n", "  sample_rate: %d\n" % RATE)
        scenario_default_seccomp(chart_default)
        scenario_podprof_seccomp("chart, podprof.json", chart_local)
        scenario_podprof_seccomp("chart 1.29, podprof.json, preload", chart_preload, preload=True)
        scenario_podprof_seccomp("kustomize, podprof.json, preload", kust, default_targets=True, preload=True)
        scenario_podprof_seccomp("kustomize component + preload-patch, podprof.json", comp,
                                 default_targets=True, preload=True)
    except AssertionError as e:
        log("FAIL: %s" % e)
        sys.exit(1)
    log("podman-deploy passed in %.0fs" % (time.time() - t0))


if __name__ == "__main__":
    main()
