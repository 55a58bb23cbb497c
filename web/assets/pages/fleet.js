// The fleet: every member with its versions, node images, region, labels, the next opening of
// its maintenance windows and the run that holds it; filtered by a label selector in the
// strategies' syntax, checked live by the engine in the browser. Rows are virtualised.

import { describe } from "../app.js";
import { h, notice, replace, shortTime } from "../dom.js";
import { EngineError, select, windows } from "../engine.js";
import { Paced } from "../pace.js";
import { VirtualList } from "../virtual.js";

/** @typedef {import("../app.js").Ctx} Ctx */

/**
 * @param {Ctx} ctx
 * @param {HTMLElement} root
 */
export async function render(ctx, root) {
  /** @type {any[]} */
  let members = [];
  /** @type {any[]} */
  let shown = [];
  /** @type {Map<string, string>} */
  const openings = new Map();
  const input = h("input#selector", { type: "search", placeholder: "env in (prod, staging), geo!=asia", "aria-describedby": "selector-help selector-error", autocomplete: "off", size: 48 });
  const error = h("div#selector-error", { "aria-live": "polite" });
  const countLine = h("p.hint", { "aria-live": "polite" });
  const cols = "minmax(140px,1.2fr) 100px 120px minmax(240px,2fr) minmax(150px,1.4fr) minmax(170px,1.4fr) 130px";
  const columns = ["Member", "Kubernetes", "Region", "Node images", "Labels", "Next window opening", "Held by run"];
  // The header is for the eye; a screen reader hears each cell's column name inside the row
  // (a virtual list is a list, not a table: its rows come and go as it scrolls).
  const header = h("div.node", { style: `display:grid;grid-template-columns:${cols};gap:.25rem;font-weight:600;padding:0 .5rem`, "aria-hidden": "true" },
    ...columns.map((c) => h("span", null, c)));
  /** A cell: its column's name for screen readers, then what it shows. */
  const cell = (/** @type {number} */ col, /** @type {Record<string, string>} */ attrs, /** @type {Node | string} */ content) =>
    h("span", attrs, col ? h("span.sr-only", null, `${columns[col]}: `) : "", content);
  const list = new VirtualList({
    rowHeight: 30, count: 0, label: "Members",
    render: (i) => {
      const m = shown[i];
      const s = m.properties.status ?? {};
      const labels = Object.entries(m.properties.labels ?? {}).map(([k, v]) => `${k}=${v}`).join(" ");
      const images = (s.nodePools ?? []).map((/** @type {any} */ p) => `${p.name}: ${p.imageVersion ?? "?"}`).join(", ");
      const clip = "overflow:hidden;text-overflow:ellipsis";
      return h("div", { style: `display:grid;grid-template-columns:${cols};align-items:center;gap:.25rem` },
        h("span.name", { title: m.name }, m.name),
        cell(1, {}, s.kubernetesVersion ?? "?"),
        cell(2, {}, s.region ?? ""),
        cell(3, { title: images, style: clip }, images),
        cell(4, { title: labels, style: clip }, labels),
        cell(5, {}, openings.get(m.name) ?? ""),
        cell(6, {}, s.leaseHolder ? h("a", { href: `/runs/${encodeURIComponent(s.leaseHolder)}` }, s.leaseHolder) : h("span.hint", null, "—")));
    },
  });
  root.append(
    h("h1", null, "Fleet"),
    h("label", { for: "selector" }, "Filter by label selector"),
    input,
    h("p.hint#selector-help", null, "The syntax of a strategy's memberSelector: key=value, key!=value, key in (a, b), key notin (a), key, !key; terms separated by commas."),
    error, countLine, header, list.el);

  let filterSeq = 0;
  async function filter() {
    // The fleet is filtered once it is all read (the first load says so meanwhile).
    if (!loaded) return;
    const mine = ++filterSeq;
    const text = /** @type {HTMLInputElement} */ (input).value;
    if (!text.trim()) {
      shown = members;
      input.removeAttribute("aria-invalid");
      replace(error);
    } else {
      try {
        const names = new Set(await select(text, members.map((m) => ({ name: m.name, labels: m.properties.labels ?? {} }))));
        if (mine !== filterSeq) return; // a newer filter (or a reload) was asked meanwhile
        shown = members.filter((m) => names.has(m.name));
        input.removeAttribute("aria-invalid");
        replace(error);
      } catch (e) {
        if (mine !== filterSeq) return;
        input.setAttribute("aria-invalid", "true");
        replace(error, h("p.field-error", null, e instanceof EngineError ? `${e.path}: ${e.message}` : describe(e)));
        return;
      }
    }
    countLine.textContent = `${shown.length} of ${members.length} members`;
    list.setCount(shown.length);
  }

  async function nextOpenings() {
    const now = ctx.clock.now();
    /** @type {Map<string, string>} */
    const byWindow = new Map();
    for (const m of members) {
      const w = m.properties.status?.maintenance?.kubernetes;
      if (!w) { openings.set(m.name, "always open"); continue; }
      const key = JSON.stringify(w);
      if (!byWindow.has(key)) {
        try {
          const open = await windows({ kubernetes: w }, now, now + 60 * 86400_000);
          const first = open.kubernetes?.[0];
          byWindow.set(key, !first ? "not within 60 days" : Date.parse(first.start) <= now + 1000 ? `open now, until ${shortTime(first.end)}` : shortTime(first.start));
        } catch (e) {
          byWindow.set(key, describe(e));
        }
      }
      openings.set(m.name, byWindow.get(key) ?? "");
    }
    list.update();
  }

  let loaded = false;
  /** Reads the whole fleet; the first time, its first pages are shown as they come (the list
   * of 100,000 members is 100 pages), unfiltered and said to be partial. */
  async function load() {
    try {
      members = await ctx.api.list("/members", (sofar) => {
        if (loaded) return;
        const filtering = /** @type {HTMLInputElement} */ (input).value.trim() !== "";
        shown = filtering ? [] : sofar;
        countLine.textContent = `${sofar.length} members read so far…${filtering ? " (filtered once all are read)" : ""}`;
        list.setCount(shown.length);
      });
    } catch (e) {
      if (!loaded) {
        shown = [];
        list.setCount(0);
        countLine.textContent = "";
      }
      replace(error, notice("error", describe(e)));
      return;
    }
    loaded = true;
    await filter();
    void nextOpenings();
  }
  let t = 0;
  input.addEventListener("input", () => { clearTimeout(t); t = window.setTimeout(() => void filter(), 150); });
  // The fleet is read again as its events come: every second at most, and never more often
  // than five times as long as the last read took (100,000 members take seconds to read: the
  // daemon is not kept reading the fleet for one tab).
  const reload = new Paced(load, { wait: 1000, every: 1000, factor: 5 });
  await reload.run();
  const off = ctx.onEvent((e) => {
    if (!e.kind.startsWith("Member") && !e.kind.startsWith("Run")) return;
    reload.soon();
  });
  return () => { off(); reload.stop(); };
}
