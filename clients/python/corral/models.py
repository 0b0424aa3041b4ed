"""Typed results of the API (docs/openapi.yaml): what Client returns, built from the server's
JSON by from_json(), which ignores fields it does not know (a newer server's) and keeps the
whole object in `raw`."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Optional, Union


class JobState(str, enum.Enum):
    PENDING = "pending"
    STARTING = "starting"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    LOST = "lost"
    TIMEOUT = "timeout"
    OOM = "oom"

    @property
    def ended(self) -> bool:
        return self not in (JobState.PENDING, JobState.STARTING, JobState.RUNNING)


@dataclass(frozen=True)
class PendingReason:
    code: str
    message: str


@dataclass(frozen=True)
class Event:
    time: int  # Unix seconds
    from_state: str
    to_state: str
    reason: str


@dataclass(frozen=True)
class Task:
    index: int
    state: str  # assigned, running, exited, killed, lost
    node: Optional[str] = None
    generation: Optional[int] = None
    allocation_id: Optional[int] = None
    exit_code: Optional[int] = None
    signal: Optional[int] = None
    end_cause: Optional[str] = None  # exited, signalled, stopped, time_limit, out_of_memory


@dataclass(frozen=True)
class Checkpoint:
    path: str
    step: Optional[int]
    time: int  # Unix seconds


@dataclass(frozen=True)
class Job:
    """A job as GET /api/v1/jobs/{id} gives it; a listing's jobs (JobSummary) have no spec,
    events, tasks, metrics or checkpoint. Its repr shows what identifies it and its state."""
    id: int
    state: JobState
    name: str = ""
    user: str = ""
    project: str = ""
    priority: int = field(default=0, repr=False)
    submit_time: Optional[int] = field(default=None, repr=False)  # Unix seconds
    start_time: Optional[int] = field(default=None, repr=False)
    end_time: Optional[int] = field(default=None, repr=False)
    total_gpu_milli: int = field(default=0, repr=False)
    reason: str = ""
    pending_reason: Optional[PendingReason] = field(default=None, repr=False)
    estimated_start: Optional[int] = field(default=None, repr=False)
    array_id: Optional[int] = None
    array_index: Optional[int] = None
    restarts: int = field(default=0, repr=False)
    spec: dict[str, Any] = field(default_factory=dict, repr=False)
    events: list[Event] = field(default_factory=list, repr=False)
    tasks: list[Task] = field(default_factory=list, repr=False)
    metrics: dict[str, Union[float, str]] = field(default_factory=dict)  # the latest reported
    metrics_at: Optional[int] = field(default=None, repr=False)
    checkpoint: Optional[Checkpoint] = None
    checkpoint_dir: Optional[str] = field(default=None, repr=False)
    # An elastic job's range and size now ({"unit", "min", "max", "step", "now"}) and resizes.
    elastic: Optional[dict[str, Any]] = field(default=None, repr=False)
    resizes: int = field(default=0, repr=False)
    # GPU-seconds its preemptions and resizes lost, and the SIGTERM -> SIGKILL grace its tasks
    # get when preempted or resized (the spec's checkpoint_grace_s is the request).
    lost_work_gpu_s: float = field(default=0.0, repr=False)
    stop_grace_s: int = field(default=0, repr=False)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def ended(self) -> bool:
        return self.state.ended

    @classmethod
    def from_json(cls, j: dict[str, Any]) -> "Job":
        pending = j.get("pending_reason")
        checkpoint = j.get("checkpoint")
        return cls(
            id=int(j["id"]), state=JobState(j["state"]), name=j.get("name", ""),
            user=j.get("user", ""), project=j.get("project", ""),
            priority=j.get("priority", 0), submit_time=j.get("submit_time"),
            start_time=j.get("start_time"), end_time=j.get("end_time"),
            total_gpu_milli=j.get("total_gpu_milli", 0), reason=j.get("reason", ""),
            pending_reason=PendingReason(pending.get("code", ""), pending.get("message", ""))
            if isinstance(pending, dict) else None,
            estimated_start=j.get("estimated_start"), array_id=j.get("array_id"),
            array_index=j.get("array_index"), restarts=j.get("restarts", 0),
            spec=j.get("spec") or {},
            events=[Event(e.get("time", 0), e.get("from", ""), e.get("to", ""),
                          e.get("reason", "")) for e in j.get("events") or []],
            tasks=[Task(t.get("index", 0), t.get("state", ""), t.get("node"),
                        t.get("generation"), t.get("allocation_id"), t.get("exit_code"),
                        t.get("signal"), t.get("end_cause")) for t in j.get("tasks") or []],
            metrics=j.get("metrics") or {}, metrics_at=j.get("metrics_at"),
            checkpoint=Checkpoint(checkpoint["path"], checkpoint.get("step"),
                                  checkpoint.get("time", 0))
            if isinstance(checkpoint, dict) else None,
            checkpoint_dir=j.get("checkpoint_dir"), elastic=j.get("elastic"),
            resizes=j.get("resizes", 0), lost_work_gpu_s=j.get("lost_work_gpu_s", 0.0),
            stop_grace_s=j.get("stop_grace_s", 0), raw=j)


@dataclass(frozen=True)
class Submitted:
    """POST /api/v1/jobs's answer for one job; `ids` is [id]."""
    id: int
    state: str
    project: str
    user: str
    reason: str
    warnings: list[str] = field(default_factory=list)

    @property
    def ids(self) -> list[int]:
        return [self.id]


@dataclass(frozen=True)
class ArraySubmitted:
    """POST /api/v1/jobs's answer for an array: its id (its first element's) and the elements'
    ids in the order of the indices."""
    array_id: int
    ids: list[int]
    state: str
    project: str
    user: str
    reason: str
    warnings: list[str] = field(default_factory=list)


def submitted_from_json(j: dict[str, Any]) -> Union[Submitted, ArraySubmitted]:
    common = dict(state=j.get("state", ""), project=j.get("project", ""),
                  user=j.get("user", ""), reason=j.get("reason", ""),
                  warnings=list(j.get("warnings") or []))
    if "array_id" in j:
        return ArraySubmitted(array_id=int(j["array_id"]), ids=[int(i) for i in j["ids"]],
                              **common)
    return Submitted(id=int(j["id"]), **common)


@dataclass(frozen=True)
class JobPage:
    """One page of GET /api/v1/jobs; `next_cursor` is None on the last page."""
    jobs: list[Job]
    next_cursor: Optional[str]


@dataclass(frozen=True)
class LogChunk:
    """Output of one task's stream from an offset: `next_offset` is where to read on; `size` the
    stream's length now."""
    text: str
    next_offset: int
    size: int
