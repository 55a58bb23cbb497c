// What the list pages share: reading a whole list (or saying why it could not be read) and a
// table with a caption for assistive technology and column headers.

import { describe } from "../app.js";
import { h, notice, replace } from "../dom.js";

/**
 * Every item at `path`, or null after putting the refusal in `box`.
 * @param {import("../app.js").Ctx} ctx
 * @param {string} path
 * @param {HTMLElement} box
 * @returns {Promise<any[] | null>}
 */
export async function listOrSay(ctx, path, box) {
  try {
    return await ctx.api.list(path);
  } catch (e) {
    replace(box, notice("error", describe(e)));
    return null;
  }
}

/**
 * @param {string} caption
 * @param {string[]} columns
 * @param {HTMLElement[]} rows
 */
export function dataTable(caption, columns, rows) {
  return h("table", null,
    h("caption.sr-only", null, caption),
    h("thead", null, h("tr", null, ...columns.map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", null, ...rows));
}
