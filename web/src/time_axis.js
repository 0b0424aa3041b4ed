// uPlot's x axis for times in Unix seconds, with ticks in human units: whole seconds, minutes,
// hours or days, written "14:05:30" (under a minute apart), "14:05" (under a day apart) or
// "12-06 14:00" (days), with the date under the first tick. uPlot's own labels (":33",
// ".500") read as milliseconds on short spans. Contract: timeTick is pure; the axis writes the
// ticks it drew on the chart's root as data-x-ticks ("14:05:30|14:05:35"), for tests.

// Tick spacings, seconds.
const kIncrs = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200,
  86400, 2 * 86400, 7 * 86400, 14 * 86400, 28 * 86400];

const pad = (n) => String(n).padStart(2, '0');

/** A tick's text for Unix seconds `t`, ticks `step` seconds apart (local time). */
export function timeTick(t, step) {
  const d = new Date(t * 1000);
  const hm = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
  if (step < 60) return `${hm}:${pad(d.getSeconds())}`;
  if (step < 86400) return hm;
  return `${pad(d.getMonth() + 1)}-${pad(d.getDate())}${d.getHours() || d.getMinutes() ? ` ${hm}` : ''}`;
}

/** The x axis (uPlot `axes[0]`): ticks at whole human steps, labelled by timeTick. */
export function timeAxis() {
  return {
    incrs: kIncrs,
    space: 60,
    values: (u, splits, axis, space, step) => {
      const ticks = splits.map((t) => timeTick(t, step));
      u.root.dataset.xTicks = ticks.join('|');
      return ticks;
    },
  };
}
