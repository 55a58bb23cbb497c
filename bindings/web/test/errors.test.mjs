// Every refusal is a JS Error named WaverunError with a stable code, the first field path and
// every field error; a value of the wrong shape is InvalidInput with the path where it broke.
import { test } from "node:test";
import assert from "node:assert/strict";
import { wasm } from "../testing/support.mjs";

const { WaverunEngine, isWaverunError, plan, simulate, validateMember, validateRun, validateScenario, validateStrategy } = wasm;

const pool = { name: "system", osType: "Linux", imageVersion: "AKSUbuntu-2204gen2containerd-202411.03.0" };
const member = (name, extra = {}) => ({ name, region: "eastus", kubernetesVersion: "1.30.4", nodePools: [pool], ...extra });
const fullTo = (v) => ({ upgrade: { type: "Full", kubernetesVersion: v } });
const scenario = (extra = {}) => ({
  start: "2026-12-07T00:00:00Z",
  members: [member("a", { group: "g" }), member("b", { group: "g" })],
  strategy: { stages: [{ name: "s", groups: [{ name: "g" }] }] },
  run: { name: "r", managedClusterUpdate: fullTo("1.31.2") },
  actions: [{ at: "2026-12-07T00:00:00Z", do: "start" }],
  ...extra,
});

/** The error `fn` throws, checked to be a WaverunError. */
function thrown(fn) {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof Error, "an Error");
    assert.equal(e.name, "WaverunError");
    assert.ok(isWaverunError(e));
    assert.ok(Array.isArray(e.fields));
    assert.match(e.stack, /WaverunError/);
    return e;
  }
  assert.fail("expected a WaverunError");
}

test("valid values pass silently", () => {
  assert.equal(validateStrategy({ stages: [{ name: "s", groups: [{ name: "g", maxConcurrency: "25%" }] }] }), undefined);
  assert.equal(validateMember(member("a")), undefined);
  assert.equal(validateRun({ name: "r", managedClusterUpdate: fullTo("1.31.2") }), undefined);
  assert.equal(validateScenario(scenario()), undefined);
});

test("strategy errors list every broken rule with its path", () => {
  const e = thrown(() => validateStrategy({
    stages: [
      { name: "ok", groups: [{ name: "g1", maxConcurrency: "120%" }] },
      { name: "ok", groups: [{ name: "g1" }], afterStageWaitInSeconds: 999999 },
    ],
  }));
  assert.equal(e.code, "InvalidField");
  assert.equal(e.path, "stages[0].groups[0].maxConcurrency");
  assert.deepEqual(e.fields.map((f) => f.path), [
    "stages[0].groups[0].maxConcurrency",
    "stages[1].name",
    "stages[1].afterStageWaitInSeconds",
    "stages[1].groups[0].name",
  ]);
  assert.equal(e.message.split("\n").length, 4, e.message);
  assert.match(e.fields[0].message, /120%/);
});

test("member and run errors name their fields", () => {
  const m = thrown(() => validateMember(member("Bad_Name", { kubernetesVersion: "1.30" })));
  assert.equal(m.code, "InvalidField");
  assert.deepEqual(m.fields.map((f) => f.path), ["name", "kubernetesVersion"]);
  const r = thrown(() => validateRun({ name: "r", managedClusterUpdate: { upgrade: { type: "Full" } } }));
  assert.equal(r.path, "managedClusterUpdate.upgrade.kubernetesVersion");
  assert.match(r.message, /required for a Full upgrade/);
});

test("scenario errors carry the scenario's paths, in validateScenario, plan and simulate alike", () => {
  const bad = scenario({ members: [member("a", { group: "g" }), member("a", { group: "g", behavior: { upgradeMinutes: 0 } })] });
  for (const fn of [validateScenario, plan, simulate]) {
    const e = thrown(() => fn(bad));
    assert.equal(e.code, "InvalidField");
    assert.deepEqual(e.fields.map((f) => f.path), ["members[1].name", "members[1].behavior.upgradeMinutes"]);
  }
});

test("validateScenario checks what only the whole fleet shows", () => {
  const twoGroups = scenario({
    members: [member("a", { labels: { env: "prod", geo: "eu" } })],
    strategy: { stages: [{ name: "s", groups: [
      { name: "prod", memberSelector: { byLabel: "env=prod" } },
      { name: "eu", memberSelector: { byLabel: "geo=eu" } },
    ] }] },
  });
  const e = thrown(() => validateScenario(twoGroups));
  assert.equal(e.code, "MemberInTwoGroups");
  assert.match(e.message, /\ba\b/);
});

test("a value of the wrong shape is InvalidInput with the path where reading stopped", () => {
  const cases = [
    [() => validateStrategy({ stages: [{ name: "s", groups: [{ name: "g", beforeGates: [{ type: "Later" }] }] }] }),
      "stages[0].groups[0].beforeGates[0].type", /unknown variant `Later`/],
    [() => validateMember({ name: "a", region: "eastus" }), undefined, /missing field `kubernetesVersion`/],
    [() => validateMember(member("a", { nodePools: [pool, { ...pool, name: "p2", imageVersion: 7 }] })),
      "nodePools[1].imageVersion", /invalid type: integer `7`, expected a string/],
    [() => validateMember(member("a", { nodePools: [pool, { ...pool, name: "p2", osType: 7 }] })),
      "nodePools[1].osType", /expected value/],
    [() => simulate(scenario({ colour: "red" })), "colour", /unknown field `colour`/],
    [() => simulate(scenario({ members: [member("a", { behavior: { upgradeMinutes: -5 } })] })),
      "members[0].behavior.upgradeMinutes", /invalid value: integer `-5`/],
    [() => simulate(scenario({ start: "soon" })), "start", /"soon" is not an RFC 3339 timestamp: it is too short/],
  ];
  for (const [fn, path, message] of cases) {
    const e = thrown(fn);
    assert.equal(e.code, "InvalidInput", e.message);
    assert.equal(e.path, path, e.message);
    assert.match(e.message, message);
    assert.doesNotMatch(e.message, /line \d+ column/);
    assert.deepEqual(e.fields, path ? [{ path, message: e.message.slice(path.length + 2) }] : []);
  }
});

test("values JSON cannot carry are InvalidInput at the root", () => {
  const circular = { stages: [] };
  circular.self = circular;
  for (const [value, message] of [
    [undefined, /expected an object, got undefined/],
    [() => 1, /expected an object, got function/],
    [{ stages: [], big: 1n }, /not a JSON value: .*BigInt/],
    [circular, /not a JSON value: .*circular/],
    ["stages", /invalid type: string "stages", expected struct UpdateStrategy/],
  ]) {
    const e = thrown(() => validateStrategy(value));
    assert.equal(e.code, "InvalidInput");
    assert.equal(e.path, undefined);
    assert.deepEqual(e.fields, []);
    assert.match(e.message, message);
  }
});

test("a Date works wherever a timestamp is expected", () => {
  const s = scenario({ start: new Date("2026-12-07T00:00:00Z"), actions: [{ at: new Date("2026-12-07T00:00:00Z"), do: "start" }] });
  assert.deepEqual(simulate(s), simulate(scenario()));
});

test("engine refusals carry the core's codes and change nothing", () => {
  assert.equal(thrown(() => new WaverunEngine("yesterday")).path, "now");
  const engine = new WaverunEngine("2026-12-07T00:00:00Z");
  assert.equal(thrown(() => engine.status("nope")).code, "NotFound");
  assert.equal(thrown(() => engine.plan("nope")).code, "NotFound");
  assert.equal(thrown(() => engine.command("2026-12-07T00:00:00Z", { type: "startRun", name: "nope" })).code, "NotFound");
  const bad = thrown(() => engine.command("2026-12-07T00:00:00Z", { type: "upsertMember", member: member("UPPER") }));
  assert.deepEqual([bad.code, bad.path], ["InvalidField", "name"]);
  const shape = thrown(() => engine.command("2026-12-07T00:00:00Z", { type: "launchRockets" }));
  assert.equal(shape.code, "InvalidInput");
  assert.match(shape.message, /unknown variant `launchRockets`/);
  assert.equal(thrown(() => engine.timeout("2026-13-01T00:00:00Z")).code, "InvalidInput");
  assert.equal(thrown(() => WaverunEngine.restore("{}")).code, "InvalidSnapshot");
  assert.deepEqual(engine.drainOutputs(), []);
  assert.equal(engine.snapshot(), new WaverunEngine("2026-12-07T00:00:00Z").snapshot());
});
