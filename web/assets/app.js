// The portal's entry: sign-in (a token in session storage, or a `#token=` link), the fleet's
// clock, one live event stream shared by every page, and the router that gives every page its
// own URL. Pages are modules under pages/: `render(ctx, root, params)` draws the page and
// returns what to undo when the page is left.

import { Api, ApiError, storeToken, storedToken, takeTokenFromFragment } from "./api.js";
import { h, notice, replace } from "./dom.js";

/** @typedef {"read" | "operate" | "approve" | "admin"} Need */

/**
 * Fleet time as the daemon tells it, run forward locally at its scale (a demo's clock runs
 * faster than real time), so that countdowns tick without asking the server.
 */
export class FleetClock {
  /**
   * @param {string} fleetTime the daemon's fleet time, as an answer said it
   * @param {number} scale fleet seconds per real second
   * @param {number} [sent] `performance.now()` when that request was sent
   */
  constructor(fleetTime, scale, sent) {
    this.base = 0;
    this.real = 0;
    this.scale = 1;
    this.set(fleetTime, scale, sent);
  }
  /**
   * The daemon read `fleetTime` somewhere between sending the request and reading its answer:
   * taken at the middle, so that a slow answer under a fast clock (60×: a second is a minute)
   * does not put every countdown behind by the whole round trip.
   * @param {string} fleetTime @param {number} scale @param {number} [sent]
   */
  set(fleetTime, scale, sent) {
    const now = performance.now();
    this.base = Date.parse(fleetTime);
    this.real = sent === undefined ? now : (sent + now) / 2;
    this.scale = scale;
  }
  /** Fleet time now, in ms since the epoch. */
  now() {
    return this.base + (performance.now() - this.real) * this.scale;
  }
}

/** Every page gets this. */
export class Ctx {
  /**
   * @param {Api} api
   * @param {{ name: string, role: string }} caller
   * @param {FleetClock} clock
   */
  constructor(api, caller, clock) {
    this.api = api;
    this.caller = caller;
    this.clock = clock;
    /** @type {Set<(e: import("../types").FleetEvent, seq: number) => void>} */
    this.listeners = new Set();
  }
  /** @param {Need} need */
  can(need) {
    const r = this.caller.role;
    if (need === "read") return true;
    if (r === "admin") return true;
    return (need === "operate" && r === "operator") || (need === "approve" && r === "approver");
  }
  /**
   * Calls `fn` for every new fleet event (with its sequence number) until the returned function
   * is called. The whole portal shares one event stream: a browser allows few connections to
   * one HTTP/1.1 server, and several tabs each with several streams would use them all.
   * @param {(e: import("../types").FleetEvent, seq: number) => void} fn
   */
  onEvent(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }
  /** @param {string} path */
  navigate(path) {
    history.pushState(null, "", path);
    void route();
  }
}

/** @typedef {(ctx: Ctx, root: HTMLElement, params: Record<string, string>) => (void | (() => void)) | Promise<void | (() => void)>} Render */

/** @type {[RegExp, string, () => Promise<{ render: Render }>][]} */
const ROUTES = [
  [/^\/$/, "Runs", () => import("./pages/runs.js")],
  [/^\/runs$/, "Runs", () => import("./pages/runs.js")],
  [/^\/runs\/(?<name>[^/]+)$/, "Run", () => import("./pages/run.js")],
  [/^\/fleet$/, "Fleet", () => import("./pages/fleet.js")],
  [/^\/approvals$/, "Approvals", () => import("./pages/approvals.js")],
  [/^\/strategies$/, "Strategies", () => import("./pages/strategies.js")],
  [/^\/strategies\/(?<name>[^/]+)$/, "Editor", () => import("./pages/editor.js")],
  [/^\/editor$/, "Editor", () => import("./pages/editor.js")],
  [/^\/simulate$/, "Simulate", () => import("./pages/simulate.js")],
  [/^\/profiles$/, "Profiles", () => import("./pages/profiles.js")],
  [/^\/webhooks$/, "Webhooks", () => import("./pages/webhooks.js")],
  [/^\/audit$/, "Audit", () => import("./pages/audit.js")],
];

/** @type {Ctx | null} */
let ctx = null;
/** @type {(() => void) | null} */
let leave = null;
let generation = 0;
let firstRoute = true;

async function route() {
  const main = /** @type {HTMLElement} */ (document.getElementById("main"));
  leave?.();
  leave = null;
  const mine = ++generation;
  if (!ctx) return;
  const path = location.pathname;
  const found = ROUTES.find(([re]) => re.test(path));
  for (const a of document.querySelectorAll("a[data-nav]")) {
    const href = a.getAttribute("href") ?? "";
    const current = path === href || path.startsWith(`${href}/`) || (path === "/" && href === "/runs");
    if (current) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  if (!found) {
    replace(main, h("h1", null, "Not found"), notice("error", `The portal has no page ${path}.`));
    return;
  }
  const [re, title, load] = found;
  const params = /** @type {Record<string, string>} */ ({});
  for (const [k, v] of Object.entries(re.exec(path)?.groups ?? {})) {
    try {
      params[k] = decodeURIComponent(v);
    } catch {
      replace(main, h("h1", null, "Not found"), notice("error", `${path} is not a valid address (bad percent-encoding).`));
      return;
    }
  }
  document.title = `${params.name ? `${params.name} · ` : ""}${title} · waverun`;
  replace(main, h("p.hint", { role: "status" }, "Loading…"));
  try {
    const page = await load();
    if (mine !== generation) return;
    const root = h("div");
    replace(main, root);
    const undo = await page.render(ctx, root, params);
    if (mine !== generation) {
      if (undo) undo();
      return;
    }
    leave = undo || null;
  } catch (e) {
    if (mine !== generation) return;
    replace(main, h("h1", null, title), notice("error", describe(e)));
  }
  // After a navigation, focus moves to the new page (a screen reader announces it); the first
  // page of a visit leaves focus where the browser put it, so Tab reaches the skip link first.
  if (!firstRoute) main.focus({ preventScroll: true });
  firstRoute = false;
}

/** @param {unknown} e */
export function describe(e) {
  if (e instanceof ApiError) return e.explain();
  return e instanceof Error ? e.message : String(e);
}

/** The sign-in form: a token, kept in this tab's session storage only. */
function signIn(/** @type {string} */ why) {
  const main = /** @type {HTMLElement} */ (document.getElementById("main"));
  const input = h("input#token", { type: "password", autocomplete: "current-password", required: true, "aria-describedby": "token-hint" });
  const form = h("form.panel", {
    onsubmit: (/** @type {SubmitEvent} */ ev) => {
      ev.preventDefault();
      storeToken(/** @type {HTMLInputElement} */ (input).value.trim());
      void boot();
    },
  },
  h("label", { for: "token" }, "API token"),
  input,
  h("p.hint#token-hint", null, "A token from the daemon's config (the demo prints a link that signs in). "
    + "It stays in this tab's session storage and is sent only in the Authorization header."),
  h("button.primary", { type: "submit" }, "Sign in"));
  replace(main, h("h1", null, "Sign in"), why ? notice("error", why) : null, form);
  input.focus();
}

async function refreshFleet() {
  if (!ctx) return;
  try {
    const sent = performance.now();
    const { body } = await Api.call("GET", "/api/v1/fleets");
    const f = body.value[0];
    ctx.clock.set(f.properties.fleetTime, f.properties.timeScale, sent);
  } catch {
    // The next refresh tries again; the pages show their own errors.
  }
}

async function refreshPending() {
  if (!ctx) return;
  const badge = document.getElementById("pending-count");
  if (!badge) return;
  try {
    const gates = await ctx.api.list("/gates?$filter=state%20eq%20Pending");
    badge.hidden = gates.length === 0;
    badge.textContent = String(gates.length);
    badge.setAttribute("aria-label", `${gates.length} pending`);
  } catch {
    badge.hidden = true;
  }
}

/** @type {{ close(): void } | null} */
let stream = null;

async function boot() {
  takeTokenFromFragment();
  stream?.close();
  ctx = null;
  const who = /** @type {HTMLElement} */ (document.getElementById("who"));
  replace(who);
  let fleet;
  const sent = performance.now();
  try {
    fleet = (await Api.call("GET", "/api/v1/fleets")).body.value[0];
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      const had = storedToken() !== null;
      storeToken(null);
      signIn(had ? e.explain() : "");
      return;
    }
    signIn(`The daemon did not answer: ${describe(e)}`);
    return;
  }
  const p = fleet.properties;
  ctx = new Ctx(new Api(fleet.name), p.caller, new FleetClock(p.fleetTime, p.timeScale, sent));
  const live = h("span.hint", { title: "Live updates" }, "");
  replace(who,
    h("span", null, `fleet ${fleet.name}`),
    live,
    h("span", null, `${p.caller.name} (${p.caller.role})`),
    storedToken() ? h("button", { type: "button", onclick: () => { storeToken(null); location.assign("/"); } }, "Sign out") : null);
  const c = ctx;
  let pendingTimer = 0;
  stream = c.api.follow({
    after: p.lastEventSeq,
    onEvent: (e, seq) => {
      for (const fn of c.listeners) fn(e, seq);
      // At most one refresh in flight per 300 ms, however fast events come.
      if ((e.kind.startsWith("Gate") || e.kind.startsWith("Run")) && !pendingTimer) {
        pendingTimer = window.setTimeout(() => { pendingTimer = 0; void refreshPending(); }, 300);
      }
    },
    onState: (s) => {
      if (s === "failed") {
        // The token was revoked or the fleet is gone: back to sign-in, saying why.
        void boot();
        return;
      }
      live.textContent = s === "live" ? "● live" : "○ reconnecting…";
    },
  });
  void refreshPending();
  await route();
}

document.addEventListener("click", (ev) => {
  const a = /** @type {Element | null} */ (ev.target instanceof Element ? ev.target.closest("a") : null);
  if (!a || ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
  const href = a.getAttribute("href");
  if (!href || !href.startsWith("/") || href.startsWith("/api/") || a.hasAttribute("download")) return;
  ev.preventDefault();
  ctx?.navigate(href);
});
window.addEventListener("popstate", () => void route());
// A `#token=` link opened in a tab that is already open changes only the fragment.
window.addEventListener("hashchange", () => {
  if (/(?:^#|&)token=/.test(location.hash)) void boot();
});
setInterval(refreshFleet, 30_000);
void boot();
