"""corral.Client: the HTTP API (docs/openapi.yaml) with typed results.

    client = corral.Client()            # CORRAL_SERVER / CORRAL_TOKEN, else `corral login`'s file
    job = client.submit(["python3", "train.py"], gpus=1, time_limit="2h")
    client.wait(job.id).state           # JobState.SUCCEEDED
    for page in client.pages(state="running", all=True): ...

Errors: ApiError (the server's problem+json), ServerUnreachable, ConfigError."""

from __future__ import annotations

import os
import re
import time
from typing import Any, Iterable, Iterator, Optional, Sequence, Union

from .config import load_config
from .errors import ApiError
from .models import ArraySubmitted, Job, JobPage, LogChunk, Submitted, submitted_from_json
from .transport import Transport

# The JobSpec's fields (docs/openapi.yaml) a submission takes as keyword arguments, beside the
# Resources' fields (folded into `resources`) and the aliases below.
SPEC_FIELDS = frozenset((
    "name", "project", "environment", "command", "shell", "workdir", "submit_dir", "env",
    "resources", "tasks", "priority", "time_limit_s", "signal", "dependency",
    "kill_on_invalid_dep", "max_restarts", "launcher", "procs_per_node", "array", "session",
    "script", "output_file", "error_file", "partition", "qos", "elastic", "checkpoint_grace_s"))
RESOURCE_FIELDS = frozenset(("gpus", "gpu_milli", "gpu_models", "cpus", "cpu_milli",
                             "memory_mib"))

_DURATION_PART = re.compile(r"(\d+)([dhms])")
_DURATION_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
WAIT_POLL_MAX_S = 2.0  # wait() polls from 0.1 s, doubling up to this


def parse_duration(value: Union[int, float, str]) -> int:
    """Seconds from 90, "90s", "1h30m", "2d" or Slurm's "[D-]HH:MM:SS" / "MM:SS"; ValueError
    otherwise."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"time: must be >= 0, got {value}")
        return int(value)
    text = str(value).strip()
    if text.isdigit():
        return int(text)
    if _DURATION_PART.sub("", text) == "" and text:
        return sum(int(n) * _DURATION_UNITS[u] for n, u in _DURATION_PART.findall(text))
    m = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)", text)
    if m:
        days, hours, minutes, seconds = (int(g or 0) for g in m.groups())
        return ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    raise ValueError(f"time: expected seconds, '1h30m' or 'HH:MM:SS', got '{value}'")


def _size_range(value: Any) -> Optional[tuple[int, int]]:
    """(MIN, MAX) of an elastic size ("2-8" or (2, 8)); None for one number."""
    if isinstance(value, str) and "-" in value[1:]:
        low, _, high = value.partition("-")
        return int(low), int(high)
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return int(value[0]), int(value[1])
    return None


def build_spec(command: Union[None, str, Sequence[str]] = None, **fields: Any) -> dict[str, Any]:
    """A JobSpec from keyword arguments: the spec's own names, the Resources' names (gpus=2),
    nodes= for tasks, time= / time_limit= for time_limit_s (seconds or "1h30m"); a command
    given as one string runs in the shell. An elastic job (docs/elastic.md) takes a range
    for gpus= or nodes= ("2-8" or (2, 8)), and gpu_step= for a range of GPUs. TypeError
    naming an unknown argument; ValueError for a range that makes no sense."""
    spec: dict[str, Any] = {}
    resources = dict(fields.pop("resources", None) or {})
    if "nodes" in fields:
        fields["tasks"] = fields.pop("nodes")
    step = fields.pop("gpu_step", None)
    for key, unit in (("gpus", "gpus"), ("tasks", "nodes")):
        bounds = _size_range(fields.get(key))
        if bounds is None:
            continue
        if "elastic" in spec:
            raise ValueError("gpus and nodes: a job grows by GPUs or by nodes, not both")
        del fields[key]
        spec["elastic"] = {"unit": unit, "min": bounds[0], "max": bounds[1], "step": step or 0}
    if step is not None and spec.get("elastic", {}).get("unit") != "gpus":
        raise ValueError("gpu_step: needs a range of GPUs (gpus='2-8')")
    for alias in ("time", "time_limit"):
        if alias in fields:
            value = fields.pop(alias)
            if value is not None:
                fields["time_limit_s"] = parse_duration(value)
    for key, value in fields.items():
        if value is None:
            continue
        if key in RESOURCE_FIELDS:
            resources[key] = value
        elif key in SPEC_FIELDS:
            spec[key] = value
        else:
            raise TypeError(f"unknown job field '{key}' (the API's JobSpec fields, the "
                            "resources' fields, nodes and time are taken)")
    if isinstance(command, str):
        spec["command"], spec["shell"] = [command], True
    elif command is not None:
        spec["command"] = list(command)
    if resources:
        spec["resources"] = resources
    return spec


def _csv(value: Union[None, str, Iterable[str]]) -> Optional[str]:
    if value is None or isinstance(value, str):
        return value
    return ",".join(str(v) for v in value)


class Client:
    """One client of a corral cluster; thread-safe. `url`: one base URL or a comma-separated
    list (default: CORRAL_SERVER, else the file `corral login` saved); `token`: default
    CORRAL_TOKEN, else the saved one."""

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None):
        self.config = load_config(url, token)
        self._http = Transport(self.config)

    def __repr__(self) -> str:
        return f"corral.Client({','.join(self.config.servers)!r})"

    # -- raw access: the JSON answer of any route ------------------------------------------
    def request(self, method: str, path: str, body: Any = None,
                query: Optional[dict[str, Any]] = None) -> Any:
        """The parsed JSON answer of `method path` (None for an empty body)."""
        return self._http.request(method, path, body, query).json()

    def whoami(self) -> dict[str, Any]:
        return self.request("GET", "/api/v1/whoami")

    # -- jobs ----------------------------------------------------------------------------------
    def submit(self, command: Union[None, str, Sequence[str]] = None,
               **fields: Any) -> Union[Submitted, ArraySubmitted]:
        """Submits a job (build_spec's keyword arguments); with array={"indices": [...]} an
        array. submit_dir defaults to the current folder, as the CLI's."""
        spec = build_spec(command, **fields)
        spec.setdefault("submit_dir", os.getcwd())
        return submitted_from_json(self.request("POST", "/api/v1/jobs", spec))

    def batch(self, script: str, args: Sequence[str] = (),
              **fields: Any) -> Union[Submitted, ArraySubmitted]:
        """Submits a batch script (docs/batch.md): `script` is its text when it starts with
        "#!", else the path of a file to read. Its #SBATCH lines fill the fields not given."""
        if script.startswith("#!"):
            text, name = script, None
        else:
            with open(script, encoding="utf-8") as f:
                text, name = f.read(), os.path.basename(script)
        body: dict[str, Any] = {"text": text, "args": list(args)}
        if name:
            body["name"] = name
        return self.submit(script=body, **fields)

    def get(self, job_id: int) -> Job:
        return Job.from_json(self.request("GET", f"/api/v1/jobs/{int(job_id)}"))

    def list(self, *, user: Union[None, str, Iterable[str]] = None,
             project: Union[None, str, Iterable[str]] = None,
             state: Union[None, str, Iterable[str]] = None, name: Optional[str] = None,
             sort: Optional[str] = None, order: Optional[str] = None,
             limit: Optional[int] = None, cursor: Optional[str] = None,
             all: bool = False, array: Optional[int] = None,
             since: Union[None, int, str] = None) -> JobPage:
        """One page of GET /api/v1/jobs: your jobs, or with all=True every job you may see;
        user, project and state take a name or several; name is a prefix; sort id,
        submit_time, start_time, end_time or gpus; order asc or desc; limit 1..1000. The
        page's next_cursor goes into `cursor` for the next page (same filters)."""
        query = {"all": "1" if all else None, "user": _csv(user), "project": _csv(project),
                 "state": _csv(state), "name": name, "sort": sort, "order": order,
                 "limit": limit, "cursor": cursor, "array": array, "since": since}
        r = self._http.request("GET", "/api/v1/jobs", query=query)
        return JobPage([Job.from_json(j) for j in r.json()],
                       r.headers.get("x-corral-next-cursor") or None)

    def pages(self, **filters: Any) -> Iterator[JobPage]:
        """Every page of list(**filters), following the cursor."""
        cursor = filters.pop("cursor", None)
        while True:
            page = self.list(cursor=cursor, **filters)
            yield page
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def cancel(self, job_id: int) -> None:
        """Cancels a job (202); ApiError 409 when it has ended."""
        self.request("POST", f"/api/v1/jobs/{int(job_id)}/cancel")

    def cancel_array(self, array_id: int) -> list[int]:
        """Cancels every element of an array not yet ended; the ids being cancelled."""
        return list(self.request("POST", f"/api/v1/arrays/{int(array_id)}/cancel")["ids"])

    def log_chunk(self, job_id: int, task: int = 0, stream: str = "stdout", offset: int = 0,
                  generation: Optional[int] = None) -> LogChunk:
        """Up to 1 MiB of a task's output from `offset`."""
        r = self._http.request("GET", f"/api/v1/jobs/{int(job_id)}/logs",
                               query={"task": task, "stream": stream, "offset": offset,
                                      "generation": generation})
        return LogChunk(r.body.decode("utf-8", "replace"),
                        int(r.headers.get("x-corral-log-offset", offset)),
                        int(r.headers.get("x-corral-log-size", 0)))

    def logs(self, job_id: int, task: int = 0, stream: str = "stdout",
             generation: Optional[int] = None) -> str:
        """A task's whole output so far (stdout or stderr)."""
        parts, offset = [], 0
        while True:
            chunk = self.log_chunk(job_id, task, stream, offset, generation)
            parts.append(chunk.text)
            if chunk.next_offset <= offset or chunk.next_offset >= chunk.size:
                return "".join(parts)
            offset = chunk.next_offset

    def wait(self, job_id: int, timeout: Optional[float] = None) -> Job:
        """Polls until the job has ended and returns it; TimeoutError after `timeout` s."""
        deadline = None if timeout is None else time.monotonic() + timeout
        poll = 0.1
        while True:
            job = self.get(job_id)
            if job.ended:
                return job
            if deadline is not None and time.monotonic() + poll > deadline:
                raise TimeoutError(f"job {job_id} still {job.state.value} after {timeout} s")
            time.sleep(poll)
            poll = min(poll * 2, WAIT_POLL_MAX_S)

    # -- the in-job channel (docs/python.md, corral.job) ---------------------------------------
    def report(self, job_id: int, **metrics: Union[int, float, str]) -> None:
        """Records metrics of a job (numbers or strings): POST /api/v1/jobs/{id}/report."""
        self.request("POST", f"/api/v1/jobs/{int(job_id)}/report", {"metrics": metrics})

    def checkpoint(self, job_id: int, path: str, step: Optional[int] = None) -> None:
        """Records a job's latest checkpoint (an absolute path)."""
        body: dict[str, Any] = {"path": path}
        if step is not None:
            body["step"] = int(step)
        self.request("POST", f"/api/v1/jobs/{int(job_id)}/checkpoint", body)

    def metrics(self, job_id: int) -> dict[str, list[tuple[int, float]]]:
        """The numeric metrics' history: {key: [(unix_seconds, value), ...]}, oldest first."""
        series = self.request("GET", f"/api/v1/jobs/{int(job_id)}/metrics").get("series", {})
        return {k: [(int(t), v) for t, v in points] for k, points in series.items()}


__all__ = ["Client", "ApiError", "build_spec", "parse_duration"]
