// Events out: the event subscriptions (admin only), each with where its deliveries stand, its
// newest attempts, a test delivery and the redelivery of its dead letters; and a form that
// creates one and shows its signing secret once.

import { describe } from "../app.js";
import { h, notice, replace, shortTime } from "../dom.js";
import { dataTable, listOrSay } from "./common.js";

/**
 * @param {import("../app.js").Ctx} ctx
 * @param {HTMLElement} root
 */
export async function render(ctx, root) {
  const body = h("div");
  const out = h("div", { "aria-live": "polite" });
  root.append(h("h1", null, "Event subscriptions"),
    h("p.hint", null, "The fleet's events as signed CloudEvents, POSTed to webhooks at least once and in order (",
      h("code", null, "waverun eventsubscription"), "). Only admins see and change them."),
    out, body);
  if (!ctx.can("admin")) {
    replace(body, h("p", null, "Event subscriptions are an admin's: this token is ", h("strong", null, ctx.caller.role), "."));
    return;
  }
  let loads = 0;
  async function load() {
    const mine = ++loads;
    const subs = await listOrSay(ctx, "/eventSubscriptions", body);
    if (!subs || mine !== loads) return;
    const table = subs.length
      ? dataTable("Event subscriptions", ["Subscription", "Endpoint", "Events", "Delivery", ""], subs.map((s) => row(s)))
      : h("p", null, "No event subscriptions yet.");
    replace(body, table, h("h2", null, "Recent deliveries"), await recent(subs));
  }

  /** @param {any} s */
  function row(s) {
    const p = s.properties;
    const st = p.status ?? {};
    const events = (p.filter?.includedEventTypes ?? []).join(", ") || "all";
    const state = p.enabled === false ? "disabled" : `${st.lag ?? 0} behind, ${st.deadLetters ?? 0} dead letters`;
    return h("tr", null,
      h("td", null, s.name),
      h("td", null, h("code", null, p.destination?.properties?.endpointUrl ?? "")),
      h("td", null, events),
      h("td", null, state),
      h("td", null,
        h("button", { type: "button", "aria-label": `Send a test event to ${s.name}`, onclick: () => act(s, "test") }, "Send test"),
        " ",
        st.deadLetters
          ? h("button", { type: "button", "aria-label": `Deliver the dead letters of ${s.name} again`, onclick: () => act(s, "deadLetters/redeliver") }, "Redeliver")
          : null));
  }

  /**
   * @param {any} s
   * @param {string} action
   */
  async function act(s, action) {
    try {
      const { body: r } = await ctx.api.post(`/eventSubscriptions/${encodeURIComponent(s.name)}/${action}`, {}, s.eTag);
      if (action === "test") {
        replace(out, r.outcome === "delivered"
          ? notice("ok", `${s.name}: the test event was delivered (${r.status}, ${r.latencyMs} ms).`)
          : notice("error", `${s.name}: the test event failed after ${r.latencyMs} ms: ${r.error}`));
      } else {
        replace(out, notice("ok", `${s.name}: ${r.redelivering} dead letters are being delivered again.`));
      }
    } catch (e) {
      replace(out, notice("error", describe(e)));
    }
    await load();
  }

  /** @param {any[]} subs */
  async function recent(subs) {
    const rows = [];
    for (const s of subs) {
      try {
        const { body: log } = await ctx.api.get(`/eventSubscriptions/${encodeURIComponent(s.name)}/deliveries?$top=5`);
        for (const d of log.value ?? []) {
          rows.push(h("tr", null,
            h("td", null, shortTime(d.at)),
            h("td", null, s.name),
            h("td", null, String(d.eventId)),
            h("td", null, d.outcome === "delivered" ? "delivered" : h("span.field-error", null, d.outcome)),
            h("td", null, d.status == null ? "" : String(d.status)),
            h("td", null, `${d.latencyMs} ms`),
            h("td", null, d.error ?? "")));
        }
      } catch (e) {
        rows.push(h("tr", null, h("td", { colspan: "7" }, `${s.name}: ${describe(e)}`)));
      }
    }
    return rows.length
      ? dataTable("Recent deliveries", ["When", "Subscription", "Event", "Outcome", "Status", "Latency", "Error"], rows)
      : h("p", null, "Nothing delivered yet.");
  }

  function form() {
    const name = /** @type {HTMLInputElement} */ (h("input#sub-name", { required: true, autocomplete: "off" }));
    const url = /** @type {HTMLInputElement} */ (h("input#sub-url", { type: "url", required: true, placeholder: "https://hooks.example.com/waverun" }));
    const types = /** @type {HTMLInputElement} */ (h("input#sub-types", { placeholder: "GateCreated RunFailed", "aria-describedby": "sub-types-help" }));
    const result = h("div", { "aria-live": "polite" });
    const submit = async () => {
      const included = types.value.split(/[\s,]+/).filter(Boolean);
      const properties = {
        destination: { endpointType: "WebHook", properties: { endpointUrl: url.value } },
        filter: { includedEventTypes: included },
      };
      try {
        const { body: r } = await ctx.api.put(`/eventSubscriptions/${encodeURIComponent(name.value)}`, { properties }, { createOnly: true });
        const secret = r.properties?.signing?.secret;
        replace(result, notice("ok", `Created ${r.name}.`),
          secret ? h("p", null, "Its signing secret, shown this once — give it to the receiver now: ", h("code#sub-secret", null, secret)) : null);
        await load();
      } catch (e) {
        replace(result, h("p.field-error", { role: "alert" }, describe(e)));
      }
    };
    return h("section", null,
      h("h2", null, "New subscription"),
      h("form", { onsubmit: (/** @type {SubmitEvent} */ ev) => { ev.preventDefault(); void submit(); } },
        h("label", { for: "sub-name" }, "Name"), name,
        h("label", { for: "sub-url" }, "Endpoint URL"), url,
        h("label", { for: "sub-types" }, "Event types"), types,
        h("p.hint#sub-types-help", null, "Kinds or CloudEvents types, separated by spaces; empty: every event."),
        h("div.row", null, h("button.primary", { type: "submit" }, "Create"))),
      result);
  }

  // Outside what each load draws: the secret stays on screen until the page is left.
  root.append(form());
  await load();
  let timer = 0;
  const off = ctx.onEvent(() => {
    if (!timer) timer = window.setTimeout(() => { timer = 0; void load(); }, 2000);
  });
  return () => { off(); clearTimeout(timer); };
}
