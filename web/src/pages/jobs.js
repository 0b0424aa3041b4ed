// Jobs: the newest jobs of every project the user sees (/api/v1/jobs?all=1), with state.
import { getJson } from '../api.js';
import { h, replace, table } from '../dom.js';
import { dateTime } from '../format.js';

export function stateBadge(state) {
  return h('span', { class: `state state-${state}` }, state);
}

export default {
  title: 'Jobs',
  async render(root) {
    const body = h('div', { id: 'jobs' });
    replace(root, h('h1', {}, 'Jobs'), h('p', {}, h('a', { href: '#/submit' }, 'Submit a job')), body);
    const load = async () => {
      const rows = await getJson('/api/v1/jobs?all=1&limit=200');
      replace(body, rows.length === 0 ? h('p', { class: 'muted' }, 'No jobs yet.') : table(
        ['job', 'name', 'user', 'project', 'state', 'submitted', 'reason'],
        rows.map((j) => [
          h('a', { href: `#/jobs/${j.id}` }, String(j.id)), j.name || '', j.user, j.project,
          stateBadge(j.state), dateTime(j.submit_time), j.pending_reason?.message || j.reason || '',
        ]), { id: 'jobs-table' }));
    };
    await load();
    return { refresh: load };
  },
};
