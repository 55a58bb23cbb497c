// The timeline (Gantt) of a run: one row per member under its stage and group, a bar per
// upgrade (coloured and labelled by outcome), maintenance windows shaded, gates and after-stage
// waits marked, the forecast dashed beyond "now". Rows are virtualised: only those in view are
// drawn, so a 10,000-member run scrolls as lightly as a small one.

import { fmtTime, h } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
const ROW = 22;
const LABEL = 230;
const AXIS = 28;

/** @typedef {{ start: number, end: number, cls: string, title: string }} Bar */
/** @typedef {{ start: number, end: number }} Span */
/** @typedef {{ kind: "section" | "member", label: string, member?: string, bars: Bar[], shades: Span[] }} Row */
/** @typedef {{ at: number, label: string, row?: string }} Mark */
/** @typedef {{ rows: Row[], marks: Mark[], now?: number, from: number, to: number }} Chart */

/**
 * @param {string} tag
 * @param {Record<string, string | number>} attrs
 * @param {string} [text]
 */
function s(tag, attrs, text) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

/**
 * Rows from a run's status tree and its events (the scenario-format vocabulary: the report's
 * `timeline` or the API's events): sections for stages and groups, bars from `MemberStarted` to
 * the member's end (`MemberCompleted`, `MemberFailed`, `MemberSkipped`), open bars up to `now`.
 * @param {import("../types").RunStatus | undefined} status
 * @param {import("../types").FleetEvent[]} events
 * @param {number} now
 * @returns {{ rows: Row[], marks: Mark[], first: number, last: number }}
 */
export function fromEvents(status, events, now) {
  /** @type {Map<string, Bar[]>} */
  const bars = new Map();
  /** @type {Map<string, number>} */
  const open = new Map();
  /** @type {Mark[]} */
  const marks = [];
  let first = Infinity, last = -Infinity;
  for (const e of events) {
    const at = Date.parse(e.at);
    first = Math.min(first, at);
    last = Math.max(last, at);
    const m = e.member;
    if (e.kind === "MemberStarted" && m) open.set(m, at);
    else if (m && (e.kind === "MemberCompleted" || e.kind === "MemberFailed" || e.kind === "MemberSkipped")) {
      const start = open.get(m);
      open.delete(m);
      if (start === undefined) continue;
      const cls = e.kind === "MemberCompleted" ? "bar-Completed" : e.kind === "MemberFailed" ? "bar-Failed" : "bar-Skipped";
      const list = bars.get(m) ?? [];
      list.push({ start, end: at, cls, title: `${m}: ${e.kind.slice(6)} ${fmtTime(start)} → ${fmtTime(at)}` });
      bars.set(m, list);
    } else if (e.kind === "GateCreated" || e.kind === "GateCompleted") {
      const where = [e.stage, e.group].filter(Boolean).join("/");
      marks.push({ at, label: `${e.kind === "GateCreated" ? "gate waits" : `gate approved${e.by ? ` by ${e.by}` : ""}`} ${where}`.trim() });
    } else if (e.kind === "CheckStarted" || e.kind === "CheckCompleted" || e.kind === "GateFailed") {
      // Soaks and checks: when a check starts (and until when it soaks), its verdict.
      const where = [e.stage, e.group, e.member].filter(Boolean).join("/");
      const what = e.kind === "CheckStarted"
        ? `check ${e.check ?? ""}${e.until ? ` (soak until ${fmtTime(Date.parse(e.until))})` : ""}`
        : e.kind === "CheckCompleted" ? `check ${e.check ?? ""} ${e.verdict ?? ""}` : "gate failed";
      marks.push({ at, label: `${what} ${where}`.trim() });
    } else if (e.kind === "AfterStageWaitStarted" || e.kind === "AfterStageWaitCompleted") {
      marks.push({ at, label: `${e.kind === "AfterStageWaitStarted" ? "wait after" : "wait over"} ${e.stage ?? ""}`.trim() });
    }
  }
  for (const [m, start] of open) {
    const list = bars.get(m) ?? [];
    list.push({ start, end: Math.max(now, start), cls: "bar-Running", title: `${m}: upgrading since ${fmtTime(start)}` });
    bars.set(m, list);
  }
  /** @type {Row[]} */
  const rows = [];
  for (const stage of status?.stages ?? []) {
    rows.push({ kind: "section", label: `stage ${stage.name}`, bars: [], shades: [] });
    for (const group of stage.groups) {
      rows.push({ kind: "section", label: `  group ${group.name}`, bars: [], shades: [] });
      for (const member of group.members) {
        rows.push({ kind: "member", label: member.name, member: member.name, bars: bars.get(member.name) ?? [], shades: [] });
      }
    }
  }
  return { rows, marks, first, last };
}

/**
 * Draws the chart into `root` (replacing what was there) and keeps it drawn while it scrolls.
 * @param {HTMLElement} root
 * @param {Chart} chart
 * @param {string} label what the chart shows, for assistive technology
 */
export function drawGantt(root, chart, label) {
  const width = Math.max(640, (root.clientWidth || 900) - 2);
  const span = Math.max(1, chart.to - chart.from);
  const x = (/** @type {number} */ t) => LABEL + ((t - chart.from) / span) * (width - LABEL - 8);
  const height = chart.rows.length * ROW;
  const viewport = h("div.gantt", { role: "img", "aria-label": label, tabindex: "0" });
  viewport.style.maxHeight = "70vh";
  const axis = s("svg", { width, height: AXIS, class: "axis-svg" });
  const ticks = Math.max(1, Math.min(8, Math.floor((width - LABEL) / 120)));
  for (let i = 0; i <= ticks; i++) {
    const t = chart.from + (span * i) / ticks;
    const tx = x(t);
    axis.appendChild(s("line", { x1: tx, x2: tx, y1: AXIS - 6, y2: AXIS, class: "axis" }));
    const anchor = i === 0 ? "start" : i === ticks ? "end" : "middle";
    axis.appendChild(s("text", { x: tx, y: 14, "text-anchor": anchor }, fmtTime(t).slice(5, 16).replace("T", " ")));
  }
  const head = h("div");
  head.style.position = "sticky";
  head.style.top = "0";
  head.style.background = "var(--bg)";
  head.style.zIndex = "1";
  head.appendChild(axis);
  const body = h("div");
  body.style.position = "relative";
  body.style.height = `${height}px`;
  viewport.append(head, body);

  const draw = () => {
    const top = Math.max(0, viewport.scrollTop - AXIS);
    const firstRow = Math.max(0, Math.floor(top / ROW) - 5);
    const lastRow = Math.min(chart.rows.length, Math.ceil((top + (viewport.clientHeight || 600)) / ROW) + 5);
    const svg = s("svg", { width, height: (lastRow - firstRow) * ROW });
    svg.style.position = "absolute";
    svg.style.top = `${firstRow * ROW}px`;
    svg.style.left = "0";
    // Windows first, under the rows: consecutive rows with the same windows (one list, shared)
    // get one band per opening, not one per row (a month of daily windows over 50 rows would
    // be 1,500 shapes drawn at every scroll step).
    for (let i = firstRow; i < lastRow;) {
      const shades = chart.rows[i].shades;
      let j = i + 1;
      while (j < lastRow && chart.rows[j].shades === shades) j++;
      for (const sh of shades) {
        if (!Number.isFinite(sh.start) || !Number.isFinite(sh.end)) continue;
        const a = Math.max(x(sh.start), LABEL), b = Math.min(x(sh.end), width);
        if (b > a) svg.appendChild(s("rect", { x: a, y: (i - firstRow) * ROW + 1, width: b - a, height: (j - i) * ROW - 2, class: "shade" }));
      }
      i = j;
    }
    for (let i = firstRow; i < lastRow; i++) {
      const row = chart.rows[i];
      const y = (i - firstRow) * ROW;
      if (row.kind === "section") {
        svg.appendChild(s("text", { x: 4, y: y + 15, class: "section" }, row.label));
        continue;
      }
      svg.appendChild(s("text", { x: 14, y: y + 15 }, row.label));
      for (const bar of row.bars) {
        if (!Number.isFinite(bar.start) || !Number.isFinite(bar.end)) continue;
        const a = Math.max(x(bar.start), LABEL), b = Math.max(a + 2, x(bar.end));
        const r = s("rect", { x: a, y: y + 5, width: b - a, height: ROW - 10, rx: 2, class: bar.cls });
        r.appendChild(s("title", {}, bar.title));
        svg.appendChild(r);
      }
    }
    const all = (lastRow - firstRow) * ROW;
    for (const m of chart.marks) {
      const mx = x(m.at);
      const line = s("line", { x1: mx, x2: mx, y1: 0, y2: all, class: "mark" });
      line.appendChild(s("title", {}, `${fmtTime(m.at)} ${m.label}`));
      svg.appendChild(line);
    }
    if (chart.now !== undefined && chart.now >= chart.from && chart.now <= chart.to) {
      const nx = x(chart.now);
      const line = s("line", { x1: nx, x2: nx, y1: 0, y2: all, class: "now" });
      line.appendChild(s("title", {}, `now ${fmtTime(chart.now)}`));
      svg.appendChild(line);
    }
    body.replaceChildren(svg);
  };
  let queued = false;
  viewport.addEventListener("scroll", () => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => { queued = false; draw(); });
  });
  root.replaceChildren(
    h("div.legend", null,
      h("span", null, h("span.sw.ok-sw"), "upgraded"),
      h("span", null, h("span.sw.bad-sw"), "failed"),
      h("span", null, h("span.sw.run-sw"), "upgrading"),
      h("span", null, h("span.sw.forecast-sw"), "forecast (dashed)"),
      h("span", null, h("span.sw.window-sw"), "maintenance window open"),
      h("span", null, "│ gates and after-stage waits (amber), now (red)")),
    viewport);
  draw();
}
