#!/usr/bin/env python3
"""Hostile input, exposure rules (docs/security.md, "What others can see"): what a member learns
of another project's work. On the main before this test (8329f06), any member read the job id,
user and project of every running job from GET /api/v1/nodes and GET /api/v1/gpus.

A real `corral server` and agent (2 fake A100s, sampled every 0.2 s) on loopback. Sam runs a job
in project "secret"; eve, a member of "default" only, runs one of her own. Eve must see Sam's
GPU only as "in use" ({"milli": 1000} in a node's gpu_tasks, {"share": 1.0} in a GPU's holders;
`corral gpus` prints "in use"), its reading and the free capacity still shown; nothing eve can
read anywhere names Sam, his project or his job; Sam's job, logs, GPUs and cancel answer her
404. Sam and the admin see it in full. With `corral server --show-all-work` eve sees everything,
as before.

Polls with deadlines; never sleeps to wait for time to pass.

Usage: tests/security/exposure_test.py path/to/corral [--only TEST_NAME]
"""
import json
import os
import re
import sys
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import e2e_test  # noqa: E402  (its Cluster, check, wait_for; it reads the same argv)
from e2e_test import Cluster, check, submit, wait_for  # noqa: E402

# Every route eve may read without naming a job (the list routes, counts and reports).
LIST_ROUTES = ["/api/v1/nodes", "/api/v1/gpus", "/api/v1/gpus?idle=1", "/api/v1/jobs?all=1",
               "/api/v1/queue", "/api/v1/summary", "/api/v1/summary/history", "/api/v1/projects",
               "/api/v1/usage", "/api/v1/environments", "/api/v1/capacity/forecast",
               "/api/v1/sessions", "/api/v1/policy", "/api/v1/whoami", "/api/v1/tokens"]


def set_up(c):
    """Eve and sam, project "secret" (sam's), a running job of each: (eve, sam, their jobs)."""
    c.start_agent("n1", gpus="2xA100-80GB", extra=["--metrics-interval", "0.2"])
    check("agent joins", c.wait_nodes(1))
    status, _ = c.api("POST", "/api/v1/projects", {"name": "secret"})
    check("project secret created", status == 201)
    status, eve = c.api("POST", "/api/v1/users", {"name": "eve"})
    check("eve created (member of default only)", status == 201, eve)
    status, sam = c.api("POST", "/api/v1/users", {"name": "sam", "projects": ["secret"]})
    check("sam created (member of secret)", status == 201, sam)
    spec = {"command": ["sleep 300"], "shell": True, "resources": {"gpus": 1},
            "env": {"FAKE_GPU_UTILIZATION": "61"}}
    sams = submit(c, dict(spec, name="sams-job", project="secret"), token=sam["token"])
    eves = submit(c, dict(spec, name="eves-job"), token=eve["token"])
    check("both jobs run", c.wait_state(sams, ("running",)) and c.wait_state(eves, ("running",)))
    # The GPU monitor names the holders once a sample taken while they run arrives.
    check("the GPUs report their holders",
          wait_for(lambda: sum(len(g["holders"]) for g in c.api("GET", "/api/v1/gpus")[1]["gpus"]) == 2,
                   30))
    return eve["token"], sam["token"], sams, eves


def tasks_on_gpus(c, token):
    status, nodes = c.api("GET", "/api/v1/nodes", token=token)
    assert status == 200, (status, nodes)
    return [t for n in nodes for gpu in n["gpu_tasks"] for t in gpu]


def holders(c, token):
    status, body = c.api("GET", "/api/v1/gpus", token=token)
    assert status == 200, (status, body)
    return [(g, h) for g in body["gpus"] for h in g["holders"]]


def names_sams_work(text, sams):
    """True when `text` (an answer) names sam, his project, his job's name or its id."""
    return any(word in text for word in ('"sam"', "'sam'", '"secret"', "'secret'", "sams-job")) \
        or re.search(r'"job":\s*%d\b' % sams, text) is not None


def test_a_member_sees_other_projects_work_only_as_in_use(root):
    c = Cluster(os.path.join(root, "default"))
    try:
        eve, sam, sams, eves = set_up(c)
        # Nodes: eve's own task in full, sam's as its share only; the capacity is all there.
        tasks = tasks_on_gpus(c, eve)
        check("nodes, as eve: her job by id, sam's only as {\"milli\": 1000}",
              sorted(json.dumps(t, sort_keys=True) for t in tasks) == sorted([
                  json.dumps({"milli": 1000}),
                  json.dumps({"job": eves, "task": 0, "user": "eve", "project": "default",
                              "milli": 1000}, sort_keys=True)]), tasks)
        status, nodes = c.api("GET", "/api/v1/nodes", token=eve)
        check("nodes, as eve: both GPUs allocated", nodes[0]["gpu_free_milli"] == [0, 0], nodes)
        # GPUs: sam's holder is its share; its reading (61 %) stays.
        def hidden_holders():
            return [(g, h) for g, h in holders(c, eve) if "job" not in h]
        wait_for(lambda: any(g.get("utilization_percent") == 61 for g, _ in hidden_holders()), 10)
        seen = holders(c, eve)
        hidden = hidden_holders()
        check("gpus, as eve: sam's holder is {\"share\": 1.0}, its reading shown",
              len(hidden) == 1 and hidden[0][1] == {"share": 1.0}
              and hidden[0][0]["utilization_percent"] == 61, seen)
        check("gpus, as eve: her own holder in full",
              [h["job"] for _, h in seen if "job" in h] == [eves], seen)
        # Every list route eve can read: nothing of sam's.
        for route in LIST_ROUTES:
            status, headers, body = c.get_raw(route, token=eve)
            text = body.decode(errors="replace")
            check(f"GET {route} as eve ({status}) names neither sam, his project nor his job",
                  status == 200 and not names_sams_work(text, sams), text[:300])
        # The live stream's first frame: counts only.
        req = urllib.request.Request(c.url + "/api/v1/events/stream",
                                     headers={"Authorization": "Bearer " + eve})
        with urllib.request.urlopen(req, timeout=10) as r:
            frame = b""
            while b"\n\n" not in frame:
                frame += r.read1(4096)
        check("the event stream as eve names nothing of sam's",
              frame.startswith(b"id: 1\nevent: summary") and not names_sams_work(frame.decode(), sams),
              frame[:200])
        # Sam's job itself: not found, whatever eve asks of it.
        for method, path in (("GET", f"/api/v1/jobs/{sams}"), ("GET", f"/api/v1/jobs/{sams}/logs"),
                             ("GET", f"/api/v1/jobs/{sams}/gpus"),
                             ("GET", f"/api/v1/jobs/{sams}/gpu-history"),
                             ("POST", f"/api/v1/jobs/{sams}/cancel")):
            status, body = c.api(method, path, {} if method == "POST" else None, token=eve)
            check(f"{method} {path} as eve: 404 problem+json, naming nothing of sam's",
                  status == 404 and not names_sams_work(json.dumps(body), sams), body)
        check("sam's job still runs", c.job(sams)["state"] == "running")
        # The CLI prints the hidden holder as "in use".
        out = c.cli("gpus", token=eve)
        check("corral gpus as eve: \"in use\", no sam", out.returncode == 0 and "in use" in out.stdout
              and not re.search(r"\bsam\b|secret", out.stdout), out.stdout + out.stderr)
        # Sam and the admin see sam's job by name.
        for who, token in (("sam", sam), ("the admin", None)):
            named = [t for t in tasks_on_gpus(c, token) if t.get("job") == sams]
            check(f"nodes, as {who}: sam's job by id, user and project",
                  len(named) == 1 and named[0]["user"] == "sam" and named[0]["project"] == "secret",
                  named)
            check(f"gpus, as {who}: sam's job among the holders",
                  any(h.get("job") == sams and h["user"] == "sam" for _, h in holders(c, token)))
    finally:
        c.stop()


def test_show_all_work_shows_everyone_everything(root):
    c = Cluster(os.path.join(root, "all"), server_args=["--show-all-work"])
    try:
        eve, _, sams, _ = set_up(c)
        named = [t for t in tasks_on_gpus(c, eve) if t.get("job") == sams]
        check("--show-all-work: nodes, as eve: sam's job by id, user and project",
              len(named) == 1 and named[0]["user"] == "sam" and named[0]["project"] == "secret",
              named)
        check("--show-all-work: gpus, as eve: sam's job among the holders",
              any(h.get("job") == sams and h["user"] == "sam" for _, h in holders(c, eve)))
        status, body = c.api("GET", f"/api/v1/jobs/{sams}", token=eve)
        check("--show-all-work: sam's job itself stays his project's (404 for eve)", status == 404,
              body)
    finally:
        c.stop()


def main():
    e2e_test.run_tests("security exposure", (test_a_member_sees_other_projects_work_only_as_in_use,
                                             test_show_all_work_shows_everyone_everything))


if __name__ == "__main__":
    main()
