// Capacity planning: demand (GPUs allocated plus queued) against capacity, the last weeks and
// a forecast with its low/high band (/api/v1/capacity/forecast), and, for admins, a what-if:
// the queue of the chosen period replayed with more GPUs (POST /api/v1/capacity/what-if),
// the p90 and mean wait for each, and the smallest addition that meets a p90 wait target.
import { getJson, postJson } from '../api.js';
import { h, replace, table } from '../dom.js';
import { duration, gpus } from '../format.js';
import { fittedChart } from '../charts.js';
import { timeAxis } from '../time_axis.js';

/**
 * uPlot's columns for a forecast answer: [t, history demand, forecast demand, low, high,
 * capacity], one time axis (history then forecast; the forecast starts at the last history
 * point so that the lines join).
 */
export function forecastColumns(f) {
  const history = f.history || [];
  const forecast = f.forecast || [];
  const t = [], hist = [], fc = [], low = [], high = [], cap = [];
  for (const p of history) {
    t.push(p.t); hist.push(p.demand_gpus); fc.push(null); low.push(null); high.push(null);
  }
  if (history.length && forecast.length) {
    const i = history.length - 1;
    fc[i] = hist[i]; low[i] = hist[i]; high[i] = hist[i];
  }
  for (const p of forecast) {
    t.push(p.t); hist.push(null); fc.push(p.demand_gpus); low.push(p.low ?? p.demand_gpus); high.push(p.high ?? p.demand_gpus);
  }
  for (let i = 0; i < t.length; i++) cap.push(f.capacity_gpus);
  return [t, hist, fc, low, high, cap];
}

function whatIf(box) {
  const since = h('input', { id: 'whatif-since', value: '30d', size: 10 });
  const extra = h('input', { id: 'whatif-extra', value: '0, 8, 16, 32', size: 16 });
  const target = h('input', { id: 'whatif-target', type: 'number', min: '0', step: '0.25', value: '1', size: 6 });
  const error = h('span', { class: 'error', id: 'whatif-error' });
  const button = h('button', { type: 'submit', id: 'whatif-run' }, 'Replay');
  const results = h('div', { id: 'whatif-results' });
  const form = h('form', { class: 'controls', id: 'whatif-form' },
    h('label', {}, 'jobs since ', since), h('label', {}, 'extra GPUs ', extra),
    h('label', {}, 'target p90 wait (hours) ', target), button, error);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    error.textContent = '';
    const extraGpus = extra.value.split(/[\s,]+/).filter(Boolean).map(Number);
    if (extraGpus.some((n) => !Number.isInteger(n) || n < 0)) {
      error.textContent = 'extra GPUs: whole numbers, 0 or more, separated by commas';
      return;
    }
    button.disabled = true;
    replace(results, h('p', { class: 'muted' }, 'Replaying…'));
    try {
      const r = await postJson('/api/v1/capacity/what-if', {
        since: since.value.trim() || '30d', extra_gpus: extraGpus, target_p90_wait_s: Math.round(Number(target.value) * 3600),
      });
      const best = r.smallest_meeting_target;
      replace(results,
        h('p', { id: 'whatif-summary' }, `${r.jobs} jobs since ${r.since} replayed. `,
          best === null || best === undefined ? 'No tried addition meets the target.'
            : `The smallest addition that meets the target: ${best} GPUs.`,
          r.too_big > 0
            ? ` ${r.too_big} more ask for more GPUs on one node than any node (or the added shape) has: set aside.` : '',
          r.results.some((x) => x.unfinished > 0)
            ? ' Some jobs never start in a tried size (their GPU model is missing): they count as waiting for ever.' : ''),
        table(['extra GPUs', 'GPUs', 'p90 wait', 'mean wait', 'max wait', 'never started'],
          r.results.map((x) => [String(x.extra_gpus), gpus(x.gpus), x.p90_wait_s === null ? 'never' : duration(x.p90_wait_s), duration(x.mean_wait_s),
            duration(x.max_wait_s), x.unfinished === undefined ? '—' : String(x.unfinished)]),
          { id: 'whatif-table', class: 'compact' }));
      results.querySelectorAll('#whatif-table tbody tr').forEach((tr, i) => {
        if (r.results[i].extra_gpus === best) tr.classList.add('best');
      });
    } catch (e) {
      replace(results);
      error.textContent = e.message;
    } finally {
      button.disabled = false;
    }
  });
  replace(box, h('h2', {}, 'What if: more GPUs'),
    h('p', { class: 'note' }, 'Replays the jobs submitted in the period through the scheduler with extra GPUs and reports the waits (admins only).'),
    form, results);
}

export default {
  title: 'Capacity',
  async render(root) {
    const horizon = h('select', { id: 'capacity-horizon' },
      [7, 14, 28].map((d) => h('option', { value: String(d) }, `${d} days`)));
    const chartBox = h('div', { class: 'chart', id: 'capacity-chart' });
    const info = h('p', { id: 'capacity-info' });
    const whatIfBox = h('div', { id: 'whatif' });
    replace(root, h('h1', {}, 'Capacity planning'),
      h('p', { class: 'controls' }, h('label', {}, 'forecast horizon ', horizon)), info, chartBox,
      h('p', { class: 'note' }, 'Demand: GPUs allocated plus GPUs asked for by queued jobs, an hourly mean; the band is the forecast\'s low/high.'),
      whatIfBox);
    let plot = null;
    const load = async () => {
      plot?.destroy();
      plot = null;
      replace(chartBox);
      let f;
      try {
        f = await getJson(`/api/v1/capacity/forecast?horizon_days=${horizon.value}`);
      } catch (e) {
        info.textContent = `Could not load the forecast: ${e.message}`;
        info.className = 'note';
        return;
      }
      const columns = forecastColumns(f);
      chartBox.dataset.points = String(columns[0].length);
      const last = (f.history || []).at(-1);
      const peak = Math.max(0, ...(f.forecast || []).map((p) => p.high ?? p.demand_gpus));
      info.className = '';
      // demand_now_gpus: the jobs submitted and not ended now; the history's last point is the
      // hour before this one (a server without the field: that hour).
      const now = f.demand_now_gpus ?? last?.demand_gpus;
      info.textContent = `Capacity ${gpus(f.capacity_gpus)} GPUs; demand now ${now === undefined ? '—' : gpus(now)}; ` +
        `forecast high over ${horizon.value} days ${gpus(peak)}${peak > f.capacity_gpus ? ' (above capacity)' : ''}.`;
      if (columns[0].length === 0) return;
      plot = fittedChart(chartBox, {
        height: 300,
        series: [
          {},
          { label: 'demand', stroke: '#2463eb', width: 2 },
          { label: 'forecast', stroke: '#7c3aed', width: 2, dash: [8, 4] },
          { label: 'low', stroke: 'rgba(124,58,237,0.35)', width: 1 },
          { label: 'high', stroke: 'rgba(124,58,237,0.35)', width: 1 },
          { label: 'capacity', stroke: '#c43d3d', width: 2 },
        ],
        bands: [{ series: [4, 3], fill: 'rgba(124,58,237,0.12)' }],
        axes: [timeAxis(), { label: 'GPUs' }],
        scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(1, max) * 1.05] } },
      }, columns);
    };
    horizon.addEventListener('change', load);
    await load();
    const who = await getJson('/api/v1/whoami');
    if (who.admin) whatIf(whatIfBox);
    return { dispose() { plot?.destroy(); } };
  },
};
