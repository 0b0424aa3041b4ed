#!/usr/bin/env python3
"""End-to-end tests of the control plane with real processes on loopback.

Starts `corral server` and agents with fake GPUs, drives them through the CLI and raw HTTP, and
checks what users rely on: jobs run on exactly their GPUs, nothing is given twice, logs come
back, auth holds, and nothing acknowledged is lost when processes are SIGKILLed. Polls with
deadlines; never sleeps to wait for time to pass.

Usage: tests/e2e_test.py path/to/corral [--store-url URL] [--only TEST_NAME]
"""
import http.client
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

CORRAL = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else "build/corral"
STORE_URL = None
if "--store-url" in sys.argv:
    STORE_URL = sys.argv[sys.argv.index("--store-url") + 1]

ONLY = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None

FAILURES = []
PASSED = []


def check(name, condition, detail=""):
    (PASSED if condition else FAILURES).append(name)
    print(("ok   " if condition else "FAIL ") + name + ("" if condition else ": " + str(detail)),
          flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_cmdline(pid):
    """/proc/PID/cmdline, or b"" when the process has exited since /proc was listed."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except (FileNotFoundError, ProcessLookupError):
        return b""


def wait_for(predicate, timeout=30.0, interval=0.05):
    """Polls `predicate` until it returns a true value or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            return value
        time.sleep(interval)


class Cluster:
    def __init__(self, root, node_timeout=30, host="127.0.0.1", server_args=()):
        self.root = root
        os.makedirs(root, exist_ok=True)
        self.host = host  # the server listens here; agents and the CLI dial it
        self.port = free_port()
        self.url = f"http://{host}:{self.port}"
        self.session_port = free_port()  # the session gateway's
        self.session_url = f"http://{host}:{self.session_port}"
        self.data = os.path.join(root, "server")
        self.store = STORE_URL or "sqlite:" + os.path.join(root, "corral.db")
        self.node_timeout = node_timeout
        self.server_args = list(server_args)  # more `corral server` flags
        self.server = None
        self.agents = {}
        self.start_server()
        self.token = open(os.path.join(self.data, "admin.token")).read().strip()
        self.join_token = open(os.path.join(self.data, "join.token")).read().strip()

    def start_server(self):
        self.server = subprocess.Popen(
            [CORRAL, "server", "--listen", f"{self.host}:{self.port}", "--store", self.store,
             "--session-listen", f"{self.host}:{self.session_port}",
             "--data-dir", self.data, "--node-timeout", str(self.node_timeout),
             *self.fence_args(), *self.server_args],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.root, "server.log"), "a"))
        up = wait_for(lambda: self.healthy(), 20)
        assert up, "server did not come up: " + open(os.path.join(self.root, "server.log")).read()

    def fence_args(self):
        # Under the default node timeout, the shortest fence timings the server takes:
        # --fence-after 3 + --kill-grace 1 + the agents' request timeout 5 < --node-timeout (>= 10).
        return [] if self.node_timeout >= 30 else ["--fence-after", "3", "--kill-grace", "1"]

    def healthy(self):
        try:
            return urllib.request.urlopen(self.url + "/healthz", timeout=1).status == 200
        except Exception:
            return False

    def start_agent(self, name, gpus="8xA100-80GB", labels=(), prefix=(), extra=(), env=None,
                    user_map=None):
        """Starts an agent; `prefix` runs it under another command (e.g. `ip netns exec NS`),
        `extra` adds flags, `env` replaces its environment. Tasks run as the user running the
        test (required when that is root) or, given a `user_map` file, as their submitters."""
        work = os.path.join(self.root, "agent-" + name)
        os.makedirs(work, exist_ok=True)
        # nobody (65534), the one unprivileged user every machine has, is over the default
        # --max-task-uid: the tests admit it.
        run_as = (["--run-as-submitter", "--task-user-map", user_map, "--max-task-uid", "65534"]
                  if user_map else ["--task-user", pwd.getpwuid(os.getuid()).pw_name])
        self.agents[name] = subprocess.Popen(
            [*prefix, CORRAL, "agent", "--server", self.url, *extra,
             "--join-token-file", os.path.join(self.data, "join.token"), "--name", name,
             "--fake-gpus", gpus, "--work-dir", work, *run_as,
             *[arg for label in labels for arg in ("--label", label)]],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.root, f"agent-{name}.log"), "a"),
            env=env)

    def kill9(self, proc):
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def stop(self):
        # Tasks outlive a stopped agent by design (the next one adopts them): a test cluster's
        # unfinished jobs are cancelled first, so that none runs on after the test.
        if self.server and self.server.poll() is None and any(
                a.poll() is None for a in self.agents.values()):
            self.cancel_unfinished()
        for p in list(self.agents.values()) + [self.server]:
            if p and p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    self.kill9(p)

    def cancel_unfinished(self, timeout=15):
        def unfinished():
            try:
                status, jobs = self.api("GET", "/api/v1/jobs?all=1")
            except OSError:
                return []
            return [j["id"] for j in jobs if j.get("state") in ("pending", "starting", "running")] \
                if status == 200 and isinstance(jobs, list) else []
        for job in unfinished():
            try:
                self.api("POST", f"/api/v1/jobs/{job}/cancel", {})
            except OSError:
                pass
        wait_for(lambda: not unfinished(), timeout)

    def cli(self, *args, token=None, cwd=None):
        """Runs `corral ARGS` in `cwd` (default: the cluster's folder, which becomes the submit
        folder of the jobs it submits)."""
        env = dict(os.environ, CORRAL_SERVER=self.url, CORRAL_TOKEN=token or self.token,
                   HOME=self.root)
        return subprocess.run([CORRAL, *args], env=env, capture_output=True, text=True, timeout=60,
                              cwd=cwd or self.root)

    def api(self, method, path, body=None, token=None, raw=None):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if token != "":
            req.add_header("Authorization", "Bearer " + (token or self.token))
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            text = e.read()
            try:
                return e.code, json.loads(text)
            except Exception:
                return e.code, text

    def get_raw(self, path, token=None):
        """GET returning (status, headers, body bytes): for answers whose headers matter."""
        req = urllib.request.Request(self.url + path)
        req.add_header("Authorization", "Bearer " + (token or self.token))
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def job(self, job_id):
        return self.api("GET", f"/api/v1/jobs/{job_id}")[1]

    def wait_nodes(self, count):
        return wait_for(lambda: len([n for n in self.api("GET", "/api/v1/nodes")[1]
                                     if n["state"] == "ready"]) >= count, 20)

    def wait_state(self, job_id, states, timeout=60):
        return wait_for(lambda: self.job(job_id).get("state") in states, timeout)


class Dev:
    """`corral dev ARGS` with its data in ROOT/NAME (its log ROOT/NAME.log) on a free port, with
    the web dashboard off: `up` once healthy, `cli` runs the CLI against it (in its data folder)
    as its admin."""

    def __init__(self, root, name, *args):
        self.data = os.path.join(root, name)
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(
            [CORRAL, "dev", "--data-dir", self.data, "--listen", f"127.0.0.1:{port}",
             "--web-dir", "", *args],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(root, name + ".log"), "a"))
        self.up = bool(wait_for(self.healthy, 30))
        token = open(os.path.join(self.data, "admin.token")).read().strip() if self.up else ""
        self.env = dict(os.environ, CORRAL_SERVER=self.url, CORRAL_TOKEN=token, HOME=root)

    def healthy(self):
        try:
            return urllib.request.urlopen(self.url + "/healthz", timeout=1).status == 200
        except Exception:
            return False

    def cli(self, *args):
        return subprocess.run([CORRAL, *args], env=self.env, capture_output=True, text=True,
                              timeout=60, cwd=self.data)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def http_request(cluster, method, path, headers=None, body=None, port=None):
    """One request to the API (or `port`), no redirects followed, no cookie jar: (status,
    headers, body text)."""
    conn = http.client.HTTPConnection(cluster.host, port or cluster.port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode(errors="replace")
    finally:
        conn.close()


def http_request_pairs(cluster, path, headers, port=None):
    """GET `path`: (status, the answer's headers as (name, value) pairs, repeated ones kept)."""
    conn = http.client.HTTPConnection(cluster.host, port or cluster.port, timeout=30)
    try:
        conn.request("GET", path, headers=headers)
        r = conn.getresponse()
        r.read()
        return r.status, r.getheaders()
    finally:
        conn.close()


def submit(cluster, spec, token=None):
    status, body = cluster.api("POST", "/api/v1/jobs", spec, token=token)
    assert status == 201, (status, body)
    return body["id"]


def test_fifty_jobs_on_sixteen_gpus(root):
    c = Cluster(os.path.join(root, "fifty"))
    try:
        c.start_agent("node-a")
        c.start_agent("node-b")
        check("two agents join", c.wait_nodes(2))
        record = os.path.join(root, "fifty", "gpu-intervals.txt")
        open(record, "w").close()
        # Each task checks it sees exactly as many GPUs as it asked, and records when it held
        # which GPU on which node; the test then checks no GPU was held by two tasks at once.
        script = ('set -e; n=$(echo "$CUDA_VISIBLE_DEVICES" | tr , "\\n" | grep -c .); '
                  '[ "$n" = "$WANT" ] || { echo "want $WANT GPUs, got $CUDA_VISIBLE_DEVICES"; '
                  'exit 3; }; s=$(date +%s.%N); sleep 0.$((RANDOM % 3 + 1)); e=$(date +%s.%N); '
                  'for g in $(echo "$CUDA_VISIBLE_DEVICES" | tr , " "); do '
                  'echo "$CORRAL_NODE_NAME $g $s $e $CORRAL_JOB_ID" >> ' + record + '; done; '
                  'echo "job $CORRAL_JOB_ID done on $CUDA_VISIBLE_DEVICES"')
        mix = [1, 2, 4, 8, 1, 1, 2, 3]
        ids = []
        for i in range(50):
            want = mix[i % len(mix)]
            ids.append(submit(c, {"name": f"mix-{i}", "command": [script], "shell": True,
                                  "env": {"WANT": str(want)},
                                  "resources": {"gpus": want, "cpu_milli": 0}}))
        done = wait_for(lambda: all(c.job(i)["state"] in ("succeeded", "failed", "cancelled")
                                    for i in ids), 120, 0.2)
        states = [c.job(i)["state"] for i in ids]
        check("50 jobs with mixed GPU needs all succeed", done and set(states) == {"succeeded"},
              states)
        intervals = {}
        for line in open(record):
            node, gpu, start, end, job = line.split()
            intervals.setdefault((node, gpu), []).append((float(start), float(end), job))
        overlaps = []
        for key, spans in intervals.items():
            spans.sort()
            for (s1, e1, j1), (s2, e2, j2) in zip(spans, spans[1:]):
                if s2 < e1:
                    overlaps.append((key, j1, j2))
        check("no GPU is ever given to two tasks at once", not overlaps and intervals, overlaps)
        out = c.cli("logs", str(ids[3]))
        check("logs readable through the CLI", out.returncode == 0 and
              f"job {ids[3]} done on" in out.stdout, out.stdout + out.stderr)
        show = c.cli("job", "show", str(ids[0]))
        check("job show lists the transitions", "starting" in show.stdout and
              "succeeded" in show.stdout, show.stdout)
    finally:
        c.stop()


def test_auth_and_validation(root):
    c = Cluster(os.path.join(root, "auth"))
    try:
        status, _ = c.api("GET", "/api/v1/jobs", token="")
        check("no token -> 401", status == 401, status)
        status, _ = c.api("GET", "/api/v1/jobs", token="crl_bogus")
        check("unknown token -> 401", status == 401, status)
        for project in ("vision", "nlp"):
            c.api("POST", "/api/v1/projects", {"name": project})
        alice = c.api("POST", "/api/v1/users", {"name": "alice", "projects": ["vision"]})[1]["token"]
        bob = c.api("POST", "/api/v1/users", {"name": "bob", "projects": ["nlp"]})[1]["token"]
        job = submit(c, {"project": "vision", "command": ["true"], "resources": {"gpus": 16}},
                     token=alice)
        status, _ = c.api("GET", f"/api/v1/jobs/{job}", token=bob)
        check("a member cannot see another project's job", status == 404, status)
        status, _ = c.api("POST", f"/api/v1/jobs/{job}/cancel", {}, token=bob)
        check("a member cannot cancel another project's job", status == 404, status)
        status, body = c.api("POST", "/api/v1/jobs", {"project": "vision", "command": ["true"]},
                             token=bob)
        check("a member cannot submit to another project", status == 403, (status, body))
        listed = c.api("GET", "/api/v1/jobs?all=1", token=bob)[1]
        check("a member's list hides other projects", listed == [], listed)
        status, body = c.api("POST", "/api/v1/jobs", {"command": ["true"],
                                                      "resources": {"gpus": 2, "gpu_milli": 500}})
        check("bad spec -> 400 naming the field", status == 400 and
              "resources.gpu_milli" in body.get("detail", ""), (status, body))
        status, body = c.api("POST", "/api/v1/jobs", {"comand": ["true"]})
        check("unknown field -> 400 naming it", status == 400 and "comand" in body["detail"], body)
        status, _ = c.api("POST", "/api/v1/jobs", raw=b"{" + b" " * (2 << 20) + b"}")
        check("oversize body -> 413", status == 413, status)
        status, _ = c.api("POST", "/api/v1/users", {"name": "eve"}, token=alice)
        check("only admins create users", status == 403, status)
        status, _ = c.api("POST", "/api/v1/agent/register", {"name": "x", "inventory": {}},
                          token="crl_wrong")
        check("agents need the join token", status == 401, status)
        out = c.cli("job", "show", str(job), token=bob)
        check("CLI exit code 3 for not found", out.returncode == 3, (out.returncode, out.stderr))
        out = c.cli("jobs", token="crl_nope")
        check("CLI exit code 4 for a bad token", out.returncode == 4, (out.returncode, out.stderr))

        # Bodies: a field of the wrong type or a body that is not an object is a 400 naming it.
        for path, body, field in (("/api/v1/projects", {"name": 5}, "'name'"),
                                  ("/api/v1/users", {"name": "eve", "admin": "yes"}, "'admin'"),
                                  ("/api/v1/users", {"name": "eve", "projects": "nlp"},
                                   "'projects'"),
                                  ("/api/v1/projects/nlp/members", {"user": ["bob"]}, "'user'"),
                                  ("/api/v1/tokens", {"name": None}, "'name'")):
            status, answer = c.api("POST", path, body)
            check(f"POST {path} {json.dumps(body)} -> 400 naming {field}",
                  status == 400 and field in answer.get("detail", ""), (status, answer))
        status, answer = c.api("POST", "/api/v1/users", raw=b"[]")
        check("a body that is not an object -> 400", status == 400 and
              "object" in answer.get("detail", ""), (status, answer))
        status, answer = c.api("POST", "/api/v1/users", {"name": "eve", "projects": ["robotics"]})
        users = [u["name"] for u in c.api("GET", "/api/v1/users")[1]]
        check("a user with an unknown project is not created at all",
              status == 404 and "robotics" in answer.get("detail", "") and "eve" not in users,
              (status, answer, users))

        # Revocation and membership changes take effect on the very next request, although
        # the server remembers who a token belongs to for a few seconds.
        status, laptop = c.api("POST", "/api/v1/tokens", {"name": "laptop"}, token=alice)
        seen = [c.api("GET", "/api/v1/whoami", token=laptop["token"])[0] for _ in range(2)]
        c.api("POST", "/api/v1/projects/nlp/members", {"user": "alice"})
        projects = c.api("GET", "/api/v1/whoami", token=laptop["token"])[1].get("projects")
        check("a new membership is seen at once", projects == ["default", "nlp", "vision"],
              projects)
        status, _ = c.api("DELETE", f"/api/v1/tokens/{laptop['id']}", token=alice)
        after, _ = c.api("GET", "/api/v1/whoami", token=laptop["token"])
        check("a revoked token gets 401 on its next request",
              seen == [200, 200] and status == 200 and after == 401, (seen, status, after))
        out = c.cli("whoami", token=laptop["token"])
        check("the CLI with a revoked token exits 4", out.returncode == 4, out.stderr)

        # The job list: newest first, in pages chained by the deprecated X-Corral-Next-Before,
        # which keeps working for one release beside the cursor (the cursor's own tests are in
        # tests/cli_test.sh and the listing unit tests).
        ids = [job] + [submit(c, {"project": "vision", "command": ["true"],
                                  "resources": {"gpus": 16}}, token=alice) for _ in range(4)]
        pages, before = [], None
        while len(pages) < 10:
            status, headers, body = c.get_raw(
                "/api/v1/jobs?limit=2" + (f"&before={before}" if before else ""), token=alice)
            pages.append([j["id"] for j in json.loads(body)])
            before = headers.get("X-Corral-Next-Before")
            if not before:
                break
        check("jobs are listed newest first, two per page",
              pages == [sorted(ids, reverse=True)[i:i + 2] for i in (0, 2, 4)], (pages, ids))
        for query in ("limit=0", "limit=1001", "limit=x", "before=-1"):
            status, answer = c.api("GET", "/api/v1/jobs?" + query)
            check(f"GET /api/v1/jobs?{query} -> 400 naming the field", status == 400 and
                  query.split("=")[0] in answer.get("detail", ""), (status, answer))
    finally:
        c.stop()


def test_logs_pages_and_generations(root):
    c = Cluster(os.path.join(root, "logs"))
    try:
        c.start_agent("n1", "2xT4")
        check("agent joins", c.wait_nodes(1))
        # 1,078,895 bytes: one full 1 MiB page and a short second one.
        expected = "".join(f"{i}\n" for i in range(1, 170001)).encode()
        big = submit(c, {"command": ["seq", "170000"], "resources": {"gpus": 1}})
        logs = f"/api/v1/jobs/{big}/logs"
        shipped = wait_for(lambda: c.job(big).get("state") == "succeeded" and
                           c.get_raw(logs + f"?offset={len(expected)}")[1].get(
                               "X-Corral-Log-Size") == str(len(expected)), 90, 0.5)
        check("a log over 1 MiB is shipped whole", shipped, c.get_raw(logs + "?offset=0")[1])
        status, headers, first = c.get_raw(logs)
        check("a log page is at most 1 MiB; the offset header points after it",
              status == 200 and first == expected[:1 << 20] and
              headers.get("X-Corral-Log-Offset") == str(1 << 20) and
              headers.get("X-Corral-Log-Size") == str(len(expected)), (status, headers))
        status, headers, rest = c.get_raw(logs + f"?offset={1 << 20}")
        check("the next page continues exactly at the page boundary",
              first + rest == expected and headers.get("X-Corral-Log-Offset") ==
              str(len(expected)), (status, headers, len(rest)))
        past = len(expected) + 100
        status, headers, body = c.get_raw(logs + f"?offset={past}")
        check("an offset past the end: empty, the offset unchanged",
              status == 200 and body == b"" and headers.get("X-Corral-Log-Offset") == str(past),
              (status, headers, body[:100]))
        out = c.cli("logs", str(big))
        check("corral logs prints every page", out.stdout == expected.decode(),
              (len(out.stdout), out.stderr))
        for query, field in (("offset=-1", "offset"), ("task=x", "task"),
                             ("generation=0", "generation")):
            status, answer = c.api("GET", logs + "?" + query)
            check(f"logs?{query} -> 400 naming '{field}'",
                  status == 400 and field in answer.get("detail", ""), (status, answer))

        # A failed run is requeued under max_restarts; each run's output stays readable.
        marker = os.path.join(c.root, "runs")
        retried = submit(c, {"command": ["sh", "-c", f"echo x >> {marker}; "
                                         f"echo run $(wc -l < {marker}); exit 1"],
                             "resources": {"gpus": 1}, "max_restarts": 1})
        logs = f"/api/v1/jobs/{retried}/logs"
        both = wait_for(lambda: c.job(retried).get("state") == "failed" and
                        c.get_raw(logs + "?generation=1")[2] == b"run 1\n" and
                        c.get_raw(logs + "?generation=2")[2] == b"run 2\n", 60, 0.2)
        check("logs of each run of a requeued job", both,
              [c.get_raw(logs + f"?generation={g}")[2] for g in (1, 2)])
        check("without ?generation: the latest run", c.get_raw(logs)[2] == b"run 2\n",
              c.get_raw(logs))
        out = c.cli("logs", str(retried), "--generation", "1")
        check("corral logs --generation", out.stdout == "run 1\n", (out.stdout, out.stderr))
        status, answer = c.api("GET", logs + "?generation=3")
        check("a run the job has not had -> 404 naming 'generation'",
              status == 404 and "generation" in answer.get("detail", ""), (status, answer))
    finally:
        c.stop()


def test_server_sigkill_keeps_acknowledged_jobs(root):
    c = Cluster(os.path.join(root, "crash"))
    try:
        acknowledged = []
        proc = subprocess.Popen(
            [sys.executable, "-c", SUBMIT_LOOP, c.url, c.token], stdout=subprocess.PIPE, text=True)
        # Let the burst get going, then SIGKILL the server mid-way.
        wait_for(lambda: os.path.exists(os.path.join(c.root, "corral.db")), 5)
        for _ in range(100):
            line = proc.stdout.readline()
            if not line:
                break
            acknowledged.append(int(line))
        c.kill9(c.server)
        for line in proc.stdout:
            acknowledged.append(int(line))
        proc.wait()
        c.start_server()
        missing = [i for i in acknowledged if c.api("GET", f"/api/v1/jobs/{i}")[0] != 200]
        check(f"server SIGKILL: all {len(acknowledged)} acknowledged jobs survive",
              acknowledged and not missing, missing[:10])
    finally:
        c.stop()


def store_commits(cluster):
    """corral_store_commits_total, from /metrics."""
    found = re.search(r"^corral_store_commits_total (\d+)$",
                      cluster.get_raw("/metrics")[2].decode(), re.M)
    return int(found.group(1))


def jobs_named(cluster, name):
    """Every job named `name`, in id order, read page by page (the listing's cursor)."""
    jobs, cursor = [], ""
    while True:
        status, headers, body = cluster.get_raw(
            f"/api/v1/jobs?name={name}&sort=id&order=asc&limit=1000" +
            (f"&cursor={cursor}" if cursor else ""))
        if status != 200:
            return None
        jobs += json.loads(body)
        cursor = headers.get("X-Corral-Next-Cursor", "")
        if not cursor:
            return jobs


def kill_server_among(cluster, threads, acknowledged, lock, in_flight, stop, enough, what):
    """Starts `threads` (clients adding to `acknowledged` and counting `in_flight` under `lock`,
    stopping on `stop` or a lost server), SIGKILLs the server once `enough` requests were
    acknowledged, with some in flight, and starts it again."""
    commits_before = store_commits(cluster)
    for t in threads:
        t.start()
    through = wait_for(lambda: len(acknowledged) >= enough, 60, 0.05)
    commits = store_commits(cluster) - commits_before
    with lock:
        acked_then = len(acknowledged)
    check(f"{len(threads)} concurrent clients get {enough} {what} through", through, acked_then)
    # How many requests a commit held depends on the disk (on a fast one, groups stay small):
    # said, not checked.
    print(f"     ({acked_then} {what} acknowledged in {commits} commits)")
    with lock:
        unanswered = in_flight[0]
    cluster.kill9(cluster.server)
    stop.set()
    for t in threads:
        t.join(30)
    check(f"the kill found {what} in flight", unanswered > 0, unanswered)
    cluster.start_server()


def test_server_sigkill_in_the_middle_of_batches(root):
    """16 clients submit at once, so that the group commit batches them; the server is SIGKILLed
    while they go on. Every acknowledged job survives, whole (with its submission event), and a
    job never acknowledged is either whole or absent: a batch commits all or nothing."""
    c = Cluster(os.path.join(root, "batch-crash"))
    try:
        acknowledged, lock, stop = [], threading.Lock(), threading.Event()
        in_flight = [0]

        def submitter():
            conn = http.client.HTTPConnection(c.host, c.port, timeout=10)
            body = json.dumps({"name": "batch-kill", "command": ["true"],
                               "resources": {"gpus": 1, "gpu_models": ["NO-SUCH-GPU"]}})
            while not stop.is_set():
                try:
                    with lock:
                        in_flight[0] += 1
                    conn.request("POST", "/api/v1/jobs", body, {
                        "Authorization": "Bearer " + c.token,
                        "Content-Type": "application/json"})
                    answer = conn.getresponse()
                    data = answer.read()
                    if answer.status == 201:
                        with lock:
                            acknowledged.append(json.loads(data)["id"])
                except (OSError, http.client.HTTPException):
                    return  # the server is gone
                finally:
                    with lock:
                        in_flight[0] -= 1

        threads = [threading.Thread(target=submitter) for _ in range(16)]
        kill_server_among(c, threads, acknowledged, lock, in_flight, stop, 400, "submissions")
        listed = jobs_named(c, "batch-kill")
        stored = [j["id"] for j in listed or []]
        status = 200 if listed is not None else 500
        missing = sorted(set(acknowledged) - set(stored))
        check(f"server SIGKILL mid-batch: all {len(acknowledged)} acknowledged jobs survive",
              acknowledged and not missing and status == 200, (status, missing[:10]))
        extra = sorted(set(stored) - set(acknowledged))
        check("at most the submissions in flight were committed unacknowledged",
              len(extra) <= 16 and len(stored) == len(set(stored)), (len(extra), len(stored)))
        torn = [i for i in stored
                if [e.get("to") for e in c.job(i).get("events", [])][:1] != ["pending"]]
        check("every stored job is whole: its submission event is there", not torn, torn[:10])
    finally:
        c.stop()


def test_server_sigkill_in_the_middle_of_cancel_batches(root):
    """16 clients cancel pending jobs at once, so that the write group commits their cancels
    together; the server is SIGKILLed while they go on. Every acknowledged cancel survives (the
    job is cancelled, with its event), every other job is pending or cancelled whole, and the
    server goes on cancelling after its restart."""
    c = Cluster(os.path.join(root, "cancel-crash"))
    try:
        status, body = c.api("POST", "/api/v1/jobs", {
            "name": "cancel-kill", "command": ["true"],
            "resources": {"gpus": 1, "gpu_models": ["NO-SUCH-GPU"]},
            "array": {"indices": list(range(3000))}})
        check("an array of 3,000 pending jobs is submitted", status == 201, (status, body))
        ids = body["ids"]
        acknowledged, lock, stop = [], threading.Lock(), threading.Event()
        in_flight = [0]

        def canceller(mine):
            conn = http.client.HTTPConnection(c.host, c.port, timeout=10)
            for job in mine:
                if stop.is_set():
                    return
                try:
                    with lock:
                        in_flight[0] += 1
                    conn.request("POST", f"/api/v1/jobs/{job}/cancel", "{}", {
                        "Authorization": "Bearer " + c.token,
                        "Content-Type": "application/json"})
                    answer = conn.getresponse()
                    answer.read()
                    if answer.status == 202:
                        with lock:
                            acknowledged.append(job)
                except (OSError, http.client.HTTPException):
                    return  # the server is gone
                finally:
                    with lock:
                        in_flight[0] -= 1

        threads = [threading.Thread(target=canceller, args=(ids[i::16],)) for i in range(16)]
        kill_server_among(c, threads, acknowledged, lock, in_flight, stop, 600, "cancels")
        listed = jobs_named(c, "cancel-kill")
        states = {j["id"]: j["state"] for j in listed or []}
        status = 200 if listed is not None else 500
        lost = [j for j in acknowledged if states.get(j) != "cancelled"]
        check(f"server SIGKILL mid-group: all {len(acknowledged)} acknowledged cancels survive",
              acknowledged and not lost and len(states) == len(ids), (status, lost[:10]))
        unacked = [j for j in ids if j not in set(acknowledged)]
        odd = [j for j in unacked if states.get(j) not in ("pending", "cancelled")]
        extra = [j for j in unacked if states.get(j) == "cancelled"]
        check("the others are pending, or cancelled unacknowledged (at most those in flight)",
              not odd and len(extra) <= 16, (odd[:10], len(extra)))
        sample = [j for j in acknowledged[-20:]] + extra
        torn = [j for j in sample
                if "cancelled" not in [e.get("to") for e in c.job(j).get("events", [])]]
        check("every cancelled job is whole: its cancel event is there", not torn, torn[:10])
        pending = [j for j in unacked if states.get(j) == "pending"][:20]
        after = [c.api("POST", f"/api/v1/jobs/{j}/cancel", {})[0] for j in pending]
        check("the restarted server cancels the rest", after and set(after) == {202}, after)
    finally:
        c.stop()


SUBMIT_LOOP = r"""
import json, sys, urllib.request
url, token = sys.argv[1], sys.argv[2]
for i in range(100000):
    req = urllib.request.Request(url + "/api/v1/jobs", method="POST",
        data=json.dumps({"command": ["true"], "resources": {"gpus": 64}}).encode(),
        headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            print(json.loads(r.read())["id"], flush=True)
    except Exception:
        break
"""


def test_agent_sigkill_and_node_loss(root):
    c = Cluster(os.path.join(root, "faults"), node_timeout=10)
    try:
        c.start_agent("n1", "4xT4")
        check("agent joins", c.wait_nodes(1))
        job = submit(c, {"command": ["sh", "-c", "sleep 4; echo survived"],
                         "resources": {"gpus": 1}})
        check("job runs", c.wait_state(job, ("running",), 20))
        # SIGKILL the agent: its task keeps running under its supervisor; a new agent adopts it.
        c.kill9(c.agents["n1"])
        c.start_agent("n1", "4xT4")
        check("agent SIGKILL: running task re-adopted and finishes",
              c.wait_state(job, ("succeeded",), 30), c.job(job))
        out = c.cli("logs", str(job))
        check("adopted task's logs are shipped", "survived" in out.stdout, out.stdout)

        # Node loss: the task's node stops heartbeating; the job is requeued elsewhere.
        c.start_agent("n2", "4xT4")
        check("second agent joins", c.wait_nodes(2))
        marker = os.path.join(c.root, "runs.txt")
        lost = submit(c, {"command": ["sh", "-c", f"echo $$ >> {marker}; exec sleep 30"],
                          "resources": {"gpus": 4}, "max_restarts": 1})
        check("job to be lost starts", c.wait_state(lost, ("running",), 20))
        # The task's parent is its supervisor: corral-supervise from beside the binary under test
        # when it is there (agent_process.h, TaskSupervisor), else corral-daemon itself.
        check("the task wrote its pid",
              wait_for(lambda: os.path.exists(marker) and open(marker).read().strip(), 10))
        task_pid = int(open(marker).read().split()[0])
        parent = open(f"/proc/{task_pid}/stat").read().rsplit(")", 1)[1].split()[1]
        beside = os.path.join(os.path.dirname(CORRAL), "corral-supervise")
        expected = beside if os.path.exists(beside) else os.path.join(os.path.dirname(CORRAL),
                                                                      "corral-daemon")
        supervisor = os.readlink(f"/proc/{parent}/exe")
        check("the task runs under " + os.path.basename(expected),
              supervisor == os.path.realpath(expected), (supervisor, expected))
        first = c.job(lost)["tasks"][0]["node"]
        victim = c.agents[first]
        os.kill(victim.pid, signal.SIGSTOP)  # silent, like a partitioned node
        requeued = wait_for(lambda: any(t["generation"] == 2 and t["state"] == "running"
                                        for t in c.job(lost)["tasks"]), 30)
        check("lost node: job requeued and running on another node", requeued, c.job(lost))
        events = [e["reason"] for e in c.job(lost)["events"]]
        check("history says why", any("fenced: node " in r and "unreachable" in r
                                       for r in events), events)
        # Fencing: the old node comes back; its stale task is killed, not resurrected.
        os.kill(victim.pid, signal.SIGCONT)
        first_pid = int(open(marker).read().split()[0])

        def gone(pid):
            try:
                os.kill(pid, 0)
                return open(f"/proc/{pid}/stat").read().split()[2] == "Z"
            except (ProcessLookupError, FileNotFoundError):
                return True

        stale_gone = wait_for(lambda: gone(first_pid), 30)
        check("stale task on the returning node is killed (fencing)", stale_gone,
              open(marker).read())
        second_pid = int(open(marker).read().split()[1])
        c.cli("cancel", str(lost))
        check("cancel stops the running task", c.wait_state(lost, ("cancelled",), 30) and
              wait_for(lambda: gone(second_pid), 15), c.job(lost))
    finally:
        c.stop()


def test_server_sigkill_with_running_tasks(root):
    """Tasks keep running while the server is down; the new server re-adopts them from the
    agent's reports and never starts one twice."""
    c = Cluster(os.path.join(root, "readopt"))
    try:
        c.start_agent("n1", "4xT4")
        check("agent joins", c.wait_nodes(1))
        gate = os.path.join(c.root, "gate")
        jobs = []
        for i in range(3):
            marker = os.path.join(c.root, f"runs-{i}.txt")
            jobs.append((submit(c, {"command": ["sh", "-c",
                                                f"echo $$ >> {marker}; "
                                                f"while [ ! -e {gate} ]; do sleep 0.05; done; "
                                                f"echo finished {i}"],
                                    "resources": {"gpus": 1}}), marker))
        check("three jobs run", all(c.wait_state(j, ("running",), 20) for j, _ in jobs),
              [c.job(j)["state"] for j, _ in jobs])
        if c.store.startswith("sqlite:"):
            second = subprocess.run(
                [CORRAL, "server", "--listen", "127.0.0.1:0", "--store", c.store, "--data-dir",
                 os.path.join(c.root, "second")], capture_output=True, text=True, timeout=30)
            db = c.store[len("sqlite:"):]
            check("a second server on the same SQLite file refuses to start, naming the file, "
                  "the first one's pid and PostgreSQL",
                  second.returncode == 1 and db in second.stderr and
                  f"(pid {c.server.pid})" in second.stderr and
                  "use PostgreSQL for more than one server" in second.stderr, second.stderr)
        c.kill9(c.server)
        open(gate, "w").close()  # the tasks finish while no server is there
        c.start_server()
        check("server SIGKILL: running jobs re-adopted and succeed",
              all(c.wait_state(j, ("succeeded",), 30) for j, _ in jobs),
              [c.job(j) for j, _ in jobs])
        runs = [len(open(m).read().split()) for _, m in jobs]
        check("server SIGKILL: no task ran twice", runs == [1, 1, 1], runs)
        outs = [c.cli("logs", str(j)).stdout for j, _ in jobs]
        check("server SIGKILL: logs written across the restart",
              all(f"finished {i}" in o for i, o in enumerate(outs)), outs)
    finally:
        c.stop()


def cgroup_memory_limits_work():
    """True when this machine's agents can limit a task's memory (root, and a memory controller:
    cgroup v1's memory hierarchy, or v2's with memory enabled)."""
    if os.geteuid() != 0:
        return False
    if os.path.exists("/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        return True
    try:
        with open("/sys/fs/cgroup/cgroup.subtree_control") as f:
            return "memory" in f.read().split()
    except OSError:
        return False


def listed_states(c, *flags):
    """`corral jobs --all FLAGS -o json`: job id -> state."""
    out = c.cli("jobs", "--all", *flags, "-o", "json")
    return {j["id"]: j["state"] for j in json.loads(out.stdout)} if out.returncode == 0 else {}


def test_time_limit_and_oom(root):
    """A job stopped at its time limit ends `timeout`; one the kernel kills at its memory limit
    ends `oom` (when cgroup memory limits work here): in the API, the job's history, the task's
    typed end cause and `corral jobs`."""
    c = Cluster(os.path.join(root, "limit"))
    try:
        c.start_agent("n1", "1xT4")
        check("agent joins", c.wait_nodes(1))
        out = c.cli("submit", "--gpus", "1", "--time-limit", "1", "-o", "json", "--", "sleep", "60")
        job = json.loads(out.stdout)["id"] if out.returncode == 0 else None
        check("time limit: submitted with --time-limit", job is not None, out.stderr)
        ended = c.wait_state(job, ("timeout", "failed", "succeeded", "cancelled", "lost"), 30)
        view = c.job(job)
        check("time limit: the job ends timeout", ended and view["state"] == "timeout", view)
        check("time limit: the reason says so", "time limit of 1 s reached" in view.get("reason", ""),
              view.get("reason"))
        check("time limit: the task's end cause is time_limit",
              [t.get("end_cause") for t in view.get("tasks", [])] == ["time_limit"],
              view.get("tasks"))
        check("time limit: the history ends in timeout",
              view["events"][-1]["from"] == "running" and view["events"][-1]["to"] == "timeout",
              view["events"])
        table = c.cli("jobs", "--all")
        row = [line for line in table.stdout.splitlines() if line.split()[:1] == [str(job)]]
        check("time limit: corral jobs shows timeout", len(row) == 1 and "timeout" in row[0].split(),
              table.stdout)
        check("time limit: corral jobs --state timeout lists it",
              listed_states(c, "--state", "timeout") == {job: "timeout"},
              c.cli("jobs", "--all", "--state", "timeout", "-o", "json").stdout)
        status, listed = c.api("GET", "/api/v1/jobs?all=1&state=timeout,oom")
        check("time limit: the API's state filter takes the new states",
              status == 200 and [j["id"] for j in listed] == [job], (status, listed))
        bad = c.cli("jobs", "--state", "timout")
        check("a misspelt --state is refused, naming the valid states",
              bad.returncode != 0 and "unknown job state 'timout'" in bad.stderr
              and "timeout, oom" in bad.stderr, (bad.returncode, bad.stderr))
        status, problem = c.api("GET", "/api/v1/jobs?state=TIMEOUT")
        check("the API refuses an unknown state name with the valid ones",
              status == 400 and "(one of pending," in json.dumps(problem), (status, problem))
        later = submit(c, {"command": ["true"], "resources": {"gpus": 1}})
        check("time limit: the GPU is free again", c.wait_state(later, ("succeeded",), 30),
              c.job(later))

        if not cgroup_memory_limits_work():
            print("skip oom: no cgroup memory limits on this machine", flush=True)
            return
        # dd fills a 256 MiB buffer in a task limited to 32 MiB: the kernel's OOM killer ends it.
        out = c.cli("submit", "--gpus", "1", "--memory-mib", "32", "-o", "json", "--",
                    "dd", "if=/dev/zero", "of=/dev/null", "bs=256M", "count=1")
        oom = json.loads(out.stdout)["id"] if out.returncode == 0 else None
        check("oom: submitted with --memory-mib", oom is not None, out.stderr)
        ended = c.wait_state(oom, ("oom", "failed", "succeeded", "cancelled", "lost"), 30)
        view = c.job(oom)
        check("oom: the job ends oom", ended and view["state"] == "oom", view)
        check("oom: the reason says so",
              "killed at its memory limit of 32 MiB" in view.get("reason", ""), view.get("reason"))
        check("oom: the task's end cause is out_of_memory",
              [t.get("end_cause") for t in view.get("tasks", [])] == ["out_of_memory"],
              view.get("tasks"))
        check("oom: corral jobs --state oom lists it",
              listed_states(c, "--state", "oom") == {oom: "oom"},
              c.cli("jobs", "--all", "--state", "oom", "-o", "json").stdout)
    finally:
        c.stop()


def test_the_researchers_day_at_the_command_line(root):
    """`submit --wait` and `--follow` exit with the job's code (timeout 124); a job runs in the
    folder it was submitted from, or says why not; `--signal USR1@S` warns before the limit;
    `cancel A B` and `cancel --name`; a request no node could run is refused naming the largest;
    `logs` points at stderr when stdout is empty; `nodes` speaks in GPUs, cores and GiB."""
    c = Cluster(os.path.join(root, "day"))
    try:
        c.start_agent("n1", "2xT4")
        check("agent joins", c.wait_nodes(1))
        out = c.cli("submit", "--wait", "--", "sh", "-c", "exit 3")
        check("submit --wait exits with the job's code, and names it on stderr",
              out.returncode == 3 and "failed" in out.stderr and "(exit 3)" in out.stderr,
              (out.returncode, out.stdout, out.stderr))
        out = c.cli("submit", "--follow", "--", "sh", "-c", "echo one; echo two")
        check("submit --follow prints the job's output and exits 0",
              out.returncode == 0 and out.stdout.endswith("one\ntwo\n"), (out.returncode, out.stdout))
        out = c.cli("submit", "--wait", "--time-limit", "0:00:02", "-o", "json", "--", "sleep", "60")
        job = json.loads(out.stdout)["id"] if out.stdout else None
        check("a job over a 0:00:02 limit ends timeout and --wait exits 124",
              out.returncode == 124 and c.job(job)["state"] == "timeout", (out.returncode, out.stderr))

        # The working folder: the submit folder, a relative --workdir, and a folder the node
        # lacks.
        project = os.path.join(c.root, "project")
        os.makedirs(os.path.join(project, "runs"))
        out = c.cli("submit", "--follow", "--", "sh", "-c", "pwd; echo $CORRAL_SUBMIT_DIR",
                    cwd=project)
        check("a job runs in the folder it was submitted from",
              out.stdout.endswith(project + "\n" + project + "\n"), (out.stdout, out.stderr))
        out = c.cli("submit", "--follow", "--workdir", "runs", "--", "pwd", cwd=project)
        check("a relative --workdir is taken from the submit folder",
              out.stdout.endswith(os.path.join(project, "runs") + "\n"), (out.stdout, out.stderr))
        job = submit(c, {"command": ["pwd"], "submit_dir": "/no/such/folder"})
        c.wait_state(job, ("succeeded", "failed"), 30)
        reasons = [e["reason"] for e in c.job(job)["events"]]
        check("a submit folder the node lacks: a scratch folder, said in the job's events",
              any("running in a scratch folder: the submit folder /no/such/folder is not on this "
                  "node" in r for r in reasons), reasons)

        # USR1 at 5 s of a 60 s limit: the job ends itself when warned, long before its limit.
        out = c.cli("submit", "--wait", "--time-limit", "60", "--signal", "USR1@55", "-o", "json",
                    "--", "sh", "-c", "trap 'echo warned; exit 0' USR1; while :; do sleep 0.1; done")
        job = json.loads(out.stdout)["id"] if out.stdout else None
        check("--signal USR1@55: the job hears USR1 before its limit and can end on its own",
              out.returncode == 0 and c.cli("logs", str(job)).stdout == "warned\n",
              (out.returncode, out.stderr, c.cli("logs", str(job)).stdout))
        show = c.cli("job", "show", str(job)).stdout
        check("job show names the warning beside the limit",
              "time limit: 1m (SIGUSR1 55s before it)" in show, show)
        out = c.cli("submit", "--signal", "USR1", "--", "true")
        check("--signal without --time-limit is refused", out.returncode == 2 and
              "--signal: needs --time-limit" in out.stderr, out.stderr)

        out = c.cli("submit", "--gpus", "99", "--", "true")
        check("--gpus 99 on 2-GPU nodes is refused, naming the largest node",
              out.returncode == 2 and "needs 99 GPUs on one node; the largest node has 2 (n1)"
              in out.stderr, (out.returncode, out.stderr))
        out = c.cli("submit", "--wait", "--gpus", "99", "--", "true")
        check("waiting, corral's own failure exits 125, apart from the job's codes",
              out.returncode == 125 and "needs 99 GPUs" in out.stderr, (out.returncode, out.stderr))

        ids = [json.loads(c.cli("submit", "--name", f"sweep-{i}", "-o", "json", "--",
                                "sleep", "600").stdout)["id"] for i in range(3)]
        out = c.cli("cancel", str(ids[0]), str(ids[1]))
        check("cancel A B cancels both", out.returncode == 0 and
              c.wait_state(ids[0], ("cancelled",), 30) and c.wait_state(ids[1], ("cancelled",), 30),
              (out.stdout, out.stderr))
        out = c.cli("cancel", "--name", "sweep-", "-o", "json")
        check("cancel --name cancels what is left of the sweep",
              out.returncode == 0 and [a["id"] for a in json.loads(out.stdout)] == [ids[2]] and
              c.wait_state(ids[2], ("cancelled",), 30), (out.stdout, out.stderr))
        out = c.cli("cancel", "--state", "failed")
        check("cancel --state takes live states only",
              out.returncode == 2 and "failed jobs have ended" in out.stderr, out.stderr)
        out = c.cli("cancel", "--name", "sweep-")
        check("nothing left to cancel is not an error",
              out.returncode == 0 and "no live job matches --name sweep-" in out.stderr, out.stderr)

        job = json.loads(c.cli("submit", "-o", "json", "--", "sh", "-c",
                               "echo oops >&2; exit 1").stdout)["id"]
        c.wait_state(job, ("failed",), 30)
        out = c.cli("logs", str(job))
        check("logs of a job that wrote only to stderr says how to read it",
              out.stdout == "" and f"corral logs {job} --stderr (or --all for both)" in out.stderr,
              (out.stdout, out.stderr))
        out = c.cli("logs", str(job), "--all")
        check("logs --all prints both, labelled",
              out.stdout == "==> stdout <==\n==> stderr <==\noops\n", out.stdout)

        table = c.cli("nodes").stdout
        check("nodes speaks in GPUs, cores and sizes",
              table.splitlines()[0].split() == ["NAME", "STATE", "GPUS", "FREE", "GPUS", "FREE",
                                                "CPUS", "FREE", "MEMORY"] and
              re.search(r"^n1 +ready +2 T4 +2 of 2 +[0-9.]+ of [0-9.]+ +[0-9.]+ [MGT]iB of ", table,
                        re.M), table)
    finally:
        c.stop()


def test_a_slurm_batch_script_runs_unchanged(root):
    """`corral batch job.sh` runs a Slurm script as sbatch would: its #SBATCH lines with Slurm's
    meaning, its output file in the submit folder, SLURM_* variables per rank, warnings for what
    corral does not do, the script kept with the job."""
    c = Cluster(os.path.join(root, "batch"))
    try:
        c.start_agent("n1", "2xT4")
        check("agent joins", c.wait_nodes(1))
        project = os.path.join(c.root, "project")
        os.makedirs(project)
        # The job it depends on waits for a file, so the batch job is seen waiting for it.
        first = json.loads(c.cli("submit", "-o", "json", "--", "sh", "-c",
                                 "while [ ! -f go ]; do sleep 0.05; done").stdout)["id"]
        script = ("#!/bin/bash\n"
                  "#SBATCH -J x\n"
                  "#SBATCH --gres=gpu:2\n"
                  "#SBATCH -t 0:10:00\n"
                  "#SBATCH -o out_%j.txt\n"
                  f"#SBATCH --dependency=afterok:{first}\n"
                  "#SBATCH --mail-type=END -p gpu\n"
                  "echo \"gpus=$CUDA_VISIBLE_DEVICES job=$SLURM_JOB_ID name=$SLURM_JOB_NAME "
                  "arg=$1 pwd=$PWD submit=$SLURM_SUBMIT_DIR\"\n"
                  "echo warned >&2\n")
        with open(os.path.join(project, "job.sh"), "w") as f:
            f.write(script)
        out = c.cli("batch", "-o", "json", "job.sh", "A1", cwd=project)
        job = json.loads(out.stdout)["id"] if out.returncode == 0 else None
        check("corral batch takes the script", job is not None,
              (out.returncode, out.stdout, out.stderr))
        check("it waits for the job it depends on, naming it",
              wait_for(lambda: f"job {first}" in
                       (c.job(job)["pending_reason"] or {}).get("message", ""), 30) and
              c.job(job)["state"] == "pending", c.job(job)["pending_reason"])
        open(os.path.join(c.root, "go"), "w").close()
        check("it runs once that job succeeded", c.wait_state(job, ("succeeded",), 60),
              c.job(job))
        first_end = max(e["time"] for e in c.job(first)["events"] if e["to"] == "succeeded")
        starts = [e["time"] for e in c.job(job)["events"] if e["to"] in ("starting", "running")]
        check("it started after the job it depends on ended",
              starts and min(starts) >= first_end, (first_end, starts))
        check("what corral does not do is a warning naming the line",
              "warning: line 7: #SBATCH --mail-type: ignored" in out.stderr and
              "partition 'gpu' ignored: this cluster defines no partitions" in out.stderr,
              out.stderr)
        spec = c.job(job)["spec"]
        check("the #SBATCH lines mean what they mean to Slurm: name, 2 GPUs, a 600 s limit",
              spec["name"] == "x" and spec["resources"]["gpus"] == 2 and
              spec["time_limit_s"] == 600, spec)
        path = os.path.join(project, f"out_{job}.txt")
        text = open(path).read() if os.path.exists(path) else ""
        check("its output is in out_<id>.txt in the submit folder, stderr too",
              text == f"gpus=0,1 job={job} name=x arg=A1 pwd={project} submit={project}\nwarned\n",
              text)
        logs = c.cli("logs", str(job)).stdout
        check("corral logs keeps working", logs.startswith(f"gpus=0,1 job={job}"), logs)
        out = c.cli("job", "show", str(job), "--script")
        check("job show --script prints the script", out.stdout == script, out.stdout)

        # Ranks: two per part, each with its SLURM_PROCID; an array's files by %A_%a; #CORRAL
        # lines over #SBATCH lines, the command line over both.
        with open(os.path.join(project, "ranks.sh"), "w") as f:
            f.write("#!/bin/sh\n#SBATCH -n 2 --array 0-1 -o r_%A_%a.txt -e e_%A_%a.txt -t 5\n"
                    "#CORRAL --time-limit 1h --name ranks\n"
                    "echo \"rank $SLURM_PROCID of $SLURM_NTASKS element $SLURM_ARRAY_TASK_ID\"\n"
                    "echo \"err $SLURM_LOCALID\" >&2\n")
        out = c.cli("batch", "--wait", "--name", "flag", "-o", "json", "ranks.sh", cwd=project)
        answer = json.loads(out.stdout) if out.returncode == 0 else {}
        check("an array of two-rank batch jobs succeeds", answer.get("ids"),
              (out.returncode, out.stdout, out.stderr))
        array = answer.get("array_id")
        for index, element in enumerate(answer.get("ids", [])):
            rows = sorted(open(os.path.join(project, f"r_{array}_{index}.txt")).read().splitlines())
            errors = sorted(open(os.path.join(project, f"e_{array}_{index}.txt")).read().split())
            check(f"element {index}: each rank wrote its line, stderr in its own file",
                  rows == [f"rank 0 of 2 element {index}", f"rank 1 of 2 element {index}"] and
                  errors == ["0", "1", "err", "err"], (rows, errors))
            spec = c.job(element)["spec"]
            check(f"element {index}: the command line over #CORRAL over #SBATCH",
                  spec["name"] == "flag" and spec["time_limit_s"] == 3600 and
                  spec["procs_per_node"] == 2, spec)

        with open(os.path.join(project, "plain.sh"), "w") as f:
            f.write("echo no interpreter line\n")
        out = c.cli("batch", "plain.sh", cwd=project)
        check("a script without #! is refused, as sbatch refuses it",
              out.returncode == 2 and "must start with #!" in out.stderr, out.stderr)
        out = c.cli("batch", "--qos", "high", "job.sh", cwd=project)
        check("a QoS on a cluster without a table is a warning",
              out.returncode == 0 and "qos 'high' ignored" in out.stderr, out.stderr)
        out = c.cli("partitions")
        check("corral partitions says there are none and how to define them",
              out.returncode == 0 and "--partitions-file" in out.stdout, out.stdout)
    finally:
        c.stop()


def test_dependencies(root):
    """Slurm's dependencies: B afterok A waits, naming A, and starts once A succeeded; C afterok
    a failed job stays pending, never satisfied; D, the same with --kill-on-invalid-dep, ends
    cancelled; E afternotok the failed job runs; an unknown id is refused naming the field."""
    c = Cluster(os.path.join(root, "deps"))
    try:
        c.start_agent("n1", "2xT4")
        check("agent joins", c.wait_nodes(1))

        def submitted(*args):
            out = c.cli("submit", "-o", "json", *args)
            return json.loads(out.stdout)["id"] if out.returncode == 0 else out.stderr

        def reason(job):
            return c.job(job).get("pending_reason") or {}

        gate = os.path.join(c.root, "a-may-end")
        a = submitted("--", "sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done")
        b = submitted("--dependency", f"afterok:{a}", "--", "true")
        check("deps: B is submitted with --dependency afterok:A", isinstance(b, int), b)
        waits = f"waits for job {a} to end successfully (afterok)"
        check("deps: B waits with reason dependency, naming A",
              wait_for(lambda: reason(b) == {"code": "dependency", "message": waits}, 30),
              reason(b))
        check("deps: A runs while B waits",
              c.wait_state(a, ("running",), 30) and c.job(b)["state"] == "pending", c.job(b))
        show = c.cli("job", "show", str(b)).stdout
        check("deps: job show says what B depends on and where it stands",
              f"depends on: afterok:{a} (waiting)" in show and "estimated start: unknown" in show,
              show)
        row = [line for line in c.cli("jobs").stdout.splitlines() if line.split()[:1] == [str(b)]]
        check("deps: the jobs table's REASON names A", len(row) == 1 and waits in row[0], row)
        open(gate, "w").close()
        check("deps: B runs to the end once A succeeded",
              c.wait_state(b, ("succeeded", "failed", "cancelled"), 30)
              and c.job(b)["state"] == "succeeded", c.job(b))
        # A job as short as `true` may end before it is seen running: its placement is its start.
        placed = [e["time"] for e in c.job(b)["events"] if e["to"] in ("starting", "running")]
        check("deps: B started after A ended",
              placed and min(placed) >= c.job(a)["end_time"], (c.job(a), c.job(b)))
        check("deps: job show says it was met",
              f"depends on: afterok:{a} (met)" in c.cli("job", "show", str(b)).stdout)

        f = submitted("--", "sh", "-c", "exit 1")
        check("deps: the failing job fails", c.wait_state(f, ("failed",), 30), c.job(f))
        cj = submitted("--afterok", str(f), "--", "true")
        never = f"job {f} failed: afterok can never be met"
        check("deps: C afterok a failed job stays pending, never satisfied",
              wait_for(lambda: reason(cj) == {"code": "dependency_never_satisfied",
                                              "message": never}, 30)
              and c.job(cj)["state"] == "pending", c.job(cj))
        d = submitted("--afterok", str(f), "--kill-on-invalid-dep", "--", "true")
        check("deps: D with --kill-on-invalid-dep ends cancelled, saying why",
              c.wait_state(d, ("cancelled",), 30) and c.job(d)["reason"] == never, c.job(d))
        # Shorthands take one id each and join with AND; the command may follow without "--".
        e = submitted("--afternotok", str(f), "--after", str(f), "true")
        check("deps: E afternotok and after the failed job runs",
              c.wait_state(e, ("succeeded",), 30)
              and c.job(e)["spec"]["dependency"] == f"after:{f},afternotok:{f}", c.job(e))
        out = c.cli("submit", "--afterany", "999999", "--", "true")
        check("deps: an unknown job id is refused naming the field",
              out.returncode == 2 and "field 'dependency': job 999999 not found" in out.stderr,
              (out.returncode, out.stderr))
        out = c.cli("submit", "--dependency", "singleton", "--", "true")
        check("deps: Slurm's singleton is refused, naming what is supported",
              out.returncode == 2 and "after, afterok, afternotok, afterany" in out.stderr,
              out.stderr)
        check("deps: C still waits", c.job(cj)["state"] == "pending", c.job(cj))
    finally:
        c.stop()


def test_reclaim_preempts_borrowed_tasks(root):
    """A project under its quota takes back borrowed GPUs: the borrowers' tasks get SIGTERM and
    are requeued; the owner's job runs once they stopped."""
    c = Cluster(os.path.join(root, "reclaim"))
    try:
        c.start_agent("n1", "4xT4")
        check("agent joins", c.wait_nodes(1))
        status, _ = c.api("POST", "/api/v1/projects", {"name": "owner"})
        out = c.cli("project", "set-quota", "owner", "--gpus", "2", "--weight", "2")
        check("corral project set-quota", out.returncode == 0 and "owner" in out.stdout,
              out.stdout + out.stderr)
        bad = c.cli("project", "set-quota", "owner", "--model-gpus", "A100")
        check("set-quota with a bad --model-gpus -> exit 2", bad.returncode == 2, bad.stderr)
        projects = {p["name"]: p for p in c.api("GET", "/api/v1/projects")[1]}
        check("the quota is shown", projects["owner"]["quota_gpus"] == 2.0, projects)
        marks = os.path.join(c.root, "marks")
        os.makedirs(marks)
        script = (f"trap 'echo TERM > {marks}/$CORRAL_JOB_ID-$CORRAL_ALLOCATION_ID; exit 143' TERM; "
                  f"echo up; while true; do sleep 0.1; done")
        borrowers = [submit(c, {"command": ["sh", "-c", script], "resources": {"gpus": 1},
                                "shell": False}) for _ in range(4)]
        check("four borrowed jobs run", all(c.wait_state(j, ("running",), 20) for j in borrowers),
              [c.job(j)["state"] for j in borrowers])
        owner = submit(c, {"command": ["sh", "-c", "echo owner ran"], "project": "owner",
                           "resources": {"gpus": 2}})
        check("the owner's job runs", c.wait_state(owner, ("succeeded",), 30), c.job(owner))
        terms = wait_for(lambda: len(os.listdir(marks)) >= 2, 10) and os.listdir(marks)
        check("two borrowed tasks saw SIGTERM", terms and len(terms) == 2, terms)
        preempted = [j for j in borrowers
                     if any("preempted for job" in e["reason"] for e in c.job(j)["events"])]
        check("two borrowed jobs were preempted and requeued (history says why)",
              len(preempted) == 2, [c.job(j)["events"] for j in borrowers])
        check("the preempted jobs run again", all(
            wait_for(lambda j=j: c.job(j)["state"] == "running" and c.job(j)["restarts"] == 1, 20)
            for j in preempted), [c.job(j) for j in preempted])
        policy = c.api("GET", "/api/v1/policy")[1]
        check("GET /api/v1/policy", policy["policy"]["order"] == "fairshare" and
              policy["policy"]["reclaim"] is True, policy)
        check("a server started without --policy places with best", policy["placement"] == "best",
              policy)
        queue = c.cli("queue")
        check("corral queue", queue.returncode == 0 and "EST. START" in queue.stdout,
              queue.stdout + queue.stderr)
        for j in borrowers:
            c.cli("cancel", str(j))
    finally:
        c.stop()


def test_fresh_server_fills_a_used_node_first(root):
    """A fresh server has no workload profile: the default placement (best) packs as bestfit
    does, so a 1-GPU job goes on the partly used node, not on one of four empty ones that the
    seeded tie order may put first."""
    c = Cluster(os.path.join(root, "fresh"))
    try:
        c.start_agent("used", "8xA100-80GB")
        check("the first agent joins", c.wait_nodes(1))
        holder = submit(c, {"command": ["sleep", "60"], "resources": {"gpus": 4}})
        check("a 4-GPU job runs on it", c.wait_state(holder, ("running",), 20), c.job(holder))
        for name in ("e1", "e2", "e3", "e4"):
            c.start_agent(name, "8xA100-80GB")
        check("four empty agents join", c.wait_nodes(5))
        policy = c.api("GET", "/api/v1/policy")[1]
        check("GET /api/v1/policy: best, no workload profile yet",
              policy["placement"] == "best" and policy["profile_jobs"] == 0 and
              policy["uses_profile"] and policy["profile_min_jobs"] == 100, policy)
        shown = c.cli("policy")
        check("corral policy says best places as bestfit until it has a profile",
              shown.returncode == 0 and
              "placement: best (no workload profile yet: places as bestfit until 100 jobs "
              "have been submitted)" in shown.stdout and "order: " in shown.stdout,
              shown.stdout + shown.stderr)
        one = submit(c, {"command": ["sleep", "60"], "resources": {"gpus": 1}})
        check("the 1-GPU job runs", c.wait_state(one, ("running",), 20), c.job(one))
        where = c.job(one)["tasks"][0]["node"]
        check("the 1-GPU job runs on the partly used node", where == "used", where)
        for j in (holder, one):
            c.cli("cancel", str(j))
    finally:
        c.stop()


def test_gang_stays_in_one_rack(root):
    """A two-task job goes to two nodes of one rack, not to the node a lone task would take."""
    c = Cluster(os.path.join(root, "rack"))
    try:
        c.start_agent("a", "4xT4", ["rack=r0"])
        c.start_agent("b", "4xT4", ["rack=r1", "switch=s1"])
        c.start_agent("c", "4xT4", ["rack=r1"])
        check("three labelled agents join", c.wait_nodes(3))
        nodes = {n["name"]: n for n in c.api("GET", "/api/v1/nodes")[1]}
        check("nodes show their labels", nodes["b"]["labels"] == {"rack": "r1", "switch": "s1"},
              nodes)
        # A 1-GPU job first, so that one node is fuller than the others (where a lone task
        # would go); every node still holds a 3-GPU task, but only rack r1 holds two.
        holder = submit(c, {"command": ["sleep", "30"], "resources": {"gpus": 1}})
        check("a 1-GPU job runs", c.wait_state(holder, ("running",), 20), c.job(holder))
        gang = submit(c, {"command": ["sh", "-c", "echo $CORRAL_TASK_INDEX on $CORRAL_NODE_NAME"],
                          "tasks": 2, "resources": {"gpus": 3}})
        check("the gang runs", c.wait_state(gang, ("succeeded",), 30), c.job(gang))
        where = sorted(t["node"] for t in c.job(gang)["tasks"])
        holder_node = c.job(holder)["tasks"][0]["node"]
        racks = {nodes[n]["labels"].get("rack") for n in where}
        check("the gang's tasks share one rack", len(racks) == 1 and len(where) == 2,
              (where, holder_node))
        bad = subprocess.run([CORRAL, "agent", "--server", c.url, "--join-token", "x",
                              "--work-dir", os.path.join(c.root, "bad"), "--fake-gpus", "1xT4",
                              "--label", "rack=has space"], capture_output=True, text=True)
        check("a bad --label -> exit 2 naming it", bad.returncode == 2 and "rack" in bad.stderr,
              bad.stderr)
        c.cli("cancel", str(holder))
    finally:
        c.stop()


def test_array_runs_at_most_max_running(root):
    """`corral submit --array 0-5%2`: six elements, never more than two at once, each with its
    index in CORRAL_ARRAY_INDEX; listed and cancelled together or singly; a sweep file."""
    c = Cluster(os.path.join(root, "array"))
    try:
        c.start_agent("n1", "8xT4")
        check("agent joins", c.wait_nodes(1))
        record = os.path.join(c.root, "array-runs.txt")
        open(record, "w").close()
        # Each element records its job id (for the concurrency check) and its index, with when it
        # started and ended.
        script = ('s=$(date +%s.%N); sleep 1; e=$(date +%s.%N); '
                  'echo "$CORRAL_JOB_ID ${CORRAL_ARRAY_INDEX:-unset} $s $e" >> ' + record)
        out = c.cli("submit", "--array", "0-5%2", "--gpus", "1", "--shell", "--", script)
        m = re.fullmatch(r"submitted array (\d+): jobs (\d+)\.\.(\d+)\n", out.stdout)
        check("submit --array prints the array and its jobs", m is not None,
              out.stdout + out.stderr)
        if not m:
            return
        array = int(m.group(1))
        listed = json.loads(c.cli("jobs", "--array", str(array), "-o", "json").stdout)
        ids = sorted(j["id"] for j in listed)
        check("corral jobs --array lists the six elements",
              sorted(j["array_index"] for j in listed) == list(range(6)) and ids[0] == array,
              listed)
        limited = wait_for(lambda: any(
            "max_running 2" in c.job(i).get("pending_reason", {}).get("message", "")
            for i in ids), 20)
        check("a waiting element says the array has max_running running", limited,
              [c.job(i).get("pending_reason") for i in ids])
        done = wait_for(lambda: all(c.job(i)["state"] == "succeeded" for i in ids), 60, 0.2)
        check("all six elements succeed", done, [c.job(i)["state"] for i in ids])
        runs = [line.split() for line in open(record)]
        events = sorted([(float(s), 1) for _, _, s, _ in runs] + [(float(e), -1) for *_, e in runs])
        running, most = 0, 0
        for _, delta in events:
            running += delta
            most = max(most, running)
        check("never more than two elements run at once",
              sorted(int(r[0]) for r in runs) == ids and most <= 2, (most, runs))
        check("each element sees its CORRAL_ARRAY_INDEX (set by the agent)",
              {int(r[0]): r[1] for r in runs} ==
              {j["id"]: str(j["array_index"]) for j in listed}, runs)

        # Cancelled singly, then together.
        out = c.cli("submit", "--array", "0-3%1", "--gpus", "1", "-o", "json", "--", "sleep", "60")
        later = json.loads(out.stdout)["ids"]
        check("the next array's first element runs", c.wait_state(later[0], ("running",), 20),
              c.job(later[0]))
        out = c.cli("cancel", str(later[1]))
        check("corral cancel ID cancels one element",
              out.returncode == 0 and c.wait_state(later[1], ("cancelled",), 10) and
              c.job(later[2])["state"] == "pending", out.stderr)
        out = c.cli("cancel", "--array", str(later[0]))
        check("corral cancel --array cancels the rest",
              out.returncode == 0 and f"cancelling array {later[0]}: 3 jobs" in out.stdout and
              all(c.wait_state(j, ("cancelled",), 20) for j in later), out.stdout + out.stderr)

        # A sweep file: every combination, its parameters in the environment.
        sweep = os.path.join(c.root, "sweep.yaml")
        with open(sweep, "w") as f:
            f.write("grid:\n  lr: [0.1, 0.01]\n  batch: [32, 64]\nmax_running: 2\n")
        out = c.cli("submit", "--sweep", sweep, "-o", "json", "--shell", "--",
                    "echo lr=$lr batch=$batch")
        swept = json.loads(out.stdout)["ids"] if out.returncode == 0 else []
        check("a sweep file makes an array of every combination", len(swept) == 4,
              out.stdout + out.stderr)
        ok = all(c.wait_state(j, ("succeeded",), 30) for j in swept)
        logs = [c.cli("logs", str(j)).stdout.strip() for j in swept]
        check("each sweep element gets its parameters as environment variables",
              ok and logs == ["lr=0.1 batch=32", "lr=0.01 batch=32", "lr=0.1 batch=64",
                              "lr=0.01 batch=64"], logs)
    finally:
        c.stop()


def test_cpu_only_array_fills_the_dev_node_cpus(root):
    """A job without GPUs asks 1 CPU per process: on `corral dev --cpus 3`, a CPU-only array runs
    at most 3 elements at once, the others pending for CPU. The server's per-GPU and per-CPU
    defaults (--default-cpus-per-gpu, --default-memory-per-cpu-mib) fill in what a spec leaves
    out, and the submitter is told."""
    data = os.path.join(root, "cpu-dev")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    dev = subprocess.Popen(
        [CORRAL, "dev", "--data-dir", data, "--listen", f"127.0.0.1:{port}", "--web-dir", "",
         "--fake-gpus", "1xT4", "--cpus", "3", "--metrics-interval", "0"],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(root, "cpu-dev.log"), "a"))
    try:
        def healthy():
            try:
                return urllib.request.urlopen(url + "/healthz", timeout=1).status == 200
            except Exception:
                return False
        check("corral dev comes up", wait_for(healthy, 30))
        token = open(os.path.join(data, "admin.token")).read().strip()
        env = dict(os.environ, CORRAL_SERVER=url, CORRAL_TOKEN=token, HOME=root)

        def cli(*args):
            return subprocess.run([CORRAL, *args], env=env, capture_output=True, text=True,
                                  timeout=60)

        def nodes():
            return json.loads(cli("nodes", "-o", "json").stdout or "[]")
        check("the dev node offers the 3 CPUs it was given",
              wait_for(lambda: [n.get("cpu_milli") for n in nodes()] == [3000], 20), nodes())
        # Each element notes how many elements run while it starts (files in `slots`), then
        # waits for the gate, so the test sees the node full before any ends.
        slots, gate = os.path.join(data, "slots"), os.path.join(data, "gate")
        counts = os.path.join(data, "counts.txt")
        os.makedirs(slots)
        script = (f'touch {slots}/$CORRAL_JOB_ID; ls {slots} | wc -l >> {counts}; '
                  f'while [ ! -e {gate} ]; do sleep 0.02; done; rm {slots}/$CORRAL_JOB_ID')
        out = cli("submit", "--array", "0-8", "-o", "json", "--shell", "--", script)
        ids = json.loads(out.stdout)["ids"] if out.returncode == 0 else []
        check("a CPU-only array of 9 is accepted, with its default said",
              len(ids) == 9 and json.loads(out.stdout)["reason"] ==
              "submitted with defaults: resources.cpu_milli 1000 (1 CPU per process, as the job "
              "asks no GPU)", out.stdout + out.stderr)

        def jobs():
            return [json.loads(cli("job", "show", str(i), "-o", "json").stdout) for i in ids]

        seen = []  # the last look at the elements

        def node_full():
            seen[:] = jobs()
            started = [j for j in seen if j["state"] in ("starting", "running")]
            waiting = [j for j in seen if j["state"] == "pending" and
                       j.get("pending_reason", {}).get("code") == "insufficient_cpu_memory"]
            return len(started) == 3 and len(waiting) == 6
        check("3 elements run and 6 wait for CPU", wait_for(node_full, 30),
              [(j["state"], j.get("pending_reason")) for j in seen])
        open(gate, "w").close()
        check("all 9 elements succeed",
              wait_for(lambda: all(j["state"] == "succeeded" for j in jobs()), 60, 0.2),
              [j["state"] for j in jobs()])
        most = [int(line) for line in open(counts)]
        check("never more than 3 elements ran at once", len(most) == 9 and max(most) <= 3, most)
    finally:
        dev.terminate()
        try:
            dev.wait(15)
        except subprocess.TimeoutExpired:
            dev.kill()
            dev.wait()

    c = Cluster(os.path.join(root, "cpu-defaults"),
                server_args=["--default-cpus-per-gpu", "4", "--default-memory-per-cpu-mib", "100"])
    try:
        # A fake-GPU node offers at least 8 CPUs per GPU; --cpus and --memory-mib replace what
        # the agent detects.
        c.start_agent("fake", "2xT4")
        c.start_agent("declared", "2xT4", extra=("--cpus", "1", "--memory-mib", "512"))
        check("agents join", c.wait_nodes(2))
        offered = {n["name"]: (n["cpu_milli"], n["memory_mib"])
                   for n in c.api("GET", "/api/v1/nodes")[1]}
        check("a fake-GPU node offers 8 CPUs per GPU, a declared one what it declares",
              offered.get("fake", (0, 0))[0] >= 16000 and offered.get("declared") == (1000, 512),
              offered)
        status, answer = c.api("POST", "/api/v1/jobs",
                               {"command": ["true"], "resources": {"gpus": 2}})
        check("a GPU job gets the server's CPUs per GPU and memory per CPU, and is told",
              status == 201 and answer["reason"] ==
              "submitted with defaults: resources.cpu_milli 8000 (4 CPUs per GPU: the server's "
              "--default-cpus-per-gpu); resources.memory_mib 800 (100 MiB per CPU: the server's "
              "--default-memory-per-cpu-mib)", answer)
        resources = c.job(answer.get("id", 0)).get("spec", {}).get("resources", {})
        check("the job view shows the effective request",
              resources.get("cpu_milli") == 8000 and resources.get("memory_mib") == 800, resources)
        status, answer = c.api("POST", "/api/v1/jobs", {
            "command": ["true"], "procs_per_node": 2, "resources": {"cpus": 2}})
        resources = c.job(answer.get("id", 0)).get("spec", {}).get("resources", {})
        check("cpus counts per process; memory follows the CPUs asked",
              status == 201 and resources.get("cpu_milli") == 4000 and
              resources.get("memory_mib") == 400, (answer, resources))
    finally:
        c.stop()


def test_environments_venv_clone_and_share(root):
    """Environments: `corral env create -f` with a venv made by `python3 -m venv`; a job with
    --environment runs inside it; `env clone --set`; `env share` lets another project's member
    use it; the built-ins are listed."""
    c = Cluster(os.path.join(root, "envs"))
    try:
        c.start_agent("n1", "2xT4")
        check("agent joins", c.wait_nodes(1))
        venv = os.path.join(c.root, "venv")
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
        spec = os.path.join(c.root, "env.yaml")
        with open(spec, "w") as f:
            f.write(f"name: myvenv\ndescription: a test venv\nhost:\n  venv: {venv}\n"
                    "command: [sh, -c, 'which python3; echo VENV=$VIRTUAL_ENV; "
                    "echo ENV=$CORRAL_ENVIRONMENT']\nenv:\n  GREETING: hello\n")
        out = c.cli("env", "create", "-f", spec)
        check("corral env create -f makes version 1", out.stdout == "created environment myvenv@1\n",
              out.stdout + out.stderr)
        listed = json.loads(c.cli("env", "list", "-o", "json").stdout)["environments"]
        names = {e["name"] for e in listed}
        check("env list shows the built-ins and the new one",
              {"pytorch", "vllm", "cuda-base", "myvenv"} <= names, names)
        out = c.cli("submit", "--environment", "myvenv", "-o", "json")
        job = json.loads(out.stdout)["id"] if out.returncode == 0 else None
        check("submit --environment without a command uses the environment's", job is not None,
              out.stdout + out.stderr)
        ok = job is not None and c.wait_state(job, ("succeeded", "failed"), 30)
        log = c.cli("logs", str(job)).stdout if job else ""
        check("the job ran inside the venv",
              ok and c.job(job)["state"] == "succeeded" and
              f"{venv}/bin/python3" in log and f"VENV={venv}" in log and
              "ENV=myvenv@1" in log, (log, job and c.job(job)))
        check("the job's spec pins the version", job and
              c.job(job)["spec"]["environment"] == "myvenv@1", job and c.job(job)["spec"])

        out = c.cli("env", "clone", "myvenv", "myvenv2", "--set", "env.GREETING=bye",
                    "--set", "gpus.min=1", "-o", "json")
        clone = json.loads(out.stdout) if out.returncode == 0 else {}
        check("env clone --set changes fields of a copy",
              clone.get("spec", {}).get("env") == {"GREETING": "bye"} and
              clone["spec"]["gpus"] == {"min": 1} and clone["spec"]["host"] == {"venv": venv},
              out.stdout + out.stderr)
        out = c.cli("env", "clone", "myvenv", "bad", "--set", "colour=red")
        check("a bad clone names the field", out.returncode != 0 and "'colour'" in out.stderr,
              out.stderr)

        c.api("POST", "/api/v1/projects", {"name": "vision"})
        c.api("POST", "/api/v1/projects/vision/members", {"user": "admin"})
        carol = c.api("POST", "/api/v1/users", {"name": "carol", "projects": ["vision"]})[1]["token"]
        out = c.cli("env", "show", "myvenv", token=carol)
        check("another user cannot see the environment", out.returncode == 3, out.stderr)
        out = c.cli("env", "share", "myvenv", "--project", "vision")
        check("env share", out.returncode == 0, out.stdout + out.stderr)
        out = c.cli("env", "show", "myvenv@1", "-o", "json", token=carol)
        check("after sharing, a member of the project sees it",
              out.returncode == 0 and json.loads(out.stdout)["projects"] == ["vision"], out.stderr)
        out = c.cli("submit", "--environment", "myvenv", "--project", "vision", "-o", "json",
                    "--", "sh", "-c", "echo $GREETING from $VIRTUAL_ENV", token=carol)
        job = json.loads(out.stdout)["id"] if out.returncode == 0 else None
        ok = job is not None and c.wait_state(job, ("succeeded", "failed"), 30)
        log = c.cli("logs", str(job), token=carol).stdout if job else ""
        check("and uses it", ok and log.strip() == f"hello from {venv}", (out.stderr, log))
    finally:
        c.stop()


def test_environments_say_what_runs_here(root):
    """On a fresh `corral dev` (no container engine, no /opt/corral/envs): `env list` says which
    environments run here (host, python) and why the others do not; a job or session asking for
    one no node can run is refused with that reason; `--environment python` runs; the jupyter
    session runs where Jupyter is installed, else is refused saying what to install."""
    data = os.path.join(root, "envs-dev")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    dev = subprocess.Popen(
        [CORRAL, "dev", "--data-dir", data, "--listen", f"127.0.0.1:{port}", "--web-dir", "",
         "--fake-gpus", "1xT4", "--metrics-interval", "0"],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(root, "envs-dev.log"), "a"))
    try:
        def healthy():
            try:
                return urllib.request.urlopen(url + "/healthz", timeout=1).status == 200
            except Exception:
                return False
        check("corral dev comes up", wait_for(healthy, 30))
        token = open(os.path.join(data, "admin.token")).read().strip()
        env = dict(os.environ, CORRAL_SERVER=url, CORRAL_TOKEN=token, HOME=root)

        def cli(*args):
            return subprocess.run([CORRAL, *args], env=env, capture_output=True, text=True,
                                  timeout=60)

        def envs():
            out = cli("env", "list", "-o", "json")
            return {e["name"]: e for e in json.loads(out.stdout)["environments"]} \
                if out.returncode == 0 else {}
        check("the dev node registers",
              wait_for(lambda: envs().get("host", {}).get("runs_here", {}).get("of") == 1, 30),
              envs().get("host"))
        listed = envs()
        here = {name: e.get("runs_here") for name, e in listed.items()}
        check("host and python run on the dev node",
              here.get("host") == {"nodes": 1, "of": 1} and
              here.get("python") == {"nodes": 1, "of": 1}, here)
        check("an image-only environment says it needs a container engine",
              here.get("cuda-base", {}).get("nodes") == 0 and
              here["cuda-base"].get("why_not") ==
              "needs a container engine (podman or docker) for its image: no node has it",
              here.get("cuda-base"))
        check("pytorch names its folder too",
              "the folder /opt/corral/envs/pytorch" in here.get("pytorch", {}).get("why_not", ""),
              here.get("pytorch"))
        table = cli("env", "list").stdout
        rows = {line.split()[0]: line for line in table.splitlines()[1:] if line.strip()}
        check("env list has a RUNS HERE column with counts and reasons",
              "RUNS HERE" in table.splitlines()[0] and
              rows.get("python", "").rstrip().endswith("1 of 1 node") and
              "no: needs a container engine (podman or docker) for its image: no node has it"
              in rows.get("cuda-base", ""), table)

        out = cli("submit", "--environment", "cuda-base", "--gpus", "1", "--", "true")
        check("a job whose environment no node can run is refused, naming the field and why",
              out.returncode != 0 and "field 'environment': needs a container engine" in out.stderr
              and "no registered node could ever run it" in out.stderr, out.stdout + out.stderr)

        out = cli("submit", "--environment", "python", "-o", "json", "--",
                  "python3", "-c", "print(1)")
        job = json.loads(out.stdout)["id"] if out.returncode == 0 else None
        check("--environment python is accepted", job is not None, out.stdout + out.stderr)

        def state():
            shown = cli("job", "show", str(job), "-o", "json")
            return json.loads(shown.stdout)["state"] if shown.returncode == 0 else None
        check("and succeeds, printing 1",
              job is not None and wait_for(lambda: state() in ("succeeded", "failed"), 30) and
              state() == "succeeded" and cli("logs", str(job)).stdout == "1\n",
              (state(), job and cli("logs", str(job)).stdout))

        jupyter = here.get("jupyter", {})
        if shutil.which("jupyter-lab") or shutil.which("jupyter-notebook"):
            # A Jupyter unpacked outside Python's own path (dpkg -x) needs its PYTHONPATH.
            extra = (("--env", "PYTHONPATH=" + os.environ["PYTHONPATH"])
                     if os.environ.get("PYTHONPATH") else ())
            out = cli("session", "start", "--environment", "jupyter", "--idle-timeout", "0",
                      "--wait", "-o", "json", *extra)
            started = json.loads(out.stdout) if out.returncode == 0 else {}
            check("jupyter starts where it is installed",
                  started.get("state") == "running", out.stdout + out.stderr)

            def answers():
                request = urllib.request.Request(started["url"] + "api/status",
                                                 headers={"Authorization": "Bearer " + token})
                try:
                    return urllib.request.urlopen(request, timeout=5).status == 200
                except Exception:
                    return False
            check("and the gateway answers for it", started and wait_for(answers, 60, 0.5),
                  started)
            # Tasks outlive their agent by design: stop the session before corral dev ends.
            stopped = cli("session", "stop", str(started.get("id", 0)))

            def ended():
                shown = cli("session", "show", str(started.get("id", 0)), "-o", "json")
                return shown.returncode == 0 and json.loads(shown.stdout)["state"] in (
                    "cancelled", "succeeded", "failed")
            check("corral session stop ends it", stopped.returncode == 0 and wait_for(ended, 30),
                  stopped.stdout + stopped.stderr)
        else:
            print("jupyter: neither jupyter-lab nor jupyter-notebook here: testing the refusal")
            check("jupyter does not run here, saying what to install",
                  jupyter.get("nodes") == 0 and "install jupyter-notebook (Debian) or jupyterlab"
                  in jupyter.get("why_not", ""), jupyter)
            out = cli("session", "start", "--environment", "jupyter")
            check("a jupyter session is refused with what is missing",
                  out.returncode != 0 and "jupyter-lab or jupyter-notebook on the PATH" in out.stderr
                  and "install jupyter-notebook (Debian) or jupyterlab" in out.stderr, out.stderr)
    finally:
        dev.terminate()
        try:
            dev.wait(15)
        except subprocess.TimeoutExpired:
            dev.kill()
            dev.wait()


# A tiny HTTP app for sessions: serves on $CORRAL_SESSION_PORT under $CORRAL_SESSION_URL_PREFIX,
# trusts requests carrying the session token (the proxy's "Authorization: token T", or ?token=T
# on the direct URL) and echoes what it got. PREFIX/hold waits until PREFIX/release (PREFIX/held
# counts the waiting ones); PREFIX/cookies tries to set corral's cookie; a WebSocket handshake
# ("Upgrade: websocket") with the token gets 101 and then every byte echoed until the client
# closes. With the argument "status" it also serves Jupyter Server's PREFIX/api/status: in use
# now.
SESSION_APP = r"""
import datetime, http.server, json, os, sys, threading
port = int(os.environ["CORRAL_SESSION_PORT"])
prefix = os.environ["CORRAL_SESSION_URL_PREFIX"]
token = os.environ["CORRAL_SESSION_TOKEN"]
status = sys.argv[1:] == ["status"]
released = threading.Event()
held = [0]
lock = threading.Lock()
class App(http.server.BaseHTTPRequestHandler):
    def reply(self, code, text, content_type="text/plain; charset=utf-8", headers=()):
        text = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("X-App", "session-app")
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)
    def answer(self):
        if (self.headers.get("Upgrade", "").lower() == "websocket" and
                self.headers.get("Authorization") == "token " + token):
            self.send_response(101)
            self.send_header("Upgrade", "websocket")
            self.send_header("Connection", "Upgrade")
            self.end_headers()
            self.wfile.flush()
            while True:
                data = self.connection.recv(65536)
                if not data:
                    break
                self.connection.sendall(data)
            self.close_connection = True
            return
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        if not self.path.startswith(prefix):
            return self.reply(404, "not here")
        authed = (self.headers.get("Authorization") == "token " + token or
                  ("token=" + token) in self.path)
        path = self.path[len(prefix):].split("?")[0]
        if authed and status and path == "api/status":
            now = datetime.datetime.now(datetime.timezone.utc)
            return self.reply(200, json.dumps({"last_activity": now.isoformat().replace(
                "+00:00", "Z")}), "application/json")
        if authed and path == "hold":
            with lock:
                held[0] += 1
            released.wait(30)
            with lock:
                held[0] -= 1
        if authed and path == "held":
            with lock:
                return self.reply(200, str(held[0]))
        if authed and path == "release":
            released.set()
        cookies = [("Set-Cookie", "corral_token=crl_app; Path=/"),
                   ("Set-Cookie", "theme=dark; Path=" + prefix)] if path == "cookies" else []
        self.reply(200 if authed else 403,
                   f"app of job {os.environ['CORRAL_JOB_ID']}: {self.command} {self.path} "
                   f"authed={authed} authorization={self.headers.get('Authorization')} "
                   f"cookie={self.headers.get('Cookie')} body={body}", headers=cookies)
    do_GET = do_POST = do_PUT = do_DELETE = answer
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("0.0.0.0", port), App).serve_forever()
"""


def test_sessions_proxy_auth_and_idle_stop(root):
    """`corral session start` runs an HTTP app as a job; the session gateway (its own port)
    carries /sessions/ID/ to it for its owner only (bearer token or login cookie), WebSockets
    included, refusing cross-site requests that change something or open a WebSocket and a
    session's fifth connection at once; the API redirects old links there; stopping a session
    closes it; an idle session gets a notice and is stopped, unless its app says it is in use."""
    c = Cluster(os.path.join(root, "sessions"),
                server_args=("--session-idle-timeout", "3", "--session-idle-warning", "2",
                             "--session-max-connections-per-session", "4"))

    def gw(method, path, headers=None, body=None):
        return http_request(c, method, path, headers, body, port=c.session_port)
    try:
        c.start_agent("n1", "2xT4", extra=("--address", "127.0.0.1"))
        check("agent joins", c.wait_nodes(1))
        alice = c.api("POST", "/api/v1/users", {"name": "alice"})[1]["token"]
        bob = c.api("POST", "/api/v1/users", {"name": "bob"})[1]["token"]
        out = c.cli("session", "start", "--gpus", "1", "--idle-timeout", "0", "--wait", "-o",
                    "json", "--", "/usr/bin/python3", "-c", SESSION_APP, token=alice)
        s = json.loads(out.stdout) if out.returncode == 0 else {}
        sid = s.get("id")
        prefix = f"/sessions/{sid}/"
        check("corral session start --wait: running, with the gateway URL and the token",
              s.get("state") == "running" and s.get("url") == c.session_url + prefix and
              re.fullmatch(r"[0-9a-f]{64}", s.get("token", "")) is not None,
              out.stdout + out.stderr)
        if not sid:
            return
        view = c.job(sid)
        check("the job view does not show the session token",
              s["token"] not in json.dumps(view) and "session" in view["spec"], view["spec"])
        listed = c.api("GET", "/api/v1/jobs?all=1")[1]
        check("the job list does not show the session token", s["token"] not in json.dumps(listed),
              listed)

        bearer = lambda token: {"Authorization": "Bearer " + token}  # noqa: E731
        status, headers, text = gw("GET", prefix + "tree?a=1&b=%2B", bearer(alice))
        check("the owner's bearer token passes: 200 and the app's answer",
              status == 200 and f"app of job {sid}: GET {prefix}tree?a=1&b=%2B authed=True" in text
              and headers.get("x-app") == "session-app", (status, headers, text))
        check("the proxy sends the app its token, never corral's",
              f"authorization=token {s['token']}" in text and alice not in text, text)
        status, _, text = gw("GET", prefix, bearer(c.token))
        check("an admin gets 404 from the proxy like everyone but the owner",
              status == 404 and "authed" not in text, (status, text))
        status, body = c.api("GET", f"/api/v1/sessions/{sid}")
        check("an admin still sees it through the API", status == 200 and body["id"] == sid,
              (status, body))
        status, _, text = gw(
            "POST", prefix + "api/contents", {**bearer(alice), "Content-Type": "application/json"},
            '{"type": "notebook"}')
        check("POST bodies pass through",
              status == 200 and f'POST {prefix}api/contents' in text and
              'body={"type": "notebook"}' in text, (status, text))
        json_post = {**bearer(alice), "Content-Type": "application/json"}
        status, _, text = gw("POST", prefix + "api/contents",
                                       {**json_post, "Origin": c.session_url}, "{}")
        check("a POST from the gateway's own origin passes", status == 200, (status, text))
        status, _, text = gw("POST", prefix + "api/contents", {**json_post, "Origin": c.url}, "{}")
        check("a POST from the API's origin does not (another origin)", status == 403,
              (status, text))
        for name, extra in (("Origin", {"Origin": "https://evil.example"}),
                            ("Origin null", {"Origin": "null"}),
                            ("Sec-Fetch-Site", {"Sec-Fetch-Site": "cross-site"})):
            status, headers, text = gw("PUT", prefix + "api/contents",
                                                 {**json_post, **extra}, "{}")
            check(f"a cross-site PUT ({name}) -> 403 problem, the app never sees it",
                  status == 403 and headers.get("content-type") == "application/problem+json"
                  and "app of job" not in text, (status, headers, text))
        status, _, text = gw("GET", prefix, {**bearer(alice),
                                                          "Origin": "https://evil.example"})
        check("a cross-site GET passes (it changes nothing)", status == 200, (status, text))
        status, pairs = http_request_pairs(c, prefix + "cookies", bearer(alice), port=c.session_port)
        cookies = [v for k, v in pairs if k.lower() == "set-cookie"]
        check("the app may set its own cookies but not corral's",
              status == 200 and cookies == [f"theme=dark; Path={prefix}"], (status, cookies))
        status, _, text = gw("GET", prefix, bearer(bob))
        check("another user's token -> 404", status == 404, (status, text))
        status, _, text = gw("GET", prefix)
        check("no token -> 401 saying to log in", status == 401 and "/login" in text,
              (status, text))
        status, headers, text = gw("GET", prefix + "lab?a=1", {"Accept": "text/html"})
        login = (c.url + "/login?next=" +
                 urllib.parse.quote(c.session_url + prefix + "lab?a=1", safe=""))
        check("a browser without a token is sent to the API's login page, coming back",
              status == 303 and headers.get("location") == login, (status, headers, login))
        status, headers, _ = http_request(c, "PUT", prefix + "x?y=1", bearer(alice), "{}")
        check("the API redirects old session links to the gateway (307, method kept)",
              status == 307 and headers.get("location") == c.session_url + prefix + "x?y=1",
              (status, headers))
        status, headers, _ = gw("GET", prefix[:-1] + "?x=1", bearer(alice))
        check("/sessions/ID redirects to /sessions/ID/",
              status == 301 and headers.get("location") == prefix + "?x=1", (status, headers))

        # The login cookie: set by POST /api/v1/login, HttpOnly and SameSite=Strict.
        status, _, text = http_request(c, "GET", "/login")
        check("GET /login is a page that posts to /api/v1/login",
              status == 200 and "/api/v1/login" in text, status)
        status, headers, text = http_request(
            c, "POST", "/api/v1/login", {"Content-Type": "application/json"},
            json.dumps({"token": alice, "next": "//evil.example/"}))
        cookie = headers.get("set-cookie", "")
        check("login sets an HttpOnly SameSite=Strict cookie and never redirects off-site",
              status == 200 and cookie.startswith("corral_token=" + alice + ";") and
              "HttpOnly" in cookie and "SameSite=Strict" in cookie and
              json.loads(text).get("next") == "/", (status, headers, text))
        status, _, text = http_request(c, "POST", "/api/v1/login",
                                       {"Content-Type": "application/json"},
                                       json.dumps({"token": alice, "next": prefix}))
        check("login keeps a local next", status == 200 and json.loads(text)["next"] == prefix,
              text)
        for target, kept in ((c.session_url + prefix, True),
                             (f"http://127.0.0.1:{c.session_port}@evil.example/", False),
                             ("http://evil.example" + prefix, False)):
            status, _, text = http_request(c, "POST", "/api/v1/login",
                                           {"Content-Type": "application/json"},
                                           json.dumps({"token": alice, "next": target}))
            check(f"login {'keeps' if kept else 'refuses'} next {target}",
                  status == 200 and json.loads(text)["next"] == (target if kept else "/"), text)
        status, _, _ = http_request(c, "POST", "/api/v1/login",
                                    {"Content-Type": "application/json"},
                                    json.dumps({"token": "crl_wrong"}))
        check("login with a bad token -> 401", status == 401, status)
        status, _, text = gw("GET", prefix,
                                       {"Cookie": f"theme=dark; corral_token={alice}"})
        check("the login cookie passes; the app gets the other cookies, not corral's",
              status == 200 and "authed=True" in text and "cookie=theme=dark " in text and
              alice not in text, (status, text))
        status, _, _ = gw("GET", prefix, {"Cookie": f"corral_token={bob}"})
        check("another user's cookie -> 404", status == 404, status)
        status, _, text = gw(
            "GET", prefix, {"Cookie": f"corral_token={bob}; corral_token={alice}"})
        check("two corral_token cookies (one a page's own) -> 401, neither trusted",
              status == 401 and "more than one corral_token" in text, (status, text))
        status, headers, _ = http_request(c, "POST", "/api/v1/logout", {"Origin": c.url})
        check("logout clears the cookie",
              status == 200 and "Max-Age=0" in headers.get("set-cookie", ""), headers)
        status, headers, _ = http_request(c, "POST", "/api/v1/logout",
                                          {"Origin": "https://evil.example"})
        check("another site cannot log anyone out (403, no cookie cleared)",
              status == 403 and "set-cookie" not in headers, (status, headers))
        status, headers, _ = http_request(
            c, "POST", "/api/v1/login", {"Content-Type": "application/json",
                                         "Sec-Fetch-Site": "cross-site"},
            json.dumps({"token": alice}))
        check("another site cannot log anyone in (403, no cookie)",
              status == 403 and "set-cookie" not in headers, (status, headers))

        # WebSockets through the gateway: the handshake, then bytes both ways.
        def handshake(origin):
            sock = socket.create_connection((c.host, c.session_port), timeout=10)
            sock.sendall((f"GET {prefix}api/kernels/1/channels HTTP/1.1\r\n"
                          f"Host: {c.host}:{c.session_port}\r\nOrigin: {origin}\r\n"
                          f"Cookie: corral_token={alice}\r\nConnection: Upgrade\r\n"
                          "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                          "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n").encode())
            head = b""
            while b"\r\n\r\n" not in head:
                data = sock.recv(4096)
                if not data:
                    break
                head += data
            return sock, head.decode(errors="replace")
        sock, head = handshake(c.session_url)
        echoed = b""
        try:
            if head.startswith("HTTP/1.1 101"):
                for message in (b"hello kernel", b"x" * 200000):
                    sock.sendall(message)
                    got = b""
                    while len(got) < len(message):
                        data = sock.recv(65536)
                        if not data:
                            break
                        got += data
                    echoed += got
        finally:
            sock.close()
        check("a WebSocket through the gateway: 101, then bytes echoed both ways",
              head.startswith("HTTP/1.1 101") and "upgrade: websocket" in head.lower() and
              echoed == b"hello kernel" + b"x" * 200000, (head, len(echoed)))
        sock, head = handshake("https://evil.example")
        sock.close()
        check("a WebSocket from another site's page -> 403 (CSWSH)",
              head.startswith("HTTP/1.1 403"), head)

        # Caps: a session has at most 4 connections open through the gateway (this server's
        # --session-max-connections-per-session); a fifth gets 503 with Retry-After.
        app_url = f"http://127.0.0.1:{s.get('port')}{prefix}"
        direct_get = lambda what: urllib.request.urlopen(  # noqa: E731
            f"{app_url}{what}?token={s['token']}", timeout=10).read().decode()
        held_answers = []

        def hold():
            # A connection of the checks above may still hold its place until the gateway's
            # thread sees its close: a 503 then says "retry" (Retry-After), as clients do.
            deadline = time.monotonic() + 20
            while True:
                status = gw("GET", prefix + "hold", bearer(alice))[0]
                if status != 503 or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            held_answers.append(status)
        holders = [threading.Thread(target=hold) for _ in range(4)]
        for t in holders:
            t.start()
        four = wait_for(lambda: direct_get("held") == "4", 20)
        status, headers, text = gw("GET", prefix + "tree", bearer(alice))
        check("a session's fifth connection at once -> 503 with Retry-After",
              four and status == 503 and headers.get("retry-after") == "1" and
              "connections open" in text, (four, status, headers, text))
        direct_get("release")
        for t in holders:
            t.join(30)
        check("the four held requests are answered once the app lets them go",
              held_answers == [200] * 4, held_answers)

        # The direct URL: the app's own token check, on the node.
        direct = s.get("direct_url") or ""
        try:
            with urllib.request.urlopen(direct, timeout=10) as r:
                direct_text = r.read().decode()
        except Exception as e:  # noqa: BLE001
            direct_text = repr(e)
        check("the direct URL reaches the app with the session token",
              direct.startswith(f"http://127.0.0.1:{s.get('port')}{prefix}?token=") and
              "authed=True" in direct_text, (direct, direct_text))

        out = c.cli("session", "list", token=alice)
        check("corral session list shows it",
              out.returncode == 0 and re.search(rf"^{sid} .* running .* n1 ", out.stdout, re.M),
              out.stdout + out.stderr)
        out = c.cli("session", "show", str(sid), "-o", "json", token=alice)
        shown = json.loads(out.stdout) if out.returncode == 0 else {}
        check("corral session show: last activity, no idle notice (timeout 0)",
              shown.get("last_activity") and shown.get("idle_notice") is None and
              shown.get("idle_timeout_s") == 0, out.stdout + out.stderr)
        out = c.cli("session", "show", str(sid), token=bob)
        check("another user's session show -> exit 3", out.returncode == 3, out.stderr)
        out = c.cli("session", "start", "--environment", "jupyter", "--idle-timeout", "10s",
                    token=alice)
        check("--idle-timeout under a minute -> exit 2 naming it",
              out.returncode == 2 and "--idle-timeout" in out.stderr, out.stderr)
        out = c.cli("session", "start", token=alice)
        check("session start without an environment or command -> exit 2", out.returncode == 2,
              out.stderr)
        status, body = c.api("POST", "/api/v1/sessions",
                             {"command": ["x"], "session": {"idle_timeout_s": 5}}, token=alice)
        check("a bad session spec -> 400 naming the field",
              status == 400 and "session.idle_timeout_s" in body.get("detail", ""), (status, body))
        status, body = c.api("POST", "/api/v1/sessions",
                             {"command": ["x"], "env": {"CORRAL_SESSION_TOKEN": "x"}}, token=alice)
        check("session variables are reserved",
              status == 400 and "CORRAL_SESSION_TOKEN" in body.get("detail", ""), (status, body))

        out = c.cli("session", "stop", str(sid), token=bob)
        check("another user cannot stop it (exit 3)", out.returncode == 3, out.stderr)
        out = c.cli("session", "stop", str(sid), token=alice)
        check("corral session stop", out.returncode == 0 and
              out.stdout.strip() == f"stopping session {sid}", out.stdout + out.stderr)
        check("the stopped session ends cancelled", c.wait_state(sid, ("cancelled",), 30),
              c.job(sid))
        status, _, text = gw("GET", prefix, bearer(alice))
        check("a stopped session's gateway -> 503 saying its state",
              status == 503 and "cancelled" in text, (status, text))
        out = c.cli("session", "stop", str(sid), token=alice)
        check("stopping it again -> exit 5", out.returncode == 5, out.stderr)

        # Idle: this server's default timeout is 3 s with a 2 s notice. Two identical apps but
        # for Jupyter's api/status, which says the one in use (as through the direct URL). Their
        # fake GPUs idle (busy GPUs would count as use: docs/monitoring.md).
        idle_gpu = ["--env", "FAKE_GPU_UTILIZATION=0"]
        out = c.cli("session", "start", "--gpus", "1", *idle_gpu, "-o", "json", "--",
                    "/usr/bin/python3", "-c", SESSION_APP, "status", token=alice)
        busy = json.loads(out.stdout)["id"] if out.returncode == 0 else None
        out = c.cli("session", "start", "--gpus", "1", *idle_gpu, "-o", "json", "--",
                    "/usr/bin/python3", "-c", SESSION_APP, token=alice)
        idle = json.loads(out.stdout)["id"] if out.returncode == 0 else None
        check("an idle session is stopped", idle and c.wait_state(idle, ("cancelled",), 60),
              out.stderr + json.dumps(c.job(idle) if idle else {}))
        busy_job = c.job(busy) if busy else {}
        check("one whose app says it is in use (api/status) runs on, without a notice",
              busy_job.get("state") == "running" and
              not any("idle" in e["reason"] for e in busy_job.get("events", [])), busy_job)
        reasons = [e["reason"] for e in c.job(idle)["events"]] if idle else []
        notice = [r for r in reasons if re.fullmatch(
            r"session idle for \d+ s: stopping in 2 s unless used", r)]
        check("after a notice in its history, with the reason",
              notice and reasons.index(notice[0]) < len(reasons) - 1 and
              re.fullmatch(r"session idle for \d+ s", c.job(idle)["reason"]), reasons)
    finally:
        # Tasks outlive their agent (by design): stop what still runs before the agent goes.
        status, active = c.api("GET", "/api/v1/jobs?all=1&state=pending,starting,running")
        for job in active if status == 200 else []:
            c.api("POST", f"/api/v1/jobs/{job['id']}/cancel", {})
            c.wait_state(job["id"], ("cancelled", "failed", "succeeded"), 20)
        c.stop()


# This run's image and CDI kind: two runs on one host (a CI run beside a developer's) must not
# share them. CDI refuses a kind two spec files define ("unresolvable CDI devices"), and one
# run's clean-up would remove the other's image.
CONTAINER_IMAGE = f"corral-e2e/busybox:{os.getpid()}"
CDI_KIND = f"e2e{os.getpid()}.corral/gpu"


def shell_job_id(stderr):
    """The job id `corral shell` names on stderr ("corral shell: job N submitted")."""
    found = re.search(r"corral shell: job (\d+) submitted", stderr)
    return int(found.group(1)) if found else None


def test_interactive_shell(root):
    """`corral shell` is a job whose task runs a shell on a pty, reached through the session
    gateway: fed by a pipe it runs the lines with the job's GPUs and exits with the shell's code,
    and the job ends with it; another user cannot attach; `corral cancel` ends a shell; with a
    real tty (script), Ctrl-C stops what runs in the shell and the shell goes on."""
    c = Cluster(os.path.join(root, "shell"))

    def shell(*args, token, stdin, timeout=60):
        env = dict(os.environ, CORRAL_SERVER=c.url, CORRAL_TOKEN=token, HOME=c.root)
        return subprocess.run([CORRAL, "shell", *args], env=env, capture_output=True,
                              input=stdin, timeout=timeout, cwd=c.root)
    try:
        c.start_agent("n1", "2xT4", extra=("--address", "127.0.0.1"))
        check("agent joins", c.wait_nodes(1))
        alice = c.api("POST", "/api/v1/users", {"name": "alice"})[1]["token"]
        bob = c.api("POST", "/api/v1/users", {"name": "bob"})[1]["token"]

        out = shell("--gpus", "1", token=alice,
                    stdin=b'echo "GPUS=[$CUDA_VISIBLE_DEVICES] IN=$(pwd)"; exit 3\n')
        text = out.stdout.decode(errors="replace")
        job = shell_job_id(out.stderr.decode(errors="replace"))
        check("corral shell --gpus 1 fed by a pipe: the shell sees one GPU and the submit folder, "
              "and corral exits with the shell's code",
              out.returncode == 3 and re.search(r"GPUS=\[[01]\] IN=" + re.escape(c.root), text),
              (out.returncode, text, out.stderr))
        c.wait_state(job, ("failed",), 30)
        view = c.job(job) if job else {}
        check("the shell is a job of its user, ended failed with the shell's code",
              view.get("state") == "failed" and view.get("user") == "alice" and
              view["tasks"][0].get("exit_code") == 3, view)
        shown = c.cli("job", "show", str(job), "-o", "json", token=alice)
        check("job show -o json says so too",
              shown.returncode == 0 and json.loads(shown.stdout).get("state") == "failed",
              shown.stdout + shown.stderr)

        out = shell("--", "sh", "-c", "read line; echo \"got $line\"", token=alice,
                    stdin=b"hello\n")
        job = shell_job_id(out.stderr.decode(errors="replace"))
        check("a command after -- runs on the pty instead of the login shell; exit 0 succeeds",
              out.returncode == 0 and "got hello" in out.stdout.decode(errors="replace") and
              c.wait_state(job, ("succeeded",), 10), (out.returncode, out.stdout, out.stderr))
        started = time.monotonic()
        out = shell("--", "sh", "-c", "sleep 600 & exit 4", token=alice, stdin=b"", timeout=30)
        took = time.monotonic() - started
        check("the shell exiting ends corral shell at once though a background job holds the pty",
              out.returncode == 4 and took < 15, (out.returncode, took, out.stdout, out.stderr))
        out = shell(token=alice, stdin=b"echo bye\n")
        check("the end of stdin ends the login shell (Ctrl-D)",
              out.returncode == 0 and "bye" in out.stdout.decode(errors="replace"),
              (out.returncode, out.stdout, out.stderr))

        # A shell nobody attached to yet: another user cannot attach; cancel ends it.
        status, body = c.api("POST", "/api/v1/sessions",
                             {"session": {"shell": True, "idle_timeout_s": 0}}, token=alice)
        sid = body.get("id") if status == 201 else None
        check("a shell job through the API", status == 201 and c.wait_state(sid, ("running",), 30),
              (status, body))
        handshake = {"Connection": "Upgrade", "Upgrade": "websocket",
                     "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
        status, _, text = http_request(c, "GET", f"/sessions/{sid}/",
                                       {**handshake, "Authorization": "Bearer " + bob},
                                       port=c.session_port)
        check("another user's token cannot attach (the gateway answers 404, as for any session)",
              status == 404, (status, text))
        status, _, text = wait_for(lambda: (lambda r: r if r[0] != 502 else None)(
            http_request(c, "GET", f"/sessions/{sid}/", {"Authorization": "Bearer " + alice},
                         port=c.session_port)), 10) or (None, None, None)
        check("the owner's request without a WebSocket handshake is refused by the pty server",
              status == 400 and "WebSocket" in text, (status, text))
        out = c.cli("cancel", str(sid), token=alice)
        check("corral cancel ends a shell", out.returncode == 0 and
              c.wait_state(sid, ("cancelled",), 30), (out.stdout, out.stderr, c.job(sid)))

        # The client going away hangs the shell up, and the job ends with it.
        log = os.path.join(c.root, "shell-killed.stderr")
        with open(log, "wb") as err:
            p = subprocess.Popen([CORRAL, "shell", "--", "sleep", "1000"], stdin=subprocess.PIPE,
                                 stdout=subprocess.DEVNULL, stderr=err, cwd=c.root,
                                 env=dict(os.environ, CORRAL_SERVER=c.url, CORRAL_TOKEN=alice,
                                          HOME=c.root))
        attached = wait_for(lambda: b"attached" in open(log, "rb").read(), 30)
        p.kill()
        p.wait()
        job = shell_job_id(open(log, "rb").read().decode(errors="replace"))
        ended = job and c.wait_state(job, ("failed",), 30)
        check("a client killed while attached: the shell is hung up (SIGHUP) and the job ends",
              attached and ended and c.job(job)["tasks"][0].get("exit_code") == 129,
              (attached, job and c.job(job)))

        # A real terminal: script(1) gives corral a pty; Ctrl-C reaches the remote shell as a
        # byte and stops the sleep in it; the shell goes on.
        if shutil.which("script"):
            env = dict(os.environ, CORRAL_SERVER=c.url, CORRAL_TOKEN=alice, HOME=c.root,
                       SHELL="/bin/sh")
            p = subprocess.Popen(["script", "-qec",
                                  f"{CORRAL} shell -- env 'PS1=shell-prompt> ' /bin/sh -i",
                                  "/dev/null"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, env=env, cwd=c.root)
            seen = b""
            lock = threading.Lock()

            def reader():
                nonlocal seen
                while True:
                    chunk = p.stdout.read1(4096)
                    if not chunk:
                        return
                    with lock:
                        seen += chunk
            threading.Thread(target=reader, daemon=True).start()

            def saw(pattern):
                with lock:
                    return re.search(pattern, seen) is not None
            p.stdin.write(b"stty size; echo STARTED; sleep 100\n")
            p.stdin.flush()
            started = wait_for(lambda: saw(rb"[\r\n]STARTED"), 30)
            prompts = lambda: len(re.findall(rb"shell-prompt> ", seen))  # noqa: E731
            before = prompts()
            p.stdin.write(b"\x03")
            p.stdin.flush()
            # The interrupted shell prompts again; then it reads the next line.
            wait_for(lambda: prompts() > before, 30)
            # A resize of corral's terminal (the kernel sends it SIGWINCH) reaches the remote pty.
            before = prompts()
            p.stdin.write(b"echo back $?\n")
            p.stdin.flush()
            wait_for(lambda: prompts() > before, 30)
            cli = [pid for pid in os.listdir("/proc") if pid.isdigit() and
                   proc_cmdline(pid).startswith(
                       CORRAL.encode() + b"\0shell\0--\0env\0PS1=shell-prompt")]
            if cli:
                subprocess.run(["stty", "-F", f"/proc/{cli[0]}/fd/0", "cols", "132", "rows", "43"])
            # stty's ioctl raises corral's SIGWINCH before it returns, and corral sends what
            # signals ask before the bytes it reads in the same turn: one `stty size` suffices.
            p.stdin.write(b"stty size\n")
            p.stdin.flush()
            wait_for(lambda: saw(rb"[\r\n ]43 132\r?\n"), 10)
            p.stdin.write(b"exit 5\n")
            p.stdin.flush()
            try:
                code = p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                code = None
            with lock:
                text = seen.decode(errors="replace")
            check("with a tty: Ctrl-C stops the sleep inside (130), the shell goes on and its "
                  "exit code comes back", started and code == 5 and
                  re.search(r"back 130", text) is not None, (code, text))
            check("with a tty: the remote pty has the terminal's size, and follows its resize",
                  re.search(r"[\r\n ]24 80\r?\n", text) is not None and
                  re.search(r"[\r\n ]43 132\r?\n", text) is not None, text)
    finally:
        c.stop()


def container_setup(root):
    """What a container job needs on this machine, or None with the reason to skip: root, podman
    with runc, busybox; a busybox image imported from a rootfs (no registry is reachable), a
    containers.conf for this machine (docs/container-runtime.md) and a CDI spec for the fake
    GPUs. Returns (env for the agent, CDI kind, cleanup)."""
    if os.geteuid() != 0:
        return None, "not root"
    missing = [t for t in ("podman", "runc", "busybox") if shutil.which(t) is None]
    if missing:
        return None, "missing " + ", ".join(missing) + " (scripts/bootstrap.sh installs them)"
    conf = os.path.join(root, "containers.conf")
    with open(conf, "w") as f:
        f.write('[containers]\ndefault_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]\n'
                '[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\n'
                'events_logger = "file"\n')
    env = dict(os.environ, CONTAINERS_CONF=conf)
    rootfs = os.path.join(root, "rootfs")
    os.makedirs(os.path.join(rootfs, "bin"), exist_ok=True)
    shutil.copy(shutil.which("busybox"), os.path.join(rootfs, "bin", "busybox"))
    for applet in ("sh", "ls", "cat", "id", "echo", "sleep", "touch"):
        os.symlink("busybox", os.path.join(rootfs, "bin", applet))
    tar = subprocess.Popen(["tar", "-C", rootfs, "-c", "."], stdout=subprocess.PIPE)
    imported = subprocess.run(["podman", "import", "-", CONTAINER_IMAGE], stdin=tar.stdout,
                              env=env, capture_output=True, text=True)
    tar.wait()
    if imported.returncode != 0:
        return None, "podman import failed: " + imported.stderr
    kind = CDI_KIND
    cdi = f"/var/run/cdi/corral-e2e-{os.getpid()}.yaml"
    os.makedirs("/var/run/cdi", exist_ok=True)
    with open(cdi, "w") as f:
        f.write(f'cdiVersion: "0.5.0"\nkind: {kind}\ndevices:\n')
        for i in range(2):
            device = os.path.join(root, f"gpu{i}")
            open(device, "w").close()
            f.write(f'  - name: "{i}"\n    containerEdits:\n      mounts:\n'
                    f'        - hostPath: {device}\n          containerPath: /dev/corral-gpu{i}\n'
                    '          options: ["bind", "ro"]\n')

    def cleanup():
        os.remove(cdi)
        subprocess.run(["podman", "rmi", "-f", CONTAINER_IMAGE], env=env,
                       capture_output=True)
    return (env, kind, cleanup), ""


def let_task_users_through(*dirs):
    """mkdtemp makes 0700 directories: tasks running as another user could not reach their
    workdirs under them. Enterable, not listable."""
    for d in dirs:
        os.chmod(d, 0o711)


def write_user_map(directory, text):
    """An agent's --task-user-map file: root's, writable by no one else, as the agent asks."""
    path = os.path.join(directory, "users.map")
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o644)
    return path


def test_tasks_run_as_their_submitters(root):
    """An agent with --run-as-submitter runs each task as its submitter's Unix user (through a
    user map), and refuses root and unknown users with a reason naming them."""
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        nobody = None
    if os.geteuid() != 0 or nobody is None:
        print("SKIP test_tasks_run_as_their_submitters: needs root and the user 'nobody'")
        return
    c = Cluster(os.path.join(root, "run-as"))
    let_task_users_through(root, c.root)
    try:
        user_map = write_user_map(c.root, "# corral user  Unix user\nmona nobody\n")
        c.start_agent("n1", "2xT4", user_map=user_map)
        check("run as submitter: the agent joins", c.wait_nodes(1))
        tokens = {}
        for name in ("mona", "root", "corral-nobody-here"):
            status, body = c.api("POST", "/api/v1/users", {"name": name})
            tokens[name] = body.get("token") if status == 201 else None
        check("run as submitter: users are created", all(tokens.values()), tokens)
        spec = {"command": ["sh", "-c", "id -u; echo $HOME"], "resources": {"gpus": 1}}
        mona = submit(c, spec, token=tokens["mona"])
        ended = c.wait_state(mona, ("succeeded", "failed"), 30)
        log = c.cli("logs", str(mona), token=tokens["mona"]).stdout.split()
        check("run as submitter: mona's task ran as the Unix user the map gives her",
              ended and c.job(mona)["state"] == "succeeded"
              and log == [str(nobody.pw_uid), nobody.pw_dir], (c.job(mona), log))
        for name, why in (("root", "uid 0 is under the agent's --min-task-uid 1000"),
                          ("corral-nobody-here", "no such user on this node")):
            job = submit(c, spec, token=tokens[name])
            ended = c.wait_state(job, ("failed",), 30)
            view = c.job(job)
            check(f"run as submitter: {name}'s task fails naming why",
                  ended and f"cannot run as submitter '{name}'" in view.get("reason", "")
                  and why in view.get("reason", ""), view)
    finally:
        c.stop()


def test_container_environment(root):
    """An image-only environment is refused while only process nodes exist, then runs in
    a real podman container on the node with an engine: it sees its GPU only, its workdir, its
    variables, and runs as its submitter's Unix user."""
    c = Cluster(os.path.join(root, "container"))
    setup, why = container_setup(c.root)
    if setup is None:
        print("SKIP test_container_environment:", why)
        c.stop()
        return
    env, kind, cleanup = setup
    try:
        c.start_agent("plain", "2xT4", extra=("--container-engine", "none"))
        check("a process-only agent joins", c.wait_nodes(1))
        nodes = {n["name"]: n for n in c.api("GET", "/api/v1/nodes")[1]}
        status, _ = c.api("POST", "/api/v1/environments",
                          {"name": "boxed", "image": CONTAINER_IMAGE,
                           "env": {"FROM_ENV": "boxed-env"}})
        check("an image-only environment is created", status == 201, status)
        workdir = os.path.join(c.root, "shared")
        os.makedirs(workdir, exist_ok=True)
        os.chmod(workdir, 0o777)
        spec = {"environment": "boxed", "workdir": workdir, "resources": {"gpus": 1},
                "command": ["sh", "-c",
                            "ls /dev | grep corral-gpu; echo CUDA=$CUDA_VISIBLE_DEVICES;"
                            " echo $FROM_ENV; id -u; touch in-container"]}
        status, body = c.api("POST", "/api/v1/jobs", spec)
        check("with no container node the job is refused, saying it needs a container engine",
              status == 400 and "field 'environment': needs a container engine" in
              body.get("detail", ""), (status, body))
        # Its tasks run as their submitters: the admin's as 'nobody', who must be able to open
        # the workdir itself (the engine mounts what the task's user opened).
        let_task_users_through(root, c.root)
        user_map = write_user_map(c.root, "admin nobody\n")
        c.start_agent("engine", "2xT4",
                      extra=("--container-engine", shutil.which("podman"), "--cdi-kind", kind),
                      env=env, user_map=user_map)
        check("an agent with podman joins", c.wait_nodes(2))
        nodes = {n["name"]: n for n in c.api("GET", "/api/v1/nodes")[1]}
        check("it reports the container runtime",
              "container" in nodes["engine"].get("runtimes", []), nodes["engine"])
        job = submit(c, spec)
        ok = c.wait_state(job, ("succeeded", "failed"), 60)
        view = c.job(job)
        log = c.cli("logs", str(job)).stdout
        check("the job ran in a container on the engine node",
              ok and view["state"] == "succeeded" and view["tasks"][0]["node"] == "engine",
              (view, log))
        lines = log.split()
        check("it saw exactly one GPU device and CUDA ordinal 0",
              len([l for l in lines if l.startswith("corral-gpu")]) == 1 and "CUDA=0" in lines,
              log)
        check("the environment's variable arrived", "boxed-env" in lines, log)
        check("it ran as its submitter's Unix user",
              str(pwd.getpwnam("nobody").pw_uid) in lines and str(os.getuid()) not in lines, log)
        check("it wrote into its workdir on the host",
              os.path.exists(os.path.join(workdir, "in-container")), os.listdir(workdir))
    finally:
        c.stop()
        cleanup()


def test_in_job_channel(root):
    """docs/in-job.md: a task reports metrics and its checkpoint with `corral job report` and
    `corral job checkpoint` and nothing but what corral gave it; its job token reads and reports
    on its own job only (403 elsewhere) and stops working when the job ends (401); a cancelled
    task finds the stop file, with the reason and the grace it has, before its SIGKILL."""
    work = os.path.join(root, "channel")
    checkpoints = os.path.join(work, "checkpoints")
    os.makedirs(checkpoints)
    c = Cluster(work, server_args=["--checkpoint-root", checkpoints])
    try:
        c.start_agent("n1", "2xT4")
        check("agent joins", c.wait_nodes(1))
        # The job keeps its token in a file for the test, then waits to be told to end.
        script = (f'{CORRAL} job report loss=0.5 step=3 phase=warmup && '
                  f'{CORRAL} job checkpoint "$CORRAL_CHECKPOINT_DIR/c1" --step 3 && '
                  'echo "$CORRAL_JOB_TOKEN" > token.tmp && mv token.tmp token && '
                  'for i in $(seq 600); do [ -e done ] && exit 0; sleep 0.1; done; exit 1')
        job = submit(c, {"command": ["sh", "-c", script], "workdir": work})
        other = submit(c, {"command": ["sleep", "60"], "workdir": work})
        token_file = os.path.join(work, "token")
        check("the job reports and checkpoints from inside", wait_for(
            lambda: os.path.exists(token_file), 30), c.job(job).get("events"))
        token = open(token_file).read().strip()
        view = c.job(job)
        check("the job shows its metrics, checkpoint and checkpoint folder",
              view.get("metrics") == {"loss": 0.5, "step": 3, "phase": "warmup"}
              and view.get("checkpoint", {}).get("path") == os.path.join(checkpoints, str(job), "c1")
              and view["checkpoint"].get("step") == 3
              and view.get("checkpoint_dir") == os.path.join(checkpoints, str(job))
              and isinstance(view.get("metrics_at"), int), view)
        status, series = c.api("GET", f"/api/v1/jobs/{job}/metrics")
        check("the metric history has the numbers", status == 200 and
              [p[1] for p in series["series"]["loss"]] == [0.5], series)
        check("the checkpoint folder is the task user's, 0700",
              os.stat(os.path.join(checkpoints, str(job))).st_mode & 0o777 == 0o700)
        status, own = c.api("GET", f"/api/v1/jobs/{job}", token=token)
        check("the job token reads its own job", status == 200 and own["id"] == job, own)
        for method, path, body in (("GET", "/api/v1/jobs", None),
                                   ("GET", f"/api/v1/jobs/{other}", None),
                                   ("POST", "/api/v1/jobs", {"command": ["true"]}),
                                   ("POST", f"/api/v1/jobs/{other}/report", {"metrics": {"x": 1}})):
            status, answer = c.api(method, path, body, token=token)
            check(f"the job token may not {method} {path}", status == 403 and
                  "only read and report on its own job" in str(answer), (status, answer))
        open(os.path.join(work, "done"), "w").close()
        check("the job ends", c.wait_state(job, ("succeeded",), 30), c.job(job))
        status, answer = c.api("GET", f"/api/v1/jobs/{job}", token=token)
        check("once the job has ended its token is refused: 401", status == 401, (status, answer))

        # A cancelled task sees the stop file before its SIGKILL: reason and grace.
        seen = os.path.join(work, "stop-seen.json")
        waiter = ('trap "" TERM; echo ready; while [ ! -e "$CORRAL_STOP_FILE" ]; do sleep 0.05; '
                  'done; cat "$CORRAL_STOP_FILE" > stop-seen.tmp && mv stop-seen.tmp stop-seen.json')
        stopped = submit(c, {"command": ["sh", "-c", waiter], "workdir": work})
        check("the waiting job runs", c.wait_state(stopped, ("running",), 30), c.job(stopped))
        check("it is ready", wait_for(lambda: "ready" in c.cli("logs", str(stopped)).stdout, 30))
        c.api("POST", f"/api/v1/jobs/{stopped}/cancel", {})
        check("the task wrote what the stop file says", wait_for(lambda: os.path.exists(seen), 30))
        stop = json.load(open(seen)) if os.path.exists(seen) else {}
        check("the stop file gives the reason and the grace (the server's --kill-grace)",
              "cancelled" in stop.get("reason", "") and stop.get("grace_s") == 10
              and stop.get("deadline", 0) >= time.time() - 60, stop)
        check("the cancelled job ends", c.wait_state(stopped, ("cancelled",), 30), c.job(stopped))
    finally:
        c.stop()


def test_elastic_live(root):
    """Issue 20, point 5 (docs/control-plane.md, "Elastic jobs"): on `corral dev` with 8 fake
    GPUs, an elastic `--gpus 2-8` job alone starts at 8; a 4-GPU job arrives and the elastic job
    shrinks to 4 (no preemption) within the bound, one scheduling pass + the job's stop grace +
    one heartbeat, measured and printed; when the 4-GPU job ends, the elastic job grows back to 8
    once --resize-interval has passed. `corral job show` shows each resize with its reason."""
    dev = Dev(root, "elastic-dev", "--fake-gpus", "8xA100-80GB", "--metrics-interval", "0",
              "--resize-interval", "2s")
    data, cli = dev.data, dev.cli
    elastic = None
    try:
        check("corral dev comes up", dev.up)

        def job(i):
            out = cli("job", "show", str(i), "-o", "json")
            return json.loads(out.stdout) if out.returncode == 0 else {}

        def reasons(i):
            return [e.get("reason", "") for e in job(i).get("events", [])]
        # Each generation notes its GPUs (a process task's CUDA_VISIBLE_DEVICES: their indices),
        # then runs until it is told to stop (SIGTERM: at once).
        sizes = os.path.join(data, "sizes.txt")
        script = (f'echo "$CORRAL_GENERATION $CUDA_VISIBLE_DEVICES" >> {sizes}; '
                  'trap "exit 0" TERM; while true; do sleep 0.05; done')
        out = cli("submit", "--gpus", "2-8", "-o", "json", "--shell", "--", script)
        elastic = json.loads(out.stdout)["id"] if out.returncode == 0 else None
        check("an elastic --gpus 2-8 job is accepted", elastic is not None, out.stdout + out.stderr)

        def runs():
            if not os.path.exists(sizes):
                return []
            return [line.split() for line in open(sizes).read().splitlines() if line.strip()]

        def gpus_of(run):
            return sorted(run[1].split(",")) if len(run) > 1 else []
        check("alone, it starts at 8 GPUs", wait_for(
            lambda: job(elastic).get("state") == "running" and len(runs()) == 1
            and len(gpus_of(runs()[0])) == 8, 30), (job(elastic), runs()))
        check("its view says elastic 2-8, now 8, no resize",
              job(elastic).get("elastic", {}).get("now") == 8 and job(elastic).get("resizes") == 0,
              job(elastic))
        check("its start says its size", any(r.startswith("started at 8 GPUs")
                                             for r in reasons(elastic)), reasons(elastic))

        # A 4-GPU job arrives: the elastic job gives back 4 before anyone is preempted.
        rigid_gpus = os.path.join(data, "rigid-gpus.txt")
        gate = os.path.join(data, "gate")
        rigid_script = (f'echo "$CUDA_VISIBLE_DEVICES" > {rigid_gpus}.tmp && '
                        f'mv {rigid_gpus}.tmp {rigid_gpus}; '
                        f'while [ ! -e {gate} ]; do sleep 0.05; done')
        arrived = time.monotonic()
        out = cli("submit", "--gpus", "4", "-o", "json", "--shell", "--", rigid_script)
        rigid = json.loads(out.stdout)["id"] if out.returncode == 0 else None
        check("the 4-GPU job is accepted", rigid is not None, out.stdout + out.stderr)
        started = wait_for(lambda: os.path.exists(rigid_gpus), 60)
        took = time.monotonic() - arrived
        # The bound: one pass (the loop runs one at once on a submission, at least every 1 s),
        # the elastic job's stop grace (corral dev's kill grace, 10 s; this job stops at once)
        # and one heartbeat (5 s) for its old run's end to be heard.
        bound = 1 + 10 + 5
        print(f"   the 4-GPU job started {took:.2f} s after its submission "
              f"(bound {bound} s: pass + stop grace + heartbeat)", flush=True)
        check("the 4-GPU job starts within the bound", started and took < bound, took)
        rigid_has = (open(rigid_gpus).read().split() or [""])[0].split(",") if started else []
        check("the elastic job runs on at 4 GPUs, disjoint from the 4-GPU job's 4", wait_for(
            lambda: len(runs()) == 2 and len(gpus_of(runs()[1])) == 4 and len(rigid_has) == 4
            and not set(gpus_of(runs()[1])) & set(rigid_has), 30), (runs(), rigid_has))
        view = job(elastic)
        check("it stayed running: a new generation, now 4, one resize",
              view.get("state") == "running" and view.get("elastic", {}).get("now") == 4
              and view.get("resizes") == 1 and runs()[1][0] == "2", (view, runs()))
        check("the shrink is an event with its reason", any(
            r.startswith("resized from 8 to 4 GPUs: a pending job needs them")
            for r in reasons(elastic)), reasons(elastic))
        check("nothing was preempted", not any("preempted" in r for r in
                                               reasons(elastic) + reasons(rigid)),
              (reasons(elastic), reasons(rigid)))
        check("the elastic job never went back to pending", not any(
            e.get("to_state") == "pending" and e.get("from_state")
            for e in job(elastic).get("events", [])), job(elastic).get("events"))

        # The 4-GPU job ends: the elastic job grows back to 8 (after --resize-interval).
        open(gate, "w").close()
        check("the 4-GPU job ends", wait_for(lambda: job(rigid).get("state") == "succeeded", 30),
              job(rigid))
        check("the elastic job grows back to 8 GPUs", wait_for(
            lambda: len(runs()) == 3 and len(gpus_of(runs()[2])) == 8, 30), runs())
        check("the growth is an event with its reason, and the view counts 2 resizes", wait_for(
            lambda: any(r.startswith("resized from 4 to 8 GPUs: idle GPUs")
                        for r in reasons(elastic)) and job(elastic).get("resizes") == 2
            and job(elastic).get("elastic", {}).get("now") == 8, 10),
            (reasons(elastic), job(elastic)))
        shown = cli("job", "show", str(elastic)).stdout
        check("corral job show says the size and each resize with its reason",
              "Elastic: 2-8 GPUs, now 8 (2 resizes)" in shown
              and "resized from 8 to 4 GPUs: a pending job needs them" in shown
              and "resized from 4 to 8 GPUs: idle GPUs" in shown, shown)
    finally:
        if elastic is not None and dev.up:  # its task ends before the agent does
            cli("cancel", str(elastic))
            wait_for(lambda: job(elastic).get("state") == "cancelled", 30)
        dev.stop()


def test_checkpoint_preemption(root):
    """docs/in-job.md, "Preemption and checkpoints": four borrowed jobs run; the owner's reclaim
    takes the two that just saved a checkpoint (least lost work; the oldest two, which --victims
    priority would spare), and the two without one keep running. Each victim is stopped with its
    own grace (capped by --max-checkpoint-grace) as its stop file says, and the little work they
    lost is shown in the job, its event and corral usage."""
    work = os.path.join(root, "ckpt-preempt")
    checkpoints = os.path.join(work, "checkpoints")
    marks = os.path.join(work, "marks")
    os.makedirs(checkpoints)
    os.makedirs(marks)
    # No victim before 7 s of run: the owner's job waits for that on the server, so the victims
    # lose the seconds since their checkpoint, fewer than the others since their start.
    min_run = 7
    c = Cluster(work, server_args=["--checkpoint-root", checkpoints,
                                   "--max-checkpoint-grace", "20s",
                                   "--min-run-before-preemption", f"{min_run}s"])
    try:
        c.start_agent("n1", "4xT4")
        check("agent joins", c.wait_nodes(1))
        c.api("POST", "/api/v1/projects", {"name": "owner"})
        out = c.cli("project", "set-quota", "owner", "--gpus", "2")
        check("the owner's quota", out.returncode == 0, out.stdout + out.stderr)
        # Each saves its stop file when stopped; checkpoints when the test says so.
        script = ('trap \'cp "$CORRAL_STOP_FILE" marks/$CORRAL_JOB_ID.json; exit 143\' TERM; '
                  'echo up; while true; do '
                  'if [ -e ckpt-$CORRAL_JOB_ID ] && [ ! -e saved-$CORRAL_JOB_ID ]; then '
                  f'{CORRAL} job checkpoint "$CORRAL_CHECKPOINT_DIR/c1" --step 1 && '
                  'touch saved-$CORRAL_JOB_ID; fi; sleep 0.1; done')
        borrowers = []
        for i in range(4):
            args = ["submit", "--gpus", "1", "--workdir", work, "-o", "json"]
            if i == 0:
                args += ["--checkpoint-grace", "1m"]  # over the server's cap of 20 s
            out = c.cli(*args, "--", "sh", "-c", script)
            check(f"corral submit borrower {i}", out.returncode == 0, out.stdout + out.stderr)
            borrowers.append(json.loads(out.stdout)["id"] if out.returncode == 0 else 0)
        check("four borrowed jobs run", all(c.wait_state(j, ("running",), 30) for j in borrowers),
              [c.job(j).get("state") for j in borrowers])
        started = max(c.job(j)["start_time"] for j in borrowers)

        # Lost work counts in whole seconds: the first two checkpoint (again, until the server
        # records it so) 2 s or more after the start, when the others have more to lose.
        def checkpointed_after(j, at):
            checkpoint = c.job(j).get("checkpoint")
            if checkpoint and checkpoint["time"] >= at:
                return True
            saved = os.path.join(work, f"saved-{j}")
            if os.path.exists(saved):
                os.remove(saved)  # its script checkpoints again
            return False
        for j in borrowers[:2]:
            open(os.path.join(work, f"ckpt-{j}"), "w").close()
        check("two jobs checkpointed", all(wait_for(
            lambda j=j: checkpointed_after(j, started + 2), 30) for j in borrowers[:2]))
        saved_at = max(c.job(j)["checkpoint"]["time"] for j in borrowers[:2])
        # At least 2 s between the checkpoints and the minimum run (counted from the placement,
        # up to a second before the start).
        check("the checkpoints came before the minimum run", saved_at <= started + min_run - 3,
              (saved_at, started))
        owner = submit(c, {"command": ["sh", "-c", "echo owner ran"], "project": "owner",
                           "resources": {"gpus": 2}})
        check("the owner's job runs", c.wait_state(owner, ("succeeded",), 60), c.job(owner))
        preempted = [j for j in borrowers
                     if any("preempted for job" in e["reason"] for e in c.job(j)["events"])]
        check("the two that just checkpointed were preempted", preempted == borrowers[:2],
              (preempted, borrowers))
        check("the two without a checkpoint kept running", all(
            c.job(j)["state"] == "running" and c.job(j)["restarts"] == 0 for j in borrowers[2:]),
            [c.job(j) for j in borrowers[2:]])
        stops = {}
        for j in borrowers[:2]:
            path = os.path.join(marks, f"{j}.json")
            wait_for(lambda p=path: os.path.exists(p) and os.path.getsize(p) > 0, 30)
            stops[j] = json.load(open(path)) if os.path.exists(path) else {}
        first, second = (stops[j] for j in borrowers[:2])
        check("the stop file gives the job's grace, capped by the server (20 s)",
              first.get("grace_s") == 20 and f"preempted for job {owner}" in first.get("reason", ""),
              first)
        check("a job that asked no grace gets the kill grace (10 s)",
              second.get("grace_s") == 10, second)
        view = c.job(borrowers[0])
        check("the job shows its lost work (since its checkpoint) and grace",
              2 <= view.get("lost_work_gpu_s", 0) < time.time() - started
              and view.get("stop_grace_s") == 20, view)
        check("the preemption's event names the work lost", any(
            "GPU-s since its last checkpoint at risk" in e["reason"] for e in view["events"]),
            view["events"])
        check("a job that kept running lost nothing",
              c.job(borrowers[2]).get("lost_work_gpu_s") == 0, c.job(borrowers[2]))
        shown = c.cli("job", "show", str(borrowers[0]))
        check("corral job show: lost work and stop grace",
              "lost work: " in shown.stdout and "GPU-s" in shown.stdout
              and "stop grace: 20s" in shown.stdout, shown.stdout + shown.stderr)
        usage = c.cli("usage", "--by", "project", "-o", "json")
        rows = {r["project"]: r for r in json.loads(usage.stdout)["rows"]} \
            if usage.returncode == 0 else {}
        check("corral usage: the borrowers' project lost GPU time",
              rows.get("default", {}).get("lost_gpu_hours", 0) > 0, usage.stdout + usage.stderr)
        table = c.cli("usage", "--by", "project")
        check("corral usage's table has the lost column", "LOST GPU-H" in table.stdout,
              table.stdout + table.stderr)
    finally:
        c.stop()


def run_tests(label, tests, root_mode=None):
    """Runs `tests` (each takes a scratch folder; --only NAME picks one) in one temporary folder
    (given `root_mode` when set), kept when a check failed; prints "<label>: N passed, M failed"
    and exits 1 on a failure."""
    root = tempfile.mkdtemp(prefix=f"corral-{label.replace(' ', '-')}-")
    if root_mode is not None:
        os.chmod(root, root_mode)
    try:
        for test in tests:
            if ONLY and test.__name__ != ONLY:
                continue
            print(f"== {test.__name__}", flush=True)
            try:
                test(root)
            except Exception as e:  # a crash of the test itself is a failure, with its reason
                check(test.__name__, False, repr(e))
    finally:
        if not FAILURES:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print("logs kept in", root)
    print(f"{label}: {len(PASSED)} passed, {len(FAILURES)} failed")
    sys.exit(1 if FAILURES else 0)


def main():
    run_tests("e2e", (test_auth_and_validation, test_logs_pages_and_generations,
                     test_fifty_jobs_on_sixteen_gpus,
                     test_server_sigkill_keeps_acknowledged_jobs,
                     test_server_sigkill_in_the_middle_of_batches,
                     test_server_sigkill_in_the_middle_of_cancel_batches,
                     test_server_sigkill_with_running_tasks, test_time_limit_and_oom,
                     test_the_researchers_day_at_the_command_line, test_dependencies,
                     test_a_slurm_batch_script_runs_unchanged,
                     test_reclaim_preempts_borrowed_tasks, test_fresh_server_fills_a_used_node_first,
                     test_gang_stays_in_one_rack,
                     test_agent_sigkill_and_node_loss, test_array_runs_at_most_max_running,
                     test_cpu_only_array_fills_the_dev_node_cpus,
                     test_environments_venv_clone_and_share, test_environments_say_what_runs_here,
                     test_sessions_proxy_auth_and_idle_stop, test_interactive_shell,
                     test_tasks_run_as_their_submitters,
                     test_container_environment, test_in_job_channel,
                     test_checkpoint_preemption, test_elastic_live))


if __name__ == "__main__":
    main()
