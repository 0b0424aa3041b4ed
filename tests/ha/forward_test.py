#!/usr/bin/env python3
"""A follower forwards every request to the leader (docs/control-plane.md, "Several servers on one
PostgreSQL"; docs/security.md, "Forwarded requests"): two real servers on a throwaway PostgreSQL,
an agent and a CLI given ONLY the follower's URL.

1. Through the follower: the agent joins and runs jobs; the CLI submits, lists and follows a
   job's log as it is written (streamed: a line arrives while the job still runs); the dashboard's
   page (its login redirect, the login's cookie) and an asset load with their headers; its event
   stream comes frame by frame.
2. The client's address reaches the leader signed with the cluster's peer key: a login through a
   signed header counts the address it names (the login rate limit names it); a forged, a stale
   or a badly signed header from a client that is not a peer is ignored (the limit counts the
   real address); a request a peer already forwarded that reaches a follower gets the follower's
   503 (no loops).
3. Session URLs: the follower's session port redirects (307) every request to the leader's API,
   which sends it on to its own gateway; once the follower leads, its gateway serves that port.
4. SIGKILL of the leader: the follower leads and the same URL keeps working for the CLI.

Run under scripts/with_postgres.sh (CORRAL_TEST_POSTGRES_URL). Polls with deadlines.

Usage: scripts/with_postgres.sh python3 tests/ha/forward_test.py build/corral
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ha_cluster import HaCluster, request, wait_for  # noqa: E402

CORRAL = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/corral")
FAILURES = []


def check(name, condition, detail=""):
    if not condition:
        FAILURES.append(name)
    print(("ok   " if condition else "FAIL ") + name + ("" if condition else ": " + str(detail)),
          flush=True)


def cli(c, url, *args, timeout=30):
    env = dict(os.environ, CORRAL_SERVER=url, CORRAL_TOKEN=c.token,
               XDG_CONFIG_HOME=os.path.join(c.root, "config"))
    return subprocess.run([CORRAL, *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def fetch(req):
    """(status, headers, body bytes) without following redirects."""
    try:
        with urllib.request.build_opener(NoRedirect).open(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def login(url, header=None):
    """POST /api/v1/login with a wrong token: (status, problem detail)."""
    req = urllib.request.Request(url + "/api/v1/login", data=b'{"token":"crl_wrong"}',
                                 method="POST", headers={"Content-Type": "application/json"})
    if header is not None:
        req.add_header("Corral-Forwarded-For", header)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, ""
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}").get("detail", "")


def exhaust_logins(url, header_for):
    """Logins until one is refused for the rate (at most 100): its detail, or None."""
    for i in range(100):
        status, detail = login(url, header_for(i))
        if status == 429:
            return detail
    return None


def test_through_the_follower(c, web):
    a, b = c.servers
    c.start_agent(server=b.url)
    check("an agent given only the follower's URL joins", wait_for(lambda: any(
        n.get("state") == "ready" for n in (c.api(a.url, "GET", "/api/v1/nodes")[1] or [])), 30),
        c.logs())
    marker = os.path.join(c.root, "release")
    out = cli(c, b.url, "submit", "--name", "streamed", "--gpus", "0", "--cpu-milli", "0",
              "--", "sh", "-c",
              f"echo first-line; while [ ! -f {marker} ]; do sleep 0.05; done; echo last-line")
    check("the CLI given only the follower's URL submits", out.returncode == 0, out.stderr)
    found = re.search(r"submitted job (\d+)", out.stdout)
    job = int(found.group(1)) if found else 0
    out = cli(c, b.url, "jobs")
    check("... and lists the job", out.returncode == 0 and "streamed" in out.stdout,
          (out.stdout, out.stderr))
    follow = subprocess.Popen(
        [CORRAL, "logs", "-f", str(job)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=dict(os.environ, CORRAL_SERVER=b.url, CORRAL_TOKEN=c.token))
    first = follow.stdout.readline()
    check("... and follows its log as it is written (a line while the job still runs)",
          first.strip() == "first-line" and not os.path.exists(marker) and
          follow.poll() is None, first)
    open(marker, "w").close()
    try:
        rest, err = follow.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        follow.kill()
        rest, err = follow.communicate()
    check("... to its end", "last-line" in rest and follow.returncode == 0, (rest, err))

    status, headers, _ = fetch(b.url + "/")
    check("the dashboard redirects to its login page through the follower (Location relayed)",
          status == 302 and headers.get("Location") == "/login?next=/" and
          headers.get("Cache-Control") == "no-store", (status, headers))
    req = urllib.request.Request(b.url + "/api/v1/login", method="POST",
                                 data=json.dumps({"token": c.token}).encode(),
                                 headers={"Content-Type": "application/json"})
    status, headers, _ = fetch(req)
    cookie = headers.get("Set-Cookie", "").split(";")[0]
    check("a login through the follower sets the leader's cookie",
          status == 200 and cookie.startswith("corral_token="), (status, headers))
    status, headers, body = fetch(urllib.request.Request(b.url + "/", headers={"Cookie": cookie}))
    check("the dashboard's page loads through the follower with that cookie",
          status == 200 and headers.get("Content-Type", "").startswith("text/html") and
          b"forward-test-page" in body, (status, headers, body))
    status, headers, body = request(b.url, "GET", "/assets/app-1234.js")
    check("... and its assets, with their cache headers",
          status == 200 and "javascript" in headers.get("Content-Type", "") and
          "immutable" in headers.get("Cache-Control", ""), (status, headers))
    # The dashboard's live events: a stream that lasts 10 minutes, one frame at a time.
    req = urllib.request.Request(b.url + "/api/v1/events/stream",
                                 headers={"Authorization": "Bearer " + c.token})
    frames = []
    try:
        with urllib.request.urlopen(req, timeout=15) as r:
            content_type = r.headers.get("Content-Type", "")
            while len(frames) < 2:
                line = r.readline()
                if not line:
                    break
                if line.startswith(b"event:"):
                    frames.append(line.strip())
    except OSError as e:
        content_type = str(e)
    check("the dashboard's event stream comes through the follower frame by frame",
          content_type.startswith("text/event-stream") and len(frames) == 2,
          (content_type, frames))
    status, headers, _ = request(b.url, "GET", "/api/v1/jobs", token="crl_wrong")
    check("a refusal comes back as the leader gave it (401)", status == 401, status)
    status, _, body = request(b.url, "GET", "/healthz")
    check("the follower's /healthz is its own",
          status == 200 and body.get("role") == "follower" and body.get("leader") == a.url, body)


def test_client_addresses(c):
    a, b = c.servers
    # The test signs as a peer server would (it has the cluster's session key).
    detail = exhaust_logins(a.url, lambda i: c.peer_header("192.0.2.7", "POST", "/api/v1/login"))
    check("a login carried with a peer's signed header counts the address it names",
          detail is not None and "too many logins from 192.0.2.7" in detail, detail)
    detail = exhaust_logins(a.url, lambda i: f"198.51.100.{i} 198.51.100.{i} "
                                             f"{int(time.time())} {'0' * 64}")
    check("a forged header from a client that is not a peer is ignored: the real address counts",
          detail is not None and "too many logins from 127.0.0.1" in detail, detail)
    for name, header in [
            ("stale (signed 60 s ago)",
             c.peer_header("192.0.2.9", "POST", "/api/v1/login", time.time() - 60)),
            ("signed for another target", c.peer_header("192.0.2.9", "POST", "/api/v1/jobs"))]:
        status, detail = login(a.url, header)
        check(f"a {name} header is ignored", status == 429 and "127.0.0.1" in detail,
              (status, detail))
    req = urllib.request.Request(b.url + "/api/v1/jobs", headers={
        "Authorization": "Bearer " + c.token,
        "Corral-Forwarded-For": c.peer_header("192.0.2.10", "GET", "/api/v1/jobs")})
    try:
        urllib.request.urlopen(req, timeout=5)
        status, headers = 200, {}
    except urllib.error.HTTPError as e:
        status, headers = e.code, dict(e.headers)
    check("a request a peer already forwarded that reaches a follower: 503, not forwarded again",
          status == 503 and headers.get("Corral-Leader") == a.url, (status, headers))


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def get_unfollowed(url):
    """(status, headers) of a GET whose redirect is not followed."""
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(url, timeout=5) as r:
            return r.status, dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers)
    except OSError as e:
        return 0, {"error": str(e)}


def test_session_urls(c):
    a, b = c.servers
    target = "/sessions/42/lab/tree?path=a%20b"
    status, headers = get_unfollowed(b.session_url + target)
    check("the follower's session port redirects a session URL to the leader's API (307)",
          status == 307 and headers.get("Location") == a.url + target, (status, headers))
    status, headers = get_unfollowed(a.url + target)
    location = headers.get("Location", "")
    check("... whose API sends it on to the leader's gateway",
          status == 307 and location.endswith(f":{a.session_port}{target}"), (status, headers))


def test_failover_keeps_the_url(c):
    a, b = c.servers
    a.kill9()
    start = time.monotonic()
    answers = []

    def submitted():
        # A 503 (this server does not lead yet) was certainly not carried out: sent again, as
        # clients do.
        out = cli(c, b.url, "submit", "--name", "after-kill", "--gpus", "0", "--cpu-milli", "0",
                  "--", "true")
        answers.append(out.stderr.strip())
        return out.returncode == 0
    ok = wait_for(submitted, 20, 0.1)
    took = time.monotonic() - start
    refused = [x for x in answers[:-1] if "HTTP 503" not in x]
    check(f"after the leader's SIGKILL the same URL accepts a submission ({took:.2f} s), "
          f"answering 503 until then", ok and b.role() == "leader" and not refused,
          (refused, c.logs()))
    out = cli(c, b.url, "jobs", "--all")
    check("... and lists every job", out.returncode == 0 and "streamed" in out.stdout and
          "after-kill" in out.stdout, (out.stdout, out.stderr))
    status, headers = get_unfollowed(b.session_url + "/sessions/42/lab")
    check("... and its own gateway serves its session port (no redirect to the dead leader)",
          status not in (0, 307, 503) and not headers.get("Location", "").startswith(a.url),
          (status, headers))


def main():
    if not os.environ.get("CORRAL_TEST_POSTGRES_URL"):
        print("forward_test: CORRAL_TEST_POSTGRES_URL is unset; run it under "
              "scripts/with_postgres.sh")
        return 2
    root = tempfile.mkdtemp(prefix="corral-forward-")
    web = os.path.join(root, "web")
    os.makedirs(os.path.join(web, "assets"))
    with open(os.path.join(web, "index.html"), "w") as f:
        f.write("<!doctype html><title>forward-test-page</title>")
    with open(os.path.join(web, "assets", "app-1234.js"), "w") as f:
        f.write("console.log('forward-test');")
    c = HaCluster(CORRAL, root, server_args=["--web-dir", web])
    try:
        test_through_the_follower(c, web)
        test_client_addresses(c)
        test_session_urls(c)
        test_failover_keeps_the_url(c)
    finally:
        c.stop()
    if FAILURES:
        print(f"{len(FAILURES)} failed: {FAILURES}\nlogs in {root}")
        return 1
    print("forward_test: all passed")
    import shutil
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
