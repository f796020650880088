#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Targets (and their environment) working against podprof (issue 14):
podprof's file descriptors exhausted while a target lives, a pid reused,
names and paths full of quotes, backslashes and newlines. podprof keeps
its targets, keeps serving, and says what it refused."""
import os
import re
import resource
import shutil
import subprocess
import tempfile
import time

from harness import (Podprof, Skip, Workload, check, frames, profile_until, run, sanitized,
                     wait_for)

JITSPIN = os.environ.get("WL_JITSPIN")


def prlimit_nofile(pid, soft, hard):
    subprocess.run(["prlimit", "--pid", str(pid), "--nofile=%d:%d" % (soft, hard)], check=True)


def test_emfile_is_not_exit():
    """With no file descriptor left (EMFILE), a live target cannot be read
    but has not exited: it must not be dropped (and re-attached when fds
    come back), and the failures are counted."""
    wl = Workload(["sleep", "120"], wait_line=False)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # started with a soft limit below the hard one (prlimit execs podprof)
    pp = Podprof("--pid", str(wl.pid), "--set", "discovery.interval_ms=200",
                 wrap=("prlimit", "--nofile=256:%d" % hard))
    pp.wait_log(r"target: pid %d " % wl.pid, timeout=30)
    # podprof raised its soft limit to the hard one at start
    with open("/proc/%d/limits" % pp.p.pid) as f:
        lim = re.search(r"Max open files\s+(\d+)\s+(\d+)", f.read())
    check(lim and lim.group(1) == lim.group(2),
          "podprof's RLIMIT_NOFILE not raised to its hard limit: %s" % (lim and lim.group(0)))
    mark = len(pp.lines)
    # no fd left: every open podprof makes now fails with EMFILE (only the
    # soft limit moves: raising a hard limit needs CAP_SYS_RESOURCE)
    # (the limit bounds fd numbers, and 0-2 are taken: no new fd at all;
    # the fds podprof holds keep working)
    prlimit_nofile(pp.p.pid, 3, hard)
    time.sleep(2.0)  # ten discovery passes on an idle machine
    # and at least one, however late a loaded machine runs it: its log line
    # (written after the count; /metrics cannot answer without an fd)
    pp.wait_log(r"discovery: cannot (read|list) /proc.*(?i:too many open files)", timeout=60,
                start=mark)
    prlimit_nofile(pp.p.pid, hard, hard)
    time.sleep(0.6)
    check(wl.alive(), "the target died")
    lines = pp.lines[mark:]
    exited = [l for l in lines if re.search(r"target: pid %d .*exited" % wl.pid, l)]
    check(not exited, "a live target was taken for exited under EMFILE:\n%s" % "\n".join(lines[:20]))
    m = pp.metrics()
    errs = sum(v for k, v in m.items() if k.startswith("podprof_target_read_errors_total"))
    check(errs > 0, "no podprof_target_read_errors_total counted: %s" %
          {k: v for k, v in m.items() if "error" in k})
    check(any(re.search(r"too many open files|EMFILE", l, re.I) for l in lines),
          "no log line says why:\n%s" % "\n".join(lines[:20]))
    st, _, _ = pp.request("/healthz")
    check(st == 200, "/healthz %d" % st)


# The Prometheus text format (0.0.4), strictly: a sample line is
# name{label="value",...} value, label values escape only \\, \" and \n.
SAMPLE_RX = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*'
                       r'(\{([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
                       r'(,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*")*,?)?\})?'
                       r' [-+]?([0-9.eE+-]+|NaN|[+-]?Inf)( -?[0-9]+)?$')
COMMENT_RX = re.compile(r'^# (HELP [a-zA-Z_:][a-zA-Z0-9_:]* .*|TYPE [a-zA-Z_:][a-zA-Z0-9_:]* '
                        r'(counter|gauge|histogram|summary|untyped))$')


def parse_metrics_strict(text):
    """Returns {(name, frozenset(labels)): value}; raises on any bad line."""
    out = {}
    for n, line in enumerate(text.split("\n")):
        if line == "":
            continue
        if line.startswith("#"):
            check(COMMENT_RX.match(line), "/metrics line %d: bad comment %r" % (n + 1, line))
            continue
        check(SAMPLE_RX.match(line), "/metrics line %d: not a sample: %r" % (n + 1, line))
        name = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0)
        labels = {}
        for k, v in re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"', line):
            labels[k] = re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), v)
        out[(name, frozenset(labels.items()))] = float(line.rsplit(" ", 1)[1])
    return out


def test_hostile_names():
    """A target whose executable path and comm hold quotes, backslashes and
    a newline: /metrics stays valid Prometheus text with the comm escaped,
    and every log line is one line."""
    d = tempfile.mkdtemp(prefix='pp-h14t-"q\\b\n')
    name = 'a"b\\c\nd'  # the comm: 8 bytes, within its 15
    exe = os.path.join(d, name)
    shutil.copy("/bin/sleep", exe)
    try:
        wl = Workload([exe, "120"], wait_line=False)
        def comm():
            with open("/proc/%d/comm" % wl.pid) as f:
                return f.read()[:-1]

        wait_for(lambda: comm() == name, lambda: "the exec (comm %r)" % comm())
        pp = Podprof("--pid", str(wl.pid))
        pp.wait_log(r"target: pid %d " % wl.pid, timeout=30)
        st, _, body = pp.request("/metrics")
        check(st == 200, "/metrics %d" % st)
        m = parse_metrics_strict(body.decode())
        rss = [dict(k[1]) for k in m if k[0] == "podprof_target_resident_memory_bytes"]
        check(any(l.get("comm") == name for l in rss), "comm label: %r" % rss)
        ts = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (error|warn |info |debug) ")
        bad = [l for l in pp.lines if not ts.match(l)]
        check(not bad, "log lines that are not log entries: %r" % bad[:5])
        check(any(("(%s)" % name.replace("\n", "\\n")) in l for l in pp.lines),
              "the target's comm not logged escaped: %r" % pp.lines[-5:])
    finally:
        shutil.rmtree(d, ignore_errors=True)


def bomb_name(length):
    """A mangled name whose substitutions nest: b<T, T> of the previous type
    T per 11 bytes, so it prints exponentially long (245 bytes: 54 MB)."""
    digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    m, i = "_Z1f1a1bIS_S_E", 2
    while len(m) < length:
        sid = "S%s_" % digits[i - 1]
        m += "S0_I" + sid + sid + "E"
        i += 1
    return m


def hwm_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"VmHWM:\s+(\d+)", f.read()).group(1))


def test_jit_demangle_bomb():
    """The issue's JIT map: code named by an exponentially expanding mangled
    name (256 bytes). A CPU profile names it with the bounded demangling ("f", without
    its 100 MB parameter list), podprof's peak RSS grows by less than 64 MiB
    (the unbounded demangler needed over 100 MB), and the bound is counted
    and logged once."""
    check(JITSPIN and os.path.exists(JITSPIN), "WL_JITSPIN not built")
    wl = Workload([JITSPIN, bomb_name(256)])
    pp = Podprof("--pid", wl.first_line, "--set", "cpu.frequency_hz=49",
                 "--set", "discovery.interval_ms=200")
    pp.wait_log(r"target: pid %s " % wl.first_line, timeout=30)
    hwm0 = hwm_kb(pp.p.pid)
    # (49 Hz: a loaded machine may leave a window without the JIT frame)
    prof = profile_until(pp, "/debug/pprof/profile?seconds=2",
                         lambda p: any("f" in frames(p, smp) for smp in p["samples"]))
    names = set()
    for smp in prof["samples"]:
        names.update(f for f in frames(prof, smp) if isinstance(f, str))
    check("f" in names, "the JIT frame is not named \"f\": %r" % sorted(names)[:10])
    grown = hwm_kb(pp.p.pid) - hwm0
    # (ASan's quarantine and shadow memory make RSS meaningless there; its
    # hostile-elf unit suite bounds the demangler under ASan.)
    check(sanitized() or grown < 64 * 1024, "podprof's peak RSS grew by %d KiB" % grown)
    m = pp.metrics()
    check(m.get("podprof_symbol_names_bounded_total", 0) >= 1, "not counted: %r" %
          {k: v for k, v in m.items() if "symbol" in k})
    pp.wait_log(r"podprof_symbol_names_bounded_total", timeout=60)
    pp.profile("/debug/pprof/profile?seconds=1")
    time.sleep(0.5)
    check(len([l for l in pp.lines if "podprof_symbol_names_bounded_total" in l]) == 1,
          "logged more than once")
    wl.p.terminate()


def spawn_with_pid(argv, pid, tries=200):
    """Starts argv as process `pid` (free again) through ns_last_pid: other
    processes fork too, so it retries; None when the pid was never had."""
    for _ in range(tries):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
        wl = Workload(argv, wait_line=False)
        if wl.pid == pid:
            return wl
        wl.kill()
    return None


def test_pid_reuse():
    """A process selected by pid exits and a new process gets its pid: it is
    not the selected process (pid + start time name a process), so podprof
    must not profile it under the old entry's name."""
    d = tempfile.mkdtemp(prefix="pp-h14t-")
    other = os.path.join(d, "reusedproc")
    shutil.copy("/bin/sleep", other)
    try:
        wl = Workload(["sleep", "120"], wait_line=False)
        pid = wl.pid
        pp = Podprof("--pid", str(pid), "--set", "discovery.interval_ms=200")
        pp.wait_log(r"target: pid %d \(sleep\)" % pid, timeout=30)
        wl.kill()
        pp.wait_log(r"target: pid %d \(sleep\) exited" % pid, timeout=60)
        # (marked before the spawn: the next pass may see it at once)
        mark = len(pp.lines)
        wl2 = spawn_with_pid([other, "120"], pid)
        if wl2 is None:
            raise Skip("pid %d not had again" % pid)
        time.sleep(1.5)  # several discovery passes on an idle machine
        # and at least the one that saw the new process, however late
        pp.wait_log(r"target: pid %d .*pid reused" % pid, timeout=60, start=mark)
        lines = pp.lines[mark:]
        taken = [l for l in lines if re.search(r"target: pid %d \(reusedproc\)" % pid, l)
                 and "exited" not in l and "pid reused" not in l]
        check(not taken, "a new process with the reused pid was taken for the selected one:\n%s"
              % "\n".join(lines))
        check(pp.metrics().get("podprof_targets") == 0, "podprof_targets not 0")
        check(any("pid reused" in l for l in lines), "no log line says the pid was reused:\n%s"
              % "\n".join(lines))
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    run([test_emfile_is_not_exit, test_hostile_names, test_jit_demangle_bomb, test_pid_reuse])
