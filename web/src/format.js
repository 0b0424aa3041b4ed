// Formatting for display. Times from the API are Unix seconds.

/** "2024-05-01 12:34:56" in local time; "—" for missing. */
export function dateTime(unixSeconds) {
  if (unixSeconds === null || unixSeconds === undefined) return '—';
  const d = new Date(unixSeconds * 1000);
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** "3 h 05 min", "4 min 10 s", "12 s" for a number of seconds; "—" for missing. */
export function duration(seconds) {
  if (seconds === null || seconds === undefined || Number.isNaN(seconds)) return '—';
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
  const hours = Math.floor(s / 3600);
  return `${hours} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} min`;
}

/** "in 4 min" / "now" for an estimated start (Unix seconds) against `now` (Unix seconds). */
export function eta(startSeconds, nowSeconds = Date.now() / 1000) {
  if (startSeconds === null || startSeconds === undefined) return 'unknown';
  const wait = startSeconds - nowSeconds;
  return wait <= 1 ? 'now' : `in ${duration(wait)}`;
}

/** GPUs with at most two decimals ("1.5", "8"). */
export function gpus(n) {
  return Number.isFinite(n) ? String(Math.round(n * 100) / 100) : '—';
}

/** "37 %" for a percentage; "—" for missing. */
export function percent(p) {
  return Number.isFinite(p) ? `${Math.round(p)} %` : '—';
}

/** GPU-hours with up to three decimals ("12.5", "0.004"). */
export function hours(h) {
  return Number.isFinite(h) ? String(Math.round(h * 1000) / 1000) : '—';
}

/** "31.2 GiB" / "512 MiB" for MiB; "—" for missing. */
export function mib(m) {
  if (!Number.isFinite(m)) return '—';
  return m >= 1024 ? `${(m / 1024).toFixed(1)} GiB` : `${Math.round(m)} MiB`;
}

// --- Compact forms for dense tables (one line per row): the full form goes in a title.

/**
 * A date short enough for a table cell, against `now` (Unix seconds): "45s ago", "3m ago",
 * "5h ago" within a day, "12-06 11:02" (month-day hours:minutes, local time) before that, and
 * "in 3m" for a time ahead; "—" for missing.
 */
export function shortDate(unixSeconds, nowSeconds = Date.now() / 1000) {
  if (unixSeconds === null || unixSeconds === undefined) return '—';
  const ago = nowSeconds - unixSeconds;
  if (ago < 0) return `in ${shortDuration(-ago)}`;
  if (ago < 86400) return `${shortDuration(ago)} ago`;
  const d = new Date(unixSeconds * 1000);
  const pad = (n) => String(n).padStart(2, '0');
  return `${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** "12s", "3m 05s", "2h 05m", "3d 04h" for a number of seconds; "—" for missing. */
export function shortDuration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return '—';
  const s = Math.max(0, Math.round(seconds));
  const pad = (n) => String(n).padStart(2, '0');
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${pad(s % 60)}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${pad(Math.floor((s % 3600) / 60))}m`;
  return `${Math.floor(s / 86400)}d ${pad(Math.floor((s % 86400) / 3600))}h`;
}
