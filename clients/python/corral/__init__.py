"""corral's Python client (docs/python.md).

- corral.Client: the HTTP API with typed results (submit, batch, get, list, cancel, logs, wait).
- corral.Executor: run Python functions as corral jobs and get their results back.
- corral.job (import it explicitly: inside a job it installs a SIGTERM handler): the in-job API.
"""

from .client import Client, build_spec, parse_duration
from .errors import (ApiError, ConfigError, CorralError, JobFailed, RemoteTraceback,
                     ServerUnreachable)
from .executor import Executor, JobHandle
from .models import (ArraySubmitted, Checkpoint, Event, Job, JobPage, JobState, LogChunk,
                     PendingReason, Submitted, Task)

__version__ = "0.1.0"

__all__ = [
    "ApiError", "ArraySubmitted", "Checkpoint", "Client", "ConfigError", "CorralError", "Event",
    "Executor", "Job", "JobFailed", "JobHandle", "JobPage", "JobState", "LogChunk",
    "PendingReason", "RemoteTraceback", "ServerUnreachable", "Submitted", "Task", "build_spec",
    "parse_duration"]
