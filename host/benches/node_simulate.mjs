// Times the browser package's `simulate` in Node, for `host/benches/wasm_hosts.rs`.
//
//   node host/benches/node_simulate.mjs PKG_DIR SCENARIO_JSON RUNS WARMUP
//   node host/benches/node_simulate.mjs PKG_DIR SCENARIO_JSON --rounds WARMUP
//
// PKG_DIR is `bindings/web/pkg/node` (CommonJS). Prints one line of JSON on stdout:
// {"startupMs", "loadMs", "readMs", "parseMs", "warmupMs": [...], "runsMs": [...],
//  "pingNs", "events", "completed", "node"}
// - startupMs: from process start (performance.timeOrigin) to the first line of this script;
// - loadMs: `require` of the package (compiles and instantiates its Wasm module);
// - readMs / parseMs: reading the scenario file and `JSON.parse` (not part of the runs);
// - runsMs: one `simulate(scenario)` each, which includes converting the scenario into Rust
//   and the report back into JS objects (the package's API takes and returns JS values);
// - pingNs: mean of a trivial package call (`isWaverunError(0)`), the per-call overhead floor.
// With `--rounds`, the runs are the caller's: after the warm-ups it prints `ready`, then runs
// once for each `run` line on stdin (printing `{"ms": ...}`), until `end`, then prints the JSON
// above. The bench interleaves these runs with the other hosts' (a noisy machine slows them all
// alike).
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import path from "node:path";

const startupMs = performance.now(); // ms since the process's time origin
const [pkgDir, scenarioPath, runsArg, warmupArg] = process.argv.slice(2);
const rounds = runsArg === "--rounds";
const runs = rounds ? 0 : Number(runsArg ?? 5);
const warmup = Number(warmupArg ?? 1);

const require = createRequire(import.meta.url);
let t = performance.now();
const pkg = require(path.resolve(pkgDir));
const loadMs = performance.now() - t;

t = performance.now();
const text = readFileSync(scenarioPath, "utf8");
const readMs = performance.now() - t;
t = performance.now();
const scenario = JSON.parse(text);
const parseMs = performance.now() - t;

function once() {
  const t0 = performance.now();
  const report = pkg.simulate(scenario);
  const ms = performance.now() - t0;
  return { ms, report };
}

const warmupMs = [];
for (let i = 0; i < warmup; i++) warmupMs.push(once().ms);
const runsMs = [];
let last;
for (let i = 0; i < runs; i++) {
  const r = once();
  runsMs.push(r.ms);
  last = r.report;
}
if (rounds) {
  const { createInterface } = await import("node:readline");
  console.log("ready");
  for await (const line of createInterface({ input: process.stdin })) {
    if (line.trim() === "end") break;
    const r = once();
    runsMs.push(r.ms);
    last = r.report;
    console.log(JSON.stringify({ ms: r.ms }));
  }
}

const calls = 200_000;
let hits = 0;
t = performance.now();
for (let i = 0; i < calls; i++) if (pkg.isWaverunError(i)) hits++;
const pingNs = ((performance.now() - t) * 1e6) / calls;

console.log(
  JSON.stringify({
    startupMs,
    loadMs,
    readMs,
    parseMs,
    warmupMs,
    runsMs,
    pingNs,
    hits,
    events: last.timeline.length,
    completed: last.summary.membersCompleted,
    state: last.summary.state,
    node: process.version,
  }),
);
