//! One stored event as a CloudEvent (CloudEvents 1.0, structured JSON mode,
//! `application/cloudevents+json`): its `type`, `subject`, `severity` and the body a
//! subscription receives.
//!
//! - `id` is the event's sequence number in the fleet's event log, the same in every attempt
//!   and every subscription: with `source`, it names the event, so receivers deduplicate on it.
//! - `source` is the fleet's API path (`/api/v1/fleets/{fleet}`); `subject` the resource the
//!   event is about, under it: `/gates/{name}` for a gate's events, `/updateRuns/{run}` for
//!   any other event of a run, `/` for the fleet's own.
//! - `type`: where Azure's Event Grid publishes an event for the same fact, its type
//!   ([`AZURE_GATE_CREATED`], [`AZURE_GATE_UPDATED`]: Azure Resource Notifications' AKS
//!   Resources events for update-run gates); waverun's own otherwise, `io.waverun.` and the
//!   event's kind (`io.waverun.RunFailed`).
//! - `data` is the event as the API's `/events` shows it (with `seq`), and `links`: the run,
//!   the gate, and for a pending approval the URL that approves it.
//! - `severity` (an extension attribute): [`Severity`] of the kind, what subscriptions filter on.

use crate::store::EventRow;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use waverun_core::EventKind;

/// Azure's type for a gate an update run reached (Event Grid, AKS Resources).
pub const AZURE_GATE_CREATED: &str =
    "Microsoft.ResourceNotifications.AKSResources.FleetGateCreated";
/// Azure's type for a gate whose state changed from Pending (Event Grid, AKS Resources).
pub const AZURE_GATE_UPDATED: &str =
    "Microsoft.ResourceNotifications.AKSResources.FleetGateUpdated";
/// The prefix of waverun's own types.
pub const WAVERUN_TYPE_PREFIX: &str = "io.waverun.";
/// The media type of a CloudEvent in structured JSON mode.
pub const CONTENT_TYPE: &str = "application/cloudevents+json; charset=utf-8";

/// How much an event asks of a person: what subscriptions filter on (`minimumSeverity`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Severity {
    /// Progress: something started, completed or was measured.
    Info,
    /// Someone may need to act, or something did not happen: a pending approval, a stop, a
    /// skip, a refused action.
    Warning,
    /// Something failed: a member, a group, a stage, a gate or the run.
    Error,
}

impl Severity {
    /// The name on the wire (`info`, `warning`, `error`).
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// Where the events come from, for `source` and the links.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The fleet's name.
    pub fleet: String,
    /// The daemon's public base URL (`https://waverun.example:8443`), for absolute links;
    /// without it the links are paths.
    pub base_url: Option<String>,
}

impl Origin {
    /// `source`: the fleet's API path.
    pub fn source(&self) -> String {
        format!("/api/v1/fleets/{}", self.fleet)
    }

    fn link(&self, path: &str) -> String {
        let base = self.base_url.as_deref().unwrap_or("").trim_end_matches('/');
        format!("{base}{}{path}", self.source())
    }
}

/// An event kind by its name in the log; `None` for a name this build does not know.
pub fn kind_of(name: &str) -> Option<EventKind> {
    serde_json::from_value(Value::String(name.to_string())).ok()
}

/// The CloudEvents `type` of an event kind.
pub fn cloud_type(kind: &str) -> String {
    match kind {
        "GateCreated" => AZURE_GATE_CREATED.to_string(),
        "GateCompleted" | "GateSkipped" | "GateFailed" => AZURE_GATE_UPDATED.to_string(),
        k => format!("{WAVERUN_TYPE_PREFIX}{k}"),
    }
}

/// The severity of one event (its kind, and for a gate its type).
pub fn severity(kind: &str, event: &Value) -> Severity {
    match kind {
        "RunFailed" | "StageFailed" | "GroupFailed" | "MemberFailed" | "GateFailed" => {
            Severity::Error
        }
        "GateCreated" if event["gateType"] == "Approval" => Severity::Warning,
        "RunStopping" | "RunStopped" | "RunSkipped" | "StageSkipped" | "StageStopped"
        | "GroupSkipped" | "GroupStopped" | "MemberSkipped" | "ActionRejected" => Severity::Warning,
        _ => Severity::Info,
    }
}

/// The API name of the gate an event is about, if it is about one.
fn gate_name(event: &Value) -> Option<String> {
    event["gateId"].as_str().map(crate::api::gate_name)
}

/// The resource an event is about, under the fleet's path.
pub fn subject(row: &EventRow, event: &Value) -> String {
    if let Some(g) = gate_name(event) {
        return format!("/gates/{g}");
    }
    if row.event.run.is_empty() {
        "/".to_string()
    } else {
        format!("/updateRuns/{}", row.event.run)
    }
}

/// The CloudEvent of a stored event.
pub fn cloud_event(row: &EventRow, origin: &Origin) -> Value {
    let mut event: Value = serde_json::from_str(&row.event.data)
        .unwrap_or_else(|_| json!({ "kind": row.event.kind, "raw": row.event.data }));
    let kind = row.event.kind.as_str();
    let mut links = serde_json::Map::new();
    if !row.event.run.is_empty() {
        links.insert(
            "run".into(),
            json!(origin.link(&format!("/updateRuns/{}", row.event.run))),
        );
    }
    if let Some(g) = gate_name(&event) {
        links.insert("gate".into(), json!(origin.link(&format!("/gates/{g}"))));
        if kind == "GateCreated" && event["gateType"] == "Approval" {
            links.insert(
                "approve".into(),
                json!(origin.link(&format!("/gates/{g}/approve"))),
            );
        }
    }
    let severity = severity(kind, &event);
    let subject = subject(row, &event);
    let time = event["at"].clone();
    if let Some(o) = event.as_object_mut() {
        o.insert("seq".into(), json!(row.seq));
        o.insert("links".into(), Value::Object(links));
    }
    let mut ce = json!({
        "specversion": "1.0",
        "id": row.seq.to_string(),
        "source": origin.source(),
        "type": cloud_type(kind),
        "subject": subject,
        "datacontenttype": "application/json",
        "severity": severity.as_str(),
        "data": event,
    });
    if time.is_string() {
        ce["time"] = time;
    }
    ce
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::NewEvent;

    fn row(seq: u64, run: &str, kind: &str, data: Value) -> EventRow {
        EventRow {
            seq,
            event: NewEvent {
                at_ms: 0,
                run: run.to_string(),
                kind: kind.to_string(),
                data: data.to_string(),
            },
        }
    }

    fn origin(base: Option<&str>) -> Origin {
        Origin {
            fleet: "prod".into(),
            base_url: base.map(str::to_string),
        }
    }

    #[test]
    fn a_pending_approval_is_azures_gate_created_with_the_url_that_approves_it() {
        let data = json!({"at": "2026-12-07T00:00:00Z", "kind": "GateCreated", "run": "r1",
            "stage": "canary", "gateType": "Approval", "timing": "After", "gateId": "r1/canary/after/0"});
        let ce = cloud_event(
            &row(42, "r1", "GateCreated", data),
            &origin(Some("https://waverun.example:8443/")),
        );
        let g = crate::api::gate_name("r1/canary/after/0");
        assert_eq!(ce["specversion"], "1.0");
        assert_eq!(ce["id"], "42");
        assert_eq!(ce["type"], AZURE_GATE_CREATED);
        assert_eq!(ce["source"], "/api/v1/fleets/prod");
        assert_eq!(ce["subject"], format!("/gates/{g}"));
        assert_eq!(ce["time"], "2026-12-07T00:00:00Z");
        assert_eq!(ce["severity"], "warning");
        assert_eq!(ce["data"]["seq"], 42);
        assert_eq!(ce["data"]["stage"], "canary");
        assert_eq!(
            ce["data"]["links"]["approve"],
            format!("https://waverun.example:8443/api/v1/fleets/prod/gates/{g}/approve")
        );
        assert_eq!(
            ce["data"]["links"]["run"],
            "https://waverun.example:8443/api/v1/fleets/prod/updateRuns/r1"
        );
    }

    #[test]
    fn a_scheduled_gate_has_no_approve_link_and_its_end_is_azures_gate_updated() {
        let created = json!({"at": "2026-12-07T00:00:00Z", "kind": "GateCreated", "run": "r1",
            "stage": "s", "gateType": "ScheduledStart", "timing": "Before", "gateId": "g1",
            "until": "2026-12-08T08:00:00Z"});
        let ce = cloud_event(&row(1, "r1", "GateCreated", created), &origin(None));
        assert!(ce["data"]["links"].get("approve").is_none(), "{ce:#}");
        assert_eq!(ce["severity"], "info");
        assert_eq!(
            ce["data"]["links"]["run"],
            "/api/v1/fleets/prod/updateRuns/r1"
        );
        for kind in ["GateCompleted", "GateSkipped", "GateFailed"] {
            assert_eq!(cloud_type(kind), AZURE_GATE_UPDATED);
        }
    }

    #[test]
    fn waverun_events_have_waverun_types_and_the_run_as_subject() {
        let data = json!({"at": "2026-12-07T00:00:00Z", "kind": "MemberFailed", "run": "r1",
            "stage": "s", "group": "g", "member": "m1", "operationId": "r1/m1",
            "error": {"code": "UpgradeFailed", "message": "drain"}});
        let ce = cloud_event(&row(7, "r1", "MemberFailed", data), &origin(None));
        assert_eq!(ce["type"], "io.waverun.MemberFailed");
        assert_eq!(ce["subject"], "/updateRuns/r1");
        assert_eq!(ce["severity"], "error");
        assert_eq!(ce["data"]["member"], "m1");
        let fleet = cloud_event(
            &row(
                8,
                "",
                "ActionRejected",
                json!({"at": "2026-12-07T00:00:00Z", "kind": "ActionRejected"}),
            ),
            &origin(None),
        );
        assert_eq!(fleet["subject"], "/");
        assert_eq!(fleet["severity"], "warning");
        assert!(fleet["data"]["links"].as_object().unwrap().is_empty());
    }

    #[test]
    fn every_kind_has_a_type_a_severity_and_is_known_by_name() {
        let kinds = [
            "RunCreated",
            "RunGenerated",
            "RunUpdated",
            "RunDeleted",
            "RunStarted",
            "RunResumed",
            "RunCompleted",
            "RunFailed",
            "RunStopping",
            "RunStopped",
            "RunSkipped",
            "StageStarted",
            "StageCompleted",
            "StageFailed",
            "StageSkipped",
            "StageStopped",
            "GroupStarted",
            "GroupCompleted",
            "GroupFailed",
            "GroupSkipped",
            "GroupStopped",
            "GateCreated",
            "GateCompleted",
            "GateSkipped",
            "AfterStageWaitStarted",
            "AfterStageWaitCompleted",
            "AfterStageWaitSkipped",
            "MemberPending",
            "MemberStarted",
            "MemberCompleted",
            "MemberFailed",
            "MemberSkipped",
            "ActionRejected",
            "GateFailed",
            "CheckStarted",
            "CheckMeasured",
            "CheckCompleted",
        ];
        for k in kinds {
            assert!(kind_of(k).is_some(), "{k}");
            let t = cloud_type(k);
            assert!(
                t.starts_with(WAVERUN_TYPE_PREFIX) || t.starts_with("Microsoft."),
                "{k}: {t}"
            );
        }
        assert!(kind_of("Exploded").is_none());
        assert!(Severity::Info < Severity::Warning && Severity::Warning < Severity::Error);
    }
}
