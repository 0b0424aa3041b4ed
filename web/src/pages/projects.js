// Projects: each project's GPU quota against what it runs now (and borrows beyond its quota),
// its hard limit, weight and fair-share standing in words (/api/v1/projects: the server's
// standing among all the cluster's projects; /api/v1/policy: the half-life the note names).
// The raw usage stays in the tooltip.
import { getJson } from '../api.js';
import { h, replace, table } from '../dom.js';
import { duration, gpus } from '../format.js';

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
 * A project's fair-share standing in words, from its row's `fair_share` (the server's, among all
 * the cluster's projects: sched/fair_share_standing.h): "over its share by 3.2 GPU-hours",
 * "under its share by 40 GPU-minutes: next in line", "at its share".
 */
export function standingWords({ standing, gpu_hours_from_share: hours, next_in_line: next }) {
  const words = standing === 'at' ? 'at its share' : `${standing} its share by ${gpuTime(Math.abs(hours))}`;
  return next ? `${words}: next in line` : words;
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
      const [rows, policy] = await Promise.all([getJson('/api/v1/projects'), getJson('/api/v1/policy').catch(() => ({}))]);
      const halfLifeS = Number(policy.policy?.fair_share?.half_life_s);
      replace(body, table(['project', 'quota GPUs', 'GPUs in use', 'use of quota', 'borrowed', 'limit', 'weight', 'fair share'],
        rows.map((p) => {
          const quota = quotaTotal(p.quota_gpus);
          const s = p.fair_share;
          return [p.name, typeof p.quota_gpus === 'object' && p.quota_gpus ? JSON.stringify(p.quota_gpus) : gpus(quota),
            gpus(p.running_gpus), bar(p.running_gpus, quota), gpus(p.borrowed_gpus),
            p.limit_gpus === null || p.limit_gpus === undefined ? 'none' : JSON.stringify(p.limit_gpus),
            String(p.weight),
            h('span', { class: s.next_in_line ? 'standing next' : 'standing', dataset: { overGpuHours: s.gpu_hours_from_share.toFixed(3) },
              title: `fair-share usage ${Number(p.fair_share_usage || 0).toFixed(2)} share-seconds (decayed, docs/policies.md)` }, standingWords(s))];
        }), { id: 'projects-table' }),
      h('p', { class: 'note', id: 'projects-fair-share-note' }, `Fair share: each project is due its weight's part of the GPU time all the ` +
        `cluster's projects used lately${halfLifeS > 0 ? ` (older use counts half after ${halfLife(halfLifeS)})` : ''}. ` +
        'The fairshare order starts the work of the project furthest under its share first, counting what each runs now as if it ran on: ' +
        'that project is next in line (docs/policies.md).'));
    };
    await load();
    return { refresh: load };
  },
};
