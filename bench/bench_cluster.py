"""What the control-plane benchmarks share (bench/api_bench.py, bench/throughput_bench.py): a
real `corral server` and `corral agent` started as processes on loopback, a keep-alive JSON
HTTP client, process bookkeeping (every process started here is stopped by stop_all(), also on
failure) and small output helpers. Python 3 standard library only.
"""

import http.client
import json
import os
import pwd
import signal
import socket
import subprocess
import sys
import time

HOST = "127.0.0.1"
CLK_TCK = os.sysconf("SC_CLK_TCK")

# --- small helpers ----------------------------------------------------------------------------


def percentile(values, p):
    """The p-th percentile (0..100) of values, linearly interpolated; None when empty."""
    if not values:
        return None
    v = sorted(values)
    if len(v) == 1:
        return v[0]
    k = (len(v) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def fmt(x, digits=1, unit=""):
    if x is None:
        return "n/a"
    return f"{x:,.{digits}f}{unit}"


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def proc_cpu_seconds(pid):
    """utime + stime of a process, in seconds (from /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # After the comm field: state is fields[0], utime is field 14 overall -> index 11 here.
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return None


def machine_cpu():
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)  # idle + iowait
    total = sum(v[:8])
    return total - idle, total


def machine_busy_pct(before, after):
    busy, total = after[0] - before[0], after[1] - before[1]
    return 100.0 * busy / total if total else None


def wait_for(what, predicate, timeout, interval=0.05):
    """predicate()'s first true value, polled every `interval` s; RuntimeError after timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(interval)
    raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def table(title, rows):
    """Prints rows of (metric, value, note) under a title."""
    print(f"\n{title}")
    w = max(len(r[0]) for r in rows)
    w2 = max(len(r[1]) for r in rows)
    print(f"  {'metric'.ljust(w)}  {'value'.rjust(w2)}  target")
    print(f"  {'-' * w}  {'-' * w2}  ------")
    for name, value, target in rows:
        print(f"  {name.ljust(w)}  {value.rjust(w2)}  {target}")


def machine():
    """This machine in words: cores, CPU model, RAM."""
    model, cores = "?", os.cpu_count()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    with open("/proc/meminfo") as f:
        total = int(f.readline().split()[1]) / 1024 / 1024
    return f"{cores} cores ({model}), {total:.0f} GiB RAM"


# --- HTTP client ------------------------------------------------------------------------------


class NoDelayConnection(http.client.HTTPConnection):
    """http.client sends a request's headers and body in two send() calls; with Nagle's
    algorithm on, the body then waits for the server's delayed ACK of the headers (~40 ms on
    Linux) on every request of a keep-alive connection after the first. Real clients (curl,
    the corral CLI) do not pay that, so the benchmark's clients must not either."""

    def connect(self):
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class Client:
    """One persistent keep-alive HTTP/1.1 connection with JSON helpers.

    With quickack, TCP_QUICKACK is set before each response is read, so that the client ACKs
    the response's first segment at once. corral's HTTP server (cpp-httplib without
    TCP_NODELAY) writes a response's headers and body in two send() calls; Nagle's algorithm
    holds the body until the headers are ACKed, and a client with delayed ACKs (the Linux
    default) ACKs ~40 ms later. Every request after the first on a keep-alive connection then
    takes >= 40 ms. Quick ACKs remove that stall on the client side, which shows what the
    server itself can do (as it would with TCP_NODELAY); plain clients see the stall."""

    def __init__(self, port, token=None, timeout=60, quickack=False):
        self.port = port
        self.token = token
        self.conn = NoDelayConnection(HOST, port, timeout=timeout)
        self.reconnects = 0
        self.quickack = quickack
        self.last_headers = None  # the last response's headers (http.client.HTTPMessage)

    def request(self, method, path, body=None, token=None, headers=None):
        """Returns (status, parsed JSON or raw bytes). Retries once when the server had
        closed an idle keep-alive connection before reading the request (nothing was done)."""
        headers = dict(headers or {}, Authorization="Bearer " + (token or self.token or ""))
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        for attempt in (0, 1):
            try:
                self.conn.request(method, path, body=data, headers=headers)
                if self.quickack:
                    self.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
                resp = self.conn.getresponse()
                raw = resp.read()
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.conn.close()
                self.reconnects += 1
                if attempt:
                    raise
        self.last_headers = resp.headers
        try:
            return resp.status, json.loads(raw) if raw else None
        except ValueError:
            return resp.status, raw

    def close(self):
        self.conn.close()


# --- processes we start -----------------------------------------------------------------------

_children = []  # subprocess.Popen objects, each the leader of its own session


def stop(p, grace=5.0):
    """Stops a process spawn() started (SIGTERM to its session, SIGKILL after `grace` s) and
    forgets it."""
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            p.wait(grace)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
    if p in _children:
        _children.remove(p)


def stop_all():
    """Stops every process spawn() started and has not stopped yet, newest first."""
    for p in reversed(list(_children)):
        stop(p)


def spawn(argv, log_path, env=None):
    """Starts argv in a session of its own, stdout and stderr appended to log_path."""
    log_file = open(log_path, "ab")
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log_file,
                         stderr=subprocess.STDOUT, start_new_session=True, env=env)
    log_file.close()
    _children.append(p)
    return p


def log_tail(path, n=20):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


class Server:
    """`corral server` on a free loopback port with its store at store_url and its data dir
    data_dir (which must exist); ready (GET /healthz) when the constructor returns. The store
    must be empty: the admin token is only written on the first start."""

    def __init__(self, corral, data_dir, store_url, node_timeout=None, extra_args=()):
        self.dir = data_dir
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        # The session gateway's port too: its default, the API's port + 1, may be taken.
        argv = [corral, "server", "--listen", f"{HOST}:{self.port}", "--session-listen",
                f"{HOST}:{free_port()}", "--store", store_url, "--data-dir", data_dir]
        if node_timeout:
            # The fence timings must fit in it (corral server refuses others).
            argv += ["--node-timeout", str(node_timeout), "--fence-after", "3", "--kill-grace", "1"]
        argv += list(extra_args)
        self.log = os.path.join(data_dir, "server.log")
        self.proc = spawn(argv, self.log)
        self.pid = self.proc.pid

        def healthy():
            if self.proc.poll() is not None:
                raise RuntimeError(f"corral server exited with {self.proc.returncode}: "
                                   + self.log_tail())
            try:
                c = http.client.HTTPConnection(HOST, self.port, timeout=2)
                c.request("GET", "/healthz")
                ok = c.getresponse().status == 200
                c.close()
                return ok
            except OSError:
                return False

        wait_for("GET /healthz", healthy, 60)
        admin = os.path.join(data_dir, "admin.token")

        def admin_token():
            # Written once the server leads, which on PostgreSQL may come after /healthz answers.
            try:
                with open(admin) as f:
                    return f.read().strip()
            except FileNotFoundError:
                return None

        try:
            self.admin_token = wait_for("admin.token", admin_token, 15)
        except RuntimeError:
            raise RuntimeError("no admin.token was written: the store was not empty (use a "
                               "fresh database; the admin token is only created on first start)")
        self.join_token_file = os.path.join(data_dir, "join.token")
        self.join_token = open(self.join_token_file).read().strip()

    def alive(self):
        return self.proc.poll() is None

    def log_tail(self, n=20):
        return log_tail(self.log, n)

    def cpu_seconds(self):
        return proc_cpu_seconds(self.pid)

    def rss_mib(self):
        return proc_status_kib(self.pid, "VmRSS") / 1024.0

    def hwm_mib(self):
        return proc_status_kib(self.pid, "VmHWM") / 1024.0

    def stop(self):
        stop(self.proc)


def start_agent(server, corral, work_dir, log_path, name="n1", fake_gpus="8xA100-80GB"):
    """`corral agent --fake-gpus` joined to server, its tasks run as this user; returns its
    Popen once GET /api/v1/nodes shows it ready."""
    os.makedirs(work_dir, exist_ok=True)
    agent = spawn([corral, "agent", "--server", server.url,
                   "--join-token-file", server.join_token_file,
                   "--task-user", pwd.getpwuid(os.getuid()).pw_name,
                   "--name", name, "--fake-gpus", fake_gpus, "--work-dir", work_dir], log_path)
    admin = Client(server.port, server.admin_token)

    def node_ready():
        if agent.poll() is not None:
            raise RuntimeError(f"corral agent exited with {agent.returncode}: "
                               + log_tail(log_path))
        status, nodes = admin.request("GET", "/api/v1/nodes")
        return status == 200 and any(n["name"] == name and n["state"] == "ready" for n in nodes)

    try:
        wait_for(f"node {name} to be ready", node_ready, 60)
    finally:
        admin.close()
    return agent
