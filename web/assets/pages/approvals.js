// Approvals: the gates waiting for a person, fleet-wide, with an approve button for approvers.
// Each approval is sent with If-Match and lands in the audit log with who and when.

import { describe } from "../app.js";
import { h, notice, replace, shortTime } from "../dom.js";
import { approveGate } from "../gates.js";
import { dataTable, listOrSay } from "./common.js";

/**
 * @param {import("../app.js").Ctx} ctx
 * @param {HTMLElement} root
 */
export async function render(ctx, root) {
  const body = h("div");
  const out = h("div", { "aria-live": "polite" });
  root.append(h("h1", null, "Approvals"), out, body);
  let loads = 0;
  async function load() {
    // Reads overlap (an approval, then its events): only the newest one is drawn, so an
    // approved gate never comes back from an older answer.
    const mine = ++loads;
    const gates = await listOrSay(ctx, "/gates?$filter=state%20eq%20Pending", body);
    if (!gates || mine !== loads) return;
    if (!gates.length) {
      replace(body, h("p", null, "No gate is waiting for approval."));
      return;
    }
    replace(body, dataTable("Pending gates", ["Gate", "Run", "Where", "Waiting since", ""], gates.map((g) => {
        const t = g.properties.target?.updateRunProperties ?? {};
        const where = `${t.timing ?? ""} ${[t.stage, t.group].filter(Boolean).join(" / ")}`.trim();
        return h("tr", null,
          h("td", null, g.properties.displayName || g.name, h("div.hint", null, h("code", null, g.name))),
          h("td", null, t.name ? h("a", { href: `/runs/${encodeURIComponent(t.name)}` }, t.name) : ""),
          h("td", null, where),
          h("td", null, shortTime(g.systemData?.createdAt)),
          h("td", null, ctx.can("approve")
            ? h("button.primary", { type: "button", "aria-label": `Approve ${g.properties.displayName || g.name} of ${t.name ?? ""}`, onclick: async () => {
              try {
                await approveGate(ctx, g.name);
                replace(out, notice("ok", `Approved ${g.properties.displayName || g.name} of ${t.name}.`));
              } catch (e) {
                replace(out, notice("error", `The approval was refused. ${describe(e)}`));
              }
              await load();
            } }, "Approve")
            : h("span.hint", null, "an approver approves")));
    })));
  }
  await load();
  let timer = 0;
  const off = ctx.onEvent((e) => {
    if (e.kind.startsWith("Gate") && !timer) timer = window.setTimeout(() => { timer = 0; void load(); }, 200);
  });
  return () => { off(); clearTimeout(timer); };
}
