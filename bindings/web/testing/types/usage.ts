// Type-checked under `tsc --strict` by test/types.test.mjs: every export used with precise types,
// and `@ts-expect-error` lines that fail the check if a type were loose (e.g. `any`).
import {
  WaverunEngine,
  isWaverunError,
  plan,
  simulate,
  validateMember,
  validateRun,
  validateScenario,
  validateStrategy,
} from "waverun-wasm";
import type {
  AutoUpgradeProfile,
  Command,
  ErrorCode,
  Event,
  EventKind,
  EventOfKind,
  FieldError,
  Generation,
  Input,
  Member,
  Observation,
  Output,
  Plan,
  ProfilePlan,
  ProfileStatus,
  RunReport,
  RunStatus,
  ScenarioPlan,
  Scenario,
  SimulationReport,
  SkipTarget,
  State,
  Support,
  UpdateRunSpec,
  UpdateStrategy,
  Wakeup,
} from "waverun-wasm";

const t = "2026-12-07T00:00:00Z";
const member: Member = {
  name: "c1",
  group: "g",
  labels: { env: "prod" },
  region: "eastus",
  kubernetesVersion: "1.30.4",
  nodePools: [{ name: "system", osType: "Linux", imageVersion: "AKSUbuntu-2204gen2containerd-202411.03.0" }],
  maintenance: {
    kubernetes: { schedule: { weekly: { intervalWeeks: 1, dayOfWeek: "Saturday" } }, durationHours: 6, startTime: "01:00" },
    nodeOS: { schedule: { relativeMonthly: { intervalMonths: 1, dayOfWeek: "Sunday", weekIndex: "Last" } }, durationHours: 4, startTime: "02:00", notAllowedDates: [{ start: "2026-12-24", end: "2026-12-26" }] },
  },
  provider: { name: "simulated" },
};
const strategy: UpdateStrategy = {
  stages: [
    { name: "s1", maxConcurrency: "25%", maxAllowedFailures: 1, afterStageWaitInSeconds: 60, groups: [{ name: "g", beforeGates: [{ type: "Approval", displayName: "ok?" }] }] },
    { name: "s2", memberSelector: { byLabel: "env=prod" }, beforeGates: [{ type: "ScheduledStart", scheduledStartConfiguration: { startDay: "Tuesday", startTime: "09:00", utcOffset: "+01:00" } }] },
  ],
};
const run: UpdateRunSpec = {
  name: "r1",
  strategy,
  managedClusterUpdate: { upgrade: { type: "Full", kubernetesVersion: "1.31.2" }, nodeImageSelection: { type: "Consistent" } },
};
const scenario: Scenario = {
  start: t,
  autoApprove: true,
  members: [{ ...member, behavior: { upgradeMinutes: 10, failAttempts: 1 } }],
  releases: { kubernetes: [{ version: "1.31.2", available: { "*": t } }] },
  freezes: [{ name: "year-end", start: "2026-12-20T00:00:00Z", end: "2027-01-02T00:00:00Z" }],
  strategy,
  run: { name: "r1", managedClusterUpdate: run.managedClusterUpdate },
  actions: [{ at: t, do: "start" }, { at: t, do: "skip", targets: ["Member:c1", "AfterStageWait:s1"] }],
};

validateMember(member);
validateStrategy(strategy);
validateRun(run);
validateScenario(scenario);
const sp: ScenarioPlan = plan(scenario);
// A scenario with a run has its plan's fields; one with only profiles has just `profiles`.
if (!("stages" in sp)) throw new Error("the scenario has a run");
const p: Plan = sp;
const planned: ("Upgrade" | "Skip" | "Fail")[] = p.stages.flatMap((s) => s.groups.flatMap((g) => g.members.map((m) => m.action)));
const report: SimulationReport = simulate(scenario);
const state: State = report.summary.state;
const started: string | null = report.summary.startedAt;
const makespan: number | null = report.summary.makespanSeconds;
const events: Event[] = report.timeline;
const rejected = events.flatMap((e) => (e.kind === "ActionRejected" ? [e.action.do] : []));
const ownRun: string | undefined = report.run?.name;

// Auto-upgrade profiles: in scenarios, commands, events, reports and statuses.
const profile: AutoUpgradeProfile = {
  name: "patches",
  channel: "TargetKubernetesVersion",
  targetKubernetesVersion: "1.30",
  longTermSupport: true,
  updateStrategyName: "rings",
  nodeImageSelection: { type: "Consistent" },
};
const profileScenario: Scenario = {
  start: t,
  members: [member, { ...member, name: "c2", joinsAt: "2026-12-10T00:00:00Z" }],
  releases: {
    kubernetes: [{ version: "1.30.5", available: { eastus: t } }, { version: "1.31.0", available: { "*": t }, preview: true }],
    nodeImages: [{ version: "AKSUbuntu-2204gen2containerd-202412.01.0", available: { "*": t }, securityPatch: true }],
    minors: [{ minor: "1.29", support: "LTSOnly" }, { minor: "1.27", support: "EndOfSupport" }],
  },
  strategies: [{ name: "rings", strategy }],
  profiles: [profile, { name: "images", channel: "SecurityPatch", disabled: true }],
  actions: [{ at: t, do: "generateUpdateRun", profile: "patches" }, { at: t, do: "start", run: "auto-patches-targetkubernetesversion-1-30-5" }],
};
validateScenario(profileScenario);
const profileReport: SimulationReport = simulate(profileScenario);
const runs: RunReport[] = profileReport.runs ?? [];
const generatedBy: (string | undefined)[] = runs.map((r) => r.autoUpgradeProfileName);
for (const e of profileReport.timeline) {
  switch (e.kind) {
    case "RunGenerated": {
      const who: string = e.profile;
      const targets: string[] = e.versions;
      const why: string | undefined = e.message;
      break;
    }
    case "MemberSkipped": {
      const why: "AlreadyAtTarget" | "NoConsistentImage" | "SkippedByUser" | "MinorVersionSkip" = e.reason;
      break;
    }
    case "GroupSkipped": {
      const why: "SkippedByUser" | "AlreadyAtTarget" = e.reason;
      break;
    }
  }
}
const lts: ErrorCode = "LongTermSupportRequired";
const support: Support = "Community";
const profileStatus: ProfileStatus = {
  lastTriggeredAt: t,
  lastTriggerStatus: "Failed",
  lastTriggerError: { code: "LongTermSupportRequired", message: "no LTS" },
  lastTriggerUpgradeVersions: ["1.30.5"],
  nextTarget: { message: "the profile is disabled: it generates nothing" },
};
const describe = (g: Generation): string =>
  g.result === "New" ? `${g.run}: ${g.versions.join(", ")}` : g.result === "Existing" ? g.run : g.message;
const profilePlan: ProfilePlan = { profile: "patches", channel: "Rapid", message: "would generate update run r", run: "r", plan: p };
const cliPlans: ScenarioPlan[] = [p, { ...p, profiles: [profilePlan] }, { profiles: [profilePlan] }];

// Events: a union on `kind`, each kind with exactly its fields.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const everyKindHasAnEvent: Same<Event["kind"], EventKind> = true;
for (const e of events) {
  const when: string = e.at;
  const run: string | undefined = e.run;
  switch (e.kind) {
    case "MemberStarted": {
      const who: [string, string, string] = [e.stage, e.group, e.member];
      const op: string = e.operationId;
      const pools: { nodePool: string; imageVersion: string }[] | undefined = e.nodeImages;
      const k8s: string | undefined = e.kubernetesVersion;
      break;
    }
    case "MemberFailed": {
      const code: string = e.error.code;
      const op: string | undefined = e.operationId;
      break;
    }
    case "MemberPending": {
      const until: string | undefined = e.until;
      const why: string = e.reason;
      break;
    }
    case "GateCreated": {
      const id: string = e.gateId;
      const group: string | undefined = e.group;
      const opens: string | undefined = e.until;
      break;
    }
    case "GateCompleted": {
      const by: string = e.by;
      break;
    }
    case "AfterStageWaitStarted": {
      const until: string = e.until;
      break;
    }
    case "RunStopping": {
      const why: "Stop" | "FailureThresholdExceeded" = e.reason;
      break;
    }
    case "StageFailed": {
      const message: string = e.message;
      break;
    }
  }
}
const startedEvents: EventOfKind<"MemberStarted">[] = events.filter(
  (e): e is EventOfKind<"MemberStarted"> => e.kind === "MemberStarted",
);
const operations: string[] = startedEvents.map((e) => e.operationId);

const engine = new WaverunEngine(t);
const commands: Command[] = [
  { type: "upsertMember", member },
  { type: "upsertStrategy", name: "st", strategy },
  { type: "createRun", run },
  { type: "updateRun", run: { ...run, strategy: undefined, updateStrategyName: "st" } },
  { type: "startRun", name: "r1" },
  { type: "skip", run: "r1", targets: ["Group:g"] },
  { type: "completeGate", run: "r1", gate: { stage: "s1", group: "g", timing: "Before" }, by: "me" },
  { type: "stopRun", name: "r1" },
  { type: "createRetryRun", name: "r2", from: "r1" },
  { type: "setFreezes", freezes: [] },
  { type: "setCatalog", catalog: { kubernetes: [], nodeImages: [] } },
  { type: "deleteRun", name: "r2" },
  { type: "deleteStrategy", name: "st" },
  { type: "deleteMember", name: "c1" },
  { type: "upsertProfile", profile },
  { type: "generateUpdateRun", profile: "patches" },
  { type: "deleteProfile", name: "patches" },
];
const observations: Observation[] = [
  { type: "upgradeSucceeded", operationId: "r1/c1" },
  { type: "upgradeFailed", operationId: "r1/c1", message: "boom" },
  { type: "memberObserved", name: "c1", kubernetesVersion: "1.31.2", nodePools: [] },
  { type: "kubernetesReleased", version: "1.31.3", region: "*", since: t },
  { type: "kubernetesReleased", version: "1.32.0", region: "*", since: t, preview: true },
  { type: "nodeImageReleased", version: "AKSUbuntu-2204gen2containerd-202412.01.0", region: "eastus", since: t },
  { type: "nodeImageReleased", version: "AKSUbuntu-2204gen2containerd-202412.02.0", region: "*", since: t, securityPatch: true },
];
const inputs: Input[] = [...commands.map((command) => ({ command })), ...observations.map((observation) => ({ observation })), "timeout"];
const failures: [ErrorCode, string | undefined, FieldError[]][] = [];
for (const input of inputs) {
  try {
    engine.handleInput(t, input);
  } catch (e) {
    if (!isWaverunError(e)) throw e;
    failures.push([e.code, e.path, e.fields]);
  }
}
engine.command(t, commands[0]);
engine.observe(t, observations[0]);
engine.timeout(t);
const outputs: Output[] = engine.drainOutputs();
for (const out of outputs) {
  if ("command" in out) {
    const kind: "startUpgrade" = out.command.type;
    const id: string = out.command.operationId;
  } else {
    const when: string = out.event.at;
  }
}
const wake: Wakeup | undefined = engine.nextWakeup();
const status: RunStatus = engine.status("r1");
const samePlan: Plan = engine.plan("r1");
const restored: WaverunEngine = WaverunEngine.restore(engine.snapshot());
const now: string = restored.now;
restored.free();

// Each of these must be a type error.
// @ts-expect-error an unknown command
engine.command(t, { type: "launchRockets" });
// @ts-expect-error startRun needs a name
engine.command(t, { type: "startRun" });
// @ts-expect-error observation fields are camelCase
engine.observe(t, { type: "upgradeSucceeded", operation_id: "r1/c1" });
// @ts-expect-error not an input
engine.handleInput(t, "tick");
// @ts-expect-error not a state
const notState: State = "Done";
// @ts-expect-error a skip target names its kind
const target: SkipTarget = "c1";
// @ts-expect-error a report is an object
const text: string = simulate(scenario);
// @ts-expect-error the codes are a closed set
const code: ErrorCode = "Oops";
// @ts-expect-error an unknown OS
validateMember({ ...member, nodePools: [{ name: "p", osType: "Solaris", imageVersion: "x" }] });
// @ts-expect-error scenarios need members
simulate({ start: t, run: scenario.run });
try {
  validateStrategy(strategy);
} catch (e) {
  // @ts-expect-error `e` is unknown until isWaverunError narrows it
  e.code;
}
// @ts-expect-error a run event has no member
const runMember = (e: EventOfKind<"RunCreated">) => e.member;
// @ts-expect-error a gate event has no operation id
const gateOperation = (e: EventOfKind<"GateCreated">) => e.operationId;
// @ts-expect-error the fields of a kind are only there once `kind` narrows the union
const anyMember = (e: Event) => e.member;
// @ts-expect-error a StageStarted event names its stage
const noStage: Event = { at: t, kind: "StageStarted" };
// @ts-expect-error a MemberCompleted event has its operation id
const noOperation: Event = { at: t, kind: "MemberCompleted", stage: "s", group: "g", member: "m" };
// @ts-expect-error a run stops by a user or a failure, nothing else
const badStop: Event = { at: t, kind: "RunStopping", reason: "Lease" };
// @ts-expect-error not a kind
const noKind: Event = { at: t, kind: "RunExploded" };
// @ts-expect-error nextWakeup may be undefined
const at: string = engine.nextWakeup().at;
// @ts-expect-error a scenario may have no run of its own
const ownRunName: string = report.run.name;
// @ts-expect-error not a channel
const badChannel: AutoUpgradeProfile = { name: "p", channel: "Nightly" };
// @ts-expect-error a profile cannot pin Custom images
const customProfile: AutoUpgradeProfile = { name: "p", channel: "NodeImage", nodeImageSelection: { type: "Custom" } };
// @ts-expect-error a profile needs a channel
engine.command(t, { type: "upsertProfile", profile: { name: "p" } });
// @ts-expect-error generateUpdateRun names its profile
engine.command(t, { type: "generateUpdateRun", name: "p" });
// @ts-expect-error support states are spelled as in the catalog
const badSupport: Support = "LTS";
// @ts-expect-error a RunGenerated event has its target versions
const noVersions: Event = { at: t, kind: "RunGenerated", run: "r", profile: "p" };
// @ts-expect-error a group is skipped by a user or with nothing to do, never for a minor skip
const badGroupSkip: Event = { at: t, kind: "GroupSkipped", stage: "s", group: "g", reason: "MinorVersionSkip" };
// @ts-expect-error a plan without a run lists the profiles' plans
const emptyPlan: ScenarioPlan = {};
// @ts-expect-error generation results are spelled as the variants
const badGeneration: Generation = { result: "new", run: "r", versions: [] };
