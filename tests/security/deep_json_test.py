#!/usr/bin/env python3
"""Hostile input, part 1 (docs/security.md, "Limits"): JSON nested 100,000 levels deep sent to
every route that reads a body, as any member, an anonymous caller, the join token's holder and
a registered agent can. On the main before this test (d91aa62), `corral server` died with
SIGSEGV on the session route (the second here). Each must be refused with a 400 problem+json
naming the limit within a second, and the server must go on serving: a job submitted after the
attacks runs. Also 1 MiB of sibling objects, which a parser callback once took 20 s to read.

Polls with deadlines; never sleeps to wait for time to pass.

Usage: tests/security/deep_json_test.py path/to/corral [--only TEST_NAME]
"""
import http.client
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import e2e_test  # noqa: E402  (its Cluster, check, wait_for; it reads the same argv)
from e2e_test import Cluster, check, submit  # noqa: E402

LEVELS = 100_000
LIMIT = "nests deeper than the limit of 64 levels"


def deep_object(levels):
    """{"a":{"a":...1...}}: 7 bytes a level (about 700 KB for 100,000: under the 1 MiB limit)."""
    return ('{"a":' * levels + "1" + "}" * levels).encode()


def deep_inside(body, field, levels):
    """`body` (a dict) with `field` holding `levels` nested arrays: a valid request otherwise."""
    text = json.dumps(dict(body, **{field: "HOLE"}))
    return text.replace('"HOLE"', "[" * levels + "]" * levels).encode()


def post(cluster, method, path, data, headers):
    if not headers and len(data) > 64 * 1024:
        return post_head_only(cluster, method, path, len(data))
    conn = http.client.HTTPConnection(cluster.host, cluster.port, timeout=30)
    try:
        start = time.monotonic()
        conn.request(method, path, body=data,
                     headers=dict(headers, **{"Content-Type": "application/json"}))
        r = conn.getresponse()
        text = r.read()
        return r.status, r.getheader("Content-Type", ""), text, time.monotonic() - start
    finally:
        conn.close()


def post_head_only(cluster, method, path, length):
    """An anonymous body longer than the server drains is refused from its head, unread, and
    the connection closed: send only the head (a client still sending would see the close)."""
    start = time.monotonic()
    with socket.create_connection((cluster.host, cluster.port), timeout=30) as s:
        s.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {length}\r\n\r\n".encode())
        data = b""
        while b"\r\n\r\n" not in data or len(data.partition(b"\r\n\r\n")[2]) < int(
                data.lower().partition(b"content-length: ")[2].split(b"\r\n")[0] or 0):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    kind = next((line.split(b":", 1)[1].strip().decode() for line in head.split(b"\r\n")
                 if line.lower().startswith(b"content-type:")), "")
    status = int(head[9:12]) if head.startswith(b"HTTP/1.1 ") else 0
    return status, kind, body, time.monotonic() - start


def test_deep_json_on_every_route_is_refused(root):
    c = Cluster(os.path.join(root, "deep"))
    try:
        c.start_agent("n1", gpus="1xA100-80GB")
        check("agent joins", c.wait_nodes(1))
        member = {"Authorization": "Bearer " + c.token}
        join = {"Authorization": "Bearer " + c.join_token}
        # A registered node's own credentials, for the heartbeat route.
        status, _, text, _ = post(
            c, "POST", "/api/v1/agent/register",
            json.dumps({"protocol_version": 1, "name": "ghost",
                        "node_id": "0123456789abcdef0123456789abcdef",
                        "inventory": {"hostname": "ghost", "cpu_milli": 1000, "memory_mib": 1024,
                                      "gpu_model": "", "gpus": [], "labels": {},
                                      "runtimes": ["process"]}}).encode(), join)
        check("a node registers for the heartbeat case", status == 200, text[:200])
        node = {"Authorization": "Bearer " + json.loads(text)["node_token"],
                "X-Corral-Node": "ghost"} if status == 200 else {}
        routes = [
            ("POST", "/api/v1/jobs", member), ("POST", "/api/v1/sessions", member),
            ("POST", "/api/v1/projects", member), ("PUT", "/api/v1/projects/default/sharing", member),
            ("POST", "/api/v1/projects/default/members", member), ("POST", "/api/v1/users", member),
            ("POST", "/api/v1/tokens", member), ("POST", "/api/v1/environments", member),
            ("POST", "/api/v1/environments/pytorch/clone", member),
            ("POST", "/api/v1/environments/pytorch/share", member),
            ("POST", "/api/v1/capacity/what-if", member),
            ("POST", "/api/v1/login", {}),  # anonymous
            ("POST", "/api/v1/agent/register", join), ("POST", "/api/v1/agent/heartbeat", node),
        ]
        attacks = [("a deep body", deep_object(LEVELS)),
                   ("a deep field", deep_inside({"command": ["true"]}, "env", LEVELS))]
        for method, path, headers in routes:
            for what, data in attacks:
                status, kind, text, took = post(c, method, path, data, headers)
                problem = json.loads(text) if kind.startswith("application/problem+json") else {}
                # An anonymous caller's body may be 16 KiB: login refuses it unread (413).
                refused = (status == 413 and "over 16384 bytes" in problem.get("detail", "")
                           if not headers else status == 400 and LIMIT in problem.get("detail", ""))
                check(f"{method} {path}, {what}: {413 if not headers else 400} problem+json "
                      f"naming the limit in {took * 1000:.0f} ms", refused and took < 1.0,
                      f"{status} {kind} {text[:200]!r}")
                check(f"{method} {path}, {what}: the server is up", c.healthy())
        # Wide, not deep: 1 MiB of empty objects side by side, anonymously (a parser that
        # rescanned siblings took 20 s of a server thread for this).
        wide = b'{"token": [' + b"{}," * 349000 + b"{}]}"
        status, kind, text, took = post(c, "POST", "/api/v1/login", wide, {})
        check(f"1 MiB of sibling objects to login: answered {status} in {took * 1000:.0f} ms",
              400 <= status < 500 and took < 1.0, text[:200])
        # A registration with the join token whose inventory hides the depth (an unknown field).
        status, _, text, _ = post(c, "POST", "/api/v1/agent/register",
                                  deep_inside({"protocol_version": 1, "name": "x",
                                               "node_id": "0123456789abcdef0123456789abcdef"},
                                              "inventory", LEVELS), join)
        check("a deep inventory is refused naming the limit", status == 400 and LIMIT in text.decode(),
              text[:200])
        # Served all along: a job submitted now runs to its end.
        job = submit(c, {"command": ["true"], "resources": {"gpus": 1}})
        check("a job after the attacks succeeds", c.wait_state(job, ("succeeded",), 60),
              str(c.job(job)))
        check("the server process never died", c.server.poll() is None)
    finally:
        c.stop()


def main():
    e2e_test.run_tests("security deep JSON", (test_deep_json_on_every_route_is_refused,))


if __name__ == "__main__":
    main()
