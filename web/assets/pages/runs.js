// The runs: a table of state, progress, failures, start and forecast finish (simulated in this
// browser), kept current by the fleet's events; and, for operators, a form that creates a run
// from a stored strategy or from an Azure strategy file pasted or uploaded (checked by the engine
// in the browser first).

import { ApiError } from "../api.js";
import { describe } from "../app.js";
import { badge, h, notice, replace, shortTime } from "../dom.js";
import { forecasts, validate } from "../engine.js";
import { dataTable, listOrSay } from "./common.js";

/** @typedef {import("../app.js").Ctx} Ctx */

const DONE = new Set(["Completed", "Failed", "Skipped", "Stopped"]);

/** @param {any} run */
export function counts(run) {
  let total = 0, done = 0;
  for (const st of run.properties.status?.stages ?? []) {
    for (const g of st.groups ?? []) {
      for (const m of g.members ?? []) {
        total++;
        if (DONE.has(m.status.state)) done++;
      }
    }
  }
  return { total, done };
}

/**
 * @param {Ctx} ctx
 * @param {HTMLElement} root
 */
export async function render(ctx, root) {
  const table = h("div");
  const form = ctx.can("operate") ? createForm(ctx) : null;
  root.append(h("h1", null, "Update runs"), table, form ?? "");
  /** The forecast finish of each moving run, and when it was asked (real ms). */
  /** @type {Map<string, { at: number, finish: string }>} */
  const finishes = new Map();
  /** @type {any[]} */
  let runs = [];
  let alive = true;
  let loads = 0;

  async function load() {
    const mine = ++loads;
    const got = await listOrSay(ctx, "/updateRuns", table);
    if (!got || !alive || mine !== loads) return;
    runs = got;
    // The moving runs whose forecast is older than 20 s, simulated forward here from one read
    // of the daemon's state.
    const due = runs.filter((r) => {
      const state = r.properties.status?.status.state ?? "NotStarted";
      const known = finishes.get(r.name);
      return !DONE.has(state) && state !== "NotStarted" && !(known && Date.now() - known.at < 20_000);
    }).map((r) => r.name);
    for (const n of due) finishes.set(n, { at: Date.now(), finish: finishes.get(n)?.finish ?? "" });
    if (due.length) {
      forecasts(ctx.api, due)
        .then((got) => {
          for (const [n, f] of got) finishes.set(n, { at: Date.now(), finish: f.forecast.expectedFinish ?? "" });
          if (alive) draw();
        })
        .catch(() => { /* no forecast: the column stays empty */ });
    }
    draw();
  }

  function draw() {
    if (!runs.length) {
      replace(table, h("p", null, "No runs yet.", ctx.can("operate") ? " Create one below." : ""));
      return;
    }
    replace(table, dataTable("Update runs", ["Run", "State", "Progress", "Failures", "Upgrade", "Started", "Finished / forecast"], runs.map((r) => {
        const st = r.properties.status;
        const state = st?.status.state ?? "NotStarted";
        const { total, done } = counts(r);
        const up = r.properties.managedClusterUpdate.upgrade;
        const finish = st?.status.completedTime ? shortTime(st.status.completedTime)
          : finishes.get(r.name)?.finish ? `~${shortTime(finishes.get(r.name)?.finish)}` : "";
        return h("tr", null,
          h("td", null, h("a", { href: `/runs/${encodeURIComponent(r.name)}` }, r.name)),
          h("td", null, badge(state)),
          h("td", null, h("span.progress", { role: "progressbar", "aria-label": `${r.name} members done`, "aria-valuemin": 0, "aria-valuemax": total, "aria-valuenow": done },
            h("span", { style: `width:${total ? (100 * done) / total : 0}%` })), ` ${done}/${total}`),
          h("td", null, String(st?.failureCount ?? 0)),
          h("td", null, `${up.type}${up.kubernetesVersion ? ` ${up.kubernetesVersion}` : ""}`),
          h("td", null, shortTime(st?.status.startTime)),
          h("td", null, finish));
    })));
  }

  await load();
  let timer = 0;
  const off = ctx.onEvent((e) => {
    if (!e.kind.startsWith("Member") && !e.kind.startsWith("Run") && !e.kind.startsWith("Stage")) return;
    // At most one reload per 400 ms, however fast events come.
    if (!timer) timer = window.setTimeout(() => { timer = 0; void load(); }, 400);
  });
  return () => { alive = false; off(); clearTimeout(timer); };
}

/**
 * Creating a run: a name, the upgrade, and the strategy — a stored one, or a file's.
 * @param {Ctx} ctx
 */
function createForm(ctx) {
  const out = h("div", { "aria-live": "polite" });
  const strategies = h("select#run-strategy", null, h("option", { value: "" }, "(loading…)"));
  const pasted = h("textarea#run-file.code", { rows: 8, cols: 60, placeholder: "stages:\n  - name: dev\n    groups: [{name: dev}]", "aria-describedby": "run-file-check" });
  const check = h("div#run-file-check");
  const upload = h("input#run-upload", { type: "file", accept: ".json,.yaml,.yml" });
  upload.addEventListener("change", async () => {
    const f = /** @type {HTMLInputElement} */ (upload).files?.[0];
    if (!f) return;
    /** @type {HTMLTextAreaElement} */ (pasted).value = await f.text();
    void checkFile();
  });
  async function checkFile() {
    const text = /** @type {HTMLTextAreaElement} */ (pasted).value;
    if (!text.trim()) { replace(check); pasted.removeAttribute("aria-invalid"); return null; }
    const v = await validate(text, text.trim().startsWith("{") ? "json" : "yaml");
    if (v.kind !== "strategy") {
      pasted.setAttribute("aria-invalid", "true");
      replace(check, h("p.field-error", null, v.errors[0] ? `${v.errors[0].path || "the file"}: ${v.errors[0].message}` : "not a strategy: it needs stages"));
      return null;
    }
    if (!v.valid) {
      pasted.setAttribute("aria-invalid", "true");
      replace(check, ...v.errors.map((e) => h("p.field-error", null, `${e.path}: ${e.message}`)));
      return null;
    }
    pasted.removeAttribute("aria-invalid");
    replace(check, h("p.hint", null, `valid strategy: ${v.strategy?.stages.length ?? 0} stages`));
    return v.strategy;
  }
  let checkTimer = 0;
  pasted.addEventListener("input", () => { clearTimeout(checkTimer); checkTimer = window.setTimeout(() => void checkFile(), 250); });
  void ctx.api.list("/updateStrategies").then((list) => {
    replace(strategies, ...list.map((s) => h("option", { value: s.name }, s.name)), h("option", { value: "" }, "— the file below —"));
  }).catch((e) => replace(out, notice("error", describe(e))));

  const name = h("input#run-name", { required: true, pattern: "[a-z0-9]([\\-a-z0-9]*[a-z0-9])?", maxlength: 50 });
  const type = h("select#run-type", null, ...["Full", "ControlPlaneOnly", "NodeImageOnly"].map((t) => h("option", { value: t }, t)));
  const version = h("input#run-version", { placeholder: "1.33.3" });
  const images = h("select#run-images", null, ...["Latest", "Consistent"].map((t) => h("option", { value: t }, t)));
  const start = h("input#run-start", { type: "checkbox" });
  const v = (/** @type {HTMLElement} */ el) => /** @type {HTMLInputElement} */ (el).value.trim();
  const submit = async (/** @type {SubmitEvent} */ ev) => {
    ev.preventDefault();
    try {
      const upgrade = { type: v(type), ...(v(type) === "NodeImageOnly" ? {} : { kubernetesVersion: v(version) }) };
      /** @type {Record<string, unknown>} */
      const properties = { managedClusterUpdate: { upgrade, nodeImageSelection: { type: v(images) } } };
      if (v(strategies)) properties.updateStrategyId = `/fleets/${ctx.api.fleet}/updateStrategies/${v(strategies)}`;
      else {
        const strategy = await checkFile();
        if (!strategy) throw new Error("give a stored strategy, or a valid strategy file (YAML or JSON)");
        properties.strategy = strategy;
      }
      const runName = v(name);
      try {
        await ctx.api.put(`/updateRuns/${encodeURIComponent(runName)}`, { properties }, { createOnly: true });
      } catch (e) {
        const taken = e instanceof ApiError && e.status === 412 ? ` A run named ${runName} exists already.` : "";
        replace(out, notice("error", `The run was not created. ${describe(e)}${taken}`));
        return;
      }
      if (/** @type {HTMLInputElement} */ (start).checked) {
        try {
          await ctx.api.post(`/updateRuns/${encodeURIComponent(runName)}/start`, {});
        } catch (e) {
          replace(out, notice("error", `The run ${runName} was created but did not start. ${describe(e)}`));
          return;
        }
      }
      ctx.navigate(`/runs/${encodeURIComponent(runName)}`);
    } catch (e) {
      replace(out, notice("error", `The run was not created. ${describe(e)}`));
    }
  };
  return h("section.panel", { "aria-labelledby": "create-run" },
    h("h2#create-run", null, "Create a run"),
    h("form", { onsubmit: submit },
      h("div.row", null,
        h("div", null, h("label", { for: "run-name" }, "Name"), name),
        h("div", null, h("label", { for: "run-type" }, "Upgrade type"), type),
        h("div", null, h("label", { for: "run-version" }, "Kubernetes version"), version),
        h("div", null, h("label", { for: "run-images" }, "Node images"), images)),
      h("label", { for: "run-strategy" }, "Strategy"), strategies,
      h("label", { for: "run-file" }, "…or an Azure strategy file (YAML or JSON), pasted or uploaded"),
      pasted, check,
      h("div", null, h("label.inline", { for: "run-upload" }, "Upload a file"), upload),
      h("p", null, h("label.inline", null, start, "start it at once")),
      h("button.primary", { type: "submit" }, "Create run")),
    out);
}
