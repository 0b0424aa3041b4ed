#!/usr/bin/env python3
"""Failover of `corral server` on one PostgreSQL (docs/control-plane.md, "Several servers on one
PostgreSQL"): two real servers, one agent with fake GPUs, real PostgreSQL.

1. SIGKILL of the leader: the follower takes over; a running job keeps running (its agent is
   not made to register again: its node token still authenticates it) and ends once; every
   submission acknowledged before the kill is there.
2. SIGSTOP of the leader past its lease, then SIGCONT: the other server leads meanwhile; the old
   leader answers nothing but 503 once it wakes (a submission it held while frozen is refused,
   not stored) and exits with status 3, saying why.
3. PostgreSQL restarts: a quick one (pg_ctl restart) leaves the leader leading; one longer than
   the lease makes it exit with status 3, and once PostgreSQL is back the other server leads.
Also: a follower's answers when it cannot forward (503 + Corral-Leader + Retry-After, /healthz)
and a second server's refusals at start (another join token).

Run under scripts/with_postgres.sh (CORRAL_TEST_POSTGRES_URL). Polls with deadlines; never
sleeps to wait for time to pass (the SIGSTOP lasts until the other server leads).

Usage: scripts/with_postgres.sh python3 tests/ha/failover_test.py build/corral
"""
import os
import signal
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ha_cluster import HaCluster, request, wait_for  # noqa: E402

CORRAL = sys.argv[1] if len(sys.argv) > 1 else "build/corral"
FAILURES = []


def check(name, condition, detail=""):
    if not condition:
        FAILURES.append(name)
    print(("ok   " if condition else "FAIL ") + name + ("" if condition else ": " + str(detail)),
          flush=True)


def bytes_waiting(port):
    """Bytes received and not yet read on loopback connections to `port` (ss's Recv-Q)."""
    out = subprocess.run(["ss", "-Htn", "state", "established", f"( sport = :{port} )"],
                         capture_output=True, text=True).stdout
    return sum(int(line.split()[0]) for line in out.splitlines() if line.split())


def job_state(c, url, job_id):
    status, body = c.api(url, "GET", f"/api/v1/jobs/{job_id}")
    return body.get("state") if status == 200 else None


def test_follower_answers(c):
    a, b = c.servers
    status, _, body = request(b.url, "GET", "/api/v1/jobs", token=c.token)
    check("a follower forwards the API to the leader (tests/ha/forward_test.py)",
          status == 200 and isinstance(body, list), (status, body))
    # What it answers when it cannot forward: a request a peer already forwarded (the test
    # signs as a peer would).
    forwarded = {"Corral-Forwarded-For": c.peer_header("192.0.2.1", "GET", "/api/v1/jobs")}
    status, headers, body = request(b.url, "GET", "/api/v1/jobs", token=c.token,
                                    headers=forwarded)
    check("a follower that cannot forward answers 503 problem+json", status == 503 and
          headers.get("Content-Type") == "application/problem+json", (status, headers))
    check("... naming the leader in Corral-Leader and the detail, with Retry-After: 1",
          headers.get("Corral-Leader") == a.url and headers.get("Retry-After") == "1" and
          body.get("detail") == "this server is not the leader; the leader is " + a.url and
          body.get("title") == "Service Unavailable", (headers, body))
    status, _, body = request(b.url, "GET", "/healthz")
    check("a follower's /healthz: 200, role follower, the leader's URL",
          status == 200 and body == {"status": "ok", "role": "follower", "leader": a.url}, body)
    status, _, body = request(a.url, "GET", "/healthz")
    check("the leader's /healthz says role leader",
          status == 200 and body.get("role") == "leader", body)
    forwarded = {"Corral-Forwarded-For": c.peer_header("192.0.2.1", "POST",
                                                        "/api/v1/agent/register")}
    status, _, _ = request(b.url, "POST", "/api/v1/agent/register", {"name": "x"},
                           headers=forwarded)
    check("... and agent routes alike", status == 503, status)


def test_servers_that_refuse_to_start(c):
    data = os.path.join(c.root, "stray")
    out = subprocess.run(
        [c.corral, "server", "--listen", "127.0.0.1:0", "--store", c.store, "--data-dir", data,
         "--session-key-file", c.session_key, "--join-token", "crl_not-the-clusters-token"],
        capture_output=True, text=True, timeout=30)
    check("a server whose join token differs from the cluster's refuses to start, naming it",
          out.returncode != 0 and "join token" in out.stderr and
          "differs from the one the cluster's first server stored" in out.stderr and
          "not-the-clusters-token" not in out.stderr, (out.returncode, out.stderr))
    key = os.path.join(c.root, "other.key")
    with open(key, "w") as f:
        f.write("k" * 40 + "\n")
    out = subprocess.run(
        [c.corral, "server", "--listen", "127.0.0.1:0", "--store", c.store, "--data-dir", data,
         "--session-key-file", key], capture_output=True, text=True, timeout=30)
    check("a server whose session key differs refuses to start, never showing it",
          out.returncode != 0 and "session key" in out.stderr and "kkkk" not in out.stderr,
          (out.returncode, out.stderr))
    out = subprocess.run(
        [c.corral, "server", "--listen", "0.0.0.0:0", "--store", c.store, "--data-dir", data,
         "--session-key-file", c.session_key], capture_output=True, text=True, timeout=30)
    check("a server listening on every address needs --advertise-url",
          out.returncode == 2 and "--advertise-url: required" in out.stderr, out.stderr)
    out = subprocess.run(
        [c.corral, "server", "--listen", "127.0.0.1:0", "--store", c.store, "--data-dir", data,
         "--session-key-file", c.session_key, "--lease-duration", "2s",
         "--lease-renew-interval", "1s"], capture_output=True, text=True, timeout=30)
    check("a lease renewed less often than twice a lease is refused",
          out.returncode == 2 and "--lease-renew-interval: must be under half" in out.stderr,
          out.stderr)
    out = subprocess.run(
        [c.corral, "server", "--listen", "127.0.0.1:0", "--store", c.store, "--data-dir", data,
         "--session-key-file", c.session_key, "--node-timeout", "10", "--fence-after", "3",
         "--kill-grace", "1"], capture_output=True, text=True, timeout=30)
    check("a lease that outlasts --fence-after is refused (agents would fence at each failover)",
          out.returncode == 2 and "must be shorter than --fence-after (3 s)" in out.stderr,
          out.stderr)
    cert_dir = os.path.join(c.root, "tls")
    os.makedirs(cert_dir, exist_ok=True)
    cert, key_pem = os.path.join(cert_dir, "cert.pem"), os.path.join(cert_dir, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-keyout", key_pem, "-out", cert],
                   capture_output=True, check=True, timeout=60)
    out = subprocess.run(
        [c.corral, "server", "--listen", "127.0.0.1:0", "--store", c.store, "--data-dir", data,
         "--session-key-file", c.session_key, "--tls-cert", cert, "--tls-key", key_pem,
         "--advertise-url", "http://127.0.0.1:1"], capture_output=True, text=True, timeout=30)
    check("a TLS server advertising http:// is refused (credentials would be forwarded in clear)",
          out.returncode == 2 and "is not https://" in out.stderr, out.stderr)


def test_sigkill_of_the_leader(c):
    a, b = c.servers
    c.start_agent()
    check("the agent joins through the proxy", wait_for(lambda: any(
        n.get("state") == "ready" for n in (c.api(a.url, "GET", "/api/v1/nodes")[1] or [])), 30))
    marker = os.path.join(c.root, "release")
    runs = os.path.join(c.root, "runs")
    script = (f'echo "start $CORRAL_JOB_ID" >> {runs}; '
              f'while [ ! -f {marker} ]; do sleep 0.05; done; echo "end $CORRAL_JOB_ID" >> {runs}')
    status, body = c.api(a.url, "POST", "/api/v1/jobs", {
        "name": "long", "command": [script], "shell": True,
        "resources": {"gpus": 1, "cpu_milli": 0}})
    assert status == 201, (status, body)
    long_job = body["id"]
    check("the long job runs", wait_for(lambda: job_state(c, a.url, long_job) == "running", 60))
    acknowledged = []
    for i in range(20):
        status, body = c.api(a.url, "POST", "/api/v1/jobs", {
            "name": f"quick-{i}", "command": ["true"], "resources": {"gpus": 0, "cpu_milli": 0}})
        if status == 201:
            acknowledged.append(body["id"])
    token_hash = c.psql("SELECT node_token_hash FROM nodes WHERE name = 'node-a'")
    check("the node's token is stored hashed", len(token_hash) == 64, token_hash)

    a.kill9()
    job, took = c.submit_anywhere({"name": "after", "command": ["true"],
                                   "resources": {"gpus": 0, "cpu_milli": 0}})
    check(f"the follower takes over: a submission is accepted {took:.2f} s after the kill",
          job is not None and took < 10, (took, c.logs()))
    check("the new leader says so", b.role() == "leader")
    missing = [j for j in acknowledged if job_state(c, b.url, j) is None]
    check(f"all {len(acknowledged)} submissions acknowledged before the kill are there",
          len(acknowledged) == 20 and not missing, missing)
    check("the running job keeps running", job_state(c, b.url, long_job) == "running")
    quick_done = wait_for(lambda: all(job_state(c, b.url, j) == "succeeded"
                                      for j in acknowledged + [job]), 60, 0.2)
    # They run on the agent's node: its heartbeats, with the token the old leader gave it, are
    # taken by the new leader.
    check("the quick jobs run to success under the new leader", quick_done)
    check("the agent did not register again (same node token)",
          c.psql("SELECT node_token_hash FROM nodes WHERE name = 'node-a'") == token_hash)
    open(marker, "w").close()
    check("the long job ends, succeeded",
          wait_for(lambda: job_state(c, b.url, long_job) == "succeeded", 60))
    lines = open(runs).read().split()
    check("... having run once", lines.count("start") == 1 and lines.count("end") == 1, lines)


def test_sigstop_of_the_leader(c):
    a, b = c.servers
    a.start()  # the old leader comes back as a follower
    check("the killed server comes back as a follower",
          wait_for(lambda: a.role() == "follower", 30), c.logs())
    jobs_before = {j["id"] for j in c.api(b.url, "GET", "/api/v1/jobs?all=1")[1]}
    b.signal(signal.SIGSTOP)
    check("while the leader is frozen, the other server takes over",
          wait_for(lambda: a.role() == "leader", 30), c.logs())
    # A submission sent to the frozen leader waits in its socket until it wakes.
    held = {}

    def send():
        held["answer"] = request(b.url, "POST", "/api/v1/jobs",
                                 {"name": "sent-to-the-frozen-leader", "command": ["true"],
                                  "resources": {"gpus": 0, "cpu_milli": 0}}, c.token, 20)
    sender = threading.Thread(target=send)
    sender.start()
    check("the request waits in the frozen leader's socket",
          wait_for(lambda: bytes_waiting(b.port) > 0, 10))
    b.signal(signal.SIGCONT)
    sender.join(30)
    status = held.get("answer", (None,))[0]
    check("the woken old leader refuses what it held (503 or closed), accepting nothing",
          status in (0, 503), held.get("answer"))
    try:
        code = b.proc.wait(15)
    except subprocess.TimeoutExpired:
        code = None
    check("the old leader exits with status 3", code == 3, (code, c.logs()))
    check("... saying why", "no longer the leader" in open(b.log).read(), c.logs())
    jobs_after = c.api(a.url, "GET", "/api/v1/jobs?all=1")[1]
    stray = [j for j in jobs_after if j["id"] not in jobs_before]
    check("the old leader stored nothing after the takeover", not stray, stray)
    job, _ = c.submit_anywhere({"name": "last", "command": ["true"],
                                "resources": {"gpus": 0, "cpu_milli": 0}})
    check("the new leader runs new work",
          job is not None and wait_for(lambda: job_state(c, a.url, job) == "succeeded", 60))


def pg_ctl(*args):
    cmd = [os.path.join(os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"), "pg_ctl"), "-D",
           os.environ["CORRAL_TEST_POSTGRES_DATA"], *args]
    if os.getuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    # Not through pipes: the server pg_ctl starts would hold them open.
    out = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, timeout=60)
    assert out.returncode == 0, args


def test_postgres_restarts(c):
    a, b = c.servers
    b.start()  # the SIGSTOPped server, back as a follower
    check("the exited server comes back as a follower",
          wait_for(lambda: b.role() == "follower", 30), c.logs())
    spec = {"name": "around-a-restart", "command": ["true"],
            "resources": {"gpus": 0, "cpu_milli": 0}}
    # Its log goes where scripts/with_postgres.sh keeps it (a folder PostgreSQL's user owns).
    log = os.path.join(os.path.dirname(os.environ["CORRAL_TEST_POSTGRES_DATA"]), "server.log")
    pg_ctl("-m", "fast", "-w", "-l", log, "restart")
    # The first statement on a connection the restart broke fails (500); the next reconnects.
    accepted = wait_for(lambda: request(a.url, "POST", "/api/v1/jobs", spec, c.token)[0] == 201,
                        10, 0.1)
    check("after a PostgreSQL restart shorter than the lease, the leader still leads and "
          "accepts submissions", accepted and a.alive() and a.role() == "leader", c.logs())
    pg_ctl("-m", "fast", "-w", "stop")
    try:
        code = a.proc.wait(15)
    except subprocess.TimeoutExpired:
        code = None
    check("with PostgreSQL down past the lease, the leader exits with status 3", code == 3,
          (code, c.logs()))
    pg_ctl("-w", "-l", log, "-o",
           os.environ["CORRAL_TEST_POSTGRES_OPTIONS"], "start")
    job, took = c.submit_anywhere(spec)
    check(f"once PostgreSQL is back, the other server leads: a submission is accepted "
          f"{took:.2f} s after the start", job is not None and b.role() == "leader", c.logs())


def main():
    if not os.environ.get("CORRAL_TEST_POSTGRES_URL"):
        print("failover_test: CORRAL_TEST_POSTGRES_URL is unset; run it under "
              "scripts/with_postgres.sh")
        return 2
    root = tempfile.mkdtemp(prefix="corral-ha-")
    c = HaCluster(CORRAL, root)
    try:
        test_follower_answers(c)
        test_servers_that_refuse_to_start(c)
        test_sigkill_of_the_leader(c)
        test_sigstop_of_the_leader(c)
        test_postgres_restarts(c)
    finally:
        c.stop()
    if FAILURES:
        print(f"{len(FAILURES)} failed: {FAILURES}\nlogs in {root}")
        return 1
    print("failover_test: all passed")
    import shutil
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
