"""The exceptions the client raises: what the server refused (ApiError, with its problem+json)
and what never reached a server (ServerUnreachable)."""

from __future__ import annotations

from typing import Any, Optional


class CorralError(Exception):
    """Base of every error this package raises."""


class ApiError(CorralError):
    """The server answered with an error: `status` (the HTTP status), `title`, `detail` (which
    names the offending field) and `problem`, the problem+json object as sent (a dict; for a
    body that was not problem+json, {"detail": <the body's text>})."""

    def __init__(self, status: int, problem: dict[str, Any]):
        self.status = status
        self.problem = problem
        self.title: str = str(problem.get("title", ""))
        self.detail: str = str(problem.get("detail", ""))
        super().__init__(f"HTTP {status}" + (f" {self.title}" if self.title else "") +
                         (f": {self.detail}" if self.detail else ""))

    def __reduce__(self):  # pickled as its arguments: it travels back from Executor jobs
        return (ApiError, (self.status, self.problem))


class ServerUnreachable(CorralError):
    """No server of the list answered within the retry timeout, or a request that is not safe to
    send twice (a submission) was lost after it was sent. The message names each URL tried and
    what came of it."""


class ConfigError(CorralError):
    """No server configured, or a server list, token or CORRAL_RETRY_TIMEOUT that is malformed;
    the message says where it came from."""


class JobFailed(CorralError):
    """An Executor job ended without a result: it failed, was cancelled or lost before its
    function returned, or its node could not see the folder. The message says which, naming the
    job, its state, the folder and the node."""

    def __init__(self, message: str, job: Optional[Any] = None):
        super().__init__(message)
        self.job = job

    def __reduce__(self):
        return (JobFailed, (str(self), self.job))


class RemoteTraceback(CorralError):
    """The traceback of an exception raised in a job, as text: set as `__cause__` of the
    exception re-raised locally, so that both tracebacks are printed."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return "\n\nThe remote traceback:\n\"\"\"\n" + self.text.rstrip("\n") + "\n\"\"\""
