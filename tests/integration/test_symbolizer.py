#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The isolated symbolizer (issue 14): the targets' files are parsed in a
helper process with no capabilities, no_new_privs and a seccomp filter. A
helper that crashes or hangs costs names, not podprof: /healthz, /metrics
and profiles keep answering, the helper is restarted, names come back."""
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

from harness import Podprof, Workload, check, frames, profile_until, run, sanitized

SPIN = os.environ.get("WL_SPIN")
HOT = {"hot_a", "hot_b", "hot_c"}


def helper_pid(pp, not_pid=None, timeout=60):
    """The podprof-sym child of podprof (another than not_pid)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        kids = []
        for tid in os.listdir("/proc/%d/task" % pp.p.pid):
            try:
                with open("/proc/%d/task/%s/children" % (pp.p.pid, tid)) as f:
                    kids += [int(x) for x in f.read().split()]
            except OSError:
                pass
        for k in kids:
            try:
                with open("/proc/%d/status" % k) as f:
                    st = f.read()
            except OSError:
                continue
            if re.search(r"^Name:\s+podprof-sym$", st, re.M) and "State:\tZ" not in st \
                    and k != not_pid:
                return k
        time.sleep(0.1)
    raise AssertionError("no symbolizer helper under podprof %d" % pp.p.pid)


def status(pid):
    with open("/proc/%d/status" % pid) as f:
        return dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)


def start(*extra):
    check(SPIN and os.path.exists(SPIN), "WL_SPIN not built")
    wl = Workload([SPIN])
    pp = Podprof("--pid", wl.first_line, "--set", "cpu.frequency_hz=199",
                 "--set", "heap.enabled=false", "--set", "discovery.interval_ms=200", *extra)
    pp.wait_log(r"target: pid %s " % wl.first_line, timeout=30)
    return wl, pp


def named(prof):
    names = set()
    for smp in prof["samples"]:
        names.update(f for f in frames(prof, smp) if isinstance(f, str))
    return names


def addresses(prof, file_re):
    """Addresses of named locations in the mapping whose file matches."""
    ms = {m["id"]: m for m in prof["mappings"]}
    return [l["address"] for l in prof["locations"]
            if l["lines"] and re.search(file_re, ms.get(l["mapping"], {}).get("file", ""))]


def maps(pid):
    out = []
    with open("/proc/%s/maps" % pid) as f:
        for line in f:
            p = line.split()
            if len(p) >= 6:
                lo, hi = (int(x, 16) for x in p[0].split("-"))
                out.append((lo, hi, int(p[2], 16), p[5]))
    return out


def libc_addrs(pid):
    """Addresses of a few libc functions in pid (the same libc as ours)."""
    import ctypes
    libc = ctypes.CDLL("libc.so.6")
    out = []
    for fn in ("getpid", "qsort", "strtol"):
        a = ctypes.cast(getattr(libc, fn), ctypes.c_void_p).value
        mine = [m for m in maps("self") if m[0] <= a < m[1]]
        check(mine, "%s not mapped here" % fn)
        lo, _, off, path = mine[0]
        foff = a - lo + off
        theirs = [m for m in maps(pid) if m[3] == path and m[2] <= foff < m[2] + m[1] - m[0]]
        check(theirs, "%s of %s not mapped in %s" % (fn, path, pid))
        out.append("0x%x" % (theirs[0][0] + foff - theirs[0][2]))
    return out


def symbolize(pp, addrs, timeout=60):
    """POST /symbol: {address: name} for the addresses named."""
    st, _, data = pp.request("/debug/pprof/symbol", method="POST", body="+".join(addrs),
                             timeout=timeout)
    check(st == 200, "/symbol: %d %r" % (st, data[:200]))
    out = {}
    for line in data.decode().splitlines()[1:]:
        a, _, name = line.partition(" ")
        out[int(a, 16)] = name
    return out


def wait_metric(pp, name, at_least, timeout=60):
    deadline = time.time() + timeout
    while True:
        v = pp.metrics().get(name, 0)
        if v >= at_least:
            return v
        check(time.time() < deadline, "%s stayed at %s (want >= %s)" % (name, v, at_least))
        time.sleep(0.2)


def test_helper_confined():
    """The helper runs with no capability at all, no_new_privs, a seccomp
    filter and the configured address-space limit; podprof's profiles are
    named through it."""
    wl, pp = start("--set", "symbolizer.memory_mib=160")
    h = helper_pid(pp)
    st = status(h)
    for cap in ("CapEff", "CapPrm", "CapInh", "CapAmb"):
        check(int(st[cap].strip(), 16) == 0, "helper %s = %s" % (cap, st[cap].strip()))
    check(st["NoNewPrivs"].strip() == "1", "helper NoNewPrivs %r" % st["NoNewPrivs"])
    check(st["Seccomp"].strip() == "2", "helper Seccomp %r (2 = filter)" % st["Seccomp"])
    fds = sorted(int(x) for x in os.listdir("/proc/%d/fd" % h))
    check(set(fds) <= {0, 1, 2, 3}, "helper holds podprof's fds: %r" % fds)
    with open("/proc/%d/limits" % h) as f:
        lim = re.search(r"Max address space\s+(\S+)\s+(\S+)", f.read())
    # (an ASan build reserves terabytes of address space: no RLIMIT_AS there)
    check(sanitized() or lim.group(1) == str(160 << 20),
          "helper RLIMIT_AS %s, want %d" % (lim.group(1), 160 << 20))
    prof = profile_until(pp, "/debug/pprof/profile?seconds=2", lambda p: HOT & named(p))
    check(HOT & named(prof), "no hot_* function named: %r" % sorted(named(prof))[:10])
    m = pp.metrics()
    check(m.get("podprof_symbolizer_requests_total", 0) >= 1, "no request counted")
    check(m.get("podprof_symbolizer_crashes_total", -1) == 0, "crashes counted: %r" % m)
    # the helper is not taken for a target
    check(not re.search(r"target: pid %d " % h, pp.log_text()), "the helper was profiled")
    pp.stop()


def test_helper_crash():
    """SIGSEGV in the helper: podprof stays up, counts and logs it once,
    starts another helper, and names come back through it."""
    wl, pp = start()
    prof = profile_until(pp, "/debug/pprof/profile?seconds=2",
                         lambda p: addresses(p, r"/spin$"))
    spin_addrs = addresses(prof, r"/spin$")
    check(spin_addrs, "no named location in spin")
    h = helper_pid(pp)
    os.kill(h, signal.SIGSEGV)
    wait_metric(pp, "podprof_symbolizer_crashes_total", 1)
    wait_metric(pp, "podprof_symbolizer_restarts_total", 1)
    h2 = helper_pid(pp, not_pid=h)
    check(status(h2)["Seccomp"].strip() == "2", "the new helper has no seccomp filter")
    st, _, body = pp.request("/healthz", timeout=10)
    check(st == 200, "/healthz %d after the crash" % st)
    prof = profile_until(pp, "/debug/pprof/profile?seconds=1", lambda p: HOT & named(p))
    check(HOT & named(prof), "no hot_* function named after the crash")
    # names resolved anew by the new helper (its cache starts empty)
    req0 = pp.metrics().get("podprof_symbolizer_requests_total", 0)
    got = symbolize(pp, spin_addrs)
    check(HOT & set(got.values()), "/symbol after the restart: %r" % got)
    check(pp.metrics().get("podprof_symbolizer_requests_total", 0) > req0,
          "/symbol did not go through the helper")
    pp.wait_log(r"symbolizer helper died", timeout=60)
    check(len(re.findall(r"symbolizer helper died", pp.log_text())) == 1, "logged twice")
    check(pp.alive(), "podprof died")
    pp.stop()


def test_helper_hang():
    """A stopped helper (SIGSTOP) misses its deadline: it is killed and
    replaced, the file it was on is not sent again (file+offset names),
    other files are named by the next helper; /healthz, /metrics and
    profiles answer throughout."""
    # 5 s: a first load of libc's DWARF took 1.3 s at load average 100
    wl, pp = start("--set", "symbolizer.timeout_ms=5000")
    prof = profile_until(pp, "/debug/pprof/profile?seconds=2",
                         lambda p: addresses(p, r"/spin$"))
    spin_addrs = addresses(prof, r"/spin$")
    libc = libc_addrs(wl.first_line)
    check(spin_addrs, "no named location in spin")
    # both files loaded (and named) before the helper is stopped
    check(HOT & set(symbolize(pp, spin_addrs).values()), "spin not named")
    check(len(symbolize(pp, libc)) == len(libc), "libc not named")
    h = helper_pid(pp)
    os.kill(h, signal.SIGSTOP)
    res = {}

    def ask():
        t0 = time.time()
        res["spin"] = symbolize(pp, spin_addrs)
        res["took"] = time.time() - t0

    t = threading.Thread(target=ask)
    t.start()
    # while the request waits for the stopped helper
    for _ in range(3):
        t0 = time.time()
        st, _, _ = pp.request("/healthz", timeout=10)
        check(st == 200, "/healthz %d during the hang" % st)
        pp.metrics()
        check(time.time() - t0 < 5, "/healthz + /metrics took %.1f s during the hang" %
              (time.time() - t0))
        time.sleep(0.2)
    t.join(60)
    check("took" in res, "/symbol did not answer")
    # one deadline (5 s); the rest refused or answered at once
    check(res["took"] < 20, "/symbol took %.1f s" % res["took"])
    wait_metric(pp, "podprof_symbolizer_timeouts_total", 1)
    wait_metric(pp, "podprof_symbolizer_files_refused_total", 1)
    wait_metric(pp, "podprof_symbolizer_restarts_total", 1)
    h2 = helper_pid(pp, not_pid=h)
    check(h2 != h, "same helper")
    # started after podprof dropped its capabilities: still its own uid
    check(status(h2)["Uid"].split()[:2] == ["65533", "65533"],
          "restarted helper Uid %r" % status(h2)["Uid"])
    check(not os.path.exists("/proc/%d/status" % h) or "State:\tZ" in open(
        "/proc/%d/status" % h).read(), "the stopped helper was not killed")
    prof = profile_until(pp, "/debug/pprof/profile?seconds=1", lambda p: HOT & named(p))
    check(HOT & named(prof), "the profile lost its names")
    # The file the helper was on when it missed its deadline (spin's, libc,
    # or one the store was resolving meanwhile) is not sent again; the
    # other files are named by the new helper.
    lost0 = pp.metrics().get("podprof_symbolizer_requests_lost_total", 0)
    t0 = time.time()
    got_spin = symbolize(pp, spin_addrs)
    got_libc = symbolize(pp, libc)
    check(time.time() - t0 < 20, "/symbol took %.1f s after the restart" % (time.time() - t0))
    spin_ok = bool(HOT & set(got_spin.values()))
    libc_ok = len(got_libc) == len(libc)
    check(spin_ok or libc_ok, "nothing named after the restart: %r %r" % (got_spin, got_libc))
    if not (spin_ok and libc_ok):
        check(pp.metrics().get("podprof_symbolizer_requests_lost_total", 0) > lost0,
              "a file left unnamed but no request counted as lost")
    pp.wait_log(r"did not answer within symbolizer.timeout_ms", timeout=60)
    check(pp.alive(), "podprof died")
    pp.stop()


def no_helper(pp, timeout=60):
    """True once podprof has no podprof-sym child left."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            helper_pid(pp, timeout=0.05)
        except AssertionError:
            return True
        time.sleep(0.2)
    return False


def test_helper_idle_end():
    """symbolizer.idle_seconds: an unused helper ends (its cache freed, not
    a crash nor a restart); the next new location starts another one, which
    names it."""
    wl, pp = start("--set", "symbolizer.idle_seconds=2")
    prof = profile_until(pp, "/debug/pprof/profile?seconds=1",
                         lambda p: addresses(p, r"/spin$"))
    spin_addrs = addresses(prof, r"/spin$")
    check(spin_addrs, "no named location in spin")
    check(no_helper(pp), "the helper is still there %ds after its last request" % 60)
    # podprof reaps the helper, then publishes the count: the helper can be
    # gone before the count is there.
    wait_metric(pp, "podprof_symbolizer_idle_ends_total", 1)
    m = pp.metrics()
    check(m.get("podprof_symbolizer_crashes_total", 0) == 0, "an idle end counted as a crash")
    check(m.get("podprof_symbolizer_restarts_total", 0) == 0, "an idle end counted as a restart")
    # /symbol goes through a new helper (the store's names are kept: it is
    # asked anew only for what it has not named)
    got = symbolize(pp, spin_addrs)
    check(HOT & set(got.values()), "/symbol after the idle end: %r" % got)
    h = helper_pid(pp)
    check(status(h)["Seccomp"].strip() == "2", "the new helper has no seccomp filter")
    prof = profile_until(pp, "/debug/pprof/profile?seconds=1", lambda p: HOT & named(p))
    check(HOT & named(prof), "no hot_* function named after the idle end")
    check(pp.alive(), "podprof died")
    pp.stop()
    wl.kill()


# What an application would try on the helper (issue 25): its root and fds
# through /proc, its memory, and its socket with pidfd_getfd. Prints one
# line per try: "name ok" or "name ERRNO".
ATTACK = r"""
import ctypes, errno, os, sys
h = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
def tri(name, f):
    try:
        f()
        print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
def getfd():
    pfd = os.pidfd_open(h)
    fd = libc.syscall(438, pfd, 3, 0)  # pidfd_getfd(pidfd, 3, 0)
    if fd < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
tri("root", lambda: os.listdir("/proc/%d/root/" % h))
tri("fd", lambda: os.readlink("/proc/%d/fd/3" % h))  # (listing the numbers is allowed)
tri("mem", lambda: open("/proc/%d/mem" % h, "rb").close())
tri("getfd", getfd)
"""


def attack(h, preexec=None, wrap=()):
    # (a python outside /root, which another uid may not enter)
    py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    out = subprocess.run(list(wrap) + [py, "-c", ATTACK, str(h)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=preexec, timeout=60)
    check(out.returncode == 0, "attacker failed: %s" % out.stderr)
    return dict(l.split(" ", 1) for l in out.stdout.splitlines())


def test_helper_identity():
    """The helper runs as symbolizer.helper_uid (65533 by default) and is
    non-dumpable: neither a process of its own uid nor root without
    CAP_SYS_PTRACE (an application container's default) can walk its root
    or fds, read its memory or take its socket (pidfd_getfd)."""
    wl, pp = start()
    h = helper_pid(pp)
    st = status(h)
    check(st["Uid"].split()[:2] == ["65533", "65533"], "helper Uid %r" % st["Uid"])
    check(st["Gid"].split() == ["65533"] * 4, "helper Gid %r" % st["Gid"])
    check(st["Groups"].strip() == "", "helper Groups %r" % st["Groups"])
    # non-dumpable: its /proc files belong to root, not to its uid
    check(os.stat("/proc/%d/status" % h).st_uid == 0, "the helper is dumpable")
    # the test itself (root with CAP_SYS_PTRACE) can: the tries are meaningful
    mine = attack(h)
    check(mine["root"] == "ok" and mine["fd"] == "ok", "root with every capability: %r" % mine)

    def as_helper_uid():
        os.setgroups([])
        os.setresgid(65533, 65533, 65533)
        os.setresuid(65533, 65533, 65533)

    same = attack(h, preexec=as_helper_uid)
    check(all(v in ("EACCES", "EPERM") for v in same.values()), "as uid 65533: %r" % same)
    if shutil.which("setpriv"):
        app = attack(h, wrap=("setpriv", "--bounding-set=-sys_ptrace", "--inh-caps=-sys_ptrace"))
        check(all(v in ("EACCES", "EPERM") for v in app.values()),
              "as root without CAP_SYS_PTRACE: %r" % app)
    check(not re.search(r"cannot take uid", pp.log_text()), "uid warning logged")
    # and it still names what it is given
    prof = profile_until(pp, "/debug/pprof/profile?seconds=2", lambda p: HOT & named(p))
    check(HOT & named(prof), "no hot_* function named: %r" % sorted(named(prof))[:10])
    pp.stop()
    wl.kill()


if __name__ == "__main__":
    run([test_helper_confined, test_helper_identity, test_helper_crash, test_helper_hang,
         test_helper_idle_end])
