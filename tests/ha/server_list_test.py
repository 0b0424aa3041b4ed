#!/usr/bin/env python3
"""Clients given several server URLs (docs/control-plane.md, "Several servers"): the CLI and the
agent take a comma-separated list, skip a URL where nothing listens and a follower that answers
503 naming the leader (ha_contract.md point 1: a tiny Python stand-in here), and reach the real
`corral server`. The CLI submits once (the follower saw the POST and refused it; the server has
one job); the agent registers, runs a job, keeps it running while no server answers and follows
the server when it is back. Errors name each URL tried and what it answered.

Polls with deadlines; never sleeps to wait for time to pass.

Usage: tests/ha/server_list_test.py path/to/corral [--only TEST_NAME]
"""
import http.server
import json
import os
import pwd
import subprocess
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import e2e_test  # noqa: E402  (its Cluster, check, wait_for; it reads the same argv)
from e2e_test import CORRAL, Cluster, check, free_port, wait_for  # noqa: E402


class Follower:
    """A server that is not the leader, as ha_contract.md point 1 says one answers: 503
    problem+json with Retry-After and Corral-Leader (when `leader` is set) to everything but
    GET /healthz. Counts the requests it refused, by method and path."""

    def __init__(self, leader):
        self.leader = leader
        self.refused = []
        follower = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                if self.command == "GET" and self.path == "/healthz":
                    body = json.dumps({"status": "ok", "role": "follower",
                                       "leader": follower.leader}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                else:
                    follower.refused.append((self.command, self.path.split("?")[0]))
                    where = ("the leader is " + follower.leader) if follower.leader else "no leader yet"
                    body = json.dumps({"type": "about:blank", "title": "Service Unavailable",
                                       "status": 503,
                                       "detail": "this server is not the leader; " + where}).encode()
                    self.send_response(503)
                    self.send_header("Content-Type", "application/problem+json")
                    self.send_header("Retry-After", "1")
                    if follower.leader:
                        self.send_header("Corral-Leader", follower.leader)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = answer

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def dead_url():
    return f"http://127.0.0.1:{free_port()}"  # nothing listens there


def cli(c, servers, *args, retry_timeout=None):
    env = dict(os.environ, CORRAL_SERVER=servers, CORRAL_TOKEN=c.token, HOME=c.root)
    if retry_timeout is not None:
        env["CORRAL_RETRY_TIMEOUT"] = str(retry_timeout)
    return subprocess.run([CORRAL, *args], env=env, capture_output=True, text=True, timeout=60)


def start_agent(c, name, servers):
    work = os.path.join(c.root, "agent-" + name)
    os.makedirs(work, exist_ok=True)
    log = os.path.join(c.root, f"agent-{name}.log")
    c.agents[name] = subprocess.Popen(
        [CORRAL, "agent", "--server", servers,
         "--join-token-file", os.path.join(c.data, "join.token"), "--name", name,
         "--fake-gpus", "2xA100-80GB", "--work-dir", work,
         "--task-user", pwd.getpwuid(os.getuid()).pw_name],
        stdout=subprocess.DEVNULL, stderr=open(log, "a"))
    return log


def jobs_of(c):
    status, jobs = c.api("GET", "/api/v1/jobs?all=1")
    return jobs if status == 200 else []


def test_cli_submits_once_through_a_dead_url_and_a_follower(root):
    c = Cluster(os.path.join(root, "cli"))
    follower = Follower(c.url)
    try:
        servers = ",".join([dead_url(), follower.url, c.url])
        out = cli(c, servers, "submit", "--gpus", "0", "-o", "json", "--", "true")
        check("submit through dead,follower,real: accepted", out.returncode == 0,
              out.stdout + out.stderr)
        check("the follower refused the POST once (503 naming the leader)",
              follower.refused == [("POST", "/api/v1/jobs")], follower.refused)
        jobs = jobs_of(c)
        check("the server has exactly one job", len(jobs) == 1, jobs)
        job_id = json.loads(out.stdout)["id"] if out.returncode == 0 else None
        listed = cli(c, servers, "jobs", "--all", "-o", "json")
        check("corral jobs lists it through the same list",
              listed.returncode == 0 and [j["id"] for j in json.loads(listed.stdout)] == [job_id],
              listed.stdout + listed.stderr)
        # A leader outside the list: the follower names it, the CLI goes there.
        outside = cli(c, ",".join([dead_url(), follower.url]), "whoami")
        check("a leader named outside the list is followed", outside.returncode == 0,
              outside.stdout + outside.stderr)
        # No leader anywhere: exit 1 naming each URL and what it answered, within the timeout.
        follower.leader = None
        dead = dead_url()
        out = cli(c, f"{dead},{follower.url}", "submit", "--gpus", "0", "--", "true",
                  retry_timeout=1)
        check("no leader: exit 1 naming each URL and its answer",
              out.returncode == 1 and f"{dead} (could not connect" in out.stderr
              and f"{follower.url} (503: this server is not the leader; no leader yet"
              in out.stderr, out.stderr)
        check("no leader: nothing submitted", len(jobs_of(c)) == 1, jobs_of(c))
        bad = cli(c, f"{c.url},{c.url}/", "jobs")
        check("a list naming a server twice: exit 2 naming it",
              bad.returncode == 2 and "CORRAL_SERVER: server list: URL 2" in bad.stderr
              and "is URL 1 again" in bad.stderr, bad.stderr)
        login = subprocess.run(
            [CORRAL, "login", "--server", f"{dead},{follower.url},{c.url}", "--token", c.token],
            env=dict(os.environ, HOME=c.root, XDG_CONFIG_HOME=os.path.join(c.root, "config")),
            capture_output=True, text=True, timeout=60)
        follower.leader = c.url
        saved = json.load(open(os.path.join(c.root, "config", "corral", "config")))
        check("corral login saves the list", login.returncode == 0
              and saved["server"] == f"{dead},{follower.url},{c.url}", login.stderr + str(saved))
    finally:
        follower.stop()
        c.stop()


def test_agent_finds_the_server_and_keeps_its_task_while_none_answers(root):
    c = Cluster(os.path.join(root, "agent"))
    follower = Follower(c.url)
    try:
        bad = subprocess.run([CORRAL, "agent", "--server", "http://a,ftp://b", "--join-token", "x",
                              "--work-dir", os.path.join(c.root, "bad")],
                             capture_output=True, text=True, timeout=30)
        check("agent --server with a bad entry: exit 2 naming it",
              bad.returncode == 2 and "URL 2 'ftp://b' must start with http://" in bad.stderr,
              bad.stderr)
        log = start_agent(c, "n1", ",".join([dead_url(), follower.url, c.url]))
        check("the agent given dead,follower,real joins", c.wait_nodes(1))
        check("its log names the server it talks to",
              wait_for(lambda: f"registered with {c.url}" in open(log).read(), 10),
              open(log).read())
        check("the follower refused its registration",
              ("POST", "/api/v1/agent/register") in follower.refused, follower.refused)
        gate = os.path.join(c.root, "gate")
        marker = os.path.join(c.root, "runs.txt")
        status, body = c.api("POST", "/api/v1/jobs", {
            "command": ["sh", "-c", f"echo $$ >> {marker}; "
                                    f"while [ ! -e {gate} ]; do sleep 0.05; done; echo done"],
            "resources": {"gpus": 1}})
        check("a job is submitted", status == 201, body)
        job = body["id"]
        check("the job runs on the agent", c.wait_state(job, ("running",), 20), c.job(job))
        # The server goes; the follower knows no leader: the agent looks for one among its
        # servers, its task running all along.
        follower.leader = None
        c.kill9(c.server)
        check("the agent looks for the leader",
              wait_for(lambda: "looking for the leader" in open(log).read(), 15),
              open(log).read())
        refused_before = len(follower.refused)
        check("it asks the follower too",
              wait_for(lambda: len(follower.refused) > refused_before, 10), follower.refused)
        open(gate, "w").close()  # the task ends while no server answers
        follower.leader = c.url
        c.start_server()
        check("the job, re-adopted, succeeds", c.wait_state(job, ("succeeded",), 30), c.job(job))
        check("its task ran once", len(open(marker).read().split()) == 1, open(marker).read())
        out = c.cli("logs", str(job))
        check("its output reached the server", "done" in out.stdout, out.stdout + out.stderr)
    finally:
        follower.stop()
        c.stop()


def main():
    e2e_test.run_tests("ha server list", (test_cli_submits_once_through_a_dead_url_and_a_follower,
                                          test_agent_finds_the_server_and_keeps_its_task_while_none_answers))


if __name__ == "__main__":
    main()
