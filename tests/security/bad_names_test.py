#!/usr/bin/env python3
"""Hostile input, part 4 (docs/security.md, "Names" and "Agent inventories"): names with a NUL,
a tab, "../", control characters (C0 and Unicode's) or 100,000 bytes, sent to every route that
makes a named thing (users, projects, tokens, jobs, sessions, environments, their clones, agent
registrations), and agent registrations whose inventory has wrong types or absurd values. On the
main before this test (8329f06) a user named "ali\\0ce", a project named "../x\\u0001y" and jobs
with such names were created. Each must be refused with a 400 problem+json naming the field
and its rule, nothing may be made, and the server must go on serving.

Then names a store holds from before the rules (written into the SQLite store while the server
is down, as an older corral wrote them) must not brick the server: it starts, lists them, their
user logs in and submits, and a running job renamed so recovers.

Polls with deadlines; never sleeps to wait for time to pass.

Usage: tests/security/bad_names_test.py path/to/corral [--only TEST_NAME]
"""
import hashlib
import http.client
import json
import os
import sqlite3
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import e2e_test  # noqa: E402  (its Cluster, check, submit; it reads the same argv)
from e2e_test import Cluster, check, submit  # noqa: E402

BAD_NAMES = [
    ("a NUL", "ali\x00ce"),
    ("a tab", "a\tb"),
    ("../", "../x"),
    ("../ and a control character", "../x\x01y"),
    ("an escape sequence", "x\x1b[2Jy"),
    ("U+202E (right-to-left override)", "x\u202ey"),
    ("a leading '-'", "-rf"),
    ("100,000 bytes", "a" * 100_000),
]
NODE_ID = "0123456789abcdef0123456789abcdef"


def request(cluster, method, path, body, token):
    """(status, Content-Type, the body's JSON or {}, seconds taken)."""
    conn = http.client.HTTPConnection(cluster.host, cluster.port, timeout=30)
    try:
        start = time.monotonic()
        conn.request(method, path, body=json.dumps(body).encode(),
                     headers={"Content-Type": "application/json",
                              "Authorization": "Bearer " + token})
        r = conn.getresponse()
        text = r.read()
        kind = r.getheader("Content-Type", "")
        try:
            answer = json.loads(text)
        except ValueError:
            answer = {"unparsed": text[:200].decode(errors="replace")}
        return r.status, kind, answer, time.monotonic() - start
    finally:
        conn.close()


def inventory(**fields):
    inv = {"hostname": "n2", "cpu_milli": 8000, "memory_mib": 16384, "gpu_model": "A100-80GB",
           "gpus": [{"uuid": "GPU-0", "memory_mib": 81920, "nvlink_domain": 0}],
           "labels": {"rack": "r1"}, "runtimes": ["process"]}
    inv.update(fields)
    return inv


def registration(name="n2", inv=None):
    return {"protocol_version": 1, "name": name, "node_id": NODE_ID,
            "inventory": inv if inv is not None else inventory()}


def expect_refused(c, what, method, path, body, token, field, rule):
    status, kind, answer, took = request(c, method, path, body, token)
    detail = answer.get("detail", "") if isinstance(answer, dict) else ""
    check(f"{what}: 400 problem+json naming {field} ({took * 1000:.0f} ms)",
          status == 400 and kind.startswith("application/problem+json")
          and f"field '{field}'" in detail and rule in detail and "\x00" not in detail,
          f"{status} {kind} {str(answer)[:300]}")


def test_bad_names_and_inventories_are_refused(root):
    c = Cluster(os.path.join(root, "refused"))
    try:
        c.start_agent("n1", gpus="1xA100-80GB")
        check("agent joins", c.wait_nodes(1))
        admin, join = c.token, c.join_token
        status, _ = c.api("POST", "/api/v1/environments", {"name": "base"})
        check("an environment to clone", status == 201, status)
        job = {"command": ["true"], "resources": {"gpus": 1}}
        routes = [
            ("POST", "/api/v1/users", {}, admin, "name", "a user name must be"),
            ("POST", "/api/v1/projects", {}, admin, "name", "a project name must be"),
            ("POST", "/api/v1/tokens", {}, admin, "name", "a token name must be"),
            ("POST", "/api/v1/jobs", job, admin, "name", "a job name must be"),
            ("POST", "/api/v1/sessions", job, admin, "name", "a job name must be"),
            ("POST", "/api/v1/environments", {}, admin, "name", "an environment name must be"),
            ("POST", "/api/v1/environments/base/clone", {}, admin, "name",
             "an environment name must be"),
            ("POST", "/api/v1/agent/register", registration(), join, "name",
             "a node name must be"),
        ]
        for method, path, body, token, field, rule in routes:
            for what, name in BAD_NAMES:
                expect_refused(c, f"{path} with {what}", method, path, dict(body, name=name),
                               token, field, rule)
                check(f"{path} with {what}: the server is up", c.healthy())

        # Inventories, by type and by range, with the join token.
        many_gpus = [{"uuid": f"GPU-{i}", "memory_mib": 1} for i in range(65)]
        inventories = [
            ("negative CPUs", inventory(cpu_milli=-1000), "inventory.cpu_milli"),
            ("1e15 milli-CPUs", inventory(cpu_milli=10**15), "inventory.cpu_milli"),
            ("CPUs as text", inventory(cpu_milli="64"), "inventory.cpu_milli"),
            ("CPUs as a float", inventory(cpu_milli=1e9), "inventory.cpu_milli"),
            ("2^40 MiB of memory", inventory(memory_mib=2**40), "inventory.memory_mib"),
            ("memory beyond int64", inventory(memory_mib=2**63), "inventory.memory_mib"),
            ("GPUs as a number", inventory(gpus=1_000_000_000), "inventory.gpus"),
            ("65 GPUs", inventory(gpus=many_gpus), "inventory.gpus"),
            ("a GPU of 2^30 MiB", inventory(gpus=[{"memory_mib": 2**30}]),
             "inventory.gpus[0].memory_mib"),
            ("a negative GPU memory", inventory(gpus=[{"memory_mib": -1}]),
             "inventory.gpus[0].memory_mib"),
            ("NVLink domain 10^9", inventory(gpus=[{"nvlink_domain": 10**9}]),
             "inventory.gpus[0].nvlink_domain"),
            ("a 100,000-byte GPU UUID", inventory(gpus=[{"uuid": "G" * 100_000}]),
             "inventory.gpus[0].uuid"),
            ("a GPU model with an escape sequence", inventory(gpu_model="A100\x1b[2J"),
             "inventory.gpu_model"),
            ("a hostname with ../", inventory(hostname="../etc"), "inventory.hostname"),
            ("1,000 labels", inventory(labels={f"k{i}": "v" for i in range(1000)}),
             "inventory.labels"),
            ("a label with a tab", inventory(labels={"rack": "r\t1"}), "inventory.labels"),
            ("a label of a number", inventory(labels={"rack": 1}), "inventory.labels.rack"),
            ("a runtime with a NUL", inventory(runtimes=["process", "x\x00"]),
             "inventory.runtimes"),
            ("runtimes as an object", inventory(runtimes={"process": True}),
             "inventory.runtimes"),
            ("a 100,000-byte container engine", inventory(container_engine="e" * 100_000),
             "inventory.container_engine"),
        ]
        for what, inv, field in inventories:
            expect_refused(c, f"registration with {what}", "POST", "/api/v1/agent/register",
                           registration(inv=inv), join, field, "")
            check(f"registration with {what}: the server is up", c.healthy())

        # Nothing was made, and the cluster works.
        users = [u["name"] for u in c.api("GET", "/api/v1/users")[1]]
        projects = [p["name"] for p in c.api("GET", "/api/v1/projects")[1]]
        tokens = [t["name"] for t in c.api("GET", "/api/v1/tokens")[1]]
        nodes = [n["name"] for n in c.api("GET", "/api/v1/nodes")[1]]
        envs = [e["name"] for e in c.api("GET", "/api/v1/environments")[1]["environments"]]
        jobs = c.api("GET", "/api/v1/jobs?all=1")[1]
        check("no user, project, token, node, environment or job was made",
              users == ["admin"] and projects == ["default"] and tokens == ["admin-bootstrap"]
              and nodes == ["n1"] and "base" in envs and len(envs) == len(set(envs))
              and not any(e.startswith(("..", "-", "a\t")) for e in envs) and jobs == [],
              (users, projects, tokens, nodes, envs, jobs))
        job_id = submit(c, dict(job, name="after-the-attacks"))
        check("a job after the attacks succeeds", c.wait_state(job_id, ("succeeded",), 60),
              str(c.job(job_id)))
        check("the server process never died", c.server.poll() is None)
    finally:
        c.stop()


def test_names_stored_before_the_rules_do_not_brick_the_server(root):
    if e2e_test.STORE_URL:
        print("SKIP test_names_stored_before_the_rules_do_not_brick_the_server: writes the "
              "SQLite store directly")
        return
    c = Cluster(os.path.join(root, "stored"))
    try:
        c.start_agent("n1", gpus="1xA100-80GB")
        check("stored: agent joins", c.wait_nodes(1))
        running = submit(c, {"name": "renamed-later", "command": ["sleep", "600"],
                             "resources": {"gpus": 1}})
        check("stored: a job runs", c.wait_state(running, ("running",), 30), str(c.job(running)))
        c.server.terminate()
        c.server.wait(10)
        # As an older corral (which checked no names) wrote them.
        old_user, old_project, old_job = "Old User\t", "../x\x01y", "-old\tjob\u202e"
        secret = "crl_a-token-made-before-names-were-checked"
        db = sqlite3.connect(c.store[len("sqlite:"):])
        with db:
            now = int(time.time())
            cur = db.execute("INSERT INTO users (name, admin, created_at) VALUES (?, 0, ?)",
                             (old_user, now))
            user_id = cur.lastrowid
            db.execute("INSERT INTO projects (name, description, created_at) VALUES (?, '', ?)",
                       (old_project, now))
            for project in ("default", old_project):
                db.execute("INSERT INTO project_members (project, user_id) VALUES (?, ?)",
                           (project, user_id))
            db.execute("INSERT INTO tokens (user_id, name, hash, created_at) VALUES (?, ?, ?, ?)",
                       (user_id, "old\x7ftoken", hashlib.sha256(secret.encode()).hexdigest(), now))
            (spec_json,) = db.execute("SELECT spec_json FROM jobs WHERE id = ?",
                                      (running,)).fetchone()
            spec = json.loads(spec_json)
            spec["name"] = old_job
            db.execute("UPDATE jobs SET name = ?, spec_json = ? WHERE id = ?",
                       (old_job, json.dumps(spec), running))
        db.close()
        c.start_server()  # waits until it answers /healthz
        check("stored: the server starts with names that break today's rules", c.healthy())
        users = [u["name"] for u in c.api("GET", "/api/v1/users")[1]]
        projects = [p["name"] for p in c.api("GET", "/api/v1/projects")[1]]
        check("stored: they list", old_user in users and old_project in projects,
              (users, projects))
        status, me = c.api("GET", "/api/v1/whoami", token=secret)
        check("stored: their user logs in", status == 200 and me.get("user") == old_user,
              (status, me))
        view = c.job(running)
        check("stored: the renamed job recovered, running, with its name",
              view.get("name") == old_job and view.get("state") == "running", view)
        jobs = c.api("GET", "/api/v1/jobs?all=1")[1]
        check("stored: jobs list", [j["name"] for j in jobs] == [old_job], jobs)
        out = c.cli("jobs", "--all")
        check("stored: the CLI lists them", out.returncode == 0, out.stderr)
        # Names that refer to what exists are looked up, not checked: the old user submits to
        # the old project once the running job is done.
        status, _ = c.api("POST", f"/api/v1/jobs/{running}/cancel")
        check("stored: the old job cancels", status == 202 and
              c.wait_state(running, ("cancelled",), 30), c.job(running))
        theirs = submit(c, {"name": "new", "project": old_project, "command": ["true"],
                            "resources": {"gpus": 1}}, token=secret)
        check("stored: the old user's job in the old project succeeds",
              c.wait_state(theirs, ("succeeded",), 60), c.job(theirs))
        check("stored: the server process never died", c.server.poll() is None)
    finally:
        c.stop()


def main():
    e2e_test.run_tests("security bad names", (
        test_bad_names_and_inventories_are_refused,
        test_names_stored_before_the_rules_do_not_brick_the_server))


if __name__ == "__main__":
    main()
