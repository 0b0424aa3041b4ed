// Screenshots of every dashboard page at 1,000 jobs and 50 nodes (docs/dashboard.md,
// "Screenshots"): a real `corral dev` (8 fake A100s) with 49 more fake-GPU agents joined (A100s,
// H100s and L40Ss in 5 racks), 5 projects and 4 users, and 1,000 jobs: finished and failed ones
// first, then running ones at a utilisation of their own (a few idle, flagged after 20 s),
// some reporting metrics and a checkpoint through `corral job report` / `corral job checkpoint`
// from inside the job (the in-job channel), then pending ones with their
// reasons (too big for what is free, a GPU model no node has, a dependency, a project limit).
// Then headless Chromium logs in and shoots each page at 1280x900 (the viewport, not the full
// page); pngquant, when installed, makes each a 256-colour PNG.
//
// Usage: node tests/web/dashboard_screenshots.mjs [CORRAL_BINARY] [OUT_DIR]
//   defaults: build/corral, docs/screenshots (`make screenshots`). CHROMIUM overrides
//   /usr/bin/chromium. Seeded: the same jobs every run. About 2 minutes.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtemp, mkdir, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { joinAgents, logIn, startDev } from './dev_cluster.mjs';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const require = createRequire(path.join(repo, 'web/package.json'));
const { chromium } = require('playwright-core');

const corral = path.resolve(process.argv[2] || path.join(repo, 'build/corral'));
const outDir = path.resolve(process.argv[3] || path.join(repo, 'docs/screenshots'));
const kChromiumFlags = ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-dev-shm-usage'];
const kJobs = { succeeded: 560, failed: 90, running: 250 }; // the rest (to 1,000) pending
const kReporting = 12; // running jobs that report metrics (through the in-job channel)

// A small seeded generator (mulberry32), so that every run submits the same jobs.
function rng(seed) {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(what, probe, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out (${timeoutMs / 1000} s) waiting for ${what}`);
    await sleep(250);
  }
}

async function main() {
  await mkdir(outDir, { recursive: true });
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'corral-web-shots-'));
  const dev = await startDev({ corral, dataDir, webDir: path.join(repo, 'web/dist'),
    args: ['--fake-gpus', '8xA100-80GB', '--metrics-interval', '2', '--gpu-idle-after', '20' ] });
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true, args: kChromiumFlags,
  });
  try {
    const api = async (method, route, body, token = dev.token) => {
      const r = await fetch(`${dev.url}${route}`, { method, headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body) });
      const text = await r.text();
      if (!r.ok) throw new Error(`${method} ${route}: ${r.status} ${text}`);
      return text ? JSON.parse(text) : null;
    };
    // 49 agents: 29 with 8 A100s, 10 with 8 H100s, 10 with 4 L40Ss, 10 to a rack.
    const agents = Array.from({ length: 49 }, (_, i) => ({
      name: `gpu-${String(i + 1).padStart(2, '0')}`,
      gpus: i < 29 ? '8xA100-80GB' : i < 39 ? '8xH100-80GB' : '4xL40S',
      labels: [`rack=r${Math.floor(i / 10) + 1}`],
    }));
    await joinAgents(dev, agents, { args: ['--metrics-interval', '2'], timeoutMs: 120000 });
    console.log(`50 nodes ready at ${dev.url}`);

    // Projects, users and their tokens.
    const projects = ['vision', 'nlp', 'speech', 'robotics'];
    for (const p of projects) await api('POST', '/api/v1/projects', { name: p });
    await api('PUT', '/api/v1/projects/vision/sharing', { gpus: 96, weight: 2 });
    await api('PUT', '/api/v1/projects/nlp/sharing', { gpus: 64 });
    await api('PUT', '/api/v1/projects/robotics/sharing', { limit_gpus: 16 });
    const people = { alice: ['vision'], bob: ['nlp'], carol: ['speech', 'vision'], dave: ['robotics'] };
    const tokens = {};
    for (const [name, member] of Object.entries(people)) tokens[name] = (await api('POST', '/api/v1/users', { name, projects: member })).token;
    // Who submits: dave (robotics, limited to 16 GPUs) seldom but for the pending phase.
    const who = ['alice', 'alice', 'alice', 'alice', 'alice', 'alice', 'alice', 'bob', 'bob', 'bob', 'bob', 'bob', 'bob',
      'carol', 'carol', 'carol', 'carol', 'carol', 'carol', 'dave'];

    const random = rng(19);
    const pick = (list) => list[Math.floor(random() * list.length)];
    const names = ['resnet50', 'vit-b16', 'llama-ft', 'whisper-small', 'bert-base', 'ppo-arm', 'diffusion', 'gpt2-pretrain',
      'sweep-lr', 'eval-mmlu', 'detr', 'wav2vec2'];
    let submitted = 0;
    const submit = async (spec) => {
      const user = pick(who);
      const project = pick(people[user]);
      submitted += 1;
      return api('POST', '/api/v1/jobs', { name: `${pick(names)}-${submitted}`, project, ...spec }, tokens[user]);
    };
    const inBatches = async (n, make) => {
      const out = [];
      for (let i = 0; i < n; i += 16) {
        out.push(...await Promise.all(Array.from({ length: Math.min(16, n - i) }, () => make())));
      }
      return out;
    };

    // Finished and failed jobs, run to their end first.
    await inBatches(kJobs.succeeded, () => submit({ command: ['echo done'], shell: true, resources: { gpus: pick([0, 1, 1, 2]) } }));
    await inBatches(kJobs.failed, () => submit({ command: ['echo "CUDA error: out of memory" >&2; exit 1'], shell: true, resources: { gpus: 1 } }));
    await waitFor('the finished jobs to end', async () => (await api('GET', '/api/v1/summary')).jobs_running +
      (await api('GET', '/api/v1/summary')).jobs_pending + (await api('GET', '/api/v1/summary')).jobs_starting === 0, 180000);
    console.log(`${submitted} jobs ended`);

    // Running jobs, each at a utilisation of its own (a few near 0: idle); some report metrics.
    const reporter = () => `C=${corral}; i=0; while [ $i -lt 400 ]; do i=$((i+1)); ` +
      `$C job report step=$((i*50)) loss=$(awk "BEGIN{print 2.5*exp(-$i/40)+0.1+0.02*sin($i)}") lr=0.0003 phase=train >/dev/null; ` +
      `[ $((i % 10)) -eq 0 ] && $C job checkpoint "$CORRAL_CHECKPOINT_DIR/step-$((i*50)).pt" --step $((i*50)) >/dev/null; sleep 1; done; sleep 3600`;
    let reporting = 0;
    const reporters = [];
    await inBatches(kJobs.running, async () => {
      const gpus = pick([1, 1, 1, 1, 1, 1, 2, 2, 4]);
      const util = random() < 0.06 ? Math.floor(random() * 4) : 30 + Math.floor(random() * 70);
      const model = random() < 0.15 ? { gpu_models: ['H100-80GB'] } : {};
      const reports = reporting < kReporting && gpus <= 2;
      if (reports) reporting += 1;
      const job = await submit({ command: [reports ? reporter() : 'sleep 3600'], shell: true, resources: { gpus, ...model },
        env: { FAKE_GPU_UTILIZATION: String(util) }, time_limit_s: 4 * 3600 });
      if (reports) reporters.push(job.id);
      return job;
    });
    // Pending: what cannot start now, for its reasons.
    const anyRunning = await api('GET', '/api/v1/jobs?all=1&state=running&limit=1000');
    for (let i = 0; submitted < 1000; i += 1) {
      const kind = i % 5;
      if (kind === 0) await submit({ command: ['train.py', '--epochs', '90'], tasks: 4, launcher: 'torchrun', resources: { gpus: 8 } });
      else if (kind === 1) await submit({ command: ['python train.py'], shell: true, resources: { gpus: 8, gpu_models: ['H100-80GB'] } });
      else if (kind === 2) await submit({ command: ['python eval.py'], shell: true, resources: { gpus: 1, gpu_models: ['B200'] } });
      // A dependency may name only jobs the submitter sees: the admin's.
      else if (kind === 3 && anyRunning.length) {
        await api('POST', '/api/v1/jobs', { name: `eval-after-${++submitted}`, command: ['python eval.py'], shell: true,
          resources: { gpus: 1 }, dependency: `afterok:${pick(anyRunning).id}` });
      } else {
        await api('POST', '/api/v1/jobs', { name: `ppo-arm-${++submitted}`, project: 'robotics', command: ['python rl.py'], shell: true,
          resources: { gpus: 8 } }, tokens.dave);
      }
    }
    await waitFor('the jobs that can start to run', async () => (await api('GET', '/api/v1/summary')).jobs_starting === 0, 180000);
    const summary = await api('GET', '/api/v1/summary');
    console.log(`1,000 jobs: ${JSON.stringify(summary)}; reporting metrics: ${reporting}`);
    // Readings on every GPU, the idle ones flagged, the usage stored (every 10 s).
    await waitFor('idle GPUs flagged', async () => ((await api('GET', '/api/v1/gpus?idle=1')).gpus || []).length > 0, 90000);

    // --- The pages.
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const shots = [];
    const shot = async (name) => {
      const file = path.join(outDir, `${name}.png`);
      await page.screenshot({ path: file });
      shots.push(file);
      console.log(`shot ${name}`);
    };
    await page.goto(`${dev.url}/`);
    await page.waitForURL(/\/login\?next=/);
    await shot('login');
    await page.fill('#token', dev.token);
    await page.click('button[type=submit]');
    await page.waitForSelector('#card-gpus');
    await page.waitForFunction(() => document.querySelectorAll('#overview-chart canvas').length > 0);
    await sleep(12000); // the overview's chart is sampled by the browser: a few live summaries
    await shot('overview');
    const go = async (hash, selector) => {
      await page.goto(`${dev.url}/#/${hash}`);
      await page.waitForSelector(selector, { timeout: 30000 });
      await sleep(1500); // charts and tables settle after their first reads
    };
    const jobId = reporters[0];
    // [screenshot, route, what to wait for]
    const pages = [['nodes', 'nodes', '#heatmap .cell'], ['queue', 'queue', '#queue-table tbody tr'],
      ['jobs', 'jobs', '#jobs-table tbody tr'],
      ['job', `jobs/${jobId}`, '#job-metrics-chart canvas'],
      ['submit', 'submit', '#submit-form'], ['projects', 'projects', '#projects-table'],
      ['idle', 'idle', '#idle-flagged-table tbody tr'], ['usage', 'usage', '#usage-table tbody tr'],
      ['capacity', 'capacity', '#capacity-chart canvas']];
    for (const [name, route, selector] of pages) {
      await go(route, selector);
      await shot(name);
      if (name === 'job') { // further down: the metrics and the checkpoint
        await page.evaluate(() => document.getElementById('job-metrics')?.parentElement?.previousElementSibling?.scrollIntoView());
        await shot('job-metrics');
      }
    }
    // What a member of one project sees of the others' work (docs/security.md).
    const { context: member, page: memberPage } = await logIn(browser, dev, tokens.dave);
    await memberPage.goto(`${dev.url}/#/nodes`);
    await memberPage.waitForSelector('#heatmap .cell[data-in-use="1"]');
    await sleep(1500);
    const file = path.join(outDir, 'nodes-another-project.png');
    await memberPage.screenshot({ path: file });
    shots.push(file);
    await member.close();

    // pngquant (Debian's), when installed: 256 colours, a third of the size, no visible loss on
    // these flat pages.
    const pngquant = spawnSync('pngquant', ['--version']).status === 0;
    if (pngquant) execFileSync('pngquant', ['--force', '--skip-if-larger', '--strip', '--quality', '70-95', '--ext', '.png', ...shots]);
    console.log(`${shots.length} screenshots in ${outDir}${pngquant ? ' (optimised by pngquant)' : ' (pngquant not installed: not optimised)'}`);
  } finally {
    await browser.close();
    await dev.stop();
    await rm(dataDir, { recursive: true, force: true }).catch(() => {});
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
