// Unit tests of the dashboard's pure functions for the metrics pages: how readings merge into
// chart columns, the forecast's columns, the usage query and chart groups, the submit form's
// environment, the heatmap's cell classes, the "used" sum.
// Usage: node --test web/test/metrics_pages.test.mjs   (make test-web runs it)
import assert from 'node:assert/strict';
import test from 'node:test';
import { chartColumns, gpuLabel, historyAsAnswer, merge } from '../src/job_gpus.js';
import { forecastColumns } from '../src/pages/capacity.js';
import { placementLine, policyReader, withHistory } from '../src/pages/overview.js';
import { chartGroups, usageQuery } from '../src/pages/usage.js';
import { envOf, specOf } from '../src/pages/submit.js';
import { cellClass, cellLabel, cellTitle } from '../src/pages/heatmap.js';
import { gpusUsed, utilColour, utilStep } from '../src/gpus.js';

test('job GPU readings merge without duplicates and align on one time axis', () => {
  const series = new Map();
  const gpu = (node, index, ts) => ({ node, index, utilization_percent: 5, series: ts.map(([t, u]) => ({ t, utilization_percent: u })) });
  merge(series, { gpus: [gpu('a', 0, [[1000, 10], [2000, 20]]), gpu('b', 1, [[1500, 50]])] });
  // A later read with ?since= repeats the last reading: it is not added twice.
  const newest = merge(series, { gpus: [gpu('a', 0, [[2000, 20], [3000, 30]])] });
  assert.equal(newest, 3000);
  assert.deepEqual(series.get('a\u00000').points.map((p) => p[0]), [1000, 2000, 3000]);
  assert.deepEqual(chartColumns(series), [[1, 1.5, 2, 3], [10, null, 20, 30], [null, 50, null, null]]);
  const job = { tasks: [{ index: 1, node: 'b', allocation: { gpus: [{ index: 1, milli: 1000 }] } }] };
  assert.equal(gpuLabel(job, 'b', 1), 'task 1 · b GPU 1');
  assert.equal(gpuLabel(job, 'a', 0), 'a GPU 0');
});

test('stored GPU history merges like live readings, in time order per GPU', () => {
  const series = new Map();
  const history = { intervals: [
    { node: 'n1', gpu: 1, t: 120, utilization_percent: 40.5, memory_used_mib: 10, power_w: 100 },
    { node: 'n1', gpu: 1, t: 100, utilization_percent: 20, memory_used_mib: 10, power_w: 90 },
    { node: 'n2', gpu: 0, t: 110, utilization_percent: 0, memory_used_mib: 0, power_w: 60 },
  ] };
  const newest = merge(series, historyAsAnswer(history));
  assert.equal(newest, 120000);
  assert.equal(series.size, 2);
  assert.deepEqual(series.get('n1\u00001').points.map((p) => [p[0], p[1]]), [[100000, 20], [120000, 40.5]]);
  // Live readings after the history join on; older ones are not added twice.
  merge(series, { gpus: [{ node: 'n1', index: 1, series: [{ t: 120000, utilization_percent: 99 }, { t: 125000, utilization_percent: 60 }] }] });
  assert.deepEqual(series.get('n1\u00001').points.map((p) => p[1]), [20, 40.5, 60]);
});

test('the overview names the placement and its workload profile as `corral policy` does', () => {
  assert.equal(placementLine({ placement: 'best', uses_profile: true, profile_jobs: 0, profile_min_jobs: 100 }),
    'placement: best (no workload profile yet: places as bestfit until 100 jobs have been submitted)');
  assert.equal(placementLine({ placement: 'fgd', uses_profile: true, profile_jobs: 500, typical_tasks: 1 }),
    'placement: fgd (workload profile of the last 500 jobs: 1 typical task shape)');
  assert.equal(placementLine({ placement: 'best', uses_profile: true, profile_jobs: 500, typical_tasks: 12 }),
    'placement: best (workload profile of the last 500 jobs: 12 typical task shapes)');
  assert.equal(placementLine({ placement: 'bestfit', uses_profile: false, profile_jobs: 0 }), 'placement: bestfit');
});

test('the overview reads the placement policy again once its interval has passed, keeping the last line on a failure', async () => {
  let clock = 1000;
  let reads = 0;
  let answer = { placement: 'best', profile_jobs: 0 };
  const shown = [];
  const reader = policyReader(async () => {
    reads += 1;
    if (answer === null) throw new Error('503');
    return answer;
  }, (p) => shown.push(p.profile_jobs), 30000, () => clock);
  await reader.readNow();
  assert.deepEqual([reads, shown], [1, [0]]);
  clock += 29999;
  await reader.due();
  assert.equal(reads, 1, 'not before the interval');
  clock += 1;
  answer = { placement: 'best', profile_jobs: 120 };
  await reader.due();
  assert.deepEqual([reads, shown], [2, [0, 120]]);
  clock += 30000;
  answer = null;
  await reader.due();
  assert.deepEqual([reads, shown], [3, [0, 120]], 'a failed read shows nothing new');
});

test('the overview joins the recorded summaries and the live ones after them', () => {
  const joined = withHistory([{ time: 60 }, { time: 120 }], [{ time: 100 }, { time: 120 }, { time: 122 }]);
  assert.deepEqual(joined.map((s) => s.time), [60, 120, 122]);
  assert.deepEqual(withHistory([], [{ time: 5 }]).map((s) => s.time), [5]);
});

test('forecast columns: history, then forecast joined at the last history point', () => {
  const cols = forecastColumns({
    capacity_gpus: 8,
    history: [{ t: 0, demand_gpus: 1 }, { t: 3600, demand_gpus: 2 }],
    forecast: [{ t: 7200, demand_gpus: 3, low: 2, high: 4 }],
  });
  assert.deepEqual(cols, [[0, 3600, 7200], [1, 2, null], [null, 2, 3], [null, 2, 2], [null, 2, 4], [8, 8, 8]]);
  assert.deepEqual(forecastColumns({ capacity_gpus: 1 }), [[], [], [], [], [], []]);
});

test('usage: query and chart groups', () => {
  assert.equal(usageQuery({ by: ['user', 'day'], since: '7d', from: '', until: '' }), 'by=user%2Cday&since=7d');
  assert.equal(usageQuery({ by: ['project'], since: '7d', from: '2026-11-01', until: '2026-11-30' }),
    'by=project&since=2026-11-01&until=2026-11-30');
  const rows = [
    { user: 'a', day: '2026-12-02', allocated_gpu_hours: 1, used_gpu_hours: 0.5 },
    { user: 'b', day: '2026-12-02', allocated_gpu_hours: 2, used_gpu_hours: 1 },
    { user: 'a', day: '2026-12-01', allocated_gpu_hours: 4, used_gpu_hours: 4 },
  ];
  assert.deepEqual(chartGroups(rows, ['user', 'day']), [
    { label: '2026-12-01', allocated: 4, used: 4 }, { label: '2026-12-02', allocated: 3, used: 1.5 }]);
  assert.deepEqual(chartGroups(rows.slice(0, 2), ['user']).map((g) => g.label), ['b', 'a']);
});

test('submit: the environment field', () => {
  assert.deepEqual(envOf('FAKE_GPU_UTILIZATION=37\n\nA=b=c\nEMPTY='), { FAKE_GPU_UTILIZATION: '37', A: 'b=c', EMPTY: '' });
  assert.throws(() => envOf('no equals sign'), /not KEY=VALUE/);
  assert.throws(() => envOf('1X=2'), /not KEY=VALUE/);
  assert.deepEqual(specOf({ command: 'true', project: 'p', gpus: '1', env: 'X=1' }).env, { X: '1' });
  assert.equal(specOf({ command: 'true', project: 'p', gpus: '1', env: '' }).env, undefined);
});

test('heatmap cells: another project\'s task is "in use", with no job, user or project', () => {
  const mine = { job: 7, task: 0, user: 'ann', project: 'vision', milli: 500 };
  const theirs = { milli: 500 };
  assert.equal(cellLabel([]), '');
  assert.equal(cellLabel([mine]), '#7 ann');
  assert.equal(cellLabel([theirs]), 'in use');
  assert.equal(cellLabel([mine, theirs]), '2 jobs');
  const node = { name: 'n1', gpu_model: 'A100', gpu_free_milli: [0], gpu_tasks: [[mine, theirs]] };
  assert.equal(cellTitle(node, 0, undefined),
    'n1 GPU 0 A100: job 7 task 0 (ann, vision, 500 milli); in use by another project (500 milli)');
  assert.equal(cellClass(node, 0, { utilization_percent: 37 }), 'util u7');
});

test('heatmap cells: free, allocated by utilisation, flagged idle, no reading', () => {
  const node = { name: 'n', gpus: 4, gpu_free_milli: [1000, 0, 0, 500] };
  assert.equal(cellClass(node, 0, { utilization_percent: 90 }), 'free');
  assert.equal(cellClass(node, 1, { utilization_percent: 37 }), 'util u7');
  assert.equal(cellClass(node, 1, { utilization_percent: 100 }), 'util u20 dark');
  assert.equal(cellClass(node, 2, { utilization_percent: 1, idle: true }), 'util u0 idle-flag');
  assert.equal(cellClass(node, 2, undefined), 'full');
  assert.equal(cellClass(node, 3, {}), 'partial');
  assert.equal(utilStep(-5), 0);
  assert.equal(utilStep(101), 20);
  assert.notEqual(utilColour(0), utilColour(100));
});

test('GPUs used: Σ utilisation / 100, null without readings', () => {
  assert.equal(gpusUsed({ gpus: [{ utilization_percent: 50 }, { utilization_percent: 25 }, {}] }), 0.75);
  assert.equal(gpusUsed({ gpus: [{}] }), null);
  assert.equal(gpusUsed(null), null);
});
