// How long the dashboard's nodes × GPUs heatmap takes to render for a large cluster
// (docs/benchmarks.md). Serves the built web/dist and fake API answers through Playwright's
// route interception (no corral server): NODES nodes × GPUS GPUs (default 1,000 × 8), about
// half the GPUs allocated to seeded fake jobs, every GPU with a reading in /api/v1/gpus
// (allocated ones at a seeded utilisation, one in ten of those flagged idle), so that every
// allocated cell is coloured by utilisation. Debian's headless Chromium opens the heatmap
// RUNS times and prints, per run: `build` (the page's renderHeatmap: DOM built and inserted,
// data-render-ms) and `shown` (from the route change to the first frame painted after the
// render: fetch of /api/v1/nodes and /api/v1/gpus + JSON parse + render + style/layout/paint),
// then medians.
//
// Usage: node bench/web_render.mjs [NODES] [GPUS] [RUNS]   (make web first)
//   BENCH_NO_METRICS=1: /api/v1/gpus answers 404 (allocation colours only), for comparison.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(path.join(repo, 'web/package.json'));
const { chromium } = require('playwright-core');

const nodes = Number(process.argv[2] || 1000);
const gpusPerNode = Number(process.argv[3] || 8);
const runs = Number(process.argv[4] || 7);
const origin = 'http://corral.bench';
const dist = path.join(repo, 'web/dist');

// A seeded generator (mulberry32), so that every run draws the same cluster.
function rng(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const gpuRows = [];

function fakeNodes() {
  const random = rng(42);
  const users = ['alice', 'bob', 'carol', 'dave', 'erin'];
  let job = 1;
  return Array.from({ length: nodes }, (_, n) => {
    const name = `gpu-node-${String(n).padStart(4, '0')}`;
    const free = [];
    const tasks = [];
    for (let g = 0; g < gpusPerNode; g++) {
      const r = random();
      const reading = { node: name, index: g, model: 'A100-80GB', uuid: `GPU-${n}-${g}`, sampled_at: 1764770000,
        memory_utilization_percent: 0, memory_used_mib: 0, power_w: 60, temperature_c: 30, processes: 0, foreign_processes: 0 };
      if (r < 0.45) {
        free.push(1000); tasks.push([]);
        gpuRows.push({ ...reading, utilization_percent: 0, holders: [], idle: false });
        continue;
      }
      const milli = r < 0.55 ? 500 : 1000;
      free.push(1000 - milli);
      const user = users[Math.floor(random() * users.length)];
      tasks.push([{ job, task: 0, user, project: `team-${user}`, milli }]);
      const idle = random() < 0.1;
      const util = idle ? 2 : Math.floor(random() * 101);
      gpuRows.push({ ...reading, utilization_percent: util, memory_used_mib: 30000, power_w: 60 + 3 * util,
        temperature_c: 30 + Math.floor(util / 3), processes: 1,
        holders: [{ job, user, project: `team-${user}`, share: milli / 1000, session: false }],
        idle, ...(util < 10 ? { idle_for_s: idle ? 3600 : 60 } : {}) });
      job++;
    }
    return {
      name, state: n % 97 === 0 ? 'cordoned' : 'ready',
      gpu_model: 'A100-80GB', gpus: gpusPerNode, gpu_free_milli: free, gpu_tasks: tasks,
      cpu_milli: 128000, memory_mib: 1024 * 1024, labels: {}, runtimes: ['process'],
    };
  });
}

const nodesJson = JSON.stringify(fakeNodes());
const summary = JSON.stringify({ time: Math.floor(Date.now() / 1000), nodes, nodes_ready: nodes,
  gpus: nodes * gpusPerNode, gpus_allocated: nodes * gpusPerNode * 0.5, jobs_pending: 12,
  jobs_starting: 0, jobs_running: 3000 });
const api = {
  '/api/v1/whoami': JSON.stringify({ user: 'admin', admin: true, projects: ['default'] }),
  '/api/v1/summary': summary,
  '/api/v1/nodes': nodesJson,
  // BENCH_NO_METRICS=1: a server without the metrics API (allocation colours only), to compare.
  ...(process.env.BENCH_NO_METRICS ? {} : { '/api/v1/gpus': JSON.stringify({ idle_threshold_percent: 10, idle_after_s: 1800, gpus: gpuRows }) }),
  '/api/v1/queue': '[]',
};

const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.map': 'application/json' };

async function main() {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--no-first-run', '--disable-dev-shm-usage'],
  });
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  await page.route(`${origin}/**`, async (route) => {
    const url = new URL(route.request().url());
    if (url.pathname === '/api/v1/events/stream') {
      // One summary, then the stream ends (EventSource reconnects; the page stays live).
      return route.fulfill({ status: 200, contentType: 'text/event-stream', body: `id: 1\nevent: summary\ndata: ${summary}\n\n` });
    }
    if (api[url.pathname]) return route.fulfill({ status: 200, contentType: 'application/json', body: api[url.pathname] });
    const file = url.pathname === '/' ? '/index.html' : url.pathname;
    try {
      const body = await readFile(path.join(dist, path.normalize(file)));
      return route.fulfill({ status: 200, contentType: types[path.extname(file)] || 'application/octet-stream', body });
    } catch {
      return route.fulfill({ status: 404, body: 'not found' });
    }
  });
  await page.goto(`${origin}/#/queue`);
  await page.waitForSelector('#queue');

  const results = [];
  for (let i = 0; i < runs; i++) {
    const r = await page.evaluate(async () => {
      const t0 = performance.now();
      location.hash = '#/nodes';
      while (!document.querySelector('#heatmap[data-render-ms]')) await new Promise((res) => setTimeout(res, 1));
      // The first frame after the render: style, layout and paint of the new rows are done.
      await new Promise((res) => requestAnimationFrame(() => setTimeout(res, 0)));
      const shown = performance.now() - t0;
      const build = Number(document.querySelector('#heatmap').dataset.renderMs);
      const cells = document.querySelectorAll('#heatmap .cell').length;
      const coloured = document.querySelectorAll('#heatmap .cell.util').length;
      location.hash = '#/queue';
      while (!document.querySelector('#queue')) await new Promise((res) => setTimeout(res, 1));
      return { build, shown, cells, coloured };
    });
    if (r.cells !== nodes * gpusPerNode) throw new Error(`expected ${nodes * gpusPerNode} cells, got ${r.cells}`);
    const allocated = process.env.BENCH_NO_METRICS ? 0 : gpuRows.filter((g) => g.holders.length).length;
    if (r.coloured !== allocated) throw new Error(`expected ${allocated} cells coloured by utilisation, got ${r.coloured}`);
    results.push(r);
    console.log(`run ${i + 1}: build ${r.build.toFixed(1)} ms, shown ${r.shown.toFixed(1)} ms (${r.cells} cells, ${r.coloured} by utilisation)`);
  }
  await browser.close();
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log(`heatmap ${nodes} nodes x ${gpusPerNode} GPUs (${nodes * gpusPerNode} cells), ${runs} runs: ` +
    `median build ${median(results.map((r) => r.build)).toFixed(1)} ms, ` +
    `median shown ${median(results.map((r) => r.shown)).toFixed(1)} ms ` +
    `(${os.cpus().length} cores, ${os.cpus()[0].model.trim()})`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
