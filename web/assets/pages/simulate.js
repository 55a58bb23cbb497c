// Simulate: a scenario (shared/spec/scenario-format.md), pasted or uploaded, simulated by the
// engine in this browser — the report is byte for byte what `waverun simulate -o json` prints
// for the same file — with its timeline drawn.

import { describe } from "../app.js";
import { h, replace, shortTime, span } from "../dom.js";
import { EngineError, simulateText } from "../engine.js";
import { drawGantt, fromEvents } from "../gantt.js";

/**
 * @param {import("../app.js").Ctx} _ctx
 * @param {HTMLElement} root
 */
export function render(_ctx, root) {
  const area = /** @type {HTMLTextAreaElement} */ (h("textarea#scenario-text.code.editor-area", {
    spellcheck: "false", "aria-describedby": "scenario-help scenario-error",
    placeholder: "start: 2026-12-07T00:00:00Z\nmembers: [...]\nreleases: {...}\nstrategy: {stages: [...]}\nrun: {managedClusterUpdate: {...}}",
  }));
  const upload = h("input#scenario-upload", { type: "file", accept: ".json,.yaml,.yml" });
  const error = h("div#scenario-error", { "aria-live": "polite" });
  const summary = h("div", { "aria-live": "polite" });
  const chart = h("div");
  const report = h("pre#report", { tabindex: "0", role: "region", "aria-label": "The report (waverun simulate -o json)" });
  // The report's section appears with a report.
  const reportSection = h("section", { hidden: true }, h("h2", null, "Report"), report);
  const run = async () => {
    replace(error);
    const text = area.value;
    try {
      const json = await simulateText({ text, format: text.trim().startsWith("{") ? "json" : "yaml" });
      area.removeAttribute("aria-invalid");
      report.textContent = json;
      reportSection.hidden = false;
      const r = JSON.parse(json);
      const s = r.summary ?? {};
      const runs = r.runs ?? (r.run ? [r.run] : []);
      replace(summary, h("p", null, h("strong", null, `${s.state ?? ""}`),
        ` — started ${shortTime(s.startedAt)}, finished ${shortTime(s.finishedAt) || "not within the horizon"} (${span(s.makespanSeconds ?? 0)}); `
        + `${s.membersCompleted ?? 0} upgraded, ${s.membersFailed ?? 0} failed, ${s.membersSkipped ?? 0} skipped, ${s.membersPending ?? 0} pending`
        + (runs.length > 1 ? `; ${runs.length} runs` : "")));
      const c = fromEvents(runs[0]?.status, r.timeline.filter((/** @type {any} */ e) => !e.run || e.run === runs[0]?.name), 0);
      drawGantt(chart, { rows: c.rows, marks: c.marks, from: c.first, to: c.last + (c.last - c.first) * 0.02 + 60_000 }, "Simulated timeline");
    } catch (e) {
      area.setAttribute("aria-invalid", "true");
      replace(error, h("p.field-error", { role: "alert" }, e instanceof EngineError && e.path ? `${e.path}: ${e.message}` : describe(e)));
      report.textContent = "";
      reportSection.hidden = true;
      replace(summary);
      replace(chart);
    }
  };
  upload.addEventListener("change", async () => {
    const f = /** @type {HTMLInputElement} */ (upload).files?.[0];
    if (f) { area.value = await f.text(); await run(); }
  });
  root.append(
    h("h1", null, "Simulate a scenario"),
    h("p.hint#scenario-help", null, "A fleet, its releases, a strategy and a run on a virtual clock, run by the same engine as the daemon — here, in this browser. "
      + "The format is that of ", h("code", null, "waverun simulate"), " (the files under ", h("code", null, "tests/scenarios/"), " are examples)."),
    h("form", { onsubmit: (/** @type {SubmitEvent} */ ev) => { ev.preventDefault(); void run(); } },
      h("label", { for: "scenario-text" }, "Scenario (YAML or JSON)"), area, error,
      h("div.row", null, h("button#simulate.primary", { type: "submit" }, "Simulate"), h("label.inline", { for: "scenario-upload" }, "or upload a file"), upload)),
    summary, chart, reportSection);
}
