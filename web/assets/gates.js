// Approving a gate from any page: read it for its ETag, then approve with If-Match, so that an
// approval never lands on a gate that changed in between (the API answers 412 and the page says so).

/**
 * @param {import("./app.js").Ctx} ctx
 * @param {string} id the gate's name (a lowercase GUID) or resource id (`/fleets/F/gates/NAME`, as
 *   a run's status tree gives it)
 */
export async function approveGate(ctx, id) {
  const path = `/gates/${encodeURIComponent(id.split("/").pop() ?? id)}`;
  const { etag } = await ctx.api.get(path);
  await ctx.api.post(`${path}/approve`, {}, etag);
}

/**
 * Fails a Pending gate (an inconclusive health check judged unhealthy, an approval refused): its
 * stage or group fails and the run stops.
 * @param {import("./app.js").Ctx} ctx
 * @param {string} id the gate's name or resource id
 * @param {string} message why, shown on the gate and in the run's error
 */
export async function failGate(ctx, id, message) {
  const path = `/gates/${encodeURIComponent(id.split("/").pop() ?? id)}`;
  await ctx.api.post(`${path}/fail`, message ? { message } : {});
}
