// The API's and the engine's shapes as the portal reads them (shared/spec/api.md; the engine's
// serde forms, bindings/ABI.md). Only for `tsc --checkJs`: the browser never loads this file.

export interface Problem {
  type?: string;
  title?: string;
  status?: number;
  detail?: string;
  code?: string;
  target?: string;
}

export interface WaitingOn {
  reason: string;
  until?: string;
  message?: string;
}

export interface NodeState {
  state: string;
  startTime?: string;
  completedTime?: string;
  error?: { code: string; message: string };
}

/** A health check on a gate or member: progress, last measurement, verdict. */
export interface CheckNode {
  name: string;
  state: string;
  source: string;
  condition?: string;
  taken: number;
  count: number;
  failed: number;
  inconclusive: number;
  nextAt?: string;
  last?: { at: string; verdict: string; value?: string; message?: string };
  verdict?: string;
  message?: string;
}

export interface GateRef {
  displayName?: string;
  gateId?: string;
  gateType?: string;
  healthCheck?: string;
  check?: CheckNode;
  status: { state: string };
}

export interface MemberNode {
  name: string;
  status: NodeState;
  message?: string;
  waitingOn?: WaitingOn;
  fromVersion?: string;
  toVersion?: string;
  operationId?: string;
  checks?: CheckNode[];
}

/** What stages and groups both carry: resolved limits, failures, waits and gates. */
export interface LimitedNode {
  name: string;
  status: NodeState;
  maxConcurrency?: number;
  maxAllowedFailures?: number;
  failureCount?: number;
  waitingOn?: WaitingOn;
  beforeGates?: GateRef[];
  afterGates?: GateRef[];
}

export interface GroupNode extends LimitedNode {
  members: MemberNode[];
}

export interface StageNode extends LimitedNode {
  groups: GroupNode[];
  afterStageWaitStatus?: { status: NodeState; waitDurationInSeconds?: number; waitingOn?: WaitingOn };
}

export interface RunStatus {
  status: NodeState;
  stages: StageNode[];
  failureCount?: number;
  waitingOn?: WaitingOn;
}

export interface Resource<P> {
  id: string;
  name: string;
  type: string;
  eTag?: string;
  systemData?: Record<string, string>;
  properties: P;
}

export interface RunProperties {
  status?: RunStatus;
  strategy?: unknown;
  updateStrategyId?: string;
  managedClusterUpdate: {
    upgrade: { type: string; kubernetesVersion?: string };
    nodeImageSelection?: { type: string };
  };
  autoUpgradeProfileId?: string;
}

export interface NodePool { name: string; imageVersion?: string; osType?: string }

export interface MemberProperties {
  group?: string | null;
  labels?: Record<string, string>;
  provider?: string;
  clusterResourceId?: string;
  longTermSupport?: boolean;
  status?: {
    kubernetesVersion?: string;
    nodePools?: NodePool[];
    region?: string;
    labels?: Record<string, string>;
    maintenance?: { kubernetes?: unknown; nodeOS?: unknown };
    leaseHolder?: string;
    busy?: boolean;
  };
}

export interface FleetEvent {
  at: string;
  kind: string;
  run?: string;
  seq?: number;
  stage?: string;
  group?: string;
  member?: string;
  reason?: string;
  until?: string;
  gateId?: string;
  gateType?: string;
  timing?: string;
  check?: string;
  verdict?: string;
  value?: string;
  message?: string;
  error?: { code: string; message: string } | string;
  by?: string;
  kubernetesVersion?: string;
  profile?: string;
}

export interface Validation {
  valid: boolean;
  errors: { path: string; message: string }[];
  warnings: { path: string; message: string }[];
  kind: "strategy" | "scenario" | null;
  strategy?: { stages: unknown[] };
}
