// The page's side of the in-browser engine (engine-worker.js): one promise per request, the
// envelope's refusal as an `EngineError` with the ABI's stable `code` and the field `path`.

/** A refusal of the engine: `code` (InvalidField, ...) and the field `path` when there is one. */
export class EngineError extends Error {
  /** @param {{ code: string, message: string, path?: string }} e */
  constructor(e) {
    super(e.message);
    this.name = "EngineError";
    this.code = e.code;
    this.path = e.path ?? "";
  }
}

/** @type {Worker | null} */
let worker = null;
let next = 0;
/** @type {Map<number, { resolve: (v: string) => void, reject: (e: Error) => void }>} */
const pending = new Map();

function start() {
  if (worker) return worker;
  const w = new Worker(new URL("./engine-worker.js", import.meta.url), { type: "module" });
  w.onmessage = (/** @type {MessageEvent<{ id: number, envelope?: string, failure?: string }>} */ m) => {
    const p = pending.get(m.data.id);
    pending.delete(m.data.id);
    if (!p) return;
    if (m.data.failure !== undefined) p.reject(new Error(`the engine failed: ${m.data.failure}`));
    else p.resolve(m.data.envelope ?? "");
  };
  w.onerror = (e) => {
    for (const p of pending.values()) p.reject(new Error(`the engine could not start: ${e.message}`));
    pending.clear();
    worker = null;
  };
  worker = w;
  return w;
}

/**
 * The raw response envelope (JSON text) of a pure request.
 * @param {Record<string, unknown>} request
 * @returns {Promise<string>}
 */
export function requestText(request) {
  return post({ request });
}

/**
 * One message to the worker: a request, or an operation on its module.
 * @param {{ request: Record<string, unknown> } | { op: "module" | "reload" }} message
 * @returns {Promise<string>}
 */
function post(message) {
  const w = start();
  const id = ++next;
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject });
    w.postMessage({ id, ...message });
  });
}

/**
 * A pure request's result, or its refusal thrown as `EngineError`.
 * @param {Record<string, unknown>} request
 * @returns {Promise<any>}
 */
export async function request(request) {
  const env = JSON.parse(await requestText(request));
  if (!env.ok) throw new EngineError(env.error);
  return env.result;
}

/**
 * What `waverun validate -o json` says of a strategy or scenario text, with its kind and, for a
 * strategy, the strategy as the API stores it.
 * @param {string} text
 * @param {"yaml" | "json"} format
 * @returns {Promise<import("../types").Validation>}
 */
export function validate(text, format) {
  return request({ type: "validate", text, format });
}

/**
 * The members a label selector takes (the strategies' syntax).
 * @param {string} selector
 * @param {{ name: string, labels: Record<string, string> }[]} members
 * @returns {Promise<string[]>}
 */
export async function select(selector, members) {
  return (await request({ type: "select", selector, members })).matches;
}

/**
 * The simulation report of a scenario, exactly as `waverun simulate -o json` prints it
 * (two-space indentation and a final newline).
 * @param {{ scenario: unknown } | { text: string, format: "yaml" | "json" }} input
 * @returns {Promise<string>}
 */
export async function simulateText(input) {
  const result = await request({ type: "simulate", ...input });
  return `${JSON.stringify(result, null, 2)}\n`;
}

/**
 * `waverun plan -o json` of a scenario.
 * @param {unknown} scenario
 * @returns {Promise<any>}
 */
export function planScenario(scenario) {
  return request({ type: "planScenario", scenario });
}

/**
 * When maintenance windows (the member model's `maintenance`) are open between two instants.
 * @param {{ kubernetes?: unknown, nodeOS?: unknown }} maintenance
 * @param {number} from ms
 * @param {number} until ms
 * @returns {Promise<{ kubernetes?: { start: string, end: string }[], nodeOS?: { start: string, end: string }[] }>}
 */
export function windows(maintenance, from, until) {
  const iso = (/** @type {number} */ t) => new Date(Math.floor(t / 1000) * 1000).toISOString().replace(".000Z", "Z");
  return request({ type: "windows", maintenance, from: iso(from), until: iso(until) });
}

/** The module digest of the last engine state the engine here could not forecast from. */
let foreignModule = "";

/**
 * Whether the engine here is the module that wrote an engine state (`sha256`, the state's
 * `module`): if not, the module is fetched again once (the daemon may have been upgraded under
 * this page); a daemon that runs another module than it serves (`--plugin`) is remembered.
 * @param {string} sha256
 */
async function runsModule(sha256) {
  if (!sha256 || sha256 === foreignModule) return false;
  if ((await post({ op: "module" })) === sha256) return true;
  if ((await post({ op: "reload" })) === sha256) return true;
  foreignModule = sha256;
  return false;
}

/**
 * The forecasts of `runs` (names), simulated forward in this browser from the daemon's engine
 * state (`GET /updateRuns/{name}/forecastState`, read once: it holds every run) by the ABI's
 * `forecastFrom` — byte for byte what the daemon's `GET /forecast` says at that instant. The
 * state is used only by the module that wrote it (its `module` digest); otherwise, or when the
 * engine here fails, the daemon's own forecasts are asked instead (`where` says which). A run
 * that does not exist (any more) is left out.
 * @param {{ get: (path: string) => Promise<{ body: any }> }} api
 * @param {string[]} runs
 * @returns {Promise<Map<string, { forecast: any, where: "browser" | "daemon" }>>}
 */
export async function forecasts(api, runs) {
  /** @type {Map<string, { forecast: any, where: "browser" | "daemon" }>} */
  const out = new Map();
  const path = (/** @type {string} */ run) => `/updateRuns/${encodeURIComponent(run)}`;
  // Through any of the runs: one may have been deleted since the page listed it.
  let state = null;
  for (const run of runs) {
    try {
      state = (await api.get(`${path(run)}/forecastState`)).body;
      break;
    } catch (e) {
      if (/** @type {any} */ (e).status !== 404) throw e;
    }
  }
  if (!state) return out;
  try {
    if (await runsModule(state.module)) {
      const got = await request({ type: "forecastFrom", runs, snapshot: state.snapshot, at: state.at });
      for (const [run, f] of Object.entries(got.forecasts)) out.set(run, { forecast: f, where: "browser" });
      return out;
    }
  } catch { /* the engine here failed: the daemon's forecasts below */ }
  for (const run of runs) {
    try {
      out.set(run, { forecast: (await api.get(`${path(run)}/forecast`)).body, where: "daemon" });
    } catch { /* no forecast for this run */ }
  }
  return out;
}
