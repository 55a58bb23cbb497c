// The serde JSON forms of waverun-core, for TypeScript (embedded in the generated .d.ts).
// Inputs mark as optional (`?`) what serde defaults; outputs mark as optional what serde omits
// when empty, and `| null` what it writes as null.

/** A UTC instant as RFC 3339 text, e.g. `"2026-12-07T08:00:00Z"` (outputs always end in `Z`). */
export type Timestamp = string;

// ------------------------------------------------------------------------- errors

/** Stable error codes: the core's, plus `InvalidInput` for a value of the wrong shape. */
export type ErrorCode =
  | "InvalidInput"
  | "InvalidField"
  | "NotFound"
  | "AlreadyExists"
  | "InvalidState"
  | "MemberInTwoGroups"
  | "MinorVersionSkip"
  | "LongTermSupportRequired"
  | "UpgradeFailed"
  | "FailureThresholdExceeded"
  | "InvalidSnapshot";

/** One broken rule at one field path, e.g. `stages[1].groups[0].maxConcurrency`. */
export interface FieldError {
  path: string;
  message: string;
}

/** What every function and method of this package throws. */
export interface WaverunError extends Error {
  name: "WaverunError";
  /** Stable, for machines. */
  code: ErrorCode;
  /** The first field path, when the error is about a field. */
  path?: string;
  /** Every field error (empty when the error is not about fields). */
  fields: FieldError[];
}

// ------------------------------------------------------------------------- the fleet

export type OsType = "Linux" | "Windows";
export type DayOfWeek =
  | "Monday"
  | "Tuesday"
  | "Wednesday"
  | "Thursday"
  | "Friday"
  | "Saturday"
  | "Sunday";
export type WeekIndex = "First" | "Second" | "Third" | "Fourth" | "Last";

/** A cluster in the fleet. */
export interface Member {
  /** `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`, 1–50 characters. */
  name: string;
  /** Update group (groups without a selector take the members whose `group` is their name). */
  group?: string;
  labels?: Record<string, string>;
  region: string;
  /** Control-plane version `x.y.z`. */
  kubernetesVersion: string;
  nodePools?: NodePool[];
  maintenance?: Maintenance;
  /** Long-term support enabled: needed to go to an `LTSOnly` minor (else the member fails with
   * `LongTermSupportRequired`). */
  longTermSupport?: boolean;
  provider?: ProviderRef;
}

export interface NodePool {
  name: string;
  osType: OsType;
  /** Its family is everything before the last `-`. */
  imageVersion: string;
  fromSnapshot?: boolean;
}

export interface Maintenance {
  /** Governs `Full` and `ControlPlaneOnly` upgrades. */
  kubernetes?: MaintenanceWindow;
  /** Governs `NodeImageOnly` upgrades. */
  nodeOS?: MaintenanceWindow;
}

export interface MaintenanceWindow {
  schedule: Schedule;
  /** 4..=24. */
  durationHours: number;
  /** `"HH:mm"`, local to `utcOffset`. */
  startTime: string;
  /** `"+hh:mm"` / `"-hh:mm"`; default `"+00:00"`. */
  utcOffset?: string;
  /** `"YYYY-MM-DD"`: active from, and intervals count from, this date. */
  startDate?: string;
  notAllowedDates?: DateSpan[];
}

export type Schedule =
  | { daily: { intervalDays: number } }
  | { weekly: { intervalWeeks: number; dayOfWeek: DayOfWeek } }
  | { absoluteMonthly: { intervalMonths: number; dayOfMonth: number } }
  | { relativeMonthly: { intervalMonths: number; dayOfWeek: DayOfWeek; weekIndex: WeekIndex } };

/** Whole local dates `"YYYY-MM-DD"`, both inclusive. */
export interface DateSpan {
  start: string;
  end: string;
}

export interface ProviderRef {
  name: string;
  id?: string;
}

// ------------------------------------------------------------------------- strategies and runs

export type GateType = "Approval" | "ScheduledStart";
export type GateTiming = "Before" | "After";
export type UpgradeType = "Full" | "ControlPlaneOnly" | "NodeImageOnly";
export type NodeImageSelectionType = "Latest" | "Consistent" | "Custom";
/** `"N"` or `"p%"` (a whole number is accepted too). */
export type Limit = string | number;

/** Ordered stages (Azure Fleet Manager's strategy JSON). */
export interface UpdateStrategy {
  stages: Stage[];
}

export interface Stage {
  name: string;
  /** At most 50; without groups, the stage is one implicit group named after it. */
  groups?: Group[];
  memberSelector?: MemberSelector;
  /** At most 604800 (7 days). */
  afterStageWaitInSeconds?: number;
  /** Default `"50"`. */
  maxConcurrency?: Limit;
  /** Default `"0"`. */
  maxAllowedFailures?: Limit;
  beforeGates?: GateConfig[];
  afterGates?: GateConfig[];
}

export interface Group {
  /** Unique across the strategy. */
  name: string;
  memberSelector?: MemberSelector;
  /** Default `"1"`. */
  maxConcurrency?: Limit;
  /** Default `"0"`. */
  maxAllowedFailures?: Limit;
  beforeGates?: GateConfig[];
  afterGates?: GateConfig[];
}

export interface MemberSelector {
  /** A Kubernetes label selector, e.g. `"env=prod,geo in (eu,us)"`. */
  byLabel: string;
}

export interface GateConfig {
  type: GateType;
  displayName?: string;
  /** Required for (and only allowed on) a `ScheduledStart` gate. */
  scheduledStartConfiguration?: ScheduledStartConfiguration;
}

export interface ScheduledStartConfiguration {
  startDay: DayOfWeek;
  /** `"HH:mm"`. */
  startTime: string;
  /** `"+hh:mm"` / `"-hh:mm"`; default `"+00:00"`. */
  utcOffset?: string;
}

/** What an update run asks for. */
export interface UpdateRunSpec {
  name: string;
  /** Inline strategy (exclusive with `updateStrategyName`; neither = every member one by one). */
  strategy?: UpdateStrategy;
  updateStrategyName?: string;
  managedClusterUpdate: ManagedClusterUpdate;
  /** Set by waverun on a run an auto-upgrade profile generated: refused in `createRun`, and
   * `updateRun` cannot change it. */
  autoUpgradeProfileName?: string;
}

export interface ManagedClusterUpdate {
  upgrade: Upgrade;
  /** Default `{type: "Latest"}`. */
  nodeImageSelection?: NodeImageSelection;
}

export interface Upgrade {
  type: UpgradeType;
  /** Required for `Full` and `ControlPlaneOnly`, forbidden for `NodeImageOnly`. */
  kubernetesVersion?: string;
}

export interface NodeImageSelection {
  type?: NodeImageSelectionType;
  /** For `Custom`: at most one version per image family. */
  customNodeImageVersions?: { version: string }[];
}

/** Where and since when one version is available (region `"*"`: everywhere). */
export interface Release {
  version: string;
  available?: Record<string, Timestamp>;
  /** A preview Kubernetes version (GA unless set): never the target of an auto-upgrade profile. */
  preview?: boolean;
  /** A security-patch node image: what the `SecurityPatch` channel rolls out. */
  securityPatch?: boolean;
  /** A node image's OS, when known; the `SecurityPatch` channel never targets a Windows image. */
  osType?: OsType;
}

/** Who supports a Kubernetes minor: the community; only clusters with long-term support; no one
 * (never targeted by a profile). */
export type Support = "Community" | "LTSOnly" | "EndOfSupport";

/** The support state of one Kubernetes minor. */
export interface MinorSupport {
  /** `"x.y"`. */
  minor: string;
  support: Support;
}

export interface ReleaseCatalog {
  kubernetes?: Release[];
  nodeImages?: Release[];
  /** A minor not listed is `Community`. */
  minors?: MinorSupport[];
}

/** No member upgrade starts in `[start, end)`. */
export interface Freeze {
  name: string;
  start: Timestamp;
  end: Timestamp;
}

export type SkipTarget =
  | `Member:${string}`
  | `Group:${string}`
  | `Stage:${string}`
  | `AfterStageWait:${string}`;

// ------------------------------------------------------------------------- auto-upgrade profiles

/**
 * What a profile follows, over the GA Kubernetes versions (previews never) and each minor's
 * support: `Rapid` the latest patch of the newest minor in community support; `Stable` the
 * latest patch of the minor before it (if in community support); `TargetKubernetesVersion` the
 * latest patch of `targetKubernetesVersion`; `NodeImage` the newest image of every family the
 * covered pools run; `SecurityPatch` the newest security-patch image of every family the covered
 * Linux pools run. Kubernetes channels generate `Full` runs, the others `NodeImageOnly` runs.
 */
export type UpgradeChannel = "Rapid" | "Stable" | "TargetKubernetesVersion" | "NodeImage" | "SecurityPatch";

/** A profile's node image selection (`Custom` is not allowed). */
export interface AutoUpgradeNodeImageSelection {
  type: "Latest" | "Consistent";
}

/** When a release matching its channel reaches the catalog, a run is generated and started
 * through its strategy (Azure's field names). */
export interface AutoUpgradeProfile {
  /** Same pattern as member names. */
  name: string;
  channel: UpgradeChannel;
  /** A stored strategy; absent: every member one by one. */
  updateStrategyName?: string;
  /** Default `{type: "Latest"}`; ignored by `SecurityPatch`, whose runs pin exactly the
   * channel's images. */
  nodeImageSelection?: AutoUpgradeNodeImageSelection;
  /** A disabled profile generates nothing (the runs it started go on). */
  disabled?: boolean;
  /** `"x.y"`: required for (and only allowed with) `TargetKubernetesVersion`. */
  targetKubernetesVersion?: string;
  /** Target an `LTSOnly` minor (only with `TargetKubernetesVersion`). */
  longTermSupport?: boolean;
}

export type TriggerStatus = "Succeeded" | "Failed";

/** A profile's status: Azure's `autoUpgradeProfileStatus` plus `lastUpdateRunName` and `nextTarget`. */
export interface ProfileStatus {
  /** When a run was last generated (or generating one last failed). */
  lastTriggeredAt?: Timestamp;
  lastTriggerStatus?: TriggerStatus;
  /** Why the last trigger failed. */
  lastTriggerError?: StatusError;
  /** The versions the last trigger targeted. */
  lastTriggerUpgradeVersions?: string[];
  /** What the last trigger did, for humans. */
  lastTriggerMessage?: string;
  /** The run the last trigger generated. */
  lastUpdateRunName?: string;
  /** The target not rolled out yet, and why. */
  nextTarget?: NextTarget;
}

export interface NextTarget {
  /** Absent when the channel has no target. */
  versions?: string[];
  /** Why it is not rolled out now (a running run, disabled, nothing behind, no release). */
  message: string;
}

/** What `generateUpdateRun` does (or did) for a profile: return the run that exists for the
 * current target (not started, or running), create a new one (not started), or nothing. */
export type Generation =
  | { result: "Existing"; run: string }
  | { result: "New"; run: string; versions: string[] }
  | { result: "Nothing"; message: string };

/** What a profile would generate now, and that run's plan (`waverun plan` of a scenario with
 * profiles). */
export interface ProfilePlan {
  profile: string;
  channel: UpgradeChannel;
  /** The plan shows what it would generate once enabled. */
  disabled?: boolean;
  /** What the channel targets now (absent when nothing). */
  versions?: string[];
  /** What `generateUpdateRun` would do, or why nothing. */
  message: string;
  /** The run it would create, or that exists for this target. */
  run?: string;
  plan?: Plan;
}

// ------------------------------------------------------------------------- scenarios

/** A scenario (`shared/spec/scenario-format.md`); unknown fields are refused. */
export interface Scenario {
  start: Timestamp;
  /** Default: 366 days after `start`. */
  until?: Timestamp;
  autoApprove?: boolean;
  seed?: number;
  members: ScenarioMember[];
  /** Absent: the run's target everywhere from `start`, and no image newer than the pools run. */
  releases?: ReleaseCatalog;
  freezes?: Freeze[];
  /** Absent: every member one by one (or the run's `updateStrategyName`). */
  strategy?: UpdateStrategy;
  /** Named strategies, for profiles and `run.updateStrategyName`. */
  strategies?: NamedStrategy[];
  /** Each generates and starts runs as releases reach the catalog. */
  profiles?: AutoUpgradeProfile[];
  /** The scenario's own run: required unless there are profiles. */
  run?: ScenarioRun;
  /** In time order; the run starts only when told to. */
  actions?: Action[];
}

export interface NamedStrategy {
  name: string;
  strategy: UpdateStrategy;
}

export interface ScenarioMember extends Member {
  behavior?: Behavior;
  /** The member joins the fleet then (absent: there from `start`); joining behind a profile's
   * target triggers a catch-up run. */
  joinsAt?: Timestamp;
}

/** How a simulated cluster behaves. */
export interface Behavior {
  /** Default 30. */
  upgradeMinutes?: number;
  /** The first N upgrade attempts fail. */
  failAttempts?: number;
  jitterMinutes?: number;
}

export interface ScenarioRun {
  name: string;
  /** One of the scenario's `strategies` (exclusive with the scenario's `strategy`). */
  updateStrategyName?: string;
  managedClusterUpdate: ManagedClusterUpdate;
}

export type ActionKind = "start" | "stop" | "approve" | "skip" | "generateUpdateRun";

/** One operator action of a scenario. */
export interface Action {
  at: Timestamp;
  do: ActionKind;
  /** For `approve`. */
  gate?: GateRef;
  /** For `skip`. */
  targets?: SkipTarget[];
  by?: string;
  /** The run it acts on, e.g. one a profile generated; default the scenario's run (required
   * without one, except for `generateUpdateRun`). */
  run?: string;
  /** For (and only for) `generateUpdateRun`: create, not start, the run for the profile's
   * current target. */
  profile?: string;
}

export interface GateRef {
  stage?: string;
  group?: string;
  timing?: GateTiming;
  id?: string;
}

// ------------------------------------------------------------------------- engine inputs

/** Which gate: by id, or by position (the first Pending gate there). */
export interface GateSelector {
  id?: string;
  stage?: string;
  group?: string;
  timing?: GateTiming;
}

/** Operator / API commands. A refused command throws and changes nothing. */
export type Command =
  | { type: "upsertMember"; member: Member }
  | { type: "deleteMember"; name: string }
  | { type: "upsertStrategy"; name: string; strategy: UpdateStrategy }
  | { type: "deleteStrategy"; name: string }
  | { type: "createRun"; run: UpdateRunSpec }
  | { type: "updateRun"; run: UpdateRunSpec }
  | { type: "deleteRun"; name: string }
  | { type: "startRun"; name: string }
  | { type: "stopRun"; name: string }
  | { type: "skip"; run: string; targets: SkipTarget[] }
  | { type: "completeGate"; run: string; gate: GateSelector; by?: string }
  | { type: "createRetryRun"; name: string; from: string }
  | { type: "setFreezes"; freezes: Freeze[] }
  | { type: "setCatalog"; catalog: ReleaseCatalog }
  /** Creating a profile, or changing its channel, `targetKubernetesVersion` or
   * `longTermSupport`, starts nothing: it acts on the next release that moves its target. */
  | { type: "upsertProfile"; profile: AutoUpgradeProfile }
  /** The runs it generated stay, and go on. */
  | { type: "deleteProfile"; name: string }
  /** Creates (not starts) the run for the profile's current target, or nothing when every
   * member is at it; a run for that target not started or running already is left as it is.
   * Refused (`InvalidState`) for a disabled profile. */
  | { type: "generateUpdateRun"; profile: string };

/** What the world reports. */
export type Observation =
  | { type: "upgradeSucceeded"; operationId: string }
  | { type: "upgradeFailed"; operationId: string; message: string }
  | { type: "memberObserved"; name: string; kubernetesVersion: string; nodePools: NodePool[] }
  /** `preview`: the newest word on the version (a preview that reaches GA is observed again
   * without it). */
  | { type: "kubernetesReleased"; version: string; region: string; since: Timestamp; preview?: boolean }
  | { type: "nodeImageReleased"; version: string; region: string; since: Timestamp; securityPatch?: boolean };

/** One engine input. */
export type Input = { command: Command } | { observation: Observation } | "timeout";

// ------------------------------------------------------------------------- engine outputs

export type State =
  | "NotStarted"
  | "Running"
  | "Stopping"
  | "Stopped"
  | "Skipped"
  | "Failed"
  | "Pending"
  | "Completed";

export type EventKind =
  | "RunCreated"
  | "RunGenerated"
  | "RunUpdated"
  | "RunDeleted"
  | "RunStarted"
  | "RunResumed"
  | "RunCompleted"
  | "RunFailed"
  | "RunStopping"
  | "RunStopped"
  | "RunSkipped"
  | "StageStarted"
  | "StageCompleted"
  | "StageFailed"
  | "StageSkipped"
  | "StageStopped"
  | "GroupStarted"
  | "GroupCompleted"
  | "GroupFailed"
  | "GroupSkipped"
  | "GroupStopped"
  | "GateCreated"
  | "GateCompleted"
  | "GateSkipped"
  | "AfterStageWaitStarted"
  | "AfterStageWaitCompleted"
  | "AfterStageWaitSkipped"
  | "MemberPending"
  | "MemberStarted"
  | "MemberCompleted"
  | "MemberFailed"
  | "MemberSkipped"
  | "ActionRejected";

/** Why something waits or was skipped. */
export type Reason =
  | "MaintenanceWindow"
  | "VersionNotInRegion"
  | "Freeze"
  | "Lease"
  | "Concurrency"
  | "Gate"
  | "AfterStageWait"
  | "Stop"
  | "PreviousStage"
  | "Members"
  | "AlreadyAtTarget"
  | "NoConsistentImage"
  | "SkippedByUser"
  | "MinorVersionSkip"
  | "FailureThresholdExceeded"
  /** Added by the daemon to a running member whose provider calls are made again. */
  | "Provider";

export type WakeReason =
  | "MaintenanceWindow"
  | "VersionAvailable"
  | "ScheduledGate"
  | "AfterStageWait"
  | "FreezeEnds";

export interface PoolImage {
  nodePool: string;
  imageVersion: string;
}

/** `{code, message}` on a status node or an event. */
export interface StatusError {
  code: string;
  message: string;
}

/** What every event has. */
export interface EventHead<K extends EventKind> {
  at: Timestamp;
  kind: K;
  /** The run (absent in the timeline of a simulation without profiles, and on an
   * `ActionRejected` for no run, e.g. `generateUpdateRun`). */
  run?: string;
}

/** Where a stage's event happened. */
export interface InStage {
  stage: string;
}

/** Where a group's event happened. */
export interface InGroup extends InStage {
  group: string;
}

/** Which member a member event is about. */
export interface OfMember extends InGroup {
  member: string;
}

/** Which gate a gate event is about (`group` absent for a stage's gate). */
export interface OfGate extends InStage {
  group?: string;
  gateType: GateType;
  timing: GateTiming;
  gateId: string;
}

/** An event of kind `K` with the fields `F`. */
export type EventWith<K extends EventKind, F = {}> = EventHead<K> & F;

/**
 * One state change: a union discriminated by `kind`; each kind has exactly its fields (narrow on
 * `kind` to read them). Fields a kind has but leaves empty are absent.
 */
export type Event =
  | EventWith<"RunCreated">
  /** An auto-upgrade profile generated the run (before its `RunStarted`, when it starts it);
   * `versions`: its targets (one Kubernetes version, or one node image per family); `message`:
   * why (the release or the catch-up, and the run it supersedes). */
  | EventWith<"RunGenerated", { profile: string; versions: string[]; message?: string }>
  | EventWith<"RunUpdated">
  | EventWith<"RunDeleted">
  /** `message`: `retry of run X` for a retry run. */
  | EventWith<"RunStarted", { message?: string }>
  | EventWith<"RunResumed">
  | EventWith<"RunCompleted">
  | EventWith<"RunSkipped">
  | EventWith<"RunStopping", { reason: "Stop" | "FailureThresholdExceeded" }>
  | EventWith<"RunStopped", { error?: StatusError }>
  | EventWith<"RunFailed", { error?: StatusError }>
  | EventWith<"StageStarted", InStage>
  | EventWith<"StageCompleted", InStage>
  | EventWith<"StageFailed", InStage & { reason: "FailureThresholdExceeded"; message: string }>
  /** `AlreadyAtTarget` whenever no user skipped any of it (its members may have been skipped
   * for `NoConsistentImage` or `MinorVersionSkip`). */
  | EventWith<"StageSkipped", InStage & { reason: "SkippedByUser" | "AlreadyAtTarget" }>
  | EventWith<"StageStopped", InStage>
  | EventWith<"GroupStarted", InGroup>
  | EventWith<"GroupCompleted", InGroup>
  | EventWith<"GroupFailed", InGroup & { reason: "FailureThresholdExceeded"; message: string }>
  /** `AlreadyAtTarget` whenever no user skipped it or any of its members (they may have been
   * skipped for `NoConsistentImage` or `MinorVersionSkip`). */
  | EventWith<"GroupSkipped", InGroup & { reason: "SkippedByUser" | "AlreadyAtTarget" }>
  | EventWith<"GroupStopped", InGroup>
  /** `until`: when a scheduled-start gate opens; `message`: the gate's display name. */
  | EventWith<"GateCreated", OfGate & { until?: Timestamp; message?: string }>
  /** `by`: the approver (`user` if unnamed), `autoApprove` or `schedule`. */
  | EventWith<"GateCompleted", OfGate & { by: string }>
  | EventWith<"GateSkipped", OfGate>
  | EventWith<"AfterStageWaitStarted", InStage & { until: Timestamp }>
  | EventWith<"AfterStageWaitCompleted", InStage>
  | EventWith<"AfterStageWaitSkipped", InStage & { reason: "SkippedByUser" }>
  | EventWith<"MemberPending", OfMember & { reason: Reason; until?: Timestamp; message?: string }>
  | EventWith<
      "MemberStarted",
      OfMember & { kubernetesVersion?: string; nodeImages?: PoolImage[]; operationId: string; message?: string }
    >
  | EventWith<"MemberCompleted", OfMember & { operationId: string }>
  /** `operationId`: absent when the member failed before an upgrade started (`MinorVersionSkip`
   * in a run made by hand, `LongTermSupportRequired`). */
  | EventWith<"MemberFailed", OfMember & { operationId?: string; error: StatusError }>
  /** `MinorVersionSkip`: more than one minor behind a generated run's target. */
  | EventWith<
      "MemberSkipped",
      OfMember & {
        reason: "AlreadyAtTarget" | "NoConsistentImage" | "SkippedByUser" | "MinorVersionSkip";
        message?: string;
      }
    >
  /** Not emitted by the engine: a simulation records a refused action with it. */
  | EventWith<"ActionRejected", { action: Action; error: StatusError }>;

/** The event of one kind, e.g. `EventOfKind<"MemberStarted">`. */
export type EventOfKind<K extends EventKind> = Extract<Event, { kind: K }>;

/** One member upgrade the host must perform; the result comes back as an Observation. */
export interface UpgradeOperation {
  /** `{run}/{member}`: a repeated command is recognisably the same operation. */
  operationId: string;
  run: string;
  member: string;
  region: string;
  provider?: ProviderRef;
  upgradeType: UpgradeType;
  kubernetesVersion?: string;
  nodeImages?: PoolImage[];
}

/** A cluster call for the host. */
export type HostCommand = { type: "startUpgrade" } & UpgradeOperation;

/** What `drainOutputs` yields. */
export type Output = { command: HostCommand } | { event: Event };

/** The next instant the engine must be woken with `timeout`. */
export interface Wakeup {
  at: Timestamp;
  reason: WakeReason;
  /** Empty (`""`) for a fleet-wide wakeup: a release auto-upgrade profiles wait for
   * (`VersionAvailable`). */
  run: string;
}

// ------------------------------------------------------------------------- status tree

export interface NodeStatus {
  state: State;
  startTime?: Timestamp;
  completedTime?: Timestamp;
  error?: StatusError;
}

export interface WaitingOn {
  reason: Reason;
  until?: Timestamp;
  message?: string;
}

export interface GateStatus {
  gateId?: string;
  displayName?: string;
  gateType: GateType;
  timing: GateTiming;
  status: NodeStatus;
  /** ScheduledStart: when it opens. */
  absoluteStartTime?: Timestamp;
  completedBy?: string;
}

export interface WaitStatus {
  status: NodeStatus;
  waitDurationInSeconds: number;
}

export interface MemberStatus {
  name: string;
  /** Azure's id of the member's cluster (the daemon's answers, for members that have one). */
  clusterResourceId?: string;
  status: NodeStatus;
  message?: string;
  operationId?: string;
  kubernetesVersion?: string;
  nodeImages?: PoolImage[];
  waitingOn?: WaitingOn;
}

export interface GroupStatus {
  name: string;
  status: NodeStatus;
  failureCount: number;
  /** Resolved (clamped to the stage's). */
  maxConcurrency: number;
  maxAllowedFailures: number;
  beforeGates?: GateStatus[];
  afterGates?: GateStatus[];
  members: MemberStatus[];
  waitingOn?: WaitingOn;
}

export interface StageStatus {
  name: string;
  status: NodeStatus;
  failureCount: number;
  maxConcurrency: number;
  maxAllowedFailures: number;
  beforeGates?: GateStatus[];
  afterGates?: GateStatus[];
  afterStageWaitStatus: WaitStatus;
  groups: GroupStatus[];
  waitingOn?: WaitingOn;
}

/** The status tree of an update run. */
export interface RunStatus {
  status: NodeStatus;
  failureCount: number;
  nodeImageSelection?: { selectedNodeImageVersions: string[] };
  stages: StageStatus[];
  waitingOn?: WaitingOn;
}

// ------------------------------------------------------------------------- plans and reports

export interface PlannedGate {
  stage: string;
  group?: string;
  timing: GateTiming;
  gateType: GateType;
  displayName?: string;
  needsHuman: boolean;
}

export interface PlannedMember {
  name: string;
  region: string;
  action: "Upgrade" | "Skip" | "Fail";
  kubernetesVersion?: string;
  nodeImages?: PoolImage[];
  message?: string;
}

export interface PlannedGroup {
  name: string;
  maxConcurrency: number;
  maxAllowedFailures: number;
  members: PlannedMember[];
}

export interface PlannedStage {
  name: string;
  maxConcurrency: number;
  maxAllowedFailures: number;
  afterStageWaitInSeconds: number;
  groups: PlannedGroup[];
}

/** The plan preview of a run (`waverun plan -o json`). */
export interface Plan {
  run: string;
  stages: PlannedStage[];
  unassigned: string[];
  gates: PlannedGate[];
  selectedNodeImageVersions?: string[];
  /** Members that will fail without a cluster call (`MinorVersionSkip`, `LongTermSupportRequired`). */
  willFail?: string[];
  membersToUpgrade: number;
  membersToSkip: number;
  /** What the run spec asks for that has no effect (e.g. a node-image selection on a
   * ControlPlaneOnly upgrade), with the field path relative to the run spec. */
  warnings: FieldError[];
}

/** What `waverun plan -o json` prints for a scenario: its run's plan, with `profiles` beside its
 * fields when the scenario has profiles (only `profiles` when it has no run of its own). The
 * package's `plan` gives the run's `Plan` alone. */
export type ScenarioPlan = (Plan & { profiles?: ProfilePlan[] }) | { profiles: ProfilePlan[] };

/** Over every run of the report. */
export interface Summary {
  /** The scenario's run's (without one, the last generated run's; `NotStarted` without any). */
  state: State;
  /** When the first run started. */
  startedAt: Timestamp | null;
  /** When the last run finished, once every run has. */
  finishedAt: Timestamp | null;
  makespanSeconds: number | null;
  membersCompleted: number;
  membersFailed: number;
  membersSkipped: number;
  /** NotStarted, Pending or Running at the end. */
  membersPending: number;
}

/** A run of a simulation report, with its final status tree. */
export interface RunReport {
  name: string;
  /** The auto-upgrade profile that generated it. */
  autoUpgradeProfileName?: string;
  status: RunStatus;
}

/** What `simulate` returns: `waverun simulate -o json`. */
export interface SimulationReport {
  /** With profiles, every entry names its `run` (an `ActionRejected` the run the action was for,
   * if any). */
  timeline: Event[];
  /** The scenario's own run (absent without one). */
  run?: RunReport;
  /** With profiles: every run, the scenario's first, then the generated ones in the order they
   * were generated (superseded ones left out); absent without profiles, or when no run exists. */
  runs?: RunReport[];
  summary: Summary;
}
