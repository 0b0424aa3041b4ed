#!/usr/bin/env python3
"""Control-plane benchmark for corral: a real `corral server` on loopback, driven over HTTP.

Usage:
    python3 bench/api_bench.py build/corral [--store-url postgres://...] [options]

The script starts `corral server --listen 127.0.0.1:PORT --store sqlite:DIR/corral.db
--data-dir DIR` in a fresh temporary directory (or with --store-url, which must name an empty
database, e.g. the one scripts/with_postgres.sh creates), reads the admin token from
DIR/admin.token and the join token from DIR/join.token, waits for GET /healthz, and measures:

  1. Durable submission throughput. --clients (8) client processes, each with one persistent
     keep-alive http.client connection, POST --jobs-per-client (2,000) jobs each to /api/v1/jobs
     with body {"command":["true"],"resources":{"gpus":64}}. 64 GPUs never fit, so the jobs stay
     pending and the scheduler places nothing. Reports jobs/s (201 answers / wall time) and the
     p50/p99 request latency. Target: >= 2,000 jobs/s with SQLite and with PostgreSQL.
  2. Submit -> task process started, on an idle fake cluster. One `corral agent --fake-gpus
     8xA100-80GB` joins; then, --latency-jobs (100) times in a row, a job runs
     `sh -c 'date +%s.%N > FILE_i'`; the script polls (5 ms) for FILE_i, and the latency is the
     time written in the file minus time.time() before the POST. Each job must reach succeeded
     before the next one. Targets: p50 < 100 ms, p99 < 500 ms.
  3. Heartbeat load. --history (100,000) more pending 64-GPU jobs are pre-loaded with the
     submitter of part 1; then --nodes (10,000) simulated 8-GPU nodes register over
     /api/v1/agent/register and a pool of --hb-workers processes heartbeats every node every
     --hb-interval (5) s. Once every node is registered and one interval of warm-up has passed,
     a --hb-window (30) s window measures the server's CPU (utime+stime from /proc/PID/stat,
     % of one core), its RSS (VmRSS), the heartbeats/s achieved and the heartbeat request
     latency, while --sched-jobs (50) one-GPU jobs are submitted one by one and timed until
     GET /api/v1/jobs/ID shows a state other than pending (submit -> scheduled). The heartbeats
     then stop and the same probe runs again without load (the nodes are still alive: the node
     timeout is 30 s). The issue asks for 10,000 nodes every 5 s = 2,000 heartbeats/s; lower
     --nodes on a machine that cannot sustain it, and read the achieved rate in the table.

Part 2 runs first, so that its cluster is really idle (no queue), then part 1, then part 3.
All clients set TCP_NODELAY. --quickack also sets TCP_QUICKACK on them before reading each
response: the server writes a response's headers and body in two send() calls without
TCP_NODELAY, so on a keep-alive connection the body waits for the client's delayed ACK
(~40 ms); quick ACKs remove that stall and show the server's own capacity. Without the flag
the numbers are what plain clients get. The history pre-load always uses quick ACKs (it is
set-up, not a measurement).
Every process the script starts (server, agent, client processes) is stopped when it exits,
also on failure or Ctrl-C, and the temporary directory is removed (unless --keep).

Only the Python 3 standard library is used. Results are printed as tables; --json PATH also
writes them as JSON.
"""

import argparse
import heapq
import json
import multiprocessing as mp
import os
import random
import shutil
import signal
import sys
import tempfile
import time

from bench_cluster import (Client, Server, fmt, log, machine, machine_busy_pct, machine_cpu,
                           percentile, proc_cpu_seconds, start_agent, stop, stop_all, table)

MP = mp.get_context("fork")
OWNER_PID = os.getpid()

# --- small helpers ----------------------------------------------------------------------------


def cpu_of(pids):
    s = 0.0
    for pid in pids:
        try:
            s += proc_cpu_seconds(pid)
        except OSError:
            pass
    return s


# --quickack: see Client.
QUICKACK = False


def new_client(port, token=None, quickack=None):
    """A Client with quick ACKs as --quickack says, unless quickack says otherwise."""
    return Client(port, token, quickack=QUICKACK if quickack is None else quickack)


# --- processes we start -----------------------------------------------------------------------

_workers = []  # multiprocessing processes


def cleanup():
    if os.getpid() != OWNER_PID:
        return
    for w in list(_workers):
        if w.is_alive():
            w.terminate()
    for w in list(_workers):
        w.join(5)
        if w.is_alive():
            w.kill()
            w.join()
    _workers.clear()
    stop_all()


def start_worker(target, args):
    w = MP.Process(target=target, args=args, daemon=True)
    w.start()
    _workers.append(w)
    return w


# --- part 1: concurrent durable submission ----------------------------------------------------

PENDING_JOB = json.dumps({"command": ["true"], "resources": {"gpus": 64}}).encode()


def _submit_worker(port, token, n, ready, go, out, quickack):
    client = new_client(port, token, quickack=quickack)
    client.conn.connect()
    latencies, errors, first_error = [], 0, None
    ready.wait()
    go.wait()
    for _ in range(n):
        t0 = time.monotonic()
        try:
            status, body = client.request("POST", "/api/v1/jobs", PENDING_JOB)
        except OSError as e:
            status, body = None, str(e)
        dt = time.monotonic() - t0
        if status == 201:
            latencies.append(dt)
        else:
            errors += 1
            first_error = first_error or f"{status}: {body!r}"[:300]
    out.put({"latencies": latencies, "errors": errors, "first_error": first_error,
             "end": time.monotonic(), "reconnects": client.reconnects})
    client.close()


def submit_concurrently(server, clients, per_client, quickack=None):
    """Runs `clients` processes posting `per_client` pending jobs each; returns the stats."""
    ready = MP.Barrier(clients + 1)
    go = MP.Event()
    out = MP.Queue()
    procs = [start_worker(_submit_worker, (server.port, server.admin_token, per_client, ready, go,
                                           out, quickack)) for _ in range(clients)]
    ready.wait(60)
    pids = [p.pid for p in procs]
    cpu0, ccpu0, mcpu0 = server.cpu_seconds(), cpu_of(pids), machine_cpu()
    t0 = time.monotonic()
    go.set()
    results = []
    ccpu = 0.0
    for _ in procs:
        results.append(out.get(timeout=3600))
        if len(results) == 1:  # all clients are still alive: sample their CPU now
            ccpu = cpu_of(pids) - ccpu0
            t_ccpu = time.monotonic() - t0
    wall = max(r["end"] for r in results) - t0
    cpu = server.cpu_seconds() - cpu0
    mcpu = machine_busy_pct(mcpu0, machine_cpu())
    for p in procs:
        p.join(10)
        _workers.remove(p)
    lat = [x for r in results for x in r["latencies"]]
    errors = sum(r["errors"] for r in results)
    first_error = next((r["first_error"] for r in results if r["first_error"]), None)
    return {
        "clients": clients,
        "jobs_requested": clients * per_client,
        "jobs_acknowledged": len(lat),
        "errors": errors,
        "first_error": first_error,
        "reconnects": sum(r["reconnects"] for r in results),
        "wall_s": wall,
        "jobs_per_s": len(lat) / wall if wall > 0 else None,
        "latency_p50_ms": percentile(lat, 50) * 1e3 if lat else None,
        "latency_p99_ms": percentile(lat, 99) * 1e3 if lat else None,
        "latency_max_ms": max(lat) * 1e3 if lat else None,
        "server_cpu_pct": 100.0 * cpu / wall if wall > 0 else None,
        "client_cpu_pct": 100.0 * ccpu / t_ccpu if t_ccpu > 0 else None,
        "machine_busy_pct": mcpu,
        "server_rss_mib": server.rss_mib(),
    }


# --- part 2: submit -> task started on an idle fake cluster -----------------------------------


def start_latency(server, corral, tmp, count, poll_s):
    agent = start_agent(server, corral, os.path.join(tmp, "agent"), os.path.join(tmp, "agent.log"))
    admin = new_client(server.port, server.admin_token)
    outdir = os.path.join(tmp, "started")
    os.makedirs(outdir, exist_ok=True)
    latencies, submit_rtts, done_times = [], [], []
    for i in range(count):
        path = os.path.join(outdir, f"{i}.ts")
        spec = {"command": ["sh", "-c", f"date +%s.%N > {path}"], "shell": False,
                "resources": {"gpus": 1}}
        t_submit = time.time()
        m0 = time.monotonic()
        status, body = admin.request("POST", "/api/v1/jobs", spec)
        submit_rtts.append(time.monotonic() - m0)
        if status != 201:
            raise RuntimeError(f"submit failed: {status} {body!r}")
        job = body["id"]
        deadline = time.monotonic() + 60
        started = None
        while started is None:
            try:
                with open(path) as f:
                    text = f.read()
                if text.endswith("\n"):
                    started = float(text)
            except (FileNotFoundError, ValueError):
                pass
            if started is None:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"job {job} did not start within 60 s")
                time.sleep(poll_s)
        latencies.append(started - t_submit)
        while True:
            status, view = admin.request("GET", f"/api/v1/jobs/{job}")
            state = view.get("state") if status == 200 else None
            if state == "succeeded":
                break
            if state in ("failed", "cancelled", "lost", "timeout", "oom"):
                raise RuntimeError(f"job {job} ended {state}: {view.get('reason')}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"job {job} did not succeed within 60 s (state {state})")
            time.sleep(poll_s)
        done_times.append(time.monotonic() - m0)
    admin.close()
    stop(agent)
    ms = [x * 1e3 for x in latencies]
    return {
        "jobs": count,
        "latency_p50_ms": percentile(ms, 50),
        "latency_p99_ms": percentile(ms, 99),
        "latency_min_ms": min(ms),
        "latency_max_ms": max(ms),
        "submit_rtt_p50_ms": percentile(submit_rtts, 50) * 1e3,
        "submit_to_succeeded_p50_ms": percentile(done_times, 50) * 1e3,
    }


# --- part 3: heartbeat load -------------------------------------------------------------------

# Per-worker counters in a shared array (each worker writes its own slots only).
C_REGISTERED, C_HEARTBEATS, C_ERRORS, C_REREGISTER, C_LATE = range(5)
NC = 5


def node_name(i):
    return f"sim-{i:05d}"


def registration_body(name):
    gpus = [{"index": g, "uuid": f"GPU-{name}-{g}", "memory_mib": 81920, "nvlink_domain": 0}
            for g in range(8)]
    return json.dumps({"protocol_version": 1, "name": name, "node_id": f"bench-node-id-{name}",
                       "inventory": {
        "hostname": name, "cpu_milli": 64000, "memory_mib": 262144, "gpu_model": "A100-80GB",
        "gpus": gpus}}).encode()


def _heartbeat_worker(w, workers, nodes, port, join_token, interval, flags, counters, out):
    """Registers nodes w, w+workers, ... and heartbeats each one every `interval` seconds.

    flags[0]: stop; flags[1]: inside the measured window (record request latencies)."""
    random.seed(w)
    base = w * NC
    mine = list(range(w, nodes, workers))
    names = {i: node_name(i) for i in mine}
    # Each report numbered above the last (the server takes only newer ones), so every heartbeat
    # does the whole work of one.
    beat = b'{"seq": %d, "tasks": [], "logs": [], "wait_ms": 0}'
    seqs = {i: 0 for i in mine}
    client = new_client(port)
    tokens = {}
    heap = []  # (due time, node)
    unregistered = list(reversed(mine))
    first_registration = set(mine)
    latencies, max_late = [], 0.0
    register_turn = False  # alternate with due heartbeats, so that registration always progresses
    while not flags[0]:
        now = time.monotonic()
        heartbeat_due = heap and heap[0][0] <= now
        if heartbeat_due and unregistered:
            register_turn = not register_turn
        if heartbeat_due and not (unregistered and register_turn):
            due, i = heapq.heappop(heap)
            late = now - due
            t0 = time.monotonic()
            try:
                seqs[i] += 1
                status, _ = client.request("POST", "/api/v1/agent/heartbeat", beat % seqs[i], tokens[i],
                                           {"X-Corral-Node": names[i]})
            except OSError:
                status = None
            dt = time.monotonic() - t0
            if status == 200:
                counters[base + C_HEARTBEATS] += 1
                if flags[1]:
                    latencies.append(dt)
                    max_late = max(max_late, late)
                    if late > 1.0:
                        counters[base + C_LATE] += 1
                heapq.heappush(heap, (due + interval, i))
            elif status in (401, 404):  # declared lost: register again
                counters[base + C_REREGISTER] += 1
                unregistered.append(i)
            else:
                counters[base + C_ERRORS] += 1
                heapq.heappush(heap, (due + interval, i))
        elif unregistered:
            i = unregistered.pop()
            try:
                status, body = client.request("POST", "/api/v1/agent/register",
                                              registration_body(names[i]), join_token)
            except OSError:
                status, body = None, None
            if status == 200:
                tokens[i] = body["node_token"]
                if i in first_registration:
                    first_registration.discard(i)
                    counters[base + C_REGISTERED] += 1
                # The first heartbeat at a random phase spreads the load evenly over an interval.
                heapq.heappush(heap, (time.monotonic() + random.uniform(0, interval), i))
            else:
                counters[base + C_ERRORS] += 1
                unregistered.insert(0, i)
                time.sleep(0.01)
        else:
            time.sleep(min(max(heap[0][0] - now, 0), 0.05) if heap else 0.05)
    out.put({"worker": w, "latencies": latencies, "max_late": max_late})
    client.close()


def schedule_probe(server, count, poll_s, deadline=None):
    """Submits `count` one-GPU jobs one by one; each is timed from just before its POST until
    GET /api/v1/jobs/ID shows a state other than pending. Returns latencies in seconds."""
    client = new_client(server.port, server.admin_token)
    spec = json.dumps({"command": ["true"], "resources": {"gpus": 1}}).encode()
    latencies = []
    for _ in range(count):
        if deadline is not None and time.monotonic() > deadline:
            break
        t0 = time.monotonic()
        status, body = client.request("POST", "/api/v1/jobs", spec)
        if status != 201:
            raise RuntimeError(f"submit failed: {status} {body!r}")
        job = body["id"]
        give_up = t0 + 120
        while True:
            status, view = client.request("GET", f"/api/v1/jobs/{job}")
            if status == 200 and view["state"] != "pending":
                latencies.append(time.monotonic() - t0)
                break
            if time.monotonic() > give_up:
                raise RuntimeError(f"job {job} still pending after 120 s")
            time.sleep(poll_s)
    client.close()
    return latencies


def heartbeat_load(server, args):
    workers, nodes, interval = args.hb_workers, args.nodes, args.hb_interval
    flags = MP.RawArray("b", 2)
    counters = MP.RawArray("q", workers * NC)
    out = MP.Queue()
    total = lambda c: sum(counters[w * NC + c] for w in range(workers))  # noqa: E731
    procs = [start_worker(_heartbeat_worker, (w, workers, nodes, server.port, server.join_token,
                                              interval, flags, counters, out))
             for w in range(workers)]
    t_reg = time.monotonic()
    last_print, last_hb = t_reg, 0
    register_s = None
    while total(C_REGISTERED) < nodes:
        if not server.alive():
            raise RuntimeError("corral server died: " + server.log_tail())
        if time.monotonic() - t_reg > args.register_timeout:
            # Report what the server sustains anyway: measure with the nodes registered so far
            # (the workers go on registering the others, and re-registering lost ones).
            log(f"  only {total(C_REGISTERED):,} of {nodes:,} nodes registered after "
                f"{args.register_timeout:.0f} s; measuring anyway")
            break
        if time.monotonic() - last_print > 10:
            hb = total(C_HEARTBEATS)
            log(f"  registered {total(C_REGISTERED):,} of {nodes:,} nodes, "
                f"{(hb - last_hb) / (time.monotonic() - last_print):,.0f} heartbeats/s, "
                f"{total(C_REREGISTER):,} re-registrations")
            last_print, last_hb = time.monotonic(), hb
        time.sleep(0.1)
    else:
        register_s = time.monotonic() - t_reg
        log(f"  {nodes:,} nodes registered in {register_s:.1f} s; warming up {interval:.0f} s")
        time.sleep(interval)  # every node is now on its steady cadence
    registered_at_window = total(C_REGISTERED)

    worker_pids = [p.pid for p in procs]
    hb0, late0 = total(C_HEARTBEATS), total(C_LATE)
    err0, rereg0 = total(C_ERRORS), total(C_REREGISTER)
    cpu0, wcpu0, mcpu0 = server.cpu_seconds(), cpu_of(worker_pids), machine_cpu()
    flags[1] = 1
    t0 = time.monotonic()
    log(f"  window of {args.hb_window:.0f} s with the scheduling probe ({args.sched_jobs} jobs)")
    loaded = schedule_probe(server, args.sched_jobs, args.poll_ms / 1e3)
    remaining = args.hb_window - (time.monotonic() - t0)
    if remaining > 0:
        time.sleep(remaining)
    window = time.monotonic() - t0
    cpu = server.cpu_seconds() - cpu0
    wcpu = cpu_of(worker_pids) - wcpu0
    mcpu = machine_busy_pct(mcpu0, machine_cpu())
    hb = total(C_HEARTBEATS) - hb0
    late = total(C_LATE) - late0
    errors, rereg = total(C_ERRORS) - err0, total(C_REREGISTER) - rereg0
    rss, hwm = server.rss_mib(), server.hwm_mib()
    flags[1] = 0
    flags[0] = 1  # stop the heartbeats
    t_stop = time.monotonic()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(10)
        _workers.remove(p)
    hb_lat = [x for r in results for x in r["latencies"]]
    max_late = max(r["max_late"] for r in results)
    # Without load: the nodes heartbeated less than an interval ago and are lost only after the
    # node timeout (30 s), so stop probing 20 s after the heartbeats stopped.
    log(f"  probe without heartbeat load ({args.sched_jobs} jobs)")
    cpu_idle0 = server.cpu_seconds()
    t_idle = time.monotonic()
    unloaded = schedule_probe(server, args.sched_jobs, args.poll_ms / 1e3,
                              deadline=t_stop + 20)
    idle_window = time.monotonic() - t_idle
    idle_cpu = server.cpu_seconds() - cpu_idle0
    return {
        "nodes": nodes,
        "heartbeat_interval_s": interval,
        "heartbeat_workers": workers,
        "register_s": register_s,
        "registered_at_window": registered_at_window,
        "target_heartbeats_per_s": nodes / interval,
        "window_s": window,
        "heartbeats": hb,
        "heartbeats_per_s": hb / window,
        "heartbeats_late_over_1s": late,
        "heartbeat_max_late_s": max_late,
        "heartbeat_errors": errors,
        "reregistrations": rereg,
        "heartbeat_rtt_p50_ms": percentile(hb_lat, 50) * 1e3 if hb_lat else None,
        "heartbeat_rtt_p99_ms": percentile(hb_lat, 99) * 1e3 if hb_lat else None,
        "server_cpu_pct": 100.0 * cpu / window,
        "client_cpu_pct": 100.0 * wcpu / window,
        "machine_busy_pct": mcpu,
        "server_rss_mib": rss,
        "server_peak_rss_mib": hwm,
        "sched_loaded_n": len(loaded),
        "sched_loaded_p50_ms": percentile(loaded, 50) * 1e3 if loaded else None,
        "sched_loaded_p99_ms": percentile(loaded, 99) * 1e3 if loaded else None,
        "sched_unloaded_n": len(unloaded),
        "sched_unloaded_p50_ms": percentile(unloaded, 50) * 1e3 if unloaded else None,
        "sched_unloaded_p99_ms": percentile(unloaded, 99) * 1e3 if unloaded else None,
        # The server's CPU while the no-heartbeat probe alone drives it (submissions, scheduling
        # passes, polling); over a short probe this is coarse (10 ms ticks).
        "server_cpu_pct_probe_only": 100.0 * idle_cpu / idle_window if idle_window else None,
    }


# --- output -----------------------------------------------------------------------------------


def verdict(ok):
    return "met" if ok else "NOT met"


def print_results(res, args):
    print("\n=== corral control-plane benchmark ===")
    print(f"store: {res['store']}   machine: {res['machine']}   client quick ACKs: "
          f"{'on (--quickack)' if args.quickack else 'off'}")
    if "submit" in res:
        s = res["submit"]
        table(f"1. Durable submission ({s['clients']} client processes x {args.jobs_per_client:,} "
              "jobs, keep-alive)", [
                  ("jobs acknowledged (201)", f"{s['jobs_acknowledged']:,}/{s['jobs_requested']:,}",
                   f"errors: {s['errors']}"),
                  ("wall time", fmt(s["wall_s"], 2, " s"), ""),
                  ("throughput", fmt(s["jobs_per_s"], 0, " jobs/s"),
                   f">= 2,000 jobs/s: {verdict((s['jobs_per_s'] or 0) >= 2000)}"),
                  ("request latency p50", fmt(s["latency_p50_ms"], 2, " ms"), ""),
                  ("request latency p99", fmt(s["latency_p99_ms"], 2, " ms"), ""),
                  ("server CPU (of one core)", fmt(s["server_cpu_pct"], 0, " %"), ""),
                  ("client processes' CPU (of one core)", fmt(s["client_cpu_pct"], 0, " %"), ""),
                  (f"machine busy (all {os.cpu_count()} cores)",
                   fmt(s["machine_busy_pct"], 0, " %"), ""),
              ])
    if "start" in res:
        s = res["start"]
        table(f"2. Submit -> task process started ({s['jobs']} jobs in sequence, 1 fake node)", [
            ("p50", fmt(s["latency_p50_ms"], 1, " ms"),
             f"< 100 ms: {verdict(s['latency_p50_ms'] < 100)}"),
            ("p99", fmt(s["latency_p99_ms"], 1, " ms"),
             f"< 500 ms: {verdict(s['latency_p99_ms'] < 500)}"),
            ("min / max", f"{fmt(s['latency_min_ms'])} / {fmt(s['latency_max_ms'])} ms", ""),
            ("submit request p50", fmt(s["submit_rtt_p50_ms"], 2, " ms"), ""),
            ("submit -> succeeded seen p50", fmt(s["submit_to_succeeded_p50_ms"], 1, " ms"), ""),
        ])
    if "history" in res:
        h = res["history"]
        table(f"3a. History pre-load ({h['jobs_requested']:,} pending jobs)", [
            ("jobs acknowledged", f"{h['jobs_acknowledged']:,}", f"errors: {h['errors']}"),
            ("throughput", fmt(h["jobs_per_s"], 0, " jobs/s"), ""),
            ("request latency p50 / p99",
             f"{fmt(h['latency_p50_ms'], 2)} / {fmt(h['latency_p99_ms'], 2)} ms", ""),
            ("server RSS after", fmt(h["server_rss_mib"], 0, " MiB"), ""),
        ])
    if "heartbeat" in res:
        h = res["heartbeat"]
        ok_rate = h["heartbeats_per_s"] >= 0.95 * h["target_heartbeats_per_s"]
        table(f"3b. Heartbeat load ({h['nodes']:,} nodes every {h['heartbeat_interval_s']:g} s, "
              f"{h['heartbeat_workers']} client processes, {h['window_s']:.0f} s window)", [
                  ("registration of all nodes",
                   fmt(h["register_s"], 1, " s") if h["register_s"] is not None else
                   f"incomplete: {h['registered_at_window']:,} after {args.register_timeout:.0f} s",
                   ""),
                  ("heartbeats/s achieved", fmt(h["heartbeats_per_s"], 0),
                   f"{h['target_heartbeats_per_s']:,.0f}/s offered: {verdict(ok_rate)}"),
                  ("heartbeats > 1 s late / max lateness",
                   f"{h['heartbeats_late_over_1s']:,} / {h['heartbeat_max_late_s']:.2f} s", ""),
                  ("heartbeat errors / re-registrations",
                   f"{h['heartbeat_errors']} / {h['reregistrations']}", ""),
                  ("heartbeat request p50 / p99",
                   f"{fmt(h['heartbeat_rtt_p50_ms'], 2)} / {fmt(h['heartbeat_rtt_p99_ms'], 2)} ms",
                   ""),
                  ("server CPU (of one core)", fmt(h["server_cpu_pct"], 0, " %"), ""),
                  ("load generator CPU (of one core)", fmt(h["client_cpu_pct"], 0, " %"), ""),
                  (f"machine busy (all {os.cpu_count()} cores)",
                   fmt(h["machine_busy_pct"], 0, " %"), ""),
                  ("server RSS (peak)",
                   f"{fmt(h['server_rss_mib'], 0)} ({fmt(h['server_peak_rss_mib'], 0)}) MiB", ""),
                  ("submit -> scheduled p50 / p99, under load "
                   f"(n={h['sched_loaded_n']})",
                   f"{fmt(h['sched_loaded_p50_ms'])} / {fmt(h['sched_loaded_p99_ms'])} ms", ""),
                  ("submit -> scheduled p50 / p99, no heartbeats "
                   f"(n={h['sched_unloaded_n']})",
                   f"{fmt(h['sched_unloaded_p50_ms'])} / {fmt(h['sched_unloaded_p99_ms'])} ms",
                   ""),
              ])
    for part, err in res.get("errors", {}).items():
        print(f"\nFAILED {part}: {err}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corral", help="path to the corral binary (build/corral)")
    ap.add_argument("--store-url", help="store URL (default: sqlite:TMPDIR/corral.db); a "
                    "postgres:// URL must name an empty database")
    ap.add_argument("--parts", default="1,2,3", help="which parts to run (default 1,2,3)")
    ap.add_argument("--clients", type=int, default=8, help="submitter processes (default 8)")
    ap.add_argument("--jobs-per-client", type=int, default=2000, help="part 1 (default 2000)")
    ap.add_argument("--latency-jobs", type=int, default=100, help="part 2 (default 100)")
    ap.add_argument("--history", type=int, default=100000,
                    help="pending jobs pre-loaded before part 3 (default 100000; 0: none)")
    ap.add_argument("--nodes", type=int, default=10000, help="simulated nodes (default 10000)")
    ap.add_argument("--hb-interval", type=float, default=5.0, help="seconds (default 5)")
    ap.add_argument("--hb-window", type=float, default=30.0, help="seconds (default 30)")
    ap.add_argument("--hb-workers", type=int, default=6,
                    help="heartbeat client processes (default 6; the server has 8 HTTP threads "
                    "and each keep-alive connection holds one)")
    ap.add_argument("--sched-jobs", type=int, default=50, help="scheduling probe jobs (50)")
    ap.add_argument("--register-timeout", type=float, default=180.0,
                    help="seconds to wait for every node to register before measuring anyway "
                    "(default 180)")
    ap.add_argument("--poll-ms", type=float, default=5.0, help="poll interval (default 5 ms)")
    ap.add_argument("--quickack", action="store_true",
                    help="set TCP_QUICKACK on the client sockets: removes the ~40 ms Nagle/"
                    "delayed-ACK stall of keep-alive requests (see Client) to show the server's "
                    "own capacity; the default measures what plain clients get")
    ap.add_argument("--json", help="also write the results to this file as JSON")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    global QUICKACK
    QUICKACK = args.quickack

    corral = os.path.abspath(args.corral)
    if not os.access(corral, os.X_OK):
        ap.error(f"{args.corral}: not an executable")
    tmp = tempfile.mkdtemp(prefix="corral-api-bench.")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    res = {"machine": machine(), "errors": {}}
    try:
        store = args.store_url or f"sqlite:{os.path.join(tmp, 'corral.db')}"
        res["store"] = store.split("://")[0] if "://" in store else "sqlite"
        data_dir = os.path.join(tmp, "server")
        os.makedirs(data_dir)
        server = Server(corral, data_dir, store)
        log(f"corral server (pid {server.pid}) on {server.url}, store {res['store']}, dir {tmp}")

        def run(name, fn):
            if not server.alive():
                res["errors"][name] = "the server is not running: " + server.log_tail()
                return
            try:
                res[name] = fn()
            except Exception as e:  # report and go on with the next part
                res["errors"][name] = f"{type(e).__name__}: {e}"
                log(f"{name} failed: {e}")

        if "2" in parts:
            log(f"part 2: submit -> started, {args.latency_jobs} jobs")
            run("start", lambda: start_latency(server, corral, tmp, args.latency_jobs,
                                               args.poll_ms / 1e3))
        if "1" in parts:
            log(f"part 1: {args.clients} x {args.jobs_per_client:,} submissions")
            run("submit", lambda: submit_concurrently(server, args.clients, args.jobs_per_client))
        if "3" in parts:
            if args.history > 0:
                log(f"part 3: pre-loading {args.history:,} pending jobs")
                per = max(1, args.history // args.clients)
                # Set-up, not a measurement: quick ACKs make it several times faster.
                run("history", lambda: submit_concurrently(server, args.clients, per,
                                                           quickack=True))
            log(f"part 3: {args.nodes:,} nodes heartbeating every {args.hb_interval:g} s")
            run("heartbeat", lambda: heartbeat_load(server, args))
        if not server.alive():
            res["errors"]["server"] = f"exited with {server.proc.returncode}: {server.log_tail()}"
    finally:
        cleanup()
        if args.keep:
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print_results(res, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)
    return 1 if res["errors"] else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        cleanup()
        sys.exit(130)
