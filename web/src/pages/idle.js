// Idle GPUs: the allocated GPUs the server flagged idle (/api/v1/gpus?idle=1: held by a job and
// under the idle threshold for at least the idle time, both server flags), with the job, user,
// project, their reading and how long they have been idle; then the GPUs with nothing
// allocated on ready nodes (/api/v1/nodes).
import { getJson } from '../api.js';
import { h, replace, table } from '../dom.js';
import { duration, mib, percent } from '../format.js';
import { loadGpus } from '../gpus.js';

function flaggedTable(gpus) {
  return table(['node', 'GPU', 'model', 'job', 'user', 'project', 'utilisation', 'memory', 'idle for'],
    gpus.map((g) => {
      const holders = g.holders || [];
      // Another project's job comes without job, user or project: "in use".
      const seen = holders.filter((x) => x.job !== undefined);
      return [
        g.node, String(g.index), g.model || '',
        holders.length ? holders.map((x, i) => [i ? ', ' : '',
          x.job === undefined ? 'in use' : h('a', { href: `#/jobs/${x.job}` }, `#${x.job}`),
          x.session ? ' (session)' : '', x.share < 1 ? ` (${x.share} GPU)` : '']) : '—',
        [...new Set(seen.map((x) => x.user))].join(', '),
        [...new Set(seen.map((x) => x.project))].join(', '),
        percent(g.utilization_percent), mib(g.memory_used_mib), duration(g.idle_for_s),
      ];
    }), { id: 'idle-flagged-table' });
}

export default {
  title: 'Idle GPUs',
  async render(root) {
    const rule = h('p', { class: 'note', id: 'idle-rule' });
    const flagged = h('div', { id: 'idle-flagged' });
    const body = h('div', { id: 'idle' });
    replace(root, h('h1', {}, 'Idle GPUs'),
      h('h2', {}, 'Allocated but idle'), rule, flagged,
      h('h2', {}, 'Not allocated'), body);
    const load = async () => {
      const [idle, nodes] = await Promise.all([loadGpus({ idle: true }), getJson('/api/v1/nodes')]);
      if (idle) {
        rule.textContent = `A GPU held by a job is flagged when its utilisation stays under ${idle.idle_threshold_percent} % ` +
          `for ${duration(idle.idle_after_s)} (server flags --gpu-idle-threshold, --gpu-idle-after).`;
        const gpus = [...idle.gpus].sort((a, b) => (b.idle_for_s ?? 0) - (a.idle_for_s ?? 0));
        replace(flagged, h('p', { id: 'idle-flagged-count' },
          `${gpus.length} allocated GPU${gpus.length === 1 ? '' : 's'} flagged idle.`),
        gpus.length ? flaggedTable(gpus) : null);
      } else {
        rule.textContent = 'This server has no GPU metrics API: allocated-but-unused GPUs cannot be shown.';
        replace(flagged);
      }
      const rows = nodes.filter((n) => n.state === 'ready').map((n) => {
        const free = (n.gpu_free_milli || []).map((f, i) => [f, i]).filter(([f]) => f >= 1000).map(([, i]) => i);
        return [n.name, n.gpu_model || '', `${free.length} of ${n.gpus}`, free.join(', ') || 'none'];
      }).filter((r) => !r[2].startsWith('0 '));
      const count = rows.reduce((a, r) => a + Number(r[2].split(' ')[0]), 0);
      replace(body, h('p', { id: 'idle-count' }, `${count} GPUs with nothing allocated on ready nodes.`),
        rows.length ? table(['node', 'model', 'unallocated', 'GPU indices'], rows) : null);
    };
    await load();
    return { refresh: load };
  },
};
