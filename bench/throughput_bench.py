#!/usr/bin/env python3
"""Control-plane throughput side by side (issue 17): durable submissions under wrk, idle and
while jobs churn, serial CLI jobs end to end, `corral jobs --limit 1000` against `squeue`, and
the server's RSS after 10,000 and 100,000 finished jobs; the fsync latency of the store's
filesystem is measured first and printed beside every result.

Usage:
    python3 bench/throughput_bench.py build/corral [--parts fsync,idle,churn,cli,listing,rss]
        [--store-url postgres://USER@HOST:PORT/DB] [--json PATH] [--keep] [options]
    # PostgreSQL (idle and churn; every part works on either store):
    scripts/with_postgres.sh sh -c 'python3 bench/throughput_bench.py build/corral \\
        --parts idle,churn --store-url "$CORRAL_TEST_POSTGRES_URL"'

Every part but fsync starts its own cluster in a fresh store: `corral server --listen
127.0.0.1:PORT` (SQLite in the part's temporary folder, or with --store-url a fresh database
DB_PART created by `createdb` on that PostgreSQL server and dropped afterwards) and one
`corral agent --fake-gpus 8xA100-80GB` (tasks run as this user). The parts:

  fsync    200 x (append 4 KiB + fdatasync) and 200 x (append 4 KiB + fsync) on a file in the
           temporary folder (the SQLite store's filesystem) and, when CORRAL_TEST_POSTGRES_DATA
           is set (scripts/with_postgres.sh), in PostgreSQL's data folder: p50 / p99 / mean.
           Always measured; the other parts print it beside their results.
  idle     wrk -t2 -c64 -d10s with a Lua script POSTing
           {"command":["true"],"resources":{"gpus":1,"gpu_models":["NO-SUCH-MODEL"]}} to
           /api/v1/jobs: no node has the model, so nothing launches. The script counts 2xx and
           non-2xx answers (wrk's `response` and `done` hooks); failures = non-2xx + wrk's socket
           errors (connect, read, write, timeout). Reports requests/s, 2xx/s (durable
           submissions: the server answers 201 after the commit), failures, latency p50/p99,
           the server's and wrk's CPU. Afterwards every pending job is cancelled (POST
           /api/v1/jobs/ID/cancel from 8 keep-alive connections, a page of 1,000 at a time) and
           GET /api/v1/summary must say 0 pending.
  churn    first an array of --churn-jobs (2,000) jobs `sleep 0.2` (1 GPU, 100 milli-CPU) on the
           8 fake GPUs; once one runs, the same wrk load as idle; reports the same numbers and
           how many array jobs ended during wrk's window (at most 8 / 0.2 s = 40/s). Then the
           array is cancelled (POST /api/v1/arrays/ID/cancel) and the idle jobs as above.
  cli      `corral login` into a private XDG_CONFIG_HOME (the config file a user's shell would
           have; CORRAL_SERVER and CORRAL_TOKEN unset), then --cli-jobs (1,000) times
           `corral submit --cpu-milli 125 -- true`, each its own process, one after another;
           then waits (polling GET /api/v1/summary every 20 ms) until nothing is pending,
           starting or running, and checks every job succeeded. Reports the submit phase, the
           total (submit + drain) and each process's wall time p50/p99.
  listing  --listing-jobs (10,000) pending NO-SUCH-MODEL jobs submitted one per request, then
           `corral jobs --limit 1000` (10 runs, a fresh process each, output read through a
           pipe): median, min, max. Where Slurm can run: an already running slurmctld
           (`scontrol ping` says UP; SLURM_CONF as set), else, as root with slurm-wlm and munge
           installed, a throwaway one-node Slurm from scripts/slurm_local.sh; 1,000 jobs
           `sbatch --hold --wrap true` (timed: serial submissions, like cli), then plain `squeue`
           the same 10 times; the jobs are cancelled (scancel) afterwards. When Slurm cannot run,
           the row says why.
  reads    reads while the control plane is busy (issue 17, point 2): --reads-pending (20,000)
           NO-SUCH-MODEL jobs queued (an array, so every scheduling pass has a long queue), an
           array of --churn-jobs `sleep 0.2` jobs churning on the 8 fake GPUs, and the idle
           part's wrk submitting; meanwhile a second wrk (1 thread, 8 connections, the same
           seconds) GETs /api/v1/queue?limit=100, /api/v1/nodes, /api/v1/summary and
           /api/v1/jobs?limit=100 in turn. Reports the reads' rate, p50/p99/max and failures,
           and the submissions' rate beside them.
  rss      the server's VmRSS (/proc/PID/status) at start, after --rss-small (10,000) finished
           jobs and after --rss-large (100,000), and the ratio large/small. --rss-mode cancel
           (default): arrays of up to 10,000 pending NO-SUCH-MODEL jobs, each cancelled whole by
           POST /api/v1/arrays/ID/cancel (one commit): fast, and every job is submitted, stored,
           queued, ended and kept as history like any other, but never placed, started or run.
           --rss-mode run: arrays of `true` (1 GPU, 100 milli-CPU) that really run on the fake
           agent's --rss-gpus (8) GPUs, waiting for each array to finish: the task and agent
           paths too, but ~40 jobs/s here, so use smaller sizes.

Every part prints a table; --json PATH writes all results. Each process the script starts
(servers, agents, wrk, Slurm's daemons) is stopped when it exits, also on failure or Ctrl-C;
the temporary folder and the part databases are removed unless --keep. Python 3 standard
library plus the `wrk` binary (Debian's wrk 4.1; --wrk PATH).
"""

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

from bench_cluster import (Client, Server, fmt, log, machine, machine_busy_pct, machine_cpu,
                           percentile, start_agent, stop, stop_all, table, wait_for)

HERE = os.path.dirname(os.path.abspath(__file__))
SLURM_LOCAL = os.path.join(os.path.dirname(HERE), "scripts", "slurm_local.sh")
ALL_PARTS = ["fsync", "idle", "churn", "reads", "cli", "listing", "rss"]
ENDED_STATES = "succeeded,failed,cancelled,lost,timeout,oom"
# Jobs no node can run: a GPU model no fake agent has.
IDLE_SPEC = {"command": ["true"], "resources": {"gpus": 1, "gpu_models": ["NO-SUCH-MODEL"]}}
MAX_ARRAY = 10000  # model::kMaxArrayElements

# --- fsync ------------------------------------------------------------------------------------


def fsync_latency(directory, count=200, size=4096):
    """Appends `size` bytes and syncs, `count` times with fdatasync and `count` with fsync, on a
    fresh file in `directory`: ms p50/p99/mean of each sync."""
    path = os.path.join(directory, f".fsync-probe-{os.getpid()}")
    block = os.urandom(size)
    out = {"dir": directory, "count": count, "bytes": size}
    try:
        for name, sync in (("fdatasync", os.fdatasync), ("fsync", os.fsync)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
            try:
                ms = []
                for _ in range(count):
                    os.write(fd, block)
                    t0 = time.perf_counter()
                    sync(fd)
                    ms.append((time.perf_counter() - t0) * 1e3)
            finally:
                os.close(fd)
            out[name] = {"p50_ms": percentile(ms, 50), "p99_ms": percentile(ms, 99),
                         "mean_ms": statistics.fmean(ms)}
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    return out


def fsync_words(fs):
    """One line: the fdatasync latency of each measured folder."""
    if not fs:
        return "fsync: not measured"
    parts = []
    for where, r in fs.items():
        d = r["fdatasync"]
        parts.append(f"{where} fdatasync p50 {d['p50_ms']:.2f} / p99 {d['p99_ms']:.2f} ms")
    return "fsync: " + "; ".join(parts)


# --- stores and clusters ----------------------------------------------------------------------


class Stores:
    """A fresh, empty store per part: SQLite in the part's folder, or a database of its own on
    the PostgreSQL server of --store-url (createdb; dropdb when done)."""

    def __init__(self, store_url):
        self.url = store_url
        self.created = []
        if store_url:
            u = urllib.parse.urlsplit(store_url)
            if u.scheme not in ("postgres", "postgresql"):
                raise SystemExit(f"--store-url: expected postgres://..., got {store_url}")
            self.pg = u
            self.pg_bin = next((p for p in (os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"),)
                                if os.path.exists(os.path.join(p, "createdb"))), None)
            if self.pg_bin is None and shutil.which("createdb") is None:
                raise SystemExit("--store-url needs PostgreSQL's createdb (set PG_BIN)")

    @property
    def kind(self):
        return "postgres" if self.url else "sqlite"

    def _pg_tool(self, tool, *args):
        exe = os.path.join(self.pg_bin, tool) if self.pg_bin else tool
        u = self.pg
        argv = [exe, "-h", u.hostname or "127.0.0.1", "-p", str(u.port or 5432)]
        if u.username:
            argv += ["-U", urllib.parse.unquote(u.username)]
        env = dict(os.environ)
        if u.password:
            env["PGPASSWORD"] = urllib.parse.unquote(u.password)
        r = subprocess.run(argv + list(args), env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{tool} {' '.join(args)}: {r.stderr.strip()}")

    def fresh(self, part, directory):
        if not self.url:
            return f"sqlite:{os.path.join(directory, 'corral.db')}"
        base = self.pg.path.lstrip("/") or "corral"
        name = f"{base}_{part}_{os.getpid()}"
        self._pg_tool("createdb", name)
        self.created.append(name)
        return urllib.parse.urlunsplit(self.pg._replace(path="/" + name))

    def drop_all(self):
        for name in self.created:
            try:
                self._pg_tool("dropdb", "--if-exists", name)
            except RuntimeError as e:
                log(f"could not drop database {name}: {e}")
        self.created.clear()


class Cluster:
    """A part's cluster: `corral server` on a fresh store and, with fake_gpus, one agent."""

    def __init__(self, ctx, part, fake_gpus="8xA100-80GB"):
        self.dir = os.path.join(ctx.tmp, part)
        os.makedirs(os.path.join(self.dir, "server"))
        store = ctx.stores.fresh(part, self.dir)
        self.server = Server(ctx.corral, os.path.join(self.dir, "server"), store)
        self.agent = None
        if fake_gpus:
            self.agent = start_agent(self.server, ctx.corral, os.path.join(self.dir, "agent"),
                                     os.path.join(self.dir, "agent.log"), fake_gpus=fake_gpus)
        log(f"  {part}: server pid {self.server.pid} on {self.server.url} "
            f"({ctx.stores.kind}), agent {fake_gpus or 'none'}")

    def client(self, quickack=True):
        return Client(self.server.port, self.server.admin_token, quickack=quickack)

    def call(self, method, path, body=None, expect=200):
        """One request on a connection of its own: the answer's body; RuntimeError unless the
        status is `expect`."""
        c = self.client()
        try:
            status, answer = c.request(method, path, body)
        finally:
            c.close()
        if status != expect:
            raise RuntimeError(f"{method} {path}: {status} {answer!r}"[:500])
        return answer

    def summary(self):
        return self.call("GET", "/api/v1/summary")

    def wait_drained(self, what, timeout, interval):
        """Waits until nothing is pending, starting or running."""
        def drained():
            s = self.summary()
            return s["jobs_pending"] + s["jobs_starting"] + s["jobs_running"] == 0

        wait_for(what, drained, timeout, interval)

    def close(self):
        if self.agent is not None:
            stop(self.agent)
        self.server.stop()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None and not self.server.alive():
            # The part failed because the server stopped: say how, before its folder goes.
            log(f"  corral server exited with {self.server.proc.returncode}; its log ends:\n"
                + self.server.log_tail())
        self.close()


# --- load ------------------------------------------------------------------------------------

WRK_LUA = r"""
-- Written by bench/throughput_bench.py: POST one job spec per request, count 2xx and other
-- answers per thread, and print every total as one JSON line from the `done` hook.
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args)
  ok, non2xx, first_bad = 0, 0, ""
  wrk.method = "POST"
  wrk.body = os.getenv("BENCH_BODY")
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Authorization"] = "Bearer " .. os.getenv("BENCH_TOKEN")
end
function response(status, headers, body)
  if status >= 200 and status < 300 then
    ok = ok + 1
  else
    non2xx = non2xx + 1
    if first_bad == "" then first_bad = status .. " " .. string.sub(body, 1, 200) end
  end
end
function done(summary, latency, requests)
  local o, b, first = 0, 0, ""
  for _, t in ipairs(threads) do
    o = o + t:get("ok"); b = b + t:get("non2xx")
    if first == "" then first = t:get("first_bad") end
  end
  local e = summary.errors
  io.write(string.format('BENCH {"duration_us":%d,"requests":%d,"ok":%d,"non2xx":%d,' ..
    '"connect":%d,"read":%d,"write":%d,"timeout":%d,"p50_us":%d,"p99_us":%d,"mean_us":%.1f,' ..
    '"max_us":%d,"first_bad":"%s"}\n', summary.duration, summary.requests, o, b, e.connect,
    e.read, e.write, e.timeout, latency:percentile(50), latency:percentile(99), latency.mean,
    latency.max, (string.gsub(first, '[%c"\\]', " "))))
end
"""


WRK_READS_LUA = r"""
-- Written by bench/throughput_bench.py: GET the read endpoints in turn, count 2xx and other
-- answers, and print the totals as one JSON line from the `done` hook.
local threads = {}
local paths = {"/api/v1/queue?limit=100", "/api/v1/nodes", "/api/v1/summary",
               "/api/v1/jobs?limit=100"}
function setup(thread) table.insert(threads, thread) end
function init(args)
  ok, non2xx, n = 0, 0, 0
  wrk.headers["Authorization"] = "Bearer " .. os.getenv("BENCH_TOKEN")
end
function request()
  n = n + 1
  return wrk.format("GET", paths[(n % #paths) + 1])
end
function response(status, headers, body)
  if status >= 200 and status < 300 then ok = ok + 1 else non2xx = non2xx + 1 end
end
function done(summary, latency, requests)
  local o, b = 0, 0
  for _, t in ipairs(threads) do o = o + t:get("ok"); b = b + t:get("non2xx") end
  local e = summary.errors
  io.write(string.format('BENCH {"duration_us":%d,"requests":%d,"ok":%d,"non2xx":%d,' ..
    '"errors":%d,"p50_us":%d,"p99_us":%d,"max_us":%d}\n', summary.duration,
    summary.requests, o, b, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(99), latency.max))
end
"""


def start_read_load(ctx, cluster):
    """Starts the reads' wrk (1 thread, 8 connections, --wrk-seconds); read_load_result waits
    for it and parses its line."""
    script = os.path.join(ctx.tmp, "reads.lua")
    with open(script, "w") as f:
        f.write(WRK_READS_LUA)
    argv = [ctx.wrk, "-t1", "-c8", f"-d{ctx.args.wrk_seconds}s", "-s", script,
            cluster.server.url]
    env = dict(os.environ, BENCH_TOKEN=cluster.server.admin_token)
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def read_load_result(proc, timeout):
    out, err = proc.communicate(timeout=timeout)
    line = next((ln for ln in out.splitlines() if ln.startswith("BENCH ")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"reads' wrk failed ({proc.returncode}): {out[-500:]} {err[-500:]}")
    w = json.loads(line[len("BENCH "):])
    seconds = w["duration_us"] / 1e6
    return {"command": "wrk -t1 -c8 -s reads.lua (queue, nodes, summary, jobs in turn)",
            "requests_per_s": w["requests"] / seconds, "failures": w["non2xx"] + w["errors"],
            "latency_p50_ms": w["p50_us"] / 1e3, "latency_p99_ms": w["p99_us"] / 1e3,
            "latency_max_ms": w["max_us"] / 1e3}


def run_wrk(ctx, cluster, body, label):
    """wrk -tT -cC -dDs POSTing body to /api/v1/jobs: its counts, rates and latencies, with the
    server's and wrk's CPU (% of one core) and the machine's busy share over the run."""
    script = os.path.join(ctx.tmp, "post.lua")
    with open(script, "w") as f:
        f.write(WRK_LUA)
    a = ctx.args
    argv = [ctx.wrk, f"-t{a.wrk_threads}", f"-c{a.wrk_connections}", f"-d{a.wrk_seconds}s",
            "-s", script, f"{cluster.server.url}/api/v1/jobs"]
    env = dict(os.environ, BENCH_BODY=json.dumps(body),
               BENCH_TOKEN=cluster.server.admin_token)
    log(f"  {label}: wrk {' '.join(argv[1:4])} for {a.wrk_seconds} s")
    server = cluster.server
    cpu0, m0 = server.cpu_seconds(), machine_cpu()
    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    r = subprocess.run(argv, env=env, capture_output=True, text=True,
                       timeout=a.wrk_seconds + 60)
    wall = time.monotonic() - t0
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu, busy = server.cpu_seconds() - cpu0, machine_busy_pct(m0, machine_cpu())
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("BENCH ")), None)
    if r.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed ({r.returncode}): {r.stdout[-500:]} {r.stderr[-500:]}")
    w = json.loads(line[len("BENCH "):])
    seconds = w["duration_us"] / 1e6
    socket_errors = w["connect"] + w["read"] + w["write"] + w["timeout"]
    wrk_cpu = (children.ru_utime + children.ru_stime
               - children0.ru_utime - children0.ru_stime)
    return {
        "command": "wrk " + " ".join(argv[1:4]) + " -s post.lua URL/api/v1/jobs",
        "seconds": seconds,
        "requests": w["requests"],
        "ok": w["ok"],
        "non2xx": w["non2xx"],
        "socket_errors": socket_errors,
        "socket_errors_by_kind": {k: w[k] for k in ("connect", "read", "write", "timeout")},
        "failures": w["non2xx"] + socket_errors,
        "first_non2xx": w["first_bad"] or None,
        "requests_per_s": w["requests"] / seconds,
        "ok_per_s": w["ok"] / seconds,
        "latency_p50_ms": w["p50_us"] / 1e3,
        "latency_p99_ms": w["p99_us"] / 1e3,
        "latency_max_ms": w["max_us"] / 1e3,
        "server_cpu_pct": 100.0 * cpu / wall,
        "wrk_cpu_pct": 100.0 * wrk_cpu / wall,
        "machine_busy_pct": busy,
        "server_rss_mib": server.rss_mib(),
    }


def for_each(cluster, items, fn, workers=8):
    """fn(client, item) for every item, from `workers` threads with a keep-alive Client each;
    returns the results (in no particular order)."""
    results, errors, lock = [], [], threading.Lock()

    def work(chunk):
        client = cluster.client()
        try:
            mine = [fn(client, item) for item in chunk]
        except Exception as e:  # raised again below, in the caller's thread
            with lock:
                errors.append(e)
            return
        finally:
            client.close()
        with lock:
            results.extend(mine)

    threads = [threading.Thread(target=work, args=(items[k::workers],))
               for k in range(workers) if items[k::workers]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def list_ids(cluster, query, limit=1000):
    """Ids of every job GET /api/v1/jobs?all=1&QUERY lists, page by page (cursor)."""
    c = cluster.client()
    ids, cursor = [], None
    try:
        while True:
            path = f"/api/v1/jobs?all=1&limit={limit}&{query}"
            if cursor:
                path += "&cursor=" + urllib.parse.quote(cursor)
            status, page = c.request("GET", path)
            if status != 200:
                raise RuntimeError(f"GET {path}: {status} {page!r}")
            ids += [j["id"] for j in page]
            cursor = c.last_headers.get("X-Corral-Next-Cursor")
            if not cursor:
                return ids
    finally:
        c.close()


def cancel_pending(cluster):
    """Cancels every pending job (a page of 1,000 at a time) and checks none is left."""
    t0 = time.monotonic()
    cancelled, errors, first_error = 0, 0, None

    def cancel(client, job):
        status, body = client.request("POST", f"/api/v1/jobs/{job}/cancel")
        return status, body

    while True:
        page = cluster.call("GET", "/api/v1/jobs?all=1&state=pending&limit=1000")
        if not page:
            break
        results = for_each(cluster, [j["id"] for j in page], cancel)
        for status, body in results:
            if status == 202:
                cancelled += 1
            else:
                errors += 1
                first_error = first_error or f"{status} {body!r}"[:200]
        if errors > 100:
            break
    seconds = time.monotonic() - t0
    left = cluster.summary()["jobs_pending"]
    if left:
        raise RuntimeError(f"{left} jobs still pending after cancelling "
                           f"({errors} cancel errors, first: {first_error})")
    return {"cancelled": cancelled, "errors": errors, "first_error": first_error,
            "seconds": seconds, "per_s": cancelled / seconds if seconds else None,
            "left_pending": left}


# --- parts ------------------------------------------------------------------------------------


def part_idle(ctx):
    with Cluster(ctx, "idle") as cluster:
        load = run_wrk(ctx, cluster, IDLE_SPEC, "idle")
        load["cancel"] = cancel_pending(cluster)
        return load


def part_churn(ctx):
    a = ctx.args
    with Cluster(ctx, "churn") as cluster:
        spec = {"command": ["sleep", "0.2"], "resources": {"gpus": 1, "cpu_milli": 100},
                "array": {"indices": list(range(a.churn_jobs))}}
        array = cluster.call("POST", "/api/v1/jobs", spec, expect=201)["array_id"]
        wait_for("an array job to run", lambda: cluster.summary()["jobs_running"] > 0, 60, 0.02)
        ended_query = f"array={array}&state={ENDED_STATES}"
        ended0 = len(list_ids(cluster, ended_query))
        load = run_wrk(ctx, cluster, IDLE_SPEC, "churn")
        ended1 = len(list_ids(cluster, ended_query))
        failed = len(list_ids(cluster, f"array={array}&state=failed,lost,timeout,oom"))
        load.update({
            "array_jobs": a.churn_jobs,
            "array_ended_before": ended0,
            "array_ended_during": ended1 - ended0,
            "array_ended_per_s": (ended1 - ended0) / load["seconds"],
            "array_failed": failed,
            "array_left": a.churn_jobs - ended1,
        })
        cluster.call("POST", f"/api/v1/arrays/{array}/cancel", expect=202)
        load["cancel"] = cancel_pending(cluster)
        return load


def part_reads(ctx):
    a = ctx.args
    with Cluster(ctx, "reads") as cluster:
        for first in range(0, a.reads_pending, MAX_ARRAY):  # arrays of at most MAX_ARRAY
            queued = dict(IDLE_SPEC)
            queued["array"] = {"indices": list(range(min(MAX_ARRAY, a.reads_pending - first)))}
            cluster.call("POST", "/api/v1/jobs", queued, expect=201)
        spec = {"command": ["sleep", "0.2"], "resources": {"gpus": 1, "cpu_milli": 100},
                "array": {"indices": list(range(a.churn_jobs))}}
        array = cluster.call("POST", "/api/v1/jobs", spec, expect=201)["array_id"]
        wait_for("an array job to run", lambda: cluster.summary()["jobs_running"] > 0, 60, 0.02)
        reads = start_read_load(ctx, cluster)
        submits = run_wrk(ctx, cluster, IDLE_SPEC, "reads")
        result = {"reads": read_load_result(reads, a.wrk_seconds + 60), "submits": submits,
                  "queued": a.reads_pending}
        cluster.call("POST", f"/api/v1/arrays/{array}/cancel", expect=202)
        return result


def part_cli(ctx):
    a = ctx.args
    with Cluster(ctx, "cli") as cluster:
        env = {k: v for k, v in os.environ.items()
               if k not in ("CORRAL_SERVER", "CORRAL_TOKEN", "CORRAL_CA_CERT")}
        env["XDG_CONFIG_HOME"] = os.path.join(cluster.dir, "config")
        login = subprocess.run([ctx.corral, "login", "--server", cluster.server.url, "--token",
                                cluster.server.admin_token], env=env, capture_output=True,
                               text=True)
        if login.returncode != 0:
            raise RuntimeError(f"corral login: {login.stderr.strip()}")
        argv = [ctx.corral, "submit", "--cpu-milli", "125", "--", "true"]
        each = []
        t0 = time.monotonic()
        for i in range(a.cli_jobs):
            s0 = time.monotonic()
            r = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True)
            each.append(time.monotonic() - s0)
            if r.returncode != 0:
                raise RuntimeError(f"submission {i + 1}: corral submit exited {r.returncode}: "
                                   f"{r.stderr.decode(errors='replace').strip()}")
        submit_s = time.monotonic() - t0
        cluster.wait_drained("every CLI job to end", 600, 0.02)
        total_s = time.monotonic() - t0
        succeeded = len(list_ids(cluster, "state=succeeded"))
        if succeeded != a.cli_jobs:
            raise RuntimeError(f"{succeeded} of {a.cli_jobs} jobs succeeded")
        return {"jobs": a.cli_jobs, "command": " ".join(["corral"] + argv[1:]),
                "submit_s": submit_s, "total_s": total_s, "drain_s": total_s - submit_s,
                "submits_per_s": a.cli_jobs / submit_s,
                "submit_p50_ms": percentile(each, 50) * 1e3,
                "submit_p99_ms": percentile(each, 99) * 1e3, "succeeded": succeeded}


def time_runs(argv, runs, env=None, expect_lines=None):
    """Wall seconds of `runs` fresh runs of argv (stdout read through a pipe): median/min/max,
    and the lines of the last output."""
    times, lines = [], 0
    for _ in range(runs):
        t0 = time.monotonic()
        r = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True)
        times.append(time.monotonic() - t0)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited {r.returncode}: "
                               f"{r.stderr.decode(errors='replace').strip()[:300]}")
        lines = r.stdout.count(b"\n")
    if expect_lines is not None and lines < expect_lines:
        raise RuntimeError(f"{' '.join(argv)} printed {lines} lines, expected {expect_lines}")
    return {"runs": runs, "median_ms": statistics.median(times) * 1e3,
            "min_ms": min(times) * 1e3, "max_ms": max(times) * 1e3, "lines": lines}


def submit_jobs(cluster, count, spec):
    """Submits `count` jobs, one per request from 8 keep-alive connections; returns how many
    were refused."""
    body = json.dumps(spec).encode()

    def submit(client, _):
        status, _ = client.request("POST", "/api/v1/jobs", body)
        return status

    return sum(1 for s in for_each(cluster, list(range(count)), submit) if s != 201)


class LocalSlurm:
    """Slurm for the listing comparison: the running one (scontrol ping UP), else a throwaway
    one from scripts/slurm_local.sh (stopped by close()). `why_not` says why there is none."""

    def __init__(self, tmp):
        self.dir, self.env, self.why_not, self.started = None, dict(os.environ), None, False
        if shutil.which("squeue") is None or shutil.which("sbatch") is None:
            self.why_not = "squeue/sbatch not on PATH (Debian: apt-get install slurm-wlm munge)"
            return
        if self._up():
            return
        if os.geteuid() != 0:
            self.why_not = "no running slurmctld, and starting one (slurmd) needs root"
            return
        self.dir = os.path.join(tmp, "slurm")
        r = subprocess.run(["bash", SLURM_LOCAL, "start", self.dir], capture_output=True,
                           text=True, timeout=120)
        self.started = True
        if r.returncode != 0:
            self.why_not = f"scripts/slurm_local.sh could not start Slurm: {r.stderr.strip()}"
            return
        self.env["SLURM_CONF"] = os.path.join(self.dir, "slurm.conf")

    def _up(self):
        r = subprocess.run(["scontrol", "ping"], env=self.env, capture_output=True, text=True)
        return r.returncode == 0 and "UP" in r.stdout

    def run(self, *argv):
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True)

    def version(self):
        return self.run("squeue", "--version").stdout.strip()

    def close(self):
        if self.started:
            subprocess.run(["bash", SLURM_LOCAL, "stop", self.dir], capture_output=True)
            self.started = False


def slurm_listing(ctx, jobs, runs):
    slurm = LocalSlurm(ctx.tmp)
    ctx.on_exit.append(slurm.close)
    if slurm.why_not:
        return {"skipped": slurm.why_not}
    ids = []
    try:
        t0 = time.monotonic()
        for i in range(jobs):
            r = slurm.run("sbatch", "--hold", "--parsable", "--output=/dev/null", "--wrap", "true")
            if r.returncode != 0:
                raise RuntimeError(f"sbatch {i + 1}: {r.stderr.strip()}")
            ids.append(r.stdout.strip().split(";")[0])
        sbatch_s = time.monotonic() - t0
        timing = time_runs(["squeue"], runs, env=slurm.env, expect_lines=jobs + 1)
        timing.update({"jobs": jobs, "sbatch_s": sbatch_s, "sbatch_per_s": jobs / sbatch_s,
                       "slurm": slurm.version(),
                       "where": "scripts/slurm_local.sh" if slurm.started else "running Slurm"})
        return timing
    finally:
        for k in range(0, len(ids), 500):
            slurm.run("scancel", *ids[k:k + 500])
        slurm.close()


def part_listing(ctx):
    a = ctx.args
    with Cluster(ctx, "listing") as cluster:
        t0 = time.monotonic()
        refused = submit_jobs(cluster, a.listing_jobs, IDLE_SPEC)
        if refused:
            raise RuntimeError(f"{refused} of {a.listing_jobs} submissions refused")
        fill_s = time.monotonic() - t0
        env = dict(os.environ, CORRAL_SERVER=cluster.server.url,
                   CORRAL_TOKEN=cluster.server.admin_token)
        corral = time_runs([ctx.corral, "jobs", "--limit", "1000"], a.listing_runs, env=env,
                           expect_lines=min(1000, a.listing_jobs))
        corral.update({"jobs_in_store": a.listing_jobs, "fill_s": fill_s})
    return {"corral": corral, "squeue": slurm_listing(ctx, 1000, a.listing_runs)}


def finish_jobs(cluster, count, mode):
    """Submits `count` jobs in arrays of at most 10,000 and waits until they all ended: pending
    jobs cancelled whole (mode cancel), or `true` jobs run on the agent (mode run)."""
    left = count
    while left:
        n = min(left, MAX_ARRAY)
        spec = dict(IDLE_SPEC) if mode == "cancel" else {
            "command": ["true"], "resources": {"gpus": 1, "cpu_milli": 100}}
        spec["array"] = {"indices": list(range(n))}
        array = cluster.call("POST", "/api/v1/jobs", spec, expect=201)["array_id"]
        if mode == "cancel":
            cluster.call("POST", f"/api/v1/arrays/{array}/cancel", expect=202)
        left -= n
    cluster.wait_drained(f"{count} jobs to end", 3600, 0.2)


def part_rss(ctx):
    a = ctx.args
    if a.rss_large < a.rss_small:
        raise RuntimeError("--rss-large must be at least --rss-small")
    with Cluster(ctx, "rss", fake_gpus=f"{a.rss_gpus}xA100-80GB") as cluster:
        server = cluster.server
        out = {"mode": a.rss_mode, "rss_start_mib": server.rss_mib()}
        t0 = time.monotonic()
        finish_jobs(cluster, a.rss_small, a.rss_mode)
        time.sleep(1)  # let the last commits and scheduler passes settle
        out.update({"small": a.rss_small, "rss_small_mib": server.rss_mib(),
                    "small_s": time.monotonic() - t0})
        t0 = time.monotonic()
        finish_jobs(cluster, a.rss_large - a.rss_small, a.rss_mode)
        time.sleep(1)
        out.update({"large": a.rss_large, "rss_large_mib": server.rss_mib(),
                    "large_s": time.monotonic() - t0, "peak_rss_mib": server.hwm_mib(),
                    "server_cpu_s": server.cpu_seconds()})
        out["ratio"] = out["rss_large_mib"] / out["rss_small_mib"]
        return out


# --- output -----------------------------------------------------------------------------------


def verdict(ok):
    return "met" if ok else "NOT met"


def load_rows(r, target_rate, target_words):
    rows = [
        ("requests (wrk)", f"{r['requests']:,}", r["command"]),
        ("requests/s", fmt(r["requests_per_s"], 0), ""),
        ("2xx/s (durable submissions)", fmt(r["ok_per_s"], 0),
         f"{target_words}: {verdict(r['ok_per_s'] >= target_rate)}"),
        ("failures (non-2xx + socket errors)", f"{r['failures']:,}",
         f"{r['non2xx']} non-2xx, {r['socket_errors']} socket"
         + (f"; first: {r['first_non2xx']}" if r["first_non2xx"] else "")),
        ("latency p50 / p99", f"{fmt(r['latency_p50_ms'], 2)} / {fmt(r['latency_p99_ms'], 2)} ms",
         ""),
        ("server / wrk CPU (% of one core)",
         f"{fmt(r['server_cpu_pct'], 0)} / {fmt(r['wrk_cpu_pct'], 0)} %",
         f"machine busy {fmt(r['machine_busy_pct'], 0)} % of {os.cpu_count()} cores"),
    ]
    if "array_ended_during" in r:
        rows.append(("array jobs ended in the window",
                     f"{r['array_ended_during']:,} ({fmt(r['array_ended_per_s'], 1)}/s)",
                     f"{r['array_failed']} failed; at most 40/s on 8 GPUs"))
    cancel = r.get("cancel")
    if cancel:
        rows.append(("then cancelled (pending left)",
                     f"{cancel['cancelled']:,} ({cancel['left_pending']})",
                     f"{fmt(cancel['seconds'], 1)} s, {fmt(cancel['per_s'], 0)}/s, "
                     f"{cancel['errors']} errors"))
    return rows


def print_results(res):
    fsync_note = fsync_words(res.get("fsync"))

    def note(part):
        """What each part prints beside its title: the fsync latency, the load before it."""
        return f"[{fsync_note}; load average {res['load_before'].get(part, 0):.1f}]"

    print("\n=== corral control-plane throughput (bench/throughput_bench.py) ===")
    print(f"store: {res['store']}   machine: {res['machine']}   corral: {res['corral_version']}")
    if "fsync" in res:
        rows = []
        for where, r in res["fsync"].items():
            for kind in ("fdatasync", "fsync"):
                d = r[kind]
                rows.append((f"{where}: 4 KiB append + {kind}",
                             f"{d['p50_ms']:.2f} / {d['p99_ms']:.2f} / {d['mean_ms']:.2f} ms",
                             "p50 / p99 / mean, " + r["dir"]))
        table(f"fsync ({next(iter(res['fsync'].values()))['count']} syncs each)", rows)
    if "idle" in res:
        table("idle: durable submissions, nothing launches   " + note("idle"),
              load_rows(res["idle"], 10000 if res["store"] == "sqlite" else 5000,
                        ">= 10,000/s on SQLite" if res["store"] == "sqlite" else
                        ">= 5,000/s on PostgreSQL"))
    if "churn" in res:
        r = res["churn"]
        rows = load_rows(r, 2000, ">= 2,000/s")
        rows[3] = rows[3][:2] + (rows[3][2] + f"; no failure: {verdict(r['failures'] == 0)}",)
        table("churn: durable submissions while 1-GPU 0.2 s jobs churn on 8 GPUs   " + note("churn"),
              rows)
    if "reads" in res:
        r, q = res["reads"]["reads"], res["reads"]["submits"]
        table(f"reads: {res['reads']['queued']:,} queued, jobs churning, wrk submitting   "
              + note("reads"), [
            ("reads (queue, nodes, summary, jobs in turn)", f"{fmt(r['requests_per_s'], 0)}/s",
             f"failures {r['failures']}"),
            ("reads p50 / p99 / max",
             f"{fmt(r['latency_p50_ms'], 1)} / {fmt(r['latency_p99_ms'], 1)} / "
             f"{fmt(r['latency_max_ms'], 1)} ms", ""),
            ("submissions beside them", f"{fmt(q['ok_per_s'], 0)}/s",
             f"p99 {fmt(q['latency_p99_ms'], 1)} ms; failures {q['failures']}"),
        ])
    if "cli" in res:
        r = res["cli"]
        table(f"cli: {r['jobs']:,} serial `{r['command']}`, each a new process   " + note("cli"), [
            ("submit phase", fmt(r["submit_s"], 2, " s"), f"{fmt(r['submits_per_s'], 0)}/s"),
            ("one submit p50 / p99",
             f"{fmt(r['submit_p50_ms'], 1)} / {fmt(r['submit_p99_ms'], 1)} ms", ""),
            ("total, submitted and finished", fmt(r["total_s"], 2, " s"),
             f"<= 15 s: {verdict(r['total_s'] <= 15)}; drain {fmt(r['drain_s'], 2)} s"),
        ])
    if "listing" in res:
        r = res["listing"]
        c, sq = r["corral"], r["squeue"]
        rows = [(f"corral jobs --limit 1000 ({c['jobs_in_store']:,} jobs in the store)",
                 f"{fmt(c['median_ms'], 1)} ms",
                 f"median of {c['runs']}, min {fmt(c['min_ms'], 1)}, max {fmt(c['max_ms'], 1)}")]
        if "skipped" in sq:
            rows.append(("squeue (1,000 pending jobs)", "skipped", sq["skipped"]))
        else:
            rows.append((f"squeue (1,000 held jobs; {sq['slurm']})", f"{fmt(sq['median_ms'], 1)} ms",
                         f"median of {sq['runs']}, min {fmt(sq['min_ms'], 1)}, max "
                         f"{fmt(sq['max_ms'], 1)}; at least as fast: "
                         f"{verdict(c['median_ms'] <= sq['median_ms'])}"))
            rows.append(("1,000 serial sbatch --hold", fmt(sq["sbatch_s"], 2, " s"),
                         f"{fmt(sq['sbatch_per_s'], 0)}/s ({sq['where']})"))
        table("listing   " + note("listing"), rows)
    if "rss" in res:
        r = res["rss"]
        table(f"rss: server VmRSS by finished jobs (mode {r['mode']})   " + note("rss"), [
            ("at start", fmt(r["rss_start_mib"], 1, " MiB"), ""),
            (f"after {r['small']:,}", fmt(r["rss_small_mib"], 1, " MiB"),
             f"{fmt(r['small_s'], 1)} s to finish them"),
            (f"after {r['large']:,}", fmt(r["rss_large_mib"], 1, " MiB"),
             f"{fmt(r['large_s'], 1)} s more; peak {fmt(r['peak_rss_mib'], 1)} MiB"),
            ("ratio", fmt(r["ratio"], 2), f"<= 1.5: {verdict(r['ratio'] <= 1.5)}"),
        ])
    for part, err in res.get("errors", {}).items():
        print(f"\nFAILED {part}: {err}")


# --- main -------------------------------------------------------------------------------------


class Context:
    def __init__(self, args, corral, tmp, stores, wrk):
        self.args, self.corral, self.tmp, self.stores, self.wrk = args, corral, tmp, stores, wrk
        self.on_exit = []


def measure_fsync(tmp, store_kind):
    out = {"tmp": fsync_latency(tmp)}
    pg_data = os.environ.get("CORRAL_TEST_POSTGRES_DATA")
    if store_kind == "postgres" and pg_data and os.access(pg_data, os.W_OK):
        out["postgres"] = fsync_latency(pg_data)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corral", help="path to the corral binary (build/corral)")
    ap.add_argument("--parts", default=",".join(ALL_PARTS),
                    help=f"comma-separated, of {','.join(ALL_PARTS)} (default all; fsync is "
                    "always measured)")
    ap.add_argument("--store-url", help="postgres://USER@HOST:PORT/DB: each part gets a fresh "
                    "database DB_PART_PID on that server (default: SQLite in the temporary folder)")
    ap.add_argument("--wrk", default="wrk", help="the wrk binary (default: wrk on PATH)")
    ap.add_argument("--wrk-threads", type=int, default=2, help="wrk -t (default 2)")
    ap.add_argument("--wrk-connections", type=int, default=64, help="wrk -c (default 64)")
    ap.add_argument("--wrk-seconds", type=int, default=10, help="wrk -d (default 10)")
    ap.add_argument("--churn-jobs", type=int, default=2000,
                    help="elements of the churning array (default 2000)")
    ap.add_argument("--reads-pending", type=int, default=20000,
                    help="jobs queued for the reads part (default 20000)")
    ap.add_argument("--cli-jobs", type=int, default=1000, help="default 1000")
    ap.add_argument("--listing-jobs", type=int, default=10000,
                    help="jobs in the store for `corral jobs` (default 10000)")
    ap.add_argument("--listing-runs", type=int, default=10, help="runs timed (default 10)")
    ap.add_argument("--rss-small", type=int, default=10000, help="default 10000")
    ap.add_argument("--rss-large", type=int, default=100000, help="default 100000")
    ap.add_argument("--rss-mode", choices=["cancel", "run"], default="cancel",
                    help="how the rss jobs finish (default cancel; see the docstring)")
    ap.add_argument("--rss-gpus", type=int, default=8, help="fake GPUs for --rss-mode run")
    ap.add_argument("--json", help="also write the results to this file as JSON")
    ap.add_argument("--keep", action="store_true",
                    help="keep the temporary folder and the part databases")
    args = ap.parse_args()
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in parts if p not in ALL_PARTS]
    if unknown:
        ap.error(f"unknown parts {unknown}; known: {ALL_PARTS}")
    corral = os.path.abspath(args.corral)
    if not os.access(corral, os.X_OK):
        ap.error(f"{args.corral}: not an executable")
    wrk = shutil.which(args.wrk)
    if wrk is None and any(p in parts for p in ("idle", "churn", "reads")):
        ap.error(f"{args.wrk}: not found (Debian: apt-get install wrk)")
    stores = Stores(args.store_url)

    tmp = tempfile.mkdtemp(prefix="corral-throughput.")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ctx = Context(args, corral, tmp, stores, wrk)
    version = subprocess.run([corral, "--version"], capture_output=True, text=True).stdout.strip()
    res = {"machine": machine(), "store": stores.kind, "corral": corral,
           "corral_version": version, "parts": parts, "load_before": {}, "errors": {}}
    log(f"throughput bench in {tmp}, store {stores.kind}")
    try:
        res["fsync"] = measure_fsync(tmp, stores.kind)
        log("  " + fsync_words(res["fsync"]))
        runners = {"idle": part_idle, "churn": part_churn, "reads": part_reads, "cli": part_cli,
                   "listing": part_listing, "rss": part_rss}
        for part in parts:
            if part == "fsync":
                continue
            log(f"part {part}")
            res["load_before"][part] = os.getloadavg()[0]
            try:
                res[part] = runners[part](ctx)
            except Exception as e:  # report and go on with the next part
                res["errors"][part] = f"{type(e).__name__}: {e}"
                log(f"{part} failed: {e}")
            finally:
                stop_all()
    finally:
        stop_all()
        for fn in ctx.on_exit:
            fn()
        if args.keep:
            log(f"kept {tmp}" + (f" and databases {stores.created}" if stores.created else ""))
        else:
            stores.drop_all()
            shutil.rmtree(tmp, ignore_errors=True)
    print_results(res)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)
    return 1 if res["errors"] else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        stop_all()
        sys.exit(130)
