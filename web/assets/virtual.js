// A virtualised list: fixed-height rows, only those in view (plus a margin) in the DOM, so a
// 10,000-member tree or table stays responsive. `update()` redraws the rows in view (for
// countdowns and live changes) without touching the rest.

import { h } from "./dom.js";

export class VirtualList {
  /**
   * @param {{ rowHeight: number, count: number, render: (i: number) => HTMLElement, label: string, maxHeight?: string }} opts
   */
  constructor(opts) {
    this.opts = opts;
    // Focusable, so that a keyboard can scroll it.
    this.el = h("div.virtual", { role: "list", "aria-label": opts.label, tabindex: "0" });
    this.el.style.maxHeight = opts.maxHeight ?? "70vh";
    this.spacer = h("div.spacer", { role: "none" });
    this.el.appendChild(this.spacer);
    let queued = false;
    this.el.addEventListener("scroll", () => {
      if (queued) return;
      queued = true;
      requestAnimationFrame(() => { queued = false; this.update(); });
    });
    this.setCount(opts.count);
  }

  /** @param {number} n */
  setCount(n) {
    this.opts.count = n;
    this.spacer.style.height = `${n * this.opts.rowHeight}px`;
    this.update();
  }

  update() {
    const { rowHeight, count, render } = this.opts;
    const view = this.el.clientHeight || 600;
    const first = Math.max(0, Math.floor(this.el.scrollTop / rowHeight) - 10);
    const last = Math.min(count, Math.ceil((this.el.scrollTop + view) / rowHeight) + 10);
    const focused = document.activeElement && this.spacer.contains(document.activeElement)
      ? document.activeElement.getAttribute("data-focus-key") : null;
    const rows = [];
    for (let i = first; i < last; i++) {
      const row = render(i);
      row.classList.add("vrow");
      row.setAttribute("role", "listitem");
      row.style.top = `${i * rowHeight}px`;
      row.style.height = `${rowHeight}px`;
      rows.push(row);
    }
    this.spacer.replaceChildren(...rows);
    if (focused) {
      const again = this.spacer.querySelector(`[data-focus-key="${CSS.escape(focused)}"]`);
      if (again instanceof HTMLElement) again.focus({ preventScroll: true });
    }
  }
}
