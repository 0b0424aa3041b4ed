// Usage reports and capacity planning: both need GPU-hours and utilisation over time, which
// the metrics API (in progress) will provide. Until then each page says what it will show.
import { h, replace } from '../dom.js';

function placeholder(title, what) {
  return {
    title,
    render(root) {
      replace(root, h('h1', {}, title),
        h('p', { class: 'note needs-metrics' }, `Needs metrics: ${what} This page fills in when the metrics API exists.`));
    },
  };
}

export const usage = placeholder('Usage reports',
  'GPU-hours and utilisation per project and user over a chosen period, exportable as CSV.');
export const capacity = placeholder('Capacity planning',
  'demand (allocated plus queued GPUs) against capacity over weeks, by GPU model, with the trend.');
