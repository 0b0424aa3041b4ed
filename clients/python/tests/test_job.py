"""The in-job API (corral/job.py): what it reads from the task's environment, where it installs
its SIGTERM handler, and the CA its client verifies the server with."""

import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

import corral.job
from corral import ServerUnreachable
from test_transport import OK, Server

CLIENT_SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Imports corral.job, sends itself a SIGTERM and says whether it is still there.
SIGTERM_SELF = ("import os, signal, corral.job; os.kill(os.getpid(), signal.SIGTERM); "
                "print('alive', corral.job.should_stop(), corral.job.stop_request().reason)")


def run_python(code, **env):
    base = {k: v for k, v in os.environ.items() if not k.startswith("CORRAL_")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env=dict(base, PYTHONPATH=CLIENT_SOURCE, **env))


class SigtermTest(unittest.TestCase):
    def test_in_a_job_a_sigterm_is_recorded_and_the_task_runs_on(self):
        r = run_python(SIGTERM_SELF, CORRAL_JOB_ID="7")
        self.assertEqual((r.returncode, r.stdout), (0, "alive True SIGTERM\n"), r.stderr)

    def test_outside_a_job_importing_it_leaves_sigterm_alone(self):
        r = run_python(SIGTERM_SELF)  # a notebook or a script: SIGTERM still ends it
        self.assertEqual((r.returncode, r.stdout), (-signal.SIGTERM, ""), r.stderr)


class CurrentTest(unittest.TestCase):
    def test_the_task_environment(self):
        env = {"CORRAL_JOB_ID": "7", "CORRAL_TASK_INDEX": "1", "CORRAL_NUM_TASKS": "2",
               "CORRAL_ALLOCATION_ID": "42", "CORRAL_ARRAY_INDEX": "3",
               "CORRAL_GENERATION": "2", "CORRAL_NODE_NAME": "n1"}
        with mock.patch.dict(os.environ, env, clear=True):
            ctx = corral.job.current()
        self.assertEqual(ctx, corral.job.JobContext(
            job_id=7, rank=1, world_size=2, local_rank=0, task_index=1, num_tasks=2,
            array_index=3, generation=2, node="n1", allocation_id=42))

    def test_values_that_are_not_integers_are_taken_as_unset(self):
        env = {"CORRAL_JOB_ID": "--1", "CORRAL_TASK_INDEX": "1x", "RANK": "-",
               "WORLD_SIZE": "9" * 40, "CORRAL_ALLOCATION_ID": ""}
        with mock.patch.dict(os.environ, env, clear=True):
            ctx = corral.job.current()
        self.assertEqual((ctx.job_id, ctx.task_index, ctx.rank, ctx.world_size,
                          ctx.allocation_id), (None, 0, 0, 1, None))


class CaCertTest(unittest.TestCase):
    """The in-job client verifies an https server with CORRAL_CA_CERT (the agent passes the
    cluster's CA to its tasks)."""

    def setUp(self):
        if not shutil.which("openssl"):
            self.skipTest("openssl is needed to make a certificate")
        self.dir = tempfile.mkdtemp()
        self.cert, key = (os.path.join(self.dir, n) for n in ("cert.pem", "key.pem"))
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days",
                        "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", key, "-out", self.cert], check=True, capture_output=True,
                       timeout=60)
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(self.cert, key)
        self.server = Server([OK], tls=tls)

    def tearDown(self):
        self.server.close()
        shutil.rmtree(self.dir)
        corral.job._client = None

    def job_client(self, **env):
        corral.job._client = None
        job = {"CORRAL_JOB_ID": "7", "CORRAL_SERVER": self.server.url,
               "CORRAL_JOB_TOKEN": "job-token", "CORRAL_RETRY_TIMEOUT": "0",
               "XDG_CONFIG_HOME": self.dir}
        with mock.patch.dict(os.environ, dict(job, **env), clear=True):
            client, job_id = corral.job._job_client()
        self.assertEqual(job_id, 7)
        return client

    def test_the_job_client_trusts_corral_ca_cert(self):
        self.assertEqual(self.job_client(CORRAL_CA_CERT=self.cert).whoami(), {"user": "u"})
        self.assertEqual(self.server.requests[0][3], "Bearer job-token")

    def test_without_it_the_server_is_not_trusted(self):
        with self.assertRaises(ServerUnreachable) as e:
            self.job_client().whoami()
        self.assertIn("CERTIFICATE_VERIFY_FAILED", str(e.exception))


if __name__ == "__main__":
    unittest.main()
