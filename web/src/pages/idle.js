// Idle GPUs. Today: GPUs with nothing allocated (from /api/v1/nodes), by node and model.
// GPUs that are allocated but barely used need the metrics API (utilisation per GPU); the
// page says so until that exists.
import { getJson } from '../api.js';
import { h, replace, table } from '../dom.js';

export default {
  title: 'Idle GPUs',
  async render(root) {
    const body = h('div', { id: 'idle' });
    replace(root, h('h1', {}, 'Idle GPUs'), body,
      h('p', { class: 'note', id: 'idle-needs-metrics' },
        'Allocated-but-unused GPUs (low utilisation) need metrics: they appear here when the metrics API exists.'));
    const load = async () => {
      const nodes = await getJson('/api/v1/nodes');
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
