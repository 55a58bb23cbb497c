// Auto-upgrade profiles: channel, strategy, status of the last trigger and the run it created.

import { h, replace, shortTime } from "../dom.js";
import { dataTable, listOrSay } from "./common.js";

/**
 * @param {import("../app.js").Ctx} ctx
 * @param {HTMLElement} root
 */
export async function render(ctx, root) {
  const body = h("div");
  root.append(h("h1", null, "Auto-upgrade profiles"), body);
  async function load() {
    const list = await listOrSay(ctx, "/autoUpgradeProfiles", body);
    if (!list) return;
    if (!list.length) {
      replace(body, h("p", null, "No auto-upgrade profiles. Create one with ", h("code", null, "waverun autoupgradeprofile create"), "."));
      return;
    }
    replace(body, dataTable("Auto-upgrade profiles", ["Profile", "Channel", "Strategy", "Last trigger", "Run", "Message"], list.map((p) => {
        const pr = p.properties;
        const st = pr.autoUpgradeProfileStatus ?? {};
        const channel = pr.channel + (pr.targetKubernetesVersion ? ` ${pr.targetKubernetesVersion}` : "") + (pr.longTermSupport ? " (LTS)" : "") + (pr.disabled ? " — disabled" : "");
        return h("tr", null,
          h("td", null, p.name),
          h("td", null, channel),
          h("td", null, (pr.updateStrategyId ?? "one by one").split("/").pop()),
          h("td", null, st.lastTriggerStatus ? `${st.lastTriggerStatus} ${shortTime(st.lastTriggeredAt)}` : "never", st.lastTriggerError ? h("div.field-error", null, st.lastTriggerError.message ?? "") : null),
          h("td", null, st.lastUpdateRunName ? h("a", { href: `/runs/${encodeURIComponent(st.lastUpdateRunName)}` }, st.lastUpdateRunName) : ""),
          h("td", null, st.lastTriggerMessage ?? ""));
    })));
  }
  await load();
  return ctx.onEvent((e) => { if (e.kind === "RunGenerated") void load(); });
}
