"""What an Executor job runs on the node: `python -m corral.runner CALL_DIR`. Loads the call,
runs the function for this array element (CORRAL_ARRAY_INDEX, else 0) on this rank (RANK, else
CORRAL_TASK_INDEX), and writes the outcome into CALL_DIR (calls.py). Exits 1 when the function
raised or its result cannot be pickled (the job fails), FOLDER_MISSING_EXIT when the node cannot
see CALL_DIR."""

from __future__ import annotations

import os
import socket
import sys
import traceback

import corral.job  # noqa: F401 - installs the SIGTERM handler before the function runs

from . import calls


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m corral.runner CALL_DIR", file=sys.stderr)
        return 2
    call_dir = argv[1]
    if not os.path.isfile(os.path.join(call_dir, calls.CALL_FILE)):
        node = os.environ.get("CORRAL_NODE_NAME") or socket.gethostname()
        print(f"{calls.FOLDER_MISSING_MARK} {call_dir} on node {node}: the Executor's folder "
              "must be on a file system the nodes share", file=sys.stderr, flush=True)
        return calls.FOLDER_MISSING_EXIT
    context = corral.job.current()
    element = context.array_index or 0
    call: calls.Call = calls.load(os.path.join(call_dir, calls.CALL_FILE))
    args, kwargs = call.arguments[element if len(call.arguments) > 1 else 0]
    try:
        outcome = calls.Outcome(True, call.fn(*args, **kwargs))
    except BaseException as e:  # noqa: BLE001 - SystemExit, KeyboardInterrupt: JobFailed there
        # The function's frames only: the runner's own is noise to its author.
        formatted = "".join(traceback.format_exception(type(e), e, e.__traceback__.tb_next))
        print(formatted, file=sys.stderr, end="", flush=True)
        outcome = calls.failed(e, formatted)
    data, written = calls.dump_outcome(outcome)
    if outcome.ok and not written.ok:
        print(f"corral.runner: {written.exception_repr}", file=sys.stderr, flush=True)
    calls.write_atomically(calls.result_file(call_dir, element, context.rank), data)
    return 0 if written.ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
