//! `GET /openapi.json`: the API's OpenAPI 3.1 document, generated from the code. The model's
//! schemas are derived from `waverun-core`'s own types (feature `openapi`), the envelopes from
//! the types below (which mirror what the handlers write), and the paths from one table that
//! names every route of [`super::router`] with its role, body and answers. Enums are open
//! strings; every operation documents the problems it can answer with.

use serde::Serialize;
use std::collections::BTreeMap;
use utoipa::openapi::header::{Header, HeaderBuilder};
use utoipa::openapi::path::{HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{
    ComponentsBuilder, ContentBuilder, InfoBuilder, OpenApi, OpenApiBuilder, PathItem,
    PathsBuilder, Ref, RefOr, Required, ResponseBuilder,
};
use utoipa::ToSchema;
use waverun_core::model::AutoUpgradeNodeImageSelection;
use waverun_core::profile::ProfileStatus;
use waverun_core::state::RunStatus;
use waverun_core::UpdateStrategy;
use waverun_core::{Freeze, Maintenance, ManagedClusterUpdate, NodePool, ReleaseCatalog};

/// Azure's `systemData`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct SystemData {
    created_by: String,
    created_by_type: String,
    #[schema(format = DateTime)]
    created_at: String,
    last_modified_by: String,
    last_modified_by_type: String,
    #[schema(format = DateTime)]
    last_modified_at: String,
}

/// An update strategy's properties.
#[derive(Serialize, ToSchema)]
struct UpdateStrategyProperties {
    strategy: UpdateStrategy,
}

/// An update strategy.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct UpdateStrategyResource {
    id: String,
    name: String,
    #[serde(rename = "type")]
    kind: String,
    system_data: SystemData,
    properties: UpdateStrategyProperties,
    e_tag: String,
}

/// An update run's properties: its spec, and the engine's status tree.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct UpdateRunProperties {
    #[serde(default)]
    update_strategy_id: Option<String>,
    /// The strategy the run follows (a snapshot of the named one).
    #[serde(default)]
    strategy: Option<UpdateStrategy>,
    managed_cluster_update: ManagedClusterUpdate,
    provisioning_state: String,
    status: RunStatus,
    /// The run this one retries.
    #[serde(default)]
    retry_of: Option<String>,
    /// The engine modules that executed the run, in the order they first did (a daemon
    /// upgraded mid-run adds one): absent before the run has started.
    #[serde(default)]
    engine_modules: Option<Vec<EngineModule>>,
    /// The auto-upgrade profile that generated the run (read-only).
    #[serde(default)]
    auto_upgrade_profile_id: Option<String>,
    /// Set when the run's deletion was asked for while it ran: it is stopping, and is
    /// deleted once stopped (read-only).
    #[serde(default)]
    delete_requested: Option<DeleteRequested>,
}

/// Who asked for a started run's deletion.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct DeleteRequested {
    by: String,
    request_id: String,
    target: String,
}

/// An auto-upgrade profile's properties, as written, with the engine's status.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct AutoUpgradeProfileProperties {
    /// `Rapid`, `Stable`, `TargetKubernetesVersion`, `NodeImage` or `SecurityPatch`.
    channel: String,
    #[serde(default)]
    update_strategy_id: Option<String>,
    #[serde(default)]
    node_image_selection: Option<AutoUpgradeNodeImageSelection>,
    disabled: bool,
    #[serde(default)]
    target_kubernetes_version: Option<String>,
    long_term_support: bool,
    provisioning_state: String,
    /// Azure's `lastTrigger*` fields, plus waverun's `lastUpdateRunName` and `nextTarget`.
    auto_upgrade_profile_status: ProfileStatus,
}

/// An auto-upgrade profile.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct AutoUpgradeProfileResource {
    id: String,
    name: String,
    #[serde(rename = "type")]
    kind: String,
    system_data: SystemData,
    properties: AutoUpgradeProfileProperties,
    e_tag: String,
}

/// `generateUpdateRun`'s answer: the run's id (and name).
#[derive(Serialize, ToSchema)]
struct GenerateResponse {
    id: String,
    name: String,
}

/// An engine module that executed a run.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct EngineModule {
    /// The module's SHA-256 (hex).
    sha256: String,
    /// When (fleet time) it first executed a step of the run.
    #[schema(format = DateTime)]
    since: String,
}

/// An update run.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct UpdateRunResource {
    id: String,
    name: String,
    #[serde(rename = "type")]
    kind: String,
    system_data: SystemData,
    properties: UpdateRunProperties,
    e_tag: String,
}

/// What a member's provider describes.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct MemberObserved {
    kubernetes_version: String,
    node_pools: Vec<NodePool>,
    region: String,
    maintenance: Maintenance,
    labels: BTreeMap<String, String>,
    busy: bool,
    /// `Running` or `Stopped`, when the platform says (a stopped cluster runs no upgrade).
    #[serde(default)]
    power_state: Option<String>,
    /// The run that holds the member's lease (one upgrade authority), if one does.
    #[serde(default)]
    lease_holder: Option<String>,
}

/// A member's properties.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct MemberProperties {
    provider: String,
    /// The provider's reference of the cluster (a string or an object of identifiers).
    #[schema(value_type = Option<Object>)]
    cluster_ref: Option<serde_json::Value>,
    #[serde(default)]
    cluster_resource_id: Option<String>,
    group: Option<String>,
    labels: BTreeMap<String, String>,
    long_term_support: bool,
    status: MemberObserved,
}

/// A member.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct MemberResource {
    id: String,
    name: String,
    #[serde(rename = "type")]
    kind: String,
    system_data: SystemData,
    properties: MemberProperties,
    e_tag: String,
}

/// Where a gate sits.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct GateRunProperties {
    name: String,
    stage: String,
    timing: waverun_core::GateTiming,
    #[serde(default)]
    group: Option<String>,
}

/// A gate's target: its run and position.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct GateTarget {
    id: String,
    update_run_properties: GateRunProperties,
}

/// A scheduled gate's resolved start.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct ScheduledStartProperties {
    #[schema(format = DateTime)]
    absolute_start_time: String,
}

/// A gate's properties.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct GateProperties {
    provisioning_state: String,
    gate_type: waverun_core::GateType,
    target: GateTarget,
    state: waverun_core::State,
    #[serde(default)]
    display_name: Option<String>,
    #[serde(default)]
    scheduled_start_properties: Option<ScheduledStartProperties>,
    #[serde(default)]
    completed_by: Option<String>,
    /// waverun: a HealthCheck gate's check name.
    #[serde(default)]
    health_check: Option<String>,
    /// waverun: a HealthCheck gate's measurements and verdict.
    #[serde(default)]
    check: Option<waverun_core::state::CheckStatus>,
}

/// A gate (fleet-wide, named by a lowercase GUID). Its `systemData`: created by whoever created
/// its run, when the run reached it; last modified by whoever completed it (`schedule` for a
/// scheduled start), when.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct GateResource {
    id: String,
    name: String,
    #[serde(rename = "type")]
    kind: String,
    system_data: SystemData,
    properties: GateProperties,
    e_tag: String,
}

/// One audit entry: who did what, when, and how it ended.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct AuditEntry {
    seq: u64,
    #[schema(format = DateTime)]
    at: String,
    who: String,
    action: String,
    target: String,
    request_id: String,
    /// `ok`, or the refusal's code.
    outcome: String,
    detail: Option<String>,
}

/// The fleet's clock: fleet time now, and how many fleet seconds pass per real second (1 in
/// production; a demo's clock runs faster). Clients count down to a fleet-time `until` with it.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct FleetProperties {
    #[schema(format = DateTime)]
    fleet_time: String,
    time_scale: f64,
    caller: FleetCaller,
    /// The sequence number of the newest event: follow `GET /events` from it to see only
    /// what happens from now on.
    last_event_seq: u64,
}

/// Who is asking: the token's name and role (`anonymous`, `admin` when the daemon has no
/// tokens). A client shows only the actions the role may take; the API checks every one.
#[derive(Serialize, ToSchema)]
struct FleetCaller {
    name: String,
    /// `viewer`, `operator`, `approver` or `admin`.
    role: String,
}

/// The fleet this daemon serves.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct FleetResource {
    id: String,
    name: String,
    #[serde(rename = "type")]
    kind: String,
    properties: FleetProperties,
}

/// The fleets of this daemon (it serves one).
#[derive(Serialize, ToSchema)]
struct FleetList {
    value: Vec<FleetResource>,
}

macro_rules! list {
    ($name:ident, $item:ty, $doc:expr) => {
        #[doc = $doc]
        #[derive(Serialize, ToSchema)]
        #[serde(rename_all = "camelCase")]
        struct $name {
            value: Vec<$item>,
            /// The next page, or null: an absolute URL (this server as the request named
            /// it) with the request's other query parameters (`$filter`, `run`) kept.
            next_link: Option<String>,
        }
    };
}

list!(
    UpdateStrategyList,
    UpdateStrategyResource,
    "A page of update strategies."
);
list!(UpdateRunList, UpdateRunResource, "A page of update runs.");
list!(
    AutoUpgradeProfileList,
    AutoUpgradeProfileResource,
    "A page of auto-upgrade profiles."
);
list!(MemberList, MemberResource, "A page of members.");
list!(
    EventSubscriptionList,
    EventSubscriptionResource,
    "A page of event subscriptions."
);
list!(
    DeliveryList,
    DeliveryAttempt,
    "A page of a subscription's delivery log, newest first."
);
list!(
    DeadLetterList,
    DeadLetterEntry,
    "A page of a subscription's dead letters, oldest first."
);
list!(GateList, GateResource, "A page of gates.");
list!(AuditList, AuditEntry, "A page of the audit log.");
list!(
    EventList,
    serde_json::Value,
    "A page of events (`seq` and the event of `scenario-format.md`)."
);

/// An RFC 9457 problem.
#[derive(Serialize, ToSchema)]
struct Problem {
    #[serde(rename = "type")]
    kind: String,
    title: String,
    status: u16,
    detail: String,
    /// The same as `detail`, where Azure's clients read it.
    message: String,
    /// The stable code (`InvalidField`, `NotFound`, `PreconditionFailed`, ...).
    code: String,
    /// The field at fault.
    #[serde(default)]
    target: Option<String>,
}

/// Azure's read-only envelope fields, accepted and ignored in a PUT body.
macro_rules! put_body {
    ($name:ident, $props:ty, $doc:expr) => {
        #[doc = $doc]
        #[derive(Serialize, ToSchema)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        struct $name {
            /// Read-only: ignored.
            #[serde(default)]
            id: Option<serde_json::Value>,
            /// Read-only: ignored.
            #[serde(default)]
            name: Option<serde_json::Value>,
            /// Read-only: ignored.
            #[serde(default, rename = "type")]
            kind: Option<serde_json::Value>,
            /// Read-only: ignored.
            #[serde(default)]
            system_data: Option<serde_json::Value>,
            /// Read-only: ignored.
            #[serde(default)]
            e_tag: Option<serde_json::Value>,
            properties: $props,
        }
    };
}

/// `PUT /updateStrategies/{name}`'s properties.
#[derive(Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct UpdateStrategyPutProperties {
    strategy: UpdateStrategy,
}

/// `PUT /updateRuns/{name}`'s properties: a named strategy or one given inline.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct UpdateRunPutProperties {
    #[serde(default)]
    update_strategy_id: Option<String>,
    #[serde(default)]
    strategy: Option<UpdateStrategy>,
    managed_cluster_update: ManagedClusterUpdate,
}

/// `PUT /autoUpgradeProfiles/{name}`'s properties.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AutoUpgradeProfilePutProperties {
    /// `Rapid`, `Stable`, `TargetKubernetesVersion`, `NodeImage` or `SecurityPatch`.
    channel: String,
    /// `/fleets/{fleet}/updateStrategies/{name}`; without one, members one by one.
    #[serde(default)]
    update_strategy_id: Option<String>,
    /// `Latest` (default) or `Consistent`.
    #[serde(default)]
    node_image_selection: Option<AutoUpgradeNodeImageSelection>,
    #[serde(default)]
    disabled: Option<bool>,
    /// `"x.y"`: only (and required) with `TargetKubernetesVersion`.
    #[serde(default)]
    target_kubernetes_version: Option<String>,
    /// Only with `TargetKubernetesVersion`.
    #[serde(default)]
    long_term_support: Option<bool>,
}

/// `PUT|PATCH /members/{name}`'s properties (a PATCH changes only those given).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MemberPutProperties {
    #[serde(default)]
    cluster_resource_id: Option<String>,
    #[serde(default)]
    provider: Option<String>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    cluster_ref: Option<serde_json::Value>,
    #[serde(default)]
    group: Option<String>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    long_term_support: Option<bool>,
}

put_body!(
    UpdateStrategyPut,
    UpdateStrategyPutProperties,
    "An update strategy to store."
);
put_body!(
    UpdateRunPut,
    UpdateRunPutProperties,
    "An update run to create, or change before it starts."
);
put_body!(
    AutoUpgradeProfilePut,
    AutoUpgradeProfilePutProperties,
    "An auto-upgrade profile to store."
);
put_body!(
    MemberPut,
    MemberPutProperties,
    "A member bound to its cluster."
);

/// `POST /members`'s body: many members at once, all of them or none — the shape
/// `GET /members` answers with, so a fleet's list imports into another.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MemberImport {
    /// At most 100,000 members; each name once.
    value: Vec<MemberImportItem>,
    /// Read-only: ignored.
    #[serde(default)]
    next_link: Option<serde_json::Value>,
}

/// One member of an import: its name, and what its PUT would give.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MemberImportItem {
    name: String,
    properties: MemberPutProperties,
    /// Read-only: ignored.
    #[serde(default)]
    id: Option<serde_json::Value>,
    /// Read-only: ignored.
    #[serde(default, rename = "type")]
    kind: Option<serde_json::Value>,
    /// Read-only: ignored.
    #[serde(default)]
    system_data: Option<serde_json::Value>,
    /// Read-only: ignored.
    #[serde(default)]
    e_tag: Option<serde_json::Value>,
}

/// What an import registered: members new to the fleet, and members registered again.
#[derive(Serialize, ToSchema)]
struct MemberImported {
    created: u64,
    updated: u64,
}

/// Where an event subscription delivers (Event Grid's `destination`).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SubscriptionDestination {
    /// `WebHook` (the one type).
    endpoint_type: String,
    properties: SubscriptionEndpoint,
}

/// The endpoint.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SubscriptionEndpoint {
    /// `https://…` (plain `http` only to loopback, when `webhooks.allowLoopback` is set).
    endpoint_url: String,
}

/// Which events a subscription receives (every one when empty).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SubscriptionFilter {
    /// Event kinds (`GateCreated`, `RunFailed`, …) or their CloudEvents types.
    #[serde(default)]
    included_event_types: Vec<String>,
    /// Only these runs' events.
    #[serde(default)]
    runs: Vec<String>,
    /// Only these stages' events.
    #[serde(default)]
    stages: Vec<String>,
    /// `info` (default), `warning` or `error`.
    #[serde(default)]
    minimum_severity: Option<String>,
}

/// How long an event is tried before it is dead-lettered.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SubscriptionRetryPolicy {
    /// 1 to 1440 (default 1440).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 1440)]
    event_time_to_live_in_minutes: Option<u32>,
}

/// How deliveries are signed: a configured secret by name, or (without one) the
/// subscription's own, generated and shown once.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SubscriptionSigningPut {
    /// A secret of the daemon's configuration (`webhooks.secrets`).
    #[serde(default)]
    secret_ref: Option<String>,
}

/// `PUT /eventSubscriptions/{name}`'s properties.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EventSubscriptionPutProperties {
    destination: SubscriptionDestination,
    #[serde(default)]
    filter: Option<SubscriptionFilter>,
    /// `CloudEventSchemaV1_0` (the one schema).
    #[serde(default)]
    event_delivery_schema: Option<String>,
    #[serde(default)]
    retry_policy: Option<SubscriptionRetryPolicy>,
    #[serde(default)]
    signing: Option<SubscriptionSigningPut>,
    /// Default true.
    #[serde(default)]
    enabled: Option<bool>,
}

/// One of a subscription's own secrets, as reads show it (never the secret).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct SubscriptionSecretInfo {
    created_at: String,
    /// Set after a rotation: it signs until then.
    expires_at: Option<String>,
}

/// How deliveries are signed, as reads show it.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct SubscriptionSigning {
    #[serde(default)]
    secret_ref: Option<String>,
    secrets: Vec<SubscriptionSecretInfo>,
    /// Only in the answer that made it (a creation or a rotation): `whsec_…`, shown once.
    #[serde(default)]
    secret: Option<String>,
}

/// Where a subscription's deliveries stand.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct SubscriptionStatus {
    /// The last event done with (delivered, dead-lettered or not for it).
    cursor: u64,
    /// The event log's last sequence number.
    log_end: u64,
    /// Events in the log after the cursor, matching or not: how far behind it is.
    lag: u64,
    dead_letters: u64,
    /// Attempts since the daemon started, by outcome.
    #[schema(value_type = Object)]
    attempts_since_start: serde_json::Value,
}

/// An event subscription's properties, as reads show them.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct EventSubscriptionProperties {
    destination: SubscriptionDestination,
    #[serde(default)]
    filter: Option<SubscriptionFilter>,
    #[serde(default)]
    event_delivery_schema: Option<String>,
    #[serde(default)]
    retry_policy: Option<SubscriptionRetryPolicy>,
    signing: SubscriptionSigning,
    #[serde(default)]
    enabled: Option<bool>,
    provisioning_state: String,
    status: SubscriptionStatus,
}

/// An event subscription.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct EventSubscriptionResource {
    id: String,
    name: String,
    #[serde(rename = "type")]
    kind: String,
    system_data: SystemData,
    properties: EventSubscriptionProperties,
    e_tag: String,
}

/// One attempt at a delivery.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct DeliveryAttempt {
    /// The log entry's id (for `before`).
    id: u64,
    /// The event's sequence number (the CloudEvent's `id`).
    event_id: u64,
    attempt: u32,
    at: String,
    status: Option<u16>,
    latency_ms: u64,
    /// `delivered`, `failed` or `deadLettered`.
    outcome: String,
    error: Option<String>,
}

/// An event given up on.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct DeadLetterEntry {
    event_id: u64,
    at: String,
    attempts: u32,
    error: String,
}

/// `POST /eventSubscriptions/{name}/deadLetters/redeliver` (optional): which dead letters
/// (all when absent).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RedeliverBody {
    #[serde(default)]
    event_ids: Option<Vec<u64>>,
}

/// How many dead letters go back into the subscription's lane.
#[derive(Serialize, ToSchema)]
struct RedeliverResponse {
    redelivering: u64,
}

/// How a test delivery went.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct TestDeliveryResponse {
    /// `delivered` or `failed`.
    outcome: String,
    status: Option<u16>,
    latency_ms: u64,
    error: Option<String>,
    /// The CloudEvent sent (`io.waverun.Test`).
    #[schema(value_type = Object)]
    event: serde_json::Value,
}

put_body!(
    EventSubscriptionPut,
    EventSubscriptionPutProperties,
    "An event subscription to store."
);

/// `PATCH /gates/{id}`'s properties.
#[derive(Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct GatePatchProperties {
    /// `Completed` approves the gate (the only change a gate takes).
    state: GateTargetState,
}

/// `POST /gates/{id}/fail`'s optional body.
#[derive(Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct GateFail {
    /// Why (shown on the gate and in the run's error).
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
}

/// The state a gate can be set to.
#[allow(dead_code)] // a schema: never built
#[derive(Serialize, ToSchema)]
enum GateTargetState {
    Completed,
}

/// `PATCH /gates/{id}`.
#[derive(Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct GatePatch {
    properties: GatePatchProperties,
}

/// One skip target.
#[derive(Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct SkipTargetBody {
    #[serde(rename = "type")]
    kind: SkipKind,
    name: String,
}

/// What a skip target names.
#[allow(dead_code)] // a schema: never built
#[derive(Serialize, ToSchema)]
enum SkipKind {
    Member,
    Group,
    Stage,
    AfterStageWait,
}

/// `POST /updateRuns/{name}/skip`.
#[derive(Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct SkipBody {
    #[schema(min_items = 1)]
    targets: Vec<SkipTargetBody>,
}

/// `POST /updateRuns/{name}/retry` (optional): the retry run's name.
#[derive(Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct RetryBody {
    #[serde(default)]
    name: Option<String>,
}

/// The body of an action that takes none: nothing, or an empty object.
#[derive(Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct EmptyBody {}

/// The freeze calendar.
#[derive(Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct Freezes {
    freezes: Vec<Freeze>,
}

/// What one operation takes and answers.
struct Op {
    method: HttpMethod,
    path: &'static str,
    id: &'static str,
    summary: &'static str,
    /// The role needed (in the description).
    role: &'static str,
    params: &'static [&'static str],
    body: Option<&'static str>,
    /// (status, schema name or "" for none, content type).
    ok: (&'static str, &'static str, &'static str),
}

/// The paths outside the fleet: (path, id, summary, content type of the answer, schema).
const OUTSIDE: &[(&str, &str, &str, &str, &str)] = &[
    (
        "/healthz",
        "healthz",
        "The process is up",
        "text/plain",
        "Text",
    ),
    (
        "/readyz",
        "readyz",
        "The engine answers (503 while it cannot)",
        "text/plain",
        "Text",
    ),
    (
        "/metrics",
        "metrics",
        "Prometheus / OpenMetrics text (any token)",
        "application/openmetrics-text",
        "Text",
    ),
    ("/openapi.json", "openapi", "This document", JSON, "Object"),
    (
        "/api/v1/fleets",
        "fleets_list",
        "The fleet this daemon serves, with its clock (any token)",
        JSON,
        "FleetList",
    ),
];

const JSON: &str = "application/json";

/// Every route of the API.
fn operations() -> Vec<Op> {
    use HttpMethod::*;
    let op = |method, path, id, summary, role, params, body, ok| Op {
        method,
        path,
        id,
        summary,
        role,
        params,
        body,
        ok,
    };
    let name: &[&str] = &["fleet", "name"];
    let page: &[&str] = &["fleet", "$top", "$skipToken"];
    vec![
        op(Get, "", "fleet_show", "The fleet, with its clock (fleetTime, timeScale)", "viewer", &["fleet"], None, ("200", "FleetResource", JSON)),
        op(Get, "/members", "members_list", "List members", "viewer", page, None, ("200", "MemberList", JSON)),
        op(Post, "/members", "members_import", "Create or replace many members at once, all or none (If-None-Match: * takes only new ones); body up to 64 MiB", "operator", &["fleet"], Some("MemberImport"), ("200", "MemberImported", JSON)),
        op(Get, "/members/{name}", "members_show", "Show a member", "viewer", name, None, ("200", "MemberResource", JSON)),
        op(Put, "/members/{name}", "members_put", "Create or replace a member (its provider describes the cluster)", "operator", name, Some("MemberPut"), ("200", "MemberResource", JSON)),
        op(Patch, "/members/{name}", "members_patch", "Change a member's group, labels or binding", "operator", name, Some("MemberPut"), ("200", "MemberResource", JSON)),
        op(Delete, "/members/{name}", "members_delete", "Delete a member", "operator", name, None, ("204", "", "")),
        op(Get, "/updateStrategies", "strategies_list", "List update strategies", "viewer", page, None, ("200", "UpdateStrategyList", JSON)),
        op(Get, "/updateStrategies/{name}", "strategies_show", "Show an update strategy", "viewer", name, None, ("200", "UpdateStrategyResource", JSON)),
        op(Put, "/updateStrategies/{name}", "strategies_put", "Create or replace an update strategy", "operator", name, Some("UpdateStrategyPut"), ("200", "UpdateStrategyResource", JSON)),
        op(Delete, "/updateStrategies/{name}", "strategies_delete", "Delete an update strategy", "operator", name, None, ("204", "", "")),
        op(Get, "/updateRuns", "runs_list", "List update runs", "viewer", page, None, ("200", "UpdateRunList", JSON)),
        op(Get, "/updateRuns/{name}", "runs_show", "Show an update run with its status tree", "viewer", name, None, ("200", "UpdateRunResource", JSON)),
        op(Put, "/updateRuns/{name}", "runs_put", "Create an update run, or change it before it starts", "operator", name, Some("UpdateRunPut"), ("200", "UpdateRunResource", JSON)),
        op(Delete, "/updateRuns/{name}", "runs_delete", "Delete an update run (a started one is stopped first, and deleted once stopped: 202)", "operator", name, None, ("204", "", "")),
        op(Post, "/updateRuns/{name}/start", "runs_start", "Start (or resume) an update run", "operator", name, Some("EmptyBody"), ("200", "UpdateRunResource", JSON)),
        op(Post, "/updateRuns/{name}/stop", "runs_stop", "Stop an update run (upgrades in flight finish)", "operator", name, Some("EmptyBody"), ("200", "UpdateRunResource", JSON)),
        op(Post, "/updateRuns/{name}/skip", "runs_skip", "Skip members, groups, stages or after-stage waits", "operator", name, Some("SkipBody"), ("200", "UpdateRunResource", JSON)),
        op(Post, "/updateRuns/{name}/retry", "runs_retry", "Create a retry run over the failed, skipped and pending members of a finished run", "operator", name, Some("RetryBody"), ("201", "UpdateRunResource", JSON)),
        op(Get, "/updateRuns/{name}/plan", "runs_plan", "The run's plan: members per stage and group, resolved limits, gates", "viewer", name, None, ("200", "Object", JSON)),
        op(Get, "/updateRuns/{name}/forecast", "runs_forecast", "When the run is expected to finish, per member, group and stage", "viewer", name, None, ("200", "Object", JSON)),
        op(Get, "/updateRuns/{name}/forecastState", "runs_forecast_state", "The engine state and time a forecast of the run starts from ({run, at, snapshot}), for the plugin's forecastFrom in a browser", "viewer", name, None, ("200", "Object", JSON)),
        op(Get, "/autoUpgradeProfiles", "profiles_list", "List auto-upgrade profiles", "viewer", page, None, ("200", "AutoUpgradeProfileList", JSON)),
        op(Get, "/autoUpgradeProfiles/{name}", "profiles_show", "Show an auto-upgrade profile with its status", "viewer", name, None, ("200", "AutoUpgradeProfileResource", JSON)),
        op(Put, "/autoUpgradeProfiles/{name}", "profiles_put", "Create or replace an auto-upgrade profile", "admin", name, Some("AutoUpgradeProfilePut"), ("200", "AutoUpgradeProfileResource", JSON)),
        op(Delete, "/autoUpgradeProfiles/{name}", "profiles_delete", "Delete an auto-upgrade profile (its runs stay)", "admin", name, None, ("204", "", "")),
        op(Post, "/autoUpgradeProfiles/{name}/generateUpdateRun", "profiles_generate", "Create (not start) the run for the profile's current target; 204 when there is nothing to generate", "admin", name, Some("EmptyBody"), ("200", "GenerateResponse", JSON)),
        op(Get, "/gates", "gates_list", "List gates ($filter=state eq Pending, run=NAME)", "viewer", &["fleet", "$filter", "run", "$top", "$skipToken"], None, ("200", "GateList", JSON)),
        op(Get, "/gates/{name}", "gates_show", "Show a gate", "viewer", name, None, ("200", "GateResource", JSON)),
        op(Patch, "/gates/{name}", "gates_patch", "Complete a gate ({\"properties\":{\"state\":\"Completed\"}})", "approver", name, Some("GatePatch"), ("200", "GateResource", JSON)),
        op(Post, "/gates/{name}/approve", "gates_approve", "Approve a gate", "approver", name, Some("EmptyBody"), ("200", "GateResource", JSON)),
        op(Post, "/gates/{name}/fail", "gates_fail", "Fail a Pending gate (an inconclusive health check, an approval refused): its stage or group fails and the run stops", "approver", name, Some("GateFail"), ("200", "GateResource", JSON)),
        op(Get, "/freezes", "freezes_show", "The fleet's freeze calendar", "viewer", &["fleet"], None, ("200", "Freezes", JSON)),
        op(Put, "/freezes", "freezes_put", "Replace the freeze calendar", "admin", &["fleet"], Some("Freezes"), ("200", "Freezes", JSON)),
        op(Get, "/releases", "releases_list", "The release catalog (per region with ?region=)", "viewer", &["fleet", "region"], None, ("200", "Object", JSON)),
        op(Post, "/simulate", "simulate", "Simulate a scenario (scenario-format.md, as JSON): the report of `waverun simulate -o json`", "viewer", &["fleet"], Some("Object"), ("200", "Object", JSON)),
        op(Get, "/eventSubscriptions", "subscriptions_list", "List event subscriptions, each with where its deliveries stand", "admin", page, None, ("200", "EventSubscriptionList", JSON)),
        op(Get, "/eventSubscriptions/{name}", "subscriptions_show", "Show an event subscription (never its secret)", "admin", name, None, ("200", "EventSubscriptionResource", JSON)),
        op(Put, "/eventSubscriptions/{name}", "subscriptions_put", "Create or replace an event subscription (a generated secret is in the answer, once)", "admin", name, Some("EventSubscriptionPut"), ("200", "EventSubscriptionResource", JSON)),
        op(Delete, "/eventSubscriptions/{name}", "subscriptions_delete", "Delete an event subscription (its cursor, dead letters and log too)", "admin", name, None, ("204", "", "")),
        op(Post, "/eventSubscriptions/{name}/rotateSecret", "subscriptions_rotate", "A new signing secret (in the answer, once); the old ones sign beside it for a day", "admin", name, Some("EmptyBody"), ("200", "EventSubscriptionResource", JSON)),
        op(Post, "/eventSubscriptions/{name}/test", "subscriptions_test", "Send the endpoint one signed io.waverun.Test event now, and say how it went", "admin", name, Some("EmptyBody"), ("200", "TestDeliveryResponse", JSON)),
        op(Get, "/eventSubscriptions/{name}/deliveries", "subscriptions_deliveries", "The subscription's delivery log, newest first", "admin", &["fleet", "name", "$top", "before"], None, ("200", "DeliveryList", JSON)),
        op(Get, "/eventSubscriptions/{name}/deadLetters", "subscriptions_dead_letters", "The subscription's dead letters, oldest first", "admin", &["fleet", "name", "$top", "after"], None, ("200", "DeadLetterList", JSON)),
        op(Post, "/eventSubscriptions/{name}/deadLetters/redeliver", "subscriptions_redeliver", "Deliver dead letters again (eventIds, or all), after what the subscription is delivering now", "admin", name, Some("RedeliverBody"), ("202", "RedeliverResponse", JSON)),
        op(Get, "/events", "events_list", "Engine events: a page of JSON, or Server-Sent Events with Accept: text/event-stream", "viewer", &["fleet", "after", "$top", "run", "Accept", "Last-Event-ID"], None, ("200", "EventList", JSON)),
        op(Get, "/audit", "audit_list", "The audit log", "viewer", &["fleet", "after", "$top"], None, ("200", "AuditList", JSON)),
    ]
}

fn schema_ref(name: &str) -> RefOr<Schema> {
    if name == "Text" {
        RefOr::T(Schema::Object(
            ObjectBuilder::new().schema_type(Type::String).build(),
        ))
    } else if name == "Object" {
        RefOr::T(Schema::Object(
            ObjectBuilder::new().schema_type(Type::Object).build(),
        ))
    } else {
        RefOr::Ref(Ref::from_schema_name(name))
    }
}

fn parameter(name: &str, fleet: &str) -> utoipa::openapi::path::Parameter {
    let string = || ObjectBuilder::new().schema_type(Type::String);
    let (place, schema, description): (ParameterIn, ObjectBuilder, &str) = match name {
        "fleet" => (
            ParameterIn::Path,
            string().enum_values(Some([fleet.to_string()])),
            "The fleet this daemon serves",
        ),
        "name" => (ParameterIn::Path, string(), "The resource's name"),
        "$top" => (
            ParameterIn::Query,
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(1))
                .maximum(Some(1000)),
            "At most this many items",
        ),
        "$skipToken" => (
            ParameterIn::Query,
            string(),
            "Continue after this name (from nextLink)",
        ),
        "$filter" => (ParameterIn::Query, string(), "`state eq STATE`"),
        "run" => (ParameterIn::Query, string(), "Only those of this run"),
        "before" => (
            ParameterIn::Query,
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(0)),
            "Only those older than this log id (from nextLink)",
        ),
        "after" => (
            ParameterIn::Query,
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(0)),
            "Only those after this sequence number",
        ),
        "region" => (
            ParameterIn::Query,
            string(),
            "Only what is available in this region",
        ),
        "If-Match" => (
            ParameterIn::Header,
            string(),
            "Only if the resource's ETag is one of these (`*`: it exists); else 412",
        ),
        "If-None-Match" => (
            ParameterIn::Header,
            string(),
            "Only if the resource's ETag is none of these (`*`: create only); else 412",
        ),
        "x-request-id" => (
            ParameterIn::Header,
            string().max_length(Some(128)),
            "The request's id (echoed in the answer and the audit log); one is made up without it",
        ),
        "Accept" => (
            ParameterIn::Header,
            string(),
            "`text/event-stream` for the Server-Sent Events stream",
        ),
        "Last-Event-ID" => (
            ParameterIn::Header,
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(0)),
            "The stream resumes after this event (as `after`)",
        ),
        other => (ParameterIn::Query, string(), other),
    };
    let required = if place == ParameterIn::Path {
        Required::True
    } else {
        Required::False
    };
    ParameterBuilder::new()
        .name(name)
        .parameter_in(place)
        .required(required)
        .description(Some(description))
        .schema(Some(Schema::Object(schema.build())))
        .build()
}

fn string_schema() -> RefOr<Schema> {
    RefOr::T(Schema::Object(
        ObjectBuilder::new().schema_type(Type::String).build(),
    ))
}

/// The `x-request-id` of every answer.
fn request_id_header() -> Header {
    HeaderBuilder::new()
        .schema(string_schema())
        .description(Some(
            "The request's id: the client's x-request-id when it sent one, else a new one",
        ))
        .build()
}

fn problem_response(description: &str) -> utoipa::openapi::Response {
    ResponseBuilder::new()
        .description(description)
        .header("x-request-id", request_id_header())
        .content(
            "application/problem+json",
            ContentBuilder::new()
                .schema(Some(schema_ref("Problem")))
                .build(),
        )
        .build()
}

type Schemas = Vec<(String, RefOr<Schema>)>;

/// `T`'s schema and every schema it refers to.
fn collect<T: ToSchema>(out: &mut Schemas) {
    out.push((T::name().into_owned(), T::schema()));
    T::schemas(out);
}

/// The document for a daemon serving `fleet`.
pub fn document(fleet: &str) -> OpenApi {
    let mut paths = PathsBuilder::new();
    for o in operations() {
        let mut b = OperationBuilder::new()
            .operation_id(Some(o.id))
            .summary(Some(o.summary))
            .description(Some(format!("Role: {} (or admin).", o.role)))
            .security(SecurityRequirement::new("bearer", Vec::<String>::new()));
        for p in o.params {
            b = b.parameter(parameter(p, fleet));
        }
        // Every change of one resource is guarded by If-Match (a simulation changes nothing;
        // an import is of many resources, which no one ETag names); a PUT or PATCH, and an
        // import (only new members), by If-None-Match.
        let many = o.id == "members_import";
        if o.method != HttpMethod::Get && o.id != "simulate" && !many {
            b = b.parameter(parameter("If-Match", fleet));
        }
        if matches!(o.method, HttpMethod::Put | HttpMethod::Patch) || many {
            b = b.parameter(parameter("If-None-Match", fleet));
        }
        b = b.parameter(parameter("x-request-id", fleet));
        if let Some(body) = o.body {
            let required = if [
                "runs_retry",
                "runs_start",
                "runs_stop",
                "gates_approve",
                "gates_fail",
                "profiles_generate",
                "subscriptions_rotate",
                "subscriptions_test",
                "subscriptions_redeliver",
            ]
            .contains(&o.id)
            {
                Required::False
            } else {
                Required::True
            };
            b = b.request_body(Some(
                RequestBodyBuilder::new()
                    .required(Some(required))
                    .content(
                        JSON,
                        ContentBuilder::new().schema(Some(schema_ref(body))).build(),
                    )
                    .build(),
            ));
        }
        let (status, schema, content) = o.ok;
        // A resource (or the freeze calendar) comes with its ETag.
        let etag = [
            "MemberResource",
            "UpdateStrategyResource",
            "UpdateRunResource",
            "GateResource",
            "AutoUpgradeProfileResource",
            "EventSubscriptionResource",
            "Freezes",
        ]
        .contains(&schema);
        let success = |description: &str| {
            let mut r = ResponseBuilder::new()
                .description(description)
                .header("x-request-id", request_id_header());
            if etag {
                r = r.header(
                    "ETag",
                    HeaderBuilder::new()
                        .schema(string_schema())
                        .description(Some(
                            "The resource's strong ETag (as its eTag), for If-Match",
                        ))
                        .build(),
                );
            }
            if !schema.is_empty() {
                r = r.content(
                    content,
                    ContentBuilder::new()
                        .schema(Some(schema_ref(schema)))
                        .build(),
                );
            }
            if o.id == "events_list" {
                r = r.content(
                    "text/event-stream",
                    ContentBuilder::new().schema(Some(string_schema())).build(),
                );
            }
            r.build()
        };
        b = b.response(status, success("Success"));
        if o.method == HttpMethod::Put {
            b = b.response("201", success("Created"));
        }
        if o.id == "profiles_generate" {
            let nothing = ResponseBuilder::new()
                .description("No update run was generated (no target, or every member at it)")
                .header("x-request-id", request_id_header())
                .build();
            b = b.response("204", nothing);
        }
        if o.id == "runs_delete" {
            let stopping = ResponseBuilder::new()
                .description(
                    "The run had started: it is stopping, and is deleted once its upgrades in \
                     flight finish (Location: the run, 404 once it is gone)",
                )
                .header("x-request-id", request_id_header())
                .content(
                    JSON,
                    ContentBuilder::new()
                        .schema(Some(schema_ref("UpdateRunResource")))
                        .build(),
                )
                .build();
            b = b.response("202", stopping);
        }
        for (code, what) in [
            ("400", "A field broke a rule (target names it)"),
            ("401", "No valid bearer token"),
            ("403", "The token's role may not do this"),
            ("404", "No such fleet or resource"),
            (
                "405",
                "The path does not take this method (Allow lists those it takes)",
            ),
            ("409", "The resource's state forbids it, or it exists"),
            ("408", "The body did not arrive within its deadline"),
            ("412", "If-Match / If-None-Match did not hold"),
            ("413", "The body is over 4 MiB"),
            ("415", "The body is not JSON"),
            ("422", "The request cannot be carried out"),
            ("429", "Too many event streams open (per token or in all)"),
            ("502", "A cluster provider failed"),
            (
                "503",
                "The engine or the store cannot take it now; nothing changed",
            ),
        ] {
            b = b.response(code, problem_response(what));
        }
        let path = format!("/api/v1/fleets/{{fleet}}{}", o.path);
        paths = paths.path(path, PathItem::new(o.method, b.build()));
    }
    for (path, id, summary, content, schema) in OUTSIDE {
        let mut b = OperationBuilder::new()
            .operation_id(Some(*id))
            .summary(Some(*summary))
            .response(
                "200",
                ResponseBuilder::new()
                    .description("Success")
                    .header("x-request-id", request_id_header())
                    .content(
                        *content,
                        ContentBuilder::new()
                            .schema(Some(schema_ref(schema)))
                            .build(),
                    )
                    .build(),
            );
        if *id == "metrics" || *id == "fleets_list" {
            b = b
                .security(SecurityRequirement::new("bearer", Vec::<String>::new()))
                .response("401", problem_response("No valid bearer token"))
                .response("503", problem_response("The engine cannot answer now"));
        }
        if *id == "readyz" {
            b = b.response("503", problem_response("The engine cannot answer now"));
        }
        paths = paths.path(*path, PathItem::new(HttpMethod::Get, b.build()));
    }
    let mut schemas = Vec::new();
    collect::<Problem>(&mut schemas);
    collect::<SystemData>(&mut schemas);
    collect::<UpdateStrategyResource>(&mut schemas);
    collect::<UpdateStrategyProperties>(&mut schemas);
    collect::<UpdateStrategyList>(&mut schemas);
    collect::<UpdateStrategyPut>(&mut schemas);
    collect::<UpdateStrategyPutProperties>(&mut schemas);
    collect::<UpdateRunResource>(&mut schemas);
    collect::<UpdateRunProperties>(&mut schemas);
    collect::<UpdateRunList>(&mut schemas);
    collect::<UpdateRunPut>(&mut schemas);
    collect::<UpdateRunPutProperties>(&mut schemas);
    collect::<AutoUpgradeProfileResource>(&mut schemas);
    collect::<AutoUpgradeProfileProperties>(&mut schemas);
    collect::<AutoUpgradeProfileList>(&mut schemas);
    collect::<AutoUpgradeProfilePut>(&mut schemas);
    collect::<AutoUpgradeProfilePutProperties>(&mut schemas);
    collect::<GenerateResponse>(&mut schemas);
    collect::<EventSubscriptionPut>(&mut schemas);
    collect::<EventSubscriptionPutProperties>(&mut schemas);
    collect::<EventSubscriptionResource>(&mut schemas);
    collect::<EventSubscriptionProperties>(&mut schemas);
    collect::<EventSubscriptionList>(&mut schemas);
    collect::<SubscriptionDestination>(&mut schemas);
    collect::<SubscriptionEndpoint>(&mut schemas);
    collect::<SubscriptionFilter>(&mut schemas);
    collect::<SubscriptionRetryPolicy>(&mut schemas);
    collect::<SubscriptionSigningPut>(&mut schemas);
    collect::<SubscriptionSigning>(&mut schemas);
    collect::<SubscriptionSecretInfo>(&mut schemas);
    collect::<SubscriptionStatus>(&mut schemas);
    collect::<DeliveryList>(&mut schemas);
    collect::<DeliveryAttempt>(&mut schemas);
    collect::<DeadLetterList>(&mut schemas);
    collect::<DeadLetterEntry>(&mut schemas);
    collect::<RedeliverBody>(&mut schemas);
    collect::<RedeliverResponse>(&mut schemas);
    collect::<TestDeliveryResponse>(&mut schemas);
    collect::<MemberResource>(&mut schemas);
    collect::<MemberProperties>(&mut schemas);
    collect::<MemberObserved>(&mut schemas);
    collect::<MemberList>(&mut schemas);
    collect::<MemberPut>(&mut schemas);
    collect::<MemberImport>(&mut schemas);
    collect::<MemberImported>(&mut schemas);
    collect::<MemberPutProperties>(&mut schemas);
    collect::<GateResource>(&mut schemas);
    collect::<GateProperties>(&mut schemas);
    collect::<GateTarget>(&mut schemas);
    collect::<GateRunProperties>(&mut schemas);
    collect::<ScheduledStartProperties>(&mut schemas);
    collect::<GateList>(&mut schemas);
    collect::<GatePatch>(&mut schemas);
    collect::<GatePatchProperties>(&mut schemas);
    collect::<GateFail>(&mut schemas);
    collect::<SkipBody>(&mut schemas);
    collect::<SkipTargetBody>(&mut schemas);
    collect::<RetryBody>(&mut schemas);
    collect::<EmptyBody>(&mut schemas);
    collect::<Freezes>(&mut schemas);
    collect::<FleetResource>(&mut schemas);
    collect::<EngineModule>(&mut schemas);
    collect::<FleetProperties>(&mut schemas);
    collect::<FleetCaller>(&mut schemas);
    collect::<FleetList>(&mut schemas);
    collect::<AuditEntry>(&mut schemas);
    collect::<AuditList>(&mut schemas);
    collect::<EventList>(&mut schemas);
    collect::<ReleaseCatalog>(&mut schemas);
    let components = ComponentsBuilder::new()
        .schemas_from_iter(schemas)
        .security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        )
        .build();
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("waverun")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(
                    "The waverun daemon: Azure Kubernetes Fleet Manager's update runs, gates and \
                     members for any fleet (shared/spec/api.md).",
                ))
                .build(),
        )
        .paths(paths.build())
        .components(Some(components))
        .build()
}
