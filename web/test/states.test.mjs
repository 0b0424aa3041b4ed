// Unit tests of the dashboard's job and task states (web/src/states.js): which states are ended,
// the two new final states included, and a state it does not know.
// Usage: node --test web/test/states.test.mjs   (make test-web runs it)
import assert from 'node:assert/strict';
import test from 'node:test';
import { jobEnded, taskEnded } from '../src/states.js';

test('every final job state is ended, the live ones are not', () => {
  for (const s of ['succeeded', 'failed', 'cancelled', 'lost', 'timeout', 'oom']) assert.equal(jobEnded(s), true, s);
  for (const s of ['pending', 'starting', 'running']) assert.equal(jobEnded(s), false, s);
  assert.equal(jobEnded('a-state-of-a-newer-server'), true); // nothing waits on it forever
});

test('task states are not job states: exited and killed tasks are ended', () => {
  for (const s of ['exited', 'killed', 'lost']) assert.equal(taskEnded(s), true, s);
  for (const s of ['assigned', 'running']) assert.equal(taskEnded(s), false, s);
});
