"""The in-job API: what a task learns from corral and tells it (docs/python.md, "corral.job").

    import corral.job
    ctx = corral.job.current()                  # rank, world_size, job_id, ...
    while not corral.job.should_stop():
        step += 1; ...
        corral.job.report(loss=loss, step=step)
    corral.job.checkpoint(save(corral.job.checkpoint_dir()), step=step)

It reads the task's environment (docs/in-job.md, the in-job channel): CORRAL_JOB_ID,
CORRAL_SERVER, CORRAL_JOB_TOKEN, CORRAL_CA_CERT, CORRAL_CHECKPOINT_DIR, CORRAL_STOP_FILE and the
ranks.

Importing this module inside a corral job (CORRAL_JOB_ID set; elsewhere, in a notebook say, it
changes nothing) installs a SIGTERM handler (in the main thread) that records the stop request
and then calls the handler that was there before when that was a Python function. The default
action (ending the process at once) is replaced: the task keeps running until its function sees
should_stop() or the agent's SIGKILL at the end of the grace period."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Optional, Union

from .errors import CorralError


@dataclass(frozen=True)
class JobContext:
    """Where this process stands in its job. Outside a corral job: job_id None, rank 0 of 1."""
    job_id: Optional[int]
    rank: int  # RANK (distributed jobs), else the task's index
    world_size: int  # WORLD_SIZE, else the job's tasks
    local_rank: int  # LOCAL_RANK, else 0
    task_index: int  # CORRAL_TASK_INDEX: the part (node) of the job
    num_tasks: int
    array_index: Optional[int]  # CORRAL_ARRAY_INDEX: array elements only
    generation: int  # the run of the task: 1 the first, one more at each requeue
    node: Optional[str]
    # CORRAL_ALLOCATION_ID: the task's id, unique in the cluster (with generation: the run's).
    allocation_id: Optional[int]


@dataclass(frozen=True)
class StopRequest:
    """Why and by when the agent stops this task. From the stop file: reason, a sentence of the
    agent's ("cancelled by alice", "time limit of 60 s reached", ...: for people, not a code to
    compare), grace_s (seconds from the request to SIGKILL) and deadline (Unix seconds of the
    SIGKILL); reason "" when the file is there but cannot be read. From a SIGTERM alone: reason
    "SIGTERM", its time as `time`, grace and deadline unknown (None)."""
    reason: str
    grace_s: Optional[float]
    deadline: Optional[float]
    time: float


_sigterm_at: Optional[float] = None


def _int_env(name: str, default: Optional[int]) -> Optional[int]:
    """The variable as an integer; `default` when it is unset or not one ("--1", "3x")."""
    value = os.environ.get(name, "").strip()
    return int(value) if re.fullmatch(r"-?[0-9]{1,18}", value) else default


def current() -> JobContext:
    task_index = _int_env("CORRAL_TASK_INDEX", 0) or 0
    num_tasks = _int_env("CORRAL_NUM_TASKS", 1) or 1
    return JobContext(
        job_id=_int_env("CORRAL_JOB_ID", None),
        rank=_int_env("RANK", task_index) or 0,
        world_size=_int_env("WORLD_SIZE", num_tasks) or 1,
        local_rank=_int_env("LOCAL_RANK", 0) or 0,
        task_index=task_index, num_tasks=num_tasks,
        array_index=_int_env("CORRAL_ARRAY_INDEX", None),
        generation=_int_env("CORRAL_GENERATION", 1) or 1,
        node=os.environ.get("CORRAL_NODE_NAME"),
        allocation_id=_int_env("CORRAL_ALLOCATION_ID", None))


def checkpoint_dir() -> Optional[str]:
    """The job's checkpoint folder (the same for every task and every run of the job), created
    by the agent; None when the cluster has no checkpoint root."""
    return os.environ.get("CORRAL_CHECKPOINT_DIR") or None


def stop_request() -> Optional[StopRequest]:
    """The agent's stop request, or None while the task may run."""
    path = os.environ.get("CORRAL_STOP_FILE")
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                j = json.load(f)
            return StopRequest(str(j.get("reason", "")), j.get("grace_s"), j.get("deadline"),
                               os.path.getmtime(path))
        except FileNotFoundError:
            pass
        except (OSError, ValueError):
            # Present but unreadable: a stop all the same.
            return StopRequest("", None, None, time.time())
    if _sigterm_at is not None:
        return StopRequest("SIGTERM", None, None, _sigterm_at)
    return None


def should_stop() -> bool:
    """True once the agent asked this task to stop (its stop file exists, or a SIGTERM came):
    save what must be kept, then return. Cheap enough to call every step."""
    if _sigterm_at is not None:
        return True
    path = os.environ.get("CORRAL_STOP_FILE")
    return bool(path) and os.path.exists(path)


_client: Any = None  # the job token's Client, made on first use


def _job_client():
    global _client
    from .client import Client  # lazily: the runner imports this module first

    token = os.environ.get("CORRAL_JOB_TOKEN")
    job_id = _int_env("CORRAL_JOB_ID", None)
    if not token or job_id is None or not os.environ.get("CORRAL_SERVER"):
        raise CorralError("corral.job: not in a corral job, or its agent gives no job token "
                          "(CORRAL_JOB_ID, CORRAL_SERVER and CORRAL_JOB_TOKEN are needed)")
    if _client is None:
        _client = Client(os.environ["CORRAL_SERVER"], token)
    return _client, job_id


def report(**metrics: Union[int, float, str]) -> None:
    """Reports metrics of this job (numbers, or strings up to 256 bytes; at most 32 keys): the
    latest are shown on the job's page, numbers' history in its charts."""
    client, job_id = _job_client()
    client.report(job_id, **metrics)


def checkpoint(path: str, step: Optional[int] = None) -> None:
    """Records `path` (made absolute) as this job's latest checkpoint."""
    client, job_id = _job_client()
    client.checkpoint(job_id, os.path.abspath(path), step)


def info() -> Any:
    """This job as the server has it (a corral.Job)."""
    client, job_id = _job_client()
    return client.get(job_id)


def _install_sigterm_handler() -> None:
    if _int_env("CORRAL_JOB_ID", None) is None:
        return  # not in a corral job: a notebook's or a script's SIGTERM stays as it was
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can be set from the main thread only
    previous = signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum: int, frame: Any) -> None:
        global _sigterm_at
        if _sigterm_at is None:
            _sigterm_at = time.time()
        if callable(previous):
            previous(signum, frame)

    signal.signal(signal.SIGTERM, on_sigterm)


_install_sigterm_handler()
