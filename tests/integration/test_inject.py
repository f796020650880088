#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""heap.mode inject/auto end to end: podprof maps its sampling agent into
a running workload and redirects the allocator's GOT slots; sampled
allocations reach the same store as on the uprobe path. Per-site values
are checked with the Poisson tolerances of test_heap; an allocation storm
with its own checksum survives repeated attach/detach (graceful and
SIGKILLed podprof, whose agent a new podprof reuses); a static binary
falls back to uprobes with its reason."""
import os
import re
import signal
import subprocess
import time

from harness import Podprof, Skip, Workload, check, frames, run, sanitized, wait_for, write_tmp
from test_heap import MUSL, RATE, SITES, check_sites, per_function, settle, tol

STORM = os.environ.get("WL_HEAP_STORM")
LIFECYCLE = os.environ.get("WL_HEAP_LIFECYCLE")
LIFELIB = os.environ.get("WL_HEAP_LIFELIB")
MUSL_DYN = os.environ.get("WL_HEAP_SITES_MUSL_DYN")
CXX = os.environ.get("WL_HEAP_CXX")
COVBENCH = os.environ.get("WL_COVBENCH")
DEPTH = os.environ.get("WL_HEAP_DEPTH")
STACKS = os.environ.get("WL_HEAP_STACKS")
VFORKER = os.environ.get("WL_HEAP_VFORKER")
DEEPBIND = os.environ.get("WL_HEAP_DEEPBIND")
OWNALLOC = os.environ.get("WL_HEAP_OWNALLOC")
NSPLUG = os.environ.get("WL_HEAP_NSPLUG")
DLSWAP = os.environ.get("WL_HEAP_DLSWAP")
SWAPA = os.environ.get("WL_HEAP_SWAPA")
SWAPB = os.environ.get("WL_HEAP_SWAPB")
LIFE_N, LIFE_SZ = 3000, 7000  # lifecycle.c
JEMALLOC_SO = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"


def agent_maps(pid):
    with open("/proc/%d/maps" % pid) as f:
        return [l for l in f if "podprof-agent" in l]


def file_maps(pid):
    """(start, end, perms, path) of the file-backed mappings but the agent's:
    the slot writes must leave them as they were (RELRO read-only again,
    vmas merged back after the temporary mprotect)."""
    out = []
    with open("/proc/%d/maps" % pid) as f:
        for l in f:
            x = l.split()
            if len(x) >= 6 and x[5].startswith("/") and "podprof-agent" not in l:
                out.append((x[0], x[1], x[5]))
    return out


MAPS_BEFORE = {}


def ring_metrics(pp, pid):
    """The agent's sample paths from /metrics: ring and kernel samples, the
    kernel path's reasons (ring full, stack unknown), ring skips."""
    m = pp.request("/metrics")[2].decode()
    out = {}
    for key, pat in (("ring", r'podprof_heap_agent_samples_total\{pid="%d",path="ring"\} (\d+)'),
                     ("kernel", r'podprof_heap_agent_samples_total\{pid="%d",path="kernel"\} (\d+)'),
                     ("full", r'podprof_heap_agent_kernel_path_total\{pid="%d",reason="ring_full"\} (\d+)'),
                     ("unknown", r'podprof_heap_agent_kernel_path_total\{pid="%d",reason="stack_unknown"\} (\d+)'),
                     ("skipped", r'podprof_heap_agent_ring_skipped_total\{pid="%d"\} (\d+)')):
        g = re.search(pat % pid, m)
        check(g, "no %s metric:\n%s" % (key, m[-2000:]))
        out[key] = int(g.group(1))
    return out


def check_ring_used(pp, pid, label):
    """The agent's samples are all accounted for, through the ring or the
    kernel path (the per-site values, checked by the caller, came through
    both), none lost to a skip, and a thread's first sample took the kernel
    path. How many reach the ring depends on how soon podprof reads that
    first sample: these workloads allocate in one burst, which on a loaded
    machine may end before (test_ring_stacks allocates for seconds and
    requires the ring)."""
    r = ring_metrics(pp, pid)
    print("%s: %s" % (label, r))
    check(r["ring"] + r["kernel"] > 0, "%s: no agent samples: %s" % (label, r))
    check(r["kernel"] >= 1 and r["unknown"] >= 1, "%s: no first sample through the kernel: %s" % (label, r))
    check(r["skipped"] == 0, "%s: ring contents skipped: %s" % (label, r))


def sites(path, mode, env=None):
    e = dict(os.environ, **env) if env else None
    wl = Workload([path, "full"], env=e)
    check(wl.first_line.startswith("waiting"), "workload said %r" % wl.first_line)
    MAPS_BEFORE[wl.pid] = file_maps(wl.pid)
    pp = Podprof("--pid", str(wl.pid), "--set", "heap.sample_rate=%d" % RATE,
                 "--set", "offcpu.enabled=false", "--set", "heap.mode=" + mode,
                 "--set", "heap.over_budget=warn")
    pp.wait_log(r"heap: tracing pid %d" % wl.pid, timeout=60)
    wl.p.send_signal(signal.SIGUSR1)
    line = wl.p.stdout.readline().decode().strip()
    check(line == "ready", "workload said %r" % line)
    settle(pp)
    return wl, pp


def test_glibc_injected():
    wl, pp = sites(SITES, "inject")
    log = pp.log_text()
    check("injected agent" in log, "not injected:\n" + log[-800:])
    check(len(agent_maps(wl.pid)) == 2, "agent mappings: %s" % agent_maps(wl.pid))
    # The one descriptor the agent keeps sits at the top of the process's
    # range (its own next open gets the number it would without podprof),
    # and no scratch page is left behind (the agent's two mappings only).
    with open("/proc/%d/limits" % wl.pid) as f:
        soft = int(re.search(r"Max open files\s+(\d+)", f.read()).group(1))
    fds = [int(fd) for fd in os.listdir("/proc/%d/fd" % wl.pid)
           if "podprof-agent" in os.readlink("/proc/%d/fd/%s" % (wl.pid, fd))]
    check(len(fds) == 1 and fds[0] >= soft - 16, "agent descriptors %s (soft limit %d)" %
          (fds, soft))
    check(file_maps(wl.pid) == MAPS_BEFORE[wl.pid],
          "module mappings changed by the slot writes:\n%s\n%s" %
          (MAPS_BEFORE[wl.pid], file_maps(wl.pid)))
    heap = pp.profile("/debug/pprof/heap")
    check_sites(heap, "glibc-inject")
    check(any("heap mode=inject" in c for c in heap["comments"]), "comments %s" % heap["comments"])
    m = pp.request("/metrics")[2].decode()
    check(re.search(r'podprof_heap_injected\{pid="%d",reason=""\} 1' % wl.pid, m), "metrics:\n" + m[-1500:])
    check("podprof_heap_inject_pause_seconds{pid=\"%d\"}" % wl.pid in m, "no pause metric")
    check_ring_used(pp, wl.pid, "glibc")
    # The agent counts every free (not sampled): sites.c frees 2 x 8260
    # site_c blocks and 4 aligned ones after the attach, and reallocs its
    # chain 9 times (a realloc of a block counts as its free, as on the
    # uprobe path); libc may free a few of its own through the patched
    # slots, never fewer.
    fm = re.search(r'podprof_heap_calls_total\{pid="%d",kind="free"\} (\d+)' % wl.pid, m)
    check(fm, "no free counter:\n" + m[-1500:])
    frees = int(fm.group(1))
    check(16524 <= frees <= 16524 + 1000, "agent counted %d frees, workload made 16524" % frees)
    com = [c for c in heap["comments"] if "frees=" in c]
    check(com and int(re.search(r"frees=(\d+)", com[0]).group(1)) >= 16524,
          "heap comments: %s" % com)
    pp.stop()
    # Detached: the slots point at libc again, the process keeps running.
    check(wl.alive(), "workload died after detach")
    wl.p.send_signal(signal.SIGTERM)
    check(wl.p.wait(timeout=60) == 0, "workload exit code after detach")


def test_jemalloc_preload():
    if not os.path.exists(JEMALLOC_SO):
        raise Skip("libjemalloc.so.2 not installed")
    wl, pp = sites(SITES, "auto", env={"LD_PRELOAD": JEMALLOC_SO})
    log = pp.log_text()
    check("allocator libjemalloc" in log and "injected agent" in log,
          "preloaded jemalloc not injected:\n" + log[-800:])
    check_sites(pp.profile("/debug/pprof/heap"), "jemalloc-preload")
    check_ring_used(pp, wl.pid, "jemalloc-preload")
    pp.stop()
    wl.kill()


def test_static_falls_back():
    if not MUSL:
        raise Skip("musl workload not built")
    wl, pp = sites(MUSL, "auto")
    log = pp.log_text()
    check("not injected: static executable" in log, "no fallback reason:\n" + log[-800:])
    check(not agent_maps(wl.pid), "agent mapped into a static binary")
    m = pp.request("/metrics")[2].decode()
    check('podprof_heap_injected{pid="%d",reason="static executable"} 0' % wl.pid in m,
          "metrics:\n" + m[-1500:])
    check_sites(pp.profile("/debug/pprof/heap"), "musl-static-fallback")
    pp.stop()
    wl.kill()


def test_stderr_closed():
    """A daemon with its stderr closed: the agent's memfd would become its
    fd 2 (memfd_create takes the lowest free descriptor), and the daemon's
    log writes would land in the agent's code. podprof refuses to inject,
    says why, and traces it with uprobes; the daemon's fd 2 stays closed."""
    wl = Workload(["/bin/sh", "-c", 'exec 2>&- "$0" full', SITES])
    check(wl.first_line.startswith("waiting"), "workload said %r" % wl.first_line)
    check(not os.path.exists("/proc/%d/fd/2" % wl.pid), "fd 2 open in the workload")
    pp = Podprof("--pid", str(wl.pid), "--set", "heap.sample_rate=%d" % RATE,
                 "--set", "offcpu.enabled=false", "--set", "heap.over_budget=warn")
    pp.wait_log(r"heap: tracing pid %d .*not injected: its fd 2 is closed" % wl.pid, timeout=60)
    check(not agent_maps(wl.pid), "agent mapped: %s" % agent_maps(wl.pid))
    check(not os.path.exists("/proc/%d/fd/2" % wl.pid), "podprof left an fd 2 in the workload")
    wl.p.send_signal(signal.SIGUSR1)
    check(wl.p.stdout.readline().decode().strip() == "ready", "workload did not finish its sites")
    settle(pp)
    check_sites(pp.profile("/debug/pprof/heap"), "stderr closed, uprobes")
    pp.stop()
    wl.kill()


def traced_tasks(pid):
    out = []
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                m = re.search(r"^TracerPid:\s+(\d+)", f.read(), re.M)
            if m and m.group(1) != "0":
                out.append(tid)
        except OSError:
            pass
    return out


def test_vfork_refused():
    """A thread inside vfork(): podprof does not stop any thread of the
    process (the vfork parent would stay in tracing stop, its child would
    see the agent appear); it says why; every vfork child exits 0."""
    wl = Workload([VFORKER])
    check(wl.first_line == "running", "vforker said %r" % wl.first_line)
    pp = Podprof("--pid", str(wl.pid), "--set", "heap.mode=inject", "--set", "offcpu.enabled=false",
                 "--set", "discovery.interval_ms=200", "--set", "threads.enabled=false")
    seen = []
    deadline = time.time() + 60
    while time.time() < deadline and "a thread is in vfork()" not in pp.log_text():
        seen += traced_tasks(wl.pid)
        time.sleep(0.01)
    check("a thread is in vfork()" in pp.log_text(), "no vfork refusal:\n" + pp.log_text()[-800:])
    check(not seen and not agent_maps(wl.pid), "a task was stopped (%s) or the agent mapped" % seen)
    pp.stop()
    wl.p.send_signal(signal.SIGTERM)
    out = wl.p.stdout.read().decode()
    check(wl.p.wait(timeout=60) == 0 and out.startswith("ok "), "vforker: %r" % out)


def vm_size(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"^VmSize:\s+(\d+) kB", f.read(), re.M).group(1)) * 1024


def test_address_space_limit():
    """A process whose RLIMIT_AS leaves little room: the agent's mappings
    could make its own malloc fail. podprof does not inject, says why,
    traces it with uprobes; the process allocates all its sites."""
    wl = Workload([SITES, "small"])
    check(wl.first_line.startswith("waiting"), "workload said %r" % wl.first_line)
    # room for the small sites (~1.6 MiB) and more, not for podprof's margin
    lim = vm_size(wl.pid) + (32 << 20)
    subprocess.run(["prlimit", "--pid", str(wl.pid), "--as=%d:%d" % (lim, lim)], check=True)
    pp = Podprof("--pid", str(wl.pid), "--set", "heap.sample_rate=1", "--set", "offcpu.enabled=false",
                 "--set", "heap.over_budget=warn")
    pp.wait_log(r"heap: tracing pid %d .*not injected: its address-space limit" % wl.pid, timeout=60)
    check(not agent_maps(wl.pid), "agent mapped: %s" % agent_maps(wl.pid))
    wl.p.send_signal(signal.SIGUSR1)
    check(wl.p.stdout.readline().decode().strip() == "ready", "workload did not allocate its sites")
    settle(pp)
    inuse = per_function(pp.profile("/debug/pprof/heap"), "inuse_space")
    # every allocation sampled (rate 1): exact
    check(inuse.get("site_a") == 200 * 4000, "site_a through uprobes: %s" % inuse.get("site_a"))
    pp.stop()
    wl.kill()


class MemCgroup:
    """A memory cgroup of its own for test processes: v1 when the memory
    controller is mounted there (this machine), else v2. remove() kills
    nothing: the caller ends its processes first."""

    def __init__(self):
        self.v2 = False
        base = None
        with open("/proc/self/mounts") as f:
            for l in f:
                x = l.split()
                if len(x) >= 4 and x[2] == "cgroup" and "memory" in x[3].split(","):
                    base = x[1]
                    break
                if len(x) >= 4 and x[2] == "cgroup2" and base is None:
                    try:
                        with open(os.path.join(x[1], "cgroup.controllers")) as c:
                            if "memory" in c.read().split():
                                base, self.v2 = x[1], True
                    except OSError:
                        pass
        if base is None:
            raise Skip("no memory cgroup controller mounted (v1 or v2)")
        self.name = "podprof-test-%d" % os.getpid()
        self.path = os.path.join(base, self.name)
        try:
            if self.v2:
                with open(os.path.join(base, "cgroup.subtree_control"), "w") as f:
                    f.write("+memory")
            os.mkdir(self.path)
        except OSError as e:
            raise Skip("memory cgroup controller at %s not writable: %s" % (base, e))

    def _file(self, v1, v2):
        return os.path.join(self.path, v2 if self.v2 else v1)

    def add(self, pid):
        with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
            f.write(str(pid))

    def usage(self):
        with open(self._file("memory.usage_in_bytes", "memory.current")) as f:
            return int(f.read())

    def limit(self, n):
        with open(self._file("memory.limit_in_bytes", "memory.max"), "w") as f:
            f.write(str(n))

    def remove(self):
        # the processes are gone, their exit may take a moment to show
        for _ in range(100):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.05)
        check(False, "cgroup %s not removed" % self.path)


def test_memory_cgroup_limit():
    """A process whose memory cgroup leaves little room: the agent's
    mappings, charged to it, could get it OOM-killed. heap.mode=inject
    does not inject and says why (which cgroup, how much is free); the
    process keeps running and allocating. Under a generous limit the same
    process is injected."""
    cg = MemCgroup()
    wl = Workload([SITES, "small"])
    try:
        check(wl.first_line.startswith("waiting"), "workload said %r" % wl.first_line)
        cg.add(wl.pid)
        # room for the small sites (~1.6 MiB), not for the agent and its margin
        cg.limit(cg.usage() + (8 << 20))
        pp = Podprof("--pid", str(wl.pid), "--set", "heap.mode=inject", "--set", "offcpu.enabled=false",
                     "--set", "heap.over_budget=warn")
        line = pp.wait_log(r"heap: cannot trace pid %d .*memory cgroup /%s: [\d.]+ MiB free under its [\d.]+ MiB "
                    r"limit; the agent needs [\d.]+ MiB \+ 32 MiB margin" % (wl.pid, cg.name), timeout=60)
        print(line)
        check(not agent_maps(wl.pid), "agent mapped: %s" % agent_maps(wl.pid))
        wl.p.send_signal(signal.SIGUSR1)
        check(wl.p.stdout.readline().decode().strip() == "ready", "workload did not allocate its sites")
        check(wl.alive(), "workload died")
        pp.stop()
        cg.limit(cg.usage() + (512 << 20))
        pp = Podprof("--pid", str(wl.pid), "--set", "heap.mode=inject", "--set", "offcpu.enabled=false",
                     "--set", "heap.over_budget=warn")
        pp.wait_log(r"heap: tracing pid %d" % wl.pid, timeout=60)
        check("injected agent" in pp.log_text(), "not injected:\n" + pp.log_text()[-800:])
        check(agent_maps(wl.pid), "no agent mapped")
        pp.stop()
        check(wl.alive(), "workload died")
    finally:
        wl.kill()
        cg.remove()


def test_storm_attach_detach():
    """8 threads allocating while podprof injects, detaches (graceful stop
    restores the slots; SIGKILL leaves them and the next podprof reuses the
    agent) again and again. CYCLES is kept small for the suite's time
    budget; the storm verifies every block and its checksum itself."""
    cycles = int(os.environ.get("PP_INJECT_CYCLES", "6"))
    wl = Workload([STORM])
    check(wl.first_line == "running", "storm said %r" % wl.first_line)
    reused = 0
    for i in range(cycles):
        pp = Podprof("--pid", str(wl.pid), "--set", "offcpu.enabled=false",
                     "--set", "heap.mode=inject", "--set", "cpu.enabled=false",
                     "--set", "heap.sample_rate=8388608")
        pp.wait_log(r"heap: tracing pid %d" % wl.pid, timeout=60)
        check("injected agent" in pp.log_text(), "cycle %d not injected:\n%s" % (i, pp.log_text()[-600:]))
        reused += "reused" in pp.log_text()
        time.sleep(0.3)
        check(wl.alive(), "storm died in cycle %d" % i)
        if i % 3 == 2:
            pp.kill()
        else:
            pp.stop()
        check(len(agent_maps(wl.pid)) == 2, "cycle %d: agent mappings %s" % (i, agent_maps(wl.pid)))
    check(reused >= 1 and reused < cycles, "agent reused in %d of %d cycles" % (reused, cycles))
    wl.p.send_signal(signal.SIGTERM)
    out = wl.p.stdout.read().decode()
    rc = wl.p.wait(timeout=30)
    check(rc == 0 and out.startswith("ok "), "storm exit %d: %r" % (rc, out))


def test_musl_dynamic():
    if not MUSL_DYN:
        raise Skip("musl-gcc not installed")
    wl, pp = sites(MUSL_DYN, "inject")
    check("injected agent" in pp.log_text(), "musl not injected:\n" + pp.log_text()[-800:])
    check_sites(pp.profile("/debug/pprof/heap"), "musl-dynamic")
    check_ring_used(pp, wl.pid, "musl-dynamic")
    pp.stop()
    wl.kill()


def check_life_site(prof, fn, label):
    got = per_function(prof, "inuse_space").get(fn, 0)
    want = LIFE_N * LIFE_SZ
    t = tol(LIFE_SZ, LIFE_N)
    check(abs(got - want) <= t * want, "%s: %s inuse %.1f MiB, expected %.1f MiB +- %.0f%%" %
          (label, fn, got / 2**20, want / 2**20, 100 * t))


def test_cxx_new_delete():
    if not CXX:
        raise Skip("g++ not installed")
    wl, pp = sites(CXX, "inject")
    check("injected agent" in pp.log_text(), "C++ workload not injected:\n" + pp.log_text()[-800:])
    heap = pp.profile("/debug/pprof/heap")
    check_life_site(heap, "cxx_site", "c++ new[]")  # C++ names are shown without parameters
    # new/delete pairs: allocated, then freed again (delete reaches free)
    alloc = per_function(heap, "alloc_space").get("cxx_temp", 0)
    want = 3000 * 5000
    check(abs(alloc - want) <= tol(5000, 3000) * want, "cxx_temp alloc %d, want %d" % (alloc, want))
    check(per_function(heap, "inuse_space").get("cxx_temp", 0) <= 0.05 * want, "deleted objects still in use")
    check_ring_used(pp, wl.pid, "c++")
    pp.stop()
    wl.kill()


def test_dlopen_after_attach():
    wl = Workload([LIFECYCLE, "dlopen", LIFELIB])
    check(wl.first_line == "waiting", "workload said %r" % wl.first_line)
    pp = Podprof("--pid", str(wl.pid), "--set", "heap.sample_rate=%d" % RATE,
                 "--set", "offcpu.enabled=false", "--set", "heap.mode=inject",
                 "--set", "discovery.interval_ms=200", "--set", "heap.over_budget=warn")
    pp.wait_log(r"heap: tracing pid %d .*injected agent" % wl.pid, timeout=60)
    wl.p.send_signal(signal.SIGUSR1)
    check(wl.p.stdout.readline().decode().strip() == "loaded", "dlopen failed")
    pp.wait_log(r"heap: pid %d: \d+ more allocator slots redirected" % wl.pid, timeout=60)
    wl.p.send_signal(signal.SIGUSR1)
    check(wl.p.stdout.readline().decode().strip() == "ready", "lib_site did not run")
    settle(pp)
    check_life_site(pp.profile("/debug/pprof/heap"), "lib_site", "dlopen")
    pp.stop()
    wl.kill()


def test_exec():
    """After exec the patches are gone with the old image: podprof injects
    the new one (and writes nothing into it at the old addresses)."""
    wl = Workload([LIFECYCLE, "exec", SITES, "full"])
    check(wl.first_line == "waiting", "workload said %r" % wl.first_line)
    pp = Podprof("--pid", str(wl.pid), "--set", "heap.sample_rate=%d" % RATE,
                 "--set", "offcpu.enabled=false", "--set", "heap.mode=inject",
                 "--set", "discovery.interval_ms=200", "--set", "heap.over_budget=warn")
    pp.wait_log(r"heap: tracing pid %d .*injected agent" % wl.pid, timeout=60)
    wl.p.send_signal(signal.SIGUSR1)
    line = wl.p.stdout.readline().decode().strip()
    check(line.startswith("waiting"), "exec'd image said %r" % line)
    pp.wait_log(r"target: pid %d exec'd" % wl.pid, timeout=60)
    deadline = time.time() + 60
    while time.time() < deadline and len(re.findall(r"heap: tracing pid %d .*injected agent" % wl.pid,
                                                    pp.log_text())) < 2:
        time.sleep(0.2)
    check(len(re.findall(r"heap: tracing pid %d .*injected agent, \d" % wl.pid, pp.log_text())) >= 1 and
          len(re.findall(r"heap: tracing pid %d .*injected agent" % wl.pid, pp.log_text())) >= 2,
          "new image not injected:\n" + pp.log_text()[-1200:])
    check(len(agent_maps(wl.pid)) == 2, "agent mappings after exec %s" % agent_maps(wl.pid))
    wl.p.send_signal(signal.SIGUSR1)
    check(wl.p.stdout.readline().decode().strip() == "ready", "exec'd image not ready")
    settle(pp)
    check_sites(pp.profile("/debug/pprof/heap"), "after exec")
    pp.stop()
    wl.kill()


def test_fork_child():
    wl = Workload([LIFECYCLE, "fork"])
    check(wl.first_line == "waiting", "workload said %r" % wl.first_line)
    cfg = write_tmp(("targets:\n  - pid: %d\n" % wl.pid).encode(), ".yaml")
    pp = Podprof("--config", cfg, "--set", "heap.sample_rate=%d" % RATE,
                 "--set", "offcpu.enabled=false", "--set", "heap.mode=inject",
                 "--set", "discovery.interval_ms=200", "--set", "heap.over_budget=warn")
    pp.wait_log(r"heap: tracing pid %d .*injected agent" % wl.pid, timeout=60)
    wl.p.send_signal(signal.SIGUSR1)
    line = wl.p.stdout.readline().decode().strip()
    check(line.startswith("child "), "workload said %r" % line)
    child = int(line.split()[1])
    # The child inherits the redirected slots and the agent: podprof adopts
    # it and reuses that agent rather than loading a second one.
    pp.wait_log(r"heap: tracing pid %d .*injected agent, reused" % child, timeout=60)
    check(len(agent_maps(child)) == 2, "child agent mappings %s" % agent_maps(child))
    os.kill(child, signal.SIGUSR1)
    check(wl.p.stdout.readline().decode().strip() == "ready", "child did not allocate")
    settle(pp)
    heap = pp.profile("/debug/pprof/heap")
    mine = {"samples": [s for s in heap["samples"] if s["num_labels"]["pid"][0] == child]}
    mine.update({k: v for k, v in heap.items() if k != "samples"})
    check_life_site(mine, "fork_site", "fork child")
    pp.stop()
    os.kill(child, signal.SIGTERM)
    wl.p.wait(timeout=60)
    os.unlink(cfg)


def calls_total(pp, pid):
    m = pp.request("/metrics")[2].decode()
    return {k: int(v) for k, v in
            re.findall(r'podprof_heap_calls_total\{pid="%d",kind="(\w+)"\} (\d+)' % pid, m)}


def test_coverage_counted():
    """The agent's call counters against a uprobe on the real malloc, on
    covbench's known mix (not sampled: every call is counted): per
    iteration the agent sees malloc and strdup's malloc (libc's own GOT
    slot), misses a call through a pointer read before the redirection,
    and sees the three frees; the uprobe sees all of them."""
    import subprocess
    if sanitized():
        # The ASan build's covbench is ASan-built too: ASan's interceptors
        # replace malloc and strdup, so the known mix is not what runs.
        raise Skip("covbench is built with ASan's allocator interceptors")
    n = 5000
    wl = subprocess.Popen([COVBENCH], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    agent = probe = None
    try:
        check(wl.stdout.readline().strip() == "ready", "covbench did not start")
        agent = Podprof("--pid", str(wl.pid), "--set", "heap.mode=inject",
                        "--set", "offcpu.enabled=false")
        agent.wait_log(r"heap: tracing pid %d .*injected agent" % wl.pid, timeout=60)
        probe = Podprof("--pid", str(wl.pid), "--set", "heap.mode=uprobe",
                        "--set", "heap.over_budget=warn", "--set", "offcpu.enabled=false")
        probe.wait_log(r"heap: tracing pid %d .*uretprobe|heap: tracing pid %d .*uprobe" %
                       (wl.pid, wl.pid), timeout=60)
        a0, u0 = calls_total(agent, wl.pid), calls_total(probe, wl.pid)
        wl.stdin.write("%d\n" % n)
        wl.stdin.flush()
        check(wl.stdout.readline().strip() == "done", "covbench did not finish")
        a1, u1 = calls_total(agent, wl.pid), calls_total(probe, wl.pid)
        da = {k: a1[k] - a0[k] for k in ("alloc", "free")}
        du = {k: u1[k] - u0[k] for k in ("alloc", "free")}
        check(da == {"alloc": 2 * n, "free": 3 * n}, "agent counted %s, expected %s" %
              (da, {"alloc": 2 * n, "free": 3 * n}))
        check(du == {"alloc": 3 * n, "free": 3 * n}, "uprobe counted %s" % du)
    finally:
        for p in (probe, agent):
            if p:
                p.stop()
        wl.kill()
        wl.wait()


def stack_copy_metrics(pp, pid):
    m = pp.request("/metrics")[2].decode()
    copy = re.search(r'podprof_heap_stack_copy_bytes\{pid="%d"\} (\d+)' % pid, m)
    short = re.search(r'podprof_heap_stack_short_total\{pid="%d"\} (\d+)' % pid, m)
    check(copy and short, "no stack copy metrics:\n" + m[-1500:])
    return int(copy.group(1)), int(short.group(1))


def test_stack_copy_fits():
    """Each sampled allocation copies only what the process's stacks use
    (twice the deepest seen; each 4 KiB page costs the target ~0.8 us): on
    depth.c's shallow phase the copy shrinks below cpu.stack_bytes; when
    the stacks get ~20 KiB deeper, the first copies are too short (counted),
    the copy goes back up, and the deep site's stacks reach main again.
    Only the samples the metric counts as short may lack main."""
    full = 32768
    wl = Workload([DEPTH])
    check(wl.first_line == "running", "depth said %r" % wl.first_line)
    pp = Podprof("--pid", str(wl.pid), "--set", "heap.mode=inject", "--set",
                 "heap.sample_rate=65536", "--set", "offcpu.enabled=false",
                 "--set", "cpu.stack_bytes=%d" % full, "--set", "heap.over_budget=warn")
    pp.wait_log(r"heap: tracing pid %d .*injected agent" % wl.pid, timeout=60)
    # ~20,000 blocks of 4 KiB a second at 64 KiB: ~1,200 samples a second;
    # 16 complete unwinds shrink the copy
    deadline, copy = time.time() + 30, full
    while time.time() < deadline:
        copy, short = stack_copy_metrics(pp, wl.pid)
        if copy < full:
            break
        time.sleep(0.5)
    check(4096 <= copy < full, "shallow phase: stack copy %d bytes, expected below %d" % (copy, full))
    check(short == 0, "shallow phase: %d short copies" % short)
    wl.p.send_signal(signal.SIGUSR1)
    # The deep phase lasts until the first deep copies came up short and the
    # copy went back up: however few samples a loaded machine lets it take
    # a second (the checks below then read the settled values).
    def deep_seen():
        c, sh = stack_copy_metrics(pp, wl.pid)
        return c == full and sh >= 1

    wait_for(deep_seen, lambda: "a short copy, then the full copy again, in the deep phase "
             "(copy bytes, short copies): %s" % (stack_copy_metrics(pp, wl.pid),))

    # ... and on until a deep sample was copied whole after that (the
    # copy's growth is seen before any sample taken with it).
    def deep_whole():
        h = pp.profile("/debug/pprof/heap")
        return any("deep_site" in frames(h, s) and "main" in frames(h, s) for s in h["samples"])

    wait_for(deep_whole, "a deep_site stack reaching main in the heap profile")
    wl.p.send_signal(signal.SIGUSR1)
    line = wl.p.stdout.readline().decode().split()
    check(line[:1] == ["idle"], "depth said %r" % line)
    settle(pp)
    copy2, short2 = stack_copy_metrics(pp, wl.pid)
    heap = pp.profile("/debug/pprof/heap")
    wl.p.send_signal(signal.SIGTERM)
    check(wl.p.wait(timeout=60) == 0, "depth exit code")
    print("copy %d -> %d bytes, %d short; blocks shallow %s deep %s" %
          (copy, copy2, short2, line[1], line[2]))
    # 20 frames of ~1 KiB: twice that is above 32 KiB, so the whole copy
    check(copy2 == full, "deep phase: stack copy %d bytes, expected %d" % (copy2, full))
    check(short2 >= 1, "the shallow copy never came up short on 20 KiB stacks")
    deep = [s for s in heap["samples"] if "deep_site" in frames(heap, s)]
    shallow = [s for s in heap["samples"] if "shallow_site" in frames(heap, s)]
    check(deep and shallow, "sites missing: %d deep, %d shallow samples" % (len(deep), len(shallow)))
    # a truncated stack is one short copy (several merge into one sample)
    cut = [s for s in deep if "main" not in frames(heap, s)]
    whole = [s for s in deep if "main" in frames(heap, s)]
    check(whole, "no deep_site stack reaches main: %s" % [frames(heap, s) for s in deep[:3]])
    check(all(frames(heap, s).count("deep") >= 21 for s in whole),
          "a complete deep stack lacks recursion frames: %s" %
          [frames(heap, s) for s in whole if frames(heap, s).count("deep") < 21][:1])
    check(len(cut) <= short2, "%d truncated deep stacks, only %d short copies counted" %
          (len(cut), short2))
    for s in shallow:
        check("main" in frames(heap, s), "shallow stack without main: %s" % frames(heap, s))
    pp.stop()


def start_stacks():
    """stacks.c injected and allocating (its first SIGUSR1 sent)."""
    wl = Workload([STACKS])
    check(wl.first_line == "running", "stacks said %r" % wl.first_line)
    pp = Podprof("--pid", str(wl.pid), "--set", "heap.mode=inject", "--set",
                 "heap.sample_rate=%d" % RATE, "--set", "offcpu.enabled=false",
                 "--set", "heap.over_budget=warn")
    pp.wait_log(r"heap: tracing pid %d .*injected agent" % wl.pid, timeout=60)
    wl.p.send_signal(signal.SIGUSR1)
    return wl, pp


def test_ring_stacks():
    """The agent records samples in the process only on a stack whose
    extent podprof found (the main thread's [stack], a thread's own
    mapping), never past its end: stacks.c allocates on the main thread,
    three pthreads and a fiber whose 64 KiB stack has inaccessible pages
    right above and below (a copy past its top would kill the process).
    The fiber's samples take the kernel path (counted as stack_unknown);
    every site's allocated bytes are within the Poisson tolerance, with
    its frames: the fiber's through fiber_main."""
    wl, pp = start_stacks()
    # Allocate for 4 s (enough samples for tight per-site tolerances), and
    # on until samples went through the ring and the fiber's through the
    # kernel: podprof must read a thread's first sample before its ring is
    # used, which a loaded machine can delay past those seconds.
    time.sleep(4)

    def both_paths():
        r = ring_metrics(pp, wl.pid)
        return r["ring"] > 0 and r["unknown"] >= 1

    wait_for(both_paths, lambda: "samples through the ring and the kernel path: %s" %
             ring_metrics(pp, wl.pid))
    wl.p.send_signal(signal.SIGUSR1)
    line = wl.p.stdout.readline().decode().split()
    check(line[:1] == ["idle"] and len(line) == 4, "stacks said %r" % line)
    settle(pp)
    heap = pp.profile("/debug/pprof/heap")
    r = ring_metrics(pp, wl.pid)
    check(wl.alive(), "stacks died")
    wl.p.send_signal(signal.SIGTERM)
    check(wl.p.wait(timeout=60) == 0, "stacks exit code")
    print("blocks main %s threads %s fiber %s; %s" % (line[1], line[2], line[3], r))
    check(r["ring"] > 0 and r["skipped"] == 0, "ring: %s" % r)
    check(r["unknown"] >= 1, "the fiber's samples never took the kernel path: %s" % r)
    alloc = per_function(heap, "alloc_space")
    for fn, n in (("main_site", int(line[1])), ("thread_site", int(line[2])),
                  ("fiber_site", int(line[3]))):
        got, want = alloc.get(fn, 0), n * 4096
        check(abs(got - want) <= tol(4096, n) * want, "%s: %.1f MiB allocated, %.1f MiB +- %.0f%% expected" %
              (fn, got / 2**20, want / 2**20, 100 * tol(4096, n)))
    fib = [s for s in heap["samples"] if "fiber_site" in frames(heap, s)]
    check(all("fiber_main" in frames(heap, s) for s in fib),
          "fiber stacks without fiber_main: %s" % [frames(heap, s) for s in fib][:2])
    thr = [s for s in heap["samples"] if "thread_site" in frames(heap, s)]
    check(all("thread_main" in frames(heap, s) for s in thr),
          "thread stacks without thread_main: %s" % [frames(heap, s) for s in thr][:2])
    mai = [s for s in heap["samples"] if "main_site" in frames(heap, s)]
    check(all("main" in frames(heap, s) for s in mai),
          "main-thread stacks without main: %s" % [frames(heap, s) for s in mai][:2])
    pp.stop()


def test_ring_garbage():
    """The ring is in the target's memory, so podprof reads it as untrusted
    input: random bytes written over it (as a buggy or hostile target
    could) are skipped and counted, podprof keeps serving, the target keeps
    running, and samples go through the ring again once the writes stop."""
    wl, pp = start_stacks()
    # the agent's data mapping ends with its 2 MiB ring (agent-abi.h)
    rw = [l.split()[0] for l in agent_maps(wl.pid) if l.split()[1].startswith("rw")]
    check(len(rw) == 1, "agent data mapping: %s" % agent_maps(wl.pid))
    end = int(rw[0].split("-")[1], 16)
    ring = end - (2 << 20)
    fd = os.open("/proc/%d/mem" % wl.pid, os.O_RDWR)
    try:
        deadline = time.time() + 3
        # the whole ring each time: records not read yet are always in it
        # (podprof reads every 10 ms), so each write spoils some
        while time.time() < deadline:
            os.pwrite(fd, os.urandom(2 << 20), ring)
            time.sleep(0.05)
    finally:
        os.close(fd)
    before = ring_metrics(pp, wl.pid)
    # podprof reads the spoiled ring, and then new samples, in its own time.
    def recovered():
        r = ring_metrics(pp, wl.pid)
        return r if r["skipped"] >= 1 and r["ring"] > before["ring"] else None

    after = wait_for(recovered, lambda: "garbage skipped and ring samples after it: %s -> %s" %
                     (before, ring_metrics(pp, wl.pid)))
    print("garbage: %s -> %s" % (before, after))
    check(pp.alive(), "podprof died")
    heap = pp.profile("/debug/pprof/heap")
    check("thread_site" in per_function(heap, "alloc_space"), "thread_site missing after the garbage")
    check(wl.alive(), "stacks died")
    wl.p.send_signal(signal.SIGUSR1)
    wl.p.stdout.readline()
    wl.p.send_signal(signal.SIGTERM)
    check(wl.p.wait(timeout=60) == 0, "stacks exit code")
    pp.stop()


def check_lazy_build(*paths):
    """The workloads of the two tests below must bind lazily: with BIND_NOW
    every slot would be bound when podprof scans, and the lazy-slot paths
    they test would not run."""
    for p in paths:
        d = subprocess.run(["readelf", "-d", p], stdout=subprocess.PIPE, check=True).stdout.decode()
        check("BIND_NOW" not in d and not re.search(r"FLAGS_1.*\bNOW\b", d),
              "%s is built with BIND_NOW:\n%s" % (p, d))


def deepbind_run(attach, argv):
    """heap_deepbind (a plugin with its own malloc dlopen()ed with
    RTLD_DEEPBIND, or one using the libc of its dlmopen() namespace, loaded
    before podprof) with or without podprof; its result line."""
    plugin = os.path.basename(argv[0])
    wl = Workload([DEEPBIND] + argv)
    check(wl.first_line == "running", "deepbind said %r" % wl.first_line)
    pp = None
    if attach:
        pp = Podprof("--pid", str(wl.pid), "--set", "offcpu.enabled=false",
                     "--set", "heap.mode=inject", "--set", "cpu.enabled=false",
                     "--set", "heap.sample_rate=65536", "--set", "heap.over_budget=warn")
        pp.wait_log(r"heap: tracing pid %d .*injected agent" % wl.pid, timeout=60)
    # now the plugin starts calling calloc and realloc: slots still lazy
    # when podprof scanned
    wl.p.send_signal(signal.SIGUSR1)
    line = wl.p.stdout.readline().decode().strip()
    check(line == "lazy", "deepbind said %r after SIGUSR1 (exit %s)" %
          (line, wl.p.poll() if line else wl.p.wait(timeout=30)))
    if pp:
        for _ in range(3):
            heap = pp.profile("/debug/pprof/heap")
            check(wl.alive(), "deepbind died while profiled (exit %s)" % wl.p.poll())
            time.sleep(0.3)
        com = [c for c in heap["comments"] if "heap mode=inject" in c]
        print("deepbind: %s" % com)
        check(com, "heap comments: %s" % heap["comments"])
        # the executable's slots are redirected; none of the plugin's (its
        # bound ones point to its own allocator, its lazy ones would bind
        # there), and they are counted as left alone
        check("heap_deepbind:" in com[0], "executable not redirected: %s" % com[0])
        check(plugin not in com[0], "plugin slots redirected: %s" % com[0])
        # one libc.so.6 (the first namespace's): the other one's slots
        # are bound to, or would bind to, its own malloc
        check(com[0].count("libc.so.6:") <= 1, "second libc redirected: %s" % com[0])
        g = re.search(r"(\d+) left alone", com[0])
        check(g and int(g.group(1)) >= 2, "plugin's lazy slots not counted: %s" % com[0])
        pp.stop()
    else:
        time.sleep(1)
    time.sleep(0.5)
    check(wl.alive(), "deepbind died (exit %s)" % wl.p.poll())
    wl.p.send_signal(signal.SIGTERM)
    out = wl.p.stdout.read().decode().strip()
    rc = wl.p.wait(timeout=30)
    check(rc == 0 and out.startswith("ok "), "deepbind exit %d: %r" % (rc, out))
    rounds, lazy = (int(x) for x in out.split()[1:3])
    check(0 < lazy <= rounds, "deepbind rounds %d, lazy rounds %d" % (rounds, lazy))
    return out


def test_deepbind_own_allocator():
    """Issue 24 item 9: a plugin loaded with RTLD_DEEPBIND that brings its
    own malloc/free keeps them. Its lazy calloc/realloc slots were sent to
    glibc (a glibc block then reached the plugin's free: abort). The same
    run without podprof is the reference."""
    if not DEEPBIND:
        raise Skip("deepbind workload not built")
    check_lazy_build(DEEPBIND, OWNALLOC)
    print("without podprof: %s" % deepbind_run(False, [OWNALLOC]))
    print("with podprof: %s" % deepbind_run(True, [OWNALLOC]))


def test_dlmopen_namespace():
    """A plugin in a dlmopen() namespace binds to that namespace's libc
    (a second libc.so.6 mapped): its lazy slots are left alone too. Sent
    to the first libc's calloc, a block would reach the second libc's
    free."""
    if not NSPLUG:
        raise Skip("deepbind workload not built")
    check_lazy_build(DEEPBIND, NSPLUG)
    print("without podprof: %s" % deepbind_run(False, [NSPLUG, "dlmopen"]))
    print("with podprof: %s" % deepbind_run(True, [NSPLUG, "dlmopen"]))


def test_dlswap_same_address():
    """Issue 24 item 10: two libraries dlopen()ed and dlclose()d in turn,
    each mapped where the other was (B's data where A's GOT was), while
    podprofs attach (redirecting each new library's lazy slots), stop or
    are killed. Each library checks its __dso_handle and canaries on every
    call (abort on a foreign write); every round's result is checked."""
    if not DLSWAP:
        raise Skip("dlswap workload not built")
    check_lazy_build(DLSWAP, SWAPA, SWAPB)
    ref = Workload([DLSWAP, SWAPA, SWAPB])
    check(ref.first_line == "running", "dlswap said %r" % ref.first_line)
    time.sleep(1)
    ref.p.send_signal(signal.SIGTERM)
    out = ref.p.stdout.read().decode().strip()
    check(ref.p.wait(timeout=30) == 0 and out.startswith("ok "), "dlswap without podprof: %r" % out)
    print("without podprof: %s" % out)
    cycles = int(os.environ.get("PP_INJECT_CYCLES", "6"))
    wl = Workload([DLSWAP, SWAPA, SWAPB])
    check(wl.first_line == "running", "dlswap said %r" % wl.first_line)
    redirected = 0
    for i in range(cycles):
        pp = Podprof("--pid", str(wl.pid), "--set", "offcpu.enabled=false",
                     "--set", "heap.mode=inject", "--set", "cpu.enabled=false",
                     "--set", "discovery.interval_ms=100", "--set", "heap.sample_rate=65536",
                     "--set", "heap.over_budget=warn")
        pp.wait_log(r"heap: tracing pid %d" % wl.pid, timeout=60)
        check("injected agent" in pp.log_text(), "cycle %d not injected:\n%s" % (i, pp.log_text()[-600:]))
        time.sleep(1.5)
        check(wl.alive(), "dlswap died in cycle %d (exit %s)" % (i, wl.p.poll()))
        pp.profile("/debug/pprof/heap")
        redirected += len(re.findall(r"more allocator slots redirected", pp.log_text()))
        if i % 3 == 2:
            pp.kill()
        else:
            pp.stop()
        check(wl.alive(), "dlswap died after cycle %d (exit %s)" % (i, wl.p.poll()))
    time.sleep(0.5)
    wl.p.send_signal(signal.SIGTERM)
    out = wl.p.stdout.read().decode().strip()
    rc = wl.p.wait(timeout=30)
    print("with podprof: %s; swapped libraries redirected %d times" % (out, redirected))
    check(rc == 0 and out.startswith("ok "), "dlswap exit %d: %r" % (rc, out))


if __name__ == "__main__":
    run([test_glibc_injected, test_coverage_counted, test_jemalloc_preload, test_static_falls_back, test_musl_dynamic,
         test_cxx_new_delete, test_dlopen_after_attach, test_exec, test_fork_child, test_stderr_closed, test_vfork_refused,
         test_address_space_limit, test_memory_cgroup_limit,
         test_storm_attach_detach, test_deepbind_own_allocator, test_dlmopen_namespace,
         test_dlswap_same_address,
         test_stack_copy_fits, test_ring_stacks, test_ring_garbage])
