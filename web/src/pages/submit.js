// Submit a job (POST /api/v1/jobs): name, project (the user's), an environment asset
// (GET /api/v1/environments: NAME@VERSION and on how many nodes it runs here), a shell command
// or a batch script (a file or pasted text, sent as the API's `script`: the server expands its
// #SBATCH and #CORRAL lines with the code `corral batch` uses), environment variables
// (KEY=VALUE lines), nodes, GPUs per node, launcher, array (Slurm's "0-9%2"), time limit
// (Slurm's minutes or H:MM:SS) and priority. A plain job goes to its page; an array, or an
// answer with warnings (directives corral ignores), stays here and says what was created.
import { getJson, postJson } from '../api.js';
import { h, replace } from '../dom.js';

// The API's launcher values (docs/openapi.yaml, JobSpec.launcher; docs/distributed.md).
export const kLaunchers = ['none', 'torchrun', 'mpi', 'deepspeed', 'tf', 'jax'];
const kMaxArrayElements = 10000; // the API's ArraySpec.indices maxItems
const kMaxScriptBytes = 65536; // the API's script.text maxLength

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

/**
 * The API's `array` object for Slurm's --array text, as `corral submit --array` reads it
 * (src/protocol/array_spec.h): comma-separated parts "N", "A-B" or "A-B:S", then optionally
 * "%M" (at most M running). Throws an Error naming the bad part; the server checks the result
 * again.
 */
export function arrayOf(text) {
  const [list, limit, extra] = text.split('%');
  const fail = (why) => { throw new Error(`array: ${why}; expected indices such as 0-9%2 or 1,3,5-7`); };
  if (extra !== undefined) fail(`"${text}" has more than one %`);
  const int = (s, what) => {
    if (!/^\d{1,10}$/.test(s) || Number(s) > 2147483647) fail(`${what} "${s}" is not a whole number`);
    return Number(s);
  };
  const array = {};
  if (limit !== undefined) {
    const m = int(limit, 'the running limit');
    if (m < 1 || m > kMaxArrayElements) fail(`the running limit %${limit} must be from 1 to ${kMaxArrayElements}`);
    array.max_running = m;
  }
  const indices = [];
  const seen = new Set();
  for (const part of list.split(',')) {
    const m = /^(\d+)(?:-(\d+)(?::(\d+))?)?$/.exec(part.trim());
    if (!m) fail(`"${part}" is not N, A-B or A-B:S`);
    const first = int(m[1], 'index');
    const last = m[2] === undefined ? first : int(m[2], 'index');
    const step = m[3] === undefined ? 1 : int(m[3], 'step');
    if (last < first || step < 1) fail(`"${part}" is an empty range`);
    for (let i = first; i <= last; i += step) {
      if (seen.has(i)) fail(`index ${i} is given twice`);
      if (indices.length === kMaxArrayElements) fail(`more than ${kMaxArrayElements} elements`);
      seen.add(i);
      indices.push(i);
    }
  }
  array.indices = indices;
  return array;
}

/**
 * Seconds for a time limit in Slurm's forms, as a batch script's --time reads it
 * (src/protocol/batch_script.h, ParseSlurmTime): a bare number is minutes; M:S, H:M:S, D-H,
 * D-H:M, D-H:M:S; "UNLIMITED" is none (0). Throws an Error naming the field.
 */
export function timeLimitOf(text) {
  const t = text.trim();
  if (/^(unlimited|infinite)$/i.test(t)) return 0;
  if (/^\d+$/.test(t)) return Number(t) * 60;
  const m = /^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$/.exec(t);
  if (m && (m[1] !== undefined || m[3] !== undefined)) {
    const [days, a, b, c] = [m[1], m[2], m[3], m[4]].map((x) => (x === undefined ? undefined : Number(x)));
    // With days: D-H[:M[:S]]; without: M:S or H:M:S.
    const [hh, mm, ss] = days !== undefined ? [a, b ?? 0, c ?? 0] : c !== undefined ? [a, b, c] : [0, a, b];
    return (days ?? 0) * 86400 + hh * 3600 + mm * 60 + ss;
  }
  throw new Error(`time limit: expected minutes, M:S, H:M:S, D-H, D-H:M or D-H:M:S (Slurm's forms), got "${t}"`);
}

/**
 * The job spec for the form's values (strings from the inputs; `script`: { text, name } or
 * null). Fields left empty are not sent, so that a batch script's directives fill them.
 */
export function specOf(v) {
  const spec = { project: v.project };
  if (v.script) {
    spec.script = { text: v.script.text, name: v.script.name || 'script' };
    const args = (v.args || '').split(/\s+/).filter(Boolean);
    if (args.length) spec.script.args = args;
  } else if (v.launcher && v.launcher !== 'none') {
    // A launcher runs the command itself (a script and its arguments), not through a shell.
    spec.command = v.command.split(/\s+/).filter(Boolean);
  } else {
    spec.command = [v.command];
    spec.shell = true;
  }
  if (v.name) spec.name = v.name;
  if (v.environment) spec.environment = v.environment;
  const env = envOf(v.env);
  if (Object.keys(env).length) spec.env = env;
  if (v.nodes) spec.tasks = Number(v.nodes);
  if (v.gpus) spec.resources = { gpus: Number(v.gpus) };
  // Max GPUs above the GPUs asked: an elastic job that starts at those and may grow (docs/elastic.md).
  if (v.max_gpus && Number(v.max_gpus) > Number(v.gpus || 1)) {
    spec.elastic = { unit: 'gpus', min: Number(v.gpus || 1), max: Number(v.max_gpus) };
  }
  if (v.gpu_milli && Number(v.gpu_milli) !== 1000) spec.resources = { ...spec.resources, gpu_milli: Number(v.gpu_milli) };
  if (v.launcher && v.launcher !== 'none') spec.launcher = v.launcher;
  if (v.array) spec.array = arrayOf(v.array);
  if (v.time_limit) spec.time_limit_s = timeLimitOf(v.time_limit);
  if (v.priority) spec.priority = Number(v.priority);
  return spec;
}

/** "pytorch@3 — runs on 4 of 5 nodes" / "… — runs on no node: <why>": a picker's option text. */
export function environmentLabel(e) {
  const r = e.runs_here;
  const where = !r ? '' : r.nodes > 0 ? ` — runs on ${r.nodes} of ${r.of} node${r.of === 1 ? '' : 's'}`
    : ` — runs on no node${r.why_not ? `: ${r.why_not}` : ''}`;
  return `${e.name}@${e.version}${where}`;
}

// The environment picker: "host (the node as it is)" first, then every asset the user may use,
// those that run nowhere here disabled. A server without the environments API: the host only.
async function environmentPicker() {
  const picker = h('select', { id: 'submit-environment', name: 'environment' },
    h('option', { value: '' }, 'none: the node as it is'));
  const answer = await getJson('/api/v1/environments').catch(() => ({ environments: [] }));
  for (const e of answer.environments || []) {
    picker.append(h('option', { value: `${e.name}@${e.version}`, title: e.spec?.description || null,
      disabled: e.runs_here && e.runs_here.nodes === 0 }, environmentLabel(e)));
  }
  return picker;
}

export default {
  title: 'Submit',
  async render(root) {
    const [who, environment] = await Promise.all([getJson('/api/v1/whoami'), environmentPicker()]);
    const field = (label, input, hint) => [h('label', { for: input.id }, label),
      hint ? h('div', { class: 'with-hint' }, input, h('span', { class: 'note' }, hint)) : input];
    const inputs = {
      name: h('input', { id: 'submit-name', name: 'name', placeholder: 'train-resnet' }),
      project: h('select', { id: 'submit-project', name: 'project' }, who.projects.map((p) => h('option', { value: p }, p))),
      environment,
      command: h('textarea', { id: 'submit-command', name: 'command', placeholder: 'python train.py --epochs 10' }),
      args: h('input', { id: 'submit-script-args', name: 'args', placeholder: 'arguments, separated by spaces' }),
      env: h('textarea', { id: 'submit-env', name: 'env', rows: '2', placeholder: 'KEY=VALUE, one a line' }),
      nodes: h('input', { id: 'submit-nodes', name: 'nodes', type: 'number', min: '1', placeholder: '1' }),
      gpus: h('input', { id: 'submit-gpus', name: 'gpus', type: 'number', min: '0', placeholder: '0' }),
      max_gpus: h('input', { id: 'submit-max-gpus', name: 'max_gpus', type: 'number', min: '1', placeholder: 'none' }),
      gpu_milli: h('input', { id: 'submit-gpu-milli', name: 'gpu_milli', type: 'number', min: '1', max: '1000', placeholder: '1000' }),
      launcher: h('select', { id: 'submit-launcher', name: 'launcher' }, kLaunchers.map((l) => h('option', { value: l }, l))),
      array: h('input', { id: 'submit-array', name: 'array', placeholder: 'e.g. 0-9%2' }),
      time_limit: h('input', { id: 'submit-time-limit', name: 'time_limit', placeholder: 'H:MM:SS or minutes' }),
      priority: h('input', { id: 'submit-priority', name: 'priority', type: 'number', placeholder: '0' }),
    };
    // The batch script: a file read into the text box, or text pasted there. A script replaces
    // the command.
    const scriptFile = h('input', { id: 'submit-script-file', type: 'file', accept: '.sh,.sbatch,.slurm,text/*' });
    const scriptText = h('textarea', { id: 'submit-script', name: 'script', rows: '6',
      placeholder: '#!/bin/bash\n#SBATCH --gres=gpu:1\n#SBATCH --time=1:00:00\npython train.py' });
    let scriptName = '';
    scriptFile.addEventListener('change', async () => {
      const file = scriptFile.files[0];
      if (!file) return;
      if (file.size > kMaxScriptBytes) {
        error.textContent = `script: ${file.name} is over ${kMaxScriptBytes / 1024} KiB`;
        return;
      }
      scriptName = file.name;
      scriptText.value = await file.text();
    });
    const error = h('span', { class: 'error', id: 'submit-error' });
    const result = h('div', { id: 'submit-result' });
    const form = h('form', { class: 'submit', id: 'submit-form' },
      field('Name', inputs.name), field('Project', inputs.project),
      field('Environment asset', inputs.environment, 'what the job runs in (docs/environments.md)'),
      field('Command', inputs.command, 'run by the shell; with a launcher, the script it starts and its arguments; or a batch script below'),
      h('label', { for: scriptText.id }, 'Batch script'),
      h('div', { class: 'with-hint' }, scriptFile, scriptText,
        h('span', { class: 'note' }, '#SBATCH and #CORRAL lines fill the fields left empty, as with corral batch (docs/batch.md)')),
      field('Script arguments', inputs.args),
      field('Environment variables', inputs.env),
      field('Nodes', inputs.nodes, 'parts, one per node'), field('GPUs per node', inputs.gpus),
      field('Max GPUs (elastic)', inputs.max_gpus, 'above GPUs: the job grows into idle GPUs and shrinks back (one node)'),
      field('milli-GPU (share of one)', inputs.gpu_milli), field('Launcher', inputs.launcher, 'how each node starts its processes (docs/distributed.md)'),
      field('Array', inputs.array, 'one job per index; %N: at most N running'),
      field('Time limit', inputs.time_limit), field('Priority', inputs.priority),
      h('div', { class: 'actions' }, h('button', { type: 'submit', id: 'submit-button' }, 'Submit'), ' ', error));
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      error.textContent = '';
      replace(result);
      const values = Object.fromEntries(Object.entries(inputs).map(([k, el]) => [k, el.value.trim()]));
      if (scriptText.value.trim()) values.script = { text: scriptText.value, name: scriptName };
      else if (!values.command) {
        error.textContent = 'command: give a command or a batch script';
        return;
      }
      try {
        const answer = await postJson('/api/v1/jobs', specOf(values));
        const warnings = answer.warnings || [];
        if (answer.id && !warnings.length) {
          location.hash = `#/jobs/${answer.id}`;
          return;
        }
        const first = answer.id ?? answer.array_id;
        replace(result, h('p', { id: 'submit-created' }, answer.ids ? `Submitted array ${answer.array_id}: jobs ` : 'Submitted job ',
          h('a', { href: `#/jobs/${first}` }, String(first)),
          answer.ids && answer.ids.length > 1 ? `–${answer.ids[answer.ids.length - 1]} (${answer.ids.length} jobs)` : ''),
        warnings.length ? [h('p', {}, 'Not taken as asked:'),
          h('ul', { id: 'submit-warnings', class: 'warnings' }, warnings.map((w) => h('li', {}, w)))] : null);
      } catch (e) {
        error.textContent = e.message;
      }
    });
    replace(root, h('h1', {}, 'Submit a job'), form, result);
  },
};
