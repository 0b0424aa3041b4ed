// End-to-end test of the dashboard (docs/dashboard.md): a real `corral dev` (fresh data dir,
// free port, 4 fake GPUs sampled every 0.5 s, GPUs flagged idle after 3 s, the built web/dist),
// driven by Debian's headless Chromium through playwright-core. It logs in through the login
// page with the admin token `corral dev` prints, submits a job through the form with
// FAKE_GPU_UTILIZATION=37, watches it run and finish, sees its utilisation on the job page's
// chart and on the heatmap, reads its logs, sees a live (SSE) update and the "used" GPUs, finds
// an idle job (1 %) on the idle page and striped on the heatmap, waits for the usage report to
// show the GPU time (the server stores it every 10 s) and its CSV, renders the capacity page
// (and its what-if, when the server has the capacity API), checks the queue's pending reason
// and the API's cookie rules, checks that a member of another project sees the admin's job in
// another project only as "in use" on the heatmap, checks the login page's look and its words
// for a wrong token, the capacity page's "demand now" and its chart's width, the jobs page
// (jobsPageChecks: columns, one line per row, paging, a sort, filters by state and by user, and
// what a member of another project sees), and saves a screenshot of every page.
//
// Usage: node tests/web/dashboard_e2e.mjs [CORRAL_BINARY] [ARTIFACT_DIR]
//   defaults: build/corral, build/web-artifacts. CHROMIUM overrides /usr/bin/chromium.
// Exits 0 when every check passed, 1 otherwise (the failing check, a failure.png and the
// server's output are printed / saved).
import { mkdtemp, mkdir, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { logIn, startDev } from './dev_cluster.mjs';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const require = createRequire(path.join(repo, 'web/package.json'));
const { chromium } = require('playwright-core');

const corral = path.resolve(process.argv[2] || path.join(repo, 'build/corral'));
const artifacts = path.resolve(process.argv[3] || path.join(repo, 'build/web-artifacts'));
const webDist = path.join(repo, 'web/dist');
const kChromiumFlags = ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-dev-shm-usage'];

function check(condition, what) {
  if (!condition) throw new Error(`check failed: ${what}`);
  console.log(`ok - ${what}`);
}

// --- The jobs page (web/src/pages/jobs.js): one line per job, its columns, filters by state and
// by user kept in the URL, a sort on a header, paging forwards and back with a page size, and
// what a member of another project sees (docs/security.md, "What others can see"). Adds an
// array of 30 pending jobs (a GPU model no node has) with a long name, and a job of user joe.
async function jobsPageChecks({ browser, page, dev, api, shot, secretJob }) {
  const longName = 'page-array-with-a-rather-long-name-that-would-wrap-onto-a-second-line-in-a-narrow-cell';
  const array = await api('POST', '/api/v1/jobs', { name: longName, command: ['true'],
    resources: { gpus: 2, gpu_models: ['H100'] }, array: { indices: [...Array(30).keys()] } });
  check(array.status === 201 && array.body.ids.length === 30, `jobs: an array of 30 pending jobs (${array.body.array_id})`);
  const joe = await api('POST', '/api/v1/users', { name: 'joe' });
  check(joe.status === 201, 'user joe (a member of "default") created');
  const joeJob = await (await fetch(`${dev.url}/api/v1/jobs`, { method: 'POST',
    headers: { Authorization: `Bearer ${joe.body.token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ name: 'joe-job', command: ['true'], resources: { gpus: 1, gpu_models: ['H100'] } }) })).json();
  check(joeJob.id > 0, `joe's job ${joeJob.id} submitted`);

  const rows = () => page.locator('#jobs-table tbody tr').evaluateAll((trs) => trs.map((tr) => [...tr.cells].map((c) => c.innerText)));
  const firstId = () => page.locator('#jobs-table tbody tr').first().getAttribute('data-id');
  await page.goto(`${dev.url}/#/jobs`);
  await page.waitForSelector('#jobs-table tbody tr');
  const headers = await page.locator('#jobs-table thead th').allInnerTexts();
  check(JSON.stringify(headers.map((t) => t.replace(/[▲▼]/g, '').trim())) ===
    JSON.stringify(['id', 'name', 'user', 'project', 'state', 'GPUs', 'submitted', 'elapsed', 'ended', 'ETA']),
  `jobs: the columns ${JSON.stringify(headers)}`);
  // One line per job: every row as tall as a one-line row, the long name cut with its whole in a title.
  const heights = await page.locator('#jobs-table tbody tr').evaluateAll((trs) => trs.map((tr) => tr.getBoundingClientRect().height));
  const lineHeight = await page.evaluate(() => parseFloat(getComputedStyle(document.querySelector('#jobs-table td')).lineHeight));
  // (Two lines would be 2 line heights plus the padding and border, 8 px.)
  check(heights.length === 35 && Math.max(...heights) < 1.5 * lineHeight + 8 && Math.max(...heights) - Math.min(...heights) < 1,
    `jobs: 35 rows of one line each (heights ${Math.min(...heights)}-${Math.max(...heights)} px, line ${lineHeight} px)`);
  // Measured in one script: the page replaces its rows after each live summary, and a cell
  // found in one call may be detached (no layout, widths 0) by the next.
  const nameCell = await page.evaluate((id) => {
    const td = document.querySelector(`#jobs-table tbody tr[data-id="${id}"] td.name`);
    return td && { cut: td.scrollWidth > td.clientWidth, title: td.title };
  }, array.body.ids[0]);
  check(nameCell?.cut && nameCell.title === longName, `jobs: a long name is cut, the whole in its title (${JSON.stringify(nameCell)})`);
  await shot('14-jobs-page-1');

  // Paging: 25 per page, to page 2 and back.
  await page.selectOption('#jobs-limit', '25');
  await page.waitForFunction(() => document.querySelectorAll('#jobs-table tbody tr').length === 25);
  const page1 = await firstId();
  check(/limit=25/.test(page.url()) && (await page.locator('#jobs-prev').isDisabled()), `jobs: 25 per page, page 1 (${page.url()})`);
  await page.click('#jobs-next');
  await page.waitForFunction(() => document.getElementById('jobs-page')?.textContent === 'page 2');
  await page.waitForFunction((id) => document.querySelector('#jobs-table tbody tr')?.dataset.id !== id, page1);
  const page2 = await rows();
  // 35 jobs in all: the 4 of the main test, 30 array elements, joe's; newest (highest id) first.
  check(page2.length === 10 && Number(page2[0][0]) < Number(page1) && (await page.locator('#jobs-next').isDisabled()),
    `jobs: page 2 has the 10 oldest jobs (first ${page2[0][0]}), no next page`);
  await page.click('#jobs-prev');
  await page.waitForFunction(() => document.getElementById('jobs-page')?.textContent === 'page 1');
  await page.waitForFunction((id) => document.querySelector('#jobs-table tbody tr')?.dataset.id === id, page1);
  check(true, `jobs: back to page 1 (first job ${page1})`);

  // A sort on a header: GPUs, largest first, then smallest first.
  await page.click('#jobs-table th[data-sort="gpus"] button');
  await page.waitForFunction(() => document.querySelector('#jobs-table th.sorted')?.dataset.sort === 'gpus');
  let gpuColumn = (await rows()).map((r) => Number(r[5]));
  check(/sort=gpus/.test(page.url()) && gpuColumn[0] === 2 && gpuColumn.every((g, i) => i === 0 || g <= gpuColumn[i - 1]),
    `jobs: sorted by GPUs, largest first: ${gpuColumn.join(',')}`);
  await page.click('#jobs-table th[data-sort="gpus"] button');
  await page.waitForFunction(() => /order=asc/.test(location.hash) && document.querySelector('#jobs-table th.sorted.asc'));
  await page.waitForFunction(() => document.querySelector('#jobs-table tbody tr td:nth-child(6)')?.innerText === '1');
  gpuColumn = (await rows()).map((r) => Number(r[5]));
  check(gpuColumn.every((g, i) => i === 0 || g >= gpuColumn[i - 1]), `jobs: then smallest first: ${gpuColumn.join(',')}`);

  // Filters: by state (kept in the URL across a reload), then by user.
  await page.goto(`${dev.url}/#/jobs`);
  await page.waitForSelector('#jobs-table tbody tr');
  await page.selectOption('#jobs-state', 'running');
  await page.waitForFunction(() => /state=running/.test(location.hash) &&
    [...document.querySelectorAll('#jobs-table tbody tr')].every((tr) => tr.cells[4].innerText === 'running'));
  let running = await rows();
  check(running.length === 2 && running.every((r) => /^\d+(s|m \d\ds)$/.test(r[7]) && r[9] === ''),
    `jobs: state=running narrows to the 2 running jobs, elapsed since their start: ${JSON.stringify(running.map((r) => [r[0], r[7]]))}`);
  await page.reload();
  await page.waitForSelector('#jobs-table tbody tr');
  running = await rows();
  check((await page.locator('#jobs-state').inputValue()) === 'running' && running.length === 2,
    'jobs: the state filter is kept across a reload (in the URL)');
  await page.selectOption('#jobs-state', '');
  await page.fill('#jobs-user', 'joe');
  await page.click('#jobs-filters button[type=submit]');
  await page.waitForFunction(() => document.querySelectorAll('#jobs-table tbody tr').length === 1);
  const joeRows = await rows();
  check(joeRows[0][0] === String(joeJob.id) && joeRows[0][2] === 'joe' && joeRows[0][9] === 'unknown' && /user=joe/.test(page.url()),
    `jobs: user=joe narrows to joe's job, pending with no estimate yet: ${JSON.stringify(joeRows[0])}`);
  await shot('15-jobs-filtered');

  // What joe, a member of "default" only, sees: every job of "default" (everyone's), none of
  // project "secret", even when he asks for it.
  const joeContext = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  try {
    const joePage = await joeContext.newPage();
    await joePage.goto(`${dev.url}/login?next=/`);
    await joePage.fill('#token', joe.body.token);
    await joePage.click('button[type=submit]');
    await joePage.waitForFunction(() => document.getElementById('who')?.textContent === 'joe');
    await joePage.goto(`${dev.url}/#/jobs?limit=200`);
    await joePage.waitForSelector('#jobs-table tbody tr');
    const seen = await joePage.locator('#jobs-table tbody tr').evaluateAll((trs) => trs.map((tr) => [...tr.cells].map((c) => c.innerText)));
    check(seen.length === 34 && seen.every((r) => r[3] === 'default') && seen.some((r) => r[2] === 'admin') &&
      !seen.some((r) => r[0] === String(secretJob)), `joe's jobs page: the 34 jobs of "default" (the admin's too), not job ${secretJob} of "secret"`);
    await joePage.goto(`${dev.url}/#/jobs?project=secret`);
    await joePage.waitForSelector('#jobs-empty');
    check(!(await joePage.locator('#page').innerText()).includes('secret-job'), 'joe\'s jobs page: project=secret shows no job');
  } finally {
    await joeContext.close();
  }
}

async function main() {
  await rm(artifacts, { recursive: true, force: true });
  await mkdir(artifacts, { recursive: true });
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'corral-web-e2e-'));
  const dev = await startDev({ corral, dataDir, webDir: webDist,
    args: ['--fake-gpus', '4xA100-80GB', '--metrics-interval', '0.5', '--gpu-idle-after', '3'] });
  console.log(`corral dev at ${dev.url} (data ${dataDir}); screenshots in ${artifacts}`);
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true, args: kChromiumFlags,
  });
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const shot = (name) => page.screenshot({ path: path.join(artifacts, `${name}.png`), fullPage: true });
  const text = (sel) => page.locator(sel).first().innerText();
  let failed = false;
  try {
    // --- The API's rules for the dashboard, from outside the browser.
    const bearer = { Authorization: `Bearer ${dev.token}` };
    let res = await fetch(`${dev.url}/`, { redirect: 'manual' });
    check(res.status === 302 && res.headers.get('location') === '/login?next=/',
      `GET / without a login redirects to /login?next=/ (got ${res.status} ${res.headers.get('location')})`);
    const cookie = { Cookie: `corral_token=${dev.token}` };
    res = await fetch(`${dev.url}/api/v1/whoami`, { headers: cookie });
    check(res.status === 200 && (await res.json()).user === 'admin', 'the cookie authenticates GET /api/v1/whoami');
    res = await fetch(`${dev.url}/api/v1/tokens`, { headers: cookie });
    check(res.status === 401, `the cookie does not authenticate GET /api/v1/tokens (got ${res.status})`);
    res = await fetch(`${dev.url}/api/v1/whoami`, { headers: { Cookie: `corral_token=${dev.token}; corral_token=x` } });
    check(res.status === 401, `two corral_token cookies are refused (got ${res.status})`);
    res = await fetch(`${dev.url}/api/v1/jobs`, {
      method: 'POST', headers: { ...cookie, Origin: 'http://evil.example', 'Content-Type': 'application/json' },
      body: JSON.stringify({ command: ['true'] }) });
    check(res.status === 403, `a cross-site POST with the cookie is refused (got ${res.status})`);
    res = await fetch(`${dev.url}/api/v1/whoami`, { headers: { ...bearer, Cookie: 'corral_token=wrong' } });
    check(res.status === 200, 'the bearer token comes before the cookie');
    // The metrics reads the dashboard makes (docs/decisions.md): the cookie works; /metrics
    // and a cross-site what-if do not.
    for (const route of ['/api/v1/gpus', '/api/v1/gpus?idle=1', '/api/v1/usage?by=user,day&since=7d']) {
      res = await fetch(`${dev.url}${route}`, { headers: cookie });
      check(res.status === 200, `the cookie authenticates GET ${route} (got ${res.status})`);
    }
    res = await fetch(`${dev.url}/api/v1/jobs/999/gpus`, { headers: cookie });
    check(res.status === 404, `the cookie authenticates GET /api/v1/jobs/999/gpus: no such job, 404 (got ${res.status})`);
    res = await fetch(`${dev.url}/api/v1/jobs/999/metrics`, { headers: cookie });
    check(res.status === 404, `the cookie authenticates GET /api/v1/jobs/999/metrics: no such job, 404 (got ${res.status})`);
    res = await fetch(`${dev.url}/api/v1/jobs/999/report`, { method: 'POST', headers: { ...cookie, 'Content-Type': 'application/json' },
      body: JSON.stringify({ metrics: { loss: 1 } }) });
    check(res.status === 401, `the cookie does not authenticate POST /api/v1/jobs/999/report (got ${res.status})`);
    res = await fetch(`${dev.url}/metrics`, { headers: cookie });
    check(res.status === 401, `the cookie does not authenticate GET /metrics (got ${res.status})`);
    // 28 days, not the page's 7: the server keeps a forecast for 60 s, and the capacity page's
    // "demand now" is checked against the jobs submitted after this.
    res = await fetch(`${dev.url}/api/v1/capacity/forecast?horizon_days=28`, { headers: cookie });
    check(res.status === 200, `the cookie authenticates GET /api/v1/capacity/forecast (got ${res.status})`);
    res = await fetch(`${dev.url}/api/v1/capacity/what-if`, {
      method: 'POST', headers: { ...cookie, Origin: 'http://evil.example', 'Content-Type': 'application/json' },
      body: JSON.stringify({ since: '30d', extra_gpus: [0] }) });
    check(res.status === 403, `a cross-site what-if POST with the cookie is refused (got ${res.status})`);
    // One frame of the live stream.
    const ctrl = new AbortController();
    res = await fetch(`${dev.url}/api/v1/events/stream`, { headers: bearer, signal: ctrl.signal });
    check(res.headers.get('content-type').startsWith('text/event-stream'), 'the event stream is text/event-stream');
    const reader = res.body.getReader();
    let frame = '';
    while (!frame.includes('\n\n')) frame += new TextDecoder().decode((await reader.read()).value);
    ctrl.abort();
    const data = JSON.parse(/\ndata: (.*)\n/.exec(frame)[1]);
    check(frame.startsWith('id: 1\nevent: summary\ndata: {') && data.gpus === 4,
      `the first event is a summary with 4 GPUs: ${JSON.stringify(frame.slice(0, 80))}`);

    // --- Log in through the login page.
    await page.goto(`${dev.url}/`);
    await page.waitForURL(/\/login\?next=/);
    await shot('01-login');
    // The login page (web/src/login.html): the dashboard's look, a labelled field, and a wrong
    // token said in words under it.
    const loginLook = await page.evaluate(() => ({
      label: document.querySelector('label[for="token"]')?.textContent,
      card: getComputedStyle(document.querySelector('.login-card')).backgroundColor,
      button: getComputedStyle(document.querySelector('#login-button')).backgroundColor,
      header: getComputedStyle(document.querySelector('header')).backgroundColor,
    }));
    check(loginLook.label === 'API token' && loginLook.card === 'rgb(255, 255, 255)' &&
      loginLook.button === 'rgb(36, 99, 235)' && loginLook.header === 'rgb(29, 36, 48)',
    `login: styled like the dashboard, the field labelled: ${JSON.stringify(loginLook)}`);
    await page.fill('#token', 'not-a-token');
    await page.click('button[type=submit]');
    await page.waitForFunction(() => document.getElementById('error')?.textContent.length > 0);
    check(/token is not valid/.test(await text('#error')) && /\/login/.test(page.url()),
      `login: a wrong token is refused in words: ${JSON.stringify(await text('#error'))}`);
    await shot('01b-login-wrong-token');
    await page.fill('#token', dev.token);
    await page.click('button[type=submit]');
    await page.waitForURL(`${dev.url}/`);
    await page.waitForFunction(() => document.getElementById('who')?.textContent === 'admin (admin)');
    check(true, 'logged in through /login: the dashboard shows "admin (admin)"');

    // --- Overview: capacity, and the live stream connected.
    await page.waitForSelector('#card-gpus');
    check((await text('#card-gpus .value')) === '4', 'overview: 4 GPUs');
    // Under the title, the placement policy and its workload profile, as `corral policy` says:
    // a fresh server has learnt none yet and places as bestfit.
    await page.waitForFunction(() => document.getElementById('overview-placement')?.textContent.length > 0);
    const placement = await text('#overview-placement');
    check(/^placement: best \(no workload profile yet: places as bestfit until \d+ jobs have been submitted\)$/.test(placement),
      `overview: the placement line ${JSON.stringify(placement)}`);
    await page.waitForSelector('#live[data-mode="live"]', { timeout: 10000 });
    check(true, 'overview: the live stream (EventSource) is connected');

    // --- Submit a job through the form.
    await page.click('nav >> text=Submit');
    await page.waitForSelector('#submit-form');
    await shot('02-submit');
    await page.fill('#submit-name', 'web-e2e');
    await page.fill('#submit-command', 'echo hello-from-the-dashboard; sleep 12; echo bye-from-the-dashboard');
    await page.fill('#submit-env', 'FAKE_GPU_UTILIZATION=37');
    await page.fill('#submit-gpus', '2');
    await page.click('#submit-button');
    await page.waitForURL(/#\/jobs\/\d+$/);
    const jobId = Number(/#\/jobs\/(\d+)$/.exec(page.url())[1]);
    check(jobId > 0, `submitted job ${jobId} through the form`);

    // --- Watch it run.
    await page.waitForFunction(() => document.querySelector('#job-state')?.textContent === 'running', null, { timeout: 30000 });
    check(true, `job ${jobId}: running`);
    await page.waitForFunction(() => document.getElementById('job-logs')?.textContent.includes('hello-from-the-dashboard'), null, { timeout: 15000 });
    check(true, `job ${jobId}: live log shows its first line while it runs`);
    // Its GPUs' utilisation: a chart with points, 2 series; the task table says 37 %.
    await page.waitForFunction(() => Number(document.querySelector('#job-gpu-chart')?.dataset.points) >= 6 &&
      document.querySelector('#job-gpu-chart canvas'), null, { timeout: 15000 });
    const chart = await page.locator('#job-gpu-chart').evaluate((el) => ({ ...el.dataset }));
    check(chart.gpus === '2', `job ${jobId}: GPU chart with ${chart.points} points on ${chart.gpus} GPUs`);
    const legend = await page.locator('#job-gpu-chart .u-legend').innerText();
    check(/task 0 · dev GPU \d/.test(legend), `job ${jobId}: chart series named by task and GPU: ${JSON.stringify(legend.slice(0, 80))}`);
    // Its time ticks are clock times (uPlot takes seconds), never milliseconds.
    const ticks = (await page.locator('#job-gpu-chart .uplot').getAttribute('data-x-ticks')).split('|');
    check(ticks.length >= 2 && ticks.every((t) => /^\d\d:\d\d(:\d\d)?$/.test(t)), `job ${jobId}: GPU chart ticks are clock times: ${ticks.join(' ')}`);
    await page.waitForFunction(() => /37 %, 37 %/.test(document.querySelector('#job-tasks')?.innerText || ''), null, { timeout: 10000 });
    check(true, `job ${jobId}: the task table shows its GPUs at 37 %`);
    await shot('03-job-running');

    // --- Find it on the heatmap: two GPU cells show the job and its user.
    await page.click('nav >> text=Nodes');
    await page.waitForSelector('#heatmap .cell');
    const cells = page.locator(`#heatmap .cell[data-jobs="${jobId}"]`);
    await cells.first().waitFor({ timeout: 10000 });
    check((await cells.count()) === 2, `heatmap: job ${jobId} on 2 GPU cells`);
    check((await cells.first().innerText()).trim() === `#${jobId} admin`, 'heatmap: the cell shows the job and its user');
    check((await page.locator('#heatmap .cell').count()) === 4, 'heatmap: 4 GPU cells for the one node');
    check(/2 in use/.test(await text('#heatmap-summary')), 'heatmap: "2 in use"');
    // Coloured by utilisation: both cells read 37 %, a colour of their own (not free's), and
    // the tooltip gives the reading.
    await page.waitForFunction((id) => [...document.querySelectorAll(`#heatmap .cell[data-jobs="${id}"]`)]
      .every((c) => c.dataset.util === '37'), jobId, { timeout: 10000 });
    await cells.first().hover(); // the tooltip is written on the first pointer visit
    const looks = await page.evaluate((id) => {
      const busy = document.querySelector(`#heatmap .cell[data-jobs="${id}"]`);
      const free = document.querySelector('#heatmap .cell.free');
      return { busy: getComputedStyle(busy).backgroundColor, free: getComputedStyle(free).backgroundColor,
        cls: busy.className, title: busy.title };
    }, jobId);
    check(/\butil\b/.test(looks.cls) && looks.busy !== looks.free,
      `heatmap: the job's cells are coloured by utilisation (${looks.busy}; free ${looks.free})`);
    check(/util 37 %/.test(looks.title) && /memory .*GiB/.test(looks.title) && /\d+ W/.test(looks.title) && /°C/.test(looks.title),
      `heatmap: the tooltip has the reading: ${JSON.stringify(looks.title)}`);
    check(/37 % utilisation on average/.test(await text('#heatmap-summary')), `heatmap: ${await text('#heatmap-summary')}`);
    check(/flagged idle/.test(await text('#heatmap-legend')), 'heatmap: the legend explains free, utilisation, flagged idle');
    await shot('04-nodes-heatmap');

    // --- Back to the job: it finishes; its log has both lines, events say so.
    await cells.first().locator('a').click();
    await page.waitForURL(new RegExp(`#/jobs/${jobId}$`));
    await page.waitForFunction(() => document.querySelector('#job-state')?.textContent === 'succeeded', null, { timeout: 60000 });
    check(true, `job ${jobId}: succeeded`);
    await page.waitForFunction(() => document.getElementById('job-logs')?.textContent.includes('bye-from-the-dashboard'), null, { timeout: 15000 });
    const logs = await text('#job-logs');
    check(logs.includes('hello-from-the-dashboard') && logs.includes('bye-from-the-dashboard'), 'job logs: both lines');
    // The page writes the state before the events (job.js reads the GPUs in between): wait.
    check(await page.waitForFunction(() => /succeeded/.test(document.getElementById('job-events')?.innerText || ''), null,
      { timeout: 10000 }).then(() => true, () => false), 'job events: the transition to succeeded');
    check(Number(await page.locator('#job-gpu-chart').getAttribute('data-points')) >= 6, 'job: the GPU chart keeps its points after the job ended');
    await shot('05-job-succeeded');

    // --- An idle job: 1 % on its GPU, flagged after 3 s (corral dev --gpu-idle-after 3).
    const idleJob = await page.evaluate(async () => (await fetch('/api/v1/jobs', {
      method: 'POST', credentials: 'same-origin', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ name: 'idle-e2e', command: ['sleep 120'], shell: true, resources: { gpus: 1 },
        env: { FAKE_GPU_UTILIZATION: '1' } }) })).json());
    check(idleJob.id > jobId, `job ${idleJob.id} (1 GPU at 1 %) submitted with the cookie`);

    // --- A live update: on the overview, a job that cannot start (a GPU model no node has: a
    // size beyond every node would be refused at submit) is submitted behind the page's back;
    // the pending count changes without a reload (SSE summary).
    await page.click('nav >> text=Overview');
    await page.waitForSelector('#card-pending');
    check((await text('#card-pending .value')) === '0', 'overview: 0 pending');
    const big = await page.evaluate(async () => (await fetch('/api/v1/jobs', {
      method: 'POST', credentials: 'same-origin', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ name: 'needs-h100', command: ['true'], resources: { gpus: 1, gpu_models: ['H100'] } }) })).json());
    check(big.state === 'pending', `job ${big.id} (an H100, which no node has) submitted with the cookie: pending`);
    await page.waitForFunction(() => document.querySelector('#card-pending .value')?.textContent === '1', null, { timeout: 10000 });
    check(true, 'overview: the pending count went to 1 through the live stream, without a reload');
    await page.waitForFunction(() => document.querySelectorAll('#overview-chart canvas').length > 0);
    // "used" = Σ utilisation / 100: the idle job's GPU at 1 %, the others free at 0 %.
    await page.waitForFunction(() => document.querySelector('#card-used .value')?.textContent.startsWith('0.01 '), null, { timeout: 10000 });
    check(true, `overview: GPUs used ${await text('#card-used .value')} (the idle job's GPU at 1 %)`);
    check(/GPUs used/.test(await text('#overview-chart .u-legend')), 'overview: the chart has a "GPUs used" series');
    // Its time ticks are clock times (time_axis.js), never uPlot's own ":10".
    const overviewTicks = (await page.locator('#overview-chart .uplot').getAttribute('data-x-ticks') || '').split('|');
    check(overviewTicks.length >= 2 && overviewTicks.every((t) => /^(\d\d-\d\d )?\d\d:\d\d(:\d\d)?$/.test(t)),
      `overview: the chart's ticks are clock times: ${overviewTicks.join(' ')}`);
    await shot('06-overview');

    // --- Queue: the big job with its pending reason.
    await page.click('nav >> text=Queue');
    await page.waitForSelector('#queue-table');
    const row = page.locator('#queue-table tbody tr', { hasText: 'needs-h100' });
    const cellsText = await row.locator('td').allInnerTexts();
    check(cellsText[1] === String(big.id) && cellsText[7].length > 5, `queue: job ${big.id} with a pending reason: "${cellsText[7]}"`);
    // A model no node has: the reason names the models the cluster has, so the spelling shows.
    check(/no node has it; the nodes taking work have A100-80GB$/.test(cellsText[7]),
      'queue: the reason for a GPU model no node has names the models there are');
    await shot('07-queue');

    // --- Jobs, projects, idle GPUs, usage, capacity.
    await page.click('nav >> text=Jobs');
    await page.waitForSelector('#jobs-table');
    check((await page.locator('#jobs-table tbody tr').count()) === 3, 'jobs: the three jobs listed');
    await shot('08-jobs');
    await page.click('nav >> text=Projects');
    await page.waitForSelector('#projects-table');
    check(/default/.test(await text('#projects-table')), 'projects: the default project');
    await shot('09-projects');
    await page.click('nav >> text=Idle GPUs');
    await page.waitForSelector('#idle-count');
    check((await text('#idle-count')).startsWith('3 GPUs'), `idle: ${await text('#idle-count')}`);
    const idleRow = page.locator('#idle-flagged-table tbody tr', { hasText: `#${idleJob.id}` });
    await idleRow.waitFor({ timeout: 20000 });
    const idleCells = await idleRow.locator('td').allInnerTexts();
    check(idleCells[0] === 'dev' && idleCells[4] === 'admin' && idleCells[5] === 'default' && idleCells[6] === '1 %' &&
      /\d+ s|min/.test(idleCells[8]), `idle: job ${idleJob.id} flagged: ${JSON.stringify(idleCells)}`);
    check(/under 10 % for 3 s/.test(await text('#idle-rule')), `idle: the rule is shown: ${await text('#idle-rule')}`);
    check((await text('#idle-flagged-count')).startsWith('1 allocated GPU'), `idle: ${await text('#idle-flagged-count')}`);
    await shot('10-idle');
    await page.click('nav >> text=Nodes');
    const idleCell = page.locator(`#heatmap .cell[data-jobs="${idleJob.id}"]`);
    await idleCell.waitFor();
    check((await idleCell.getAttribute('data-idle')) === '1' && /idle-flag/.test(await idleCell.getAttribute('class')),
      `heatmap: job ${idleJob.id}'s GPU is marked idle`);
    await shot('10b-nodes-idle');

    // --- Usage: the server stores GPU time every 10 s; the page reads it again every 10 s.
    await page.click('nav >> text=Usage');
    await page.waitForSelector('#usage-form');
    await page.waitForFunction(() => {
      const row = [...document.querySelectorAll('#usage-table tbody tr')].find((tr) => tr.cells[0].innerText === 'default');
      return row && Number(row.cells[2].innerText) > 0;
    }, null, { timeout: 40000 });
    const usageCells = await page.locator('#usage-table tbody tr', { hasText: 'default' }).first().locator('td').allInnerTexts();
    const [allocH, usedH, utilPct] = [Number(usageCells[1]), Number(usageCells[2]), parseFloat(usageCells[3])];
    check(usageCells[0] === 'default' && allocH > 0 && usedH > 0 && usedH < allocH && utilPct > 0 && utilPct < 100,
      `usage by project: ${JSON.stringify(usageCells)} (allocated > used > 0)`);
    await page.waitForSelector('#usage-chart canvas');
    check(Number(await page.locator('#usage-chart').getAttribute('data-bars')) === 1, 'usage: a chart with one bar pair (the project)');
    await page.check('#usage-by-user');
    await page.check('#usage-by-day');
    await page.uncheck('#usage-by-project');
    await page.selectOption('#usage-since', '7d');
    await page.click('#usage-show');
    const today = new Date().toISOString().slice(0, 10);
    await page.locator('#usage-table tbody tr', { hasText: today }).first().waitFor({ timeout: 10000 });
    const byDay = await page.locator('#usage-table tbody tr', { hasText: today }).first().locator('td').allInnerTexts();
    check(byDay[0] === 'admin' && byDay[1] === today, `usage by user and day: ${JSON.stringify(byDay)}`);
    const csvHref = await page.locator('#usage-csv').getAttribute('href');
    check(csvHref.includes('by=user%2Cday') && csvHref.includes('since=7d') && csvHref.endsWith('format=csv'), `usage: CSV link ${csvHref}`);
    res = await page.request.get(`${dev.url}${csvHref}`);
    const csv = await res.text();
    check(res.status() === 200 && res.headers()['content-type'].startsWith('text/csv') &&
      csv.startsWith('user,day,allocated_gpu_hours,used_gpu_hours,utilization_percent,lost_gpu_hours\n') && csv.includes(`admin,${today},`),
      `usage: the CSV download with the cookie: ${JSON.stringify(csv.slice(0, 120))}`);
    await shot('11-usage');

    // --- Capacity: the forecast chart; the what-if form for admins.
    await page.click('nav >> text=Capacity');
    await page.waitForSelector('#capacity-info:not(:empty)');
    {
      await page.waitForSelector('#capacity-chart canvas');
      check(/Capacity 4 GPUs/.test(await text('#capacity-info')), `capacity: ${await text('#capacity-info')}`);
      // Submitted and not ended now: the idle job (running, 1 GPU) and the H100 job (pending,
      // 1 GPU). The page used to read the last whole hour, which holds none of this hour's jobs.
      check(/demand now 2;/.test(await text('#capacity-info')), `capacity: demand now counts the running and the pending job: ${await text('#capacity-info')}`);
      // The chart fills its card and follows the window's width (charts.js, fittedChart).
      const fit = () => page.evaluate(() => {
        const box = document.querySelector('#capacity-chart');
        return { canvas: box.querySelector('canvas').getBoundingClientRect().width, box: box.clientWidth - 16 };
      });
      const wide = await fit();
      check(Math.abs(wide.canvas - wide.box) <= 2, `capacity: the chart fills its card (${JSON.stringify(wide)})`);
      await page.setViewportSize({ width: 900, height: 900 });
      await page.waitForFunction((w) => {
        const box = document.querySelector('#capacity-chart');
        const c = box.querySelector('canvas').getBoundingClientRect().width;
        return c < w && Math.abs(c - (box.clientWidth - 16)) <= 2;
      }, wide.canvas, { timeout: 5000 });
      check(true, `capacity: the chart narrowed with the window (${JSON.stringify(await fit())})`);
      await page.setViewportSize({ width: 1280, height: 900 });
      check(Number(await page.locator('#capacity-chart').getAttribute('data-points')) > 0, 'capacity: the chart has points');
      const capacityTicks = (await page.locator('#capacity-chart .uplot').getAttribute('data-x-ticks') || '').split('|');
      check(capacityTicks.length >= 2 && capacityTicks.every((t) => /^(\d\d-\d\d)?( ?\d\d:\d\d(:\d\d)?)?$/.test(t) && t),
        `capacity: the chart's ticks are times of day or dates: ${capacityTicks.join(' ')}`);
      await page.fill('#whatif-extra', '0, 4');
      await page.click('#whatif-run');
      await page.waitForSelector('#whatif-table', { timeout: 30000 });
      const whatIfRows = await page.locator('#whatif-table tbody tr').evaluateAll((trs) => trs.map((tr) => [...tr.cells].map((c) => c.innerText)));
      // Three jobs replayed; the H100 job's model is on no node, with or without 4 more GPUs of
      // the cluster's: it never starts, and the summary says why.
      const summary = await text('#whatif-summary');
      check(whatIfRows.length === 2 && whatIfRows[0][0] === '0' && whatIfRows[1][0] === '4' && whatIfRows[1][1] === '8' &&
        whatIfRows.every((r) => r[5] === '1') && /^3 jobs since/.test(summary) && /GPU model is missing/.test(summary),
      `capacity: what-if: ${summary} ${JSON.stringify(whatIfRows)}`);
    }
    await shot('12-capacity');

    // --- What another project's member sees (docs/security.md, "What others can see"): the
    // admin runs a job in project "secret"; eve, a member of "default" only, logs in in another
    // browser and finds its GPU "in use" on the heatmap, coloured by its utilisation, with no
    // job, user or project anywhere on the page or in the tooltip. The admin sees it by id.
    const api = async (method, route, body) => {
      const r = await fetch(`${dev.url}${route}`, { method, headers: { ...bearer, 'Content-Type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body) });
      return { status: r.status, body: await r.json() };
    };
    check((await api('POST', '/api/v1/projects', { name: 'secret' })).status === 201, 'project "secret" created');
    const eve = await api('POST', '/api/v1/users', { name: 'eve' });
    check(eve.status === 201 && eve.body.token, 'user eve (a member of "default" only) created');
    const secret = await api('POST', '/api/v1/jobs', { name: 'secret-job', project: 'secret', command: ['sleep 120'],
      shell: true, resources: { gpus: 1 }, env: { FAKE_GPU_UTILIZATION: '55' } });
    check(secret.status === 201, `job ${secret.body.id} submitted in project "secret"`);
    const { context: eveContext, page: evePage } = await logIn(browser, dev, eve.body.token);
    check((await evePage.locator('#who').innerText()) === 'eve', 'eve logged in through /login');
    await evePage.click('nav >> text=Nodes');
    const hidden = evePage.locator('#heatmap .cell[data-in-use="1"]');
    await hidden.first().waitFor({ timeout: 20000 });
    await evePage.waitForFunction(() => document.querySelector('#heatmap .cell[data-in-use="1"]')?.dataset.util === '55', null, { timeout: 10000 });
    await hidden.first().hover();
    const seen = await hidden.first().evaluate((el) => ({ text: el.innerText.trim(), jobs: el.dataset.jobs, links: el.querySelectorAll('a').length,
      cls: el.className, title: el.title }));
    check(seen.text === 'in use' && seen.jobs === '' && seen.links === 0 && /\butil u11\b/.test(seen.cls),
      `eve's heatmap: the secret job's GPU is "in use", coloured at 55 %: ${JSON.stringify(seen)}`);
    check(/in use by another project/.test(seen.title) && /util 55 %/.test(seen.title),
      `eve's heatmap: the tooltip says "in use" and gives the reading: ${JSON.stringify(seen.title)}`);
    const evePageText = await evePage.locator('#heatmap').innerText();
    check(!evePageText.includes(`#${secret.body.id}`) && !(await evePage.content()).includes('secret'),
      'eve\'s heatmap names neither the secret job nor its project');
    await evePage.screenshot({ path: path.join(artifacts, '13-nodes-another-project.png'), fullPage: true });
    await eveContext.close();
    await page.click('nav >> text=Nodes');
    // The heatmap is redrawn on every live event: wait for the cell's text rather than reading it
    // once, and say what was there if it never came.
    const adminCell = `#heatmap .cell[data-jobs="${secret.body.id}"]`;
    const adminSees = await page.waitForFunction(([sel, want]) => {
      const el = document.querySelector(sel);
      return el && el.innerText.trim() === want;
    }, [adminCell, `#${secret.body.id} admin`], { timeout: 10000 }).then(() => true, () => false);
    check(adminSees, `the admin's heatmap shows the secret job by id: ${JSON.stringify(
      await page.locator(adminCell).evaluateAll((els) => els.map((el) => el.innerText)))}`);

    await jobsPageChecks({ browser, page, dev, api, shot, secretJob: secret.body.id });
    // --- The submit form, the projects' fair-share words, a job's reported metrics and the
    // pages as another project's member (issue 19: submit, projects, job).
    await page.click('nav >> text=Submit');
    await page.waitForSelector('#submit-form');
    const hostEnv = await page.locator('#submit-environment option', { hasText: /^host@\d+ — runs on 1 of 1 node$/ }).getAttribute('value');
    check(/^host@\d+$/.test(hostEnv), `submit: the environment picker offers ${hostEnv}, "runs on 1 of 1 node"`);
    check(await page.locator('#submit-environment option', { hasText: 'cuda-base@' }).isDisabled(),
      'submit: an asset that runs on no node here is offered disabled');
    // Errors name the field: the form's own (array) and the server's (a share of several GPUs).
    await page.fill('#submit-command', 'true');
    await page.fill('#submit-array', '5-1');
    await page.click('#submit-button');
    await page.waitForFunction(() => /^array: "5-1" is an empty range/.test(document.getElementById('submit-error').textContent));
    check(true, `submit: ${await text('#submit-error')}`);
    await page.fill('#submit-array', '');
    await page.fill('#submit-gpus', '2');
    await page.fill('#submit-gpu-milli', '500');
    await page.click('#submit-button');
    await page.waitForFunction(() => /field 'resources.gpu_milli'/.test(document.getElementById('submit-error').textContent));
    check(true, `submit: the server's error names the field: ${await text('#submit-error')}`);
    // A batch script uploaded as a file, an environment, 1 node, an array of 2 (one at a time),
    // a time limit: its #SBATCH lines give the GPU; --mail-type is ignored, with a warning.
    await page.fill('#submit-command', '');
    await page.fill('#submit-gpus', '');
    await page.fill('#submit-gpu-milli', '');
    await page.selectOption('#submit-environment', hostEnv);
    await page.fill('#submit-nodes', '1');
    await page.fill('#submit-array', '0-1%1');
    await page.fill('#submit-time-limit', '0:05:00');
    await page.setInputFiles('#submit-script-file', { name: 'train.sbatch', mimeType: 'text/plain',
      buffer: Buffer.from('#!/bin/bash\n#SBATCH --gres=gpu:1\n#SBATCH --mail-type=END\necho "element $SLURM_ARRAY_TASK_ID of $1"\n') });
    await page.waitForFunction(() => document.getElementById('submit-script').value.includes('#SBATCH --gres=gpu:1'));
    await page.fill('#submit-script-args', 'e2e');
    await page.click('#submit-button');
    await page.waitForSelector('#submit-warnings li');
    const warned = await text('#submit-warnings');
    check(/#SBATCH --mail-type: ignored/.test(warned), `submit: the batch script's ignored option is a warning: ${JSON.stringify(warned)}`);
    const created = await text('#submit-created');
    const arrayIds = /jobs (\d+)–(\d+) \(2 jobs\)/.exec(created)?.slice(1).map(Number);
    check(arrayIds?.length === 2, `submit: ${created}`);
    const element = (await api('GET', `/api/v1/jobs/${arrayIds[0]}`)).body;
    check(element.name === 'train.sbatch' && element.spec.environment === hostEnv && element.spec.tasks === 1 &&
      element.spec.resources.gpus === 1 && element.spec.time_limit_s === 300 && element.array_max_running === 1 &&
      element.spec.script?.args?.[0] === 'e2e',
    `submit: job ${arrayIds[0]} is the script's, with the form's environment, nodes, array and time limit`);
    await shot('14-submit-batch');

    // Projects: "vision" has used nothing: under its share, next in line; "default" (every job
    // above, one running) is over its share. The raw usage is only in the tooltip.
    check((await api('POST', '/api/v1/projects', { name: 'vision' })).status === 201, 'project "vision" created');
    await page.click('nav >> text=Projects');
    const standing = async (name) => page.locator('#projects-table tbody tr', { hasText: name }).locator('.standing').first();
    await page.waitForFunction(() => /vision/.test(document.getElementById('projects-table')?.innerText));
    const visionWords = await (await standing('vision')).innerText();
    const defaultWords = await (await standing('default')).innerText();
    const amount = '([\\d.]+ GPU-(hours|minutes?)|less than a GPU-minute)';
    check(new RegExp(`^under its share by ${amount}: next in line$`).test(visionWords), `projects: vision is "${visionWords}"`);
    check(new RegExp(`^over its share by ${amount}$`).test(defaultWords), `projects: default is "${defaultWords}"`);
    check(/^fair-share usage [\d.]+ share-seconds/.test(await (await standing('default')).getAttribute('title')),
      'projects: the raw fair-share usage is in the tooltip');
    check((await page.locator('#projects-table .standing', { hasText: 'next in line' }).count()) === 1, 'projects: one project is next in line');
    await shot('15-projects-standing');

    // A job that reported nothing says so.
    await page.goto(`${dev.url}/#/jobs/${jobId}`);
    await page.waitForSelector('#job-metrics p');
    check(/^No metrics reported \(see docs\/in-job\.md\)\.$/.test(await text('#job-metrics')), `job ${jobId}: "No metrics reported (see docs/in-job.md)."`);
    // A job that reports metrics and a checkpoint from inside (the in-job channel: `corral job
    // report` with the job's token), then waits.
    const reporter = await api('POST', '/api/v1/jobs', { name: 'reporter', command: [
      `C=${corral}; $C job report loss=0.9 step=1 phase=warmup && sleep 1 && $C job report loss=0.5 step=2 && ` +
      `$C job checkpoint /tmp/corral-e2e-ckpt/step-2 --step 2 && echo reported && sleep 120`], shell: true });
    check(reporter.status === 201, `job ${reporter.body.id} (reports metrics) submitted`);
    await page.goto(`${dev.url}/#/jobs/${reporter.body.id}`);
    await page.waitForFunction(() => /step-2/.test(document.getElementById('job-checkpoint')?.innerText || ''), null, { timeout: 30000 });
    await page.waitForFunction(() => Number(document.querySelector('#job-metrics-chart')?.dataset.points) >= 2, null, { timeout: 10000 });
    const latest = Object.fromEntries(await page.locator('#job-metrics-table tbody tr').evaluateAll(
      (trs) => trs.map((tr) => [tr.cells[0].innerText, tr.cells[1].innerText])));
    check(latest.loss === '0.5' && latest.step === '2' && latest.phase === 'warmup',
      `job ${reporter.body.id}: the latest metrics: ${JSON.stringify(latest)}`);
    const metricChart = await page.locator('#job-metrics-chart').evaluate((el) => ({ ...el.dataset, legend: el.innerText,
      canvas: el.querySelector('canvas').getBoundingClientRect().width, box: el.clientWidth - parseFloat(getComputedStyle(el).paddingLeft) -
        parseFloat(getComputedStyle(el).paddingRight) }));
    check(Math.abs(metricChart.canvas - metricChart.box) <= 2,
      `job ${reporter.body.id}: the metrics chart fills its card (${metricChart.canvas} of ${metricChart.box} px)`);
    check(metricChart.series === '2' && /loss/.test(metricChart.legend) && /step/.test(metricChart.legend),
      `job ${reporter.body.id}: a chart of its numeric metrics: ${JSON.stringify(metricChart.series)} series, ${metricChart.points} points`);
    const ckpt = await page.locator('#job-checkpoint tbody td').allInnerTexts();
    check(ckpt[0] === '/tmp/corral-e2e-ckpt/step-2' && ckpt[1] === '2' && /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/.test(ckpt[2]),
      `job ${reporter.body.id}: the last checkpoint: ${JSON.stringify(ckpt)}`);
    await shot('16-job-metrics');

    // What eve (a member of "default" only) sees on these pages: the secret job's page says only
    // that there is no such job she may see; her projects and submit form list "default" alone;
    // the admin's job in "default" she sees with its metrics.
    const { context: eve2, page: evePage2 } = await logIn(browser, dev, eve.body.token);
    await evePage2.goto(`${dev.url}/#/jobs/${secret.body.id}`);
    await evePage2.waitForSelector('#job-missing');
    const eveJobText = await evePage2.locator('#page').innerText();
    check(!/secret|sleep 120|admin/.test(eveJobText) && (await evePage2.locator('#job-details').count()) === 0,
      `eve: the secret job's page says only ${JSON.stringify(eveJobText)}`);
    await evePage2.goto(`${dev.url}/#/projects`);
    await evePage2.waitForSelector('#projects-table');
    const eveProjects = await evePage2.locator('#projects-table tbody tr td:first-child').allInnerTexts();
    check(eveProjects.join(',') === 'default', `eve: the projects page lists ${JSON.stringify(eveProjects)}`);
    // Her standing is the cluster's (the server's, among every project), not among hers alone.
    const eveStanding = await evePage2.locator('#projects-table .standing').first().innerText();
    check(/^over its share by /.test(eveStanding), `eve: "default" stands among all the cluster's projects: "${eveStanding}"`);
    await evePage2.goto(`${dev.url}/#/submit`);
    await evePage2.waitForSelector('#submit-form');
    const eveSubmitProjects = await evePage2.locator('#submit-project option').allInnerTexts();
    check(eveSubmitProjects.join(',') === 'default', `eve: the submit form offers the projects ${JSON.stringify(eveSubmitProjects)}`);
    await evePage2.goto(`${dev.url}/#/jobs/${reporter.body.id}`);
    await evePage2.waitForSelector('#job-metrics-table');
    check(/loss/.test(await evePage2.locator('#job-metrics-table').innerText()),
      `eve: job ${reporter.body.id} in her project "default" shows its metrics`);
    check(!(await evePage2.content()).includes('secret'), 'eve: no page she opened names the secret project');
    await evePage2.screenshot({ path: path.join(artifacts, '17-job-another-project.png') });
    await eve2.close();

    // --- Log out: the dashboard is gone until the next login.
    await page.click('#logout');
    await page.waitForURL(/\/login\?next=/);
    res = await page.request.get(`${dev.url}/api/v1/whoami`);
    check(res.status() === 401, 'after logging out the API refuses the browser');
  } catch (e) {
    failed = true;
    console.error(`FAILED: ${e.stack || e}`);
    await shot('failure').catch(() => {});
    console.error(`--- corral dev output ---\n${dev.output().slice(-4000)}`);
  } finally {
    await browser.close();
    await dev.stop();
    await rm(dataDir, { recursive: true, force: true }).catch(() => {});
  }
  console.log(failed ? 'dashboard e2e: FAILED' : `dashboard e2e: all checks passed; screenshots in ${artifacts}`);
  process.exit(failed ? 1 : 0);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
