// The stored strategies, each opening in the editor; operators start a new one there.

import { h, replace } from "../dom.js";
import { dataTable, listOrSay } from "./common.js";

/**
 * @param {import("../app.js").Ctx} ctx
 * @param {HTMLElement} root
 */
export async function render(ctx, root) {
  const body = h("div");
  root.append(h("h1", null, "Update strategies"), ctx.can("operate") ? h("p", null, h("a.button", { href: "/editor" }, "New strategy")) : "", body);
  const list = await listOrSay(ctx, "/updateStrategies", body);
  if (!list) return;
  if (!list.length) {
    replace(body, h("p", null, "No strategies yet."));
    return;
  }
  replace(body, dataTable("Update strategies", ["Strategy", "Stages", "Groups"], list.map((s) => {
      const stages = s.properties.strategy?.stages ?? [];
      return h("tr", null,
        h("td", null, h("a", { href: `/strategies/${encodeURIComponent(s.name)}` }, s.name)),
        h("td", null, stages.map((/** @type {any} */ st) => st.name).join(" → ")),
        // A stage that selects its members itself is one group of its own name.
        h("td", null, String(stages.reduce((/** @type {number} */ n, /** @type {any} */ st) => n + (st.groups?.length || 1), 0))));
  })));
}
