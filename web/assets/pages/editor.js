// The strategy editor: YAML or JSON, validated live by the engine in the browser (the errors
// name the field with the CLI's paths, and a click puts the cursor on its line); beside it the
// plan over the fleet as it is (members per stage and group, unassigned members, resolved
// limits, gates needing a person) and a simulated timeline with an expected finish — all
// computed in the browser before anything is saved.

import { ApiError } from "../api.js";
import { describe } from "../app.js";
import { fmtTime, h, notice, replace, shortTime, span } from "../dom.js";
import { planScenario, request, validate } from "../engine.js";
import { drawGantt, fromEvents } from "../gantt.js";

/** @typedef {import("../app.js").Ctx} Ctx */

const EXAMPLE = `# An update strategy: stages run in order, the groups of a stage in parallel.
stages:
  - name: dev
    memberSelector: {byLabel: "env=dev"}
    maxConcurrency: "50%"
    afterStageWaitInSeconds: 3600
  - name: prod
    beforeGates:
      - {displayName: production sign-off, type: Approval}
    groups:
      - name: prod
        memberSelector: {byLabel: "env=prod"}
        maxConcurrency: 2
        maxAllowedFailures: 1
`;

/**
 * The line (0-based) a field path points at in YAML or JSON text, found by walking the path's
 * keys and list positions down the text; -1 when it cannot be told.
 * @param {string} text
 * @param {string} path e.g. `stages[1].groups[0].maxConcurrency`
 * @param {string} [message] the error's message: a YAML error names its line
 */
export function lineOf(text, path, message = "") {
  const lines = text.split("\n");
  const at = /line (\d+)/.exec(message);
  if (at) return Number(at[1]) - 1;
  const parts = [...path.matchAll(/([^.[\]]+)|\[(\d+)\]/g)].map((m) => (m[2] !== undefined ? Number(m[2]) : m[1]));
  let line = 0, found = -1;
  for (const part of parts) {
    if (typeof part === "string") {
      const re = new RegExp(`(^|[\\s{,-])"?${part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}"?\\s*:`);
      let i = line;
      while (i < lines.length && !re.test(lines[i])) i++;
      if (i >= lines.length) return found;
      found = line = i;
    } else {
      // The n-th item of the list that starts after the key: YAML `- ` items at the first
      // item's indentation (JSON lists of objects: `{` at the first item's indentation).
      let i = line + (/:\s*$/.test(lines[line] ?? "") ? 1 : 0);
      while (i < lines.length && !/^\s*(- |-$|\{)/.test(lines[i])) i++;
      if (i >= lines.length) return found;
      const indent = (lines[i].match(/^\s*/) ?? [""])[0].length;
      let n = 0;
      for (; i < lines.length; i++) {
        const ind = (lines[i].match(/^\s*/) ?? [""])[0].length;
        if (lines[i].trim() && ind < indent) return found;
        if (ind === indent && /^\s*(- |-$|\{)/.test(lines[i])) {
          if (n === part) break;
          n++;
        }
      }
      if (i >= lines.length) return found;
      found = line = i;
    }
  }
  return found;
}

/**
 * The fleet as a scenario (shared/spec/scenario-format.md), starting now in fleet time with
 * the catalog as it is: what the plan and the simulation run on.
 * @param {{ members: any[], releases: any, strategy: unknown, upgrade: any, minutes: number, start: number }} o
 */
export function fleetScenario(o) {
  const start = fmtTime(Math.floor(o.start / 1000) * 1000);
  return {
    start,
    autoApprove: true,
    members: o.members.map((m) => {
      const p = m.properties, s = p.status ?? {};
      /** @type {Record<string, unknown>} */
      const out = {
        name: m.name,
        labels: p.labels ?? {},
        region: s.region ?? "unknown",
        kubernetesVersion: s.kubernetesVersion ?? "0.0.0",
        nodePools: (s.nodePools ?? []).map((/** @type {any} */ n) => ({ name: n.name, ...(n.osType ? { osType: n.osType } : {}), ...(n.imageVersion ? { imageVersion: n.imageVersion } : {}) })),
        behavior: { upgradeMinutes: o.minutes },
      };
      if (p.group) out.group = p.group;
      if (p.longTermSupport) out.longTermSupport = true;
      if (s.maintenance && Object.keys(s.maintenance).length) out.maintenance = s.maintenance;
      return out;
    }),
    releases: o.releases,
    strategy: o.strategy,
    run: { name: "preview", managedClusterUpdate: o.upgrade },
    actions: [{ at: start, do: "start" }],
  };
}

/**
 * @param {Ctx} ctx
 * @param {HTMLElement} root
 * @param {Record<string, string>} params
 */
export async function render(ctx, root, params) {
  let etag = "";
  let text = EXAMPLE;
  if (params.name) {
    const r = await ctx.api.get(`/updateStrategies/${encodeURIComponent(params.name)}`);
    etag = r.etag || r.body.eTag || "";
    text = JSON.stringify(r.body.properties.strategy, null, 2);
  }
  const [members, releases] = await Promise.all([
    ctx.api.list("/members"),
    ctx.api.get("/releases").then((r) => r.body),
  ]);
  const newest = (releases.kubernetes ?? []).map((/** @type {any} */ k) => k.version)
    .sort((/** @type {string} */ a, /** @type {string} */ b) => a.localeCompare(b, "en", { numeric: true })).pop() ?? "";

  const name = h("input#strategy-name", { value: params.name ?? "", required: true, pattern: "[a-z0-9]([\\-a-z0-9]*[a-z0-9])?", maxlength: 50, readonly: Boolean(params.name) });
  const format = h("select#strategy-format", null, h("option", { value: "yaml" }, "YAML"), h("option", { value: "json" }, "JSON"));
  /** @type {HTMLSelectElement} */ (format).value = text.trim().startsWith("{") ? "json" : "yaml";
  const area = /** @type {HTMLTextAreaElement} */ (h("textarea#strategy-text.code.editor-area", { spellcheck: "false", "aria-describedby": "strategy-errors", autocapitalize: "off" }));
  area.value = text;
  const errors = h("div#strategy-errors", { "aria-live": "polite" });
  const version = h("input#plan-version", { value: newest, size: 10 });
  const type = h("select#plan-type", null, ...["Full", "ControlPlaneOnly", "NodeImageOnly"].map((t) => h("option", { value: t }, t)));
  const minutes = h("input#plan-minutes", { type: "number", min: 1, max: 1440, value: 30, size: 5 });
  const plan = h("div#plan", { "aria-live": "polite" });
  const timeline = h("div#sim-timeline");
  const out = h("div", { "aria-live": "polite" });
  const save = ctx.can("operate") ? h("button.primary", { type: "submit" }, params.name ? "Save changes" : "Save strategy") : null;

  root.append(
    h("h1", null, params.name ? `Strategy ${params.name}` : "New strategy"),
    h("div.split", null,
      h("form", { onsubmit: (/** @type {SubmitEvent} */ ev) => { ev.preventDefault(); void store(); } },
        h("div.row", null,
          h("div", null, h("label", { for: "strategy-name" }, "Name"), name),
          h("div", null, h("label", { for: "strategy-format" }, "Format"), format)),
        h("label", { for: "strategy-text" }, "Strategy (Azure's shape: stages, groups, gates, limits)"),
        area, errors,
        h("div.row", null, save, out)),
      h("section", { "aria-labelledby": "plan-title" },
        h("h2#plan-title", null, "Plan over the fleet as it is"),
        h("div.row", null,
          h("div", null, h("label", { for: "plan-type" }, "Upgrade"), type),
          h("div", null, h("label", { for: "plan-version" }, "Kubernetes version"), version),
          h("div", null, h("label", { for: "plan-minutes" }, "Minutes per upgrade"), minutes)),
        plan,
        h("h2", null, "Simulated timeline"),
        h("p.hint", null, "Simulated in this browser by the engine, approving every gate as soon as it is reached."),
        timeline)));

  /** @type {unknown} */
  let strategy = null;
  let seq = 0;
  async function check() {
    const mine = ++seq;
    const fmt = /** @type {"yaml" | "json"} */ (/** @type {HTMLSelectElement} */ (format).value);
    let v;
    try {
      v = await validate(area.value, fmt);
    } catch (e) {
      replace(errors, notice("error", describe(e)));
      return;
    }
    if (mine !== seq) return;
    if (v.kind === "scenario") v = { ...v, valid: false, errors: [{ path: "", message: "this is a scenario; the editor takes a strategy ({stages: [...]})" }] };
    if (!v.valid) {
      strategy = null;
      area.setAttribute("aria-invalid", "true");
      replace(errors, h("ul.field-errors", { "aria-label": "Errors" }, ...v.errors.map((e) => {
        const line = lineOf(area.value, e.path, e.message);
        return h("li.field-error", null,
          h("strong", null, e.path || "the document"), `: ${e.message}`,
          line >= 0 ? [" ", h("button", { type: "button", class: "link", onclick: () => goTo(line) }, `line ${line + 1}`)] : null);
      })));
      replace(plan, h("p.hint", null, "The plan appears when the strategy is valid."));
      replace(timeline);
      return;
    }
    area.removeAttribute("aria-invalid");
    strategy = v.strategy;
    replace(errors, h("p.hint", null, "✓ valid"), ...v.warnings.map((w) => h("p.hint", null, `warning: ${w.path}: ${w.message}`)));
    await preview(mine);
  }

  /** @param {number} line */
  function goTo(line) {
    const lines = area.value.split("\n");
    const start = lines.slice(0, line).reduce((n, l) => n + l.length + 1, 0);
    area.focus();
    area.setSelectionRange(start, start + (lines[line]?.length ?? 0));
    const lh = parseFloat(getComputedStyle(area).lineHeight) || 18;
    area.scrollTop = Math.max(0, line * lh - area.clientHeight / 3);
  }

  /** @param {number} mine */
  async function preview(mine) {
    const t = /** @type {HTMLSelectElement} */ (type).value;
    const upgrade = { upgrade: { type: t, ...(t === "NodeImageOnly" ? {} : { kubernetesVersion: /** @type {HTMLInputElement} */ (version).value.trim() }) }, nodeImageSelection: { type: "Latest" } };
    const scenario = fleetScenario({ members, releases, strategy, upgrade, minutes: Number(/** @type {HTMLInputElement} */ (minutes).value) || 30, start: ctx.clock.now() });
    try {
      const [p, report] = await Promise.all([planScenario(scenario), request({ type: "simulate", scenario })]);
      if (mine !== seq) return;
      drawPlan(p.plan ?? p);
      const now = Date.parse(scenario.start);
      const chart = fromEvents(report.run?.status, report.timeline, now);
      const summary = report.summary ?? {};
      const finish = summary.finishedAt ? `${shortTime(summary.finishedAt)} (${span(summary.makespanSeconds ?? 0)} after it starts)` : "not within the horizon";
      const box = h("div");
      replace(timeline, h("p", null, h("strong", null, "Expected finish: "), finish, ` — ${summary.state ?? ""}, ${summary.membersCompleted ?? 0} upgraded, ${summary.membersFailed ?? 0} failed, ${summary.membersSkipped ?? 0} skipped`), box);
      drawGantt(box, { rows: chart.rows, marks: chart.marks, from: now, to: Math.max(chart.last, now + 3600_000) }, "Simulated timeline of the strategy over the fleet");
    } catch (e) {
      if (mine !== seq) return;
      replace(plan, notice("error", `The plan could not be made: ${e instanceof Error && "path" in e && e.path ? `${e.path}: ` : ""}${describe(e)}`));
      replace(timeline);
    }
  }

  /** @param {any} p */
  function drawPlan(p) {
    const gates = (p.gates ?? []).filter((/** @type {any} */ g) => g.needsHuman);
    replace(plan,
      h("p", null, `${p.membersToUpgrade ?? 0} members to upgrade, ${p.membersToSkip ?? 0} to skip`,
        p.willFail?.length ? `, ${p.willFail.length} will fail (${p.willFail.join(", ")})` : ""),
      p.unassigned?.length ? notice("info", `Unassigned (in no group, not upgraded): ${p.unassigned.join(", ")}`) : h("p.hint", null, "Every member is in a group."),
      gates.length ? h("p", null, `Gates needing a person: ${gates.map((/** @type {any} */ g) => `${g.displayName ?? g.gateType} (${g.timing} ${[g.stage, g.group].filter(Boolean).join("/")})`).join("; ")}`) : h("p.hint", null, "No gate needs a person."),
      h("table", null,
        h("caption.sr-only", null, "Members per stage and group"),
        h("thead", null, h("tr", null, ...["Stage / group", "Concurrency", "Failures allowed", "Members"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", null, ...(p.stages ?? []).flatMap((/** @type {any} */ st) => [
          h("tr", null, h("th", { scope: "row" }, `${st.name}${st.afterStageWaitInSeconds ? ` (then wait ${span(st.afterStageWaitInSeconds)})` : ""}`),
            h("td", null, String(st.maxConcurrency)), h("td", null, String(st.maxAllowedFailures)), h("td", null, "")),
          ...(st.groups ?? []).map((/** @type {any} */ g) => h("tr", null,
            h("td", null, `  ${g.name}`), h("td", null, String(g.maxConcurrency)), h("td", null, String(g.maxAllowedFailures)),
            h("td", null, (g.members ?? []).map((/** @type {any} */ m) => `${m.name}${m.action && m.action !== "Upgrade" ? ` (${m.action})` : ""}`).join(", ")))),
        ]))));
  }

  async function store() {
    // What is saved is the text as it is now, checked now — never the last preview's strategy,
    // which may be from before the latest keystrokes.
    const fmt = /** @type {"yaml" | "json"} */ (/** @type {HTMLSelectElement} */ (format).value);
    let v;
    try {
      v = await validate(area.value, fmt);
    } catch (e) {
      replace(out, notice("error", `Not saved. ${describe(e)}`));
      return;
    }
    if (v.kind !== "strategy" || !v.valid || !v.strategy) {
      replace(out, notice("error", "Not saved: the strategy is not valid (the errors are listed under it)."));
      later();
      return;
    }
    const n = /** @type {HTMLInputElement} */ (name).value.trim();
    try {
      const r = await ctx.api.put(`/updateStrategies/${encodeURIComponent(n)}`, { properties: { strategy: v.strategy } }, params.name ? { etag } : { createOnly: true });
      etag = r.etag || r.body.eTag || etag;
      replace(out, notice("ok", `Saved ${n}.`));
      if (!params.name) ctx.navigate(`/strategies/${encodeURIComponent(n)}`);
    } catch (e) {
      if (e instanceof ApiError && e.status === 412 && !params.name) {
        replace(out, notice("error", `Not saved: a strategy named ${n} exists already; open it from Strategies to change it.`));
      } else if (e instanceof ApiError && e.status === 412) {
        // Someone saved it meanwhile: read its new ETag; the text here is kept, and saving
        // again replaces theirs.
        try {
          etag = (await ctx.api.get(`/updateStrategies/${encodeURIComponent(n)}`)).etag;
        } catch { /* the next save says why */ }
        replace(out, notice("error", `Not saved: ${n} was changed by someone else since this page read it. `
          + "Your text is kept here; Save again to replace their version with it, or reload the page to see theirs."));
      } else {
        replace(out, notice("error", `Not saved. ${describe(e)}`));
      }
    }
  }

  let timer = 0;
  const later = () => { clearTimeout(timer); timer = window.setTimeout(() => void check(), 300); };
  area.addEventListener("input", later);
  for (const el of [format, type, version, minutes]) el.addEventListener("change", later);
  await check();
  return () => clearTimeout(timer);
}
