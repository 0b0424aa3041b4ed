// Overview: capacity, allocation and job counts now (from /api/v1/summary and then each live
// summary), and a uPlot chart over time of capacity, allocated GPUs, used GPUs (the sum of
// utilisation / 100 over the GPUs, from /api/v1/gpus) and queue length. The series are sampled
// by this browser: capacity, allocated and queue from every live summary since the dashboard
// was opened (live.js keeps them across pages); "used" from each /api/v1/gpus read, after each
// summary while this page or the heatmap is shown (gaps while neither is). Under the title, one
// quiet line: the placement policy and its workload profile (/api/v1/policy, as `corral policy`),
// read again with the first live summary at least POLICY_REFRESH_MS after the last read (the
// profile forms after the first 100 submissions and is rebuilt as jobs arrive).
import { fittedChart } from '../charts.js';
import { getJson } from '../api.js';
import { h, replace } from '../dom.js';
import { gpus } from '../format.js';
import { gpusUsed, loadGpus } from '../gpus.js';
import * as live from '../live.js';
import { timeAxis } from '../time_axis.js';

function card(label, value, id) {
  return h('div', { class: 'card', id }, h('div', { class: 'value' }, value), h('div', { class: 'label' }, label));
}

function cards(s, used) {
  const pct = (x) => (s.gpus ? Math.round((100 * x) / s.gpus) : 0);
  return [
    card('nodes ready / total', `${s.nodes_ready} / ${s.nodes}`, 'card-nodes'),
    card('GPUs', String(s.gpus), 'card-gpus'),
    card('GPUs allocated', `${gpus(s.gpus_allocated)} (${pct(s.gpus_allocated)}%)`, 'card-allocated'),
    card('GPUs used (Σ utilisation)', used === null || used === undefined ? '—' : `${gpus(used)} (${pct(used)}%)`, 'card-used'),
    card('jobs running', String(s.jobs_running + s.jobs_starting), 'card-running'),
    card('jobs pending (queue)', String(s.jobs_pending), 'card-pending'),
  ];
}

/**
 * The placement line from GET /api/v1/policy, in `corral policy`'s words: "placement: best (no
 * workload profile yet: places as bestfit until 100 jobs have been submitted)".
 */
export function placementLine(p) {
  let line = `placement: ${p.placement}`;
  if (p.uses_profile && !p.profile_jobs) {
    line += ` (no workload profile yet: places as bestfit until ${p.profile_min_jobs} jobs have been submitted)`;
  } else if (p.uses_profile) {
    const shapes = p.typical_tasks === 1 ? 'typical task shape' : 'typical task shapes';
    line += ` (workload profile of the last ${p.profile_jobs} jobs: ${p.typical_tasks} ${shapes})`;
  }
  return line;
}

/** How often the open overview reads /api/v1/policy again: it changes only as jobs arrive. */
export const POLICY_REFRESH_MS = 30000;

/**
 * A reader of the placement line that asks `read()` (GET /api/v1/policy) at most once per
 * `intervalMs` of `now()` and hands each answer to `show`; a failed read is skipped (the last
 * line stays). `due()` reads when the interval has passed since the last read, else does nothing.
 */
export function policyReader(read, show, intervalMs = POLICY_REFRESH_MS, now = Date.now) {
  let last = -Infinity;
  const readNow = async () => {
    last = now();
    const p = await read().catch(() => null);
    if (p) show(p);
  };
  return {
    readNow,
    async due() {
      if (now() - last >= intervalMs) await readNow();
    },
  };
}

/** The server's recorded summaries, then the live ones newer than the last of them. */
export function withHistory(recorded, liveList) {
  const last = recorded.length ? recorded[recorded.length - 1].time : -Infinity;
  return [...recorded, ...liveList.filter((s) => s.time > last)];
}

/** uPlot's columns [times, capacity, allocated, used, queue] from summaries (oldest first). */
export function chartData(list) {
  return [
    list.map((s) => s.time), list.map((s) => s.gpus), list.map((s) => s.gpus_allocated),
    list.map((s) => (typeof s.gpus_used === 'number' ? s.gpus_used : null)), list.map((s) => s.jobs_pending),
  ];
}

export default {
  title: 'Overview',
  async render(root) {
    const cardBox = h('div', { class: 'cards' });
    const chartBox = h('div', { class: 'chart', id: 'overview-chart' });
    const placementBox = h('p', { class: 'note subtitle', id: 'overview-placement' });
    replace(root, h('h1', {}, 'Overview'), placementBox, cardBox,
      h('h2', {}, 'Capacity, allocated and used GPUs, queue length'), chartBox,
      h('p', { class: 'note' }, 'The last day as the server recorded it (a point a minute), then the live stream (every 2 s); ' +
        '"used" is Σ utilisation / 100 over the GPUs.'));
    let used = null;
    // The server's minute-by-minute record (the last day), then the live summaries after it.
    const policy = policyReader(() => getJson('/api/v1/policy'), (p) => replace(placementBox, placementLine(p)));
    const [summary, first, recorded] = await Promise.all([getJson('/api/v1/summary'), loadGpus().catch(() => null),
      getJson(`/api/v1/summary/history?since=${Math.floor(Date.now() / 1000) - 86400}`), policy.readNow()]);
    const past = recorded.summaries || [];
    const series = () => withHistory(past, live.summaries());
    used = gpusUsed(first);
    replace(cardBox, cards(summary, used));
    const plot = fittedChart(chartBox, {
      height: 280,
      series: [
        {},
        { label: 'capacity (GPUs)', stroke: '#98a2b3', width: 1, dash: [6, 4] },
        { label: 'GPUs allocated', stroke: '#2463eb', width: 2 },
        { label: 'GPUs used', stroke: '#2f9e5b', width: 2, fill: 'rgba(47,158,91,0.12)' },
        { label: 'queue length', stroke: '#e08a00', width: 2, scale: 'jobs' },
      ],
      axes: [timeAxis(), { label: 'GPUs' }, { side: 1, scale: 'jobs', label: 'jobs', grid: { show: false } }],
      scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(1, max)] } },
    }, chartData(series()));
    const unsubscribe = live.subscribe((s) => {
      replace(cardBox, cards(s, used));
      plot.setData(chartData(series()));
    });
    return {
      // After each summary (main.js): the GPUs' utilisation, stored on the newest summary.
      async refresh() {
        used = gpusUsed(await loadGpus()); // also stored on the newest summary (gpus.js)
        policy.due(); // not awaited: the cards and chart do not wait for the policy's answer
        const list = live.summaries();
        replace(cardBox, cards(list[list.length - 1] || summary, used));
        plot.setData(chartData(series()));
      },
      dispose() { unsubscribe(); plot.destroy(); },
    };
  },
};
