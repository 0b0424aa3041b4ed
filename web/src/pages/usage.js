// Usage reports: allocated and used GPU-hours (used = allocated time weighted by utilisation)
// from /api/v1/usage, grouped by any of user, project and day over a chosen period; a table
// (with a total), a bar chart of allocated against used, and the same report as CSV (the API's
// format=csv). The server adds GPU time to its store every 10 s; the page reads it again at
// most every 10 s while shown. Users see their own rows and their projects'; admins all.
import { getJson } from '../api.js';
import { h, replace, table } from '../dom.js';
import { hours, percent } from '../format.js';
import { barChart } from '../charts.js';

const kGroups = ['user', 'project', 'day'];
const kPeriods = [['1d', 'today'], ['7d', 'last 7 days'], ['30d', 'last 30 days'], ['90d', 'last 90 days']];
const kReloadMs = 10_000;
// The choices, kept while the dashboard is open.
const state = { by: ['project'], since: '30d', from: '', until: '' };

/** The query of /api/v1/usage for `s` (by, since or from, until), without format. */
export function usageQuery(s) {
  const q = new URLSearchParams({ by: s.by.join(','), since: s.from || s.since });
  if (s.until) q.set('until', s.until);
  return q.toString();
}

/** The label of a row: its group fields joined ("alice / default / 2026-12-03"). */
export function rowLabel(row, by) {
  return by.map((k) => row[k] ?? '').join(' / ');
}

/**
 * What the chart shows for `rows` grouped `by`: with day, one bar pair per day (summed over
 * the other fields); else one per row, the 30 largest by allocated GPU-hours.
 */
export function chartGroups(rows, by) {
  if (by.includes('day')) {
    const days = new Map();
    for (const r of rows) {
      const d = days.get(r.day) || { label: r.day, allocated: 0, used: 0 };
      d.allocated += r.allocated_gpu_hours;
      d.used += r.used_gpu_hours;
      days.set(r.day, d);
    }
    return [...days.values()].sort((a, b) => (a.label < b.label ? -1 : 1));
  }
  return [...rows].sort((a, b) => b.allocated_gpu_hours - a.allocated_gpu_hours).slice(0, 30)
    .map((r) => ({ label: rowLabel(r, by), allocated: r.allocated_gpu_hours, used: r.used_gpu_hours }));
}

const round3 = (x) => Math.round(x * 1000) / 1000;

export default {
  title: 'Usage',
  async render(root) {
    const checks = kGroups.map((g) => h('label', {}, h('input', {
      type: 'checkbox', name: 'by', value: g, id: `usage-by-${g}`, checked: state.by.includes(g),
    }), ` ${g}`));
    const since = h('select', { id: 'usage-since' }, kPeriods.map(([v, t]) => h('option', { value: v, selected: v === state.since }, t)));
    const from = h('input', { type: 'date', id: 'usage-from', value: state.from });
    const until = h('input', { type: 'date', id: 'usage-until', value: state.until });
    const csv = h('a', { id: 'usage-csv', download: 'corral-usage.csv' }, 'Download CSV');
    const error = h('span', { class: 'error', id: 'usage-error' });
    const form = h('form', { class: 'controls', id: 'usage-form' },
      h('fieldset', {}, h('legend', {}, 'group by'), checks),
      h('label', {}, 'period ', since), h('label', {}, 'or from ', from), h('label', {}, 'until ', until),
      h('button', { type: 'submit', id: 'usage-show' }, 'Show'), csv, error);
    const period = h('p', { class: 'note', id: 'usage-period' });
    const chartBox = h('div', { class: 'chart', id: 'usage-chart' });
    const chartNote = h('p', { class: 'note' });
    const body = h('div', { id: 'usage' });
    replace(root, h('h1', {}, 'Usage'), form, period, chartBox, chartNote, body);

    let plot = null;
    let plotKey = '';
    let lastLoad = 0;
    const load = async () => {
      lastLoad = Date.now();
      const query = usageQuery(state);
      csv.href = `/api/v1/usage?${query}&format=csv`;
      let report;
      try {
        report = await getJson(`/api/v1/usage?${query}`);
        error.textContent = '';
      } catch (e) {
        error.textContent = e.message;
        return;
      }
      const by = [...state.by];
      period.textContent = `${report.since} to ${report.until} (UTC days). Allocated: GPU-hours held by jobs; ` +
        'used: those hours weighted by the GPUs\' utilisation.';
      const rows = report.rows || [];
      // [allocated, used, allocated × utilisation]: the total's utilisation from the rows'
      // own percentages (the hours are rounded to 0.001).
      const total = rows.reduce((a, r) => [a[0] + r.allocated_gpu_hours, a[1] + r.used_gpu_hours,
        a[2] + r.allocated_gpu_hours * r.utilization_percent], [0, 0, 0]);
      replace(body, rows.length === 0 ? h('p', { class: 'muted', id: 'usage-empty' }, 'No GPU time in this period.') : table(
        [...by, 'allocated GPU-h', 'used GPU-h', 'utilisation'],
        [...rows.map((r) => [...by.map((k) => r[k] ?? ''), hours(r.allocated_gpu_hours), hours(r.used_gpu_hours), percent(r.utilization_percent)]),
          [...by.map((k, i) => (i === 0 ? h('b', {}, 'total') : '')), hours(total[0]), hours(total[1]),
            total[0] > 0 ? percent(total[2] / total[0]) : '—']],
        { id: 'usage-table' }));
      const groups = chartGroups(rows, by);
      const key = JSON.stringify([by, groups]);
      if (key === plotKey) return;
      plotKey = key;
      plot?.destroy();
      plot = null;
      replace(chartBox);
      chartBox.dataset.bars = String(groups.length);
      chartNote.textContent = groups.length === 0 ? '' : by.includes('day')
        ? 'Per day, summed over the other groups.' : groups.length < rows.length ? 'The 30 groups with the most allocated GPU-hours.' : '';
      if (groups.length === 0) return;
      plot = barChart(chartBox, {
        labels: groups.map((g) => g.label), yLabel: 'GPU-hours', unit: ' GPU-h',
        series: [
          { label: 'allocated GPU-hours', colour: '#2463eb', values: groups.map((g) => round3(g.allocated)) },
          { label: 'used GPU-hours', colour: '#2f9e5b', values: groups.map((g) => round3(g.used)) },
        ],
      });
    };
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      const by = checks.map((l) => l.querySelector('input')).filter((c) => c.checked).map((c) => c.value);
      if (by.length === 0) {
        error.textContent = 'choose at least one grouping';
        return;
      }
      Object.assign(state, { by, since: since.value, from: from.value, until: until.value });
      load();
    });
    await load();
    return {
      async refresh() { if (Date.now() - lastLoad >= kReloadMs) await load(); },
      dispose() { plot?.destroy(); },
    };
  },
};
