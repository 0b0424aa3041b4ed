#!/usr/bin/env python3
"""End-to-end tests of the Python client (clients/python/, docs/python.md) against a real
`corral dev` with fake GPUs.

The driver runs the client's unit tests (clients/python/tests/: the server list, answers of
fake servers), then the client's scenarios three times, each in a child interpreter against a
fresh `corral dev`: from a fresh offline venv install (/usr/bin/python3 -m venv
--system-site-packages; pip install --no-index --no-build-isolation ./clients/python), from
PYTHONPATH=clients/python with the python3 on PATH, and once more from PYTHONPATH with
cloudpickle hidden (a lambda must then be refused, naming cloudpickle). Polls with deadlines;
never sleeps to wait for time to pass.

Usage: tests/python_client_test.py path/to/corral [--only TEST_NAME] [--scenario SCENARIO]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_test  # noqa: E402  (check, wait_for and their tallies; it reads the same argv)
from e2e_test import FAILURES, PASSED, check, free_port, wait_for  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---------------------------------------------------------------------------------------------
# The client's side: run in a child interpreter that imports the installed (or PYTHONPATH) corral.
# Functions here live in __main__, so they travel by value (cloudpickle), as a notebook's do.

def square_plus(x, plus=0):
    return x * x + plus


def boom(message):
    def inner():
        raise ValueError(message)
    inner()


class TwoPartError(Exception):
    """Pickles, but cannot be rebuilt (its __init__ takes two arguments, its args hold one)."""

    def __init__(self, what, where):
        super().__init__(f"{what} at {where}")


def raise_two_part():
    raise TwoPartError("odd", "step 3")


def sleep_long():
    time.sleep(600)


def train_until_stopped(marker):
    """A training loop: steps until asked to stop, then checkpoints and reports."""
    import corral.job
    ctx = corral.job.current()
    open(marker, "w").write(str(ctx.job_id))  # running: the test may cancel now
    step = 0
    while not corral.job.should_stop():
        step += 1
        time.sleep(0.02)
    request = corral.job.stop_request()
    path = os.path.join(corral.job.checkpoint_dir(), f"step-{step}.ckpt")
    with open(path, "w") as f:
        f.write(str(step))
    corral.job.checkpoint(path, step=step)
    corral.job.report(step=step, phase="stopped")
    return {"step": step, "path": path, "seen_as": corral.job.info().id,
            "reason": request.reason if request else None,
            "grace_s": request.grace_s if request else None,
            "deadline": request.deadline if request else None}


def rank_and_world():
    import corral.job
    ctx = corral.job.current()
    return (ctx.rank, ctx.world_size)


def scenario_pow(corral, client, ex, prefix):
    h = ex.submit(pow, 2, 10)
    check("Executor(gpus=1).submit(pow, 2, 10).result() == 1024", h.result(timeout=60) == 1024)
    check("the handle says done once it ended", h.done() and isinstance(h.id, int))


def scenario_lambda(corral, client, ex, prefix):
    from corral import calls
    if calls.HAVE_CLOUDPICKLE:
        h = ex.submit(lambda a, b=1: (a + b, "lambda"), 41)
        check("a lambda returns its result", h.result(timeout=60) == (42, "lambda"))
        h = ex.submit(square_plus, 5, plus=1)
        check("a function defined in __main__ returns its result",
              h.result(timeout=60) == 26)
    else:
        try:
            ex.submit(lambda: 1)
            check("without cloudpickle, a lambda is refused naming cloudpickle", False,
                  "submitted")
        except TypeError as e:
            check("without cloudpickle, a lambda is refused naming cloudpickle",
                  "cloudpickle" in str(e) and "lambda" in str(e), str(e))
        h = ex.submit(pow, 3, 3)
        check("without cloudpickle, a module's function still runs", h.result(timeout=60) == 27)


def scenario_exception(corral, client, ex, prefix):
    h = ex.submit(boom, "remote boom 7")
    try:
        h.result(timeout=60)
        check("a remote exception re-raises locally", False, "no exception")
    except ValueError as e:
        cause = e.__cause__
        check("a remote exception re-raises locally as itself", str(e) == "remote boom 7", e)
        check("with the remote traceback as its cause",
              isinstance(cause, corral.RemoteTraceback) and "in inner" in cause.text and
              "in boom" in cause.text and "ValueError: remote boom 7" in cause.text,
              repr(cause))
    check("the job failed, its stderr has the traceback",
          client.get(h.id).state == corral.JobState.FAILED and
          "ValueError: remote boom 7" in h.logs("stderr"), h.logs("stderr"))
    try:
        ex.submit(raise_two_part).result(timeout=60)
        check("an exception that cannot be rebuilt here raises JobFailed", False, "none")
    except corral.JobFailed as e:
        check("an exception that cannot be rebuilt here raises JobFailed with its repr and "
              "the remote traceback", "TwoPartError('odd at step 3')" in str(e) and
              "in raise_two_part" in e.__cause__.text, (e, e.__cause__))


def scenario_array(corral, client, ex, prefix):
    handles = ex.map_array(square_plus, range(10), [1] * 10)
    ids = [h.id for h in handles]
    check("map_array of 10 submits one array of 10 jobs",
          len(set(ids)) == 10 and len({h.array_id for h in handles}) == 1 and
          all(client.get(i).array_id == handles[0].array_id for i in ids[:2]), ids)
    check("each element returns its own result",
          [h.result(timeout=90) for h in handles] == [i * i + 1 for i in range(10)])


def scenario_ranks(corral, client, ex, prefix):
    multi = corral.Executor(ex.folder, gpus=1, procs_per_node=2, client=client)
    h = multi.submit(rank_and_world)
    check("with 2 ranks the function runs on each: results() one per rank",
          h.results(timeout=60) == [(0, 2), (1, 2)])
    check("result() is rank 0's", h.result() == (0, 2))


def scenario_cancel(corral, client, ex, prefix):
    h = ex.submit(sleep_long)
    running = wait_for(lambda: client.get(h.id).state == corral.JobState.RUNNING, 30)
    check("a long job runs", running, client.get(h.id))
    h.cancel()
    job = h.wait(timeout=60)
    check("cancel ends it as cancelled", job.state == corral.JobState.CANCELLED, job)
    try:
        h.result()
        check("result() of a cancelled job raises JobFailed", False, "no exception")
    except corral.JobFailed as e:
        check("result() of a cancelled job raises JobFailed naming the job and its state",
              f"job {h.id} cancelled" in str(e), str(e))


def scenario_should_stop(corral, client, ex, prefix):
    marker = os.path.join(ex.folder, f"{prefix}-training")
    h = ex.submit(train_until_stopped, marker)
    check("the training job starts", wait_for(lambda: os.path.exists(marker), 60),
          client.get(h.id))
    h.cancel()
    out = h.result(timeout=60)  # the function returned: its result is there though cancelled
    check("should_stop() became true after cancel and the function returned",
          out["step"] > 0, out)
    job = client.get(h.id)
    check("the job ended cancelled", job.state == corral.JobState.CANCELLED, job)
    check("corral.job.info() read the job with its own token", out["seen_as"] == h.id, out)
    check("the stop request says why and by when (the stop file)",
          out["reason"] not in (None, "", "SIGTERM") and out["grace_s"] > 0 and
          out["deadline"] > time.time() - 60, out)
    # corral dev's checkpoint root is its data folder's checkpoints/ (run_client's Dev).
    expected = os.path.join(os.path.dirname(ex.folder), "dev", "data", "checkpoints", str(h.id))
    check("the checkpoint was written into checkpoint_dir(), the job's folder",
          os.path.dirname(out["path"]) == expected and os.path.exists(out["path"]), out)
    check("the job's checkpoint is recorded",
          job.checkpoint is not None and job.checkpoint.path == out["path"] and
          job.checkpoint.step == out["step"], job.checkpoint)
    check("the report arrived: the latest values and the numbers' history",
          job.metrics == {"step": out["step"], "phase": "stopped"} and
          [v for _, v in client.metrics(h.id)["step"]] == [out["step"]],
          (job.metrics, client.metrics(h.id)))


def scenario_batch_and_logs(corral, client, ex, prefix):
    script = f"#!/bin/bash\n#SBATCH -J {prefix}-batch\necho hello \"$1\"\necho oops >&2\n"
    submitted = client.batch(script, args=["from batch"])
    job = client.wait(submitted.id, timeout=60)
    check("batch() runs a script's text with its #SBATCH name and args",
          job.state is corral.JobState.SUCCEEDED and job.name == f"{prefix}-batch", job)
    check("logs() gives stdout and stderr",
          client.logs(job.id) == "hello from batch\n" and
          client.logs(job.id, stream="stderr") == "oops\n",
          (client.logs(job.id), client.logs(job.id, stream="stderr")))
    os.makedirs(ex.folder, exist_ok=True)
    path = os.path.join(ex.folder, f"{prefix}-job.sh")
    with open(path, "w") as f:
        f.write(script.replace("-batch", "-file"))
    job = client.wait(client.batch(path).id, timeout=60)
    check("batch() reads a script file", job.name == f"{prefix}-file" and
          client.logs(job.id) == "hello \n", job)


def scenario_list(corral, client, ex, prefix):
    name = f"{prefix}-list-"
    ids = [client.submit(["true"], name=f"{name}{i}", cpus=1).id for i in range(5)]
    for i in ids:
        client.wait(i, timeout=60)
    page = client.list(name=name, limit=2, all=True)
    check("list(limit=2) gives 2 jobs, newest first, and a cursor",
          [j.id for j in page.jobs] == ids[::-1][:2] and page.next_cursor, page)
    got = [j.id for p in client.pages(name=name, limit=2, all=True) for j in p.jobs]
    check("pages() follows the cursor through every job once", got == ids[::-1], got)
    asc = client.list(name=name, sort="id", order="asc", limit=10, all=True)
    check("sort and order", [j.id for j in asc.jobs] == ids and asc.next_cursor is None, asc)
    check("state filter", [j.id for j in client.list(name=name, state=["succeeded"],
                                                     all=True).jobs] == ids[::-1] and
          client.list(name=name, state="failed,cancelled", all=True).jobs == [])
    check("user and project filters",
          len(client.list(name=name, user="admin", project=["default"], all=True).jobs) == 5
          and client.list(name=name, user="nobody-here", all=True).jobs == [])
    check("typed results", isinstance(page.jobs[0], corral.Job) and
          page.jobs[0].state is corral.JobState.SUCCEEDED and page.jobs[0].ended)


def scenario_errors(corral, client, ex, prefix):
    try:
        client.submit(["true"], gpus=1, gpu_milli=2000)
        check("a bad spec raises ApiError", False, "accepted")
    except corral.ApiError as e:
        check("a bad spec raises ApiError carrying the problem+json, naming the field",
              e.status == 400 and e.problem.get("status") == 400 and e.title and
              "gpu_milli" in e.detail and e.detail == e.problem["detail"], e.problem)
    try:
        client.get(987654321)
        check("an unknown job raises ApiError 404", False, "found")
    except corral.ApiError as e:
        check("an unknown job raises ApiError 404", e.status == 404 and e.detail, e.problem)
    try:
        client.list(state="sleeping")
        check("a bad filter raises ApiError 400", False, "accepted")
    except corral.ApiError as e:
        check("a bad filter raises ApiError 400 naming state", e.status == 400 and
              "state" in e.detail, e.problem)
    try:
        client.submit(["true"], colour="red")
        check("an unknown keyword is refused", False, "accepted")
    except TypeError as e:
        check("an unknown keyword is refused naming it", "colour" in str(e), e)


def scenario_server_list(corral, client, ex, prefix):
    dead = free_port()  # nothing listens there
    url = client.config.servers[0]
    both = corral.Client(f"http://127.0.0.1:{dead},{url}", client.config.token)
    started = time.monotonic()
    check("a server list whose first URL is dead still works",
          both.whoami().get("user") == "admin" and
          both.submit(["true"], name=f"{prefix}-listed", cpus=1).id > 0)
    check("and finds the live one at once (no backoff on a new server)",
          time.monotonic() - started < 5)
    os.environ["CORRAL_RETRY_TIMEOUT"] = "0.5"
    try:
        corral.Client(f"http://127.0.0.1:{dead}", "t").whoami()
        check("a dead server alone raises ServerUnreachable", False, "answered")
    except corral.ServerUnreachable as e:
        check("a dead server alone raises ServerUnreachable naming it",
              str(dead) in str(e) and "CORRAL_SERVER" not in str(e), e)
    finally:
        del os.environ["CORRAL_RETRY_TIMEOUT"]
    os.environ["CORRAL_SERVER"] = url
    os.environ["CORRAL_TOKEN"] = client.config.token
    try:
        check("Client() reads CORRAL_SERVER and CORRAL_TOKEN",
              corral.Client().whoami().get("user") == "admin")
    finally:
        del os.environ["CORRAL_SERVER"], os.environ["CORRAL_TOKEN"]
    home = tempfile.mkdtemp()
    os.makedirs(os.path.join(home, "corral"))
    with open(os.path.join(home, "corral", "config"), "w") as f:
        json.dump({"server": f"http://127.0.0.1:{dead},{url}", "token": client.config.token}, f)
    os.environ["XDG_CONFIG_HOME"] = home
    try:
        check("Client() reads the file `corral login` saves, with its server list",
              corral.Client().whoami().get("user") == "admin")
    finally:
        del os.environ["XDG_CONFIG_HOME"]
        shutil.rmtree(home)


def scenario_folder_unseen(corral, client, ex, prefix):
    gate = os.path.join(ex.folder, f"{prefix}-gate")
    blocker = client.submit(f"while [ ! -e {gate} ]; do sleep 0.05; done", cpus=1)
    after = corral.Executor(ex.folder, gpus=1, client=client,
                            dependency=f"afterany:{blocker.id}")
    h = after.submit(pow, 2, 2)
    shutil.rmtree(h.call_dir)  # what a node that does not share the folder sees
    open(gate, "w").close()
    try:
        h.result(timeout=60)
        check("a node that cannot see the folder: result() says so", False, "a result")
    except corral.JobFailed as e:
        node = client.get(h.id).tasks[0].node
        check("a node that cannot see the folder: result() names the folder and the node",
              "cannot see the folder" in str(e) and h.call_dir in str(e) and node in str(e),
              str(e))


SCENARIOS = [scenario_pow, scenario_lambda, scenario_exception, scenario_array,
             scenario_ranks, scenario_cancel, scenario_should_stop, scenario_batch_and_logs,
             scenario_list,
             scenario_errors, scenario_server_list, scenario_folder_unseen]


def client_side(url, token, folder, label, only):
    if os.environ.get("CORRAL_TEST_HIDE_CLOUDPICKLE"):
        sys.modules["cloudpickle"] = None  # import cloudpickle now raises ImportError
    import corral
    print(f"-- {label}: corral from {os.path.dirname(corral.__file__)} "
          f"({sys.executable})", flush=True)
    client = corral.Client(url, token)
    ex = corral.Executor(folder, gpus=1, client=client)
    prefix = f"py{os.getpid()}"
    for scenario in SCENARIOS:
        if only and scenario.__name__ != only:
            continue
        print(f"== {label}: {scenario.__name__}", flush=True)
        try:
            scenario(corral, client, ex, prefix)
        except Exception as e:  # a crash of the scenario is a failure, with its reason
            check(scenario.__name__, False, repr(e))
    print(f"{label}: {len(PASSED)} passed, {len(FAILURES)} failed", flush=True)
    return 1 if FAILURES else 0


# ---------------------------------------------------------------------------------------------
# The driver: one corral dev, three client runs.

SCENARIO = sys.argv[sys.argv.index("--scenario") + 1] if "--scenario" in sys.argv else ""
SOURCE = os.path.join(REPO, "clients", "python")


def run_client(label, python, env, root, scenario=SCENARIO):
    """Runs the scenarios in `python` with `env` against a fresh corral dev."""
    from isolation_test import Dev  # a corral dev on its own port, up once its node is ready

    dev = Dev(os.path.join(root, "dev"))
    # The child finds corral only where `env` puts it, and no configuration of this user.
    env = {k: v for k, v in env.items() if k not in ("CORRAL_SERVER", "CORRAL_TOKEN")}
    env.update(HOME=root, XDG_CONFIG_HOME=os.path.join(root, "config"))
    try:
        r = subprocess.run([python, os.path.abspath(__file__), "--client-side", dev.url,
                            dev.token, os.path.join(root, "corral_jobs"), label, scenario],
                           env=env, cwd=root, timeout=900)
        check(f"{label}: every scenario passed", r.returncode == 0, f"exit {r.returncode}")
    finally:
        dev.stop()


def without_pythonpath():
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def test_unit(root):
    """The client's unit tests: the server list and leader search, and the answers of small
    fake servers (clients/python/tests/)."""
    unit = subprocess.run([sys.executable, "-m", "unittest", "discover", "-s",
                           os.path.join(SOURCE, "tests")], cwd=SOURCE,
                          env=dict(without_pythonpath(), PYTHONPATH=SOURCE), timeout=300)
    check("the client's unit tests pass", unit.returncode == 0)


def test_installed_in_a_fresh_venv(root):
    """The offline install path works, and the installed client passes every scenario."""
    venv = os.path.join(root, "venv")
    # setuptools builds in the source folder (build/, *.egg-info): from a copy, so that the tree
    # stays clean.
    copy = shutil.copytree(SOURCE, os.path.join(root, "client-source"),
                           ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    steps = [["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv],
             [os.path.join(venv, "bin", "pip"), "install", "--no-index", "--no-build-isolation",
              "--quiet", copy]]
    runs = [subprocess.run(s, env=without_pythonpath(), cwd=root, capture_output=True,
                           text=True, timeout=300) for s in steps]
    check("the client installs offline into a fresh venv",
          all(r.returncode == 0 for r in runs), [r.stderr for r in runs])
    if all(r.returncode == 0 for r in runs):
        run_client("venv install", os.path.join(venv, "bin", "python"), without_pythonpath(),
                   root)


def test_from_pythonpath(root):
    """PYTHONPATH=clients/python with the python3 on PATH: every scenario; then with cloudpickle
    hidden, a lambda is refused naming cloudpickle."""
    env = dict(without_pythonpath(), PYTHONPATH=SOURCE)
    python = shutil.which("python3") or sys.executable
    run_client("PYTHONPATH", python, env, os.path.join(root, "with-cloudpickle"))
    if SCENARIO in ("", "scenario_lambda"):
        run_client("PYTHONPATH without cloudpickle", python,
                   dict(env, CORRAL_TEST_HIDE_CLOUDPICKLE="1"),
                   os.path.join(root, "without-cloudpickle"), "scenario_lambda")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--client-side":
        sys.exit(client_side(*sys.argv[2:6], sys.argv[6] if len(sys.argv) > 6 else ""))
    e2e_test.run_tests("python client", (test_unit, test_installed_in_a_fresh_venv,
                                         test_from_pythonpath))
