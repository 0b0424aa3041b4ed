// The dashboard's API client. Contract: every request goes to this origin with the login
// cookie (credentials: 'same-origin'); the server accepts the cookie for the dashboard's own
// requests only (docs/dashboard.md). A 401 sends the browser to the login page, coming back
// to the page it was on. Other errors throw an ApiError carrying the problem's detail.

export class ApiError extends Error {
  constructor(status, detail) {
    super(detail || `HTTP ${status}`);
    this.status = status;
  }
}

/** Sends the browser to the login page, back to `where` (a path on this server) afterwards. */
export function toLogin(where = `/${location.hash}`) {
  location.assign(`/login?next=${encodeURIComponent(where)}`);
}

async function request(method, path, body) {
  const init = { method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  if (res.status === 401) {
    toLogin();
    throw new ApiError(401, 'not logged in');
  }
  return res;
}

async function problem(res) {
  const body = await res.json().catch(() => ({}));
  return new ApiError(res.status, body.detail || body.title);
}

/** GET a JSON document. */
export async function getJson(path) {
  const res = await request('GET', path);
  if (!res.ok) throw await problem(res);
  return res.json();
}

/**
 * GET a page of a listing: { rows, next } where `next` is the response's X-Corral-Next-Cursor
 * (the `cursor` of the next page; null on the last page).
 */
export async function getPage(path) {
  const res = await request('GET', path);
  if (!res.ok) throw await problem(res);
  return { rows: await res.json(), next: res.headers.get('X-Corral-Next-Cursor') };
}

/** POST a JSON body; answers the JSON reply. */
export async function postJson(path, body) {
  const res = await request('POST', path, body);
  if (!res.ok) throw await problem(res);
  return res.json();
}

/**
 * A page of a task's log from byte `offset`: { text, next } where `next` is the offset to ask
 * for next (X-Corral-Log-Offset). `stream`: 'stdout' or 'stderr'.
 */
export async function getLog(jobId, { task = 0, stream = 'stdout', offset = 0 } = {}) {
  const q = new URLSearchParams({ task: String(task), stream, offset: String(offset) });
  const res = await request('GET', `/api/v1/jobs/${jobId}/logs?${q}`);
  if (res.status === 404) return { text: '', next: offset, missing: true };
  if (!res.ok) throw await problem(res);
  const text = await res.text();
  const next = Number(res.headers.get('X-Corral-Log-Offset') ?? offset + text.length);
  return { text, next };
}

/** Logs out (clears the cookie) and goes to the login page. */
export async function logout() {
  await fetch('/api/v1/logout', { method: 'POST', credentials: 'same-origin' }).catch(() => {});
  toLogin('/');
}
