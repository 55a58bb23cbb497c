// The engine class is a complete host API: a JS host loop (a port of the core's simulator,
// `core/src/sim`) driving WaverunEngine reproduces `simulate` byte-for-byte for every scenario
// of the repo, also when the engine is snapshotted and restored at every instant.
import { test } from "node:test";
import assert from "node:assert/strict";
import { relative } from "node:path";
import { loadScenario, root, scenarioFiles, wasm } from "../testing/support.mjs";

const { WaverunEngine, simulate } = wasm;

for (const file of scenarioFiles()) {
  const scenario = loadScenario(file);
  const name = relative(root, file);
  if (scenario.members.some((m) => m.behavior?.jitterMinutes)) continue; // seeded jitter: not ported
  test(`a JS host driving WaverunEngine reproduces simulate: ${name}`, () => {
    assert.equal(JSON.stringify(host(scenario), null, 2), JSON.stringify(simulate(scenario), null, 2));
  });
  test(`snapshot and restore at every instant change nothing: ${name}`, () => {
    assert.equal(
      JSON.stringify(host(scenario, { restoreEveryStep: true }), null, 2),
      JSON.stringify(simulate(scenario), null, 2),
    );
  });
}

test("the engine's clock never goes backwards", () => {
  const engine = new WaverunEngine("2026-12-07T08:00:00+01:00");
  assert.equal(engine.now, "2026-12-07T07:00:00Z");
  engine.timeout("2026-12-07T09:00:00Z");
  engine.timeout("2026-12-01T00:00:00Z");
  assert.equal(engine.now, "2026-12-07T09:00:00Z");
  assert.equal(WaverunEngine.restore(engine.snapshot()).now, "2026-12-07T09:00:00Z");
});

test("a run not started shows a preview status and its plan", () => {
  const t = "2026-12-07T00:00:00Z";
  const engine = new WaverunEngine(t);
  engine.handleInput(t, { command: { type: "upsertMember", member: { name: "a", group: "g", region: "r", kubernetesVersion: "1.30.4" } } });
  engine.handleInput(t, { command: { type: "createRun", run: { name: "r1", managedClusterUpdate: { upgrade: { type: "ControlPlaneOnly", kubernetesVersion: "1.31.2" } } } } });
  assert.deepEqual(engine.drainOutputs().map((o) => o.event.kind), ["RunCreated"]);
  const status = engine.status("r1");
  assert.equal(status.status.state, "NotStarted");
  assert.deepEqual(status.stages.flatMap((s) => s.groups.flatMap((g) => g.members.map((m) => m.name))), ["a"]);
  const plan = engine.plan("r1");
  assert.equal(plan.run, "r1");
  assert.equal(plan.membersToUpgrade, 1);
  assert.equal(engine.nextWakeup(), undefined);
});

// ---------------------------------------------------------------- the host

const MINUTE = 60_000;
const ms = (t) => new Date(t).getTime();
/** RFC 3339 as the core writes it: to the second when whole. */
const iso = (t) => new Date(t).toISOString().replace(".000Z", "Z");

/** The simulator's loop, over the engine class. */
function host(scenario, { restoreEveryStep = false } = {}) {
  const start = ms(scenario.start);
  const until = scenario.until ? ms(scenario.until) : start + 366 * 24 * 60 * MINUTE;
  const run = scenario.run?.name; // the scenario's own run (optional with profiles)
  const manyRuns = (scenario.profiles ?? []).length > 0; // timeline entries keep their run
  const actions = scenario.actions ?? [];
  let engine = new WaverunEngine(iso(start));
  const input = (now, value) => {
    const t = iso(now);
    if (!restoreEveryStep) {
      if (value === "timeout") return engine.timeout(t);
      if ("command" in value) return engine.command(t, value.command);
      return engine.observe(t, value.observation);
    }
    engine.handleInput(t, value);
  };

  // Set-up, as Scenario::setup_commands; members joining later join on their time (Scenario::joins).
  const joinsLater = (m) => m.joinsAt !== undefined && ms(m.joinsAt) > start;
  const asMember = ({ behavior, joinsAt, ...member }) => member;
  for (const command of [
    { type: "setCatalog", catalog: scenario.releases ?? implicitCatalog(scenario) },
    { type: "setFreezes", freezes: scenario.freezes ?? [] },
    ...scenario.members.filter((m) => !joinsLater(m)).map((m) => ({ type: "upsertMember", member: asMember(m) })),
    ...(scenario.strategies ?? []).map(({ name, strategy }) => ({ type: "upsertStrategy", name, strategy })),
    ...(scenario.profiles ?? []).map((profile) => ({ type: "upsertProfile", profile })),
    ...(scenario.run
      ? [{ type: "createRun", run: { name: run, strategy: scenario.strategy, updateStrategyName: scenario.run.updateStrategyName, managedClusterUpdate: scenario.run.managedClusterUpdate } }]
      : []),
  ]) {
    input(start, { command });
  }
  engine.drainOutputs();
  const joins = scenario.members
    .map((m, i) => [m, i])
    .filter(([m]) => joinsLater(m))
    .sort(([a, i], [b, j]) => ms(a.joinsAt) - ms(b.joinsAt) || i - j)
    .map(([m]) => ({ at: ms(m.joinsAt), member: asMember(m) }));

  // The simulated fleet, as SimulatedFleet.
  const behavior = new Map(scenario.members.map((m) => [m.name, { upgradeMinutes: 30, failAttempts: 0, ...m.behavior }]));
  const attempts = new Map();
  const known = new Set();
  let inFlight = []; // {due, seq, operationId, ok}
  let seq = 0;
  const submit = (op, now) => {
    if (known.has(op.operationId)) return;
    known.add(op.operationId);
    const b = behavior.get(op.member);
    attempts.set(op.member, (attempts.get(op.member) ?? 0) + 1);
    inFlight.push({ due: now + b.upgradeMinutes * MINUTE, seq: ++seq, operationId: op.operationId, ok: attempts.get(op.member) > b.failAttempts });
    inFlight.sort((x, y) => x.due - y.due || x.seq - y.seq);
  };
  // Health checks, as SimulatedFleet::measure: the first scripted entry that matches, else a pass.
  const measure = (req, now) => {
    const member = req.purpose === "Gate" ? undefined : req.members[0]?.name;
    const h = (scenario.health ?? []).find((h) =>
      (h.check === undefined || h.check === req.check.name) &&
      (h.member === undefined || h.member === member) &&
      (h.group === undefined || h.group === req.group) &&
      (h.stage === undefined || h.stage === req.stage) &&
      (h.from === undefined || ms(h.from) <= now) &&
      (h.until === undefined || now < ms(h.until)));
    const obs = { type: "checkMeasured", measurementId: req.measurementId };
    if (!h) return { ...obs, verdict: "Pass" };
    const labels = req.members.length === 1 ? `cluster="${req.members[0].name}"` : "";
    const values = h.empty ? [] : h.value !== undefined ? [{ ...(labels ? { labels } : {}), value: h.value }] : undefined;
    const verdict = values !== undefined ? h.result : (h.result ?? "Pass");
    return { ...obs, ...(values !== undefined ? { values } : {}), ...(verdict ? { verdict } : {}), ...(h.message !== undefined ? { message: h.message } : {}) };
  };

  // The outputs, as World::output; auto-approvals are answered as drive::drain does: each
  // approval delivered, then the outputs it causes, whose approvals come next.
  const timeline = [];
  const take = (now, answers) => {
    for (const out of engine.drainOutputs()) {
      if ("command" in out) {
        // A measurement is answered at once, in order with the approvals (World::output).
        if (out.command.type === "measureCheck") answers.push({ observation: measure(out.command, now) });
        else submit(out.command, now);
        continue;
      }
      const ev = out.event;
      if (ev.kind === "RunCreated") continue;
      if (scenario.autoApprove && ev.kind === "GateCreated" && ev.gateType === "Approval") {
        answers.push({ command: { type: "completeGate", run: ev.run, gate: { id: ev.gateId }, by: "autoApprove" } });
      }
      if (!manyRuns) delete ev.run;
      timeline.push(ev);
    }
  };
  const drain = (now) => {
    let answers = [];
    take(now, answers);
    while (answers.length > 0) {
      const next = [];
      for (const answer of answers) {
        try {
          input(now, answer);
        } catch {}
        take(now, next);
      }
      answers = next;
    }
  };

  let now = start;
  let next = 0;
  let nextJoin = 0;
  for (;;) {
    for (const r of inFlight.filter((r) => r.due <= now)) {
      inFlight = inFlight.filter((x) => x !== r);
      input(now, { observation: r.ok
        ? { type: "upgradeSucceeded", operationId: r.operationId }
        : { type: "upgradeFailed", operationId: r.operationId, message: "simulated upgrade failure" } });
      drain(now);
    }
    while (nextJoin < joins.length && joins[nextJoin].at <= now) {
      input(now, { command: { type: "upsertMember", member: joins[nextJoin++].member } });
      drain(now);
    }
    while (next < actions.length && ms(actions[next].at) <= now) {
      const a = actions[next++];
      let refusal;
      try {
        input(now, { command: actionCommand(a, run) });
      } catch (e) {
        refusal = e;
      }
      drain(now); // what the input's due timers did first: it may be why the action was refused
      if (refusal) {
        // With profiles, the entry names the run the action was for.
        const on = manyRuns && a.do !== "generateUpdateRun" ? (a.run ?? run) : undefined;
        timeline.push({ at: iso(now), kind: "ActionRejected", ...(on ? { run: on } : {}), error: { code: refusal.code, message: refusal.message }, action: actionValue(a) });
      }
    }
    input(now, "timeout");
    drain(now);
    if (restoreEveryStep) {
      const snapshot = engine.snapshot();
      engine.free();
      engine = WaverunEngine.restore(snapshot);
    }

    // With profiles, runs may still be generated: the simulation goes on while anything is left.
    const finished = !manyRuns && run !== undefined &&
      ["Completed", "Failed", "Skipped", "Stopped"].includes(engine.status(run).status.state) && inFlight.length === 0;
    if (finished && next >= actions.length) break;
    const candidates = [engine.nextWakeup()?.at, inFlight[0]?.due, actions[next]?.at, joins[nextJoin]?.at]
      .filter((t) => t !== undefined)
      .map(ms);
    if (candidates.length === 0 || Math.min(...candidates) > until) break;
    now = Math.max(Math.min(...candidates), now);
  }

  // The report, as Simulation::report: the scenario's run, and with profiles every run (the
  // scenario's first, then the generated ones in the order generated, without deleted ones).
  let names = run === undefined ? [] : [{ name: run }];
  if (manyRuns) {
    for (const e of timeline) {
      if (e.kind === "RunGenerated" && !names.some((n) => n.name === e.run)) names.push({ name: e.run, autoUpgradeProfileName: e.profile });
      if (e.kind === "RunDeleted") names = names.filter((n) => n.name !== e.run);
    }
  }
  const runs = [];
  for (const n of names) {
    let status;
    try {
      status = engine.status(n.name);
    } catch {
      continue;
    }
    runs.push({ ...n, status });
  }
  // Summary::of.
  const count = { Completed: 0, Failed: 0, Skipped: 0, other: 0 };
  for (const m of runs.flatMap((r) => r.status.stages.flatMap((s) => s.groups.flatMap((g) => g.members)))) {
    count[m.status.state in count ? m.status.state : "other"] += 1;
  }
  const main = runs.find((r) => r.name === run) ?? runs.at(-1);
  const earliest = (ts) => ts.reduce((a, b) => (a === null || ms(b) < ms(a) ? b : a), null);
  const latest = (ts) => ts.reduce((a, b) => (a === null || ms(b) > ms(a) ? b : a), null);
  const started = earliest(runs.flatMap((r) => r.status.status.startTime ?? []));
  const finished = runs.every((r) => r.status.status.completedTime) ? latest(runs.map((r) => r.status.status.completedTime)) : null;
  const own = runs.find((r) => r.name === run);
  return {
    timeline,
    ...(own ? { run: own } : {}),
    ...(manyRuns && runs.length > 0 ? { runs } : {}),
    summary: {
      state: main?.status.status.state ?? "NotStarted",
      startedAt: started,
      finishedAt: finished,
      makespanSeconds: started && finished ? (ms(finished) - ms(started)) / 1000 : null,
      membersCompleted: count.Completed,
      membersFailed: count.Failed,
      membersSkipped: count.Skipped,
      membersPending: count.other,
    },
  };
}

/** Scenario::catalog without `releases`: the run's target (if any) and the images of the pools of
 * the members there from the start, everywhere, from the start. */
function implicitCatalog(scenario) {
  const everywhere = (version) => ({ version, available: { "*": iso(scenario.start) } });
  const k8s = scenario.run?.managedClusterUpdate.upgrade.kubernetesVersion;
  const members = scenario.members.filter((m) => m.joinsAt === undefined);
  const images = [...new Set(members.flatMap((m) => (m.nodePools ?? []).map((p) => p.imageVersion)))].sort();
  return { kubernetes: k8s ? [everywhere(k8s)] : [], nodeImages: images.map(everywhere) };
}

/** Action::command. */
function actionCommand(a, scenarioRun) {
  const run = a.run ?? scenarioRun;
  switch (a.do) {
    case "generateUpdateRun": return { type: "generateUpdateRun", profile: a.profile };
    case "start": return { type: "startRun", name: run };
    case "stop": return { type: "stopRun", name: run };
    case "skip": return { type: "skip", run, targets: a.targets };
    case "approve": return { type: "completeGate", run, gate: { ...a.gate }, ...(a.by ? { by: a.by } : {}) };
    case "failGate": return { type: "failGate", run, gate: { ...a.gate }, ...(a.by ? { by: a.by } : {}), ...(a.message ? { message: a.message } : {}) };
  }
  throw new Error(`unknown action ${a.do}`);
}

/** An action as the simulator records it in ActionRejected (serde_json::Value: keys sorted). */
function actionValue(a) {
  const sorted = (o) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined && !(Array.isArray(v) && v.length === 0)).sort(([x], [y]) => (x < y ? -1 : 1)));
  return sorted({ at: iso(a.at), by: a.by, do: a.do, gate: a.gate && sorted(a.gate), message: a.message, profile: a.profile, run: a.run, targets: a.targets });
}
