"""What travels through an Executor's folder, shared by the submitting side (executor.py) and
the node's side (runner.py). One submission is one folder, FOLDER/<key>/:

    call.pkl                  the function and, per array element, its (args, kwargs)
    result-<element>-<rank>.pkl   what one rank of one element came to: Outcome

Files are written to a temporary name and renamed, so a reader never sees half a file.
Pickled by cloudpickle when it is importable (lambdas, closures, notebook functions travel),
else by the standard pickle, which sends functions by reference to an importable module."""

from __future__ import annotations

import os
import pickle
import tempfile
from dataclasses import dataclass
from typing import Any, Callable, Optional

try:
    import cloudpickle as _pickler  # type: ignore[import-not-found]

    HAVE_CLOUDPICKLE = True
except ImportError:  # the standard library's: module-level functions only
    _pickler = pickle  # type: ignore[assignment]
    HAVE_CLOUDPICKLE = False

CALL_FILE = "call.pkl"
# A line the runner writes to stderr when the node cannot see the folder; the submitting side
# looks for it in the task's stderr to say so plainly.
FOLDER_MISSING_MARK = "corral.runner: cannot see the folder"
FOLDER_MISSING_EXIT = 3


@dataclass(frozen=True)
class Call:
    fn: Callable[..., Any]
    arguments: list[tuple[tuple, dict]]  # one (args, kwargs) per array element


@dataclass(frozen=True)
class Outcome:
    """A rank's return value, or the exception it raised: the exception pickled on its own
    (None when it could not be), so that one that cannot be rebuilt here still leaves its repr
    and its formatted traceback."""
    ok: bool
    value: Any = None
    exception: Optional[bytes] = None
    exception_repr: str = ""
    traceback: str = ""

    def rebuilt_exception(self) -> Optional[BaseException]:
        """The exception, or None when it cannot be unpickled here."""
        try:
            return pickle.loads(self.exception) if self.exception is not None else None
        except Exception:  # noqa: BLE001 - any failure to rebuild it falls back to its text
            return None


def failed(e: BaseException, formatted_traceback: str) -> Outcome:
    try:
        exception: Optional[bytes] = _pickler.dumps(e)
    except Exception:  # noqa: BLE001 - an exception that cannot travel is sent as text
        exception = None
    return Outcome(False, None, exception, repr(e), formatted_traceback)


def result_file(call_dir: str, element: int, rank: int) -> str:
    return os.path.join(call_dir, f"result-{element}-{rank}.pkl")


def dumps_call(call: Call) -> bytes:
    """The pickled call; TypeError saying cloudpickle is needed when the standard pickle cannot
    send the function (a lambda, a closure, a function of __main__ or a notebook)."""
    fn = call.fn
    need = ("a lambda, a nested function or a function defined in __main__ or a notebook "
            "travels only with cloudpickle, which is not importable here (Debian: apt install "
            "python3-cloudpickle; else pip install cloudpickle)")
    if not HAVE_CLOUDPICKLE and getattr(fn, "__module__", None) == "__main__":
        raise TypeError(f"cannot send {fn!r} to a job: {need}")
    try:
        return _pickler.dumps(call)
    except (pickle.PicklingError, AttributeError, TypeError) as e:
        raise TypeError(f"cannot send {fn!r} or its arguments to a job: {e}" +
                        ("" if HAVE_CLOUDPICKLE else f"; {need}")) from e


def write_atomically(path: str, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def dump_outcome(outcome: Outcome) -> tuple[bytes, Outcome]:
    """The pickled outcome and the outcome it holds: a value that cannot be pickled becomes an
    error outcome saying so."""
    try:
        return _pickler.dumps(outcome), outcome
    except Exception as e:  # noqa: BLE001 - any pickling failure is reported, not raised
        error = Outcome(False, exception_repr=(
            f"TypeError('the function returned a value that cannot be pickled: {e!r}')"))
        return _pickler.dumps(error), error


def load(path: str) -> Any:
    with open(path, "rb") as f:
        return pickle.load(f)
