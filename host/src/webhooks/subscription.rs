//! An event subscription as the API takes it (`/eventSubscriptions/{name}`), shaped like Azure
//! Event Grid's event subscriptions where they mean the same thing (`destination` of
//! `endpointType: WebHook`, `filter.includedEventTypes`, `eventDeliverySchema`,
//! `retryPolicy.eventTimeToLiveInMinutes`), with waverun's filters beside them, and which
//! events it receives ([`Subscription::matches`]).
//!
//! ```json
//! {"properties": {
//!   "destination": {"endpointType": "WebHook",
//!                   "properties": {"endpointUrl": "https://hooks.example.com/waverun"}},
//!   "filter": {"includedEventTypes": ["GateCreated", "RunFailed"],
//!              "runs": ["weekly"], "stages": ["prod"], "minimumSeverity": "warning"},
//!   "eventDeliverySchema": "CloudEventSchemaV1_0",
//!   "retryPolicy": {"eventTimeToLiveInMinutes": 1440},
//!   "signing": {"secretRef": "pager"},
//!   "enabled": true}}
//! ```
//!
//! The signing secret is never part of the body: without `signing.secretRef` (a secret named
//! in the daemon's configuration) the daemon generates one when the subscription is created
//! and shows it once, in that answer.

use super::cloudevent::{self, Severity};
use super::destination::{self, AddressPolicy, Endpoint};
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::Value;

/// The delivery schema, the only one: CloudEvents 1.0 (Event Grid's name for it).
pub const CLOUD_EVENTS_SCHEMA: &str = "CloudEventSchemaV1_0";
/// `retryPolicy.eventTimeToLiveInMinutes` when none is given, and its largest value (a day,
/// as Event Grid's).
pub const MAX_TTL_MINUTES: u32 = 1440;
/// The most filter entries of each kind.
pub const MAX_FILTER_ENTRIES: usize = 100;

/// A subscription, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Subscription {
    /// Where deliveries go.
    pub endpoint: Endpoint,
    /// Event kinds it receives (empty: every kind).
    pub kinds: Vec<String>,
    /// Runs it receives events of (empty: every run, and the fleet's own events).
    pub runs: Vec<String>,
    /// Stages it receives events of (empty: every stage, and events of no stage).
    pub stages: Vec<String>,
    /// The least severity it receives.
    pub minimum_severity: Severity,
    /// An event not delivered within this many minutes is dead-lettered.
    pub ttl_minutes: u32,
    /// The secret named in the configuration, if it signs with one.
    pub secret_ref: Option<String>,
    /// Whether it delivers.
    pub enabled: bool,
}

#[allow(dead_code)]
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Resource {
    #[serde(default)]
    id: Option<IgnoredAny>,
    #[serde(default)]
    name: Option<IgnoredAny>,
    #[serde(default, rename = "type")]
    kind: Option<IgnoredAny>,
    #[serde(default)]
    system_data: Option<IgnoredAny>,
    #[serde(default)]
    e_tag: Option<IgnoredAny>,
    properties: Properties,
}

#[allow(dead_code)]
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Properties {
    destination: DestinationBody,
    #[serde(default)]
    filter: FilterBody,
    #[serde(default)]
    event_delivery_schema: Option<String>,
    #[serde(default)]
    retry_policy: RetryPolicyBody,
    #[serde(default)]
    signing: SigningBody,
    #[serde(default, deserialize_with = "strict_opt_bool")]
    enabled: Option<bool>,
    #[serde(default)]
    provisioning_state: Option<IgnoredAny>,
    /// Read-only (what reads add): ignored.
    #[serde(default)]
    status: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DestinationBody {
    endpoint_type: String,
    properties: EndpointBody,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EndpointBody {
    endpoint_url: String,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FilterBody {
    #[serde(default)]
    included_event_types: Vec<String>,
    #[serde(default)]
    runs: Vec<String>,
    #[serde(default)]
    stages: Vec<String>,
    #[serde(default)]
    minimum_severity: Option<Severity>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RetryPolicyBody {
    #[serde(default)]
    event_time_to_live_in_minutes: Option<u32>,
}

#[allow(dead_code)]
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SigningBody {
    #[serde(default)]
    secret_ref: Option<String>,
    /// Read-only (what reads show of the subscription's own secrets): ignored.
    #[serde(default)]
    secrets: Option<IgnoredAny>,
}

fn strict_opt_bool<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    waverun_core::document::strict_bool(d).map(Some)
}

/// Why a body is not a subscription: the field (a path under the body) and the rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    /// `properties.filter.includedEventTypes[1]`, …
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> Invalid {
    Invalid {
        field: field.into(),
        message: message.into(),
    }
}

/// The subscription a PUT body (JSON) describes; `secrets` are the names of the secrets the
/// configuration holds.
pub fn parse(body: &str, policy: AddressPolicy, secrets: &[&str]) -> Result<Subscription, Invalid> {
    // The documents' rules (closed schema, strict types, the unknown field named in the path).
    let r: Resource =
        waverun_core::document::from_json_str(body).map_err(|e| match e.fields.first() {
            Some(f) => invalid(f.path.clone(), f.message.clone()),
            None => invalid("", e.message),
        })?;
    let p = r.properties;
    let base = "properties";
    if !p.destination.endpoint_type.eq_ignore_ascii_case("WebHook") {
        return Err(invalid(
            format!("{base}.destination.endpointType"),
            format!(
                "{:?}: the one endpoint type is \"WebHook\"",
                p.destination.endpoint_type
            ),
        ));
    }
    let endpoint = destination::check_url(&p.destination.properties.endpoint_url, policy)
        .map_err(|e| invalid(format!("{base}.destination.properties.endpointUrl"), e))?;
    if let Some(s) = &p.event_delivery_schema {
        if s != CLOUD_EVENTS_SCHEMA {
            return Err(invalid(
                format!("{base}.eventDeliverySchema"),
                format!("{s:?}: deliveries are CloudEvents 1.0 ({CLOUD_EVENTS_SCHEMA:?})"),
            ));
        }
    }
    let f = p.filter;
    let fbase = format!("{base}.filter");
    let mut kinds = Vec::new();
    for (i, t) in f.included_event_types.iter().enumerate() {
        let kind = kind_named(t).ok_or_else(|| {
            invalid(
                format!("{fbase}.includedEventTypes[{i}]"),
                format!(
                    "{t:?} is not an event type: give a kind (GateCreated, RunFailed, …) or its \
                     CloudEvents type (io.waverun.RunFailed, \
                     Microsoft.ResourceNotifications.AKSResources.FleetGateCreated)"
                ),
            )
        })?;
        for k in kind {
            if !kinds.contains(&k) {
                kinds.push(k);
            }
        }
    }
    for (name, list) in [
        ("includedEventTypes", &f.included_event_types),
        ("runs", &f.runs),
        ("stages", &f.stages),
    ] {
        if list.len() > MAX_FILTER_ENTRIES {
            return Err(invalid(
                format!("{fbase}.{name}"),
                format!("{} entries; at most {MAX_FILTER_ENTRIES}", list.len()),
            ));
        }
        if let Some(i) = list.iter().position(|v| v.trim().is_empty()) {
            return Err(invalid(format!("{fbase}.{name}[{i}]"), "is empty"));
        }
    }
    let ttl = p
        .retry_policy
        .event_time_to_live_in_minutes
        .unwrap_or(MAX_TTL_MINUTES);
    if !(1..=MAX_TTL_MINUTES).contains(&ttl) {
        return Err(invalid(
            format!("{base}.retryPolicy.eventTimeToLiveInMinutes"),
            format!("{ttl} is outside 1 to {MAX_TTL_MINUTES} minutes"),
        ));
    }
    if let Some(r) = &p.signing.secret_ref {
        if !secrets.contains(&r.as_str()) {
            return Err(invalid(
                format!("{base}.signing.secretRef"),
                format!(
                    "{r:?} is not a secret of the daemon's configuration (webhooks.secrets: {})",
                    if secrets.is_empty() {
                        "none".to_string()
                    } else {
                        secrets.join(", ")
                    }
                ),
            ));
        }
    }
    Ok(Subscription {
        endpoint,
        kinds,
        runs: f.runs,
        stages: f.stages,
        minimum_severity: f.minimum_severity.unwrap_or(Severity::Info),
        ttl_minutes: ttl,
        secret_ref: p.signing.secret_ref,
        enabled: p.enabled.unwrap_or(true),
    })
}

/// The kinds an entry of `includedEventTypes` names: a kind, waverun's type of one, or one of
/// Azure's gate types (Updated stands for each way a gate leaves Pending).
fn kind_named(t: &str) -> Option<Vec<String>> {
    if t == cloudevent::AZURE_GATE_CREATED {
        return Some(vec!["GateCreated".into()]);
    }
    if t == cloudevent::AZURE_GATE_UPDATED {
        return Some(
            ["GateCompleted", "GateSkipped", "GateFailed"]
                .map(String::from)
                .to_vec(),
        );
    }
    let k = t.strip_prefix(cloudevent::WAVERUN_TYPE_PREFIX).unwrap_or(t);
    cloudevent::kind_of(k).map(|_| vec![k.to_string()])
}

impl Subscription {
    /// Whether the event of `kind` (the event as stored) is one this subscription receives.
    pub fn matches(&self, kind: &str, run: &str, event: &Value) -> bool {
        if !self.kinds.is_empty() && !self.kinds.iter().any(|k| k == kind) {
            return false;
        }
        if !self.runs.is_empty() && !self.runs.iter().any(|r| r == run) {
            return false;
        }
        if !self.stages.is_empty() {
            let stage = event["stage"].as_str().unwrap_or_default();
            if !self.stages.iter().any(|s| s == stage) {
                return false;
            }
        }
        cloudevent::severity(kind, event) >= self.minimum_severity
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const LOOPBACK: AddressPolicy = AddressPolicy {
        allow_loopback: true,
    };

    fn body(props: Value) -> String {
        let mut p = json!({"destination": {"endpointType": "WebHook",
            "properties": {"endpointUrl": "https://hooks.example.com/in"}}});
        for (k, v) in props.as_object().unwrap() {
            p[k] = v.clone();
        }
        json!({ "properties": p }).to_string()
    }

    #[test]
    fn the_smallest_subscription_takes_every_event_for_a_day() {
        let s = parse(&body(json!({})), AddressPolicy::default(), &[]).unwrap();
        assert_eq!(s.endpoint.host, "hooks.example.com");
        assert!(s.kinds.is_empty() && s.runs.is_empty() && s.stages.is_empty());
        assert_eq!(s.minimum_severity, Severity::Info);
        assert_eq!(s.ttl_minutes, 1440);
        assert!(s.enabled);
        assert_eq!(s.secret_ref, None);
        assert!(s.matches("MemberStarted", "r", &json!({"stage": "s"})));
        assert!(s.matches("ActionRejected", "", &json!({})));
    }

    #[test]
    fn filters_take_kinds_or_their_types_runs_stages_and_a_severity() {
        let s = parse(
            &body(json!({"filter": {
                "includedEventTypes": ["RunFailed", "io.waverun.MemberFailed",
                    "Microsoft.ResourceNotifications.AKSResources.FleetGateCreated",
                    "Microsoft.ResourceNotifications.AKSResources.FleetGateUpdated"],
                "runs": ["weekly"], "stages": ["prod"], "minimumSeverity": "warning"},
                "retryPolicy": {"eventTimeToLiveInMinutes": 30},
                "signing": {"secretRef": "pager"}, "enabled": false,
                "eventDeliverySchema": "CloudEventSchemaV1_0"})),
            AddressPolicy::default(),
            &["pager"],
        )
        .unwrap();
        assert_eq!(
            s.kinds,
            [
                "RunFailed",
                "MemberFailed",
                "GateCreated",
                "GateCompleted",
                "GateSkipped",
                "GateFailed"
            ]
        );
        assert_eq!((s.ttl_minutes, s.enabled), (30, false));
        assert_eq!(s.secret_ref.as_deref(), Some("pager"));
        let approval = json!({"stage": "prod", "gateType": "Approval"});
        assert!(s.matches("GateCreated", "weekly", &approval));
        assert!(!s.matches("GateCreated", "other", &approval), "another run");
        assert!(
            !s.matches(
                "GateCreated",
                "weekly",
                &json!({"stage": "canary", "gateType": "Approval"})
            ),
            "another stage"
        );
        assert!(
            !s.matches(
                "GateCreated",
                "weekly",
                &json!({"stage": "prod", "gateType": "ScheduledStart"})
            ),
            "below the severity"
        );
        assert!(!s.matches("RunFailed", "weekly", &json!({})), "no stage");
        assert!(s.matches("MemberFailed", "weekly", &json!({"stage": "prod"})));
        assert!(!s.matches("MemberStarted", "weekly", &json!({"stage": "prod"})));
    }

    #[test]
    fn bad_bodies_name_the_field_and_the_rule() {
        let cases = [
            (
                json!({"filter": {"includedEventTypes": ["RunFailed", "Exploded"]}}),
                "properties.filter.includedEventTypes[1]",
                "not an event type",
            ),
            (
                json!({"filter": {"minimumSeverity": "loud"}}),
                "properties.filter.minimumSeverity",
                "use one of info, warning, error",
            ),
            (
                json!({"filter": {"runs": [""]}}),
                "properties.filter.runs[0]",
                "is empty",
            ),
            (
                json!({"filter": {"colour": "red"}}),
                "properties.filter.colour",
                "unknown field",
            ),
            (
                json!({"retryPolicy": {"eventTimeToLiveInMinutes": 0}}),
                "properties.retryPolicy.eventTimeToLiveInMinutes",
                "outside 1 to 1440",
            ),
            (
                json!({"retryPolicy": {"eventTimeToLiveInMinutes": 1441}}),
                "properties.retryPolicy.eventTimeToLiveInMinutes",
                "outside 1 to 1440",
            ),
            (
                json!({"retryPolicy": {"maxDeliveryAttempts": 3}}),
                "properties.retryPolicy.maxDeliveryAttempts",
                "unknown field",
            ),
            (
                json!({"eventDeliverySchema": "EventGridSchema"}),
                "properties.eventDeliverySchema",
                "CloudEvents 1.0",
            ),
            (
                json!({"signing": {"secretRef": "nope"}}),
                "properties.signing.secretRef",
                "webhooks.secrets: pager",
            ),
            (
                json!({"signing": {"secret": "whsec_x"}}),
                "properties.signing.secret",
                "unknown field",
            ),
            (json!({"enabled": "yes"}), "properties.enabled", ""),
            (
                json!({"destination": {"endpointType": "EventHub", "properties": {"endpointUrl": "https://x.example"}}}),
                "properties.destination.endpointType",
                "\"WebHook\"",
            ),
            (
                json!({"destination": {"endpointType": "WebHook", "properties": {"endpointUrl": "https://169.254.169.254/"}}}),
                "properties.destination.properties.endpointUrl",
                "metadata",
            ),
            (
                json!({"destination": {"endpointType": "WebHook", "properties": {"endpointUrl": "http://hooks.example.com/"}}}),
                "properties.destination.properties.endpointUrl",
                "plain http",
            ),
        ];
        for (props, field, rule) in cases {
            let e = parse(&body(props.clone()), LOOPBACK, &["pager"]).unwrap_err();
            assert_eq!(e.field, field, "{props}: {e}");
            assert!(e.message.contains(rule), "{props}: {e}");
        }
        let e = parse("{\"properties\": {}}", LOOPBACK, &[]).unwrap_err();
        assert_eq!(e.field, "properties.destination", "{e}");
        assert!(e.message.contains("is required"), "{e}");
        let e = parse("[]", LOOPBACK, &[]).unwrap_err();
        assert_eq!(e.field, "");
    }
}
