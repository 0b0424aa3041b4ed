"""What the client does with each kind of answer (corral/transport.py, corral/client.py), against
small real HTTP servers on loopback that answer as a follower, a saturated server, a rate limit
or a proxy would."""

import http.server
import json
import os
import pickle
import threading
import time
import unittest

from corral import (ApiError, Client, JobFailed, ServerUnreachable, build_spec, parse_duration,
                    transport)
from corral.models import Job


class Server:
    """An HTTP server on 127.0.0.1 whose answers come, in turn, from `answers`: (status,
    headers, body) or None to close the connection without answering. Records each request.
    With `tls` (an ssl.SSLContext holding its certificate): HTTPS."""

    def __init__(self, answers, tls=None):
        self.answers = list(answers)
        self.requests = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def handle_one(self):
                length = int(self.headers.get("Content-Length") or 0)
                outer.requests.append((self.command, self.path, self.rfile.read(length),
                                       self.headers.get("Authorization")))
                answer = outer.answers.pop(0) if len(outer.answers) > 1 else outer.answers[0]
                if answer is None:
                    self.close_connection = True
                    return
                status, headers, body = answer
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                data = json.dumps(body).encode()
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = handle_one

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        scheme = "https" if tls else "http"
        self.url = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


OK = (200, {}, {"user": "u"})


def follower(leader_url):
    return (503, {"Corral-Leader": leader_url, "Content-Type": "application/problem+json"},
            {"title": "unavailable", "status": 503, "detail": "this server is not the leader"})


class TransportTest(unittest.TestCase):
    def setUp(self):
        self.servers = []
        os.environ["CORRAL_RETRY_TIMEOUT"] = "2"

    def tearDown(self):
        del os.environ["CORRAL_RETRY_TIMEOUT"]
        for s in self.servers:
            s.close()

    def serve(self, *answers):
        s = Server(answers)
        self.servers.append(s)
        return s

    def test_a_follower_sends_the_client_to_the_leader_it_names(self):
        leader = self.serve(OK)
        other = self.serve(follower(leader.url))
        client = Client(other.url, "tok")
        self.assertEqual(client.whoami(), {"user": "u"})
        self.assertEqual(len(other.requests), 1)
        self.assertEqual(leader.requests[0][3], "Bearer tok")
        client.whoami()  # the next request starts at the leader
        self.assertEqual((len(other.requests), len(leader.requests)), (1, 2))

    def test_a_saturated_server_is_asked_again_after_retry_after(self):
        busy = (503, {"Corral-Busy": "1", "Retry-After": "1"}, {"detail": "server saturated"})
        s = self.serve(busy, (201, {}, {"id": 7, "state": "pending"}))
        started = time.monotonic()
        self.assertEqual(Client(s.url, "t").submit(["true"]).id, 7)
        self.assertGreaterEqual(time.monotonic() - started, 1.0)
        self.assertEqual([r[0] for r in s.requests], ["POST", "POST"])

    def test_the_busy_wait_budget_is_per_request_not_per_client(self):
        busy = (503, {"Corral-Busy": "1", "Retry-After": "1"}, {"detail": "server saturated"})
        s = self.serve(busy, OK, busy, OK, busy, busy, OK)
        budget = transport.BUSY_BUDGET_S
        transport.BUSY_BUDGET_S = 1.5  # room for one wait of 1 to 1.2 s, not two
        try:
            client = Client(s.url, "t")
            self.assertEqual(client.whoami(), {"user": "u"})
            self.assertEqual(client.whoami(), {"user": "u"})  # a new request: a new budget
            with self.assertRaises(ServerUnreachable) as e:
                client.whoami()
        finally:
            transport.BUSY_BUDGET_S = budget
        self.assertIn("server saturated (still busy after waiting 1 s)", str(e.exception))
        self.assertEqual(len(s.requests), 6)

    def test_a_limit_far_off_is_raised_at_once_with_the_problem(self):
        problem = {"title": "resource_exhausted", "status": 429, "detail": "submit limit"}
        s = self.serve((429, {"Retry-After": "60"}, problem))
        with self.assertRaises(ApiError) as e:
            Client(s.url, "t").submit(["true"])
        self.assertEqual((e.exception.status, e.exception.problem), (429, problem))
        self.assertEqual(len(s.requests), 1)

    def test_a_submission_lost_after_sending_is_not_sent_again(self):
        s = self.serve(None)
        with self.assertRaises(ServerUnreachable) as e:
            Client(s.url, "t").submit(["true"])
        self.assertIn("not sent again", str(e.exception))
        self.assertEqual(len(s.requests), 1)

    def test_an_answer_that_is_not_json_is_an_api_error_with_its_text(self):
        s = self.serve((502, {}, "bad gateway"))
        with self.assertRaises(ApiError) as e:
            Client(s.url, "t").get(1)
        self.assertEqual((e.exception.status, e.exception.detail), (502, '"bad gateway"'))


class PickleTest(unittest.TestCase):
    def test_the_client_errors_travel_back_from_jobs(self):
        e = pickle.loads(pickle.dumps(ApiError(404, {"title": "not_found", "detail": "job 7"})))
        self.assertEqual((e.status, e.title, e.detail, str(e)),
                         (404, "not_found", "job 7", "HTTP 404 not_found: job 7"))
        self.assertEqual(str(pickle.loads(pickle.dumps(JobFailed("gone", None)))), "gone")


class SpecTest(unittest.TestCase):
    def test_keyword_arguments_become_a_job_spec(self):
        self.assertEqual(
            build_spec("echo hi", gpus=2, nodes=2, time="1h30m", name="n", env={"A": "1"},
                       project=None),
            {"command": ["echo hi"], "shell": True, "resources": {"gpus": 2}, "tasks": 2,
             "time_limit_s": 5400, "name": "n", "env": {"A": "1"}})
        self.assertEqual(build_spec(["a", "b"]), {"command": ["a", "b"]})
        with self.assertRaises(TypeError):
            build_spec(["a"], gpu=1)

    def test_a_range_of_gpus_or_nodes_makes_an_elastic_job(self):
        self.assertEqual(build_spec(["a"], gpus="2-8", gpu_step=2),
                         {"command": ["a"],
                          "elastic": {"unit": "gpus", "min": 2, "max": 8, "step": 2}})
        self.assertEqual(build_spec(["a"], nodes=(1, 2), gpus=4),
                         {"command": ["a"], "resources": {"gpus": 4},
                          "elastic": {"unit": "nodes", "min": 1, "max": 2, "step": 0}})
        with self.assertRaises(ValueError):
            build_spec(["a"], gpus="2-8", nodes="1-2")
        with self.assertRaises(ValueError):
            build_spec(["a"], gpus=2, gpu_step=2)

    def test_a_checkpoint_grace_is_a_spec_field_and_the_job_shows_its_stop_grace(self):
        self.assertEqual(build_spec(["a"], checkpoint_grace_s=120),
                         {"command": ["a"], "checkpoint_grace_s": 120})
        job = Job.from_json({"id": 7, "state": "running", "lost_work_gpu_s": 3.5,
                             "stop_grace_s": 120, "spec": {"checkpoint_grace_s": 900}})
        self.assertEqual((job.lost_work_gpu_s, job.stop_grace_s), (3.5, 120))
        older = Job.from_json({"id": 8, "state": "pending"})
        self.assertEqual((older.lost_work_gpu_s, older.stop_grace_s), (0.0, 0))

    def test_durations(self):
        self.assertEqual([parse_duration(v) for v in (90, "90", "2d", "1h30m", "45s", "1:00:00",
                                                      "2-01:00:00", "10:30")],
                         [90, 90, 172800, 5400, 45, 3600, 176400, 630])
        for bad in ("1x", "", -1, "h"):
            with self.assertRaises(ValueError):
                parse_duration(bad)


if __name__ == "__main__":
    unittest.main()
