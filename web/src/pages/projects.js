// Projects: each project's GPU quota against what it runs now (and borrows beyond its quota),
// its hard limit and fair-share usage (/api/v1/projects).
import { getJson } from '../api.js';
import { h, replace, table } from '../dom.js';
import { gpus } from '../format.js';

/** Total quota GPUs of a project's `quota_gpus` (a number, or an object by GPU model). */
export function quotaTotal(q) {
  if (typeof q === 'number') return q;
  if (q && typeof q === 'object') return Object.values(q).reduce((a, b) => a + (Number(b) || 0), 0);
  return 0;
}

function bar(used, quota) {
  const pct = quota > 0 ? Math.min(100, (100 * used) / quota) : used > 0 ? 100 : 0;
  return h('div', { class: 'bar', title: `${gpus(used)} of ${gpus(quota)} GPUs` },
    h('span', { class: used > quota ? 'over' : null, style: `width:${pct}%` }));
}

export default {
  title: 'Projects',
  async render(root) {
    const body = h('div', { id: 'projects' });
    replace(root, h('h1', {}, 'Projects'), body);
    const load = async () => {
      const rows = await getJson('/api/v1/projects');
      replace(body, table(['project', 'quota GPUs', 'running GPUs', 'use of quota', 'borrowed', 'limit', 'weight', 'fair-share usage'],
        rows.map((p) => {
          const quota = quotaTotal(p.quota_gpus);
          return [p.name, typeof p.quota_gpus === 'object' && p.quota_gpus ? JSON.stringify(p.quota_gpus) : gpus(quota),
            gpus(p.running_gpus), bar(p.running_gpus, quota), gpus(p.borrowed_gpus),
            p.limit_gpus === null || p.limit_gpus === undefined ? 'none' : JSON.stringify(p.limit_gpus),
            String(p.weight), Number(p.fair_share_usage || 0).toFixed(2)];
        }), { id: 'projects-table' }));
    };
    await load();
    return { refresh: load };
  },
};
