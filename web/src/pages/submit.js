// Submit a job (POST /api/v1/jobs): name, project (the user's), a shell command, environment
// variables (KEY=VALUE lines), GPUs per task, tasks, time limit and priority. On success, goes
// to the new job's page.
import { getJson, postJson } from '../api.js';
import { h, replace } from '../dom.js';

/**
 * The environment of "KEY=VALUE" lines (blank lines skipped); throws on a line without "=" or
 * with a key that is not a shell variable name.
 */
export function envOf(text) {
  const env = {};
  for (const line of (text || '').split('\n')) {
    if (!line.trim()) continue;
    const eq = line.indexOf('=');
    const key = eq < 0 ? '' : line.slice(0, eq).trim();
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) throw new Error(`environment: "${line.trim()}" is not KEY=VALUE`);
    env[key] = line.slice(eq + 1);
  }
  return env;
}

/** The job spec for the form's values (strings from the inputs). */
export function specOf(v) {
  const spec = {
    command: [v.command],
    shell: true,
    project: v.project,
    tasks: Number(v.tasks || 1),
    resources: { gpus: Number(v.gpus || 0) },
  };
  if (v.name) spec.name = v.name;
  const env = envOf(v.env);
  if (Object.keys(env).length) spec.env = env;
  if (v.gpu_milli && Number(v.gpu_milli) !== 1000) spec.resources.gpu_milli = Number(v.gpu_milli);
  if (v.time_limit_s) spec.time_limit_s = Number(v.time_limit_s);
  if (v.priority) spec.priority = Number(v.priority);
  return spec;
}

export default {
  title: 'Submit',
  async render(root) {
    const who = await getJson('/api/v1/whoami');
    const field = (label, input) => [h('label', { for: input.id }, label), input];
    const inputs = {
      name: h('input', { id: 'submit-name', name: 'name', placeholder: 'train-resnet' }),
      project: h('select', { id: 'submit-project', name: 'project' }, who.projects.map((p) => h('option', { value: p }, p))),
      command: h('textarea', { id: 'submit-command', name: 'command', required: true, placeholder: 'python train.py --epochs 10' }),
      env: h('textarea', { id: 'submit-env', name: 'env', rows: '2', placeholder: 'KEY=VALUE, one a line' }),
      gpus: h('input', { id: 'submit-gpus', name: 'gpus', type: 'number', min: '0', value: '1' }),
      gpu_milli: h('input', { id: 'submit-gpu-milli', name: 'gpu_milli', type: 'number', min: '1', max: '1000', value: '1000' }),
      tasks: h('input', { id: 'submit-tasks', name: 'tasks', type: 'number', min: '1', value: '1' }),
      time_limit_s: h('input', { id: 'submit-time-limit', name: 'time_limit_s', type: 'number', min: '0', placeholder: 'none' }),
      priority: h('input', { id: 'submit-priority', name: 'priority', type: 'number', placeholder: '0' }),
    };
    const error = h('span', { class: 'error', id: 'submit-error' });
    const form = h('form', { class: 'submit', id: 'submit-form' },
      field('Name', inputs.name), field('Project', inputs.project),
      field('Command (shell)', inputs.command), field('Environment', inputs.env), field('GPUs per task', inputs.gpus),
      field('milli-GPU (share of one)', inputs.gpu_milli), field('Tasks', inputs.tasks),
      field('Time limit (s)', inputs.time_limit_s), field('Priority', inputs.priority),
      h('div', { class: 'actions' }, h('button', { type: 'submit', id: 'submit-button' }, 'Submit'), ' ', error));
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      error.textContent = '';
      const values = Object.fromEntries(Object.entries(inputs).map(([k, el]) => [k, el.value.trim()]));
      try {
        const job = await postJson('/api/v1/jobs', specOf(values));
        location.hash = `#/jobs/${job.id}`;
      } catch (e) {
        error.textContent = e.message;
      }
    });
    replace(root, h('h1', {}, 'Submit a job'), form);
  },
};
