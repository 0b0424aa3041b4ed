// One job: its details (for an elastic job its size now and resizes; the work it lost), events,
// tasks (node, GPUs, state, their GPUs' utilisation now), a uPlot chart of its GPUs' utilisation
// over time (job_gpus.js, from /api/v1/jobs/<id>/gpus, read again after each live summary while
// the job runs), what it reported through the in-job channel (job_metrics.js: latest values, a
// chart of the numeric ones, the last checkpoint) and its live log, read by polling
// /api/v1/jobs/<id>/logs from the last offset every second while the job may still write (and
// once more after it ended). A job the user may not see (another project's: docs/security.md,
// "What others can see") is a 404, and the page says only that.
import { getJson, getLog, postJson } from '../api.js';
import { h, replace, table } from '../dom.js';
import { dateTime, duration, eta, hours } from '../format.js';
import { JobGpuChart } from '../job_gpus.js';
import { JobMetrics } from '../job_metrics.js';
import { jobEnded, taskEnded } from '../states.js';
import { stateBadge } from './jobs.js';

const kMaxLogChars = 2_000_000; // the page keeps the last 2 MB of a log

// An elastic job's size now in its range, in its unit (GPUs or nodes, docs/elastic.md):
// "8 of 2-8 (3 resizes)"; its range alone, "2-8", while it has no size (pending, ended); null
// for a rigid job.
export function elasticSize(j) {
  const e = j.elastic;
  if (!e) return null;
  if (!(e.now > 0)) return `${e.min}-${e.max}`;
  const resizes = j.resizes ?? 0;
  return `${e.now} of ${e.min}-${e.max} (${resizes} resize${resizes === 1 ? '' : 's'})`;
}

// The work the job lost to preemptions and resizes, "0.4 GPU-h"; null when there is none.
export function lostWork(j) {
  return j.lost_work_gpu_s > 0 ? `${hours(j.lost_work_gpu_s / 3600)} GPU-h` : null;
}

function details(j) {
  const now = Date.now() / 1000;
  const rows = [
    ['state', h('span', { id: 'job-state' }, stateBadge(j.state))],
    ['name', j.name || '—'],
    ['user / project', `${j.user} / ${j.project}`],
    ['submitted', dateTime(j.submit_time)],
    ['started', dateTime(j.start_time)],
    ['ended', dateTime(j.end_time)],
    ['run time', j.start_time ? duration((j.end_time ?? now) - j.start_time) : '—'],
    ['GPUs per task', j.spec?.resources ? `${j.spec.resources.gpus ?? 0}${j.spec.resources.gpu_milli ? ` × ${j.spec.resources.gpu_milli} milli` : ''}` : '—'],
    ['tasks', String(j.spec?.tasks ?? 1)],
    ['restarts', String(j.restarts ?? 0)],
  ];
  const elastic = elasticSize(j);
  if (elastic) rows.push([j.elastic.unit === 'nodes' ? 'nodes' : 'GPUs', h('span', { id: 'job-elastic' }, elastic)]);
  const lost = lostWork(j);
  if (lost) rows.push(['lost work', h('span', { id: 'job-lost-work' }, lost)]);
  if (j.reason) rows.push(['reason', j.reason]);
  if (j.pending_reason) rows.push(['pending reason', j.pending_reason.message]);
  if (j.estimated_start) rows.push(['estimated start', eta(j.estimated_start, now)]);
  if (j.predicted_run_s) rows.push(['predicted run time', `${duration(j.predicted_run_s.estimate)} (${j.predicted_run_s.basis})`]);
  rows.push(['command', h('code', { class: 'command' }, (j.spec?.command || []).join(' ')), 'wide']);
  // A grid of facts, three to a line at 1280 px, so that the charts show without scrolling.
  return h('dl', { class: 'facts' }, rows.map(([k, v, wide]) => h('div', { class: wide }, h('dt', {}, k), h('dd', {}, v))));
}

// "37 %" or "37 %, 80 %": the utilisation now of each GPU of task `t` (utilOf(node, index)).
function taskUtil(t, utilOf) {
  const values = (t.allocation?.gpus || []).map((g) => utilOf(t.node, g.index)).filter((u) => typeof u === 'number');
  return values.length ? values.map((u) => `${u} %`).join(', ') : h('span', { class: 'muted' }, '—');
}

function tasks(j, utilOf) {
  if (!j.tasks?.length) return h('p', { class: 'muted' }, 'No task placed yet.');
  return table(['task', 'node', 'GPUs (index: milli)', 'state', 'exit', 'GPU utilisation'],
    j.tasks.map((t) => [
      String(t.index), t.node,
      (t.allocation?.gpus || []).map((g) => `${g.index}: ${g.milli}`).join(', ') || 'none',
      t.state, t.exit_code ?? (t.signal ? `signal ${t.signal}` : '—'),
      taskEnded(t.state) ? '' : taskUtil(t, utilOf),
    ]), { id: 'job-tasks' });
}

function events(j) {
  return table(['time', 'from', 'to', 'reason'],
    (j.events || []).map((e) => [dateTime(e.time), e.from || '', e.to, e.reason || '']), { id: 'job-events' });
}

export default {
  title: 'Job',
  async render(root, [id]) {
    const head = h('h1', {}, `Job ${id}`);
    const cancel = h('button', { type: 'button', id: 'job-cancel' }, 'Cancel job');
    const detailBox = h('div', { id: 'job-details' });
    const taskBox = h('div');
    const eventBox = h('div');
    const taskPick = h('select', { id: 'log-task' }, h('option', { value: '0' }, 'task 0'));
    const streamPick = h('select', { id: 'log-stream' }, h('option', { value: 'stdout' }, 'stdout'), h('option', { value: 'stderr' }, 'stderr'));
    const logs = h('pre', { class: 'logs', id: 'job-logs' });
    const gpuChart = new JobGpuChart(id);
    const metrics = new JobMetrics(id);
    replace(root, head, h('p', {}, cancel, ' ', h('span', { id: 'job-message' })), detailBox,
      h('h2', {}, 'Tasks'), taskBox, h('h2', {}, 'GPU utilisation'), gpuChart.element,
      h('h2', {}, 'Reported metrics'), metrics.element,
      h('h2', {}, 'Events'), eventBox,
      h('h2', {}, 'Logs ', taskPick, ' ', streamPick), logs);

    let job = null;
    let offset = 0;
    let ended = false; // the job ended and its log was read once more after that
    let timer = null;
    let stopped = false;
    let gpusDone = false; // the job ended and its GPUs were read once more after that

    const load = async () => {
      job = await getJson(`/api/v1/jobs/${id}`);
      await metrics.update(job).catch((e) => { metrics.box.dataset.error = e.message; });
      head.textContent = `Job ${id}${job.name ? `: ${job.name}` : ''}`;
      replace(detailBox, details(job));
      if (!gpusDone) {
        const wasEnded = jobEnded(job.state);
        await gpuChart.update(job).catch((e) => { gpuChart.note.dataset.error = e.message; });
        gpusDone = wasEnded;
      }
      replace(taskBox, tasks(job, (node, index) => gpuChart.utilization(node, index)));
      replace(eventBox, events(job));
      cancel.disabled = jobEnded(job.state);
      const n = Math.max(1, job.tasks?.length || job.spec?.tasks || 1);
      if (taskPick.options.length !== n) {
        const chosen = taskPick.value;
        replace(taskPick, Array.from({ length: n }, (_, i) => h('option', { value: String(i) }, `task ${i}`)));
        taskPick.value = chosen < n ? chosen : '0';
      }
    };

    const readLog = async () => {
      if (!job || job.state === 'pending') return;
      const page = await getLog(id, { task: Number(taskPick.value), stream: streamPick.value, offset });
      if (page.text) {
        logs.textContent = (logs.textContent + page.text).slice(-kMaxLogChars);
        logs.scrollTop = logs.scrollHeight;
      }
      offset = page.next;
    };

    // Polls the log while it may grow; after the job ended, one last read, then stops.
    const tick = async () => {
      if (stopped) return;
      try {
        const wasEnded = job ? jobEnded(job.state) : false;
        await readLog();
        if (wasEnded) ended = true;
      } catch (e) {
        logs.dataset.error = e.message;
      }
      if (!ended && !stopped) timer = setTimeout(tick, 1000);
    };

    const restartLog = () => {
      logs.textContent = '';
      offset = 0;
      ended = false;
      clearTimeout(timer);
      tick();
    };
    taskPick.addEventListener('change', restartLog);
    streamPick.addEventListener('change', restartLog);
    cancel.addEventListener('click', async () => {
      const msg = document.getElementById('job-message');
      try {
        await postJson(`/api/v1/jobs/${id}/cancel`, {});
        msg.textContent = 'Cancelling…';
        await load();
      } catch (e) {
        msg.textContent = e.message;
      }
    });

    try {
      await load();
    } catch (e) {
      if (e.status !== 404) throw e;
      replace(root, h('h1', {}, `Job ${id}`), h('p', { id: 'job-missing' },
        'No such job, or one in a project you are not a member of.'));
      return null;
    }
    tick();
    return {
      async refresh() {
        const before = job?.state;
        await load();
        // A job that just ended: read the log again even if polling had stopped.
        if (before !== job.state && ended) restartLog();
      },
      dispose() { stopped = true; clearTimeout(timer); gpuChart.dispose(); metrics.dispose(); },
    };
  },
};
