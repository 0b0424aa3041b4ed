// Jobs: every job the user may see (GET /api/v1/jobs?all=1: their projects' jobs; admins all),
// one line per job, filtered, sorted and paged by the server (docs/control-plane.md, "Listing
// jobs"). The filters, the sort and the page size live in the URL's hash
// (#/jobs?state=running&user=ann&sort=gpus&order=asc&limit=50), so a reload or a shared link
// keeps them; the page's position is a stack of the server's cursors (previous = pop), kept in
// memory only: a reload starts at the first page.
import { getPage } from '../api.js';
import { h, replace } from '../dom.js';
import { dateTime, duration, gpus, shortDate, shortDuration } from '../format.js';
import { jobEnded } from '../states.js';

export function stateBadge(state) {
  return h('span', { class: `state state-${state}` }, state);
}

// The listing's filters and sort as the hash holds them; values the server checks (and names
// in a 400) are passed as typed, within its bounds.
const kPageSizes = [25, 50, 100, 200];
const kDefaultPageSize = 50;
const kStates = ['pending', 'starting', 'running', 'succeeded', 'failed', 'cancelled', 'lost', 'timeout', 'oom'];
// State filter choices: one state, or the live / ended groups (comma-separated states).
const kStateChoices = [['', 'any state'], ['pending,starting,running', 'not ended'],
  ['succeeded,failed,cancelled,lost,timeout,oom', 'ended'], ...kStates.map((s) => [s, s])];
// Columns: [header, the API's sort key or null, title].
const kColumns = [
  ['id', 'id', 'job id'], ['name', null, 'job name'], ['user', null, null], ['project', null, null],
  ['state', null, null], ['GPUs', 'gpus', 'GPUs over all its tasks'],
  ['submitted', 'submit_time', 'when it was submitted'],
  ['elapsed', 'start_time', 'running: since it started; ended: how long it ran (sorts by start time)'],
  ['ended', 'end_time', 'when it ended'],
  ['ETA', null, 'pending: the scheduler\'s estimated start, when it has one'],
];
const kSortKeys = new Set(kColumns.map((c) => c[1]).filter(Boolean));
const kNumeric = new Set(['id', 'GPUs', 'elapsed']); // right-aligned, as their cells
const kFilterBounds = { user: 253, project: 253, name: 128 };

/**
 * The view a hash query asks for (a URLSearchParams or its text): { user, project, state,
 * name, sort, order, limit }, unknown sorts, orders and sizes replaced by the defaults, text
 * cut to the API's bounds.
 */
export function viewOf(query) {
  const q = new URLSearchParams(query);
  const text = (k) => (q.get(k) || '').trim().slice(0, kFilterBounds[k]);
  const sort = kSortKeys.has(q.get('sort')) ? q.get('sort') : 'id';
  const limit = kPageSizes.includes(Number(q.get('limit'))) ? Number(q.get('limit')) : kDefaultPageSize;
  const state = kStateChoices.some(([v]) => v === q.get('state')) ? q.get('state') : '';
  return { user: text('user'), project: text('project'), state, name: text('name'), sort,
    order: q.get('order') === 'asc' ? 'asc' : 'desc', limit };
}

/** The hash query of a view: only what differs from the defaults, in a fixed order. */
export function hashQuery(view) {
  const q = new URLSearchParams();
  for (const k of ['user', 'project', 'state', 'name']) if (view[k]) q.set(k, view[k]);
  if (view.sort !== 'id') q.set('sort', view.sort);
  if (view.order !== 'desc') q.set('order', view.order);
  if (view.limit !== kDefaultPageSize) q.set('limit', String(view.limit));
  return q.toString();
}

/** GET /api/v1/jobs's query for a view and a cursor (null: the first page). */
export function listingQuery(view, cursor) {
  const q = new URLSearchParams({ all: '1' });
  for (const k of ['user', 'project', 'state', 'name']) if (view[k]) q.set(k, view[k]);
  q.set('sort', view.sort);
  q.set('order', view.order);
  q.set('limit', String(view.limit));
  if (cursor) q.set('cursor', cursor);
  return q.toString();
}

/**
 * A row's time cells against `now` (Unix seconds): elapsed (running: since its start; ended:
 * its run time; never started: "—") and ETA (pending with an estimate: "in 4m 10s"). Each is
 * { text, title }.
 */
export function timeCells(job, now) {
  let elapsed = { text: '—', title: 'not started' };
  if (job.start_time) {
    const ended = jobEnded(job.state) && job.end_time;
    const seconds = (ended ? job.end_time : now) - job.start_time;
    elapsed = { text: shortDuration(seconds), title: `${ended ? 'ran' : 'running for'} ${duration(seconds)} (started ${dateTime(job.start_time)})` };
  }
  let etaCell = { text: '', title: null };
  if (job.state === 'pending') {
    const wait = job.estimated_start - now;
    etaCell = job.estimated_start
      ? { text: wait <= 1 ? 'now' : `in ${shortDuration(wait)}`, title: `estimated start ${dateTime(job.estimated_start)}` }
      : { text: 'unknown', title: 'no estimated start (the scheduler cannot tell yet)' };
  }
  return { elapsed, eta: etaCell };
}

function jobRow(j, now) {
  const { elapsed, eta: etaCell } = timeCells(j, now);
  const cell = (content, attrs = {}) => h('td', attrs, content);
  const reason = j.pending_reason?.message || j.reason || '';
  return h('tr', { dataset: { id: String(j.id) } },
    cell(h('a', { href: `#/jobs/${j.id}` }, String(j.id)), { class: 'num' }),
    cell(h('a', { href: `#/jobs/${j.id}` }, j.name || '—'), { class: 'name', title: j.name || null }),
    cell(j.user, { title: j.user }), cell(j.project, { title: j.project }),
    cell(stateBadge(j.state), { title: reason || null }),
    cell(gpus((j.total_gpu_milli ?? 0) / 1000), { class: 'num' }),
    cell(shortDate(j.submit_time, now), { title: dateTime(j.submit_time) }),
    cell(elapsed.text, { class: 'num', title: elapsed.title }),
    cell(j.end_time ? shortDate(j.end_time, now) : '', { title: j.end_time ? dateTime(j.end_time) : null }),
    cell(etaCell.text, { title: etaCell.title }));
}

export default {
  title: 'Jobs',
  async render(root) {
    let view = viewOf(location.hash.split('?')[1] || '');
    // Cursors of the pages shown so far: stack[i] is page i + 1's (null for the first).
    let stack = [null];
    let next = null;
    let disposed = false;
    let latest = 0; // the last load asked: an older answer (a refresh overtaken by a click) is dropped

    const input = (id, key, placeholder) => h('input', { id, value: view[key], placeholder,
      maxlength: String(kFilterBounds[key]), size: key === 'name' ? 16 : 12, spellcheck: 'false' });
    const user = input('jobs-user', 'user', 'user');
    const project = input('jobs-project', 'project', 'project');
    const name = input('jobs-name', 'name', 'name prefix');
    const state = h('select', { id: 'jobs-state' }, kStateChoices.map(([v, label]) =>
      h('option', { value: v, selected: v === view.state }, label)));
    const size = h('select', { id: 'jobs-limit', title: 'jobs per page' }, kPageSizes.map((n) =>
      h('option', { value: String(n), selected: n === view.limit }, `${n} per page`)));
    const prev = h('button', { type: 'button', id: 'jobs-prev' }, '‹ previous');
    const more = h('button', { type: 'button', id: 'jobs-next' }, 'next ›');
    const where = h('span', { id: 'jobs-page', class: 'muted' });
    const error = h('p', { class: 'error', id: 'jobs-error' });
    const body = h('div', { id: 'jobs' });
    const filters = h('form', { class: 'controls', id: 'jobs-filters' },
      h('label', {}, 'state ', state), h('label', {}, 'user ', user), h('label', {}, 'project ', project),
      h('label', {}, 'name ', name), h('button', { type: 'submit' }, 'Filter'), size);
    replace(root, h('h1', {}, 'Jobs'), filters,
      h('p', { class: 'pager' }, prev, ' ', where, ' ', more, ' ', h('a', { href: '#/submit' }, 'Submit a job')), error, body);

    const load = async () => {
      const mine = ++latest;
      let page;
      try {
        page = await getPage(`/api/v1/jobs?${listingQuery(view, stack.at(-1))}`);
      } catch (e) {
        if (mine === latest) error.textContent = e.message;
        return;
      }
      if (disposed || mine !== latest) return;
      error.textContent = '';
      next = page.next;
      const now = Date.now() / 1000;
      const head = h('tr', {}, kColumns.map(([label, key, title]) => {
        const num = kNumeric.has(label) ? 'num ' : '';
        if (!key) return h('th', { title, class: num || null }, label);
        const active = view.sort === key;
        return h('th', { class: `${num}sortable${active ? ` sorted ${view.order}` : ''}`, title, dataset: { sort: key } },
          h('button', { type: 'button', class: 'sort' }, label, active ? (view.order === 'asc' ? ' ▲' : ' ▼') : ''));
      }));
      replace(body, page.rows.length === 0 && stack.length === 1
        ? h('p', { class: 'muted', id: 'jobs-empty' }, 'No job matches.')
        : h('table', { id: 'jobs-table', class: 'dense' }, h('thead', {}, head),
          h('tbody', {}, page.rows.map((j) => jobRow(j, now)))));
      prev.disabled = stack.length === 1;
      more.disabled = !next;
      where.textContent = `page ${stack.length}`;
    };

    // A new view: its hash written (without a hashchange, which would render the page again),
    // back to the first page.
    const show = (changes) => {
      view = { ...view, ...changes };
      const query = hashQuery(view);
      history.replaceState(null, '', `#/jobs${query ? `?${query}` : ''}`);
      stack = [null];
      return load();
    };
    filters.addEventListener('submit', (event) => {
      event.preventDefault();
      show(viewOf(new URLSearchParams({ ...view, user: user.value, project: project.value, name: name.value,
        state: state.value, limit: size.value })));
    });
    state.addEventListener('change', () => filters.requestSubmit());
    size.addEventListener('change', () => filters.requestSubmit());
    body.addEventListener('click', (event) => {
      const th = event.target.closest('th[data-sort]');
      if (!th) return;
      const key = th.dataset.sort;
      show({ sort: key, order: view.sort === key && view.order === 'desc' ? 'asc' : 'desc' });
    });
    prev.addEventListener('click', () => {
      if (stack.length > 1) stack.pop();
      load();
    });
    more.addEventListener('click', () => {
      if (!next) return;
      stack.push(next);
      load();
    });
    await load();
    return { refresh: load, dispose() { disposed = true; } };
  },
};
