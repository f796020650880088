#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""heap.mode auto/preload with the agent loaded at the application's start
(LD_PRELOAD=libpodprof-agent.so): podprof enables it and reads its ring;
no thread of the application is ever stopped (TracerPid stays 0 the whole
time), nothing is mapped into it or redirected. Per-site values are checked
with the Poisson tolerances of test_heap, for glibc, musl, C++ and jemalloc
preloaded after the agent; a library dlopen()ed later is covered with no
step of podprof; fork-per-request children running as another user never
die and are profiled; podprof SIGTERMed and SIGKILLed in a loop next to a
busy 8-thread target leaves its checksum intact; a process podprof left
gives the ring's memory back."""
import atexit
import os
import re
import shutil
import signal
import tempfile
import threading
import time

from harness import Podprof, Skip, Workload, check, frames, run, wait_for, write_tmp
from test_heap import MUSL, RATE, SITES, check_sites, per_function, settle, tol
from test_inject import MemCgroup, check_life_site

AGENT = os.environ.get("WL_AGENT_SO")
MUSL_DYN = os.environ.get("WL_HEAP_SITES_MUSL_DYN")
CXX = os.environ.get("WL_HEAP_CXX")
STORM = os.environ.get("WL_HEAP_STORM")
LIFECYCLE = os.environ.get("WL_HEAP_LIFECYCLE")
LIFELIB = os.environ.get("WL_HEAP_LIFELIB")
FORKS = os.environ.get("WL_HEAP_FORKS")
UNWIND = os.environ.get("WL_HEAP_UNWIND")
UNWLIB = os.environ.get("WL_HEAP_UNWLIB")
JEMALLOC_SO = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
JEMALLOC_LINKED = os.environ.get("WL_HEAP_SITES_JEMALLOC")
# The agent's ring holds a whole burst of these workloads (site_c: ~10,000
# samples of up to a page of stack each in a fraction of a second), so the
# exact checks hold however late podprof reads it.
RING = ("--set", "heap.ring_mib=64")


_shared = {}


def shared_copy(path):
    """path copied into a directory every user may read: a fresh clone's
    build lives under a 0700 mktemp directory, where a process running as
    nobody cannot load the agent or run a workload (as in a pod, where the
    agent comes from a volume every container user may read)."""
    if path not in _shared:
        if "dir" not in _shared:
            _shared["dir"] = tempfile.mkdtemp(prefix="podprof-preload-")
            os.chmod(_shared["dir"], 0o755)
            atexit.register(shutil.rmtree, _shared["dir"], True)
        dst = os.path.join(_shared["dir"], os.path.basename(path))
        shutil.copy(path, dst)
        os.chmod(dst, 0o755)
        _shared[path] = dst
    return _shared[path]


def agent_path():
    check(AGENT and os.path.exists(AGENT), "WL_AGENT_SO not built")
    return shared_copy(AGENT)


def preload_env(*more):
    return dict(os.environ, LD_PRELOAD=" ".join((agent_path(),) + more))


class TracerWatch:
    """Polls TracerPid of every task of pid (and its children found by the
    caller) until stopped: podprof must never ptrace a preloaded target."""

    def __init__(self, pid):
        self.pids, self.seen, self.stop_ = {pid}, [], False
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def add(self, pid):
        self.pids.add(pid)

    def _run(self):
        while not self.stop_:
            for pid in list(self.pids):
                try:
                    for tid in os.listdir("/proc/%d/task" % pid):
                        with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                            m = re.search(r"^TracerPid:\s+(\d+)", f.read(), re.M)
                        if m and m.group(1) != "0":
                            self.seen.append((pid, tid, m.group(1)))
                except OSError:
                    pass
            time.sleep(0.002)

    def done(self, label):
        self.stop_ = True
        self.t.join()
        check(not self.seen, "%s: a task was traced: %s" % (label, self.seen[:5]))


def agent_file_maps(pid):
    with open("/proc/%d/maps" % pid) as f:
        return [l.split() for l in f if "podprof-agent" in l]


def sites(path, mode="auto", more=()):
    wl = Workload([path, "full"], env=preload_env(*more))
    check(wl.first_line.startswith("waiting"), "workload said %r" % wl.first_line)
    watch = TracerWatch(wl.pid)
    pp = Podprof("--pid", str(wl.pid), "--set", "heap.sample_rate=%d" % RATE,
                 "--set", "offcpu.enabled=false", "--set", "heap.mode=" + mode,
                 "--set", "heap.over_budget=warn", *RING)
    pp.wait_log(r"heap: tracing pid %d .*preloaded agent" % wl.pid, timeout=60)
    wl.p.send_signal(signal.SIGUSR1)
    line = wl.p.stdout.readline().decode().strip()
    check(line == "ready", "workload said %r" % line)
    settle(pp)
    return wl, pp, watch


def agent_metrics(pp, pid):
    m = pp.request("/metrics")[2].decode()
    out = {}
    for key, pat in (("ring", r'podprof_heap_agent_samples_total\{pid="%d",path="ring"\} (\d+)'),
                     ("full", r'podprof_heap_agent_kernel_path_total\{pid="%d",reason="ring_full"\} (\d+)'),
                     ("skipped", r'podprof_heap_agent_ring_skipped_total\{pid="%d"\} (\d+)')):
        g = re.search(pat % pid, m)
        check(g, "no %s metric:\n%s" % (key, m[-2000:]))
        out[key] = int(g.group(1))
    check('podprof_heap_mode{pid="%d",mode="preload"} 1' % pid in m, "mode metric:\n" + m[-2000:])
    return out


def finish(wl, pp, watch, label):
    a = agent_metrics(pp, wl.pid)
    print("%s: %s" % (label, a))
    check(a["ring"] > 0 and a["full"] == 0 and a["skipped"] == 0, "%s: agent ring %s" % (label, a))
    pp.stop()
    watch.done(label)
    # only the loader's mappings of the file: nothing of podprof's own
    maps = agent_file_maps(wl.pid)
    check(maps and all(m[5] == agent_path() for m in maps), "%s: agent mappings %s" % (label, maps))
    check(wl.alive(), "%s: workload died" % label)
    wl.kill()


def test_glibc_preloaded():
    wl, pp, watch = sites(SITES)
    heap = pp.profile("/debug/pprof/heap")
    check_sites(heap, "glibc-preload")
    check(any("heap mode=preload" in c for c in heap["comments"]), "comments %s" % heap["comments"])
    m = pp.request("/metrics")[2].decode()
    fm = re.search(r'podprof_heap_calls_total\{pid="%d",kind="free"\} (\d+)' % wl.pid, m)
    check(fm and int(fm.group(1)) >= 16524, "agent counted frees: %s" % (fm and fm.group(0)))
    finish(wl, pp, watch, "glibc")


def test_preload_mode_refuses_without_agent():
    """heap.mode preload on a process started without the agent: nothing
    attached, the reason said; the process untouched."""
    wl = Workload([SITES, "full"])
    check(wl.first_line.startswith("waiting"), "workload said %r" % wl.first_line)
    watch = TracerWatch(wl.pid)
    pp = Podprof("--pid", str(wl.pid), "--set", "heap.mode=preload", "--set", "offcpu.enabled=false")
    pp.wait_log(r"no preloaded agent", timeout=60)
    time.sleep(0.5)
    pp.stop()
    watch.done("no agent")
    check(not agent_file_maps(wl.pid), "an agent appeared in a process started without it")
    wl.kill()


def test_harmless_where_unused():
    """Where the loader cannot use the agent nothing breaks: a missing file
    is a warning, a static executable ignores LD_PRELOAD (podprof then
    falls back with its reason), a shell and what it execs run dormant."""
    import subprocess
    r = subprocess.run(["/bin/sh", "-c", "exit 7"], env=dict(os.environ, LD_PRELOAD="/nonexistent/libpodprof-agent.so"),
                       capture_output=True)
    check(r.returncode == 7 and b"cannot be preloaded" in r.stderr, "missing agent file: %r" % (r,))
    r = subprocess.run(["/bin/sh", "-c", "echo $((6*7)) | cat; ls / >/dev/null"], env=preload_env(),
                       capture_output=True)
    check(r.returncode == 0 and r.stdout == b"42\n" and not r.stderr, "shell with the agent: %r" % (r,))
    if not MUSL:
        raise Skip("musl workload not built")
    wl = Workload([MUSL, "full"], env=preload_env())
    check(wl.first_line.startswith("waiting"), "static workload said %r" % wl.first_line)
    check(not agent_file_maps(wl.pid), "a static executable loaded the agent")
    pp = Podprof("--pid", str(wl.pid), "--set", "offcpu.enabled=false", "--set", "heap.sample_rate=%d" % RATE)
    pp.wait_log(r"heap: tracing pid %d .*not injected: static executable" % wl.pid, timeout=60)
    pp.stop()
    wl.kill()


def test_address_space_limit():
    """A preloaded process whose RLIMIT_AS leaves little room: the ring the
    agent would map could make its own malloc fail. podprof leaves the
    agent dormant, says why, traces it with uprobes."""
    import subprocess
    wl = Workload([SITES, "small"], env=preload_env())
    check(wl.first_line.startswith("waiting"), "workload said %r" % wl.first_line)
    with open("/proc/%d/status" % wl.pid) as f:
        vm = int(re.search(r"^VmSize:\s+(\d+) kB", f.read(), re.M).group(1)) * 1024
    lim = vm + (32 << 20)
    subprocess.run(["prlimit", "--pid", str(wl.pid), "--as=%d:%d" % (lim, lim)], check=True)
    pp = Podprof("--pid", str(wl.pid), "--set", "offcpu.enabled=false", "--set", "heap.sample_rate=1")
    pp.wait_log(r"heap: tracing pid %d .*not injected: preloaded agent: its address-space limit" % wl.pid,
                timeout=60)
    wl.p.send_signal(signal.SIGUSR1)
    check(wl.p.stdout.readline().decode().strip() == "ready", "workload did not allocate its sites")
    check(not ring_rss_kb(wl.pid, 4 << 20) and not ring_rss_kb(wl.pid, 16 << 20), "a ring was mapped")
    pp.stop()
    wl.kill()


def test_memory_cgroup_limit():
    """A preloaded process whose memory cgroup leaves little room: the ring
    the agent would map, charged to it, could get it OOM-killed. podprof
    leaves the agent dormant, says which cgroup and how much is free,
    traces it with uprobes; the process keeps allocating."""
    cg = MemCgroup()
    wl = Workload([SITES, "small"], env=preload_env())
    try:
        check(wl.first_line.startswith("waiting"), "workload said %r" % wl.first_line)
        cg.add(wl.pid)
        cg.limit(cg.usage() + (8 << 20))
        pp = Podprof("--pid", str(wl.pid), "--set", "offcpu.enabled=false", "--set", "heap.sample_rate=1")
        line = pp.wait_log(r"heap: tracing pid %d .*not injected: preloaded agent: memory cgroup /%s: "
                           r"[\d.]+ MiB free under its [\d.]+ MiB limit" % (wl.pid, cg.name), timeout=60)
        print(line)
        wl.p.send_signal(signal.SIGUSR1)
        check(wl.p.stdout.readline().decode().strip() == "ready", "workload did not allocate its sites")
        check(not ring_rss_kb(wl.pid, 4 << 20) and not ring_rss_kb(wl.pid, 16 << 20), "a ring was mapped")
        check(wl.alive(), "workload died")
        pp.stop()
    finally:
        wl.kill()
        cg.remove()


def test_musl_preloaded():
    if not MUSL_DYN:
        raise Skip("musl-gcc not installed")
    wl, pp, watch = sites(MUSL_DYN)
    check_sites(pp.profile("/debug/pprof/heap"), "musl-preload")
    finish(wl, pp, watch, "musl")


def test_jemalloc_after_agent():
    if not os.path.exists(JEMALLOC_SO):
        raise Skip("libjemalloc.so.2 not installed")
    wl, pp, watch = sites(SITES, more=(JEMALLOC_SO,))
    with open("/proc/%d/maps" % wl.pid) as f:
        check("libjemalloc" in f.read(), "jemalloc not loaded")
    check_sites(pp.profile("/debug/pprof/heap"), "jemalloc-after-agent")
    finish(wl, pp, watch, "jemalloc")


def test_jemalloc_linked():
    """jemalloc linked into the program (a DT_NEEDED library): the agent
    forwards to it, the next definition after the agent."""
    if not JEMALLOC_LINKED:
        raise Skip("jemalloc workload not built")
    wl, pp, watch = sites(JEMALLOC_LINKED)
    check_sites(pp.profile("/debug/pprof/heap"), "jemalloc-linked")
    finish(wl, pp, watch, "jemalloc linked")


def test_cxx_preloaded():
    if not CXX:
        raise Skip("g++ not installed")
    wl, pp, watch = sites(CXX)
    heap = pp.profile("/debug/pprof/heap")
    check_life_site(heap, "cxx_site", "c++ new[]")
    alloc = per_function(heap, "alloc_space").get("cxx_temp", 0)
    want = 3000 * 5000
    check(abs(alloc - want) <= tol(5000, 3000) * want, "cxx_temp alloc %d, want %d" % (alloc, want))
    check(per_function(heap, "inuse_space").get("cxx_temp", 0) <= 0.05 * want, "deleted objects still in use")
    finish(wl, pp, watch, "c++")


def test_dlopen_later():
    """A library dlopen()ed after podprof enabled the agent binds malloc to
    it like every other module: covered with no step of podprof."""
    wl = Workload([LIFECYCLE, "dlopen", LIFELIB], env=preload_env())
    check(wl.first_line == "waiting", "workload said %r" % wl.first_line)
    watch = TracerWatch(wl.pid)
    pp = Podprof("--pid", str(wl.pid), "--set", "heap.sample_rate=%d" % RATE,
                 "--set", "offcpu.enabled=false", "--set", "heap.over_budget=warn", *RING)
    pp.wait_log(r"heap: tracing pid %d .*preloaded agent" % wl.pid, timeout=60)
    wl.p.send_signal(signal.SIGUSR1)
    check(wl.p.stdout.readline().decode().strip() == "loaded", "dlopen failed")
    wl.p.send_signal(signal.SIGUSR1)
    check(wl.p.stdout.readline().decode().strip() == "ready", "lib_site did not run")
    settle(pp)
    check_life_site(pp.profile("/debug/pprof/heap"), "lib_site", "dlopen")
    check("slots redirected" not in pp.log_text(), "podprof redirected slots of a preloaded process")
    finish(wl, pp, watch, "dlopen")


def test_fork_server_other_user():
    """A fork-per-request server running as nobody (podprof cannot open its
    /proc/PID/mem: the ring is read with process_vm_readv): hundreds of
    children allocate, some on an alternate signal stack, some exec; none
    dies; a long-lived child is profiled like its parent."""
    n = int(os.environ.get("PP_PRELOAD_FORKS", "400"))
    forks = shared_copy(FORKS)
    wl = Workload([forks, str(n)], env=preload_env(), user=65534, group=65534, extra_groups=[])
    check(wl.first_line == "waiting", "workload said %r" % wl.first_line)
    watch = TracerWatch(wl.pid)
    cfg = write_tmp(("targets:\n  - exe: %s\n" % forks).encode(), ".yaml")
    pp = Podprof("--config", cfg, "--set", "heap.sample_rate=%d" % RATE, "--set", "offcpu.enabled=false",
                 "--set", "discovery.interval_ms=200", "--set", "heap.over_budget=warn", *RING)
    pp.wait_log(r"heap: tracing pid %d .*preloaded agent" % wl.pid, timeout=60)
    wl.p.send_signal(signal.SIGUSR1)
    line = wl.p.stdout.readline().decode().strip()
    check(line.startswith("child "), "workload said %r" % line)
    child = int(line.split()[1])
    watch.add(child)
    pp.wait_log(r"heap: tracing pid %d .*preloaded agent" % child, timeout=60)
    os.kill(child, signal.SIGUSR1)
    lines = [wl.p.stdout.readline().decode().strip() for _ in range(2)]
    done = [l for l in lines if l.startswith("done ")]
    check("ready" in lines and done, "workload said %r" % lines)
    check(done[0] == "done %d bad 0" % n, "children died or saw their data changed: %r" % done[0])
    settle(pp)
    heap = pp.profile("/debug/pprof/heap")
    mine = {"samples": [s for s in heap["samples"] if s["num_labels"]["pid"][0] == child]}
    mine.update({k: v for k, v in heap.items() if k != "samples"})
    check_life_site(mine, "fork_site", "fork child as nobody")
    for s in mine["samples"]:
        fr = frames(heap, s)
        if "fork_site" in fr:
            check("main" in fr, "fork child's stack without main: %s" % fr)
    pp.stop()
    watch.done("forks")
    wl.p.send_signal(signal.SIGTERM)
    check(wl.p.wait(timeout=60) == 0, "fork server exit code")
    os.unlink(cfg)


def test_kill_loop():
    """podprof started and stopped (SIGTERM, and SIGKILL after a random
    moment) again and again next to 8 threads allocating with their own
    checksum: the target never notices."""
    cycles = int(os.environ.get("PP_PRELOAD_CYCLES", "100"))
    wl = Workload([STORM], env=preload_env())
    check(wl.first_line == "running", "storm said %r" % wl.first_line)
    watch = TracerWatch(wl.pid)
    import random
    rnd = random.Random(1)
    for i in range(cycles):
        pp = Podprof("--pid", str(wl.pid), "--set", "offcpu.enabled=false", "--set", "cpu.enabled=false",
                     "--set", "heap.sample_rate=65536", "--set", "threads.enabled=false")
        if i % 10 == 0:
            pp.wait_log(r"heap: tracing pid %d .*preloaded agent" % wl.pid, timeout=60)
        time.sleep(rnd.uniform(0, 0.2))
        if i % 2:
            pp.p.send_signal(signal.SIGTERM)
            time.sleep(rnd.uniform(0, 0.1))
        pp.kill()
        check(wl.alive(), "storm died in cycle %d" % i)
    watch.done("kill loop")
    wl.p.send_signal(signal.SIGTERM)
    out = wl.p.stdout.read().decode()
    rc = wl.p.wait(timeout=60)
    check(rc == 0 and out.startswith("ok "), "storm exit %d: %r" % (rc, out))


def test_unwind_through_agent():
    """Another tool's unwinder (libgcc's, through backtrace(3)) in the next
    malloc after the agent walks through the agent's sampled path (at rate
    1 every call takes it, with a real call into that malloc) up to main:
    the agent carries CFI for its code."""
    wl = Workload([UNWIND], env=preload_env(UNWLIB))
    check(wl.first_line == "waiting", "workload said %r" % wl.first_line)
    pp = Podprof("--pid", str(wl.pid), "--set", "heap.sample_rate=1", "--set", "offcpu.enabled=false",
                 "--set", "heap.over_budget=warn")
    pp.wait_log(r"heap: tracing pid %d .*preloaded agent" % wl.pid, timeout=60)
    wl.p.send_signal(signal.SIGUSR1)
    line = wl.p.stdout.readline().decode().strip()
    check(re.fullmatch(r"frames \d+", line) is not None, "the unwinder did not reach main: %r" % line)
    wait_for(lambda: agent_metrics(pp, wl.pid)["ring"] > 0 or None, "a sample through the agent's ring")
    pp.stop()
    wl.kill()


def ring_rss_kb(pid, size):
    """Rss of the anonymous mapping of exactly size bytes (the agent's ring)."""
    with open("/proc/%d/smaps" % pid) as f:
        text = f.read()
    out = []
    for block in re.split(r"\n(?=[0-9a-f]+-[0-9a-f]+ )", text):
        head = block.split("\n", 1)[0].split()
        lo, hi = (int(x, 16) for x in head[0].split("-"))
        if hi - lo == size and len(head) < 6:
            m = re.search(r"^Rss:\s+(\d+) kB", block, re.M)
            out.append(int(m.group(1)))
    return out


def test_ring_given_back():
    """Dormant, the agent has no ring; enabled, it maps the ring podprof
    sized; once podprof stopped, the process's next allocation gives the
    ring's pages back."""
    wl = Workload([STORM], env=preload_env())
    check(wl.first_line == "running", "storm said %r" % wl.first_line)
    size = 32 << 20
    check(not ring_rss_kb(wl.pid, size), "a ring mapped before podprof came")
    pp = Podprof("--pid", str(wl.pid), "--set", "offcpu.enabled=false", "--set", "cpu.enabled=false",
                 "--set", "heap.sample_rate=65536", "--set", "heap.ring_mib=32")
    pp.wait_log(r"heap: tracing pid %d .*preloaded agent" % wl.pid, timeout=60)
    used = wait_for(lambda: [r for r in ring_rss_kb(wl.pid, size) if r > 0] or None,
                    lambda: "no ring mapped: %s" % ring_rss_kb(wl.pid, size))
    print("ring Rss while profiled: %s kB" % used)
    pp.stop()
    back = wait_for(lambda: ring_rss_kb(wl.pid, size) == [0] or None,
                    lambda: "ring kept: %s kB" % ring_rss_kb(wl.pid, size))
    check(back, "ring Rss")
    wl.p.send_signal(signal.SIGTERM)
    out = wl.p.stdout.read().decode()
    check(wl.p.wait(timeout=60) == 0 and out.startswith("ok "), "storm: %r" % out)


if __name__ == "__main__":
    run([test_glibc_preloaded, test_preload_mode_refuses_without_agent, test_harmless_where_unused,
         test_address_space_limit, test_memory_cgroup_limit, test_musl_preloaded,
         test_jemalloc_after_agent, test_jemalloc_linked, test_cxx_preloaded, test_dlopen_later, test_fork_server_other_user,
         test_unwind_through_agent, test_kill_loop, test_ring_given_back])
