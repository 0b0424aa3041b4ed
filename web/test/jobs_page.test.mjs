// Unit tests of the jobs page's pure parts (web/src/pages/jobs.js) and the compact formats of
// dense tables (web/src/format.js): the view a URL hash asks for and back, the listing's query,
// a row's elapsed and ETA cells.
// Usage: node --test web/test/jobs_page.test.mjs   (make test-web runs it)
import assert from 'node:assert/strict';
import test from 'node:test';
import { shortDate, shortDuration } from '../src/format.js';
import { hashQuery, listingQuery, timeCells, viewOf } from '../src/pages/jobs.js';

test('compact durations: seconds, minutes, hours, days, two units at most', () => {
  assert.equal(shortDuration(12), '12s');
  assert.equal(shortDuration(185), '3m 05s');
  assert.equal(shortDuration(2 * 3600 + 5 * 60 + 59), '2h 05m');
  assert.equal(shortDuration(3 * 86400 + 4 * 3600), '3d 04h');
  assert.equal(shortDuration(undefined), '—');
  assert.equal(shortDuration(-5), '0s');
});

test('compact dates: relative within a day, month-day hour:minute before, ahead as "in"', () => {
  const now = Date.UTC(2026, 11, 6, 12, 0, 0) / 1000;
  assert.equal(shortDate(now - 45, now), '45s ago');
  assert.equal(shortDate(now - 3 * 3600, now), '3h 00m ago');
  assert.equal(shortDate(now + 240, now), 'in 4m 00s');
  const older = now - 3 * 86400;
  const d = new Date(older * 1000);
  const pad = (n) => String(n).padStart(2, '0');
  assert.equal(shortDate(older, now), `${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`);
  assert.equal(shortDate(null, now), '—');
});

test('the view a hash asks for: known sorts, orders, states and sizes only, text bounded', () => {
  assert.deepEqual(viewOf(''), { user: '', project: '', state: '', name: '', sort: 'id', order: 'desc', limit: 50 });
  const v = viewOf('state=running&user=ann&sort=gpus&order=asc&limit=25&name=train');
  assert.deepEqual(v, { user: 'ann', project: '', state: 'running', name: 'train', sort: 'gpus', order: 'asc', limit: 25 });
  assert.deepEqual(viewOf('sort=reason&order=up&limit=7&state=dreaming'),
    { user: '', project: '', state: '', name: '', sort: 'id', order: 'desc', limit: 50 });
  assert.equal(viewOf(`name=${'x'.repeat(300)}`).name.length, 128);
  assert.equal(viewOf('state=pending,starting,running').state, 'pending,starting,running');
  // Back to a hash: only what differs from the defaults, and it reads back the same.
  assert.equal(hashQuery(viewOf('')), '');
  assert.deepEqual(viewOf(hashQuery(v)), v);
});

test('the listing query: every job the user may see, the view, and the cursor of the page', () => {
  const v = viewOf('state=running&sort=start_time&limit=100');
  assert.equal(listingQuery(v, null), 'all=1&state=running&sort=start_time&order=desc&limit=100');
  assert.equal(new URLSearchParams(listingQuery(v, 'MTpp')).get('cursor'), 'MTpp');
});

test('elapsed: since the start while running, the run time once ended; ETA for pending jobs', () => {
  const now = 10_000;
  assert.equal(timeCells({ state: 'running', start_time: now - 125 }, now).elapsed.text, '2m 05s');
  assert.equal(timeCells({ state: 'succeeded', start_time: 100, end_time: 160 }, now).elapsed.text, '1m 00s');
  assert.equal(timeCells({ state: 'cancelled', end_time: 160 }, now).elapsed.text, '—');
  assert.equal(timeCells({ state: 'pending', estimated_start: now + 600 }, now).eta.text, 'in 10m 00s');
  assert.equal(timeCells({ state: 'pending' }, now).eta.text, 'unknown');
  assert.equal(timeCells({ state: 'running', start_time: now }, now).eta.text, '');
});
