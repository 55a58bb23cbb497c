// The plugin under a host nobody here wrote (Node's WebAssembly API): every scenario's report
// must equal `waverun simulate -o json` byte for byte, with and without crashes and snapshots,
// and the module must have exactly the imports and exports of bindings/ABI.md.
//
//   node --test tests/js/
//
// Builds what it needs first (no-ops when fresh); WAVERUN_SKIP_BUILD=1 skips that.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  DEFAULT_WASM, Guest, MemoryStorage, ROOT, Simulation, loadModule, parseScenario, simulate,
} from './plugin-host.mjs';

const WAVERUN = path.join(ROOT, 'target/debug/waverun');
const SCENARIO_JSON = path.join(ROOT, 'target/debug/examples/scenario_json');

if (!process.env.WAVERUN_SKIP_BUILD) {
  const cargo = (...args) => execFileSync('cargo', args, { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  cargo('build', '-q', '--release', '--target', 'wasm32-unknown-unknown', '-p', 'waverun-plugin');
  // The CLI and the example from the workspace's test build (tests/run.sh): one feature set, so
  // wasmtime is not compiled a second time for a `cargo build -p waverun`.
  cargo('test', '-q', '--workspace', '--no-run');
}

const module = loadModule(DEFAULT_WASM);

/** Every scenario file: tests/scenarios (with subdirectories), tests/js/scenarios, the example. */
function scenarioFiles() {
  const files = [];
  const walk = (dir) => {
    for (const e of readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.yaml')) files.push(p);
    }
  };
  walk('tests/scenarios');
  walk('tests/js/scenarios');
  files.sort();
  files.push('host/examples/fleet-rollout.yaml');
  return files;
}

const native = (file) => execFileSync(WAVERUN, ['simulate', '-o', 'json', file], { cwd: ROOT, encoding: 'utf8' });
const scenarioOf = (file) => parseScenario(execFileSync(SCENARIO_JSON, [file], { cwd: ROOT, encoding: 'utf8' }));

// ------------------------------------------------------------------------------ the module

test('imports are exactly bindings/plugin/imports.txt', () => {
  const want = readFileSync(path.join(ROOT, 'bindings/plugin/imports.txt'), 'utf8')
    .split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#')).sort();
  const kinds = { function: 'func', table: 'table', memory: 'memory', global: 'global' };
  const found = WebAssembly.Module.imports(module)
    .map((i) => `${i.module}.${i.name} ${kinds[i.kind]}`).sort();
  assert.deepEqual(found, want);
  assert.equal(found.length, 8);
});

test('exports of ABI section 4', () => {
  const ex = Object.fromEntries(WebAssembly.Module.exports(module).map((e) => [e.name, e.kind]));
  assert.equal(ex.memory, 'memory');
  for (const f of ['waverun_abi_version', 'waverun_alloc', 'waverun_free', 'waverun_init',
    'waverun_request', 'waverun_deliver', 'waverun_wake', 'waverun_status', 'waverun_next_wakeup']) {
    assert.equal(ex[f], 'function', f);
  }
});

// ------------------------------------------------------------------------------ envelopes

function bareHost(now = Date.parse('2026-12-07T00:00:00Z')) {
  const submitted = [];
  return {
    now,
    storage: new MemoryStorage(),
    logs: [],
    submitted,
    submit: (op) => { submitted.push(op); return 0; },
    query: () => 0,
  };
}

test('envelopes and error codes', () => {
  const host = bareHost();
  const g = new Guest(module, host);
  assert.deepEqual(g.request({ type: 'ping' }), { v: 1, ok: true, result: {} });
  assert.equal(g.request({ type: 'runs' }).error.code, 'NotInitialized');
  assert.equal(g.wake().error.code, 'NotInitialized');
  assert.equal(g.nextWakeup(), null);
  const init = g.init();
  assert.deepEqual(init, { v: 1, ok: true, result: { journalSeq: 0, replayed: 0, inFlight: 0, events: [], lastRecordEvents: [] } });
  assert.equal(g.init().error.code, 'InvalidState');
  assert.equal(g.call('waverun_request', 'not json').error.code, 'BadEnvelope');
  assert.equal(g.call('waverun_request', { request: { type: 'ping' } }).error.code, 'BadEnvelope');
  assert.equal(g.call('waverun_request', { v: 2, request: { type: 'ping' } }).error.code, 'UnsupportedVersion');
  assert.equal(g.request({ type: 'teleport' }).error.code, 'BadEnvelope');
  assert.equal(g.deliver({ type: 'upgradeSucceeded' }).error.code, 'BadEnvelope');
  assert.equal(g.status('nope').error.code, 'NotFound');
  const bad = g.command({
    type: 'upsertMember',
    member: { name: 'm', region: 'eastus', kubernetesVersion: 'one.two' },
  });
  assert.equal(bad.error.code, 'InvalidField');
  assert.equal(bad.error.path, 'kubernetesVersion');
  // Unknown fields are ignored.
  assert.equal(g.call('waverun_request', { v: 1, x: 1, request: { type: 'ping', y: 2 } }).ok, true);
  // Big arguments and results (several pages) cross the boundary intact, both ways.
  const region = 'r'.repeat(200_000);
  const big = g.command({ type: 'upsertMember', member: { name: 'm', region, kubernetesVersion: '1.30.4' } });
  assert.equal(big.ok, false);
  assert.equal(big.error.path, 'region');
  assert.ok(big.error.message.includes(`"${region}"`), 'the message quotes the whole value');
});

test('the engine state in a snapshot is versioned; another version is InvalidSnapshot', () => {
  const host = bareHost();
  const g = new Guest(module, host);
  assert.equal(g.init().ok, true);
  assert.equal(g.request({ type: 'snapshot' }).ok, true);
  const doc = JSON.parse(host.storage.snapshot);
  assert.equal(doc.engine.formatVersion, 1);
  assert.ok(host.storage.snapshot.includes('"engine":{"formatVersion":1,"engine":{'));

  for (const [engine, message] of [
    [{ ...doc.engine, formatVersion: 999 }, 'formatVersion 999 is not supported (this build reads formatVersion 1)'],
    [doc.engine.engine, 'no formatVersion found (this build reads formatVersion 1)'],
  ]) {
    const h = bareHost();
    h.storage.snapshot = JSON.stringify({ ...doc, engine });
    const init = new Guest(module, h).init();
    assert.equal(init.error.code, 'InvalidSnapshot', JSON.stringify(init));
    assert.ok(init.error.message.includes(message), init.error.message);
  }
});

test('PersistenceFailed: the input is refused and nothing changes', () => {
  const file = 'tests/scenarios/gates-and-wait.yaml';
  const sim = new Simulation(module, scenarioOf(file));
  sim.step(); // started: dev-1 in flight
  const before = JSON.stringify(sim.guest.status(sim.run));
  const journal = [...sim.host.storage.journal];
  sim.host.storage.appendResult = 7;
  sim.host.now += 30 * 60_000;
  for (const r of [
    sim.guest.deliver({ type: 'upgradeSucceeded', operationId: 'r1/dev-1' }),
    sim.guest.command({ type: 'stopRun', name: 'r1' }),
    sim.guest.wake(),
  ]) {
    assert.equal(r.ok, false);
    assert.equal(r.error.code, 'PersistenceFailed');
  }
  assert.equal(JSON.stringify(sim.guest.status(sim.run)), before);
  assert.deepEqual(sim.host.storage.journal, journal);
  sim.host.storage.appendResult = 0;
  const r = sim.guest.deliver({ type: 'upgradeSucceeded', operationId: 'r1/dev-1' });
  assert.ok(r.result.events.some((e) => e.kind === 'MemberCompleted'));
});

test('a restart queries operations in flight and resubmits only those the host lost', () => {
  const sim = new Simulation(module, scenarioOf('host/examples/fleet-rollout.yaml'));
  sim.step();
  const inFlight = sim.fleet.inFlight.map((e) => e.op).sort();
  assert.ok(inFlight.length >= 2, inFlight.join());
  const queried = [];
  const submitted = [];
  const host = {
    ...sim.host,
    query: (id) => { queried.push(id); return id === inFlight[0] ? 1 : 0; },
    submit: (op) => { submitted.push(op); return 0; },
  };
  const g = new Guest(module, host);
  const init = g.init();
  assert.equal(init.ok, true);
  assert.equal(init.result.inFlight, inFlight.length);
  assert.deepEqual(queried.sort(), inFlight);
  assert.deepEqual(submitted.map((o) => o.operationId), [inFlight[0]]);
  assert.equal(submitted[0].type, 'startUpgrade');
});

test('a restart submits every awaited measurement again; a refused one is an Error measurement', () => {
  const sim = new Simulation(module, scenarioOf('tests/scenarios/health/gate-inconclusive-approved.yaml'));
  const held = [];
  // This host takes measurements and never answers them.
  sim.host.checkSubmit = (req) => { held.push(req); return 0; };
  for (let i = 0; i < 50 && held.length === 0; i += 1) sim.step();
  assert.equal(held.length, 1);
  assert.equal(held[0].purpose, 'Gate');
  const again = [];
  const g = new Guest(module, { ...sim.host, checkSubmit: (req) => { again.push(req); return 0; } });
  assert.equal(g.init().ok, true);
  assert.deepEqual(again, held, 'the same request, submitted again');
  const before = sim.host.storage.journal.length;
  const r = new Guest(module, { ...sim.host, checkSubmit: () => 7 }).init();
  assert.equal(r.ok, true);
  assert.equal(sim.host.storage.journal.length, before + 1);
  const obs = JSON.parse(sim.host.storage.journal.at(-1)).input.observation;
  assert.equal(obs.type, 'checkMeasured');
  assert.equal(obs.measurementId, held[0].measurementId);
  assert.equal(obs.verdict, 'Error');
  assert.match(obs.message, /^check_submit refused the measurement \(the host answered 7\)/);
});

// ------------------------------------------------------------------------------ scenarios

for (const file of scenarioFiles()) {
  test(`${file}: the Node-hosted plugin's report equals waverun simulate -o json`, () => {
    const expected = native(file);
    const report = simulate(module, scenarioOf(file));
    assert.equal(JSON.stringify(report), JSON.stringify(JSON.parse(expected)));
    // Even the pretty-printed text is the same bytes.
    assert.equal(`${JSON.stringify(report, null, 2)}\n`, expected);
  });

  test(`${file}: the same with crashes and snapshots`, () => {
    const expected = JSON.stringify(JSON.parse(native(file)));
    for (const options of [{ crashEvery: 1 }, { crashEvery: 3, snapshotEvery: 5 }]) {
      const sim = new Simulation(module, scenarioOf(file), options);
      sim.runToEnd();
      assert.ok(sim.restarts > 0);
      assert.equal(JSON.stringify(sim.report()), expected, JSON.stringify(options));
    }
  });
}

test('the pure simulate request: before init, nothing journaled, the native report', () => {
  const host = bareHost();
  const g = new Guest(module, host);
  for (const file of ['host/examples/fleet-rollout.yaml', 'tests/scenarios/gates-and-wait.yaml']) {
    const text = execFileSync(SCENARIO_JSON, [file], { cwd: ROOT, encoding: 'utf8' }).trim();
    const env = g.call('waverun_request', `{"v":1,"request":{"type":"simulate","scenario":${text}}}`);
    assert.equal(env.ok, true, JSON.stringify(env.error));
    assert.equal(JSON.stringify(env.result), JSON.stringify(JSON.parse(native(file))), file);
  }
  const bad = g.request({ type: 'simulate', scenario: { start: 'yesterday' } });
  assert.equal(bad.ok, false);
  assert.equal(bad.error.code, 'InvalidField');
  assert.equal(g.request({ type: 'simulate' }).error.code, 'BadEnvelope');
  assert.equal(host.storage.read(1), null, 'nothing journaled');
  assert.equal(g.request({ type: 'runs' }).error.code, 'NotInitialized', 'still not initialised');
});

test('a generated fleet of 300 members with jitter, large snapshots and restarts', () => {
  const pool = [{ name: 'system', osType: 'Linux', imageVersion: 'AKSUbuntu-2204gen2containerd-202411.03.0' }];
  const members = [];
  for (let i = 0; i < 300; i += 1) {
    members.push({
      name: `m-${String(i).padStart(3, '0')}`,
      group: `g${i % 4}`,
      region: ['eastus', 'westeurope', 'southeastasia'][i % 3],
      kubernetesVersion: '1.30.4',
      nodePools: pool,
      behavior: { upgradeMinutes: 10 + (i % 7) * 5, jitterMinutes: i % 11, failAttempts: i % 29 === 0 ? 1 : 0 },
    });
  }
  const scenario = {
    start: '2026-12-07T00:00:00Z',
    seed: 99,
    autoApprove: true,
    members,
    strategy: {
      stages: [
        { name: 'one', maxAllowedFailures: '20%', afterGates: [{ type: 'Approval' }],
          groups: [{ name: 'g0', maxConcurrency: '10%', maxAllowedFailures: '20%' },
            { name: 'g1', maxConcurrency: '7', maxAllowedFailures: '20%' }] },
        { name: 'two', maxAllowedFailures: '20%', maxConcurrency: '15',
          groups: [{ name: 'g2', maxAllowedFailures: '5' }, { name: 'g3', maxAllowedFailures: '5' }] },
      ],
    },
    run: { name: 'big', managedClusterUpdate: { upgrade: { type: 'Full', kubernetesVersion: '1.31.2' } } },
    actions: [{ at: '2026-12-07T00:00:00Z', do: 'start' }],
  };
  const dir = mkdtempSync(path.join(tmpdir(), 'waverun-js-'));
  const file = path.join(dir, 'big.json');
  writeFileSync(file, JSON.stringify(scenario));
  let expected;
  let input;
  try {
    expected = JSON.stringify(JSON.parse(native(file)));
    input = scenarioOf(file);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const sim = new Simulation(module, input, { crashEvery: 97, snapshotEvery: 50 });
  sim.runToEnd();
  assert.ok(sim.host.storage.snapshot.length > 64 * 1024, 'the snapshot outgrows the first read buffer');
  const report = sim.report();
  assert.equal(JSON.stringify(report), expected);
  assert.ok(report.summary.membersCompleted > 250, JSON.stringify(report.summary));
  assert.ok(sim.restarts > 5);
});
