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
