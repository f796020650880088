#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Command line and configuration as a user meets them: exit codes,
check-config, errors that name file:line:key, env and flag overrides,
per-target listen addresses."""
import os
import subprocess
import tempfile

from harness import Podprof, Workload, check, run

PODPROF = os.environ.get("PODPROF")
DEMO = os.environ.get("WL_DEMO")


def sh(*args, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("PODPROF_")}
    e.update(env or {})
    r = subprocess.run([PODPROF] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=30, env=e)
    return r.returncode, r.stdout.decode(), r.stderr.decode()


def cfgfile(text):
    fd, p = tempfile.mkstemp(prefix="podprof-", suffix=".yaml")
    os.write(fd, text.encode())
    os.close(fd)
    return p


def test_help_version():
    rc, out, _ = sh("--help")
    check(rc == 0 and "--listen" in out and "check-config" in out, "--help: %d" % rc)
    rc, out, _ = sh("--version")
    check(rc == 0 and out.startswith("podprof "), "--version: %r" % out)
    rc, _, err = sh("--bogus")
    check(rc == 2, "unknown flag exit %d" % rc)
    rc, _, err = sh("--pid", "abc")
    check(rc == 2 and "--pid" in err, "bad pid: %d %r" % (rc, err))


def test_check_config():
    good = cfgfile("listen: ':7070'\ncpu:\n  frequency_hz: 199\nheap:\n  sample_rate: 1048576\n")
    rc, out, err = sh("check-config", good)
    check(rc == 0 and "frequency_hz: 199" in out, "check-config good: %d %r %r" % (rc, out, err))
    bad = cfgfile("listen: ':7070'\ncpu:\n  frequency_hz: 0\n")
    rc, out, err = sh("check-config", bad)
    check(rc == 2, "check-config bad exit %d" % rc)
    check("%s:3:" % bad in err and "cpu.frequency_hz" in err, "error must name file:line:key: %r" % err)
    typo = cfgfile("heap:\n  sampel_rate: 5\n")
    rc, _, err = sh("check-config", typo)
    check(rc == 2 and "%s:2:" % typo in err and "sampel_rate" in err, "unknown key: %r" % err)
    rc, _, err = sh("--config", bad)
    check(rc == 2 and "cpu.frequency_hz" in err, "--config bad: %d %r" % (rc, err))
    for p in (good, bad, typo):
        os.unlink(p)


def test_env_and_flags_override():
    rc, _, err = sh("--listen", "0", env={"PODPROF_CPU_FREQUENCY_HZ": "0"})
    check(rc == 2 and "PODPROF_CPU_FREQUENCY_HZ" in err, "bad env: %d %r" % (rc, err))
    rc, _, err = sh("--listen", "nonsense:port")
    check(rc == 2 and "--listen" in err, "bad listen: %d %r" % (rc, err))
    wl = Workload([DEMO])
    pp = Podprof("--pid", str(wl.pid), listen=None, env={"PODPROF_LISTEN": "127.0.0.1:0"})
    st, _, _ = pp.request("/healthz")
    check(st == 200, "PODPROF_LISTEN server: %d" % st)
    pp.stop()


def test_per_target_listen():
    wl1 = Workload([DEMO])
    wl2 = Workload([DEMO])
    cfg = cfgfile("targets:\n  - name: one\n    pid: %d\n    listen: '127.0.0.1:0'\n"
                  "  - name: two\n    pid: %d\n    listen: '127.0.0.1:0'\n" % (wl1.pid, wl2.pid))
    pp = Podprof("--config", cfg, "--set", "cpu.frequency_hz=199")
    pp.wait_log(r"port \d+\).*two", timeout=60)
    ports = pp.ports
    check(len(ports) == 3, "expected 3 servers, got ports %s" % ports)
    # The thread dump holds every thread of every target of a server, whatever
    # CPU each got (a CPU window may miss an idle demo on a loaded machine).
    main = pp.profile("/debug/pprof/goroutine", port=ports[0])
    one = pp.profile("/debug/pprof/goroutine", port=ports[1])
    pids_main = {s["num_labels"]["pid"][0] for s in main["samples"]}
    pids_one = {s["num_labels"]["pid"][0] for s in one["samples"]}
    check(pids_main == {wl1.pid, wl2.pid}, "main server pids %s" % pids_main)
    check(pids_one == {wl1.pid}, "per-target server pids %s" % pids_one)
    st, _, body = pp.request("/debug/pprof/cmdline", port=ports[2])
    check(body == DEMO.encode(), "cmdline on target two %r" % body)
    pp.stop()
    os.unlink(cfg)


def test_token():
    tok = cfgfile("s3cret\n")
    wl = Workload([DEMO])
    pp = Podprof("--pid", str(wl.pid), "--set", "http.token_file=" + tok)
    st, hdr, _ = pp.request("/debug/pprof/heap")
    check(st == 401, "no token: %d" % st)
    st, _, _ = pp.request("/debug/pprof/heap", headers={"Authorization": "Bearer s3cret"})
    check(st == 200, "with token: %d" % st)
    st, _, _ = pp.request("/healthz")
    check(st == 200, "healthz needs no token: %d" % st)
    # argv often holds secrets: /cmdline is behind the token like the profiles
    st, _, body = pp.request("/debug/pprof/cmdline")
    check(st == 401 and DEMO.encode() not in body, "cmdline without token: %d" % st)
    st, _, body = pp.request("/debug/pprof/cmdline", headers={"Authorization": "Bearer s3cret"})
    check(st == 200 and os.path.basename(DEMO).encode() in body, "cmdline with token: %d %r" %
          (st, body[:80]))
    pp.stop()
    os.unlink(tok)


if __name__ == "__main__":
    run([test_help_version, test_check_config, test_env_and_flags_override, test_per_target_listen,
         test_token])
