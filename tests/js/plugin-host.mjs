// A waverun plugin host in plain Node: only the built-in `WebAssembly` API, no dependencies.
//
// It implements every import of bindings/ABI.md (module `waverun_host_v1`) with a virtual clock,
// an in-memory journal and snapshot, and a simulated fleet that behaves exactly like
// core/src/sim/fleet.rs; and it runs the simulator loop of core/src/sim/mod.rs
// (`Simulation::step`) around the plugin, producing the report of `waverun simulate -o json`:
// `{timeline, run: {name, status}, summary}`.
//
//   node tests/js/plugin-host.mjs SCENARIO.json [PLUGIN.wasm] [--crash-every N] [--snapshot-every N]
//
// The scenario is JSON (the scenario format; `cargo run -p waverun-plugin --example scenario_json
// -- FILE.yaml` converts YAML exactly as `waverun simulate` reads it). With --crash-every N the
// guest instance is thrown away before every Nth input and a fresh one restarts from storage;
// with --snapshot-every N a snapshot is requested before every Nth input.

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const DEFAULT_WASM = path.join(
  ROOT, 'target/wasm32-unknown-unknown/release/waverun_plugin.wasm');

const MASK64 = (1n << 64n) - 1n;
const MINUTE = 60_000;
const DAY = 86_400_000;
const enc = new TextEncoder();
const dec = new TextDecoder();

// ------------------------------------------------------------------------------ time

/** RFC 3339 → milliseconds since the epoch. */
export function parseTime(s) {
  const ms = Date.parse(s);
  if (Number.isNaN(ms)) throw new Error(`not an RFC 3339 time: ${s}`);
  return ms;
}

/** Milliseconds → RFC 3339 UTC as chrono writes it (`Z`; fraction only when not whole). */
export function fmtTime(ms) {
  return new Date(ms).toISOString().replace('.000Z', 'Z');
}

// ------------------------------------------------------------------------------ storage

/** The journal and the snapshot, in memory. */
export class MemoryStorage {
  constructor() {
    this.journal = []; // record texts, in append order
    this.snapshot = null;
    this.appendResult = 0; // what journal_append answers (0 = durable)
  }
  append(text) {
    if (this.appendResult !== 0) return this.appendResult;
    this.journal.push(text);
    return 0;
  }
  writeSnapshot(text) {
    const n = JSON.parse(text).journalSeq;
    this.snapshot = text;
    // The host MAY drop the records the snapshot covers; this one does.
    this.journal = this.journal.filter((r) => JSON.parse(r).seq > n);
    return 0;
  }
  /** kind 0: the snapshot, 1: the journal after it; null when there is nothing. */
  read(kind) {
    if (kind === 0) return this.snapshot === null ? null : enc.encode(this.snapshot);
    if (kind === 1) return this.journal.length ? enc.encode(this.journal.join('\n')) : null;
    return null;
  }
}

// ------------------------------------------------------------------------------ the fleet

/** core/src/sim/fleet.rs, line by line. */
export class SimulatedFleet {
  constructor(scenario) {
    this.behaviors = new Map(scenario.members.map((m) => [m.name, behavior(m.behavior)]));
    this.attempts = new Map();
    this.inFlight = []; // {due, seq, op, ok}, ordered by (due, seq)
    this.known = new Set();
    this.seq = 0;
    this.rng = (BigInt(scenario.seed ?? 0) ^ 0x9E3779B97F4A7C15n) & MASK64;
  }
  /** Accepts an upgrade at `now`; a repeated operation id is the same operation. */
  submit(op, now) {
    if (this.known.has(op.operationId)) return;
    this.known.add(op.operationId);
    const b = this.behaviors.get(op.member) ?? behavior(undefined);
    const attempt = (this.attempts.get(op.member) ?? 0) + 1;
    this.attempts.set(op.member, attempt);
    const ok = attempt > b.failAttempts;
    const jitter = b.jitterMinutes > 0
      ? Number(this.nextRandom() % BigInt(b.jitterMinutes + 1))
      : 0;
    const due = now + (b.upgradeMinutes + jitter) * MINUTE;
    this.seq += 1;
    const entry = { due, seq: this.seq, op: op.operationId, ok };
    let i = this.inFlight.length;
    while (i > 0 && (this.inFlight[i - 1].due > due
      || (this.inFlight[i - 1].due === due && this.inFlight[i - 1].seq > entry.seq))) i -= 1;
    this.inFlight.splice(i, 0, entry);
  }
  knows(operationId) {
    return this.known.has(operationId);
  }
  nextCompletion() {
    return this.inFlight.length ? this.inFlight[0].due : null;
  }
  /** Results due at or before `now`, in due order (ABI observations). */
  takeDue(now) {
    const out = [];
    while (this.inFlight.length && this.inFlight[0].due <= now) {
      const e = this.inFlight.shift();
      out.push(e.ok
        ? { type: 'upgradeSucceeded', operationId: e.op }
        : { type: 'upgradeFailed', operationId: e.op, message: 'simulated upgrade failure' });
    }
    return out;
  }
  idle() {
    return this.inFlight.length === 0;
  }
  nextRandom() {
    // splitmix64, as in the Rust code (wrapping arithmetic on u64).
    this.rng = (this.rng + 0x9E3779B97F4A7C15n) & MASK64;
    let z = this.rng;
    z = ((z ^ (z >> 30n)) * 0xBF58476D1CE4E5B9n) & MASK64;
    z = ((z ^ (z >> 27n)) * 0x94D049BB133111EBn) & MASK64;
    return z ^ (z >> 31n);
  }
}

function behavior(b) {
  return {
    upgradeMinutes: b?.upgradeMinutes ?? 30,
    failAttempts: b?.failAttempts ?? 0,
    jitterMinutes: b?.jitterMinutes ?? 0,
  };
}

// ------------------------------------------------------------------------------ the guest

/**
 * One plugin instance. `host` supplies the world: `now` (ms), `storage` (MemoryStorage-like),
 * `submit(op)` / `query(operationId)` returning the import's answer, and `logs` (an array).
 */
export class Guest {
  constructor(module, host) {
    this.host = host;
    const imports = { waverun_host_v1: this.imports() };
    this.instance = new WebAssembly.Instance(module, imports);
    this.ex = this.instance.exports;
    const version = this.ex.waverun_abi_version();
    if (version !== 1) throw new Error(`plugin ABI version ${version}; this host implements 1`);
  }

  bytes(ptr, len) {
    return new Uint8Array(this.ex.memory.buffer, ptr >>> 0, len >>> 0);
  }

  text(ptr, len) {
    return dec.decode(this.bytes(ptr, len));
  }

  imports() {
    const h = this.host;
    return {
      clock_now_ms: () => BigInt(h.now),
      cluster_submit: (ptr, len) => h.submit(JSON.parse(this.text(ptr, len))),
      cluster_query: (ptr, len) => h.query(JSON.parse(this.text(ptr, len)).operationId),
      journal_append: (ptr, len) => h.storage.append(this.text(ptr, len)),
      snapshot_write: (ptr, len) => h.storage.writeSnapshot(this.text(ptr, len)),
      storage_read: (kind, ptr, cap) => {
        const data = h.storage.read(kind);
        if (data === null) return -1;
        const n = Math.min(cap, data.length);
        this.bytes(ptr, n).set(data.subarray(0, n));
        return data.length;
      },
      log: (level, ptr, len) => {
        h.logs.push({ level, message: this.text(ptr, len) });
      },
    };
  }

  /** Calls an export, passing `arg` (JSON) if given; returns the parsed envelope. */
  call(name, arg) {
    let r;
    if (arg === undefined) {
      r = this.ex[name]();
    } else {
      const data = enc.encode(typeof arg === 'string' ? arg : JSON.stringify(arg));
      const ptr = this.ex.waverun_alloc(data.length);
      this.bytes(ptr, data.length).set(data);
      r = this.ex[name](ptr, data.length);
    }
    const u = BigInt.asUintN(64, r);
    const ptr = Number(u >> 32n);
    const len = Number(u & 0xFFFFFFFFn);
    const text = this.text(ptr, len);
    this.ex.waverun_free(ptr, len);
    const env = JSON.parse(text);
    if (env.v !== 1) throw new Error(`envelope without "v": 1: ${text}`);
    return env;
  }

  init() { return this.call('waverun_init'); }
  request(request) { return this.call('waverun_request', { v: 1, request }); }
  command(command) { return this.request({ type: 'command', command }); }
  deliver(observation) { return this.call('waverun_deliver', { v: 1, observation }); }
  wake() { return this.call('waverun_wake'); }
  status(run) { return this.call('waverun_status', { v: 1, run }); }
  /** ms since the epoch, or null for never. */
  nextWakeup() {
    const t = this.ex.waverun_next_wakeup();
    return t < 0n ? null : Number(t);
  }
}

// ------------------------------------------------------------------------------ the scenario

/** Parses scenario JSON text; a `seed` beyond 2^53 is kept exact as a BigInt. */
export function parseScenario(text) {
  const s = JSON.parse(text);
  const m = /"seed"\s*:\s*(\d+)/.exec(text);
  if (m && s.seed !== undefined) s.seed = BigInt(m[1]);
  return s;
}

/** `Scenario::catalog`: the scenario's releases, or the implicit catalog. */
function catalog(s) {
  if (s.releases) return s.releases;
  const everywhere = (version) => ({ version, available: { '*': s.start } });
  const cat = { kubernetes: [], nodeImages: [] };
  const v = s.run.managedClusterUpdate.upgrade.kubernetesVersion;
  if (v !== undefined && v !== null) cat.kubernetes.push(everywhere(v));
  const images = [...new Set(s.members.flatMap((m) => (m.nodePools ?? []).map((p) => p.imageVersion)))];
  images.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  cat.nodeImages = images.map(everywhere);
  return cat;
}

/** `Scenario::setup_commands`, with the field path errors belong to. */
function setupCommands(s) {
  const out = [
    ['releases', { type: 'setCatalog', catalog: catalog(s) }],
    ['freezes', { type: 'setFreezes', freezes: s.freezes ?? [] }],
  ];
  s.members.forEach((m, i) => {
    const { behavior: _, ...member } = m;
    out.push([`members[${i}]`, { type: 'upsertMember', member }]);
  });
  const run = { name: s.run.name, managedClusterUpdate: s.run.managedClusterUpdate };
  if (s.strategy) run.strategy = s.strategy;
  out.push(['run', { type: 'createRun', run }]);
  return out;
}

/** `Action::command`. */
function actionCommand(a, run) {
  switch (a.do) {
    case 'start': return { type: 'startRun', name: run };
    case 'stop': return { type: 'stopRun', name: run };
    case 'skip': return { type: 'skip', run, targets: a.targets ?? [] };
    case 'approve': {
      const c = { type: 'completeGate', run, gate: { ...(a.gate ?? {}) } };
      if (a.by !== undefined && a.by !== null) c.by = a.by;
      return c;
    }
    default: throw new Error(`unknown action ${a.do}`);
  }
}

/** A skip target as the Rust type prints it (`Kind:name`, trimmed). */
function skipTarget(t) {
  const i = t.indexOf(':');
  return i < 0 ? t : `${t.slice(0, i).trim()}:${t.slice(i + 1).trim()}`;
}

/** `serde_json::to_value(&action)`: keys sorted (serde_json's map), defaults left out. */
function actionValue(a) {
  const v = { at: fmtTime(parseTime(a.at)), do: a.do };
  const gate = a.gate && Object.fromEntries(
    Object.entries(a.gate).filter(([, x]) => x !== null && x !== undefined).sort(([x], [y]) => (x < y ? -1 : 1)));
  if (gate) v.gate = gate;
  if (a.targets?.length) v.targets = a.targets.map(skipTarget);
  if (a.by !== undefined && a.by !== null) v.by = a.by;
  return Object.fromEntries(Object.entries(v).sort(([x], [y]) => (x < y ? -1 : 1)));
}

// ------------------------------------------------------------------------------ the simulator

const FINISHED = new Set(['Completed', 'Failed', 'Skipped', 'Stopped']);

/** core/src/sim/mod.rs `Simulation`, with the plugin as the engine. */
export class Simulation {
  constructor(module, scenario, { crashEvery = 0, snapshotEvery = 0 } = {}) {
    this.module = module;
    this.crashEvery = crashEvery;
    this.snapshotEvery = snapshotEvery;
    this.inputs = 0;
    this.restarts = 0;
    this.run = scenario.run.name;
    this.autoApprove = scenario.autoApprove ?? false;
    this.actions = (scenario.actions ?? []).map((a) => ({ ...a, atMs: parseTime(a.at) }));
    this.nextAction = 0;
    const start = parseTime(scenario.start);
    this.until = scenario.until ? parseTime(scenario.until) : start + 366 * DAY;
    this.now = start;
    this.timeline = [];
    this.done = false;
    this.fleet = new SimulatedFleet(scenario);
    this.host = {
      now: start,
      storage: new MemoryStorage(),
      logs: [],
      submit: (cmd) => {
        if (cmd.type !== 'startUpgrade') return 2;
        this.fleet.submit(cmd, this.host.now);
        return 0;
      },
      query: (id) => (this.fleet.knows(id) ? 0 : 1),
    };
    this.guest = this.start();
    for (const [p, cmd] of setupCommands(scenario)) {
      const r = this.input(() => this.guest.command(cmd));
      if (!r.ok) throw new Error(`${p}: ${r.error.message}`);
      // Creation events are bookkeeping, not part of the run's timeline.
    }
  }

  /** A fresh instance, initialised from storage. */
  start() {
    const guest = new Guest(this.module, this.host);
    const init = guest.init();
    if (!init.ok) throw new Error(`waverun_init: ${JSON.stringify(init.error)}`);
    if (init.result.events?.length) this.drain(init.result.events);
    return guest;
  }

  /**
   * One state-changing call. With `crashEvery`, the instance is first thrown away now and then
   * (a fresh one restarts from storage); with `snapshotEvery`, a snapshot is requested now and
   * then (so restarts begin from a snapshot and the rest of the journal).
   */
  input(call) {
    this.inputs += 1;
    if (this.snapshotEvery && this.inputs % this.snapshotEvery === 0) {
      const r = this.guest.request({ type: 'snapshot' });
      if (!r.ok) throw new Error(`snapshot: ${JSON.stringify(r.error)}`);
    }
    if (this.crashEvery && this.inputs % this.crashEvery === 0) {
      this.guest = this.start();
      this.restarts += 1;
    }
    return call();
  }

  static events(r) {
    return (r.ok ? r.result.events : r.events) ?? [];
  }

  runToEnd() {
    while (this.step());
  }

  step() {
    if (this.done) return false;
    const now = this.now;
    this.host.now = now;
    // 1. Upgrade results due now.
    for (const obs of this.fleet.takeDue(now)) {
      const r = this.input(() => this.guest.deliver(obs));
      if (!r.ok) throw new Error(`deliver: ${JSON.stringify(r.error)}`);
      this.drain(Simulation.events(r));
    }
    // 2. Operator actions due now.
    while (this.nextAction < this.actions.length && this.actions[this.nextAction].atMs <= now) {
      const a = this.actions[this.nextAction];
      this.nextAction += 1;
      const r = this.input(() => this.guest.command(actionCommand(a, this.run)));
      // What the input's due timers did comes first: it may be why the action is refused.
      this.drain(Simulation.events(r));
      if (!r.ok) {
        this.timeline.push({
          at: fmtTime(now),
          kind: 'ActionRejected',
          error: { code: r.error.code, message: r.error.message },
          action: actionValue(a),
        });
      }
    }
    // 3. Engine timers due now.
    const w = this.input(() => this.guest.wake());
    if (!w.ok) throw new Error(`wake: ${JSON.stringify(w.error)}`);
    this.drain(Simulation.events(w));

    const finished = FINISHED.has(this.runState()) && this.fleet.idle();
    const actionsLeft = this.nextAction < this.actions.length;
    if (finished && !actionsLeft) {
      this.done = true;
      return false;
    }
    const next = [
      this.guest.nextWakeup(),
      this.fleet.nextCompletion(),
      actionsLeft ? this.actions[this.nextAction].atMs : null,
    ].filter((t) => t !== null);
    if (next.length && Math.min(...next) <= this.until) {
      this.now = Math.max(Math.min(...next), now);
      return true;
    }
    this.done = true;
    return false;
  }

  /** Events go to the timeline; Approval gates are completed at once with autoApprove. */
  drain(events) {
    for (;;) {
      const approvals = [];
      for (const ev of events) {
        if (ev.kind === 'RunCreated') continue;
        if (this.autoApprove && ev.kind === 'GateCreated' && ev.gateType === 'Approval') {
          approvals.push(ev.gateId ?? null);
        }
        delete ev.run;
        this.timeline.push(ev);
      }
      if (!approvals.length) return;
      events = [];
      for (const id of approvals) {
        const r = this.input(() => this.guest.command({
          type: 'completeGate',
          run: this.run,
          gate: id === null ? {} : { id },
          by: 'autoApprove',
        }));
        events.push(...Simulation.events(r));
      }
    }
  }

  runState() {
    const r = this.guest.request({ type: 'runs' });
    if (!r.ok) throw new Error(`runs: ${JSON.stringify(r.error)}`);
    return r.result.runs.find((x) => x.name === this.run)?.state;
  }

  /** `{timeline, run: {name, status}, summary}` as `waverun simulate -o json` prints it. */
  report() {
    const r = this.guest.status(this.run);
    if (!r.ok) throw new Error(`status: ${JSON.stringify(r.error)}`);
    const status = r.result;
    const n = { Completed: 0, Failed: 0, Skipped: 0, other: 0 };
    for (const st of status.stages) {
      for (const g of st.groups) {
        for (const m of g.members) {
          const s = m.status.state;
          if (s === 'Completed' || s === 'Failed' || s === 'Skipped') n[s] += 1;
          else n.other += 1;
        }
      }
    }
    const startedAt = status.status.startTime ?? null;
    const finishedAt = status.status.completedTime ?? null;
    return {
      timeline: this.timeline,
      run: { name: this.run, status },
      summary: {
        state: status.status.state,
        startedAt,
        finishedAt,
        makespanSeconds: startedAt !== null && finishedAt !== null
          ? Math.trunc((parseTime(finishedAt) - parseTime(startedAt)) / 1000)
          : null,
        membersCompleted: n.Completed,
        membersFailed: n.Failed,
        membersSkipped: n.Skipped,
        membersPending: n.other,
      },
    };
  }
}

/** Compiles the plugin module. */
export function loadModule(wasmPath = DEFAULT_WASM) {
  return new WebAssembly.Module(readFileSync(wasmPath));
}

/** Runs a scenario (parsed JSON) to its end through the plugin; returns the report. */
export function simulate(module, scenario, options = {}) {
  const sim = new Simulation(module, scenario, options);
  sim.runToEnd();
  return sim.report();
}

// ------------------------------------------------------------------------------ CLI

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const options = {};
  for (const [flag, key] of [['--crash-every', 'crashEvery'], ['--snapshot-every', 'snapshotEvery']]) {
    const i = args.indexOf(flag);
    if (i >= 0) {
      options[key] = Number(args[i + 1]);
      args.splice(i, 2);
    }
  }
  if (!args.length) {
    console.error('usage: node tests/js/plugin-host.mjs SCENARIO.json [PLUGIN.wasm] '
      + '[--crash-every N] [--snapshot-every N]');
    process.exit(2);
  }
  const scenario = parseScenario(readFileSync(args[0], 'utf8'));
  const report = simulate(loadModule(args[1] ?? DEFAULT_WASM), scenario, options);
  console.log(JSON.stringify(report, null, 2));
}
