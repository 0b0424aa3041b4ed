#!/usr/bin/env python3
"""Back-pressure end to end (docs/control-plane.md, "Back-pressure"): a real `corral server` with
a small --max-requests-in-flight, flooded with submissions from 48 connections while jobs run on
an agent, answers the surplus at once with 503 problem+json, Retry-After and Corral-Busy instead
of letting requests time out; every submission it acknowledged (201) exists afterwards, none
twice; the agent's heartbeats are never shed (its node stays ready); /metrics counts the
refusals; `corral submit` during the flood waits the refusals out and succeeds.

Polls with deadlines; never sleeps to wait for time to pass.

Usage: tests/backpressure_test.py path/to/corral [--only TEST_NAME]
(BACKPRESSURE_SERVER_ARGS="--max-requests-in-flight 0" runs the same flood with no cap, to
compare: its "refused" check then fails by design.)
"""
import http.client
import json
import os
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_test  # noqa: E402  (its Cluster, check, wait_for; it reads the same argv)
from e2e_test import Cluster, check, wait_for  # noqa: E402

FLOODERS = int(os.environ.get("BACKPRESSURE_FLOODERS", "48"))
FLOOD_SECONDS = 4.0


def metrics(c):
    req = urllib.request.Request(c.url + "/metrics")
    req.add_header("Authorization", "Bearer " + c.token)
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.read().decode()


def metric(text, name, pool):
    prefix = f'{name}{{pool="{pool}"}} '
    for line in text.splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix):])
    return None


def flood(c, stop_at, results, lock):
    """Submits short jobs on one keep-alive connection until `stop_at`, recording each answer:
    ("created", id), ("busy", status, headers, body) or ("error", repr)."""
    conn = http.client.HTTPConnection(c.host, c.port, timeout=10)
    spec = json.dumps({"command": ["true"], "resources": {"gpus": 0}}).encode()
    headers = {"Authorization": "Bearer " + c.token, "Content-Type": "application/json"}
    mine = []
    while time.monotonic() < stop_at:
        try:
            sent = time.monotonic()
            conn.request("POST", "/api/v1/jobs", body=spec, headers=headers)
            r = conn.getresponse()
            body = r.read()
            took = time.monotonic() - sent
            if r.status == 201:
                mine.append(("created", json.loads(body)["id"], took))
            else:
                mine.append(("busy", r.status, {k.lower(): v for k, v in r.getheaders()},
                             body.decode(errors="replace"), took))
        except Exception as e:  # a timeout or a reset: what back-pressure must prevent
            mine.append(("error", repr(e)))
            conn.close()
            conn = http.client.HTTPConnection(c.host, c.port, timeout=10)
    conn.close()
    with lock:
        results.extend(mine)


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))] if ordered else float("nan")


# The server's flags; BACKPRESSURE_SERVER_ARGS replaces them (to compare with no cap: "0").
SERVER_ARGS = (os.environ["BACKPRESSURE_SERVER_ARGS"].split()
               if os.environ.get("BACKPRESSURE_SERVER_ARGS")
               else ["--max-requests-in-flight", "4", "--admission-wait", "20ms"])


def test_a_saturated_server_answers_503_with_retry_after_and_loses_nothing(root):
    c = Cluster(os.path.join(root, "saturated"), server_args=SERVER_ARGS)
    try:
        c.start_agent("node-a", gpus="2xA100-80GB")
        check("the agent's node is ready", c.wait_nodes(1))
        results, lock = [], threading.Lock()
        stop_at = time.monotonic() + FLOOD_SECONDS
        threads = [threading.Thread(target=flood, args=(c, stop_at, results, lock))
                   for _ in range(FLOODERS)]
        for t in threads:
            t.start()
        # A user's CLI in the middle of the flood.
        cli = c.cli("submit", "--", "true")
        for t in threads:
            t.join()
        created = [r[1] for r in results if r[0] == "created"]
        busy = [r for r in results if r[0] == "busy"]
        errors = [r[1] for r in results if r[0] == "error"]
        answered = [r[-1] * 1000 for r in results if r[0] != "error"]
        print(f"   {len(created)} created, {len(busy)} refused, {len(errors)} errors "
              f"in {FLOOD_SECONDS} s from {FLOODERS} connections; answered in p50 "
              f"{percentile(answered, 0.5):.1f} ms, p99 {percentile(answered, 0.99):.1f} ms, "
              f"max {max(answered, default=0):.1f} ms", flush=True)
        check("no request timed out or was reset", not errors, errors[:3])
        check("some submissions were refused (the server was saturated)", busy, len(results))
        bad = [r for r in busy
               if r[1] != 503 or not r[2].get("content-type", "").startswith(
                   "application/problem+json") or int(r[2].get("retry-after", "0")) < 1
               or r[2].get("corral-busy") != "1"
               or "server saturated: " not in json.loads(r[3]).get("detail", "")]
        check("every refusal is 503 problem+json 'server saturated' with Retry-After and "
              "Corral-Busy", not bad, bad[:2])
        check("acknowledged submissions have distinct ids", len(set(created)) == len(created))
        missing = [i for i in created if c.api("GET", f"/api/v1/jobs/{i}")[0] != 200]
        check("every acknowledged submission exists", not missing, missing[:5])
        check("the CLI's submission during the flood succeeded", cli.returncode == 0,
              (cli.returncode, cli.stderr))
        if "server busy, retrying in" in cli.stderr:
            print("   the CLI was refused and waited:", cli.stderr.strip().splitlines()[0])
        text = metrics(c)
        refused = metric(text, "corral_http_requests_refused_total", "api")
        check("/metrics counts the API's refusals", refused is not None and refused >= len(busy),
              (refused, len(busy)))
        check("no agent request was refused",
              metric(text, "corral_http_requests_refused_total", "agent") == 0, text[-600:])
        nodes = c.api("GET", "/api/v1/nodes")[1]
        check("the node stayed ready through the flood",
              [n["state"] for n in nodes] == ["ready"], nodes)
        # Jobs run meanwhile: the first acknowledged one ends (the agent drains the rest).
        check("an acknowledged job runs to its end", bool(created) and wait_for(
            lambda: c.job(created[0]).get("state") == "succeeded", 60), created[:1])
    finally:
        c.stop()


def main():
    e2e_test.run_tests("back-pressure",
                       (test_a_saturated_server_answers_503_with_retry_after_and_loses_nothing,))


if __name__ == "__main__":
    main()
