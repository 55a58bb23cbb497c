// One run: its header (state, progress, failures, forecast finish), the actions the caller's
// role allows (each with If-Match), and three views — the tree of stage → group → member with
// why and until when every waiting node waits (a live countdown), the timeline, and the event
// log. The run's own event stream (from its first event) keeps all three current.

import { ApiError } from "../api.js";
import { describe } from "../app.js";
import { badge, h, notice, replace, shortTime, span } from "../dom.js";
import { forecasts, windows } from "../engine.js";
import { drawGantt, fromEvents } from "../gantt.js";
import { approveGate, failGate } from "../gates.js";
import { Paced } from "../pace.js";
import { VirtualList } from "../virtual.js";

/** @typedef {import("../app.js").Ctx} Ctx */
/** @typedef {import("../../types").Resource<import("../../types").RunProperties>} Run */
/** @typedef {import("../../types").WaitingOn} WaitingOn */
/** @typedef {import("../../types").GateRef} GateRef */

/**
 * A row of the tree.
 * @typedef {{ depth: number, kind: "stage" | "group" | "member" | "gate" | "wait", name: string,
 *   target?: string, state: string, message?: string, waiting?: WaitingOn, limits?: string,
 *   gateId?: string, gateType?: string, extra?: string, checks?: string }} TreeRow
 */

const DONE = new Set(["Completed", "Failed", "Skipped", "Stopped"]);

/**
 * `VersionNotInRegion until 2026-12-04 00:00Z (in 21h30m fleet time; 39s real) — message`.
 * @param {WaitingOn} w
 * @param {Ctx} ctx
 */
export function waitingText(w, ctx) {
  let text = w.reason;
  if (w.until) {
    const secs = (Date.parse(w.until) - ctx.clock.now()) / 1000;
    const scale = ctx.clock.scale;
    const left = secs <= 0 ? "due now"
      : scale === 1 ? `in ${span(secs)}` : `in ${span(secs)} fleet time; ${span(secs / scale)} real`;
    text += ` until ${shortTime(w.until)} (${left})`;
  }
  if (w.message) text += ` — ${w.message}`;
  return text;
}

/**
 * `check error-rate: 2 of 3 measured, last Pass 0.001 → Pass`: a check's progress for the tree.
 * @param {import("../../types").CheckNode} c
 */
export function checkText(c) {
  let text = `check ${c.name}: ${c.taken} of ${c.count} measured`;
  if (c.last) text += `, last ${c.last.verdict}${c.last.value !== undefined ? ` ${c.last.value}` : ""}`;
  if (c.verdict) text += ` → ${c.verdict}`;
  return text;
}

/**
 * @param {import("../../types").RunStatus | undefined} status
 * @returns {TreeRow[]}
 */
export function treeRows(status) {
  /** @type {TreeRow[]} */
  const rows = [];
  /** @param {GateRef[] | undefined} gates @param {number} depth @param {string} when */
  const gates = (gates, depth, when) => {
    for (const g of gates ?? []) {
      rows.push({ depth, kind: "gate", name: g.displayName || `${when} gate`, state: g.status.state, gateId: g.gateId, extra: when,
        gateType: g.gateType, checks: g.check ? checkText(g.check) : undefined });
    }
  };
  /** @param {{ failureCount?: number, maxAllowedFailures?: number, maxConcurrency?: number }} n */
  const limits = (n) => [
    n.failureCount !== undefined ? `failures ${n.failureCount} of ${n.maxAllowedFailures ?? 0} allowed` : "",
    n.maxConcurrency !== undefined ? `concurrency ${n.maxConcurrency}` : "",
  ].filter(Boolean).join(" · ");
  for (const st of status?.stages ?? []) {
    rows.push({ depth: 0, kind: "stage", name: st.name, target: `Stage:${st.name}`, state: st.status.state, waiting: st.waitingOn, limits: limits(st) });
    gates(st.beforeGates, 1, "before");
    for (const g of st.groups) {
      rows.push({ depth: 1, kind: "group", name: g.name, target: `Group:${g.name}`, state: g.status.state, waiting: g.waitingOn, limits: limits(g) });
      gates(g.beforeGates, 2, "before");
      for (const m of g.members) {
        const versions = m.fromVersion || m.toVersion ? `${m.fromVersion ?? "?"} → ${m.toVersion ?? "?"}` : "";
        rows.push({ depth: 2, kind: "member", name: m.name, target: `Member:${m.name}`, state: m.status.state, waiting: m.waitingOn,
          message: m.status.error?.message ?? m.message, extra: versions,
          checks: m.checks?.length ? m.checks.map(checkText).join(" · ") : undefined });
      }
      gates(g.afterGates, 2, "after");
    }
    gates(st.afterGates, 1, "after");
    const w = st.afterStageWaitStatus;
    if (w && (w.waitDurationInSeconds ?? 0) > 0) {
      rows.push({ depth: 1, kind: "wait", name: `${span(w.waitDurationInSeconds ?? 0)} after ${st.name}`, target: `AfterStageWait:${st.name}`,
        state: w.status.state, waiting: w.waitingOn });
    }
  }
  return rows;
}

/**
 * @param {Ctx} ctx
 * @param {HTMLElement} root
 * @param {Record<string, string>} params
 */
export async function render(ctx, root, params) {
  const name = params.name;
  /** @type {Run} */
  let run = (await ctx.api.get(`/updateRuns/${encodeURIComponent(name)}`)).body;
  let etag = run.eTag ?? "";
  /** @type {import("../../types").FleetEvent[]} */
  const events = [];
  /** @type {any} */
  let forecast = null;
  /** @type {Set<string>} */
  const selected = new Set();
  let tab = "tree";
  /** @type {TreeRow[]} */
  let rows = treeRows(run.properties.status);

  const head = h("div");
  const actions = h("div.row", { role: "group", "aria-label": "Run actions" });
  const messages = h("div", { "aria-live": "polite" });
  const tabs = h("div.tabs", { role: "tablist", "aria-label": "Views of the run" });
  const panel = h("div", { role: "tabpanel", id: "run-view", tabindex: "0" });
  root.append(head, actions, messages, tabs, panel);

  const tree = new VirtualList({ rowHeight: 30, count: rows.length, label: `The stages, groups and members of ${name}`, render: (i) => treeRow(rows[i]) });
  const log = new VirtualList({ rowHeight: 22, count: 0, label: `Events of ${name}`, render: (i) => eventRow(events[i]) });

  /** @param {TreeRow} r */
  function treeRow(r) {
    const key = r.target ?? `gate:${r.gateId}`;
    const box = r.target && ctx.can("operate") && !DONE.has(r.state) && r.kind !== "gate"
      ? h("input", { type: "checkbox", "aria-label": `select ${r.target} to skip`, checked: selected.has(r.target), "data-focus-key": key,
        onchange: (/** @type {Event} */ ev) => {
          const on = /** @type {HTMLInputElement} */ (ev.target).checked;
          if (r.target) { if (on) selected.add(r.target); else selected.delete(r.target); }
          actionsDrawn = "";
          redraw();
        } })
      : null;
    const approveButton = r.kind === "gate" && r.state === "Pending" && r.gateId && ctx.can("approve")
      ? h("button.primary", { type: "button", "data-focus-key": `approve:${r.gateId}`, onclick: () => void approve(/** @type {string} */ (r.gateId)) }, "Approve")
      : null;
    // An inconclusive health check waits for a person, who may also judge it unhealthy.
    const failButton = r.kind === "gate" && r.gateType === "HealthCheck" && r.state === "Pending" && r.gateId && ctx.can("approve")
      ? h("button", { type: "button", "data-focus-key": `fail:${r.gateId}`, onclick: () => void fail(/** @type {string} */ (r.gateId)) }, "Fail")
      : null;
    return h(`div.node.depth-${r.depth}`, { "data-row": key },
      // Operators get a column of checkboxes; rows that cannot be skipped keep its width.
      ctx.can("operate") ? h("span.box", null, box) : null,
      r.kind === "member" ? null : h("span.kind", null, r.kind === "wait" ? "wait" : r.kind === "gate" ? `${r.extra} gate` : r.kind),
      h("span.name", null, r.name),
      badge(r.state),
      r.extra && r.kind !== "gate" ? h("span.limits", null, r.extra) : null,
      r.limits ? h("span.limits", null, r.limits) : null,
      r.waiting ? h("span.wait", null, "waiting: ", h("span.until", { "data-key": key }, waitingText(r.waiting, ctx))) : null,
      !r.waiting && r.message ? h("span.hint", null, r.message) : null,
      r.checks ? h("span.hint.checks", null, r.checks) : null,
      approveButton, failButton);
  }

  /** @param {import("../../types").FleetEvent} e */
  function eventRow(e) {
    const where = [e.stage, e.group, e.member].filter(Boolean).join("/");
    const err = typeof e.error === "object" && e.error ? `${e.error.code}: ${e.error.message}` : e.error ?? "";
    return h("div.events", null, h("code", null,
      `${shortTime(e.at)}  ${e.kind.padEnd(24)} ${where}${e.reason ? `  ${e.reason}` : ""}${e.until ? ` until ${shortTime(e.until)}` : ""}`
      + `${e.by ? `  by ${e.by}` : ""}${err ? `  ${err}` : ""}${e.message ? `  — ${e.message}` : ""}`));
  }

  function progress() {
    let total = 0, done = 0, failed = 0, skipped = 0, unfinished = 0;
    for (const st of run.properties.status?.stages ?? []) {
      for (const g of st.groups) {
        for (const m of g.members) {
          total++;
          if (DONE.has(m.status.state)) done++;
          if (m.status.state === "Failed") failed++;
          if (m.status.state === "Skipped") skipped++;
          if (m.status.state !== "Completed") unfinished++;
        }
      }
    }
    return { total, done, failed, skipped, unfinished };
  }

  function drawHead() {
    const st = run.properties.status;
    const p = progress();
    const mcu = run.properties.managedClusterUpdate;
    const target = mcu.upgrade.kubernetesVersion ? `Kubernetes ${mcu.upgrade.kubernetesVersion}` : "node images";
    replace(head,
      h("h1", null, h("span", null, `Run ${name}`), badge(st?.status.state)),
      h("dl.facts", null,
        h("dt", null, "upgrade"), h("dd", null, `${mcu.upgrade.type} → ${target}${mcu.nodeImageSelection ? `, node images ${mcu.nodeImageSelection.type}` : ""}`),
        h("dt", null, "progress"), h("dd", null,
          h("span.progress", { role: "progressbar", "aria-valuemin": 0, "aria-valuemax": p.total, "aria-valuenow": p.done, "aria-label": "members done" },
            h("span", { style: `width:${p.total ? (100 * p.done) / p.total : 0}%` })),
          ` ${p.done} of ${p.total} members done`,
          // Done is not all upgraded: say how many of them failed or were skipped.
          p.failed || p.skipped ? ` (${[p.failed ? `${p.failed} failed` : "", p.skipped ? `${p.skipped} skipped` : ""].filter(Boolean).join(", ")})` : ""),
        h("dt", null, "failures"), h("dd", null, `${st?.failureCount ?? p.failed}`),
        h("dt", null, "started"), h("dd", null, shortTime(st?.status.startTime) || "not yet"),
        st?.status.completedTime ? [h("dt", null, "ended"), h("dd", null, shortTime(st.status.completedTime))] : null,
        forecast?.expectedFinish && !DONE.has(st?.status.state ?? "")
          ? [h("dt", null, "expected finish"), h("dd", null, `${shortTime(forecast.expectedFinish)} (forecast ${forecast.where === "browser" ? "simulated in this browser" : "by the daemon"}, upgrades of ${forecast.assumptions?.upgradeMinutes ?? "?"} min: ${forecast.assumptions?.basis ?? ""})`)] : null,
        st?.waitingOn ? [h("dt", null, "waiting"), h("dd.wait", null, waitingText(st.waitingOn, ctx))] : null,
        st?.status.error ? [h("dt", null, "error"), h("dd", null, `${st.status.error.code}: ${st.status.error.message}`)] : null,
        run.properties.updateStrategyId ? [h("dt", null, "strategy"), h("dd", null, run.properties.updateStrategyId)] : null));
  }

  function drawActions() {
    const state = run.properties.status?.status.state ?? "NotStarted";
    if (!ctx.can("operate")) {
      replace(actions);
      return;
    }
    /** @param {string} label @param {() => Promise<void>} fn @param {string} [cls] */
    const button = (label, fn, cls = "") => h(`button${cls}`, { type: "button", onclick: () => void act(label, fn) }, label);
    replace(actions,
      state === "NotStarted" || state === "Stopped" ? button(state === "Stopped" ? "Resume" : "Start", () => post("/start", {}), ".primary") : null,
      state === "Running" || state === "Pending" ? button("Stop", () => post("/stop", {}), ".danger") : null,
      !DONE.has(state) ? h("button", {
        type: "button", disabled: selected.size === 0,
        onclick: () => void act("Skip", () => post("/skip", { targets: [...selected].map((t) => ({ type: t.split(":")[0], name: t.slice(t.indexOf(":") + 1) })) })),
      }, selected.size ? `Skip ${selected.size} selected` : "Skip (select in the tree)") : null,
      DONE.has(state) && progress().unfinished > 0
        ? button("Retry", async () => {
          const { body } = await ctx.api.post(`/updateRuns/${encodeURIComponent(name)}/retry`, {});
          ctx.navigate(`/runs/${encodeURIComponent(body.name)}`);
        }) : null);
  }

  /** @param {string} path @param {unknown} body */
  async function post(path, body) {
    const { body: fresh, etag: e } = await ctx.api.post(`/updateRuns/${encodeURIComponent(name)}${path}`, body, etag);
    run = fresh;
    etag = e || fresh.eTag || etag;
    selected.clear();
    redraw();
  }

  /** @param {string} what @param {() => Promise<void>} fn */
  async function act(what, fn) {
    try {
      await fn();
      replace(messages, notice("ok", `${what}: done.`));
    } catch (e) {
      const again = e instanceof ApiError && e.status === 412 ? " The run has been read again: check it, then try again." : "";
      replace(messages, notice("error", `${what} was refused. ${describe(e)}${again}`));
      if (again) await reload();
    }
  }

  /** @param {string} id */
  async function approve(id) {
    await act("Approve", async () => {
      await approveGate(ctx, id);
      await reload();
    });
  }

  /** @param {string} id */
  async function fail(id) {
    const why = globalThis.prompt?.("Why does this gate fail? (shown on the gate and in the run's error)") ?? "";
    await act("Fail gate", async () => {
      await failGate(ctx, id, why);
      await reload();
    });
  }

  /** @param {boolean} [ifChanged] redraw only if the run changed (its ETag) */
  async function reload(ifChanged = false) {
    try {
      const r = await ctx.api.get(`/updateRuns/${encodeURIComponent(name)}`);
      const tag = r.etag || r.body.eTag || "";
      if (ifChanged && tag === etag) return;
      run = r.body;
      etag = tag;
      redraw();
    } catch (e) {
      replace(messages, notice("error", describe(e)));
    }
  }

  let forecastSeq = 0;
  async function loadForecast() {
    const state = run.properties.status?.status.state ?? "";
    if (DONE.has(state)) return;
    const mine = ++forecastSeq;
    try {
      const got = (await forecasts(ctx.api, [name])).get(name);
      if (mine !== forecastSeq) return; // a newer one was asked meanwhile
      forecast = got ? { ...got.forecast, where: got.where } : null;
      drawHead();
      if (tab === "timeline") void drawTimeline();
    } catch {
      if (mine === forecastSeq) forecast = null;
    }
  }
  // The forecast is simulated again when the run changes (an upgrade ends, a gate is reached)
  // and every 20 s as time passes; each one reads the daemon's whole state (about 8 MB and 2 s
  // for 10,000 members), so at most every 3 s, and never more than a tenth of the time.
  const forecastPaced = new Paced(loadForecast, { wait: 0, every: 3000, factor: 10 });
  const forecastSoon = () => forecastPaced.soon();
  // The run is read again as its events come: every 250 ms at most, and never more often than
  // twice as long as the last read took (a 100,000-member run's status is 15 MB).
  const reloadPaced = new Paced(() => reload(), { wait: 250, every: 250, factor: 2 });
  let left = false;

  /** @type {Map<string, any>} */
  const memberCache = new Map();
  /** @type {Promise<void> | null} */
  let membersRead = null;
  let timelineSeq = 0;
  async function drawTimeline() {
    // Draws overlap (events, forecasts): only the newest one lands.
    const mine = ++timelineSeq;
    const now = ctx.clock.now();
    const { rows: chartRows, marks, first } = fromEvents(run.properties.status, events, now);
    /** @type {Map<string, any>} */
    const fc = new Map();
    for (const st of forecast?.stages ?? []) for (const g of st.groups ?? []) for (const m of g.members ?? []) fc.set(m.name, m);
    let to = Math.max(now, Date.parse(forecast?.expectedFinish ?? "") || now);
    const from = Number.isFinite(first) ? first : now - 3600_000;
    for (const row of chartRows) {
      const f = row.member ? fc.get(row.member) : null;
      if (f && f.expectedFinish && !row.bars.some((b) => b.cls !== "bar-Running")) {
        const start = Math.max(now, Date.parse(f.expectedStart) || now);
        const end = Date.parse(f.expectedFinish);
        if (end > now) row.bars.push({ start, end, cls: "bar-forecast", title: `${row.member}: forecast ${shortTime(f.expectedStart)} → ${shortTime(f.expectedFinish)}` });
        to = Math.max(to, end);
      }
    }
    to += (to - from) * 0.03;
    // Maintenance windows: one engine call per distinct window (most members share a few).
    // The members are read once, after the chart is first drawn without them (100,000 members
    // take seconds to read): it is drawn again, shaded, when they are in.
    if (!membersRead) {
      membersRead = ctx.api.list("/members").then((all) => {
        for (const m of all) memberCache.set(m.name, m);
        if (tab === "timeline" && !left) void drawTimeline();
      }, () => { membersRead = null; /* shown without windows; read again at the next draw */ });
    }
    const nodeOnly = run.properties.managedClusterUpdate.upgrade.type === "NodeImageOnly";
    /** @type {Map<string, { start: number, end: number }[]>} */
    const byWindow = new Map();
    for (const row of chartRows) {
      const maint = row.member ? memberCache.get(row.member)?.properties?.status?.maintenance : null;
      const w = maint ? (nodeOnly ? maint.nodeOS : maint.kubernetes) : null;
      if (!w) continue;
      const key = JSON.stringify(w);
      if (!byWindow.has(key)) {
        try {
          const open = await windows({ kubernetes: w }, from, to);
          byWindow.set(key, (open.kubernetes ?? []).map((/** @type {{ start: string, end: string }} */ i) => ({ start: Date.parse(i.start), end: Date.parse(i.end) })));
        } catch {
          byWindow.set(key, []);
        }
      }
      row.shades = byWindow.get(key) ?? [];
    }
    if (tab !== "timeline" || mine !== timelineSeq) return;
    const scrolled = panel.querySelector(".gantt")?.scrollTop ?? 0;
    const box = h("div");
    replace(panel, box);
    drawGantt(box, { rows: chartRows, marks, now, from, to }, `Timeline of ${name}: one row per member, bars for upgrades, forecast dashed`);
    const g = panel.querySelector(".gantt");
    if (g && scrolled) {
      g.scrollTop = scrolled;
      g.dispatchEvent(new Event("scroll"));
    }
  }

  function drawTabs() {
    const names = /** @type {const} */ ([["tree", "Tree"], ["timeline", "Timeline"], ["events", "Event log"]]);
    replace(tabs, ...names.map(([id, label], i) => h("button", {
      type: "button", role: "tab", id: `tab-${id}`, "aria-selected": String(tab === id), "aria-controls": "run-view", tabindex: tab === id ? "0" : "-1",
      onclick: () => { tab = id; redraw(); },
      onkeydown: (/** @type {KeyboardEvent} */ ev) => {
        if (ev.key !== "ArrowRight" && ev.key !== "ArrowLeft") return;
        const next = names[(i + (ev.key === "ArrowRight" ? 1 : names.length - 1)) % names.length][0];
        tab = next;
        redraw();
        document.getElementById(`tab-${next}`)?.focus();
      },
    }, label)));
    panel.setAttribute("aria-labelledby", `tab-${tab}`);
  }

  let actionsDrawn = "";
  let tabsDrawn = "";
  function redraw() {
    rows = treeRows(run.properties.status);
    // A selected target that can no longer be skipped (it finished meanwhile) leaves the
    // selection, so that a skip never sends it.
    const skippable = new Set(rows.filter((r) => r.target && r.kind !== "gate" && !DONE.has(r.state)).map((r) => r.target));
    for (const t of [...selected]) if (!skippable.has(t)) selected.delete(t);
    drawHead();
    // The buttons and tabs are rebuilt only when what they show changes, so that keyboard focus
    // on them survives live updates.
    const p = progress();
    const actionsKey = `${run.properties.status?.status.state}|${selected.size}|${p.unfinished > 0}`;
    if (actionsKey !== actionsDrawn) {
      actionsDrawn = actionsKey;
      drawActions();
    }
    if (tab !== tabsDrawn) {
      tabsDrawn = tab;
      drawTabs();
    }
    if (tab === "tree") {
      if (!panel.contains(tree.el)) replace(panel, tree.el);
      tree.setCount(rows.length);
    } else if (tab === "events") {
      if (!panel.contains(log.el)) replace(panel, log.el);
      log.setCount(events.length);
    } else {
      void drawTimeline();
    }
  }

  redraw();
  forecastSoon();
  // The run's events: its history read once, then the portal's shared live stream, merged by
  // sequence number (an event in both is shown once).
  let historyRead = false;
  /** @type {Set<number>} */
  const seen = new Set();
  /** @type {[import("../../types").FleetEvent, number][]} */
  const early = [];
  /** @param {import("../../types").FleetEvent} e @param {number} seq */
  const add = (e, seq) => {
    if (seen.has(seq)) return;
    seen.add(seq);
    events.push(e);
  };
  const off = ctx.onEvent((e, seq) => {
    if (e.run !== name) return;
    if (!historyRead) {
      early.push([e, seq]);
      return;
    }
    add(e, seq);
    if (tab === "events") log.setCount(events.length);
    reloadPaced.soon();
    forecastSoon();
  });
  void ctx.api.list(`/events?run=${encodeURIComponent(name)}`).then((history) => {
    for (const e of history) add(e, e.seq);
  }).catch((e) => replace(messages, notice("error", `The run's history could not be read: ${describe(e)}`))).finally(() => {
    historyRead = true;
    for (const [e, seq] of early) add(e, seq);
    if (tab === "events") log.setCount(events.length);
    else if (tab === "timeline") void drawTimeline();
  });
  // Countdowns tick in place: only the text of each visible wait changes, never the rows
  // (a click in progress or a focused button stays where it is).
  const tick = setInterval(() => {
    drawHeadCountdown();
    if (tab !== "tree") return;
    const byKey = new Map(rows.map((r) => [r.target ?? `gate:${r.gateId}`, r]));
    for (const el of tree.el.querySelectorAll(".until[data-key]")) {
      const r = byKey.get(el.getAttribute("data-key") ?? "");
      if (r?.waiting) el.textContent = waitingText(r.waiting, ctx);
    }
  }, 1000);
  const refreshForecast = setInterval(forecastSoon, 20_000);
  // What changes without an event (a member waiting on its provider, retried): read again now
  // and then while the run is not done.
  const reread = setInterval(() => {
    if (!DONE.has(run.properties.status?.status.state ?? "")) void reload(true);
  }, 5_000);
  function drawHeadCountdown() {
    const w = run.properties.status?.waitingOn;
    const dd = head.querySelector("dd.wait");
    if (w && dd) dd.textContent = waitingText(w, ctx);
  }
  return () => {
    off();
    clearInterval(tick);
    clearInterval(refreshForecast);
    clearInterval(reread);
    reloadPaced.stop();
    forecastPaced.stop();
    left = true;
    forecastSeq++;
  };
}
