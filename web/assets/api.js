// The portal's only way to the daemon: the API of shared/spec/api.md, with the bearer token in
// the Authorization header (never in a URL), problems (RFC 9457) as `ApiError`, `If-Match` on
// every mutation, and the event stream read over `fetch` (EventSource cannot send a header)
// with resume from the last event id.

/** The token's key in session storage: it lives as long as the tab. */
const TOKEN_KEY = "waverun.token";

/** A refused request: the problem's fields, kept as the API gave them. */
export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {import("../types").Problem} problem
   * @param {string} [leader] a follower's `x-waverun-leader`: where the leader is reached
   */
  constructor(status, problem, leader = "") {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.name = "ApiError";
    this.status = status;
    this.code = problem.code ?? "";
    this.target = problem.target ?? "";
    this.title = problem.title ?? "";
    this.leader = leader;
  }

  /** What to tell a person: what was refused, why, and what to do. */
  explain() {
    if (this.status === 401) return `Not signed in: ${this.message}. Sign in again with a valid token.`;
    if (this.status === 403) return `Not allowed (403): ${this.message}`;
    if (this.code === "NotLeader") {
      // A browser cannot send the change to another origin for this page (the token and the
      // page stay with this replica): it is shown where to make it instead.
      return this.leader
        ? `This replica follows; changes are made on the leader, ${this.leader} (open the portal there).`
        : "This replica follows and no leader is known yet (a failover is under way): try again in a few seconds.";
    }
    if (this.status === 412) {
      return "It changed since this page read it (its ETag no longer matches).";
    }
    return this.target ? `${this.target}: ${this.message}` : this.message;
  }
}

/** @returns {string | null} */
export function storedToken() {
  return sessionStorage.getItem(TOKEN_KEY);
}

/** @param {string | null} token */
export function storeToken(token) {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

/**
 * A `#token=...` link signs in: the token moves to session storage and leaves the address bar
 * (and the history) at once, so it is never sent to the server nor kept in a URL.
 */
export function takeTokenFromFragment() {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (!m) return;
  let token = m[1];
  try {
    token = decodeURIComponent(token);
  } catch {
    // Not percent-encoded after all: the token as it is.
  }
  storeToken(token);
  history.replaceState(history.state, "", location.pathname + location.search);
}

export class Api {
  /** @param {string} fleet */
  constructor(fleet) {
    this.fleet = fleet;
  }

  /** @param {string} path under the fleet, e.g. `/updateRuns` */
  url(path) {
    return `/api/v1/fleets/${encodeURIComponent(this.fleet)}${path}`;
  }

  /**
   * @param {string} method
   * @param {string} url
   * @param {{ body?: unknown, etag?: string, createOnly?: boolean, signal?: AbortSignal }} [opts]
   * @returns {Promise<{ body: any, etag: string, status: number }>}
   */
  static async call(method, url, opts = {}) {
    /** @type {Record<string, string>} */
    const headers = { Accept: "application/json" };
    const token = storedToken();
    if (token) headers.Authorization = `Bearer ${token}`;
    if (opts.body !== undefined) headers["Content-Type"] = "application/json";
    if (opts.etag) headers["If-Match"] = opts.etag;
    if (opts.createOnly) headers["If-None-Match"] = "*";
    const res = await fetch(url, {
      method,
      headers,
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
      signal: opts.signal,
    });
    const text = await res.text();
    /** @type {any} */
    let body = null;
    if (text) {
      try {
        body = JSON.parse(text);
      } catch {
        body = { detail: text };
      }
    }
    if (!res.ok) {
      throw new ApiError(res.status, body ?? { title: res.statusText }, res.headers.get("x-waverun-leader") ?? "");
    }
    return { body, etag: res.headers.get("ETag") ?? "", status: res.status };
  }

  /** @param {string} path @param {AbortSignal} [signal] */
  async get(path, signal) {
    return Api.call("GET", this.url(path), { signal });
  }

  /**
   * Every item of a list, following `nextLink` pages; `onPage` (if given) sees the items read
   * so far after each page, for a view that shows the first ones while the rest come.
   * @param {string} path
   * @param {(sofar: any[]) => void} [onPage]
   * @returns {Promise<any[]>}
   */
  async list(path, onPage) {
    /** @type {any[]} */
    const items = [];
    // The largest page the API gives (1,000): a 10,000-member fleet in 10 requests, not 100.
    const paged = path.includes("$top=") ? path : `${path}${path.includes("?") ? "&" : "?"}$top=1000`;
    let url = this.url(paged);
    for (let page = 0; page < 1000 && url; page++) {
      const { body } = await Api.call("GET", url);
      for (const item of body.value ?? []) items.push(item);
      const next = body.nextLink ? new URL(body.nextLink, location.href) : null;
      if (next && onPage) onPage(items);
      url = next ? next.pathname + next.search : "";
    }
    return items;
  }

  /**
   * @param {string} path
   * @param {unknown} body
   * @param {{ etag?: string, createOnly?: boolean }} [opts]
   */
  async put(path, body, opts = {}) {
    return Api.call("PUT", this.url(path), { body, ...opts });
  }

  /** @param {string} path @param {unknown} body @param {string} [etag] */
  async post(path, body, etag) {
    return Api.call("POST", this.url(path), { body: body ?? {}, etag });
  }

  /** @param {string} path @param {string} [etag] */
  async del(path, etag) {
    return Api.call("DELETE", this.url(path), { etag });
  }

  /**
   * Follows `GET /events` (Server-Sent Events) from `after`, resuming from the last id after
   * a break, with a growing pause between attempts (1 s to 15 s). The daemon sends a heartbeat
   * every 15 s: 45 s of silence means the connection is dead (a laptop slept, a proxy dropped
   * it) and it is opened again. A 401, 403 or 404 is final: `onState("failed")`, and it stops.
   * @param {{ run?: string, after?: number, onEvent: (e: import("../types").FleetEvent, id: number) => void,
   *           onState?: (s: "live" | "reconnecting" | "failed", why?: ApiError) => void }} opts
   * @returns {{ close(): void }}
   */
  follow(opts) {
    const stop = new AbortController();
    let last = opts.after ?? 0;
    const run = async () => {
      let pause = 1000;
      while (!stop.signal.aborted) {
        const conn = new AbortController();
        const onStop = () => conn.abort();
        stop.signal.addEventListener("abort", onStop);
        let heard = Date.now();
        const watchdog = setInterval(() => {
          if (Date.now() - heard > 45_000) conn.abort();
        }, 5_000);
        try {
          const q = opts.run ? `?run=${encodeURIComponent(opts.run)}` : "";
          /** @type {Record<string, string>} */
          const headers = { Accept: "text/event-stream" };
          const token = storedToken();
          if (token) headers.Authorization = `Bearer ${token}`;
          if (last) headers["Last-Event-ID"] = String(last);
          const res = await fetch(this.url(`/events${q}`), { headers, signal: conn.signal });
          if (res.status === 401 || res.status === 403 || res.status === 404) {
            let problem = {};
            try { problem = await res.json(); } catch { /* not a problem document */ }
            opts.onState?.("failed", new ApiError(res.status, problem));
            return;
          }
          if (!res.ok || !res.body) throw new Error(`events: HTTP ${res.status}`);
          opts.onState?.("live");
          pause = 1000;
          for await (const frame of frames(res.body)) {
            heard = Date.now();
            if (frame.id) last = Number(frame.id);
            if (frame.data) opts.onEvent(JSON.parse(frame.data), last);
          }
        } catch {
          if (stop.signal.aborted) return;
        } finally {
          clearInterval(watchdog);
          stop.signal.removeEventListener("abort", onStop);
        }
        opts.onState?.("reconnecting");
        await new Promise((r) => setTimeout(r, pause));
        pause = Math.min(pause * 2, 15000);
      }
    };
    void run();
    return { close: () => stop.abort() };
  }
}

/**
 * The frames of an SSE body: `{id, event, data}` per blank-line-terminated block; a block of
 * comments only (a heartbeat) is an empty frame, so that the caller hears that the link lives.
 * @param {ReadableStream<Uint8Array>} body
 * @returns {AsyncGenerator<{ id: string, event: string, data: string }>}
 */
async function* frames(body) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
    let end;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      const frame = { id: "", event: "", data: "" };
      for (const line of block.split("\n")) {
        if (!line || line.startsWith(":")) continue;
        const i = line.indexOf(":");
        const field = i < 0 ? line : line.slice(0, i);
        const v = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
        if (field === "id") frame.id = v;
        else if (field === "event") frame.event = v;
        else if (field === "data") frame.data = frame.data ? `${frame.data}\n${v}` : v;
      }
      yield frame;
    }
  }
}
