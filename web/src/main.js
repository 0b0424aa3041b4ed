// The dashboard's shell: navigation, a hash router (#/, #/nodes, #/jobs/12, ...) and the live
// summary stream. Contract for a page module (pages/*.js): `export default { title, nav?,
// render(root, params) }` where render fills `root` and may return an object with
// `refresh()` (called, one at a time, after each live summary) and `dispose()` (called when
// the page is left). Routes are in `routes` below.
import 'uplot/dist/uPlot.min.css';
import './style.css';
import { getJson, logout } from './api.js';
import { h, replace } from './dom.js';
import * as live from './live.js';
import overview from './pages/overview.js';
import heatmap from './pages/heatmap.js';
import queue from './pages/queue.js';
import jobs from './pages/jobs.js';
import job from './pages/job.js';
import submit from './pages/submit.js';
import projects from './pages/projects.js';
import idle from './pages/idle.js';
import usage from './pages/usage.js';
import capacity from './pages/capacity.js';

// [pattern, page, name in the navigation or null]; the pattern's groups are the page's params.
const routes = [
  [/^\/?$/, overview, 'Overview'],
  [/^\/nodes$/, heatmap, 'Nodes'],
  [/^\/queue$/, queue, 'Queue'],
  [/^\/jobs$/, jobs, 'Jobs'],
  [/^\/jobs\/(\d+)$/, job, null],
  [/^\/submit$/, submit, 'Submit'],
  [/^\/projects$/, projects, 'Projects'],
  [/^\/idle$/, idle, 'Idle GPUs'],
  [/^\/usage$/, usage, 'Usage'],
  [/^\/capacity$/, capacity, 'Capacity'],
];
const paths = ['/', '/nodes', '/queue', '/jobs', null, '/submit', '/projects', '/idle', '/usage', '/capacity'];

let current = null; // { dispose, refresh } of the page shown
let refreshing = false;

// The route's path: the hash without its query ("#/jobs?state=running" is "/jobs"); a page
// reads the query from location.hash itself.
function routePath() {
  return location.hash.slice(1).split('?')[0] || '/';
}

function navigation() {
  const here = routePath();
  replace(document.getElementById('nav'), routes.map(([, , name], i) => name && h('a', {
    href: `#${paths[i]}`,
    class: (paths[i] === '/' ? here === '/' : here.startsWith(paths[i])) ? 'active' : null,
  }, name)));
}

async function show() {
  current?.dispose?.();
  current = null;
  const path = routePath();
  const root = document.getElementById('page');
  navigation();
  for (const [pattern, page] of routes) {
    const m = pattern.exec(path);
    if (!m) continue;
    document.title = `corral: ${page.title}`;
    root.replaceChildren();
    root.dataset.page = page.title.toLowerCase().replace(/\s+/g, '-');
    try {
      current = (await page.render(root, m.slice(1))) || null;
    } catch (e) {
      replace(root, h('p', { class: 'error' }, `Could not load this page: ${e.message}`));
    }
    return;
  }
  replace(root, h('p', {}, 'No such page. '), h('a', { href: '#/' }, 'Overview'));
}

// After each summary, the page shown reloads its data; never two reloads at once.
live.subscribe(async () => {
  if (refreshing || !current?.refresh) return;
  refreshing = true;
  try {
    await current.refresh();
  } catch (e) {
    console.warn('refresh failed', e);
  } finally {
    refreshing = false;
  }
});

async function main() {
  document.getElementById('logout').addEventListener('click', logout);
  live.onMode((mode) => {
    const el = document.getElementById('live');
    el.textContent = mode === 'live' ? '● live' : mode === 'polling' ? '● polling' : 'connecting…';
    el.dataset.mode = mode;
  });
  // Who is logged in is asked beside the page's own data, not before it (first paint).
  const whoami = getJson('/api/v1/whoami').then((who) => {
    document.getElementById('who').textContent = `${who.user}${who.admin ? ' (admin)' : ''}`;
  });
  window.addEventListener('hashchange', show);
  live.start();
  await Promise.all([show(), whoami]);
}

main().catch((e) => console.error(e));
