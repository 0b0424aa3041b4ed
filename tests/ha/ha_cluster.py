"""Two or more `corral server` on one PostgreSQL, an agent with fake GPUs, and a front proxy
(docs/control-plane.md, "Several servers on one PostgreSQL"): what tests/ha/failover_test.py and
bench/failover_bench.py start. Plain HTTP from Python: the clients' URL lists are another part's.

The agent reaches the servers through the proxy, which sends each new connection to the server
that leads (it asks every server's GET /healthz every 20 ms) and cuts the connections of a server
that stopped leading, as a load balancer with a health check would.

Needs CORRAL_TEST_POSTGRES_URL (scripts/with_postgres.sh sets it).
"""
import hashlib
import hmac
import json
import os
import pwd
import select
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

PSQL = os.path.join(os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"), "psql")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout=30.0, interval=0.02):
    """Polls `predicate` until it returns a true value or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def request(url, method="GET", path="/", body=None, token=None, timeout=5, headers=None):
    """(status, headers, parsed JSON body or text); status 0 when the connection failed."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + path, data=data, method=method, headers=headers or {})
    if token:
        req.add_header("Authorization", "Bearer " + token)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, headers, text = r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        status, headers, text = e.code, dict(e.headers), e.read()
    except (OSError, urllib.error.URLError):
        return 0, {}, None
    try:
        return status, headers, json.loads(text or b"null")
    except ValueError:
        return status, headers, text


class Server:
    def __init__(self, cluster, name):
        self.cluster = cluster
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.session_port = free_port()
        self.session_url = f"http://127.0.0.1:{self.session_port}"
        self.data = os.path.join(cluster.root, name)
        self.log = os.path.join(cluster.root, name + ".log")
        self.proc = None

    def start(self):
        os.makedirs(self.data, exist_ok=True)
        self.proc = subprocess.Popen(
            [self.cluster.corral, "server", "--listen", f"127.0.0.1:{self.port}",
             "--session-listen", f"127.0.0.1:{self.session_port}", "--store", self.cluster.store,
             "--data-dir", self.data, "--session-key-file", self.cluster.session_key,
             "--node-timeout", "30", *self.cluster.server_args],
            stdout=open(self.log, "a"), stderr=subprocess.STDOUT)

    def health(self):
        """(role, leader URL) from /healthz; (None, None) when it does not answer."""
        status, _, body = request(self.url, path="/healthz", timeout=1)
        if status != 200 or not isinstance(body, dict):
            return None, None
        return body.get("role"), body.get("leader")

    def role(self):
        return self.health()[0]

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        self.proc.send_signal(sig)

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


class Proxy:
    """A TCP proxy to whichever server leads (see the module's docstring)."""

    def __init__(self, servers):
        self.servers = servers
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.leader = None
        self.lock = threading.Lock()
        self.pipes = []  # (server, client socket, backend socket)
        self.stopping = False
        self.listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self.accept, daemon=True).start()
        threading.Thread(target=self.watch, daemon=True).start()

    def watch(self):
        while not self.stopping:
            leader = next((s for s in self.servers if s.alive() and s.role() == "leader"), None)
            with self.lock:
                if leader is not self.leader:
                    self.leader = leader
                    for server, a, b in self.pipes:
                        if server is not leader:
                            for sock in (a, b):
                                try:
                                    sock.shutdown(socket.SHUT_RDWR)
                                except OSError:
                                    pass
            time.sleep(0.02)

    def accept(self):
        while not self.stopping:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self.pipe, args=(client,), daemon=True).start()

    def pipe(self, client):
        with self.lock:
            server = self.leader
        if server is None:
            client.close()
            return
        try:
            backend = socket.create_connection(("127.0.0.1", server.port), timeout=2)
        except OSError:
            client.close()
            return
        backend.settimeout(None)
        entry = (server, client, backend)
        with self.lock:
            self.pipes.append(entry)
        try:
            socks = [client, backend]
            while True:
                ready, _, _ = select.select(socks, [], [], 1)
                if self.stopping:
                    return
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    (backend if s is client else client).sendall(data)
        except OSError:
            return
        finally:
            with self.lock:
                self.pipes.remove(entry)
            client.close()
            backend.close()

    def stop(self):
        self.stopping = True
        self.listener.close()


class HaCluster:
    def __init__(self, corral, root, servers=2, server_args=()):
        self.corral = os.path.abspath(corral)
        self.root = root
        os.makedirs(root, exist_ok=True)
        self.store = os.environ["CORRAL_TEST_POSTGRES_URL"]
        self.server_args = list(server_args)
        self.session_key = os.path.join(root, "session.key")
        with open(self.session_key, "w") as f:
            f.write(os.urandom(32).hex() + "\n")
        os.chmod(self.session_key, 0o600)
        self.servers = [Server(self, f"server-{chr(ord('a') + i)}") for i in range(servers)]
        self.agent = None
        # The first server leads: it bootstraps the store (admin token, join token).
        self.servers[0].start()
        assert wait_for(lambda: self.servers[0].role() == "leader", 30), self.logs()
        for s in self.servers[1:]:
            s.start()
            # A follower answers /healthz before it has read the lease: ready once it names the
            # leader (until then it answers the API "no leader yet" instead of forwarding).
            assert wait_for(lambda: s.health() == ("follower", self.servers[0].url), 30), \
                self.logs()
        first = self.servers[0].data
        self.token = open(os.path.join(first, "admin.token")).read().strip()
        self.join_token_file = os.path.join(first, "join.token")
        self.proxy = Proxy(self.servers)

    def logs(self):
        out = ""
        for s in self.servers:
            if os.path.exists(s.log):
                out += f"--- {s.name}\n" + open(s.log).read()[-3000:]
        return out

    def leader(self):
        return next((s for s in self.servers if s.alive() and s.role() == "leader"), None)

    def server_list(self):
        """Every server's URL, comma-separated, as CORRAL_SERVER and `corral agent --server`
        take them."""
        return ",".join(s.url for s in self.servers)

    def start_agent(self, name="node-a", gpus="4xA100-80GB", server=None):
        """An agent joining through `server` (default: the front proxy)."""
        work = os.path.join(self.root, "agent-" + name)
        os.makedirs(work, exist_ok=True)
        self.agent = subprocess.Popen(
            [self.corral, "agent", "--server", server or self.proxy.url, "--join-token-file",
             self.join_token_file, "--name", name, "--fake-gpus", gpus, "--work-dir", work,
             "--task-user", pwd.getpwuid(os.getuid()).pw_name],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.root, "agent.log"), "a"))

    def api(self, url, method, path, body=None, timeout=5):
        status, _, parsed = request(url, method, path, body, self.token, timeout)
        return status, parsed

    def submit_anywhere(self, spec, deadline_s=30):
        """Tries every server in turn (each round after a wait, 100 ms doubling to 1 s, as
        clients do), retrying only where the submission certainly reached no leader (refused,
        or 503): (job id, seconds taken). A 502 (a follower's forward that the leader's death
        cut short: it may have been carried out) ends it unacknowledged: (None, seconds)."""
        start = time.monotonic()
        backoff = 0.0
        while time.monotonic() - start < deadline_s:
            for s in self.servers:
                status, _, body = request(s.url, "POST", "/api/v1/jobs", spec, self.token, 10)
                if status == 201:
                    return body["id"], time.monotonic() - start
                if status == 502:
                    return None, time.monotonic() - start
                assert status in (0, 503), (s.name, status, body)
            time.sleep(backoff)
            backoff = min(1.0, max(0.1, backoff * 2))
        return None, time.monotonic() - start

    def peer_header(self, address, method, target, at=None):
        """Corral-Forwarded-For as a server of the cluster signs it (peer_signature.h): the test
        holds the cluster's session key, so it can act as a peer."""
        session_key = open(self.session_key).readline().rstrip("\n")
        key = hmac.new(session_key.encode(), b"corral peer v1", hashlib.sha256).hexdigest()
        t = int(at if at is not None else time.time())
        mac = hmac.new(key.encode(), f"{address}\n{address}\n{t}\n{method}\n{target}".encode(),
                       hashlib.sha256).hexdigest()
        return f"{address} {address} {t} {mac}"

    def psql(self, sql):
        out = subprocess.run([PSQL, self.store, "-Atc", sql], capture_output=True, text=True,
                             timeout=30)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    def stop(self):
        leader = self.leader()
        if leader is not None:
            # Tasks outlive a stopped agent by design: cancel what is unfinished first.
            status, jobs = self.api(leader.url, "GET", "/api/v1/jobs?all=1")
            if status == 200:
                for j in jobs:
                    if j.get("state") in ("pending", "starting", "running"):
                        self.api(leader.url, "POST", f"/api/v1/jobs/{j['id']}/cancel", {})
                wait_for(lambda: all(
                    j.get("state") not in ("pending", "starting", "running")
                    for j in (self.api(leader.url, "GET", "/api/v1/jobs?all=1")[1] or [])), 15)
        self.proxy.stop()
        for p in [self.agent] + [s.proc for s in self.servers]:
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
