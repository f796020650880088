#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Real forking daemons started with the preloaded heap agent
(LD_PRELOAD=libpodprof-agent.so), each run twice the same way: once alone,
once with podprof in its default heap mode profiling it. The injected agent
of old killed fork children (PostgreSQL backends under pgbench -C, nginx
workers on reload, redis BGSAVE children as nobody); here no process of the
daemon may die of a signal with podprof when it does not without it, and
the daemon must be profiled through its preloaded agent.
  - redis-server as nobody: BGSAVE again and again, every save succeeds,
    writes still accepted; the parent or a save child has heap samples.
  - nginx, master as root and workers as nobody: `nginx -s reload` again
    and again, no worker exits on a signal; workers are traced and sampled.
  - PostgreSQL as postgres on a unix socket: pgbench -C (a backend forked
    per transaction), no server process terminated by a signal, the
    postmaster still up, transactions done.
Every daemon listens on a unix socket in its own temporary directory (no
port to collide with, nothing of a system daemon used) and runs in the
foreground as a child of the test, in its own session, killed at the end."""
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile

import harness
from harness import Podprof, Skip, check, log, run, wait_for, write_tmp
from test_preload import TracerWatch, preload_env

REDIS = shutil.which("redis-server") or "/usr/bin/redis-server"
NGINX = shutil.which("nginx", path="/usr/sbin:/usr/bin") or "/usr/sbin/nginx"
PGBIN = "/usr/lib/postgresql/15/bin"
NOBODY = 65534
SAVES = int(os.environ.get("PP_DAEMONS_SAVES", "8"))
RELOADS = int(os.environ.get("PP_DAEMONS_RELOADS", "5"))
PGBENCH_SECONDS = os.environ.get("PP_DAEMONS_PGBENCH_SECONDS", "5")


def need(path, package):
    if not os.path.exists(path):
        raise Skip("%s not installed (Debian package %s, scripts/install-deps.sh)" % (path, package))


class Daemon:
    """A daemon in the foreground, in its own session (so its children are
    killed with it), its stdout and stderr appended to a file."""

    def __init__(self, argv, out, env=None, **kw):
        self.out = out
        with open(out, "ab") as f:
            self.p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                                      env=env, start_new_session=True, **kw)
        harness._children.append(self)
        self.pid = self.p.pid

    def alive(self):
        return self.p.poll() is None

    def output(self):
        with open(self.out, errors="replace") as f:
            return f.read()

    def kill(self):
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(timeout=10)


def tmpdir(prefix, uid=None, gid=None):
    d = tempfile.mkdtemp(prefix="podprof-%s-" % prefix)
    os.chmod(d, 0o755)
    if uid is not None:
        os.chown(d, uid, gid)
    return d


def children(pid):
    out = []
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % e) as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rindex(")") + 2:].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(e))
    return out


def start_podprof(*args, rate=65536):
    return Podprof("--set", "offcpu.enabled=false", "--set", "heap.sample_rate=%d" % rate,
                   "--set", "heap.over_budget=warn", *args)


def traced(pp, pid):
    pp.wait_log(r"heap: tracing pid %d .*preloaded agent" % pid, timeout=60)


def heap_pids(prof):
    return {s["num_labels"]["pid"][0] for s in prof["samples"] if "pid" in s.get("num_labels", {})}


def check_preload_metric(pp, pid, label):
    m = pp.request("/metrics")[2].decode()
    check('podprof_heap_mode{pid="%d",mode="preload"} 1' % pid in m,
          "%s: no preload heap mode for pid %d in /metrics:\n%s\npodprof's log of it:\n%s" %
          (label, pid, "\n".join(l for l in m.splitlines() if "heap_mode" in l),
           "\n".join(l for l in pp.log_text().splitlines() if str(pid) in l)[-3000:]))


# ------------------------------------------------------------------ redis

class RedisError(Exception):
    pass


class Resp:
    """A minimal redis client (RESP2) on a unix socket, with pipelining."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(60)
        self.s.connect(path)
        self.f = self.s.makefile("rb")

    @staticmethod
    def encode(args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def read(self):
        line = self.f.readline()
        check(line.endswith(b"\r\n"), "redis closed the connection (%r)" % line)
        t, rest = line[:1], line[1:-2]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            raise RedisError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)
            return data[:-2]
        if t == b"*":
            return [self.read() for _ in range(int(rest))]
        raise AssertionError("redis protocol: %r" % line)

    def cmd(self, *args):
        self.s.sendall(self.encode(args))
        return self.read()

    def pipeline(self, cmds):
        self.s.sendall(b"".join(self.encode(c) for c in cmds))
        return [self.read() for _ in cmds]

    def info(self, section):
        text = self.cmd("INFO", section).decode()
        return dict(l.split(":", 1) for l in text.splitlines() if ":" in l)

    def close(self):
        self.f.close()
        self.s.close()


def redis_fill(r, gen, n=20000):
    """n keys of 64..2000 bytes: the parent's allocations, and what the
    BGSAVE child serializes."""
    for start in range(0, n, 1000):
        cmds = [("SET", "k%d:%d" % (gen, j), b"v" * (64 + (j * 7919) % 1937)) for j in range(start, start + 1000)]
        check(all(x == "OK" for x in r.pipeline(cmds)), "SET refused")


def redis_run(with_podprof):
    need(REDIS, "redis-server")
    label = "redis %s podprof" % ("with" if with_podprof else "without")
    d = tmpdir("redis", NOBODY, NOBODY)
    sock = os.path.join(d, "redis.sock")
    rlog = os.path.join(d, "redis.log")
    srv = pp = watch = r = None
    try:
        srv = Daemon([REDIS, "--port", "0", "--unixsocket", sock, "--unixsocketperm", "777",
                      "--dir", d, "--dbfilename", "dump.rdb", "--save", "", "--appendonly", "no",
                      "--daemonize", "no", "--supervised", "no", "--logfile", rlog, "--loglevel", "notice"],
                     os.path.join(d, "stdout.log"), env=preload_env(), cwd=d,
                     user=NOBODY, group=NOBODY, extra_groups=[])

        def up():
            check(srv.alive(), "%s: redis-server exited (%s):\n%s" % (label, srv.p.returncode, redis_log(rlog)))
            try:
                c = Resp(sock)
            except OSError:
                return None
            return c if c.cmd("PING") == "PONG" else None
        r = wait_for(up, "%s: redis-server to answer on %s" % (label, sock))
        watch = TracerWatch(srv.pid)
        if with_podprof:
            pp = start_podprof("--pid", str(srv.pid))
            traced(pp, srv.pid)
        redis_fill(r, 0)
        for i in range(1, SAVES + 1):
            before = int(r.info("persistence").get("rdb_saves", "0"))
            redis_fill(r, i)
            rep = r.cmd("BGSAVE")
            check("started" in rep, "%s: BGSAVE said %r" % (label, rep))

            def finished():
                check(srv.alive(), "%s: redis-server died" % label)
                inf = r.info("persistence")
                if inf["rdb_bgsave_in_progress"] != "0":
                    return None
                if int(inf.get("rdb_saves", "0")) > before or inf["rdb_last_bgsave_status"] != "ok":
                    return inf
                return None
            inf = wait_for(finished, lambda: "%s: BGSAVE %d to finish:\n%s" % (label, i, redis_log(rlog)))
            check(inf["rdb_last_bgsave_status"] == "ok",
                  "%s: BGSAVE %d failed (%s):\n%s" % (label, i, inf, redis_log(rlog)))
            # written while no save runs: the parent keeps accepting writes
            check(r.cmd("SET", "after:%d" % i, "x") == "OK", "%s: write refused after BGSAVE %d" % (label, i))
        text = redis_log(rlog)
        check("terminated by signal" not in text, "%s: a BGSAVE child was killed:\n%s" % (label, text))
        ok = text.count("Background saving terminated with success")
        check(ok == SAVES, "%s: %d of %d saves succeeded:\n%s" % (label, ok, SAVES, text))
        check(r.cmd("SET", "final", "1") == "OK" and r.cmd("GET", "final") == b"1",
              "%s: writes not accepted after the saves" % label)
        check(int(r.cmd("DBSIZE")) >= 20000 * (SAVES + 1), "%s: keys lost" % label)
        savers = {int(p) for p in re.findall(r"Background saving started by pid (\d+)", text)}
        log("%s: %d saves ok by children %s" % (label, ok, sorted(savers)))
        if with_podprof:
            check_preload_metric(pp, srv.pid, label)
            want = savers | {srv.pid}

            def sampled():
                prof = pp.profile("/debug/pprof/heap")
                return (heap_pids(prof) & want) or None
            got = wait_for(sampled, lambda: "%s: heap samples of redis (pids %s)" % (label, sorted(want)))
            log("%s: heap samples of pids %s" % (label, sorted(got)))
            pp.stop()
        watch.done(label)
        check(srv.alive(), "%s: redis-server died" % label)
    finally:
        if r:
            r.close()
        if pp:
            pp.kill()
        if watch and not watch.stop_:
            watch.stop_ = True
        if srv:
            srv.kill()
        shutil.rmtree(d, ignore_errors=True)


def redis_log(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()[-4000:]
    except OSError as e:
        return "(no log: %s)" % e


def test_redis_bgsave_as_nobody():
    redis_run(False)
    redis_run(True)


# ------------------------------------------------------------------ nginx

NGINX_CONF = """daemon off;
master_process on;
worker_processes 2;
user nobody nogroup;
pid {d}/nginx.pid;
error_log {d}/error.log info;
events {{ worker_connections 128; }}
http {{
    access_log off;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    server {{
        listen unix:{d}/nginx.sock;
        location / {{ return 200 "ok $request_uri\\n"; }}
    }}
}}
"""


def nginx_get(sock, path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    try:
        s.connect(sock)
        s.sendall(b"GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" % path.encode())
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                return data
            data += b
    finally:
        s.close()


def nginx_requests(sock, n, tag):
    for i in range(n):
        r = nginx_get(sock, "/%s/%d?%s" % (tag, i, "q" * (i % 300)))
        check(r.startswith(b"HTTP/1.1 200") and b"ok /%s/%d" % (tag.encode(), i) in r,
              "nginx answered %r" % r[:200])


def nginx_workers(master):
    out = []
    for pid in children(master):
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                if b"worker process" in f.read():
                    out.append(pid)
        except OSError:
            pass
    return set(out)


def proc_uid(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"^Uid:\s+\d+\s+(\d+)", f.read(), re.M).group(1))


def nginx_run(with_podprof):
    need(NGINX, "nginx-light")
    label = "nginx %s podprof" % ("with" if with_podprof else "without")
    d = tmpdir("nginx")
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as f:
        f.write(NGINX_CONF.format(d=d))
    elog = os.path.join(d, "error.log")
    sock = os.path.join(d, "nginx.sock")
    base = [NGINX, "-p", d + "/", "-c", conf, "-e", elog]
    srv = pp = watch = cfg = None
    try:
        r = subprocess.run(base + ["-t"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        check(r.returncode == 0, "%s: nginx -t: %s" % (label, r.stdout.decode(errors="replace")))
        if with_podprof:
            cfg = write_tmp(("targets:\n  - exe: %s\n" % os.path.realpath(NGINX)).encode(), ".yaml")
            pp = start_podprof("--config", cfg, "--set", "discovery.interval_ms=200", rate=4096)
        srv = Daemon(base, os.path.join(d, "stdout.log"), env=preload_env())

        def up():
            check(srv.alive(), "%s: nginx exited (%s):\n%s\n%s" % (label, srv.p.returncode, srv.output(),
                                                                   tail(elog)))
            w = nginx_workers(srv.pid)
            return w if len(w) == 2 and os.path.exists(sock) else None
        workers = wait_for(up, lambda: "%s: nginx workers:\n%s" % (label, tail(elog)))
        for w in workers:
            check(proc_uid(w) == NOBODY, "%s: worker %d runs as uid %s, not nobody" % (label, w, proc_uid(w)))
        watch = TracerWatch(srv.pid)
        for w in workers:
            watch.add(w)
        if with_podprof:
            traced(pp, srv.pid)
        every = set(workers)
        nginx_requests(sock, 100, "g0")
        for i in range(1, RELOADS + 1):
            # as in a container where LD_PRELOAD is set for every process
            r = subprocess.run(base + ["-s", "reload"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env=preload_env(), timeout=60)
            check(r.returncode == 0, "%s: nginx -s reload: %s" % (label, r.stdout.decode(errors="replace")))
            old = workers

            def reloaded():
                check(srv.alive(), "%s: nginx master died:\n%s" % (label, tail(elog)))
                w = nginx_workers(srv.pid)
                return w if len(w) == 2 and not (w & old) else None
            workers = wait_for(reloaded, lambda: "%s: reload %d (workers %s, old %s):\n%s" %
                               (label, i, nginx_workers(srv.pid), old, tail(elog)))
            every |= workers
            for w in workers:
                watch.add(w)
            nginx_requests(sock, 100, "g%d" % i)
        text = tail(elog, 1 << 20)
        check("exited on signal" not in text, "%s: a worker was killed:\n%s" % (label, text[-4000:]))
        exited = re.findall(r"worker process (\d+) exited with code (\d+)", text)
        check(all(c == "0" for _, c in exited), "%s: workers failed: %s" % (label, exited))
        log("%s: %d reloads, %d workers, %d exited with code 0" % (label, RELOADS, len(every), len(exited)))
        if with_podprof:
            for w in workers:
                traced(pp, w)
                check_preload_metric(pp, w, label)

            def sampled():
                nginx_requests(sock, 200, "p")
                prof = pp.profile("/debug/pprof/heap")
                return (heap_pids(prof) & workers) or None
            got = wait_for(sampled, lambda: "%s: heap samples of workers %s" % (label, sorted(workers)))
            log("%s: heap samples of workers %s" % (label, sorted(got)))
            pp.stop()
        watch.done(label)
        check(srv.alive(), "%s: nginx master died" % label)
        srv.p.send_signal(signal.SIGQUIT)  # graceful shutdown: workers exit 0
        rc = srv.p.wait(timeout=60)
        text = tail(elog, 1 << 20)
        check(rc == 0 and "exited on signal" not in text, "%s: nginx exit %d:\n%s" % (label, rc, text[-4000:]))
    finally:
        if pp:
            pp.kill()
        if watch and not watch.stop_:
            watch.stop_ = True
        if srv:
            srv.kill()
        if cfg:
            os.unlink(cfg)
        shutil.rmtree(d, ignore_errors=True)


def tail(path, n=4000):
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:]
    except OSError as e:
        return "(no log: %s)" % e


def test_nginx_reload():
    nginx_run(False)
    nginx_run(True)


# ------------------------------------------------------------------ PostgreSQL

def pg_run(with_podprof):
    postgres = os.path.join(PGBIN, "postgres")
    need(postgres, "postgresql-15")
    label = "postgres %s podprof" % ("with" if with_podprof else "without")
    pw = pwd.getpwnam("postgres")
    d = tmpdir("pg", pw.pw_uid, pw.pw_gid)
    data = os.path.join(d, "data")
    plog = os.path.join(d, "postgres.log")
    as_pg = dict(user=pw.pw_uid, group=pw.pw_gid, extra_groups=[], cwd=d)
    env = dict(os.environ, HOME=d, PGHOST=d, PGUSER="postgres", PGDATABASE="postgres")
    env.pop("LD_PRELOAD", None)
    srv = pp = watch = cfg = None
    try:
        r = subprocess.run([os.path.join(PGBIN, "initdb"), "-D", data, "-U", "postgres", "-A", "trust",
                            "-E", "UTF8", "--locale=C", "--no-sync"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=120, **as_pg)
        check(r.returncode == 0, "%s: initdb failed:\n%s" % (label, r.stdout.decode(errors="replace")[-3000:]))
        if with_podprof:
            cfg = write_tmp(("targets:\n  - exe: %s\n" % os.path.realpath(postgres)).encode(), ".yaml")
            pp = start_podprof("--config", cfg, "--set", "discovery.interval_ms=200")
        srv = Daemon([postgres, "-D", data, "-c", "listen_addresses=", "-c", "unix_socket_directories=" + d,
                      "-c", "fsync=off", "-c", "max_connections=30", "-c", "shared_buffers=16MB",
                      "-c", "logging_collector=off"],
                     plog, env=dict(env, LD_PRELOAD=preload_env()["LD_PRELOAD"]), **as_pg)

        def up():
            check(srv.alive(), "%s: postgres exited (%s):\n%s" % (label, srv.p.returncode, tail(plog)))
            return "ready to accept connections" in tail(plog, 1 << 20)
        wait_for(up, lambda: "%s: postgres to start:\n%s" % (label, tail(plog)))
        watch = TracerWatch(srv.pid)
        if with_podprof:
            traced(pp, srv.pid)
        pgbench = os.path.join(PGBIN, "pgbench")
        r = subprocess.run([pgbench, "-i", "-s", "1", "-q"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           env=env, timeout=300, **as_pg)
        check(r.returncode == 0, "%s: pgbench -i:\n%s\n%s" % (label, r.stdout.decode(errors="replace")[-3000:],
                                                              tail(plog)))
        r = subprocess.run([pgbench, "-C", "-c", "4", "-j", "2", "-T", PGBENCH_SECONDS, "-n"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=300, **as_pg)
        out = r.stdout.decode(errors="replace")
        m = re.search(r"number of transactions actually processed: (\d+)", out)
        check(r.returncode == 0 and m and int(m.group(1)) > 0,
              "%s: pgbench -C (exit %d):\n%s\n%s" % (label, r.returncode, out[-3000:], tail(plog)))
        failed = re.search(r"number of failed transactions: (\d+)", out)
        check(not failed or failed.group(1) == "0", "%s: pgbench: %s" % (label, failed and failed.group(0)))
        text = tail(plog, 1 << 20)
        check("terminated by signal" not in text and "terminated by exception" not in text,
              "%s: a server process was killed:\n%s" % (label, text[-4000:]))
        check(srv.alive(), "%s: the postmaster died:\n%s" % (label, text[-4000:]))
        r = subprocess.run([os.path.join(PGBIN, "pg_isready")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           env=env, timeout=60, **as_pg)
        check(r.returncode == 0, "%s: pg_isready: %s" % (label, r.stdout.decode(errors="replace")))
        log("%s: %s transactions" % (label, m.group(1)))
        if with_podprof:
            check_preload_metric(pp, srv.pid, label)
            prof = pp.profile("/debug/pprof/heap")
            log("%s: heap samples of %d postgres processes" % (label, len(heap_pids(prof))))
            pp.stop()
        watch.done(label)
        srv.p.send_signal(signal.SIGINT)  # fast shutdown
        rc = srv.p.wait(timeout=60)
        text = tail(plog, 1 << 20)
        check(rc == 0 and "terminated by signal" not in text, "%s: postgres exit %d:\n%s" %
              (label, rc, text[-4000:]))
    finally:
        if pp:
            pp.kill()
        if watch and not watch.stop_:
            watch.stop_ = True
        if srv:
            srv.kill()
        if cfg:
            os.unlink(cfg)
        shutil.rmtree(d, ignore_errors=True)


def test_postgres_pgbench_connect():
    pg_run(False)
    pg_run(True)


if __name__ == "__main__":
    run([test_redis_bgsave_as_nobody, test_nginx_reload, test_postgres_pgbench_connect])
