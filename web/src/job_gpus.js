// A job's GPU utilisation over time for the job page: readings from
// /api/v1/jobs/<id>/gpus (the server keeps 15 minutes, a reading every agent sample), merged
// as they come (each read asks only for what is newer than what it has) and drawn as one uPlot
// series per GPU, labelled with the task that holds it. Contract: merge() and chartColumns()
// are pure; JobGpuChart owns its uPlot and its element.
import { fittedChart } from './charts.js';
import { getJson } from './api.js';
import { h, replace } from './dom.js';
import { timeAxis } from './time_axis.js';

const kMaxPoints = 4000; // per GPU kept in the page (over 5 h at one reading every 5 s)
const kPalette = ['#2463eb', '#2f9e5b', '#e08a00', '#c43d3d', '#7c3aed', '#0e9aa7', '#b45309', '#db2777'];

/** The key of a GPU in the merged series. */
export const gpuKey = (node, index) => `${node}\u0000${index}`;

/**
 * Adds the readings of `answer` (/api/v1/jobs/<id>/gpus) to `series` (a Map gpuKey →
 * { node, index, status, points: [[t_ms, util|null, memory_mib|null, power_w|null]] }),
 * keeping each GPU's points in time order without duplicates. Returns the newest t (ms) seen.
 */
export function merge(series, answer) {
  let newest = 0;
  for (const g of answer?.gpus || []) {
    const key = gpuKey(g.node, g.index);
    let s = series.get(key);
    if (!s) series.set(key, (s = { node: g.node, index: g.index, points: [] }));
    s.status = g;
    const last = s.points.length ? s.points[s.points.length - 1][0] : -Infinity;
    for (const r of g.series || []) {
      if (r.t <= last) continue;
      s.points.push([r.t, r.utilization_percent ?? null, r.memory_used_mib ?? null, r.power_w ?? null]);
    }
    if (s.points.length > kMaxPoints) s.points.splice(0, s.points.length - kMaxPoints);
    if (s.points.length) newest = Math.max(newest, s.points[s.points.length - 1][0]);
  }
  return newest;
}

/**
 * /api/v1/jobs/<id>/gpu-history's stored intervals (10 s or 5 min means) as an answer of
 * /api/v1/jobs/<id>/gpus, so that merge() takes them: one GPU per node and index, a reading at
 * each interval's start.
 */
export function historyAsAnswer(history) {
  const gpus = new Map();
  for (const i of history?.intervals || []) {
    const key = gpuKey(i.node, i.gpu);
    if (!gpus.has(key)) gpus.set(key, { node: i.node, index: i.gpu, series: [] });
    gpus.get(key).series.push({
      t: i.t * 1000, utilization_percent: i.utilization_percent, memory_used_mib: i.memory_used_mib,
      power_w: i.power_w,
    });
  }
  for (const g of gpus.values()) g.series.sort((a, b) => a.t - b.t);
  return { gpus: [...gpus.values()] };
}

/**
 * uPlot's columns from `series` (in the Map's order): [times (Unix s), util of each GPU...];
 * times are the union of every GPU's reading times, a GPU without a reading at one is null.
 */
export function chartColumns(series) {
  const times = new Set();
  for (const s of series.values()) for (const p of s.points) times.add(p[0]);
  const sorted = [...times].sort((a, b) => a - b);
  const at = new Map(sorted.map((t, i) => [t, i]));
  const columns = [sorted.map((t) => t / 1000)];
  for (const s of series.values()) {
    const col = new Array(sorted.length).fill(null);
    for (const p of s.points) col[at.get(p[0])] = p[1];
    columns.push(col);
  }
  return columns;
}

/** "task 0 · dev GPU 1": who holds the GPU in `job` (its tasks' allocations). */
export function gpuLabel(job, node, index) {
  const task = (job?.tasks || []).find((t) => t.node === node && (t.allocation?.gpus || []).some((g) => g.index === index));
  return `${task ? `task ${task.index} · ` : ''}${node} GPU ${index}`;
}

export class JobGpuChart {
  constructor(jobId) {
    this.jobId = jobId;
    this.series = new Map();
    this.newestMs = 0;
    this.historyRead = false;
    this.plot = null;
    this.plotKeys = '';
    this.box = h('div', { class: 'chart', id: 'job-gpu-chart' });
    this.note = h('p', { class: 'note', id: 'job-gpu-note' }, 'No GPU reading yet.');
    this.element = h('div', {}, this.note, this.box);
  }

  /** Reads what is new for `job` (the job view) and redraws. Not before the job started. */
  async update(job) {
    if (!job?.start_time) return;
    // Older than the server's 15-minute window: the stored history first (once), then what is
    // newer from the window.
    if (!this.historyRead && job.start_time < Date.now() / 1000 - 14 * 60) {
      this.historyRead = true;
      try {
        const history = await getJson(`/api/v1/jobs/${this.jobId}/gpu-history?since=${job.start_time}`);
        this.newestMs = Math.max(this.newestMs, merge(this.series, historyAsAnswer(history)));
      } catch (e) {
        if (e.status !== 404) throw e; // 404: a server without the history
      }
    }
    // The first read from the job's start: the window may hold readings from before it.
    const sinceS = this.newestMs ? Math.floor(this.newestMs / 1000) : job.start_time;
    const since = sinceS ? `?since=${sinceS}` : '';
    let answer;
    try {
      answer = await getJson(`/api/v1/jobs/${this.jobId}/gpus${since}`);
    } catch (e) {
      if (e.status === 404) return; // a server without the metrics API
      throw e;
    }
    this.newestMs = Math.max(this.newestMs, merge(this.series, answer));
    this.draw(job);
  }

  /** The latest utilisation (percent) of the GPU, or undefined. */
  utilization(node, index) {
    return this.series.get(gpuKey(node, index))?.status?.utilization_percent;
  }

  draw(job) {
    const columns = chartColumns(this.series);
    const points = columns.slice(1).reduce((a, c) => a + c.filter((v) => v !== null).length, 0);
    this.box.dataset.points = String(points);
    this.box.dataset.gpus = String(this.series.size);
    if (points === 0) return;
    replace(this.note, `GPU utilisation, one line per GPU: a reading every agent sample for the last 15 minutes, 10 s (after a day 5 min) means before that.`);
    const keys = [...this.series.keys()].join('|');
    if (this.plot && keys === this.plotKeys) {
      this.plot.setData(columns);
      return;
    }
    this.plot?.destroy();
    this.plotKeys = keys;
    const labels = [...this.series.values()].map((s) => gpuLabel(job, s.node, s.index));
    this.plot = fittedChart(this.box, {
      height: 240,
      series: [{}, ...labels.map((label, i) => ({
        label, stroke: kPalette[i % kPalette.length], width: 2, spanGaps: true,
        value: (u, v) => (v === null || v === undefined ? '—' : `${v} %`),
      }))],
      axes: [timeAxis(), { label: 'utilisation %' }],
      scales: { x: { time: true }, y: { range: [0, 100] } },
    }, columns);
  }

  dispose() {
    this.plot?.destroy();
    this.plot = null;
  }
}
