// Unit tests of the pure functions of the submit, projects and job pages: Slurm's array and
// time-limit forms, the spec the submit form sends (a command or a batch script), the
// environment picker's words, the projects' fair-share standing in words, a job's reported
// metrics as chart columns, time ticks in human units, and an elastic job's size and lost work.
// Usage: node --test web/test/pages.test.mjs   (make test-web runs it)
import assert from 'node:assert/strict';
import test from 'node:test';
import { arrayOf, environmentLabel, specOf, timeLimitOf } from '../src/pages/submit.js';
import { gpuTime, standingWords } from '../src/pages/projects.js';
import { metricColumns, metricText } from '../src/job_metrics.js';
import { timeTick } from '../src/time_axis.js';
import { elasticSize, lostWork } from '../src/pages/job.js';

test('arrayOf reads Slurm\'s --array as corral submit does', () => {
  assert.deepEqual(arrayOf('0-9%2'), { max_running: 2, indices: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9] });
  assert.deepEqual(arrayOf('1,3,5-7'), { indices: [1, 3, 5, 6, 7] });
  assert.deepEqual(arrayOf('0-20:5'), { indices: [0, 5, 10, 15, 20] });
  assert.throws(() => arrayOf('3-1'), /array: "3-1" is an empty range/);
  assert.throws(() => arrayOf('1,1'), /index 1 is given twice/);
  assert.throws(() => arrayOf('0-9%0'), /running limit/);
  assert.throws(() => arrayOf('a'), /array: "a" is not N, A-B or A-B:S/);
  assert.throws(() => arrayOf('0-20000'), /more than 10000 elements/);
});

test('timeLimitOf reads Slurm\'s --time forms: bare minutes, M:S, H:M:S, D-H...', () => {
  assert.equal(timeLimitOf('90'), 5400);
  assert.equal(timeLimitOf('1:30'), 90);
  assert.equal(timeLimitOf('1:00:00'), 3600);
  assert.equal(timeLimitOf('2-3'), 2 * 86400 + 3 * 3600);
  assert.equal(timeLimitOf('1-0:30'), 86400 + 1800);
  assert.equal(timeLimitOf('1-2:03:04'), 86400 + 7200 + 184);
  assert.equal(timeLimitOf('UNLIMITED'), 0);
  assert.throws(() => timeLimitOf('2h'), /time limit: expected minutes/);
});

test('specOf: a command job, or a batch script whose directives fill the fields left empty', () => {
  const cmd = specOf({ command: 'echo hi', project: 'p', nodes: '2', gpus: '4', launcher: 'torchrun', array: '0-3%2',
    time_limit: '0:10:00', environment: 'pytorch@2' });
  assert.deepEqual(cmd, { project: 'p', command: ['echo', 'hi'], environment: 'pytorch@2', tasks: 2,
    resources: { gpus: 4 }, launcher: 'torchrun', array: { max_running: 2, indices: [0, 1, 2, 3] }, time_limit_s: 600 });
  assert.deepEqual(specOf({ command: 'echo hi', project: 'p' }), { project: 'p', command: ['echo hi'], shell: true });
  assert.deepEqual(specOf({ command: 'x', project: 'p', gpus: '2', max_gpus: '8' }).elastic, { unit: 'gpus', min: 2, max: 8 });
  assert.deepEqual(specOf({ command: 'x', project: 'p', max_gpus: '4' }).elastic, { unit: 'gpus', min: 1, max: 4 });
  assert.equal(specOf({ command: 'x', project: 'p', gpus: '4', max_gpus: '4' }).elastic, undefined);
  const batch = specOf({ project: 'p', script: { text: '#!/bin/bash\necho x', name: 'run.sh' }, args: ' a  b ', launcher: 'none' });
  assert.deepEqual(batch, { project: 'p', script: { text: '#!/bin/bash\necho x', name: 'run.sh', args: ['a', 'b'] } });
});

test('environmentLabel says where an asset runs', () => {
  assert.equal(environmentLabel({ name: 'host', version: 1, runs_here: { nodes: 1, of: 1 } }), 'host@1 — runs on 1 of 1 node');
  assert.equal(environmentLabel({ name: 'jax', version: 3, runs_here: { nodes: 0, of: 50, why_not: 'no image' } }),
    'jax@3 — runs on no node: no image');
});

test('standingWords: the server\'s fair-share standing in words', () => {
  assert.equal(standingWords({ standing: 'over', gpu_hours_from_share: 4, next_in_line: false }), 'over its share by 4.0 GPU-hours');
  assert.equal(standingWords({ standing: 'under', gpu_hours_from_share: -0.5, next_in_line: true }),
    'under its share by 30 GPU-minutes: next in line');
  assert.equal(standingWords({ standing: 'at', gpu_hours_from_share: 0.001, next_in_line: false }), 'at its share');
  assert.deepEqual([12.4, 1.25, 0.5, 1 / 60, 0.001].map(gpuTime),
    ['12 GPU-hours', '1.3 GPU-hours', '30 GPU-minutes', '1 GPU-minute', 'less than a GPU-minute']);
});

test('metricColumns aligns numeric series on one time axis; metricText rounds', () => {
  const { keys, columns } = metricColumns({ step: [[10, 1], [20, 2]], loss: [[15, 0.5], [20, 0.25]], empty: [] });
  assert.deepEqual(keys, ['loss', 'step']);
  assert.deepEqual(columns, [[10, 15, 20], [null, 0.5, 0.25], [1, null, 2]]);
  assert.equal(metricText(0.123456789), '0.123457');
  assert.equal(metricText(1200), '1200');
  assert.equal(metricText('warmup'), 'warmup');
});

test('time ticks are clock times, never milliseconds', () => {
  const t = new Date(2026, 11, 6, 14, 5, 30).getTime() / 1000;
  assert.equal(timeTick(t, 5), '14:05:30');
  assert.equal(timeTick(t, 300), '14:05');
  assert.equal(timeTick(new Date(2026, 11, 6).getTime() / 1000, 86400), '12-06');
});

test('an elastic job\'s size and lost work in words; nothing for a rigid job', () => {
  const elastic = { unit: 'gpus', min: 2, max: 8, step: 0, now: 8 };
  assert.equal(elasticSize({ elastic, resizes: 3 }), '8 of 2-8 (3 resizes)');
  assert.equal(elasticSize({ elastic: { ...elastic, unit: 'nodes', min: 1, max: 2, now: 1 }, resizes: 1 }),
    '1 of 1-2 (1 resize)');
  assert.equal(elasticSize({ elastic: { ...elastic, now: 2 } }), '2 of 2-8 (0 resizes)');
  assert.equal(elasticSize({ elastic: { ...elastic, now: 0 } }), '2-8');
  assert.equal(elasticSize({ resizes: 0 }), null);
  assert.equal(lostWork({ lost_work_gpu_s: 1440 }), '0.4 GPU-h');
  assert.equal(lostWork({ lost_work_gpu_s: 0 }), null);
  assert.equal(lostWork({}), null);
});
