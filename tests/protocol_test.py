#!/usr/bin/env python3
"""The agent protocol's edge, over real HTTP on loopback (docs/control-plane.md, "Agent
protocol"): agents send a protocol version at registration, and credentials in headers.

- An agent of before protocol versions (it registers with no "protocol_version", and names its
  node in the heartbeat's body) is refused with a problem+json naming the upgrade; a newer one
  is told to upgrade the servers first. A real `corral agent` of this build joins and runs a job.
- A heartbeat is authenticated from its headers (Authorization and X-Corral-Node) before its
  body is read: a wrong token is refused even with a malformed body.

That upgrading an agent loses nothing (tasks survive an agent restart and the new agent adopts
them) is e2e_test.py's test_agent_sigkill_and_node_loss: an agent SIGKILLed with a job running,
a new agent on the same work dir, the job succeeds with its output.

Polls with deadlines; never sleeps to wait for time to pass.

Usage: tests/protocol_test.py path/to/corral [--only TEST_NAME]
"""
import http.client
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_test  # noqa: E402  (its Cluster, check, wait_for; it reads the same argv)
from e2e_test import Cluster, check, submit  # noqa: E402

NODE_ID = "0123456789abcdef0123456789abcdef"
INVENTORY = {"hostname": "old-node", "cpu_milli": 8000, "memory_mib": 16384,
             "gpu_model": "A100-80GB",
             "gpus": [{"index": 0, "uuid": "GPU-0", "memory_mib": 81920, "nvlink_domain": 0}],
             "labels": {}, "runtimes": ["process"]}


def post(cluster, path, body, headers):
    """POST `body` (JSON) with `headers`: (status, content type, parsed body)."""
    conn = http.client.HTTPConnection(cluster.host, cluster.port, timeout=30)
    try:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        conn.request("POST", path, body=data,
                     headers=dict(headers, **{"Content-Type": "application/json"}))
        r = conn.getresponse()
        text = r.read()
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = text
        return r.status, r.getheader("Content-Type", ""), parsed
    finally:
        conn.close()


def test_old_agents_are_refused_naming_the_upgrade(root):
    c = Cluster(os.path.join(root, "versions"))
    try:
        join = {"Authorization": "Bearer " + c.join_token}
        # Exactly what today's agents send: no protocol version.
        status, kind, problem = post(c, "/api/v1/agent/register",
                                     {"name": "old", "node_id": NODE_ID, "inventory": INVENTORY},
                                     join)
        detail = problem.get("detail", "") if isinstance(problem, dict) else ""
        check("an agent without a protocol version is refused (409 problem+json)",
              status == 409 and kind.startswith("application/problem+json") and
              problem.get("title") == "failed_precondition", (status, kind, problem))
        check("the refusal names the upgrade and says the tasks keep running",
              detail.startswith("this agent speaks no protocol version: upgrade corral on this "
                                "node to ") and
              " within 30 s of its last heartbeat: its tasks keep running and the upgraded agent "
              "adopts them" in detail,
              detail)
        # The version is read before anything else of the body: an old agent is told to
        # upgrade, not what its body lacks.
        status, _, problem = post(c, "/api/v1/agent/register", {"name": "old"}, join)
        check("the version is checked before the rest of the body",
              status == 409 and "speaks no protocol version" in problem.get("detail", ""),
              (status, problem))
        status, _, problem = post(c, "/api/v1/agent/register",
                                  {"protocol_version": 99, "name": "new", "node_id": NODE_ID,
                                   "inventory": INVENTORY}, join)
        check("a newer agent is refused, told to upgrade the servers first",
              status == 409 and "upgrade the servers before their agents" in
              problem.get("detail", ""), (status, problem))
        # Today's agents' heartbeats name their node in the body: refused before it is read,
        # so that the agent registers again and hears the refusal.
        status, _, problem = post(c, "/api/v1/agent/heartbeat",
                                  {"name": "old", "tasks": [], "logs": []},
                                  {"Authorization": "Bearer crl_whatever"})
        check("an old agent's heartbeat is refused naming the upgrade (401)",
              status == 401 and "speaks no protocol version" in problem.get("detail", ""),
              (status, problem))
        check("nothing of the refused agents registered",
              c.api("GET", "/api/v1/nodes")[1] == [], c.api("GET", "/api/v1/nodes"))

        # This build's agent joins, and runs a job.
        c.start_agent("n1", "1xA100-80GB")
        check("this build's agent joins", c.wait_nodes(1))
        job = submit(c, {"command": ["true"], "resources": {"gpus": 1}})
        check("its job succeeds", c.wait_state(job, ("succeeded",), 30), c.job(job))
    finally:
        c.stop()


def test_heartbeats_are_authenticated_from_headers_first(root):
    c = Cluster(os.path.join(root, "headers"))
    try:
        status, _, answer = post(c, "/api/v1/agent/register",
                                 {"protocol_version": 1, "name": "raw", "node_id": NODE_ID,
                                  "inventory": INVENTORY},
                                 {"Authorization": "Bearer " + c.join_token})
        check("a current agent registers", status == 200 and answer.get("protocol_version") == 1
              and answer.get("node_token") and answer.get("cluster_id"), (status, answer))
        token = {"Authorization": "Bearer " + answer["node_token"]}
        report = {"seq": 1, "tasks": [], "logs": [], "wait_ms": 0}
        status, _, answer = post(c, "/api/v1/agent/heartbeat", report,
                                 dict(token, **{"X-Corral-Node": "raw"}))
        check("its heartbeat is taken", status == 200 and answer.get("taken_seq") == 1,
              (status, answer))
        status, _, _ = post(c, "/api/v1/agent/heartbeat", b"{not json",
                            dict(token, **{"X-Corral-Node": "other"}))
        check("another node's name with this token: 401 before the body is read", status == 401,
              status)
        status, _, problem = post(c, "/api/v1/agent/heartbeat",
                                  dict(report, seq=2, tasks=[{"allocation_id": 1}]),
                                  dict(token, **{"X-Corral-Node": "raw"}))
        check("a malformed report is refused naming the field",
              status == 400 and "field 'tasks[0].job_id'" in problem.get("detail", ""),
              (status, problem))
    finally:
        c.stop()


def main():
    e2e_test.run_tests("protocol", (test_old_agents_are_refused_naming_the_upgrade,
                                    test_heartbeats_are_authenticated_from_headers_first))


if __name__ == "__main__":
    main()
