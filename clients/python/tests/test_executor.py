"""The Executor's folder and the runner (corral/executor.py, corral/runner.py): the call folder's
mode, what a refused submission leaves, and what the runner makes of a SystemExit and of a result
that cannot be pickled (the runner runs as a job would, in its own interpreter)."""

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import unittest

from corral import ApiError, Client, Executor, JobFailed, JobHandle, calls
from test_transport import Server

CLIENT_SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class FolderTest(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.mkdtemp()
        os.environ["CORRAL_RETRY_TIMEOUT"] = "1"

    def tearDown(self):
        del os.environ["CORRAL_RETRY_TIMEOUT"]
        shutil.rmtree(self.folder)

    def executor(self, *answers):
        self.server = Server(answers)
        self.addCleanup(self.server.close)
        return Executor(self.folder, client=Client(self.server.url, "t"))

    def test_a_call_folder_is_the_users_alone(self):
        h = self.executor((201, {}, {"id": 7, "state": "pending"})).submit(pow, 2, 10)
        self.assertEqual(h.id, 7)
        self.assertEqual(stat.S_IMODE(os.stat(h.call_dir).st_mode), 0o700)
        self.assertEqual(os.listdir(self.folder), [os.path.basename(h.call_dir)])

    def test_a_refused_submission_leaves_no_call_folder(self):
        problem = {"title": "invalid_argument", "status": 400, "detail": "array: too many"}
        ex = self.executor((400, {}, problem))
        with self.assertRaises(ApiError):
            ex.map_array(pow, range(3), range(3))
        with self.assertRaises(ApiError):
            ex.submit(pow, 2, 10)
        with self.assertRaises(TypeError):  # refused here: nothing sent
            Executor(self.folder, client=ex.client, colour="red").submit(pow, 2, 10)
        self.assertEqual(os.listdir(self.folder), [])
        self.assertEqual(len(self.server.requests), 2)


def run_call(folder, fn, *args):
    """Writes the call as an Executor does and runs the runner on it: (exit status, stderr)."""
    call_dir = os.path.join(folder, "call")
    os.mkdir(call_dir)
    calls.write_atomically(os.path.join(call_dir, calls.CALL_FILE),
                           calls.dumps_call(calls.Call(fn, [(args, {})])))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CORRAL_", "RANK"))}
    r = subprocess.run([sys.executable, "-m", "corral.runner", call_dir], capture_output=True,
                       text=True, timeout=60, env=dict(env, PYTHONPATH=CLIENT_SOURCE))
    return r.returncode, r.stderr, JobHandle(None, 7, call_dir, 0, 1)


class RunnerTest(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.folder)

    def test_a_remote_system_exit_is_job_failed_here_not_an_exit(self):
        status, stderr, handle = run_call(self.folder, sys.exit, 3)
        self.assertEqual(status, 1, stderr)
        with self.assertRaises(JobFailed) as e:
            handle._outcome(0, None)
        self.assertEqual(str(e.exception), "job 7 rank 0 raised SystemExit(3)")
        self.assertIn("SystemExit: 3", e.exception.__cause__.text)

    def test_a_result_that_cannot_be_pickled_fails_the_job(self):
        status, stderr, handle = run_call(self.folder, threading.Lock)
        self.assertEqual(status, 1, stderr)
        self.assertIn("cannot be pickled", stderr)
        with self.assertRaises(JobFailed) as e:
            handle._outcome(0, None)
        self.assertIn("the function returned a value that cannot be pickled", str(e.exception))


if __name__ == "__main__":
    unittest.main()
