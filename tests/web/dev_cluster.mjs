// A real `corral dev` for the dashboard's browser tests, benchmarks and screenshots: a free
// loopback port, the server started with the built dashboard, and the cluster's unfinished jobs
// cancelled before it stops (tasks outlive a stopped agent by design, so a test cluster's must
// not). Used by dashboard_e2e.mjs and dashboard_screenshots.mjs.
import { spawn } from 'node:child_process';
import net from 'node:net';

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
  const open = async () => (await (await fetch(`${dev.url}/api/v1/jobs?all=1`, { headers })).json())
    .filter((j) => ['pending', 'starting', 'running'].includes(j.state));
  for (const j of await open()) {
    await fetch(`${dev.url}/api/v1/jobs/${j.id}/cancel`, { method: 'POST', headers, body: '{}' });
  }
  const deadline = Date.now() + timeoutMs;
  while ((await open()).length > 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Starts `corral dev` and resolves once it printed its dashboard URL and admin token (at most
 * 30 s; throws with its output otherwise, or when it started without the dashboard).
 * options: corral (the binary), dataDir, webDir (the built dashboard), port (default: a free
 * one), args (more `corral dev` flags).
 * Answers { url, token, proc, dataDir, output() (what it printed so far), stop() (cancels the
 * unfinished jobs, then stops the server and waits for it to exit) }.
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
      const dev = { url, token, proc, dataDir, output: () => out };
      dev.stop = async () => {
        await cancelJobs(dev).catch((e) => console.error(`cancelling the cluster's jobs: ${e}`));
        if (proc.exitCode === null) proc.kill('SIGTERM');
        await new Promise((r) => (proc.exitCode !== null ? r() : proc.on('exit', r)));
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
