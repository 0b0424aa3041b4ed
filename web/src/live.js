// Live cluster summaries. Contract: subscribe(fn) calls fn(summary) for every summary that
// arrives (ClusterSummary: time, nodes, nodes_ready, gpus, gpus_allocated, jobs_pending,
// jobs_starting, jobs_running), through Server-Sent Events from /api/v1/events/stream; when the
// stream cannot be opened (the server's cap on streams, a proxy that buffers), it polls
// /api/v1/summary every 2 s instead. Also keeps the last `kHistory` summaries for the
// overview's chart, so that the chart survives moving between pages.
import { getJson } from './api.js';

const kHistory = 900; // 30 minutes at one summary every 2 s
const subscribers = new Set();
const history = [];
let mode = 'connecting';
let modeListener = () => {};

/** Calls fn(summary) for each new summary; returns the function that unsubscribes. */
export function subscribe(fn) {
  subscribers.add(fn);
  return () => subscribers.delete(fn);
}

/** The summaries received so far, oldest first (shared; do not modify). */
export function summaries() {
  return history;
}

/**
 * Adds `fields` (e.g. { gpus_used }) to the newest summary, read at about its time; a null or
 * undefined field is not added. For values the summary does not carry but a page measured.
 */
export function annotateLatest(fields) {
  const latest = history[history.length - 1];
  if (!latest) return;
  for (const [k, v] of Object.entries(fields)) if (v !== null && v !== undefined) latest[k] = v;
}

/** fn(mode) is told the connection mode: 'connecting', 'live' (SSE), 'polling'. */
export function onMode(fn) {
  modeListener = fn;
  fn(mode);
}

function setMode(m) {
  mode = m;
  modeListener(m);
}

function publish(summary) {
  history.push(summary);
  if (history.length > kHistory) history.splice(0, history.length - kHistory);
  for (const fn of subscribers) {
    try {
      fn(summary);
    } catch (e) {
      console.error('live subscriber failed', e);
    }
  }
}

function poll() {
  setMode('polling');
  const tick = () => getJson('/api/v1/summary').then(publish).catch(() => {});
  tick();
  setInterval(tick, 2000);
}

/** Starts receiving summaries (once). */
export function start() {
  if (typeof EventSource === 'undefined') return poll();
  const source = new EventSource('/api/v1/events/stream');
  let opened = false;
  source.addEventListener('open', () => {
    opened = true;
    setMode('live');
  });
  source.addEventListener('summary', (e) => publish(JSON.parse(e.data)));
  source.addEventListener('error', () => {
    // Refused before it ever opened (429, 401): poll. Dropped after opening: EventSource
    // reconnects by itself; say so until it does.
    if (!opened || source.readyState === EventSource.CLOSED) {
      source.close();
      poll();
    } else {
      setMode('connecting');
    }
  });
}
