// uPlot helpers shared by the pages: a chart that fills its box and follows its width, and a
// category bar chart (two or more series side by side per category). Contract: the returned
// plot is the caller's to destroy; destroying it also stops following the box.
import uPlot from 'uplot';

/** The width a chart has inside `el`: its content box (padding excluded), at least 320 px. */
export function chartWidth(el) {
  const style = getComputedStyle(el);
  const inner = el.clientWidth - parseFloat(style.paddingLeft || 0) - parseFloat(style.paddingRight || 0);
  return Math.max(320, Math.floor(inner || 900));
}

/**
 * A uPlot chart in `box`, as wide as the box's content (`opts.width` is ignored) and resized
 * with it (a ResizeObserver on the box: the window, or the layout around the box, changing).
 */
export function fittedChart(box, opts, data) {
  const plot = new uPlot({ ...opts, width: chartWidth(box) }, data, box);
  let width = plot.width;
  const observer = new ResizeObserver(() => {
    const now = chartWidth(box);
    if (now === width) return;
    width = now;
    plot.setSize({ width, height: plot.height });
  });
  observer.observe(box);
  const destroy = plot.destroy.bind(plot);
  plot.destroy = () => {
    observer.disconnect();
    destroy();
  };
  return plot;
}

/**
 * Bars per category: `labels` (one per category, on the x axis), `series` [{ label, colour,
 * values }] drawn side by side. `yLabel` names the y axis.
 */
export function barChart(box, { labels, series, yLabel, height = 260, unit = '' }) {
  const n = labels.length;
  const each = 0.8 / series.length;
  const x = labels.map((_, i) => i);
  const short = (s) => (s.length > 16 ? `${s.slice(0, 15)}…` : s);
  return fittedChart(box, {
    height,
    series: [
      { label: 'group', value: (u, v) => (v === null || v === undefined ? '—' : labels[v] ?? '') },
      ...series.map((s, k) => ({
        label: s.label, stroke: s.colour, fill: `${s.colour}cc`, width: 1,
        value: (u, v) => (v === null || v === undefined ? '—' : `${v}${unit}`),
        // Grouped bars: series k's bar starts at i - 0.4 + k * each (data units), `each` wide.
        paths: uPlot.paths.bars({ disp: {
          x0: { unit: 1, values: () => x.map((i) => i - 0.4 + k * each) },
          size: { unit: 1, values: () => [each * 0.92] },
        } }),
        points: { show: false },
      })),
    ],
    // At least 4 categories' room, so that one or two bars stay narrow and centred.
    scales: { x: { time: false, range: () => [-0.5 - Math.max(0, 4 - n) / 2, n - 0.5 + Math.max(0, 4 - n) / 2] }, y: { range: (u, min, max) => [0, Math.max(max, 0.001) * 1.05] } },
    axes: [
      { splits: () => x, values: (u, splits) => splits.map((i) => short(labels[i] ?? '')), rotate: n > 8 ? -40 : 0, size: n > 8 ? 80 : 40, grid: { show: false } },
      { label: yLabel },
    ],
    legend: { live: true },
  }, [x, ...series.map((s) => s.values)]);
}
