// The engine in the browser: the daemon's own plugin module (bindings/ABI.md), fetched from
// /assets/waverun_plugin.wasm and run under the browser's `WebAssembly` API in this worker, so
// that a long simulation never freezes the page. Only the ABI's pure requests are sent here
// (validate, select, planScenario, simulate, windows, forecastFrom); it also says which module it
// runs (its SHA-256), and fetches it again when asked: they touch no import, so the imports below only
// refuse. A call that traps throws the instance away; the next call starts a fresh one.

/** The module and the hex SHA-256 the daemon sent with it (`x-waverun-sha256`). */
/** @type {Promise<{ module: WebAssembly.Module, sha256: string }> | null} */
let compiled = null;
/** @type {WebAssembly.Instance | null} */
let instance = null;
const enc = new TextEncoder();
const dec = new TextDecoder();

/** @returns {WebAssembly.Imports} */
function imports() {
  const refuse = () => 1;
  return {
    waverun_host_v2: {
      clock_now_ms: () => BigInt(Date.now()),
      cluster_submit: refuse,
      cluster_query: refuse,
      check_submit: refuse,
      journal_append: refuse,
      snapshot_write: refuse,
      storage_read: () => -1,
      log: () => {},
    },
  };
}

async function load() {
  const r = await fetch(new URL("./waverun_plugin.wasm", import.meta.url));
  if (!r.ok) throw new Error(`the engine module could not be read (${r.status})`);
  const sha256 = r.headers.get("x-waverun-sha256") ?? "";
  return { module: await WebAssembly.compileStreaming(r), sha256 };
}

async function guest() {
  // A download that failed is tried again at the next request, not remembered.
  compiled ??= load().catch((e) => { compiled = null; throw e; });
  if (!instance) {
    instance = await WebAssembly.instantiate((await compiled).module, imports());
    const abi = /** @type {() => number} */ (instance.exports.waverun_abi_version)();
    if (abi !== 2) throw new Error(`the engine module speaks ABI ${abi}; this portal speaks 2`);
  }
  return instance;
}

/**
 * One request envelope in, one response envelope out (parsed).
 * @param {unknown} request
 */
async function call(request) {
  const g = await guest();
  const x = /** @type {any} */ (g.exports);
  const bytes = enc.encode(JSON.stringify({ v: 1, request }));
  try {
    const ptr = x.waverun_alloc(bytes.length);
    new Uint8Array(x.memory.buffer, ptr, bytes.length).set(bytes);
    const packed = /** @type {bigint} */ (x.waverun_request(ptr, bytes.length));
    const rptr = Number(packed >> 32n), rlen = Number(packed & 0xffffffffn);
    const text = dec.decode(new Uint8Array(x.memory.buffer, rptr, rlen));
    x.waverun_free(rptr, rlen);
    return text;
  } catch (e) {
    instance = null;
    throw e;
  }
}

self.onmessage = async (/** @type {MessageEvent<{ id: number, request?: unknown, op?: "module" | "reload" }>} */ m) => {
  const { id, request, op } = m.data;
  try {
    if (op === "reload") {
      // The daemon has another module now (it was upgraded under this page): fetch it again.
      compiled = null;
      instance = null;
    }
    if (op) {
      await guest();
      self.postMessage({ id, envelope: (await /** @type {Promise<{ sha256: string }>} */ (compiled)).sha256 });
      return;
    }
    self.postMessage({ id, envelope: await call(request) });
  } catch (e) {
    self.postMessage({ id, failure: String(e instanceof Error ? e.message : e) });
  }
};
