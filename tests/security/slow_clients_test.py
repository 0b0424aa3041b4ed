#!/usr/bin/env python3
"""Hostile network (docs/security.md, "Connections" and "Bodies"): slow and idle connection
floods while a job runs, bodies larger than they say (chunked, compressed), and the HTTP layer's
own errors. On the main before this test (8329f06, cpp-httplib with 64 threads), 48 connections
sending a head a byte at a time stalled the API, and 300 of them plus 200 idle ones lost a
running job (its node's heartbeats could not get in); an 8 MiB chunked body was read whole and a
gzip body inflated to 256 MB.

The attacker connects from 127.0.0.2, another address of this host, as a client elsewhere on
the network would; users and the agent use 127.0.0.1. Polls with deadlines; the only timed waits
are the attack's own pacing (a byte a second) and its length.

Usage: tests/security/slow_clients_test.py path/to/corral [--only TEST_NAME]
"""
import gzip
import http.client
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import e2e_test  # noqa: E402  (its Cluster, check, wait_for; it reads the same argv)
from e2e_test import Cluster, check, submit  # noqa: E402
from hostile_clients import Flood, peak_rss_mib  # noqa: E402

MIB = 1 << 20


def timed_get(c, path):
    start = time.monotonic()
    try:
        status, _ = c.api("GET", path)
    except OSError as e:
        return repr(e), time.monotonic() - start
    return status, time.monotonic() - start


def test_slow_and_idle_floods_while_a_job_runs(root):
    c = Cluster(os.path.join(root, "flood"), node_timeout=10)
    try:
        c.start_agent("n1", gpus="1xA100-80GB")
        check("agent joins", c.wait_nodes(1))
        job = submit(c, {"command": ["sleep", "25"], "resources": {"gpus": 1}})
        check("the job runs", c.wait_state(job, ("running",), 30), str(c.job(job)))
        worst, failures, lost = 0.0, [], []
        with Flood(c.host, c.port, slow=300, idle=200) as flood:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                status, took = timed_get(c, "/api/v1/nodes")
                worst = max(worst, took)
                if status != 200:
                    failures.append(status)
                else:
                    nodes = c.api("GET", "/api/v1/nodes")[1]
                    lost += [n["name"] for n in nodes if n["state"] != "ready"]
                flood.stopping.wait(0.5)  # pacing the probe, not waiting for a condition
            reopened = flood.reopened
        check(f"an authenticated request answered within 1 s throughout (worst {worst:.2f} s)",
              worst < 1.0 and not failures, str(failures[:5]))
        check("the node was never lost", not lost, str(lost[:5]))
        check(f"the server closed attacking connections ({reopened} reopened)", reopened > 0)
        check("the job ends succeeded, run once", c.wait_state(job, ("succeeded",), 60)
              and c.job(job).get("attempt", 0) in (0, 1), str(c.job(job)))
        rss = peak_rss_mib(c.server.pid)
        check(f"server peak RSS {rss:.0f} MiB < 200 MiB", rss < 200)
    finally:
        c.stop()


def raw_request(c, head, body_parts=(), read_timeout=10):
    """Sends `head` and then each of `body_parts` (stopping when the server closes), returns
    (status or None, parsed problem or None, seconds)."""
    s = socket.create_connection((c.host, c.port), timeout=read_timeout)
    start = time.monotonic()
    try:
        s.sendall(head)
        for part in body_parts:
            try:
                s.sendall(part)
            except OSError:
                break
        s.shutdown(socket.SHUT_WR)
        data = b""
        while True:
            try:
                chunk = s.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            data += chunk
    except OSError:
        data = b""
    finally:
        s.close()
    took = time.monotonic() - start
    if not data.startswith(b"HTTP/1.1 "):
        return None, None, took
    head_text, _, body = data.partition(b"\r\n\r\n")
    problem = None
    if b"application/problem+json" in head_text:
        try:
            problem = json.loads(body)
        except ValueError:
            problem = None
    return int(data[9:12]), problem, took


def chunks(total, size=64 * 1024):
    sent = 0
    while sent < total:
        n = min(size, total - sent)
        yield b"%x\r\n" % n + b"x" * n + b"\r\n"
        sent += n
    yield b"0\r\n\r\n"


def test_body_bombs_and_the_http_layers_errors(root):
    c = Cluster(os.path.join(root, "bombs"))
    try:
        member = f"Authorization: Bearer {c.token}\r\n".encode()
        head = (b"POST /api/v1/projects HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + member)
        for size in (int(2.2 * 1000 * 1000), 8 * MIB, 64 * MIB):
            status, problem, took = raw_request(c, head + b"Transfer-Encoding: chunked\r\n\r\n",
                                                chunks(size))
            check(f"a {size / MIB:.1f} MiB chunked body: 413 problem+json or closed "
                  f"({status}, {took:.1f} s)",
                  status in (413, None) and (status is None or "over" in problem["detail"]),
                  str(problem))
        bomb = gzip.compress(b"{" + b" " * (256 * MIB) + b"}", 9)
        status, problem, _ = raw_request(
            c, head + b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(bomb), [bomb])
        check(f"a {len(bomb) // 1024} KiB gzip body inflating to 256 MiB: 415, never inflated",
              status == 415 and "compressed" in problem["detail"], str(problem))
        # Anonymous callers may send 16 KiB; a login of 1 MiB is refused.
        status, problem, _ = raw_request(
            c, b"POST /api/v1/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n", chunks(MIB))
        check("an anonymous 1 MiB login body: 413 or closed", status in (413, None), str(problem))
        # A heartbeat with a wrong node token is refused from its head, the body unread.
        status, problem, took = raw_request(
            c, b"POST /api/v1/agent/heartbeat HTTP/1.1\r\nHost: x\r\nX-Corral-Node: ghost\r\n"
            b"Authorization: Bearer nope\r\nContent-Length: 900000\r\n\r\n")
        check(f"a heartbeat with a wrong node token: 401 before its body ({took:.2f} s)",
              status == 401 and took < 1.0, str(problem))
        # The HTTP layer's own answers are problem+json.
        for what, request, expected in [
            ("an unknown route", b"GET /api/v1/nope HTTP/1.1\r\nHost: x\r\n" + member + b"\r\n",
             404),
            ("a method the route lacks", b"DELETE /api/v1/jobs HTTP/1.1\r\nHost: x\r\n" + member
             + b"\r\n", 405),
            ("a 9 KiB target", b"GET /api/v1/jobs?x=" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
             414),
            ("a 70 KiB head", b"GET /api/v1/jobs HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70000
             + b"\r\n\r\n", 431),
        ]:
            status, problem, _ = raw_request(c, request)
            check(f"{what}: {expected} problem+json", status == expected and problem is not None
                  and problem.get("status") == expected, f"{status} {problem}")
        check("the server is up", c.healthy() and c.server.poll() is None)
        rss = peak_rss_mib(c.server.pid)
        check(f"server peak RSS {rss:.0f} MiB < 200 MiB", rss < 200)
        job = submit(c, {"command": ["true"]})
        check("a job submitted after the bombs is accepted", job is not None)
    finally:
        c.stop()


def test_logins_are_rate_limited_per_address(root):
    c = Cluster(os.path.join(root, "logins"))
    try:
        refused = None
        for i in range(80):
            conn = http.client.HTTPConnection(c.host, c.port, timeout=10)
            conn.request("POST", "/api/v1/login", body=json.dumps({"token": "wrong"}),
                         headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
            conn.close()
            if r.status == 429:
                refused = (i, r.getheader("Retry-After"))
                break
        # 60 a minute, refilled one a second: the first 60 pass whatever the pace; a 429 comes
        # as soon as they outrun the refill.
        check(f"past 60 logins a minute from one address: 429 with Retry-After ({refused})",
              refused is not None and refused[0] >= 60 and int(refused[1]) >= 1)
        check("the API still serves tokens", c.api("GET", "/api/v1/whoami")[0] == 200)
    finally:
        c.stop()


def main():
    e2e_test.run_tests("security slow clients", (test_slow_and_idle_floods_while_a_job_runs,
                                                test_body_bombs_and_the_http_layers_errors,
                                                test_logins_are_rate_limited_per_address))


if __name__ == "__main__":
    main()
