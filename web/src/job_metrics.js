// What a job reported through the in-job channel (docs/in-job.md), for the job page: the latest
// value of each key (the job view's `metrics`, `metrics_at`), the numeric keys' history drawn
// as one uPlot series each (/api/v1/jobs/<id>/metrics: {"series": {key: [[t, value], ...]}}),
// and the last checkpoint (the job view's `checkpoint`). Contract: metricColumns() is pure;
// JobMetrics owns its uPlot and its element.
import { getJson } from './api.js';
import { fittedChart } from './charts.js';
import { h, replace, table } from './dom.js';
import { dateTime } from './format.js';
import { timeAxis } from './time_axis.js';

const kPalette = ['#2463eb', '#2f9e5b', '#e08a00', '#c43d3d', '#7c3aed', '#0e9aa7', '#b45309', '#db2777'];
const kMaxChartSeries = 8; // the chart's keys (the table lists every key)

/**
 * uPlot's columns for `series` ({key: [[unix_s, value], ...]}): the keys drawn (sorted, at most
 * kMaxChartSeries), and [times (the union, ascending), values of each key (null where it has
 * none)].
 */
export function metricColumns(series) {
  const keys = Object.keys(series || {}).filter((k) => series[k]?.length).sort().slice(0, kMaxChartSeries);
  const times = [...new Set(keys.flatMap((k) => series[k].map((p) => p[0])))].sort((a, b) => a - b);
  const at = new Map(times.map((t, i) => [t, i]));
  const columns = [times];
  for (const k of keys) {
    const col = new Array(times.length).fill(null);
    for (const [t, v] of series[k]) col[at.get(t)] = v;
    columns.push(col);
  }
  return { keys, columns };
}

/** A reported value as text: numbers with at most 6 significant digits, strings as they are. */
export function metricText(v) {
  if (typeof v !== 'number') return String(v);
  return Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(6)));
}

export class JobMetrics {
  constructor(jobId) {
    this.jobId = jobId;
    this.plot = null;
    this.plotKeys = '';
    this.readAt = null; // metrics_at of the series drawn
    this.latest = h('div', { id: 'job-metrics' });
    this.box = h('div', { class: 'chart', id: 'job-metrics-chart' });
    this.checkpoint = h('div', { id: 'job-checkpoint' });
    this.element = h('div', {}, this.latest, this.box, h('h3', {}, 'Last checkpoint'), this.checkpoint);
    this.box.hidden = true;
  }

  /** Shows what `job` (the job view) carries and reads its numeric series when it reported. */
  async update(job) {
    const metrics = job.metrics || {};
    const keys = Object.keys(metrics).sort();
    if (!keys.length) {
      replace(this.latest, h('p', { class: 'note' }, 'No metrics reported (see docs/in-job.md).'));
    } else {
      replace(this.latest, table(['metric', 'latest value'], keys.map((k) => [k, metricText(metrics[k])]), { id: 'job-metrics-table', class: 'compact' }),
        h('p', { class: 'note' }, `Last report ${dateTime(job.metrics_at)}.`));
    }
    const c = job.checkpoint;
    replace(this.checkpoint, c
      ? table(['path', 'step', 'time'], [[h('code', {}, c.path), c.step ?? '—', dateTime(c.time)]], { class: 'compact' })
      : h('p', { class: 'note' }, `No checkpoint recorded${job.checkpoint_dir ? ` (the job's checkpoint folder: ${job.checkpoint_dir})` : ''}.`));
    if (!keys.length || job.metrics_at === this.readAt) return;
    let answer;
    try {
      answer = await getJson(`/api/v1/jobs/${this.jobId}/metrics`);
    } catch (e) {
      if (e.status === 404) return; // a server without the in-job channel
      throw e;
    }
    this.readAt = job.metrics_at;
    this.draw(answer.series);
  }

  draw(series) {
    const { keys, columns } = metricColumns(series);
    this.box.dataset.series = String(keys.length);
    this.box.dataset.points = String(columns[0].length);
    this.box.hidden = keys.length === 0;
    if (!keys.length) return;
    const joined = keys.join('|');
    if (this.plot && joined === this.plotKeys) {
      this.plot.setData(columns);
      return;
    }
    this.plot?.destroy();
    this.plotKeys = joined;
    // One y scale per key, so that "loss" (0.3) and "step" (1200) both show; the first two
    // get an axis.
    this.plot = fittedChart(this.box, {
      height: 220,
      series: [{}, ...keys.map((k, i) => ({
        label: k, scale: k, stroke: kPalette[i % kPalette.length], width: 2, spanGaps: true,
        value: (u, v) => (v === null || v === undefined ? '—' : metricText(v)),
      }))],
      axes: [timeAxis(), ...keys.slice(0, 2).map((k, i) => ({ scale: k, label: k, side: i ? 1 : 3, grid: { show: i === 0 },
        size: 70, values: (u, splits) => splits.map(metricText) }))],
      scales: { x: { time: true } },
    }, columns, this.box);
  }

  dispose() {
    this.plot?.destroy();
    this.plot = null;
  }
}
