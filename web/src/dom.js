// DOM helpers. Contract: every text from the API goes into the page as text (textContent or an
// attribute value), never as HTML, so job names, users and logs cannot inject markup.

/**
 * Creates an element. `attrs`: attributes, except `class` (className), `style` (CSS text, set
 * through the CSSOM), `on*` functions (listeners) and `dataset` (an object; undefined/null
 * entries skipped); null/undefined/false values are skipped. `children`:
 * nodes, strings (text) or arrays of those; null/undefined/false are skipped.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === 'class') el.className = value;
    else if (key === 'dataset') {
      for (const [k, v] of Object.entries(value)) if (v !== undefined && v !== null) el.dataset[k] = v;
    }
    // Through the CSSOM: the page's Content-Security-Policy (style-src 'self') refuses style
    // attributes set as markup or with setAttribute, not styles set from script.
    else if (key === 'style') el.style.cssText = String(value);
    else if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

/** Replaces the children of `el` with `children` (same rules as h). */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

/** A table: `columns` are header texts, `rows` arrays of cells (as h's children). */
export function table(columns, rows, attrs = {}) {
  return h('table', attrs,
    h('thead', {}, h('tr', {}, columns.map((c) => h('th', {}, c)))),
    h('tbody', {}, rows.map((r) => h('tr', {}, r.map((cell) => h('td', {}, cell))))));
}
