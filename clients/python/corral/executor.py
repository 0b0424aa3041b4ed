"""corral.Executor: run Python functions as corral jobs, submitit-style.

    ex = corral.Executor(folder="/shared/me/corral_jobs", gpus=1, time="1h")
    h = ex.submit(pow, 2, 10)
    h.result()                      # 1024
    hs = ex.map_array(train, configs)   # one array job, an element per item

The function, its arguments, its result or exception travel through `folder` (calls.py), which
every node that may run the job must see at the same path: a job whose node cannot see it fails,
and result() says so. The job runs with this interpreter (sys.executable) and a PYTHONPATH of
this process's importable folders, so that the modules the function needs import there too."""

from __future__ import annotations

import os
import secrets
import shutil
import site
import sys
import sysconfig
import time
from typing import Any, Callable, Iterable, Optional, Union

from . import calls
from .client import Client
from .errors import ApiError, JobFailed, RemoteTraceback
from .models import Job

STDERR_TAIL_BYTES = 2000  # of a failed job's stderr, in JobFailed's message


def _python_path() -> str:
    """This process's importable folders (sys.path, '' as the current folder), corral's own
    first, less those the interpreter finds by itself (its standard library and site
    folders)."""
    own = {os.path.abspath(p) for p in site.getsitepackages()}
    own.update(os.path.abspath(p) for key in ("stdlib", "platstdlib")
               if (p := sysconfig.get_paths().get(key)))
    here = os.path.dirname(os.path.dirname(os.path.abspath(calls.__file__)))
    paths = [here]
    for p in sys.path:
        p = os.path.abspath(p or os.getcwd())
        inside_own = any(p == o or p.startswith(o + os.sep) for o in own)
        if p not in paths and not inside_own and os.path.exists(p):
            paths.append(p)
    return os.pathsep.join(paths)


class JobHandle:
    """One job (or array element) an Executor submitted. `id` is its job id; with ranks,
    results() gives one result per rank and result() rank 0's."""

    def __init__(self, client: Client, job_id: int, call_dir: str, element: int,
                 world_size: int, array_id: Optional[int] = None):
        self.client = client
        self.id = job_id
        self.call_dir = call_dir
        self.element = element
        self.world_size = world_size
        self.array_id = array_id

    def __repr__(self) -> str:
        return f"<corral.JobHandle job {self.id}>"

    def job(self) -> Job:
        """The job as the server has it now."""
        return self.client.get(self.id)

    def done(self) -> bool:
        return self.job().ended

    def wait(self, timeout: Optional[float] = None) -> Job:
        """Waits until the job has ended; TimeoutError after `timeout` seconds."""
        return self.client.wait(self.id, timeout)

    def cancel(self) -> None:
        self.client.cancel(self.id)

    def logs(self, stream: str = "stdout", task: int = 0) -> str:
        return self.client.logs(self.id, task=task, stream=stream)

    def result(self, timeout: Optional[float] = None) -> Any:
        """Rank 0's return value, once the job has ended; re-raises the function's exception
        with the remote traceback as its __cause__; JobFailed when the job ended without one,
        and in place of a SystemExit or KeyboardInterrupt (which would end this program)."""
        return self._outcome(0, self.wait(timeout))

    def results(self, timeout: Optional[float] = None) -> list[Any]:
        """Every rank's return value, in rank order (raising as result() does)."""
        job = self.wait(timeout)
        return [self._outcome(rank, job) for rank in range(self.world_size)]

    def _outcome(self, rank: int, job: Job) -> Any:
        path = calls.result_file(self.call_dir, self.element, rank)
        try:
            outcome: calls.Outcome = calls.load(path)
        except FileNotFoundError:
            raise self._no_result(rank, job) from None
        if outcome.ok:
            return outcome.value
        cause = RemoteTraceback(outcome.traceback or outcome.exception_repr)
        exception = outcome.rebuilt_exception()
        if isinstance(exception, Exception):
            raise exception from cause
        raise JobFailed(f"job {self.id} rank {rank} raised {outcome.exception_repr}",
                        job) from cause

    def _no_result(self, rank: int, job: Job) -> JobFailed:
        # Ranks are laid out part by part (docs/distributed.md): the part that ran `rank`.
        task = job.tasks[rank * len(job.tasks) // self.world_size] if job.tasks else None
        node = task.node if task and task.node else "its node"
        try:
            stderr = self.client.logs(self.id, task=task.index if task else 0, stream="stderr")
        except Exception:  # noqa: BLE001 - the message is what matters; logs are a bonus
            stderr = ""
        if calls.FOLDER_MISSING_MARK in stderr:
            return JobFailed(
                f"job {self.id} {job.state.value}: node {node} cannot see the folder "
                f"{self.call_dir}; the Executor's folder must be on a file system that the "
                "nodes share, at the same path", job)
        tail = stderr[-STDERR_TAIL_BYTES:].rstrip()
        return JobFailed(
            f"job {self.id} {job.state.value} without a result from rank {rank} in "
            f"{self.call_dir} (node {node}" + (f"; {job.reason}" if job.reason else "") + ")" +
            (f"; its stderr ends:\n{tail}" if tail else ""), job)


class Executor:
    """Submits Python functions as corral jobs. `folder` (made absolute) must be seen by the
    nodes at the same path. gpus: per node (part); nodes: parts, each its own task; with
    nodes > 1 or procs_per_node > 1 the function runs on every rank (launcher "none" unless
    given). time: seconds or "1h30m". Any other JobSpec field (name, project, priority, env,
    cpus, memory_mib, gpu_models, partition, ...) as in Client.submit."""

    def __init__(self, folder: str = "corral_jobs", *, gpus: Optional[int] = None,
                 time: Union[None, int, str] = None, environment: Optional[str] = None,
                 nodes: Optional[int] = None, procs_per_node: Optional[int] = None,
                 launcher: Optional[str] = None, client: Optional[Client] = None,
                 **fields: Any):
        self.folder = os.path.abspath(folder)
        self.client = client or Client()
        self.nodes = nodes or 1
        self.procs_per_node = procs_per_node or 1
        if launcher is None and (self.nodes > 1 or self.procs_per_node > 1):
            launcher = "none"
        self.fields = dict(fields, gpus=gpus, time=time, environment=environment, nodes=nodes,
                           procs_per_node=procs_per_node, launcher=launcher)

    @property
    def world_size(self) -> int:
        return self.nodes * self.procs_per_node

    def _spec(self, call_dir: str, fn: Callable, **more: Any) -> dict[str, Any]:
        fields = dict(self.fields, **more)
        env = dict(fields.pop("env", None) or {}, PYTHONPATH=_python_path())
        fields.setdefault("name", getattr(fn, "__name__", "call").replace("<lambda>", "lambda"))
        return dict(command=[sys.executable, "-m", "corral.runner", call_dir], env=env,
                    **fields)

    def _write_call(self, fn: Callable, arguments: list[tuple[tuple, dict]]) -> str:
        data = calls.dumps_call(calls.Call(fn, arguments))
        os.makedirs(self.folder, exist_ok=True)
        call_dir = os.path.join(self.folder, time.strftime("%Y%m%d-%H%M%S-") +
                                secrets.token_hex(4))
        os.mkdir(call_dir, 0o700)  # arguments and results are the user's; the job runs as them
        calls.write_atomically(os.path.join(call_dir, calls.CALL_FILE), data)
        return call_dir

    def _submit(self, call_dir: str, spec: dict[str, Any]) -> Any:
        """Submits `spec`; removes the call folder when no job was made (the server refused it,
        or it was refused here). A submission lost after it was sent keeps its folder: the
        server may have made the job."""
        try:
            return self.client.submit(**spec)
        except (ApiError, TypeError, ValueError):
            shutil.rmtree(call_dir, ignore_errors=True)
            raise

    def submit(self, fn: Callable, *args: Any, **kwargs: Any) -> JobHandle:
        """Runs fn(*args, **kwargs) as one job (on every rank)."""
        call_dir = self._write_call(fn, [(args, kwargs)])
        submitted = self._submit(call_dir, self._spec(call_dir, fn))
        return JobHandle(self.client, submitted.ids[0], call_dir, 0, self.world_size)

    def map_array(self, fn: Callable, *iterables: Iterable[Any],
                  max_running: Optional[int] = None) -> list[JobHandle]:
        """One array job: element i runs fn(a[i], b[i], ...) over the iterables zipped; the
        handles in order. max_running: at most this many elements at once."""
        arguments = [(tuple(items), {}) for items in zip(*iterables)]
        if not arguments:
            return []
        call_dir = self._write_call(fn, arguments)
        array: dict[str, Any] = {"indices": list(range(len(arguments)))}
        if max_running:
            array["max_running"] = max_running
        submitted = self._submit(call_dir, self._spec(call_dir, fn, array=array))
        array_id = getattr(submitted, "array_id", submitted.ids[0])
        return [JobHandle(self.client, job_id, call_dir, i, self.world_size, array_id)
                for i, job_id in enumerate(submitted.ids)]
