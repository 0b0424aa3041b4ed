// Job and task states as the API spells them (defined once in src/model/states.h; docs/control-
// plane.md, "Job states"). A state this dashboard does not know (a newer server's) counts as
// ended: nothing waits for it to change.
const kLiveJobStates = new Set(['pending', 'starting', 'running']);
const kLiveTaskStates = new Set(['assigned', 'running']);

// succeeded, failed, cancelled, lost, timeout, oom: the job never runs again.
export function jobEnded(state) {
  return !kLiveJobStates.has(state);
}

// exited, killed, lost: the task never runs again (its job may run a new generation).
export function taskEnded(state) {
  return !kLiveTaskStates.has(state);
}
