#!/bin/bash
# The agent's fallback supervisor: from a folder holding only `corral` and `corral-daemon` (no
# `corral-supervise`), tasks start under `corral-daemon __supervise` (agent_process.h,
# TaskSupervisor). Runs e2e_test.py's test that checks which binary supervises a task.
# Usage: tests/without_supervisor_test.sh path/to/corral
set -euo pipefail
corral=$(realpath "${1:?usage: $0 path/to/corral}")
dir=$(mktemp -d /tmp/corral-without-supervisor-XXXXXX)
trap 'rm -rf "$dir"' EXIT
cp "$corral" "$(dirname "$corral")/corral-daemon" "$dir/"
python3 "$(dirname "$0")/e2e_test.py" "$dir/corral" --only test_agent_sigkill_and_node_loss
