// A real `corral dev` for the dashboard's browser tests, benchmarks and screenshots: a free
// loopback port, the server started with the built dashboard, more fake-GPU agents joined to it
// when asked, and the cluster's unfinished jobs cancelled before it stops (tasks outlive a
// stopped agent by design, so a test cluster's must not). Used by dashboard_e2e.mjs and
// dashboard_screenshots.mjs.
import { spawn } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/** A TCP port free on 127.0.0.1 now. */
export async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/**
 * Cancels the cluster's unfinished jobs and waits (at most `timeoutMs`) until none runs.
 * `dev`: { url, token } as startDev answers.
 */
export async function cancelJobs(dev, timeoutMs = 30000) {
  const headers = { Authorization: `Bearer ${dev.token}`, 'Content-Type': 'application/json' };
  // The first page of the unfinished jobs (at most 1,000): cancelling them makes room for the next.
  const open = async () => (await fetch(`${dev.url}/api/v1/jobs?all=1&state=pending,starting,running&limit=1000`, { headers })).json();
  const deadline = Date.now() + timeoutMs;
  const cancelled = new Set();
  for (let jobs = await open(); jobs.length > 0 && Date.now() < deadline; jobs = await open()) {
    for (const j of jobs.filter((j) => !cancelled.has(j.id))) {
      cancelled.add(j.id);
      await fetch(`${dev.url}/api/v1/jobs/${j.id}/cancel`, { method: 'POST', headers, body: '{}' });
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Starts `corral dev` and resolves once it printed its dashboard URL and admin token (at most
 * 30 s; throws with its output otherwise, or when it started without the dashboard).
 * options: corral (the binary), dataDir, webDir (the built dashboard), port (default: a free
 * one), args (more `corral dev` flags).
 * Answers { url, token, proc, dataDir, corral, agents (joinAgents' processes), output() (what it
 * printed so far), stop() (cancels the unfinished jobs, then stops the agents and the server
 * and waits for them to exit) }.
 */
export async function startDev({ corral, dataDir, webDir, port, args = [] }) {
  const listen = `127.0.0.1:${port || await freePort()}`;
  const proc = spawn(corral, ['dev', '--data-dir', dataDir, '--listen', listen, '--web-dir', webDir, ...args],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout.on('data', (d) => { out += d; });
  proc.stderr.on('data', (d) => { out += d; });
  const deadline = Date.now() + 30000;
  while (Date.now() < deadline) {
    const url = /dashboard:\s+(http:\/\/\S+?)\/?\s/.exec(out)?.[1];
    const token = /admin token:\s+(\S+)/.exec(out)?.[1];
    if (url && token) {
      const dev = { url, token, proc, dataDir, corral, agents: [], output: () => out };
      dev.stop = async () => {
        await cancelJobs(dev).catch((e) => console.error(`cancelling the cluster's jobs: ${e}`));
        for (const p of [...dev.agents, proc]) {
          if (p.exitCode === null) p.kill('SIGTERM');
          await new Promise((r) => (p.exitCode !== null ? r() : p.on('exit', r)));
        }
      };
      return dev;
    }
    if (proc.exitCode !== null) break;
    if (/status page:/.test(out)) break; // started without the dashboard
    await new Promise((r) => setTimeout(r, 100));
  }
  proc.kill('SIGTERM');
  throw new Error(`corral dev did not start with the dashboard:\n${out}`);
}

/**
 * Joins more agents with fake GPUs to `dev` (startDev's) and waits (at most `timeoutMs`) until
 * the server has them all ready. `agents`: [{ name, gpus ("8xA100-80GB"), labels (["rack=r1"]) }];
 * `args`: more `corral agent` flags for each. Each agent works in DATA_DIR/agents/NAME and runs
 * tasks as this process's user; dev.stop() stops them.
 */
export async function joinAgents(dev, agents, { args = [], timeoutMs = 60000 } = {}) {
  const user = os.userInfo().username;
  for (const a of agents) {
    const work = path.join(dev.dataDir, 'agents', a.name);
    await mkdir(work, { recursive: true });
    dev.agents.push(spawn(dev.corral, ['agent', '--server', dev.url, '--join-token-file', path.join(dev.dataDir, 'join.token'),
      '--name', a.name, '--fake-gpus', a.gpus, '--work-dir', work, '--task-user', user, ...args,
      ...(a.labels || []).flatMap((l) => ['--label', l])], { stdio: 'ignore' }));
  }
  const headers = { Authorization: `Bearer ${dev.token}` };
  const names = new Set(agents.map((a) => a.name));
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const nodes = await (await fetch(`${dev.url}/api/v1/nodes`, { headers })).json();
    const ready = nodes.filter((n) => names.has(n.name) && n.state === 'ready').length;
    if (ready === names.size) return;
    if (Date.now() > deadline) throw new Error(`${ready} of ${names.size} agents joined in ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * A new browser context (1280x900) logged in to `dev` with `token` through the login page, on
 * the dashboard once it shows who is logged in. Answers { context, page }; the caller closes the
 * context.
 */
export async function logIn(browser, dev, token) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  await page.goto(`${dev.url}/`);
  await page.waitForURL(/\/login\?next=/);
  await page.fill('#token', token);
  await page.click('button[type=submit]');
  await page.waitForFunction(() => document.getElementById('who')?.textContent);
  return { context, page };
}
