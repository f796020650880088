#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Real servers, nobody here wrote them, under their own load generators,
while podprof comes and goes in cycles with runtime heap injection
(heap.mode=inject): each cycle starts podprof on the server's main pid
(children of targets are targets: nginx workers, PostgreSQL backends),
waits for the injected agent, fetches /debug/pprof/goroutine?debug=2 again
and again (threads.min_interval_ms=0, so every fetch stops every thread
again), reads /metrics, then ends podprof: SIGTERM (it detaches, restoring
the allocator slots) on even cycles, SIGKILL on odd ones, the SIGKILL sent
while one more thread dump is in flight, at a random moment of it.

  - redis-server under redis-benchmark (loop of runs, -e: server errors
    are printed and counted)
  - memcached under a python set/get loop (4 connections, each checks every
    value it reads back)
  - nginx (master, 2 workers) under a python HTTP loop (4 connections, each
    checks the sha256 of a 64 KiB static file on every response) and
    `nginx -s reload` every 2 s
  - PostgreSQL 15 under `pgbench -C` (a backend forked per transaction)

Checks, per server (any failure is printed with its evidence and the
script exits 1):
  - no crash: the main pid alive through every cycle, and its fixed
    children the same (PostgreSQL's checkpointer, background writer, WAL
    writer...: a crashed backend makes the postmaster restart them all);
    nginx workers replaced only by reloads (every worker exit in the error
    log has code 0, none "exited on signal"); no "terminated by signal" or
    PANIC in PostgreSQL's log
  - after each podprof exit: no thread of the server traced or left in a
    tracing stop (TracerPid 0, state not 't')
  - zero client errors from the load generator
  - data unchanged: redis 5000 keys read back (sha256 of MGET before/after),
    memcached 5000 keys got back, PostgreSQL
    md5(string_agg(...)) over a 10000-row table before/after, nginx every
    body's sha256
  - every cycle injected (the log's "injected agent" line for the main pid)
Stop durations: per cycle podprof_thread_snapshot_pause_max_nanoseconds,
every "pause X ms" of the injection log lines (each process injected) and
the podprof_ptrace_* counters, as median / p99 / max over the cycles.

usage: bench/run_stops.py [--quick] [--cycles N] [--only NAME,...] [--logs DIR]
                         [--control SECONDS] [BUILD_DIR]
  (default build-bench, 40 cycles per server: 20 SIGTERM + 20 SIGKILL;
   --quick: 4 cycles, a smoke run of the harness; --control S: the same
   servers and load for S seconds without podprof, the baseline of the
   client-error and crash checks; --logs: each cycle's podprof log and the
   servers' logs kept there)
Benchmark, not a test: timings are reported, never asserted."""
import argparse
import hashlib
import os
import pwd
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import Podprof, free_port, loadavg, machine_line, prioritize  # noqa: E402

PGBIN = "/usr/lib/postgresql/15/bin"
NOBODY = 65534
SETTINGS = ["heap.mode=inject", "threads.min_interval_ms=0"]
DUMPS_PER_CYCLE = 5
KEYS = 5000
LOGDIR = None


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def tail(path, n=3000):
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:]
    except OSError as e:
        return "(no log: %s)" % e


def children(pid):
    """Live children of pid: {pid: comm + cmdline}."""
    out = {}
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % e) as f:
                st = f.read()
            with open("/proc/%s/cmdline" % e, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        fields = st[st.rindex(")") + 2:].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            out[int(e)] = cmd
    return out


def tree(pid):
    pids = [pid]
    for c in children(pid):
        pids += tree(c)
    return pids


def traced_threads(pid):
    """Threads of pid's process tree that are traced or in a tracing stop."""
    bad = []
    for p in tree(pid):
        try:
            tids = os.listdir("/proc/%d/task" % p)
        except OSError:
            continue
        for t in tids:
            try:
                with open("/proc/%d/task/%s/status" % (p, t)) as f:
                    st = f.read()
            except OSError:
                continue
            tracer = int(re.search(r"^TracerPid:\s+(\d+)", st, re.M).group(1))
            state = re.search(r"^State:\s+(\S)", st, re.M).group(1)
            if tracer or state == "t":
                bad.append("pid %d tid %s state %s tracer %d" % (p, t, state, tracer))
    return bad


class Server:
    """One server: start(), a load generator thread (load_start/load_stop,
    errors in self.errors), checksum(), health() between cycles, finish()
    checks at the end, stop()."""
    name = "?"

    def __init__(self):
        self.d = tempfile.mkdtemp(prefix="podprof-stops-%s-" % self.name)
        os.chmod(self.d, 0o755)
        self.proc = None
        self.errors = []
        self.ops = 0
        self._stop = threading.Event()
        self._threads = []

    @property
    def pid(self):
        return self.proc.pid

    def popen(self, argv, **kw):
        out = open(os.path.join(self.d, "stdout.log"), "ab")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, start_new_session=True, **kw)
        out.close()

    def error(self, msg):
        msg = "%s %s" % (time.strftime("%H:%M:%S", time.gmtime()) + ".%03d" % (time.time() % 1 * 1000),
                         msg)
        if len(self.errors) < 50:
            self.errors.append(msg)
        else:
            self.errors[-1] = "(more errors)"

    def spawn(self, fn, *args):
        th = threading.Thread(target=fn, args=args, daemon=True)
        th.start()
        self._threads.append(th)

    def load_start(self):
        raise NotImplementedError

    def load_stop(self):
        self._stop.set()
        for th in self._threads:
            th.join(timeout=120)

    def health(self):
        check(self.proc.poll() is None, "%s: main pid %d exited (%s)" %
              (self.name, self.pid, self.proc.returncode))

    def finish(self):
        pass

    def stop(self):
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait(timeout=30)
        shutil.rmtree(self.d, ignore_errors=True)


# ------------------------------------------------------------------ redis

class Resp:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.f = self.s.makefile("rb")

    @staticmethod
    def enc(args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def read(self):
        line = self.f.readline()
        check(line.endswith(b"\r\n"), "redis closed the connection (%r)" % line)
        t, rest = line[:1], line[1:-2]
        if t == b"-":
            raise Failure("redis error: " + rest.decode())
        if t in (b"+", b":"):
            return rest
        if t == b"$":
            n = int(rest)
            return None if n < 0 else self.f.read(n + 2)[:-2]
        if t == b"*":
            return [self.read() for _ in range(int(rest))]
        raise Failure("redis protocol: %r" % line)

    def pipeline(self, cmds):
        self.s.sendall(b"".join(self.enc(c) for c in cmds))
        return [self.read() for _ in cmds]

    def close(self):
        self.f.close()
        self.s.close()


def value(i):
    return hashlib.sha256(b"%d" % i).hexdigest().encode() * (1 + i % 8)


class Redis(Server):
    name = "redis"

    def start(self):
        self.port = free_port()
        self.popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                    "--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", self.d,
                    "--logfile", os.path.join(self.d, "redis.log")])
        for _ in range(200):
            try:
                c = Resp(self.port)
                c.pipeline([("PING",)])
                c.close()
                break
            except (OSError, Failure):
                time.sleep(0.05)
        c = Resp(self.port)
        # db 1 for the checked keys: redis-benchmark writes db 0
        c.pipeline([("SELECT", 1)] + [("SET", "chk:%d" % i, value(i)) for i in range(KEYS)])
        c.close()

    def checksum(self):
        c = Resp(self.port)
        h = hashlib.sha256()
        got = c.pipeline([("SELECT", 1)] +
                         [("MGET",) + tuple("chk:%d" % i for i in range(j, j + 500))
                          for j in range(0, KEYS, 500)])[1:]
        for vals in got:
            for v in vals:
                h.update(v or b"<nil>")
        c.close()
        return h.hexdigest()

    def load_start(self):
        self.spawn(self._load)

    def _load(self):
        while not self._stop.is_set():
            r = subprocess.run(["redis-benchmark", "-h", "127.0.0.1", "-p", str(self.port),
                                "-c", "20", "-n", "20000", "-r", "100000", "-d", "64",
                                "-t", "set,get,incr,lpush,lpop,hset", "-q"],
                               capture_output=True, text=True)
            self.ops += 20000 * 6
            bad = [l for l in (r.stdout + r.stderr).splitlines()
                   if "rror" in l or "ERR" in l or "closed" in l]
            if r.returncode != 0 or bad:
                self.error("redis-benchmark exit %d: %s" % (r.returncode, "; ".join(bad[:5])))

    def finish(self):
        text = tail(os.path.join(self.d, "redis.log"), 1 << 20)
        check("crashed" not in text and "Guru Meditation" not in text,
              "redis: crash report in its log:\n" + text[-3000:])


# ------------------------------------------------------------------ memcached

class Memcached(Server):
    name = "memcached"

    def start(self):
        self.port = free_port()
        self.popen(["memcached", "-p", str(self.port), "-U", "0", "-l", "127.0.0.1", "-t", "4",
                    "-m", "256", "-c", "256", "-u", "nobody"])
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        c = self.conn()
        for i in range(KEYS):
            check(self.mset(c, b"chk:%d" % i, value(i)) == b"STORED", "memcached: set refused")
        c[0].close()

    def conn(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=60)
        return s, s.makefile("rb")

    @staticmethod
    def mset(c, k, v):
        c[0].sendall(b"set %s 0 0 %d\r\n%s\r\n" % (k, len(v), v))
        return c[1].readline().strip()

    @staticmethod
    def mget(c, k):
        c[0].sendall(b"get %s\r\n" % k)
        line = c[1].readline()
        if line == b"END\r\n":
            return None
        check(line.startswith(b"VALUE "), "memcached get: %r" % line)
        n = int(line.split()[3])
        v = c[1].read(n + 2)[:-2]
        check(c[1].readline() == b"END\r\n", "memcached get: no END")
        return v

    def checksum(self):
        c = self.conn()
        h = hashlib.sha256()
        for i in range(KEYS):
            h.update(self.mget(c, b"chk:%d" % i) or b"<nil>")
        c[0].close()
        return h.hexdigest()

    def load_start(self):
        for t in range(4):
            self.spawn(self._load, t)

    def _load(self, t):
        rnd = random.Random(t)
        want = {}
        try:
            c = self.conn()
            while not self._stop.is_set():
                k = b"load:%d:%d" % (t, rnd.randrange(2000))
                if rnd.random() < 0.5:
                    v = b"%d" % rnd.getrandbits(64) * rnd.randrange(1, 64)
                    r = self.mset(c, k, v)
                    if r != b"STORED":
                        self.error("memcached set %s: %r" % (k, r))
                    want[k] = v
                else:
                    v = self.mget(c, k)
                    if v != want.get(k):
                        self.error("memcached get %s: %r, set %r" % (k, v, want.get(k)))
                self.ops += 1
        except (OSError, Failure) as e:
            self.error("memcached client %d: %s" % (t, e))

    def finish(self):
        c = self.conn()
        c[0].sendall(b"stats\r\n")
        stats = {}
        while True:
            line = c[1].readline()
            if line.startswith(b"END") or not line:
                break
            f = line.split()
            stats[f[1].decode()] = f[2].decode()
        c[0].close()
        check(stats.get("evictions") == "0", "memcached: evictions %s" % stats.get("evictions"))


# ------------------------------------------------------------------ nginx

NGINX_CONF = """daemon off;
master_process on;
worker_processes 2;
user nobody nogroup;
pid {d}/nginx.pid;
# a crashed worker leaves a core here (evidence; --logs keeps it)
worker_rlimit_core 1g;
working_directory {d}/cores;
error_log {d}/error.log info;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    server {{
        listen 127.0.0.1:{port};
        root {d}/www;
    }}
}}
"""


class Nginx(Server):
    name = "nginx"
    RELOAD_EVERY = 2.0

    def start(self):
        self.port = free_port()
        os.mkdir(os.path.join(self.d, "www"))
        os.mkdir(os.path.join(self.d, "cores"))
        os.chown(os.path.join(self.d, "cores"), NOBODY, NOBODY)
        self.body = bytes(random.Random(1).getrandbits(8) for _ in range(65536))
        self.body_sha = hashlib.sha256(self.body).hexdigest()
        with open(os.path.join(self.d, "www", "data.bin"), "wb") as f:
            f.write(self.body)
        conf = os.path.join(self.d, "nginx.conf")
        with open(conf, "w") as f:
            f.write(NGINX_CONF.format(d=self.d, port=self.port))
        self.elog = os.path.join(self.d, "error.log")
        self.base = ["/usr/sbin/nginx", "-p", self.d + "/", "-c", conf, "-e", self.elog]
        self.popen(self.base)
        self.reloads = 0
        self.reload_times = []
        for _ in range(200):
            if len(self.workers()) == 2:
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                    break
                except OSError:
                    pass
            time.sleep(0.05)

    def workers(self):
        return {p for p, cmd in children(self.pid).items() if "worker process" in cmd}

    def get(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=60)
        try:
            s.sendall(b"GET /data.bin HTTP/1.0\r\nHost: t\r\n\r\n")
            data = b""
            while True:
                b = s.recv(262144)
                if not b:
                    break
                data += b
        finally:
            s.close()
        head, _, body = data.partition(b"\r\n\r\n")
        return head, body

    def checksum(self):
        head, body = self.get()
        return "%s %s" % (head.split(b"\r\n")[0].decode(), hashlib.sha256(body).hexdigest())

    def load_start(self):
        for t in range(4):
            self.spawn(self._load, t)
        self.spawn(self._reloader)

    def error(self, msg):
        # how far from the nearest `nginx -s reload`: a worker that reads a
        # request late may find itself closing idle connections
        now = time.time()
        near = min(self.reload_times, key=lambda x: abs(now - x), default=None)
        super().error("%s (%+.3f s from a reload)" % (msg, now - near) if near else msg)

    def _load(self, t):
        while not self._stop.is_set():
            try:
                head, body = self.get()
                if not head.startswith(b"HTTP/1.1 200") or hashlib.sha256(body).hexdigest() != self.body_sha:
                    self.error("nginx: %r, %d bytes" % (head[:80], len(body)))
            except OSError as e:
                self.error("nginx client %d: %s" % (t, e))
            self.ops += 1

    def _reloader(self):
        while not self._stop.wait(self.RELOAD_EVERY):
            self.reload_times.append(time.time())
            r = subprocess.run(self.base + ["-s", "reload"], capture_output=True, text=True)
            if r.returncode != 0:
                self.error("nginx -s reload: %s" % r.stderr.strip())
            self.reloads += 1

    def finish(self):
        text = tail(self.elog, 1 << 24)
        check("exited on signal" not in text and "[alert]" not in text and "[emerg]" not in text,
              "nginx: a worker was killed or an alert:\n" +
              "\n".join(l for l in text.splitlines()
                        if "exited on signal" in l or "[alert]" in l or "[emerg]" in l)[-3000:])
        exited = re.findall(r"worker process (\d+) exited with code (\d+)", text)
        check(all(c == "0" for _, c in exited), "nginx: workers failed: %s" %
              [x for x in exited if x[1] != "0"])
        self.worker_exits = len(exited)
        check(len(self.workers()) == 2, "nginx: workers now %s" % self.workers())


# ------------------------------------------------------------------ PostgreSQL

AUX = ("checkpointer", "background writer", "walwriter", "autovacuum launcher",
       "logical replication launcher")


class Postgres(Server):
    name = "postgres"

    def start(self):
        pw = pwd.getpwnam("postgres")
        os.chown(self.d, pw.pw_uid, pw.pw_gid)
        self.as_pg = dict(user=pw.pw_uid, group=pw.pw_gid, extra_groups=[], cwd=self.d)
        self.env = dict(os.environ, HOME=self.d, PGHOST=self.d, PGUSER="postgres",
                        PGDATABASE="postgres")
        self.env.pop("LD_PRELOAD", None)
        data = os.path.join(self.d, "data")
        self.plog = os.path.join(self.d, "postgres.log")
        self.run_pg([PGBIN + "/initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8",
                     "--locale=C", "--no-sync"])
        out = open(self.plog, "ab")
        self.proc = subprocess.Popen(
            [PGBIN + "/postgres", "-D", data, "-c", "listen_addresses=", "-c",
             "unix_socket_directories=" + self.d, "-c", "fsync=off", "-c", "max_connections=30",
             "-c", "shared_buffers=16MB", "-c", "logging_collector=off"],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=self.env,
            start_new_session=True, **self.as_pg)
        out.close()
        for _ in range(600):
            if "ready to accept connections" in tail(self.plog, 1 << 20):
                break
            time.sleep(0.05)
        self.run_pg([PGBIN + "/pgbench", "-i", "-s", "1", "-q"])
        self.psql("CREATE TABLE chk AS SELECT i AS id, md5(i::text) || repeat('x', i % 100) AS v "
                  "FROM generate_series(1, 10000) i")
        time.sleep(0.5)
        self.aux = self.aux_pids()

    def run_pg(self, argv, check_rc=True):
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=self.env,
                           timeout=600, **self.as_pg)
        out = r.stdout.decode(errors="replace")
        if check_rc:
            check(r.returncode == 0, "postgres: %s: exit %d\n%s" % (argv[0], r.returncode, out[-2000:]))
        return r.returncode, out

    def psql(self, sql):
        return self.run_pg([PGBIN + "/psql", "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql])[1].strip()

    def checksum(self):
        return self.psql("SELECT md5(string_agg(id || ':' || v, ',' ORDER BY id)) FROM chk")

    def aux_pids(self):
        out = {}
        for p, cmd in children(self.pid).items():
            for a in AUX:
                if cmd.endswith(a):
                    out[a] = p
        return out

    def load_start(self):
        self.spawn(self._load)

    def _load(self):
        while not self._stop.is_set():
            rc, out = self.run_pg([PGBIN + "/pgbench", "-C", "-c", "4", "-j", "2", "-T", "10", "-n"],
                                  check_rc=False)
            m = re.search(r"number of transactions actually processed: (\d+)", out)
            failed = re.search(r"number of failed transactions: (\d+)", out)
            if m:
                self.ops += int(m.group(1))
            errs = [l for l in out.splitlines() if "error" in l.lower() or "FATAL" in l]
            if rc != 0 or not m or (failed and failed.group(1) != "0") or errs:
                self.error("pgbench exit %d: %s" % (rc, "; ".join(errs[:5]) or out[-500:]))

    def health(self):
        super().health()
        now = self.aux_pids()
        check(now == self.aux, "postgres: auxiliary processes changed (a crash restarts them): "
              "%s -> %s\n%s" % (self.aux, now, tail(self.plog)))

    def finish(self):
        text = tail(self.plog, 1 << 24)
        bad = [l for l in text.splitlines()
               if "terminated by signal" in l or "PANIC" in l or "terminated by exception" in l
               or "was terminated" in l]
        check(not bad, "postgres: " + "\n".join(bad[:20]))


SERVERS = {"redis": Redis, "memcached": Memcached, "nginx": Nginx, "postgres": Postgres}


# ------------------------------------------------------------------ cycles

def pct(xs, q):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def wait_injected(pp, pid, timeout=60):
    """The log line of the heap attach of pid: (True, line) injected,
    (False, line) refused (with podprof's reason)."""
    ok = re.compile(r"heap: tracing pid %d .*\(injected agent" % pid)
    refused = re.compile(r"heap: (cannot trace pid %d |tracing pid %d .*not injected)" % (pid, pid))
    deadline = time.time() + timeout
    while time.time() < deadline:
        for l in list(pp.log):
            if ok.search(l):
                return True, l.strip()
            if refused.search(l):
                return False, l.strip()
        if pp.proc.poll() is not None:
            raise Failure("podprof exited %s:\n%s" % (pp.proc.returncode, "".join(pp.log[-20:])))
        time.sleep(0.05)
    raise Failure("no heap attach of pid %d in %d s:\n%s" % (pid, timeout, "".join(pp.log[-20:])))


def cycle(podprof, srv, i, stats):
    kill = i % 2 == 1
    pp = Podprof(podprof, srv.pid, SETTINGS, timeout=60)
    try:
        injected, line = wait_injected(pp, srv.pid)
        if not injected:
            stats["not_injected"].append("cycle %d: %s" % (i, line))
        for _ in range(DUMPS_PER_CYCLE):
            body = pp.get("/debug/pprof/goroutine?debug=2", timeout=60).decode(errors="replace")
            check("pid %d" % srv.pid in body or str(srv.pid) in body,
                  "thread dump without pid %d:\n%s" % (srv.pid, body[:500]))
            stats["dumps"] += 1
        m = pp.metrics()
        if kill:
            th = threading.Thread(target=lambda: _swallow(pp.get, "/debug/pprof/goroutine?debug=2"),
                                  daemon=True)
            th.start()
            time.sleep(random.uniform(0, 0.03))
            pp.proc.kill()
            pp.proc.wait(timeout=30)
            th.join(timeout=30)
            rc = pp.proc.returncode
        else:
            rc = pp.stop()
            check(rc == 0, "podprof exit %s after SIGTERM:\n%s" % (rc, "".join(pp.log[-20:])))
    finally:
        if pp.proc.poll() is None:
            pp.proc.kill()
            pp.proc.wait()
        if LOGDIR:
            with open(os.path.join(LOGDIR, "%s-%02d-%s.log" % (srv.name, i, "kill" if kill else "term")),
                      "w") as f:
                f.writelines(pp.log)
    stats["kills" if kill else "terms"] += 1
    # the agent (fresh or reused) counts the server's allocator calls
    calls = m.get('podprof_heap_calls_total{pid="%d",kind="alloc"}' % srv.pid, 0)
    stats["cycles_with_calls"] += calls > 0
    stats["snap_max_ns"].append(m.get("podprof_thread_snapshot_pause_max_nanoseconds", float("nan")))
    for k, v in m.items():
        if k.startswith("podprof_ptrace_"):
            stats["ptrace"][k] = stats["ptrace"].get(k, 0) + v
        if k.startswith("podprof_heap_inject_pause_seconds"):
            stats["inject_metric_s"].append(v)
    for l in pp.log:
        mm = re.search(r"heap: tracing pid (\d+) .*injected agent(, reused)?.* pause ([0-9.]+) ms", l)
        if mm:
            # a reused agent with no new module to redirect stops nothing
            # (pause 0): only the attaches that stopped the process count
            if float(mm.group(3)) > 0:
                stats["inject_ms"].append(float(mm.group(3)))
            stats["injections"] += 1
            stats["reused"] += bool(mm.group(2))
    warns = [l.strip() for l in pp.log if " error " in l or "tracee" in l and " warn " in l]
    stats["podprof_errors"] += warns
    for l in pp.log:
        mm = re.search(r"heap: cannot trace pid \d+ \(([^)]*)\): (.*); heap profile", l)
        if mm:
            k = "%s: %s" % (mm.group(1), mm.group(2))
            stats["refusals"][k] = stats["refusals"].get(k, 0) + 1
    # the server given back: nothing traced, nothing left stopped
    deadline = time.time() + 5
    while True:
        bad = traced_threads(srv.pid)
        if not bad or time.time() > deadline:
            break
        time.sleep(0.05)
    check(not bad, "%s: after podprof's %s, threads still traced/stopped: %s" %
          ("SIGKILL" if kill else "SIGTERM", srv.name, bad[:10]))
    srv.health()


def _swallow(fn, *a):
    try:
        fn(*a)
    except Exception:
        pass


def run_server(podprof, name, cycles, control=0):
    srv = SERVERS[name]()
    stats = {"terms": 0, "kills": 0, "dumps": 0, "snap_max_ns": [], "inject_ms": [],
             "inject_metric_s": [], "ptrace": {}, "injections": 0, "reused": 0,
             "podprof_errors": [], "failure": None, "cycles_with_calls": 0,
             "not_injected": [], "refusals": {}}
    t0 = time.monotonic()
    try:
        srv.start()
        pid0 = srv.pid
        sum0 = srv.checksum()
        srv.load_start()
        time.sleep(1)
        if control:
            # the control run: the same load (and nginx's reloads), no podprof
            t_end = time.monotonic() + control
            while time.monotonic() < t_end:
                time.sleep(0.5)
                srv.health()
        for i in range(0 if control else cycles):
            cycle(podprof, srv, i, stats)
        time.sleep(1)
        srv.load_stop()
        check(srv.pid == pid0 and srv.proc.poll() is None, "%s: main pid changed/died" % name)
        check(not srv.errors, "%s: %d client errors: %s" % (name, len(srv.errors), srv.errors[:10]))
        sum1 = srv.checksum()
        check(sum1 == sum0, "%s: checksum changed: %s -> %s" % (name, sum0, sum1))
        stats["checksum"] = sum1
        srv.finish()
        check(not stats["not_injected"], "%s: main pid %d not injected in %d of %d cycles; first: %s" %
              (name, pid0, len(stats["not_injected"]), cycles, stats["not_injected"][0]
               if stats["not_injected"] else ""))
    except Failure as e:
        stats["failure"] = str(e)
        srv._stop.set()
    except Exception as e:  # a harness error is reported as such
        stats["failure"] = "harness: %r" % e
        srv._stop.set()
    finally:
        stats["client_errors"] = list(srv.errors)
        stats["ops"] = srv.ops
        stats["extra"] = {"reloads": getattr(srv, "reloads", None),
                          "worker_exits": getattr(srv, "worker_exits", None)}
        stats["seconds"] = time.monotonic() - t0
        if LOGDIR:
            if os.path.isdir(os.path.join(srv.d, "cores")) and os.listdir(os.path.join(srv.d, "cores")):
                shutil.copytree(os.path.join(srv.d, "cores"), os.path.join(LOGDIR, name + "-cores"),
                                dirs_exist_ok=True)
            for f in ("error.log", "redis.log", "postgres.log", "stdout.log"):
                if os.path.exists(os.path.join(srv.d, f)):
                    shutil.copy(os.path.join(srv.d, f), os.path.join(
                        LOGDIR, "%s%s-server-%s" % (name, "-control" if control else "", f)))
        srv.stop()
    return stats


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default="build-bench")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cycles", type=int, default=40)
    ap.add_argument("--only", default=",".join(SERVERS))
    ap.add_argument("--control", type=float, default=0,
                    help="no podprof: run each server's load this many seconds (baseline)")
    ap.add_argument("--logs", help="keep each cycle's podprof log in this directory")
    a = ap.parse_args()
    global LOGDIR
    LOGDIR = a.logs
    if LOGDIR:
        os.makedirs(LOGDIR, exist_ok=True)
    cycles = 4 if a.quick else a.cycles
    podprof = os.path.join(a.build, "cmd/podprof/podprof")
    nice = prioritize()
    print("machine: %s; load %s; nice %d; podprof %s %s" %
          (machine_line(), loadavg(), nice, podprof, " ".join("--set " + s for s in SETTINGS)))
    rows = []
    failed = False
    for name in a.only.split(","):
        st = run_server(podprof, name, cycles, a.control)
        rows.append((name, st))
        print("%s: %s in %.0f s" % (name, "FAIL" if st["failure"] else "ok", st["seconds"]), flush=True)
        if st["failure"]:
            failed = True
            print("  FAILURE: " + st["failure"])
        for w in st["not_injected"][:3]:
            print("  not injected: " + w)
        for k, v in sorted(st["refusals"].items()):
            print("  heap attach refused %dx: %s" % (v, k))
        for w in st["podprof_errors"][:10]:
            print("  podprof: " + w)
    print("\n| server | cycles SIGTERM / SIGKILL | thread dumps | load ops | client errors "
          "| crashes | checksum | injections (reused) | cycles with allocator calls counted | extra |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, st in rows:
        ex = st["extra"]
        extra = ("%s reloads, %s worker exits all code 0" % (ex["reloads"], ex["worker_exits"])
                 if ex["reloads"] is not None else "")
        print("| %s | %d / %d | %d | %d | %d | %s | %s | %d (%d) | %d / %d | %s |" %
              (name, st["terms"], st["kills"], st["dumps"], st["ops"], len(st["client_errors"]),
               "FAIL" if st["failure"] else 0,
               "unchanged" if st.get("checksum") else "not checked", st["injections"],
               st["reused"], st["cycles_with_calls"], st["terms"] + st["kills"], extra))
    print("\n| server | thread-dump pause max per cycle, ms (median / p99 / max) "
          "| inject pause of the attaches that stopped a process, ms (median / p99 / max, n) | ptrace stops | avoided "
          "| calls restarted | signals handed back | stop timeouts |")
    print("|---|---|---|---|---|---|---|---|")
    for name, st in rows:
        s = [x / 1e6 for x in st["snap_max_ns"]]
        j = st["inject_ms"]
        p = st["ptrace"]
        print("| %s | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f, %d | %d | %d | %d | %d | %d |" %
              (name, pct(s, 0.5), pct(s, 0.99), max(s, default=float("nan")),
               pct(j, 0.5), pct(j, 0.99), max(j, default=float("nan")), len(j),
               p.get("podprof_ptrace_stops_total", 0), p.get("podprof_ptrace_stops_avoided_total", 0),
               p.get("podprof_ptrace_calls_restarted_total", 0),
               p.get("podprof_ptrace_signals_handed_back_total", 0),
               p.get("podprof_ptrace_stop_timeouts_total", 0)))
    print("\n(thread-dump pause: podprof_thread_snapshot_pause_max_nanoseconds of each cycle; "
          "inject pause: the \"pause X ms\" of each \"heap: tracing pid\" log line with a pause > 0 "
          "(fresh agents, and reused agents with new modules to redirect); ptrace counters: summed over the cycles, each podprof's /metrics read before its end; "
          "the SIGKILLed dump in flight is not counted)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
