// Nodes × GPUs heatmap: one row per node, one cell per GPU. Allocation comes from
// /api/v1/nodes (who holds each GPU), utilisation from /api/v1/gpus (the agents' latest
// readings). A free GPU is grey; an allocated GPU is coloured by its utilisation (red: allocated
// but unused, to green: busy; gpus.js utilColour), slate when it has no reading yet; a GPU the
// server flagged idle (under the threshold for the idle time) is striped. The tooltip names
// every task on the GPU and its reading (util, memory, power, temperature, idle time); it is
// written when the pointer first reaches a cell, not for 8,000 cells at each render. A task of
// a project the viewer is not in comes without job, user or project (docs/security.md, "What
// others can see"): its cell says "in use", coloured like any other.
// renderHeatmap is exported for bench/web_render.mjs, which times it with 1,000 nodes.
import { getJson } from '../api.js';
import { h, replace } from '../dom.js';
import { duration, percent } from '../format.js';
import { gpuIndex, kUtilGradient, loadGpus, readingText, utilStep } from '../gpus.js';

/**
 * The CSS classes of GPU `i` of `node`, given its status from /api/v1/gpus (`gpu`, may be
 * undefined). Free: 'free'. Allocated with a utilisation: 'util u<step>' (gpus.js utilStep:
 * the colour), plus 'dark' (white text) when busy and 'idle-flag' when flagged idle.
 * Allocated without one: 'partial' (shared) or 'full'.
 */
export function cellClass(node, i, gpu) {
  const free = node.gpu_free_milli?.[i];
  if (free === undefined || free >= 1000) return 'free';
  const util = gpu?.utilization_percent;
  if (typeof util === 'number') {
    const step = utilStep(util);
    return `util u${step}${gpu.idle ? ' idle-flag' : step >= 11 ? ' dark' : ''}`;
  }
  return free <= 0 ? 'full' : 'partial';
}

/** One task of a GPU in words: whose it is, or "in use" for another project's. */
export function taskText(t) {
  return t.job === undefined ? `in use by another project (${t.milli} milli)`
    : `job ${t.job} task ${t.task} (${t.user}, ${t.project}, ${t.milli} milli)`;
}

/** The text of a GPU's cell: its one job and user, "in use" (another project's), or "N jobs". */
export function cellLabel(tasks) {
  if (tasks.length === 0) return '';
  if (tasks.length > 1) return `${tasks.length} jobs`;
  return tasks[0].job === undefined ? 'in use' : `#${tasks[0].job} ${tasks[0].user}`;
}

/** The tooltip of GPU `i` of `node`: every task on it, its free share, its reading. */
export function cellTitle(node, i, gpu) {
  const tasks = node.gpu_tasks?.[i] || [];
  const free = node.gpu_free_milli?.[i];
  const who = tasks.map(taskText);
  return `${node.name} GPU ${i}${node.gpu_model ? ` ${node.gpu_model}` : ''}: ` +
    (who.length ? who.join('; ') : 'free') +
    (free !== undefined && free > 0 && free < 1000 ? `; ${free} milli free` : '') +
    (gpu ? `; ${readingText(gpu)}` : '');
}

function cell(node, i, gpu) {
  const tasks = node.gpu_tasks?.[i] || [];
  const label = cellLabel(tasks);
  const util = gpu?.utilization_percent;
  const seen = tasks.filter((t) => t.job !== undefined);
  return h('div', {
    class: `cell ${cellClass(node, i, gpu)}`,
    dataset: {
      node: node.name, gpu: String(i), jobs: seen.map((t) => t.job).join(' '),
      inUse: seen.length < tasks.length ? '1' : undefined,
      util: typeof util === 'number' ? String(util) : undefined, idle: gpu?.idle ? '1' : undefined,
    },
  }, tasks.length === 1 && seen.length === 1 ? h('a', { href: `#/jobs/${tasks[0].job}` }, label) : label);
}

/**
 * Renders `nodes` (the /api/v1/nodes rows) into `container`, replacing what was there;
 * `gpus` is the /api/v1/gpus answer (or null: allocation only).
 */
export function renderHeatmap(container, nodes, gpus = null) {
  const index = gpuIndex(gpus);
  const byName = new Map(nodes.map((n) => [n.name, n]));
  // The tooltips, written on the first pointer visit of each cell (event delegation).
  container.onmouseover = (event) => {
    const el = event.target.closest?.('.cell');
    if (!el || el.title) return;
    const node = byName.get(el.dataset.node);
    if (node) el.title = cellTitle(node, Number(el.dataset.gpu), index.get(`${node.name}\u0000${el.dataset.gpu}`));
  };
  const rows = nodes.map((node) => h('div', { class: 'row', dataset: { node: node.name } },
    h('div', { class: `node${node.state === 'ready' ? '' : ' down'}`, title: `${node.name} (${node.state})` },
      node.name, node.state === 'ready' ? '' : ` (${node.state})`),
    Array.from({ length: node.gpus }, (_, i) => cell(node, i, index.get(`${node.name}\u0000${i}`)))));
  replace(container, rows);
}

/** "N nodes, G GPUs, A in use; allocated GPUs at U % on average; F flagged idle". */
export function summary(nodes, gpus) {
  let total = 0, busy = 0;
  for (const n of nodes) {
    total += n.gpus;
    busy += (n.gpu_free_milli || []).filter((f) => f < 1000).length;
  }
  let text = `${nodes.length} nodes, ${total} GPUs, ${busy} in use`;
  const held = (gpus?.gpus || []).filter((g) => g.holders?.length && typeof g.utilization_percent === 'number');
  if (held.length) {
    const mean = held.reduce((a, g) => a + g.utilization_percent, 0) / held.length;
    const flagged = held.filter((g) => g.idle).length;
    text += `; allocated GPUs at ${percent(mean)} utilisation on average; ${flagged} flagged idle`;
  }
  return text;
}

export default {
  title: 'Nodes',
  async render(root) {
    const info = h('p', { id: 'heatmap-summary' });
    const grid = h('div', { class: 'heatmap', id: 'heatmap' });
    const threshold = h('span', { id: 'heatmap-threshold' });
    replace(root, h('h1', {}, 'Nodes × GPUs'), info,
      h('div', { class: 'legend', id: 'heatmap-legend' },
        h('span', {}, h('i', { class: 'swatch free' }), 'free'),
        h('span', {}, 'allocated, by utilisation: 0 % ', h('i', { class: 'ramp', style: `background:${kUtilGradient}` }), ' 100 %'),
        h('span', {}, h('i', { class: 'swatch idle-flag u0' }), 'flagged idle ', threshold),
        h('span', {}, h('i', { class: 'swatch full' }), 'allocated, no reading yet'),
        h('span', {}, h('i', { class: 'swatch partial' }), 'shared, no reading yet')),
      grid);
    const load = async () => {
      const [nodes, gpus] = await Promise.all([getJson('/api/v1/nodes'), loadGpus().catch(() => null)]);
      const t0 = performance.now();
      renderHeatmap(grid, nodes, gpus);
      grid.dataset.renderMs = (performance.now() - t0).toFixed(1);
      info.textContent = summary(nodes, gpus);
      threshold.textContent = gpus ? `(under ${gpus.idle_threshold_percent} % for ${duration(gpus.idle_after_s)})` : '';
    };
    await load();
    return { refresh: load };
  },
};
