// Building the DOM without a framework: `h("tag.class", {attrs}, ...children)`, and the small
// formatting helpers every page shares (times, spans, state badges).

/** @typedef {string | number | Node | null | undefined | false} Child */

/**
 * An element: `h("button.primary", { onclick, "aria-label": "Approve" }, "Approve")`.
 * Attributes starting with `on` are listeners; `class`, `for`, `aria-*`, `data-*` and the rest
 * are set as attributes; `false`/`null`/`undefined` values are left out.
 * @param {string} spec tag, then `.class` and `#id` parts
 * @param {Record<string, unknown> | null} [attrs]
 * @param {...(Child | Child[])} children
 * @returns {HTMLElement}
 */
export function h(spec, attrs, ...children) {
  // `tag#id.class.class`, the id and classes in any order.
  const tag = /^[a-z0-9]*/i.exec(spec)?.[0];
  const id = /#([\w-]+)/.exec(spec)?.[1];
  const classes = [...spec.matchAll(/\.([\w-]+)/g)].map((m) => m[1]);
  const el = document.createElement(tag || "div");
  if (id) el.id = id;
  if (classes.length) el.className = classes.join(" ");
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith("on") && typeof v === "function") {
      el.addEventListener(k.slice(2), /** @type {EventListener} */ (v));
    } else if (k === "style") {
      el.style.cssText = String(v); // CSSOM, which the portal's CSP allows (style attributes it does not)
    } else if (k === "class") {
      el.className = [el.className, String(v)].filter(Boolean).join(" ");
    } else if (k === "value" && "value" in el) {
      /** @type {HTMLInputElement} */ (el).value = String(v);
    } else if (k === "checked" && "checked" in el) {
      /** @type {HTMLInputElement} */ (el).checked = Boolean(v);
    } else {
      el.setAttribute(k, v === true ? "" : String(v));
    }
  }
  append(el, children);
  return el;
}

/**
 * @param {Node} el
 * @param {(Child | Child[])[]} children
 */
function append(el, children) {
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
  }
}

/**
 * Replaces an element's children.
 * @param {Element} el
 * @param {...(Child | Child[])} children
 */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

/** @param {number} ms @returns {string} RFC 3339 UTC, seconds precision */
export function fmtTime(ms) {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}

/** @param {string | null | undefined} s @returns {string} a short UTC time, or "" */
export function shortTime(s) {
  if (!s) return "";
  const ms = Date.parse(s);
  if (Number.isNaN(ms)) return s;
  return new Date(ms).toISOString().slice(0, 16).replace("T", " ") + "Z";
}

/**
 * `3d4h`, `2h05m`, `4m10s`, `12s` — the CLI's spans.
 * @param {number} secs
 */
export function span(secs) {
  const s = Math.max(0, Math.floor(secs));
  const d = Math.floor(s / 86400), hr = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60), sec = s % 60;
  const two = (/** @type {number} */ n) => String(n).padStart(2, "0");
  if (d > 0) return `${d}d${hr}h`;
  if (hr > 0) return `${hr}h${two(m)}m`;
  if (m > 0) return `${m}m${two(sec)}s`;
  return `${sec}s`;
}

/**
 * A state badge; the state is in the text (never only in the colour).
 * @param {string | undefined} state
 */
export function badge(state) {
  const s = state ?? "Unknown";
  return h(`span.badge.state-${s}`, null, s);
}

/**
 * A small live region for messages (errors, conflicts, confirmations).
 * @param {string} kind "error" | "ok" | "info"
 * @param {string | Node} text
 */
export function notice(kind, text) {
  return h(`div.notice.${kind}`, { role: kind === "error" ? "alert" : "status" }, text);
}
