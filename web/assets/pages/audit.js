// The audit log: every mutation with who, what, when, the request id and the outcome, newest
// first, a page at a time.

import { h, replace, shortTime } from "../dom.js";
import { dataTable, listOrSay } from "./common.js";

/**
 * @param {import("../app.js").Ctx} ctx
 * @param {HTMLElement} root
 */
export async function render(ctx, root) {
  const body = h("div");
  root.append(h("h1", null, "Audit log"), body);
  const entries = await listOrSay(ctx, "/audit?$top=1000", body);
  if (!entries) return;
  entries.reverse();
  replace(body, h("p.hint", null, `${entries.length} entries, newest first.`),
    dataTable("Audit log", ["When", "Who", "Action", "Target", "Outcome", "Request"], entries.slice(0, 2000).map((a) => h("tr", null,
      h("td", null, shortTime(a.at)),
      h("td", null, a.who),
      h("td", null, a.action),
      h("td", null, h("code", null, a.target)),
      h("td", null, a.outcome === "ok" ? "ok" : h("span", { class: "field-error" }, a.outcome), a.detail ? h("div.hint", null, a.detail) : null),
      h("td", null, h("code", null, a.requestId))))));
}
