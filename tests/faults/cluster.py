"""The fault harness's cluster (docs/reliability.md): its own PostgreSQL (pg_ctl) or SQLite, a
list of `corral server` processes (one today; the leader-election branch adds more, each with its
URL), and agents with fake GPUs, each in its own network namespace when root and `ip netns` are
available (so that partitions are real), else on loopback.

Every process is real; every wait polls a condition with a deadline.
"""
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

PG_BIN = os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin")


def wait_for(predicate, timeout, interval=0.05):
    """Polls `predicate` until it returns a true value or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def free_port(host="127.0.0.1"):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def sh(*args, check=True):
    r = subprocess.run(args, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(" ".join(args) + ": " + r.stderr.strip())
    return r


def is_root():
    return os.geteuid() == 0


def netns_missing():
    """Why agents cannot have network namespaces here (None when they can)."""
    if not is_root():
        return "not root"
    if shutil.which("ip") is None:
        return "iproute2 ('ip') is not installed"
    if shutil.which("iptables") is None:
        return "iptables is not installed"
    probe = "crlprobe%d" % (os.getpid() % 100000)
    if sh("ip", "netns", "add", probe, check=False).returncode != 0:
        return "'ip netns add' fails"
    sh("ip", "netns", "del", probe, check=False)
    return None


class Postgres:
    """A throwaway PostgreSQL 15 (as scripts/with_postgres.sh starts it), restartable."""

    def __init__(self, root):
        self.dir = os.path.join(root, "pg")
        self.data = os.path.join(self.dir, "data")
        self.log = os.path.join(self.dir, "server.log")
        self.as_pg = ["runuser", "-u", "postgres", "--"] if is_root() else []
        self.port = None
        self.running = False

    def ctl(self, *args):
        return sh(*self.as_pg, os.path.join(PG_BIN, "pg_ctl"), "-D", self.data, *args)

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        if self.as_pg:
            shutil.chown(self.dir, "postgres")
        if not os.path.exists(self.data):
            sh(*self.as_pg, os.path.join(PG_BIN, "initdb"), "-D", self.data, "-U", "postgres",
               "-A", "trust", "-E", "UTF8", "--no-locale")
            self.port = free_port()
        self.ctl("-l", self.log, "-w", "-t", "30", "-o",
                 f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.dir}", "start")
        self.running = True
        if not getattr(self, "created", False):
            sh(os.path.join(PG_BIN, "createdb"), "-h", "127.0.0.1", "-p", str(self.port),
               "-U", "postgres", "corral")
            self.created = True

    def stop(self, mode="fast"):
        if self.running:
            self.ctl("-m", mode, "-w", "stop")
            self.running = False

    @property
    def url(self):
        return f"postgres://postgres@127.0.0.1:{self.port}/corral"

    @staticmethod
    def missing():
        if not os.path.exists(os.path.join(PG_BIN, "initdb")):
            return f"{PG_BIN}/initdb not found (install PostgreSQL 15: scripts/bootstrap.sh)"
        if is_root():
            try:
                pwd.getpwnam("postgres")
            except KeyError:
                return "no postgres user to run PostgreSQL as"
        return None


class Server:
    """One `corral server`; restartable with the same flags. `session_key`: the file every
    server of several shares (None: the server makes its own)."""

    def __init__(self, corral, name, host, data, store, node_timeout, kill_grace, log,
                 fence_after, session_key=None):
        self.corral, self.name, self.host, self.data, self.store = corral, name, host, data, store
        self.fence_after, self.session_key = fence_after, session_key
        self.port = free_port(host)
        self.session_port = free_port(host)
        self.url = f"http://{host}:{self.port}"
        self.node_timeout, self.kill_grace, self.log = node_timeout, kill_grace, log
        self.proc = None

    def start(self, timeout=30):
        self.proc = subprocess.Popen(
            [self.corral, "server", "--listen", f"{self.host}:{self.port}", "--store", self.store,
             "--session-listen", f"{self.host}:{self.session_port}", "--data-dir", self.data,
             "--node-timeout", str(self.node_timeout), "--kill-grace", str(self.kill_grace),
             "--fence-after", str(self.fence_after),
             *(["--session-key-file", self.session_key] if self.session_key else [])],
            stdout=open(self.log, "a"), stderr=subprocess.STDOUT)
        # Up once it answered and is still running. Not a second /healthz: a server that takes
        # the lease swaps its follower's HTTP server for the leader's, and a request at that
        # moment can go unanswered (a CI run failed so, the server leading and well).
        return wait_for(lambda: self.healthy() or self.proc.poll() is not None, timeout) \
            and self.alive()

    def role(self):
        """"leader", "follower" (GET /healthz), or None when it does not answer."""
        try:
            with urllib.request.urlopen(self.url + "/healthz", timeout=1) as r:
                return json.loads(r.read()).get("role") if r.status == 200 else None
        except Exception:
            return None

    def healthy(self):
        return self.role() is not None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        self.proc.send_signal(sig)
        if sig == signal.SIGKILL:
            self.proc.wait()

    def stop(self):
        if self.alive():
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)


class Network:
    """A bridge (the servers' side, SUBNET.1) and one namespace per agent (SUBNET.2, .3, ...),
    joined by veth pairs; iptables rules inside a namespace cut it off from the servers."""

    def __init__(self, subnet=None):
        tag = str(os.getpid() % 100000)
        # 10.215.N.0/24, N from the pid: two harnesses on one machine do not share a subnet.
        subnet = subnet or f"10.215.{os.getpid() % 250}"
        self.subnet, self.tag = subnet, tag
        self.bridge = "crlfb" + tag
        self.host = subnet + ".1"
        self.namespaces = []  # (namespace, veth, address)

    def up(self, count):
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "addr", "add", self.host + "/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        for i in range(count):
            ns, veth = f"crlf{i}-{self.tag}", f"crlf{i}x{self.tag}"
            address = f"{self.subnet}.{i + 2}"
            self.namespaces.append((ns, veth, address))
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            sh("ip", "link", "set", veth, "master", self.bridge, "up")
            sh("ip", "netns", "exec", ns, "ip", "addr", "add", address + "/24", "dev", "eth0")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "up")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")

    def rules(self, index, direction):
        """The iptables rules (chain and match) that drop `direction` ("both", "out": agent to
        servers, "in": servers to agent) of agent `index`'s traffic with the servers."""
        out = ("OUTPUT", "-d", self.host, "-j", "DROP")
        into = ("INPUT", "-s", self.host, "-j", "DROP")
        return {"both": [out, into], "out": [out], "in": [into]}[direction]

    def cut(self, index, direction):
        ns = self.namespaces[index][0]
        for rule in self.rules(index, direction):
            sh("ip", "netns", "exec", ns, "iptables", "-I", *rule)

    def heal(self, index, direction):
        ns = self.namespaces[index][0]
        for rule in self.rules(index, direction):
            sh("ip", "netns", "exec", ns, "iptables", "-D", *rule, check=False)

    def down(self):
        for ns, veth, _ in self.namespaces:
            sh("ip", "netns", "del", ns, check=False)
            sh("ip", "link", "del", veth, check=False)
        sh("ip", "link", "del", self.bridge, check=False)


class Agent:
    def __init__(self, cluster, index, gpus):
        self.cluster, self.index, self.gpus = cluster, index, gpus
        self.name = f"a{index}"
        self.work = os.path.join(cluster.root, "agent-" + self.name)
        os.makedirs(self.work, exist_ok=True)
        self.log = os.path.join(cluster.root, f"agent-{self.name}.log")
        self.proc = None

    def start(self):
        c = self.cluster
        prefix = ["ip", "netns", "exec", c.network.namespaces[self.index][0]] if c.network else []
        self.proc = subprocess.Popen(
            [*prefix, c.corral, "agent", "--server", c.agent_server_arg(),
             "--join-token-file", os.path.join(c.servers[0].data, "join.token"),
             "--name", self.name, "--fake-gpus", self.gpus, "--cpus", "16",
             "--memory-mib", "65536", "--metrics-interval", "0", "--work-dir", self.work,
             "--task-user", pwd.getpwuid(os.getuid()).pw_name],
            stdout=open(self.log, "a"), stderr=subprocess.STDOUT)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill9()


class Cluster:
    """`servers` corral servers on one store (SQLite: exactly one) and `agents` agents.

    store: "sqlite" or "postgres". The servers' data folders (and the SQLite file) live in
    `data_root`, which the caller may have put on a small filesystem (the disk-full fault)."""

    def __init__(self, corral, root, data_root, store, servers=1, agents=3, gpus="8xT4",
                 node_timeout=12, kill_grace=2, fence_after=4, netns=False):
        if store == "sqlite" and servers != 1:
            raise ValueError("SQLite is single-server")
        self.corral, self.root, self.data_root = corral, root, data_root
        self.network = Network() if netns else None
        self.postgres = Postgres(root) if store == "postgres" else None
        self.node_timeout = node_timeout
        self.servers, self.agents = [], []
        self.server_count, self.agent_count, self.gpus = servers, agents, gpus
        self.kill_grace, self.fence_after = kill_grace, fence_after
        self.store_kind = store

    def start(self):
        if self.network:
            self.network.up(self.agent_count)
        if self.postgres:
            self.postgres.start()
            store = self.postgres.url
        else:
            store = "sqlite:" + os.path.join(self.data_root, "corral.db")
        host = self.network.host if self.network else "127.0.0.1"
        session_key = None
        if self.server_count > 1:  # servers of one cluster share the session key
            session_key = os.path.join(self.root, "session.key")
            with open(session_key, "w") as f:
                f.write(os.urandom(32).hex() + "\n")
            os.chmod(session_key, 0o600)
        for i in range(self.server_count):
            data = os.path.join(self.data_root, f"server{i}")
            server = Server(self.corral, f"s{i}", host, data, store, self.node_timeout,
                            self.kill_grace, os.path.join(self.root, f"server{i}.log"),
                            self.fence_after, session_key)
            self.servers.append(server)
            if not server.start():
                raise RuntimeError(f"server {server.name} did not come up: see {server.log}")
            # The first server bootstraps the store (admin and join tokens): it leads first.
            want = "leader" if i == 0 else "follower"
            if not wait_for(lambda: server.role() == want, 30):
                raise RuntimeError(f"server {server.name} is not the {want}: see {server.log}")
        self.token = open(os.path.join(self.servers[0].data, "admin.token")).read().strip()
        for i in range(self.agent_count):
            agent = Agent(self, i, self.gpus)
            self.agents.append(agent)
            agent.start()
        if not self.wait_nodes_ready(30):
            raise RuntimeError("agents did not all join: " + json.dumps(self.nodes()))

    def agent_server_arg(self):
        return ",".join(s.url for s in self.servers)

    def urls(self):
        return [s.url for s in self.servers]

    def api(self, method, path, body=None, timeout=10):
        """The request to the first server that answers it (a follower's 503 and a refused
        connection move on to the next URL): (status, decoded body)."""
        last = None
        for url in self.urls():
            data = json.dumps(body).encode() if body is not None else None
            req = urllib.request.Request(url + path, method=method, data=data)
            req.add_header("Authorization", "Bearer " + self.token)
            req.add_header("Content-Type", "application/json")
            try:
                with urllib.request.urlopen(req, timeout=timeout) as r:
                    return r.status, json.loads(r.read() or b"null"), dict(r.headers)
            except urllib.error.HTTPError as e:
                last = (e.code, e.read(), dict(e.headers))
                if e.code != 503:
                    return last
            except OSError as e:
                last = (0, str(e), {})
        return last

    def nodes(self):
        try:
            status, nodes, _ = self.api("GET", "/api/v1/nodes", timeout=3)
        except Exception:
            return []
        return nodes if status == 200 and isinstance(nodes, list) else []

    def ready_nodes(self):
        return sorted(n["name"] for n in self.nodes() if n.get("state") == "ready")

    def wait_nodes_ready(self, timeout, heard_since=None):
        """Waits until every agent's node is ready and, given `heard_since` (wall-clock
        seconds), has been heard from three times since: its last heartbeat time (whole
        seconds, one a second at most) took three values after it. Fewer prove less: a server
        that starts shows every stored node as just heard from; a registration sets it before
        the agent has its answer; a heartbeat, before it is answered. The third value is a
        heartbeat sent after an answered one: the agent is whole again (its retry backoff, which
        grows to 5 s, is reset only by an answered heartbeat)."""
        want = sorted(a.name for a in self.agents)
        heard = {name: set() for name in want}

        def ready():
            nodes = {n["name"]: n for n in self.nodes()}
            for name in want:
                beat = nodes.get(name, {}).get("last_heartbeat", 0)
                if heard_since is not None and beat > int(heard_since):
                    heard[name].add(beat)
            return all(nodes.get(name, {}).get("state") == "ready" and
                       (heard_since is None or len(heard[name]) >= 3) for name in want)
        return wait_for(ready, timeout, 0.1)

    def leader(self):
        """The server that leads now (None while none does)."""
        for s in self.servers:
            if s.alive() and s.role() == "leader":
                return s
        return None

    def all_jobs(self):
        """Every job (all users), following the pages: {id: summary}, or None when the API did
        not answer."""
        jobs, cursor = {}, None
        while True:
            path = "/api/v1/jobs?all=1&limit=1000" + (f"&cursor={cursor}" if cursor else "")
            try:
                status, page, headers = self.api("GET", path, timeout=30)
            except Exception:
                return None
            if status != 200:
                return None
            for j in page:
                jobs[j["id"]] = j
            cursor = headers.get("X-Corral-Next-Cursor")
            if not cursor:
                return jobs

    def stop(self):
        for a in self.agents:
            a.stop()
        for s in self.servers:
            s.stop()
        if self.postgres:
            try:
                self.postgres.stop("immediate")
            except Exception:
                pass
        if self.network:
            self.network.down()
