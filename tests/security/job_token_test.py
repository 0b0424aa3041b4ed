#!/usr/bin/env python3
"""Hostile input: the job token (docs/security.md, "The job token"; docs/in-job.md). A task holds
CORRAL_JOB_TOKEN; a hostile one (or whoever reads its environment) tries to reach beyond its job.
Against a real `corral server` and agent on loopback:

- forged tokens (another job's id on this job's MAC, a MAC changed by one character, upper-case
  hex, padding, a huge id, the bare prefix) are 401 problem+json, never another job;
- the token reaches its own job's channel routes and nothing else: other jobs, listings, users,
  tokens, nodes, cancel, its own job's GPUs, a dotted path: 403 (or 404 where no route matches);
- it is not a login: not as the dashboard's cookie, not to POST /api/v1/login;
- it is in no answer and no log of the server: the job's view, its events, the server's log;
- it stops working the moment its job ends (401).

Polls with deadlines; never sleeps to wait for time to pass.

Usage: tests/security/job_token_test.py path/to/corral [--only TEST_NAME]
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import e2e_test  # noqa: E402  (its Cluster, check, wait_for; it reads the same argv)
from e2e_test import Cluster, check, http_request, submit, wait_for  # noqa: E402


def ask(c, method, path, token, body=None, headers=None):
    """(status, parsed body or text, content type) of one request with `token` as bearer."""
    h = dict(headers or {})
    if token is not None:
        h["Authorization"] = "Bearer " + token
    h["Content-Type"] = "application/json"
    status, answer_headers, text = http_request(
        c, method, path, h, json.dumps(body).encode() if body is not None else None)
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = text
    return status, parsed, answer_headers.get("content-type", "")


def test_a_job_token_reaches_its_own_job_only(root):
    work = os.path.join(root, "job-token")
    c = Cluster(work)
    try:
        c.start_agent("n1", "2xT4")
        check("agent joins", c.wait_nodes(1))
        token_file = os.path.join(work, "token")
        done = os.path.join(work, "done")
        job = submit(c, {"command": ["sh", "-c",
                                     f'echo "$CORRAL_JOB_TOKEN" > {token_file}.tmp && '
                                     f'mv {token_file}.tmp {token_file}; '
                                     f'while [ ! -e {done} ]; do sleep 0.1; done'],
                         "workdir": work})
        other = submit(c, {"command": ["sleep", "60"], "workdir": work})
        check("the job wrote its token", wait_for(lambda: os.path.exists(token_file), 30))
        token = open(token_file).read().strip()
        prefix = f"crj_{job}_"
        check("the token is crj_<job>_<64 hex>", token.startswith(prefix) and
              len(token) == len(prefix) + 64, token[:8])
        mac = token[len(prefix):]
        flipped = mac[:-1] + ("0" if mac[-1] != "0" else "1")
        forged = [f"crj_{other}_{mac}", prefix + flipped, prefix + mac.upper(), token + "0",
                  prefix + mac[:-1], f"crj_{'9' * 30}_{mac}", "crj_", "crj_" + mac,
                  f"crj_0{job}_{mac}", f"crj_{job}__{mac}"]
        for bad in forged:
            status, body, kind = ask(c, "GET", f"/api/v1/jobs/{job}", bad)
            check(f"a forged token ({bad[:12]}...) is 401 problem+json",
                  status == 401 and kind.startswith("application/problem+json"), (status, body))
            status, body, _ = ask(c, "GET", f"/api/v1/jobs/{other}", bad)
            check("and never reads another job", status == 401, (status, body))

        check("its own job: 200", ask(c, "GET", f"/api/v1/jobs/{job}", token)[0] == 200)
        check("its own report: 204", ask(c, "POST", f"/api/v1/jobs/{job}/report", token,
                                        {"metrics": {"loss": 1}})[0] == 204)
        beyond = [("GET", f"/api/v1/jobs/{other}", None), ("GET", f"/api/v1/jobs/{other}/logs", None),
                  ("POST", f"/api/v1/jobs/{other}/checkpoint", {"path": "/x"}),
                  ("POST", f"/api/v1/jobs/{job}/cancel", {}), ("GET", f"/api/v1/jobs/{job}/gpus", None),
                  ("GET", "/api/v1/jobs", None), ("GET", "/api/v1/jobs?all=1", None),
                  ("POST", "/api/v1/jobs", {"command": ["true"]}), ("GET", "/api/v1/whoami", None),
                  ("GET", "/api/v1/users", None), ("POST", "/api/v1/tokens", {"name": "mine"}),
                  ("GET", "/api/v1/nodes", None), ("GET", "/api/v1/summary", None),
                  ("POST", "/api/v1/nodes/n1/drain", {}),
                  ("GET", f"/api/v1/jobs/{job}/../{other}", None),
                  ("GET", f"/api/v1/jobs/{job}%2F..%2F{other}", None)]
        for method, path, body in beyond:
            status, answer, kind = ask(c, method, path, token, body)
            check(f"the job token on {method} {path}: refused",
                  status in (403, 404) and kind.startswith("application/problem+json"),
                  (status, answer))
        status, _, _ = ask(c, "GET", f"/api/v1/jobs/{job}", None,
                           headers={"Cookie": "corral_token=" + token})
        check("the job token is no dashboard cookie: 401", status == 401, status)
        status, _, _ = ask(c, "POST", "/api/v1/login", None, {"token": token})
        check("the job token is no login", status == 401, status)

        view = json.dumps(c.job(job))
        check("the token is not in the job's view or events", mac not in view)
        open(done, "w").close()
        check("the job ends", c.wait_state(job, ("succeeded",), 30), c.job(job))
        status, body, _ = ask(c, "POST", f"/api/v1/jobs/{job}/report", token, {"metrics": {"x": 1}})
        check("after its end the token is 401", status == 401, (status, body))
        log = open(os.path.join(work, "server.log")).read()
        check("the token is in no line of the server's log", mac not in log)
        check("the server process never died", c.server.poll() is None)
    finally:
        c.stop()


def main():
    e2e_test.run_tests("security job token", (test_a_job_token_reaches_its_own_job_only,))


if __name__ == "__main__":
    main()
