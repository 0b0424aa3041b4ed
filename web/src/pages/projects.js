// Projects: each project's GPU quota against what it runs now (and borrows beyond its quota),
// its hard limit, weight and fair-share standing in words (/api/v1/projects; the cluster's GPUs
// from /api/v1/summary turn usage into GPU-hours). The raw usage stays in the tooltip.
import { getJson } from '../api.js';
import { h, replace, table } from '../dom.js';
import { duration, gpus } from '../format.js';

// Closer to its share than this part of all the use (or than a GPU-second), a project is "at
// its share".
const kEvenPart = 0.02;
const kDefaultHalfLifeS = 7 * 86400; // sched/sharing.h FairShareConfig

/** Total quota GPUs of a project's `quota_gpus` (a number, or an object by GPU model). */
export function quotaTotal(q) {
  if (typeof q === 'number') return q;
  if (q && typeof q === 'object') return Object.values(q).reduce((a, b) => a + (Number(b) || 0), 0);
  return 0;
}

/** "12 GPU-hours", "1.5 GPU-hours", "25 GPU-minutes", "less than a GPU-minute" for GPU-hours. */
export function gpuTime(gpuHours) {
  if (gpuHours >= 10) return `${Math.round(gpuHours)} GPU-hours`;
  if (gpuHours >= 1) return `${gpuHours.toFixed(1)} GPU-hours`;
  const minutes = Math.round(gpuHours * 60);
  return minutes >= 1 ? `${minutes} GPU-minute${minutes === 1 ? '' : 's'}` : 'less than a GPU-minute';
}

/**
 * Each project's fair-share standing, in words, from /api/v1/projects' rows, the cluster's GPU
 * count and the fair-share half-life (s). A project's `fair_share_usage` U (docs/policies.md,
 * "Fair share") is, in share-seconds, its decayed past use of the cluster (its dominant share
 * over time) plus what it runs now as if it ran on: share now × half-life / ln 2. The order
 * serves the lowest U / weight first: that project is "next in line". The words compare the past
 * use alone (U less what it runs now, its GPUs' share of the cluster), as GPU-hours (share-seconds
 * × GPUs / 3600), against the project's due part, its weight's part of the total weight.
 * Compared among `rows` only: a member sees their own projects, so their standing is among those.
 * Answers a Map name → { words, over_gpu_hours (negative: under), next (boolean) }.
 */
export function standings(rows, clusterGpus, halfLifeS) {
  const out = new Map();
  const usage = (p) => Math.max(0, Number(p.fair_share_usage) || 0);
  const weight = (p) => Math.max(0, Number(p.weight ?? 1));
  const nowPart = (p) => (clusterGpus > 0 ? ((Number(p.running_gpus) || 0) / clusterGpus) * (halfLifeS / Math.LN2) : 0);
  const past = (p) => Math.max(0, usage(p) - nowPart(p));
  const totalPast = rows.reduce((a, p) => a + past(p), 0);
  const totalWeight = rows.reduce((a, p) => a + weight(p), 0);
  if (rows.length < 2 || totalWeight <= 0) {
    for (const p of rows) out.set(p.name, { words: 'the only project you can compare', over_gpu_hours: 0, next: false });
    return out;
  }
  // Next in line: the lowest usage per weight (ties: the first listed), once anything was used.
  let next = null;
  if (rows.some((p) => usage(p) > 0)) {
    for (const p of rows) {
      if (weight(p) > 0 && (!next || usage(p) / weight(p) < usage(next) / weight(next))) next = p;
    }
  }
  for (const p of rows) {
    const over = ((past(p) - (totalPast * weight(p)) / totalWeight) * clusterGpus) / 3600;
    const size = Math.abs(over);
    const even = Math.max((kEvenPart * totalPast * clusterGpus) / 3600, 1 / 3600);
    let words = size < even ? 'at its share' : over > 0 ? `over its share by ${gpuTime(size)}` : `under its share by ${gpuTime(size)}`;
    if (totalPast <= 0) words = 'nothing used yet';
    if (p === next) words += ': next in line';
    out.set(p.name, { words, over_gpu_hours: over, next: p === next });
  }
  return out;
}

// "7 days", "1 day", or "12 h 00 min".
function halfLife(s) {
  return s % 86400 === 0 ? `${s / 86400} day${s === 86400 ? '' : 's'}` : duration(s);
}

function bar(used, quota) {
  if (quota <= 0) return h('span', { class: 'muted' }, 'no quota');
  const pct = Math.min(100, (100 * used) / quota);
  return h('div', { class: 'bar', title: `${gpus(used)} of ${gpus(quota)} GPUs` },
    h('span', { class: used > quota ? 'over' : null, style: `width:${pct}%` }));
}

export default {
  title: 'Projects',
  async render(root) {
    const body = h('div', { id: 'projects' });
    replace(root, h('h1', {}, 'Projects'), body);
    const load = async () => {
      const [rows, summary, policy] = await Promise.all([getJson('/api/v1/projects'), getJson('/api/v1/summary'),
        getJson('/api/v1/policy').catch(() => ({}))]);
      const halfLifeS = Number(policy.policy?.fair_share?.half_life_s) || kDefaultHalfLifeS;
      const standing = standings(rows, Number(summary.gpus) || 0, halfLifeS);
      replace(body, table(['project', 'quota GPUs', 'GPUs in use', 'use of quota', 'borrowed', 'limit', 'weight', 'fair share'],
        rows.map((p) => {
          const quota = quotaTotal(p.quota_gpus);
          const s = standing.get(p.name);
          return [p.name, typeof p.quota_gpus === 'object' && p.quota_gpus ? JSON.stringify(p.quota_gpus) : gpus(quota),
            gpus(p.running_gpus), bar(p.running_gpus, quota), gpus(p.borrowed_gpus),
            p.limit_gpus === null || p.limit_gpus === undefined ? 'none' : JSON.stringify(p.limit_gpus),
            String(p.weight),
            h('span', { class: s.next ? 'standing next' : 'standing', dataset: { overGpuHours: s.over_gpu_hours.toFixed(3) },
              title: `fair-share usage ${Number(p.fair_share_usage || 0).toFixed(2)} share-seconds (decayed, docs/policies.md)` }, s.words)];
        }), { id: 'projects-table' }),
      h('p', { class: 'note', id: 'projects-fair-share-note' }, `Fair share: each project is due its weight's part of the GPU time used lately ` +
        `(older use counts half after ${halfLife(halfLifeS)}). The fairshare order starts the work of the project furthest under its share first, ` +
        'counting what each runs now as if it ran on: that project is next in line (docs/policies.md).'));
    };
    await load();
    return { refresh: load };
  },
};
