// GPU metrics shared by the pages (docs/dashboard.md): /api/v1/gpus answers, the colour of a
// utilisation, and a GPU's one-line description. Contract: utilisation is 0..100 (percent) or
// missing (the device did not report it); every function here is pure except loadGpus.
import { getJson } from './api.js';
import * as live from './live.js';
import { duration, mib, percent } from './format.js';

/**
 * GET /api/v1/gpus (idle: ?idle=1): { idle_threshold_percent, idle_after_s, gpus: [...] }, or
 * null when the server has no metrics API (404) so that pages degrade to allocation only.
 * Every full answer also gives the newest live summary its `gpus_used` (live.js), so that the
 * overview's "used" line has points from whichever page read the GPUs.
 */
export async function loadGpus({ idle = false } = {}) {
  try {
    const answer = await getJson(`/api/v1/gpus${idle ? '?idle=1' : ''}`);
    if (!idle) live.annotateLatest({ gpus_used: gpusUsed(answer) });
    return answer;
  } catch (e) {
    if (e.status === 404) return null;
    throw e;
  }
}

/** "node\0index" → GPU status, for joining with /api/v1/nodes rows. */
export function gpuIndex(answer) {
  const map = new Map();
  for (const g of answer?.gpus || []) map.set(`${g.node}\u0000${g.index}`, g);
  return map;
}

/**
 * Sum over GPUs of utilisation / 100: how many GPUs' worth of work runs now ("used"), or null
 * when no GPU reported a utilisation.
 */
export function gpusUsed(answer) {
  let used = 0, seen = false;
  for (const g of answer?.gpus || []) {
    if (typeof g.utilization_percent !== 'number') continue;
    used += g.utilization_percent / 100;
    seen = true;
  }
  return seen ? used : null;
}

// Allocated GPUs by utilisation: red (0 %, allocated but unused) through amber to green (busy),
// also darker as it rises so that the scale reads without colour vision. In 5 % steps: the
// heatmap gives its cells the class `u0`..`u20` (style.css has the same colours), which is
// cheaper than 8,000 inline colours.
const colourOf = (u) => `hsl(${Math.round(1.3 * u)} 65% ${Math.round(62 - 0.22 * u)}%)`;

/** The step (0..20) of `util` percent: its class is `u${step}`. */
export function utilStep(util) {
  return Math.max(0, Math.min(20, Math.round(util / 5)));
}

/** The background colour of an allocated GPU at `util` percent (the colour of its step). */
export function utilColour(util) {
  return colourOf(5 * utilStep(util));
}

/** The CSS gradient of the legend, the same scale as utilColour. */
export const kUtilGradient = `linear-gradient(to right, ${[0, 25, 50, 75, 100].map(utilColour).join(', ')})`;

/** "util 37 %, memory 31.2 GiB (40 %), 250 W, 55 °C" from a GPU status or reading. */
export function readingText(g) {
  const parts = [];
  if (typeof g.utilization_percent === 'number') parts.push(`util ${percent(g.utilization_percent)}`);
  if (typeof g.memory_used_mib === 'number') {
    parts.push(`memory ${mib(g.memory_used_mib)}` +
      (typeof g.memory_utilization_percent === 'number' ? ` (${percent(g.memory_utilization_percent)} busy)` : ''));
  }
  if (typeof g.power_w === 'number') parts.push(`${Math.round(g.power_w)} W`);
  if (typeof g.temperature_c === 'number') parts.push(`${g.temperature_c} °C`);
  if (typeof g.idle_for_s === 'number') parts.push(`idle for ${duration(g.idle_for_s)}${g.idle ? ' (flagged)' : ''}`);
  if (g.foreign_processes) parts.push(`${g.foreign_processes} process(es) not corral's`);
  return parts.join(', ') || 'no reading';
}
