// Queue: pending jobs in the order they are considered, with why each waits and, when the
// scheduler can tell, when it should start (/api/v1/queue).
import { getJson } from '../api.js';
import { h, replace, table } from '../dom.js';
import { dateTime, duration, eta, gpus } from '../format.js';

export default {
  title: 'Queue',
  async render(root) {
    const body = h('div', { id: 'queue' });
    replace(root, h('h1', {}, 'Queue'), body);
    const load = async () => {
      const rows = await getJson('/api/v1/queue?limit=500');
      const now = Date.now() / 1000;
      replace(body, rows.length === 0 ? h('p', { class: 'muted' }, 'No job is waiting.') : table(
        ['#', 'job', 'name', 'user', 'project', 'GPUs', 'waiting', 'pending reason', 'estimated start'],
        rows.map((r) => [
          String(r.position),
          h('a', { href: `#/jobs/${r.id}` }, String(r.id)),
          r.name || '', r.user, r.project, gpus(r.gpus),
          duration(now - r.submit_time),
          h('span', { title: r.pending_reason?.code || '' }, r.pending_reason?.message || ''),
          r.estimated_start ? `${eta(r.estimated_start, now)} (${dateTime(r.estimated_start)})` : 'unknown',
        ]), { id: 'queue-table' }));
    };
    await load();
    return { refresh: load };
  },
};
