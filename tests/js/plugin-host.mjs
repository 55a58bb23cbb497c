// A waverun plugin host in plain Node: only the built-in `WebAssembly` API, no dependencies.
//
// It implements every import of bindings/ABI.md (module `waverun_host_v2`) with a virtual clock,
// an in-memory journal and snapshot, a simulated fleet that behaves exactly like
// core/src/sim/fleet.rs, and health checks measured as the scenario's `health` scripts them
// (core/src/sim/scenario.rs `ScriptedHealth`); and it runs the simulator loop of core/src/sim/mod.rs
// (`Simulation::step`) around the plugin, producing the report of `waverun simulate -o json`:
// `{timeline, run?: {name, status}, runs?: [{name, autoUpgradeProfileName?, status}], summary}`.
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
 * `submit(op)` / `query(operationId)` / `checkSubmit(checkRequest)` returning the import's
 * answer (a host without `checkSubmit` refuses every measurement), and `logs` (an array).
 */
export class Guest {
  constructor(module, host) {
    this.host = host;
    const imports = { waverun_host_v2: this.imports() };
    this.instance = new WebAssembly.Instance(module, imports);
    this.ex = this.instance.exports;
    const version = this.ex.waverun_abi_version();
    if (version !== 2) throw new Error(`plugin ABI version ${version}; this host implements 2`);
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
      check_submit: (ptr, len) => (h.checkSubmit ? h.checkSubmit(JSON.parse(this.text(ptr, len))) : 1),
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

// ------------------------------------------------------------------------------ health

/** `ScriptedHealth::matches`: whether a scripted entry answers `req` at `now` (ms). */
function healthMatches(h, req, now) {
  const member = req.purpose === 'Gate' ? null : (req.members[0]?.name ?? null);
  const given = (x) => x !== undefined && x !== null;
  return (!given(h.check) || h.check === req.check.name)
    && (!given(h.member) || h.member === member)
    && (!given(h.group) || h.group === req.group)
    && (!given(h.stage) || h.stage === req.stage)
    && (!given(h.from) || parseTime(h.from) <= now)
    && (!given(h.until) || now < parseTime(h.until));
}

/**
 * The `checkMeasured` observation of `req` at `now` as the scenario's `health` scripts it
 * (`ScriptedHealth::measurement`; the first entry that matches, a pass when none does).
 */
export function scriptedMeasurement(health, req, now) {
  const h = (health ?? []).find((x) => healthMatches(x, req, now));
  const obs = { type: 'checkMeasured', measurementId: req.measurementId };
  if (!h) return { ...obs, verdict: 'Pass' };
  const labels = req.members.length === 1 ? `cluster="${req.members[0].name}"` : '';
  const sample = labels ? { labels, value: h.value } : { value: h.value };
  const values = h.empty ? [] : (h.value !== undefined && h.value !== null ? [sample] : null);
  if (values !== null) obs.values = values;
  const verdict = values !== null ? h.result : (h.result ?? 'Pass');
  if (verdict !== undefined && verdict !== null) obs.verdict = verdict;
  if (h.message !== undefined && h.message !== null) obs.message = h.message;
  return obs;
}

// ------------------------------------------------------------------------------ the scenario

/** Parses scenario JSON text; a `seed` beyond 2^53 is kept exact as a BigInt. */
export function parseScenario(text) {
  const s = JSON.parse(text);
  const m = /"seed"\s*:\s*(\d+)/.exec(text);
  if (m && s.seed !== undefined) s.seed = BigInt(m[1]);
  return s;
}

/**
 * `Scenario::catalog`: the scenario's releases, or the implicit catalog (`implicit_catalog`:
 * the run's target version, if any, and the node images of the members there from the start).
 */
function catalog(s) {
  if (s.releases) return s.releases;
  const everywhere = (version) => ({ version, available: { '*': s.start } });
  const cat = { kubernetes: [], nodeImages: [] };
  const v = s.run?.managedClusterUpdate.upgrade.kubernetesVersion;
  if (v !== undefined && v !== null) cat.kubernetes.push(everywhere(v));
  const present = s.members.filter((m) => m.joinsAt === undefined || m.joinsAt === null);
  const images = [...new Set(present.flatMap((m) => (m.nodePools ?? []).map((p) => p.imageVersion)))];
  images.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  cat.nodeImages = images.map(everywhere);
  return cat;
}

/** `ScenarioMember::member`: the member without its behaviour (nor when it joins). */
function memberOf(m) {
  const { behavior: _b, joinsAt: _j, ...member } = m;
  return member;
}

/** Whether a member joins after the start (`joins_at > start`), so is not there at setup. */
function joinsLater(s, m) {
  return m.joinsAt !== undefined && m.joinsAt !== null && parseTime(m.joinsAt) > parseTime(s.start);
}

/** `Scenario::run_spec`: the scenario's run as the engine takes it, or null without one. */
function runSpec(s) {
  if (!s.run) return null;
  const run = { name: s.run.name, managedClusterUpdate: s.run.managedClusterUpdate };
  if (s.strategy) run.strategy = s.strategy;
  if (s.run.updateStrategyName !== undefined && s.run.updateStrategyName !== null) {
    run.updateStrategyName = s.run.updateStrategyName;
  }
  return run;
}

/**
 * `Scenario::setup_commands`, with the field path errors belong to: catalog, freezes, the
 * members there from the start, named strategies, profiles, then the run (if any).
 */
function setupCommands(s) {
  const out = [
    ['releases', { type: 'setCatalog', catalog: catalog(s) }],
    ['freezes', { type: 'setFreezes', freezes: s.freezes ?? [] }],
  ];
  s.members.forEach((m, i) => {
    if (joinsLater(s, m)) return;
    out.push([`members[${i}]`, { type: 'upsertMember', member: memberOf(m) }]);
  });
  (s.strategies ?? []).forEach((x, i) => {
    out.push([`strategies[${i}]`, { type: 'upsertStrategy', name: x.name, strategy: x.strategy }]);
  });
  (s.profiles ?? []).forEach((profile, i) => {
    out.push([`profiles[${i}]`, { type: 'upsertProfile', profile }]);
  });
  const run = runSpec(s);
  if (run) out.push(['run', { type: 'createRun', run }]);
  return out;
}

/**
 * `Scenario::joins` with `ScenarioMember::member`: members that join after the start, in time
 * order (ties in file order), as `{atMs, member}`.
 */
function joins(s) {
  return s.members
    .map((m, i) => ({ m, i }))
    .filter(({ m }) => joinsLater(s, m))
    .map(({ m, i }) => ({ atMs: parseTime(m.joinsAt), i, member: memberOf(m) }))
    .sort((a, b) => a.atMs - b.atMs || a.i - b.i)
    .map(({ atMs, member }) => ({ atMs, member }));
}

/** `Action::command`: `run` is the scenario's run (an action's own `run` wins). */
function actionCommand(a, scenarioRun) {
  const run = a.run ?? scenarioRun;
  switch (a.do) {
    case 'generateUpdateRun': return { type: 'generateUpdateRun', profile: a.profile ?? '' };
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
  if (a.run !== undefined && a.run !== null) v.run = a.run;
  if (a.profile !== undefined && a.profile !== null) v.profile = a.profile;
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
    /** The scenario's own run (null without one). */
    this.run = scenario.run?.name ?? null;
    this.autoApprove = scenario.autoApprove ?? false;
    /** Several runs (profiles): timeline entries keep their run. */
    this.manyRuns = (scenario.profiles ?? []).length > 0;
    this.actions = (scenario.actions ?? []).map((a) => ({ ...a, atMs: parseTime(a.at) }));
    this.nextAction = 0;
    /** Members that join later, in time order. */
    this.joins = joins(scenario);
    this.nextJoin = 0;
    const start = parseTime(scenario.start);
    this.until = scenario.until ? parseTime(scenario.until) : start + 366 * DAY;
    this.now = start;
    this.timeline = [];
    this.done = false;
    this.fleet = new SimulatedFleet(scenario);
    /** Measurement ids accepted (a repeated one is the same measurement), and results to deliver. */
    this.measuredIds = new Set();
    this.measured = [];
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
      checkSubmit: (req) => {
        if (typeof req.measurementId !== 'string') return 2;
        if (this.measuredIds.has(req.measurementId)) return 0;
        this.measuredIds.add(req.measurementId);
        this.measured.push(scriptedMeasurement(scenario.health, req, this.host.now));
        return 0;
      },
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
    const r = call();
    // The measurements it submitted, delivered at the same instant (the native simulator
    // answers them at once too); their events follow the input's.
    const more = this.deliverMeasured();
    if (more.length) {
      if (r.ok) r.result.events = [...(r.result.events ?? []), ...more];
      else r.events = [...(r.events ?? []), ...more];
    }
    return r;
  }

  /** Delivers every measurement taken and not delivered yet; returns their events. */
  deliverMeasured() {
    const events = [];
    while (this.measured.length) {
      const obs = this.measured.shift();
      const r = this.guest.deliver(obs);
      if (!r.ok) throw new Error(`deliver: ${JSON.stringify(r.error)}`);
      events.push(...(r.result.events ?? []));
    }
    return events;
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
    // 2. Members joining now.
    while (this.nextJoin < this.joins.length && this.joins[this.nextJoin].atMs <= now) {
      const { member } = this.joins[this.nextJoin];
      this.nextJoin += 1;
      const r = this.input(() => this.guest.command({ type: 'upsertMember', member }));
      this.drain(Simulation.events(r));
      if (!r.ok) throw new Error(`upsertMember ${member.name}: ${JSON.stringify(r.error)}`);
    }
    // 3. Operator actions due now.
    while (this.nextAction < this.actions.length && this.actions[this.nextAction].atMs <= now) {
      const a = this.actions[this.nextAction];
      this.nextAction += 1;
      const r = this.input(() => this.guest.command(actionCommand(a, this.run ?? '')));
      // What the input's due timers did comes first: it may be why the action is refused.
      this.drain(Simulation.events(r));
      if (!r.ok) {
        // With profiles, the entry names the run the action was for (none for generateUpdateRun).
        const run = this.manyRuns && a.do !== 'generateUpdateRun' ? (a.run ?? this.run ?? '') : '';
        this.timeline.push({
          at: fmtTime(now),
          kind: 'ActionRejected',
          ...(run ? { run } : {}),
          error: { code: r.error.code, message: r.error.message },
          action: actionValue(a),
        });
      }
    }
    // 4. Engine timers due now.
    const w = this.input(() => this.guest.wake());
    if (!w.ok) throw new Error(`wake: ${JSON.stringify(w.error)}`);
    this.drain(Simulation.events(w));

    // With profiles, runs may still be generated: the simulation goes on while anything is
    // left to happen.
    const finished = !this.manyRuns && this.run !== null
      && FINISHED.has(this.runState()) && this.fleet.idle();
    const actionsLeft = this.nextAction < this.actions.length;
    if (finished && !actionsLeft) {
      this.done = true;
      return false;
    }
    const next = [
      this.guest.nextWakeup(),
      this.fleet.nextCompletion(),
      actionsLeft ? this.actions[this.nextAction].atMs : null,
      this.nextJoin < this.joins.length ? this.joins[this.nextJoin].atMs : null,
    ].filter((t) => t !== null);
    if (next.length && Math.min(...next) <= this.until) {
      this.now = Math.max(Math.min(...next), now);
      return true;
    }
    this.done = true;
    return false;
  }

  /**
   * `World::output` and `drive::answer`: events go to the timeline (keeping their run only with
   * profiles); Approval gates are completed at once, in the event's own run, with autoApprove.
   */
  drain(events) {
    for (;;) {
      const approvals = [];
      for (const ev of events) {
        if (ev.kind === 'RunCreated') continue;
        if (this.autoApprove && ev.kind === 'GateCreated' && ev.gateType === 'Approval') {
          approvals.push({ run: ev.run ?? '', id: ev.gateId ?? null });
        }
        if (!this.manyRuns) delete ev.run;
        this.timeline.push(ev);
      }
      if (!approvals.length) return;
      events = [];
      for (const { run, id } of approvals) {
        const r = this.input(() => this.guest.command({
          type: 'completeGate',
          run,
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

  /**
   * `Simulation::report`: the scenario's run, and with profiles every run (the scenario's
   * first, then the generated ones in the order they were generated; deleted ones are gone),
   * with the summary over all of them; as `waverun simulate -o json` prints it.
   */
  report() {
    const names = []; // [name, profile or null]
    if (this.run !== null) names.push([this.run, null]);
    if (this.manyRuns) {
      for (const e of this.timeline) {
        if (e.kind === 'RunGenerated' && !names.some(([n]) => n === e.run)) {
          names.push([e.run, e.profile]);
        } else if (e.kind === 'RunDeleted') {
          for (let i = names.length - 1; i >= 0; i -= 1) if (names[i][0] === e.run) names.splice(i, 1);
        }
      }
    }
    const runs = [];
    for (const [name, profile] of names) {
      const r = this.guest.status(name);
      if (!r.ok) continue;
      const run = { name };
      if (profile !== null && profile !== undefined) run.autoUpgradeProfileName = profile;
      run.status = r.result;
      runs.push(run);
    }
    const out = { timeline: this.timeline };
    const own = this.run === null ? undefined : runs.find((x) => x.name === this.run);
    if (own) out.run = own;
    if (this.manyRuns && runs.length) out.runs = runs;
    out.summary = summaryOf(runs, this.run);
    return out;
  }
}

/** `Summary::of`: the summary over `runs`; `own` is the scenario's run, whose state is the summary's. */
function summaryOf(runs, own) {
  const n = { Completed: 0, Failed: 0, Skipped: 0, other: 0 };
  for (const r of runs) {
    for (const st of r.status.stages) {
      for (const g of st.groups) {
        for (const m of g.members) {
          const s = m.status.state;
          if (s === 'Completed' || s === 'Failed' || s === 'Skipped') n[s] += 1;
          else n.other += 1;
        }
      }
    }
  }
  const main = (own !== null && runs.find((r) => r.name === own)) || runs[runs.length - 1];
  const times = (key) => runs.map((r) => r.status.status[key] ?? null).filter((t) => t !== null);
  const earliest = (ts) => ts.reduce((a, b) => (parseTime(b) < parseTime(a) ? b : a));
  const latest = (ts) => ts.reduce((a, b) => (parseTime(b) > parseTime(a) ? b : a));
  const starts = times('startTime');
  const ends = times('completedTime');
  const startedAt = starts.length ? earliest(starts) : null;
  const finishedAt = ends.length && ends.length === runs.length ? latest(ends) : null;
  return {
    state: main ? main.status.status.state : 'NotStarted',
    startedAt,
    finishedAt,
    makespanSeconds: startedAt !== null && finishedAt !== null
      ? Math.trunc((parseTime(finishedAt) - parseTime(startedAt)) / 1000)
      : null,
    membersCompleted: n.Completed,
    membersFailed: n.Failed,
    membersSkipped: n.Skipped,
    membersPending: n.other,
  };
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
