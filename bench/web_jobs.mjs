// The jobs page's first paint with 10,000 jobs in the store (docs/benchmarks.md): a real
// `corral dev` (tests/web/dev_cluster.mjs) with the built web/dist, filled through the API with
// JOBS jobs (default 10,000) as arrays of at most 2,000 elements (one POST and one store
// transaction each, posted in parallel), every element asking a GPU model no node has so that
// nothing runs; 60 % of the arrays are then cancelled (POST /api/v1/arrays/A/cancel, one commit
// each), so the store holds ended and pending jobs. Debian's headless Chromium, logged in by
// cookie, then opens the page RUNS times in a fresh tab each (the bundle from the HTTP cache
// after the first) and prints, per run and view: `paint` (from navigation start to the first
// frame painted after the table is in the page: index.html, the bundle, /api/v1/whoami, the
// listing, the render) and `listing` (the GET /api/v1/jobs request as the browser timed it).
// Views: the default (newest first, 50 a page) and a filtered, sorted one (pending, by GPUs).
//
// Usage: node bench/web_jobs.mjs [CORRAL_BINARY] [JOBS] [RUNS]   (make web and the build first)
import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startDev } from '../tests/web/dev_cluster.mjs';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(path.join(repo, 'web/package.json'));
const { chromium } = require('playwright-core');

const corral = path.resolve(process.argv[2] || path.join(repo, 'build/corral'));
const jobs = Number(process.argv[3] || 10000);
const runs = Number(process.argv[4] || 7);
const kArrayElements = 2000;
const views = [['newest first', '#/jobs'], ['pending by GPUs', '#/jobs?state=pending&sort=gpus']];

async function fill(dev) {
  const headers = { Authorization: `Bearer ${dev.token}`, 'Content-Type': 'application/json' };
  const post = async (route, body) => {
    const res = await fetch(`${dev.url}${route}`, { method: 'POST', headers, body: JSON.stringify(body) });
    if (!res.ok) throw new Error(`POST ${route}: ${res.status} ${await res.text()}`);
    return res.json();
  };
  const t0 = Date.now();
  const sizes = [];
  for (let left = jobs; left > 0; left -= kArrayElements) sizes.push(Math.min(left, kArrayElements));
  const arrays = await Promise.all(sizes.map((n, k) => post('/api/v1/jobs', {
    name: `bench-${['train', 'eval', 'sweep', 'prep', 'tune'][k % 5]}-${k}`, command: ['true'],
    resources: { gpus: 1 + (k % 4), gpu_models: ['H100'] }, array: { indices: [...Array(n).keys()] },
  })));
  const cancelled = arrays.slice(0, Math.round(arrays.length * 0.6));
  await Promise.all(cancelled.map((a) => post(`/api/v1/arrays/${a.array_id}/cancel`, {})));
  console.log(`filled: ${jobs} jobs in ${arrays.length} arrays, ${cancelled.length} of them cancelled, in ${Date.now() - t0} ms`);
}

async function main() {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'corral-web-jobs-bench-'));
  const dev = await startDev({ corral, dataDir, webDir: path.join(repo, 'web/dist'),
    args: ['--fake-gpus', '8xA100-80GB', '--metrics-interval', '0'] });
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--no-first-run', '--disable-dev-shm-usage'],
  });
  try {
    await fill(dev);
    const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    await context.addCookies([{ name: 'corral_token', value: dev.token, url: dev.url }]);
    const results = new Map(views.map(([name]) => [name, []]));
    for (let i = 0; i < runs; i++) {
      for (const [name, hash] of views) {
        const page = await context.newPage();
        await page.goto(`${dev.url}/${hash}`, { waitUntil: 'commit' });
        const r = await page.evaluate(async () => {
          while (!document.querySelector('#jobs-table tbody tr')) await new Promise((res) => setTimeout(res, 1));
          // The first frame after the table is in the page: style, layout and paint are done.
          await new Promise((res) => requestAnimationFrame(() => setTimeout(res, 0)));
          const paint = performance.now();
          const resources = performance.getEntriesByType('resource');
          const listing = resources.find((e) => e.name.includes('/api/v1/jobs?'));
          const script = resources.find((e) => e.name.endsWith('.js'));
          return { paint, listing: listing ? listing.duration : NaN, rows: document.querySelectorAll('#jobs-table tbody tr').length,
            // When the bundle arrived and the listing was asked: where the rest of the time went.
            script: script ? script.responseEnd : NaN, asked: listing ? listing.startTime : NaN };
        });
        await page.close();
        if (r.rows !== 50) throw new Error(`${name}: expected 50 rows, got ${r.rows}`);
        results.get(name).push(r);
        console.log(`run ${i + 1} ${name}: paint ${r.paint.toFixed(1)} ms, listing ${r.listing.toFixed(1)} ms ` +
          `(bundle loaded at ${r.script.toFixed(1)} ms, listing asked at ${r.asked.toFixed(1)} ms)`);
      }
    }
    const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    for (const [name, rs] of results) {
      console.log(`jobs page, ${jobs} jobs, ${name}, ${runs} runs: median first paint ${median(rs.map((r) => r.paint)).toFixed(1)} ms ` +
        `(max ${Math.max(...rs.map((r) => r.paint)).toFixed(1)}), median listing ${median(rs.map((r) => r.listing)).toFixed(1)} ms ` +
        `(${os.cpus().length} cores, ${os.cpus()[0].model.trim()})`);
    }
  } finally {
    await browser.close();
    // Nothing runs (no node has the model): stop the server without cancelling 10,000 jobs.
    dev.proc.kill('SIGTERM');
    await new Promise((r) => (dev.proc.exitCode !== null ? r() : dev.proc.on('exit', r)));
    await rm(dataDir, { recursive: true, force: true }).catch(() => {});
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
