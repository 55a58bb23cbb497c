//! # waverun-plugin: the engine as a WebAssembly plugin (`bindings/ABI.md`, ABI version 2)
//!
//! `waverun-core`, unchanged, behind a thin driver that turns the engine's outputs into host
//! calls and host answers into engine inputs. Built for `wasm32-unknown-unknown` it is a plain
//! core module whose only imports are the host's clock, cluster calls, health-check
//! measurements, persistence and log (module `waverun_host_v2`, listed in
//! `bindings/plugin/imports.txt`).
//!
//! The logic lives in [`Guest`], a plain struct generic over [`HostImports`] (the imports as a
//! trait), so it is tested natively with an in-memory host. The `extern "C"` glue (exports,
//! imports, buffers) is a thin layer compiled only for `wasm32` (module `wasm`).
//!
//! What the driver adds to the engine:
//! - **JSON envelopes** (`{"v":1,"ok":true,"result":...}` / `{"v":1,"ok":false,"error":...}`)
//!   and the ABI's error codes ([`Code`]); arguments are read field by field straight from their
//!   bytes (`RawValue`), never through an intermediate JSON tree;
//! - **pure requests**, answered before `waverun_init` and journaled nowhere: `ping`, and
//!   `simulate` (a scenario through the engine and the simulated fleet inside the guest, the
//!   report byte for byte the native simulator's);
//! - **write-ahead journaling**: every state-changing input (`command` requests,
//!   `waverun_deliver`, `waverun_wake`) is appended with `journal_append` *before* it is
//!   applied; if the host does not confirm durability, the input is refused with
//!   `PersistenceFailed` and nothing changes;
//! - **snapshots** every [`SNAPSHOT_EVERY`] journal records once the journal since the last
//!   snapshot is at least as large as that snapshot (amortised cost), and on request;
//! - **restart**: `waverun_init` restores the snapshot, replays the journal without cluster calls
//!   and then asks the host (`cluster_query`) about every operation still in flight, submitting
//!   again those the host does not know, and submits every measurement still awaited again
//!   (`check_submit`: the host treats a known id as the same measurement);
//! - **refused submissions**: when `cluster_submit` refuses an operation the driver journals and
//!   applies an `upgradeFailed` observation for it; the member's error is reported with code
//!   `ClusterSubmitFailed`;
//! - **refused measurements**: when `check_submit` refuses a measurement the driver journals
//!   and applies an `Error` measurement (`checkMeasured`) for it, so a replay decides the same.
#![deny(unsafe_code)]
#![warn(missing_docs)]

use chrono::DateTime;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;
use std::collections::BTreeMap;
use waverun_core::document::{self, Document, Format};
use waverun_core::drive::{self, Surroundings};
use waverun_core::selector::LabelSelector;
use waverun_core::sim::{simulate_owned, Scenario};
use waverun_core::{
    CheckRequest, Command, Engine, Error, ErrorCode, Event, Fact, FieldError, HostCommand, Input,
    Observation, Output, RunStatus, Timestamp, UpgradeOperation,
};
// Byte comparisons a word at a time on wasm32 (bindings/wasm-mem): linked for its `memcmp`.
use waverun_wasm_mem as _;

#[cfg(target_arch = "wasm32")]
mod wasm;

/// The ABI version this guest implements (`waverun_abi_version`).
pub const ABI_VERSION: i32 = 2;

/// A snapshot is written after this many journal records.
pub const SNAPSHOT_EVERY: u64 = 1000;

/// How the member error of an operation refused by `cluster_submit` begins. The engine records
/// it as `UpgradeFailed`; the driver reports it as `ClusterSubmitFailed`.
pub const SUBMIT_REFUSED: &str = "cluster_submit refused the operation";

/// How the message of a measurement refused by `check_submit` begins (its verdict is `Error`).
pub const CHECK_REFUSED: &str = "check_submit refused the measurement";

/// What `storage_read` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StorageKind {
    /// The stored snapshot (`kind` 0).
    Snapshot = 0,
    /// The journal records after the snapshot, newline-separated (`kind` 1).
    Journal = 1,
}

/// Log levels of the `log` import, as the guest passes them (the runtime's side:
/// `PluginLogLevel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum GuestLogLevel {
    /// 0
    Trace = 0,
    /// 1
    Debug = 1,
    /// 2
    Info = 2,
    /// 3
    Warn = 3,
    /// 4
    Error = 4,
}

/// The host as the guest sees it: the imports of module `waverun_host_v2`, one method each (ABI
/// section 3).
pub trait HostImports {
    /// `clock_now_ms`: milliseconds since the Unix epoch.
    fn clock_now_ms(&mut self) -> i64;
    /// `cluster_submit`: an *UpgradeOperation* (JSON); `0` = accepted.
    fn cluster_submit(&mut self, operation: &str) -> i32;
    /// `cluster_query`: `{"operationId": ...}`; `0` = known, `1` = unknown, else error.
    fn cluster_query(&mut self, query: &str) -> i32;
    /// `check_submit`: a *CheckRequest* (JSON); `0` = accepted (the result is delivered later
    /// as a `checkMeasured` observation).
    fn check_submit(&mut self, request: &str) -> i32;
    /// `journal_append`: one journal record; `0` = durable.
    fn journal_append(&mut self, record: &str) -> i32;
    /// `snapshot_write`: replace the stored snapshot; `0` = durable.
    fn snapshot_write(&mut self, snapshot: &str) -> i32;
    /// `storage_read`, whole: `Ok(None)` when there is nothing, `Err(code)` when the host
    /// answered with a negative value other than `-1`.
    fn storage_read(&mut self, kind: StorageKind) -> Result<Option<Vec<u8>>, i32>;
    /// `log`.
    fn log(&mut self, level: GuestLogLevel, message: &str);
}

/// The error codes of ABI section 5.2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    /// An engine error code.
    Engine(ErrorCode),
    /// The argument is not a JSON envelope of this ABI.
    BadEnvelope,
    /// The envelope's `v` is not 1.
    UnsupportedVersion,
    /// A call came before `waverun_init`.
    NotInitialized,
    /// `journal_append` did not confirm durability; the input was not applied.
    PersistenceFailed,
    /// `cluster_submit` refused the operation (member status).
    ClusterSubmitFailed,
}

impl Code {
    /// The code as it appears in envelopes.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Engine(c) => c.as_str(),
            Code::BadEnvelope => "BadEnvelope",
            Code::UnsupportedVersion => "UnsupportedVersion",
            Code::NotInitialized => "NotInitialized",
            Code::PersistenceFailed => "PersistenceFailed",
            Code::ClusterSubmitFailed => "ClusterSubmitFailed",
        }
    }
}

/// A refusal, as the error envelope carries it.
#[derive(Clone, Debug)]
pub struct AbiError {
    /// Code.
    pub code: Code,
    /// For humans.
    pub message: String,
    /// Field errors (the first one's path is the envelope's `path`).
    pub fields: Vec<FieldError>,
    /// Events the engine emitted before it refused (timers due at `now` fire first).
    pub events: Vec<Event>,
}

impl AbiError {
    fn new(code: Code, message: impl Into<String>) -> AbiError {
        AbiError {
            code,
            message: message.into(),
            fields: Vec::new(),
            events: Vec::new(),
        }
    }

    fn envelope(&self) -> String {
        let mut error = serde_json::Map::new();
        error.insert("code".into(), self.code.as_str().into());
        error.insert("message".into(), self.message.clone().into());
        if let Some(f) = self.fields.first() {
            error.insert("path".into(), f.path.clone().into());
        }
        if self.fields.len() > 1 {
            let fields = serde_json::to_value(&self.fields).expect("fields serialise");
            error.insert("fields".into(), fields);
        }
        let error = Value::Object(error);
        if self.events.is_empty() {
            format!("{{\"v\":1,\"ok\":false,\"error\":{error}}}")
        } else {
            // Events as the engine's serde writes them (struct field order), not via a Value.
            let events = serde_json::to_string(&self.events).expect("events serialise");
            format!("{{\"v\":1,\"ok\":false,\"error\":{error},\"events\":{events}}}")
        }
    }
}

impl From<Error> for AbiError {
    fn from(e: Error) -> AbiError {
        AbiError {
            code: Code::Engine(e.code),
            message: e.message,
            fields: e.fields,
            events: Vec::new(),
        }
    }
}

fn bad(message: impl Into<String>) -> AbiError {
    AbiError::new(Code::BadEnvelope, message)
}

fn invalid_snapshot(message: impl Into<String>) -> AbiError {
    AbiError::new(Code::Engine(ErrorCode::InvalidSnapshot), message)
}

/// One journal record (ABI section 7).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// 1, 2, 3, ...
    pub seq: u64,
    /// The instant the input was applied at.
    pub now: Timestamp,
    /// The input (`{"command": Command}`, `{"observation": Observation}` or `"timeout"`: the
    /// core's serde form, which is the ABI's wire form).
    pub input: Input,
}

/// A journal record as written: borrows the input instead of cloning it.
#[derive(Serialize)]
struct RecordRef<'a> {
    seq: u64,
    now: Timestamp,
    input: &'a Input,
}

/// The stored snapshot document (ABI section 7).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SnapshotDoc {
    v: u32,
    journal_seq: u64,
    engine: Box<RawValue>,
    /// The payloads of the operations in flight, to submit them again after a restart.
    #[serde(default)]
    operations: Vec<UpgradeOperation>,
    /// The requests of the measurements in flight, to submit them again after a restart.
    #[serde(default)]
    measurements: Vec<CheckRequest>,
}

/// The initialised state.
struct Active {
    engine: Engine,
    /// The last journal record's `seq`.
    seq: u64,
    /// `seq` at the last snapshot (written or attempted).
    snapshot_seq: u64,
    /// Bytes journaled since the last snapshot.
    journal_bytes: u64,
    /// Size of the last snapshot written (0 before the first).
    snapshot_bytes: u64,
    /// Length of the last engine state written or read: the capacity a buffer for the next
    /// one starts with, so that it is written once without growing (see `state_buffer`).
    state_bytes: usize,
    /// Payloads of the operations in flight, by id.
    operations: BTreeMap<String, UpgradeOperation>,
    /// Requests of the measurements in flight, by measurement id.
    measurements: BTreeMap<String, CheckRequest>,
}

impl Active {
    /// The engine and its surroundings inside the plugin, for [`drive`]: `live` submits what
    /// the engine starts (a replay does not).
    fn surroundings<'a, H: HostImports>(
        &'a mut self,
        host: &'a mut H,
        live: bool,
    ) -> (&'a mut Engine, GuestSurroundings<'a, H>) {
        let around = GuestSurroundings {
            host,
            seq: &mut self.seq,
            journal_bytes: &mut self.journal_bytes,
            operations: &mut self.operations,
            measurements: &mut self.measurements,
            events: Vec::new(),
            live,
        };
        (&mut self.engine, around)
    }
}

/// The engine's surroundings inside the plugin: events are kept for the call's answer,
/// operations and measurements remembered and (when live) submitted through `cluster_submit`
/// and `check_submit`; a submission the host refuses is answered at once with the upgrade's
/// failure or an `Error` measurement, journaled like any input. If the journal refuses that,
/// the operation or measurement stays in flight: after a restart it is submitted again.
struct GuestSurroundings<'a, H: HostImports> {
    host: &'a mut H,
    seq: &'a mut u64,
    journal_bytes: &'a mut u64,
    operations: &'a mut BTreeMap<String, UpgradeOperation>,
    measurements: &'a mut BTreeMap<String, CheckRequest>,
    events: Vec<Event>,
    live: bool,
}

impl<H: HostImports> Surroundings for GuestSurroundings<'_, H> {
    fn output(&mut self, _now: Timestamp, output: Output, answers: &mut Vec<Input>) {
        match output {
            Output::Event(ev) => self.events.push(ev),
            Output::Command(HostCommand::StartUpgrade(op)) => {
                let json = self.live.then(|| submit_json(&op));
                let id = op.operation_id.clone();
                self.operations.insert(id.clone(), op);
                if let Some(json) = json {
                    let rc = self.host.cluster_submit(&json);
                    if rc != 0 {
                        answers.push(refusal(&id, rc));
                    }
                }
            }
            Output::Command(HostCommand::MeasureCheck(req)) => {
                let json = self.live.then(|| check_json(&req));
                let id = req.measurement_id.clone();
                self.measurements.insert(id.clone(), req);
                if let Some(json) = json {
                    let rc = self.host.check_submit(&json);
                    if rc != 0 {
                        answers.push(check_refusal(&id, rc));
                    }
                }
            }
        }
    }

    fn admit(&mut self, now: Timestamp, answer: &Input) -> bool {
        let Err(e) = journal(self.host, self.seq, self.journal_bytes, now, answer) else {
            return true;
        };
        let id = match answer {
            Input::Observation(Observation::UpgradeFailed { operation_id, .. }) => operation_id,
            Input::Observation(Observation::CheckMeasured { measurement_id, .. }) => measurement_id,
            _ => "?",
        };
        self.host.log(
            GuestLogLevel::Error,
            &format!("operation or measurement {id} was refused by the host and its failure could not be journaled ({}); it stays in flight until a restart", e.message),
        );
        false
    }
}

/// The failure of an upgrade whose submission the host refused with `rc`.
fn refusal(operation_id: &str, rc: i32) -> Input {
    Input::Observation(Observation::UpgradeFailed {
        operation_id: operation_id.to_string(),
        message: format!("{SUBMIT_REFUSED} (the host answered {rc})"),
    })
}

/// The `Error` measurement of a check whose submission the host refused with `rc`.
fn check_refusal(measurement_id: &str, rc: i32) -> Input {
    Input::Observation(Observation::CheckMeasured {
        measurement_id: measurement_id.to_string(),
        values: None,
        verdict: Some(waverun_core::health::Verdict::Error),
        message: Some(format!("{CHECK_REFUSED} (the host answered {rc})")),
    })
}

/// Appends `input` (at `now`) to the host's journal as record `seq + 1`; only then may it be
/// applied.
fn journal<H: HostImports>(
    host: &mut H,
    seq: &mut u64,
    journal_bytes: &mut u64,
    now: Timestamp,
    input: &Input,
) -> Result<(), AbiError> {
    let record = RecordRef {
        seq: *seq + 1,
        now,
        input,
    };
    let json = serde_json::to_string(&record).expect("record serialises");
    let rc = host.journal_append(&json);
    if rc != 0 {
        return Err(AbiError::new(
            Code::PersistenceFailed,
            format!("journal_append returned {rc}: the input was not applied"),
        ));
    }
    *seq += 1;
    *journal_bytes += json.len() as u64;
    Ok(())
}

/// The plugin's guest side: the engine, its journal position and the host's imports. (The
/// runtime's side of the same boundary is `waverun_host::runtime`: `PluginRuntime`,
/// `PluginModule`, `PluginInstance`, and the `PluginHost` it implements the imports with.)
pub struct Guest<H: HostImports> {
    host: H,
    active: Option<Active>,
}

type Envelope = Result<String, AbiError>;

/// A buffer for an answer holding the engine state, whose last one was `last` bytes long: that
/// much and an eighth more, so that the state is written once without the buffer doubling
/// (64 MB and 128 MB held at once for a 77 MB state), plus room for the envelope around it.
fn state_buffer(last: usize) -> String {
    String::with_capacity(last + last / 8 + 4096)
}

/// The success envelope around `result`, written in `result`'s own buffer: an answer of tens of
/// megabytes (an engine state, a report) is not copied into a second one.
fn ok(result: String) -> String {
    const HEAD: &str = "{\"v\":1,\"ok\":true,\"result\":";
    let mut out = result;
    out.reserve_exact(HEAD.len() + 1);
    out.insert_str(0, HEAD);
    out.push('}');
    out
}

fn envelope(r: Envelope) -> String {
    match r {
        Ok(result) => ok(result),
        Err(e) => e.envelope(),
    }
}

fn events_json(events: &[Event]) -> String {
    format!(
        "{{\"events\":{}}}",
        serde_json::to_string(events).expect("events serialise")
    )
}

/// An argument envelope (`{"v": 1, ...}`) with its payloads still unparsed: each export reads
/// the field it expects, straight from the argument's bytes (no intermediate JSON tree, which
/// matters for a 10,000-member scenario or command).
#[derive(Deserialize)]
struct ArgEnvelope<'a> {
    #[serde(borrow, default)]
    v: Option<&'a RawValue>,
    #[serde(borrow, default)]
    request: Option<&'a RawValue>,
    #[serde(borrow, default)]
    observation: Option<&'a RawValue>,
    #[serde(borrow, default)]
    run: Option<&'a RawValue>,
}

/// A request's envelope with its request's fields, read in one pass ([`parse_request`]). The
/// envelope's other fields are read as [`ArgEnvelope`] reads them, so that what it refuses (a
/// key twice) this refuses too.
#[derive(Deserialize)]
struct RequestEnvelope<'a> {
    #[serde(borrow, default)]
    v: Option<&'a RawValue>,
    #[serde(borrow, default)]
    request: Option<RequestFields<'a>>,
    #[serde(borrow, default, rename = "observation")]
    _observation: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "run")]
    _run: Option<&'a RawValue>,
}

/// The fields of a request (`{"type": ..., ...}`), unparsed.
#[derive(Deserialize)]
struct RequestFields<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<&'a RawValue>,
    #[serde(borrow, default)]
    command: Option<&'a RawValue>,
    #[serde(borrow, default)]
    run: Option<&'a RawValue>,
    #[serde(borrow, default)]
    scenario: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "upgradeMinutes")]
    upgrade_minutes: Option<&'a RawValue>,
    #[serde(borrow, default)]
    profile: Option<&'a RawValue>,
    #[serde(borrow, default)]
    text: Option<&'a RawValue>,
    #[serde(borrow, default)]
    format: Option<&'a RawValue>,
    #[serde(borrow, default)]
    selector: Option<&'a RawValue>,
    #[serde(borrow, default)]
    members: Option<&'a RawValue>,
    #[serde(borrow, default)]
    maintenance: Option<&'a RawValue>,
    #[serde(borrow, default)]
    from: Option<&'a RawValue>,
    #[serde(borrow, default)]
    until: Option<&'a RawValue>,
    #[serde(borrow, default)]
    snapshot: Option<&'a RawValue>,
    #[serde(borrow, default)]
    at: Option<&'a RawValue>,
    #[serde(borrow, default)]
    runs: Option<&'a RawValue>,
}

/// Parses an envelope: a JSON object with `"v": 1`.
fn parse_envelope(bytes: &[u8]) -> Result<ArgEnvelope<'_>, AbiError> {
    let text = std::str::from_utf8(bytes).map_err(|e| bad(format!("not UTF-8: {e}")))?;
    let env: ArgEnvelope = serde_json::from_str(text).map_err(|e| {
        if e.is_data() {
            bad("the envelope must be a JSON object")
        } else {
            bad(format!("not valid JSON: {e}"))
        }
    })?;
    check_version(env.v)?;
    Ok(env)
}

/// An envelope's `v`: present, and 1.
fn check_version(v: Option<&RawValue>) -> Result<(), AbiError> {
    match v {
        None => Err(bad("the envelope has no \"v\"")),
        Some(v) if serde_json::from_str::<u64>(v.get()).ok() == Some(1) => Ok(()),
        Some(v) => Err(AbiError::new(
            Code::UnsupportedVersion,
            format!(
                "envelope version {} is not supported; this guest implements version 1",
                v.get()
            ),
        )),
    }
}

/// The request of a `waverun_request` argument: in one pass over its bytes when it is well
/// formed (a simulation's scenario is scanned once, not twice, before it is read), otherwise
/// the envelope first and then its request, whose errors say which of the two is wrong.
fn parse_request(bytes: &[u8]) -> Result<RequestFields<'_>, AbiError> {
    let one_pass = std::str::from_utf8(bytes)
        .ok()
        .and_then(|text| serde_json::from_str::<RequestEnvelope>(text).ok());
    let no_request = || bad("the envelope has no \"request\" object");
    if let Some(env) = one_pass {
        check_version(env.v)?;
        return env.request.ok_or_else(no_request);
    }
    let env = parse_envelope(bytes)?;
    env.request
        .and_then(|r| serde_json::from_str(r.get()).ok())
        .ok_or_else(no_request)
}

/// A field of an envelope or request that must be present (and not `null`).
fn field<'a>(value: Option<&'a RawValue>, name: &str) -> Result<&'a RawValue, AbiError> {
    value
        .filter(|v| v.get() != "null")
        .ok_or_else(|| bad(format!("the envelope has no \"{name}\"")))
}

/// A field that must be a string.
fn string_field(value: Option<&RawValue>, name: &str) -> Result<String, AbiError> {
    serde_json::from_str(field(value, name)?.get())
        .map_err(|_| bad(format!("\"{name}\" must be a string")))
}

/// The document of a pure request: `text` in `format` (`"yaml"`, the default, or `"json"`).
fn text_fields(req: &RequestFields) -> Result<(String, Format), AbiError> {
    let text = string_field(req.text, "text")?;
    let format = match req.format {
        None => Format::Yaml,
        Some(f) => match serde_json::from_str::<String>(f.get()).as_deref() {
            Ok("yaml") => Format::Yaml,
            Ok("json") => Format::Json,
            _ => return Err(bad("\"format\" must be \"yaml\" or \"json\"")),
        },
    };
    Ok((text, format))
}

/// A scenario given as `scenario` (JSON) or as `text` (YAML or JSON, read as the CLI reads a
/// file).
fn scenario_field(req: &RequestFields) -> Result<Scenario, AbiError> {
    if req.scenario.is_some_and(|v| v.get() != "null") || req.text.is_none() {
        return Ok(Scenario::from_json(field(req.scenario, "scenario")?.get())?);
    }
    let (text, format) = text_fields(req)?;
    Ok(Scenario::from_text(&text, format)?)
}

/// `validate`: what `waverun validate -o json` prints for the document, plus which kind it is
/// and, for a strategy, the strategy as the API stores it.
fn validate_document(req: &RequestFields) -> Envelope {
    let (text, format) = text_fields(req)?;
    let (kind, strategy, (result, warnings)) = match document::document(&text, format) {
        Ok(doc) => {
            let kind = match &doc {
                Document::Scenario(_) => "scenario",
                Document::Strategy { .. } => "strategy",
            };
            let strategy = match &doc {
                Document::Strategy { strategy, .. } => {
                    Some(serde_json::to_value(strategy).expect("strategy serialises"))
                }
                Document::Scenario(_) => None,
            };
            (Some(kind), strategy, doc.validate())
        }
        Err(e) => (None, None, (Err(e), Vec::new())),
    };
    let errors = match &result {
        Ok(()) => Vec::new(),
        Err(e) if e.fields.is_empty() => vec![FieldError::new("", e.message.clone())],
        Err(e) => e.fields.clone(),
    };
    let mut out = serde_json::json!({
        "valid": result.is_ok(),
        "errors": errors,
        "warnings": warnings,
        "kind": kind,
    });
    if let Some(s) = strategy {
        out["strategy"] = s;
    }
    Ok(out.to_string())
}

/// `select`: which of `members` (`[{name, labels}]`) a label selector takes, with the
/// strategies' syntax; a selector that does not parse is `InvalidField` at `selector`.
fn select(req: &RequestFields) -> Envelope {
    #[derive(Deserialize)]
    struct Labelled {
        name: String,
        #[serde(default)]
        labels: BTreeMap<String, String>,
    }
    let selector = string_field(req.selector, "selector")?;
    let members: Vec<Labelled> = serde_json::from_str(field(req.members, "members")?.get())
        .map_err(|e| bad(format!("\"members\" must be [{{name, labels}}]: {e}")))?;
    let selector = LabelSelector::parse(&selector)
        .map_err(|rule| Error::invalid(vec![FieldError::new("selector", rule)]))?;
    let matches: Vec<&str> = members
        .iter()
        .filter(|m| selector.matches(&m.labels))
        .map(|m| m.name.as_str())
        .collect();
    Ok(serde_json::json!({ "matches": matches }).to_string())
}

/// The most intervals `windows` lists per window.
const MAX_WINDOW_INTERVALS: usize = 1000;

/// `windows`: when a member's maintenance windows (`maintenance`, the member model's form) are
/// open between `from` and `until` (RFC 3339): `{"kubernetes": [{start, end}], "nodeOS": [...]}`,
/// at most 1,000 intervals each, the first one cut at `from` when the window is open then.
fn windows(req: &RequestFields) -> Envelope {
    let maintenance: waverun_core::model::Maintenance =
        serde_json::from_str(field(req.maintenance, "maintenance")?.get())
            .map_err(|e| invalid_field("maintenance", e.to_string()))?;
    let time = |raw, name: &str| -> Result<Timestamp, AbiError> {
        let s = string_field(raw, name)?;
        waverun_core::time::parse_timestamp(&s).map_err(|rule| invalid_field(name, rule))
    };
    let (from, until) = (time(req.from, "from")?, time(req.until, "until")?);
    let mut out = serde_json::Map::new();
    for (key, window) in [
        ("kubernetes", &maintenance.kubernetes),
        ("nodeOS", &maintenance.node_os),
    ] {
        let Some(window) = window else { continue };
        let compiled = window
            .compile()
            .map_err(|rule| invalid_field(&format!("maintenance.{key}"), rule))?;
        let mut intervals = Vec::new();
        let mut t = from;
        while t < until && intervals.len() < MAX_WINDOW_INTERVALS {
            let Some(start) = compiled.next_opening(t).filter(|s| *s < until) else {
                break;
            };
            let end = compiled.current(start).map_or(until, |(_, end)| end);
            intervals.push(serde_json::json!({
                "start": waverun_core::time::fmt_time(start),
                "end": waverun_core::time::fmt_time(end),
            }));
            if end <= start {
                break;
            }
            t = end;
        }
        out.insert(key.to_string(), Value::Array(intervals));
    }
    Ok(Value::Object(out).to_string())
}

/// `upgradeMinutes` of a forecast: none, or a whole number of minutes from 1 to 10,080.
fn upgrade_minutes(req: &RequestFields) -> Result<Option<u32>, AbiError> {
    let Some(v) = req.upgrade_minutes.filter(|v| v.get() != "null") else {
        return Ok(None);
    };
    let m = serde_json::from_str::<u32>(v.get())
        .ok()
        .filter(|m| (1..=10_080).contains(m))
        .ok_or_else(|| {
            invalid_field(
                "upgradeMinutes",
                "must be a whole number of minutes, 1 to 10080",
            )
        })?;
    Ok(Some(m))
}

/// `forecastFrom`: the `forecast` of `run` in the engine state `snapshot` (the `snapshot` of a
/// `forecastState` answer: `{"formatVersion": 1, "engine": {...}}`), simulated forward from `at`
/// (RFC 3339) — the same answer as `forecast` made at `at` by the module that wrote the state.
/// Pure, so a browser runs it with the daemon's state. With `runs` (names) instead of `run`:
/// `{"forecasts": {name: forecast}, "missing": [names]}` from one restore of the state.
fn forecast_from(req: &RequestFields) -> Envelope {
    let snapshot = field(req.snapshot, "snapshot")?;
    let at = string_field(req.at, "at")?;
    let at = waverun_core::time::parse_timestamp(&at).map_err(|rule| invalid_field("at", rule))?;
    let minutes = upgrade_minutes(req)?;
    let runs = optional_names(req.runs, "runs", "run")?;
    let run = match runs {
        Some(_) => None,
        None => Some(string_field(req.run, "run")?),
    };
    let engine = Engine::restore(snapshot.get())?;
    // A forecast never starts before the state it starts from.
    let now = at.max(engine.now());
    if let Some(run) = run {
        let f = waverun_core::forecast::forecast(&engine, &run, now, minutes)?;
        return Ok(serde_json::to_string(&f).expect("forecast serialises"));
    }
    let mut forecasts = serde_json::Map::new();
    let mut missing = Vec::new();
    for run in runs.unwrap_or_default() {
        match waverun_core::forecast::forecast(&engine, &run, now, minutes) {
            Ok(f) => {
                forecasts.insert(run, serde_json::to_value(&f).expect("forecast serialises"));
            }
            Err(e) if e.code == ErrorCode::NotFound => missing.push(run),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(serde_json::json!({ "forecasts": forecasts, "missing": missing }).to_string())
}

/// An optional list of names (`runs`, `members`): `None` when absent or null.
fn optional_names(
    value: Option<&RawValue>,
    field: &str,
    what: &str,
) -> Result<Option<Vec<String>>, AbiError> {
    match value.filter(|v| v.get() != "null") {
        Some(v) => serde_json::from_str(v.get())
            .map(Some)
            .map_err(|_| bad(format!("\"{field}\" must be an array of {what} names"))),
        None => Ok(None),
    }
}

fn invalid_field(path: &str, rule: impl Into<String>) -> AbiError {
    Error::invalid(vec![FieldError::new(path, rule)]).into()
}

fn is_submit_refusal(e: &waverun_core::state::StatusError) -> bool {
    e.code == ErrorCode::UpgradeFailed.as_str() && e.message.starts_with(SUBMIT_REFUSED)
}

/// Reports the member failures the driver caused with its own code.
fn mark_events(events: &mut [Event]) {
    for ev in events {
        if let Fact::MemberFailed { error: e, .. } = &mut ev.fact {
            if is_submit_refusal(e) {
                e.code = Code::ClusterSubmitFailed.as_str().to_string();
            }
        }
    }
}

fn mark_status(status: &mut RunStatus) {
    for s in &mut status.stages {
        for g in &mut s.groups {
            for m in &mut g.members {
                if let Some(e) = &mut m.status.error {
                    if is_submit_refusal(e) {
                        e.code = Code::ClusterSubmitFailed.as_str().to_string();
                    }
                }
            }
        }
    }
}

/// What `cluster_submit` receives: `{"type": "startUpgrade", "operationId": ...}`.
fn submit_json(op: &UpgradeOperation) -> String {
    serde_json::to_string(&HostCommand::StartUpgrade(op.clone())).expect("operation serialises")
}

/// What `check_submit` receives: the *CheckRequest*, `{"measurementId": ...}`.
fn check_json(req: &CheckRequest) -> String {
    serde_json::to_string(req).expect("check request serialises")
}

/// Milliseconds since the epoch, rounded up: waking at the result is never early.
fn ceil_millis(t: Timestamp) -> i64 {
    let ms = t.timestamp_millis();
    if !t.timestamp_subsec_nanos().is_multiple_of(1_000_000) {
        ms + 1
    } else {
        ms
    }
}

impl<H: HostImports> Guest<H> {
    /// A plugin over `host`, not initialised yet.
    pub fn new(host: H) -> Guest<H> {
        Guest { host, active: None }
    }

    /// The host.
    pub fn host(&self) -> &H {
        &self.host
    }

    /// The host, mutably.
    pub fn host_mut(&mut self) -> &mut H {
        &mut self.host
    }

    /// Gives the host back (a "crash": the engine state is dropped).
    pub fn into_host(self) -> H {
        self.host
    }

    /// The engine, once initialised (for inspection).
    pub fn engine(&self) -> Option<&Engine> {
        self.active.as_ref().map(|a| &a.engine)
    }

    /// The last journal record's `seq`, once initialised.
    pub fn journal_seq(&self) -> Option<u64> {
        self.active.as_ref().map(|a| a.seq)
    }

    /// `waverun_abi_version`.
    pub fn abi_version(&self) -> i32 {
        ABI_VERSION
    }

    // ------------------------------------------------------------------ exports

    /// `waverun_init`: restore the snapshot, replay the journal (no cluster calls), then query
    /// every operation in flight and submit again those the host does not know, and submit
    /// every measurement in flight again (`check_submit`).
    pub fn init(&mut self) -> String {
        envelope(self.init_inner())
    }

    /// `waverun_request`.
    pub fn request(&mut self, bytes: &[u8]) -> String {
        envelope(self.request_inner(bytes))
    }

    /// `waverun_deliver`.
    pub fn deliver(&mut self, bytes: &[u8]) -> String {
        envelope(self.deliver_inner(bytes))
    }

    /// `waverun_wake`.
    pub fn wake(&mut self) -> String {
        envelope(self.wake_inner())
    }

    /// `waverun_status`.
    pub fn status(&mut self, bytes: &[u8]) -> String {
        envelope(parse_envelope(bytes).and_then(|env| {
            let run = string_field(env.run, "run")?;
            self.status_json(&run)
        }))
    }

    /// `waverun_next_wakeup`: milliseconds since the epoch, `-1` for never (or before init).
    pub fn next_wakeup(&mut self) -> i64 {
        self.active
            .as_ref()
            .and_then(|a| a.engine.poll_timeout())
            .map_or(-1, |w| ceil_millis(w.at))
    }

    // ------------------------------------------------------------------ init

    fn init_inner(&mut self) -> Envelope {
        if self.active.is_some() {
            return Err(AbiError::new(
                Code::Engine(ErrorCode::InvalidState),
                "waverun_init was already called; it is called once, first",
            ));
        }
        let clock = self.clock();
        let snapshot = self
            .host
            .storage_read(StorageKind::Snapshot)
            .map_err(|c| invalid_snapshot(format!("storage_read(snapshot) returned {c}")))?;
        let journal = self
            .host
            .storage_read(StorageKind::Journal)
            .map_err(|c| invalid_snapshot(format!("storage_read(journal) returned {c}")))?;

        let state_bytes = snapshot.as_ref().map_or(0, Vec::len);
        let (engine, snap_seq, operations, measurements) = match snapshot {
            Some(bytes) => {
                let doc: SnapshotDoc = serde_json::from_slice(&bytes)
                    .map_err(|e| invalid_snapshot(format!("snapshot: {e}")))?;
                if doc.v != 1 {
                    return Err(invalid_snapshot(format!(
                        "snapshot: version {} is not supported",
                        doc.v
                    )));
                }
                let engine = Engine::restore(doc.engine.get())?;
                let ops = doc
                    .operations
                    .into_iter()
                    .map(|op| (op.operation_id.clone(), op))
                    .collect();
                let checks = doc
                    .measurements
                    .into_iter()
                    .map(|req| (req.measurement_id.clone(), req))
                    .collect();
                (Some(engine), doc.journal_seq, ops, checks)
            }
            None => (None, 0, BTreeMap::new(), BTreeMap::new()),
        };

        let mut records = Vec::new();
        if let Some(bytes) = journal {
            let text = std::str::from_utf8(&bytes)
                .map_err(|e| invalid_snapshot(format!("journal: not UTF-8: {e}")))?;
            let mut expected = snap_seq + 1;
            for (i, line) in text.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                let r: Record = serde_json::from_str(line)
                    .map_err(|e| invalid_snapshot(format!("journal line {}: {e}", i + 1)))?;
                if r.seq <= snap_seq {
                    continue; // covered by the snapshot; the host may keep such records
                }
                if r.seq != expected {
                    return Err(invalid_snapshot(format!(
                        "journal line {}: record {} where record {expected} was expected",
                        i + 1,
                        r.seq
                    )));
                }
                expected += 1;
                records.push(r);
            }
        }

        // A fresh engine starts no later than the first record it replays.
        let engine = engine
            .unwrap_or_else(|| Engine::new(records.first().map_or(clock, |r: &Record| r.now)));
        self.active = Some(Active {
            engine,
            seq: snap_seq,
            snapshot_seq: snap_seq,
            journal_bytes: 0,
            snapshot_bytes: 0,
            state_bytes,
            operations,
            measurements,
        });

        let replayed = records.len();
        // The events of the last record replayed: a host whose step for it never committed
        // (the guest trapped between journaling the input and answering) records them.
        let mut last_record_events = Vec::new();
        for (i, r) in records.into_iter().enumerate() {
            let a = self.active.as_mut().expect("initialised");
            a.seq = r.seq;
            // Replayed, not live: what it starts was submitted when it was first applied.
            let (engine, mut around) = a.surroundings(&mut self.host, false);
            let _ = drive::deliver(engine, &mut around, r.now, r.input);
            if i + 1 == replayed {
                last_record_events = around.events;
            }
        }
        mark_events(&mut last_record_events);
        self.forget_finished_operations();

        // Every operation in flight: does the host know it?
        let in_flight: Vec<String> = self
            .engine_ref()
            .operations_in_flight()
            .map(|(op, _, _)| op.to_string())
            .collect();
        let mut refused = Vec::new();
        for id in &in_flight {
            let query = serde_json::json!({ "operationId": id }).to_string();
            let answer = self.host.cluster_query(&query);
            if answer == 0 {
                continue;
            }
            let op = self.active.as_ref().and_then(|a| a.operations.get(id));
            let Some(op) = op else {
                self.host.log(
                    GuestLogLevel::Error,
                    &format!("operation {id} is in flight but its payload is unknown; cannot submit it again"),
                );
                continue;
            };
            let json = submit_json(op);
            self.host.log(
                GuestLogLevel::Info,
                &format!("operation {id}: cluster_query answered {answer}; submitting it again"),
            );
            let rc = self.host.cluster_submit(&json);
            if rc != 0 {
                refused.push(refusal(id, rc));
            }
        }
        // Every measurement awaited: submitted again (the host treats a known id as the same
        // measurement; a result delivered twice is ignored by the engine).
        let awaited: Vec<String> = self
            .engine_ref()
            .measurements_in_flight()
            .map(|(id, _)| id.to_string())
            .collect();
        for id in &awaited {
            let req = self.active.as_ref().and_then(|a| a.measurements.get(id));
            let Some(req) = req else {
                self.host.log(
                    GuestLogLevel::Error,
                    &format!("measurement {id} is awaited but its request is unknown; cannot submit it again"),
                );
                continue;
            };
            let json = check_json(req);
            let rc = self.host.check_submit(&json);
            if rc != 0 {
                refused.push(check_refusal(id, rc));
            }
        }
        let now = clock.max(self.engine_ref().now());
        let a = self.active.as_mut().expect("initialised");
        let (engine, mut around) = a.surroundings(&mut self.host, true);
        drive::answer(engine, &mut around, now, refused);
        let mut events = around.events;
        self.forget_finished_operations();
        mark_events(&mut events);

        let a = self.active.as_ref().expect("initialised");
        self.host.log(
            GuestLogLevel::Info,
            &format!(
                "waverun plugin initialised: journalSeq {}, replayed {replayed}, in flight {}, measurements {}",
                a.seq,
                in_flight.len(),
                awaited.len()
            ),
        );
        Ok(format!(
            "{{\"journalSeq\":{},\"replayed\":{replayed},\"inFlight\":{},\"events\":{},\"lastRecordEvents\":{}}}",
            a.seq,
            in_flight.len(),
            serde_json::to_string(&events).expect("events serialise"),
            serde_json::to_string(&last_record_events).expect("events serialise")
        ))
    }

    // ------------------------------------------------------------------ requests

    fn request_inner(&mut self, bytes: &[u8]) -> Envelope {
        let req = parse_request(bytes)?;
        let kind: String = req
            .kind
            .and_then(|k| serde_json::from_str(k.get()).ok())
            .ok_or_else(|| bad("the request has no \"type\""))?;
        // Pure requests: answered before `waverun_init`, nothing journaled.
        match kind.as_str() {
            "ping" => return Ok("{}".to_string()),
            "simulate" => {
                let report = simulate_owned(scenario_field(&req)?)?;
                return Ok(serde_json::to_string(&report).expect("report serialises"));
            }
            "planScenario" => {
                let plan = waverun_core::sim::plan_scenario(&scenario_field(&req)?)?;
                return Ok(serde_json::to_string(&plan).expect("plan serialises"));
            }
            "validate" => return validate_document(&req),
            "select" => return select(&req),
            "windows" => return windows(&req),
            "forecastFrom" => return forecast_from(&req),
            _ => {}
        }
        self.require_init()?;
        match kind.as_str() {
            "command" => {
                let command: Command = serde_json::from_str(field(req.command, "command")?.get())
                    .map_err(|e| bad(format!("request.command: {e}")))?;
                let events = self.apply(Input::Command(command))?;
                Ok(events_json(&events))
            }
            "status" => {
                let run = string_field(req.run, "run")?;
                match req.members.map(RawValue::get) {
                    None | Some("true") => self.status_json(&run),
                    // The outline: no member's node built (a list of gates, a run's state).
                    Some("false") => {
                        self.require_init()?;
                        let outline = self.engine_ref().run_status_view(&run)?.outline();
                        Ok(serde_json::to_string(&outline).expect("status serialises"))
                    }
                    Some(_) => Err(bad("\"members\" must be true or false")),
                }
            }
            "plan" => {
                let run = string_field(req.run, "run")?;
                let plan = self.engine_ref().plan(&run)?;
                Ok(serde_json::to_string(&plan).expect("plan serialises"))
            }
            "runs" => {
                let engine = self.engine_ref();
                let runs: Vec<Value> = engine
                    .run_names()
                    .map(|n| serde_json::json!({ "name": n, "state": engine.run_state(n) }))
                    .collect();
                Ok(serde_json::json!({ "runs": runs }).to_string())
            }
            "tallies" => {
                let engine = self.engine_ref();
                let mut runs = Vec::new();
                for n in engine.run_names() {
                    let tally = engine.run_status_view(n)?.node_tally();
                    runs.push(serde_json::json!({ "name": n, "tally": tally }));
                }
                Ok(serde_json::json!({ "runs": runs }).to_string())
            }
            "nextWakeup" => {
                let w = self.engine_ref().poll_timeout();
                Ok(match w {
                    Some(w) => serde_json::to_string(&w).expect("wakeup serialises"),
                    None => r#"{"at":null,"reason":null,"run":null}"#.to_string(),
                })
            }
            "forecast" => {
                let run = string_field(req.run, "run")?;
                let minutes = upgrade_minutes(&req)?;
                let now = self.clock();
                let f = waverun_core::forecast::forecast(self.engine_ref(), &run, now, minutes)?;
                Ok(serde_json::to_string(&f).expect("forecast serialises"))
            }
            "catalog" => {
                let catalog = self.engine_ref().catalog();
                Ok(serde_json::to_string(catalog).expect("catalog serialises"))
            }
            "freezes" => {
                let freezes = self.engine_ref().freezes();
                Ok(serde_json::json!({ "freezes": freezes }).to_string())
            }
            "leases" => {
                let leases = self.engine_ref().leases();
                // With `members`: only theirs (a page of a 100,000-member list asks for its own).
                let only = optional_names(req.members, "members", "member")?;
                let answer = match only {
                    None => serde_json::json!({ "leases": leases }),
                    Some(names) => {
                        let some: BTreeMap<&str, &String> = names
                            .iter()
                            .filter_map(|n| leases.get_key_value(n.as_str()))
                            .map(|(k, v)| (k.as_str(), v))
                            .collect();
                        serde_json::json!({ "leases": some })
                    }
                };
                Ok(answer.to_string())
            }
            "profiles" => {
                let engine = self.engine_ref();
                let profiles: Vec<Value> = engine
                    .profiles()
                    .map(|(p, s)| serde_json::json!({ "profile": p, "status": s }))
                    .collect();
                let generated: serde_json::Map<String, Value> = engine
                    .run_names()
                    .filter_map(|r| {
                        let (p, v) = engine.run_generated_by(r)?;
                        Some((r.to_string(), serde_json::json!({ "profile": p, "versions": v })))
                    })
                    .collect();
                Ok(serde_json::json!({ "profiles": profiles, "generatedRuns": generated }).to_string())
            }
            "runSpec" => {
                let run = string_field(req.run, "run")?;
                let engine = self.engine_ref();
                let spec = engine.run_spec(&run).ok_or_else(|| {
                    waverun_core::Error::new(
                        waverun_core::ErrorCode::NotFound,
                        format!("run \"{run}\" does not exist"),
                    )
                })?;
                Ok(serde_json::to_string(spec).expect("run spec serialises"))
            }
            "generation" => {
                let profile = string_field(req.profile, "profile")?;
                let g = self.engine_ref().generation_preview(&profile)?;
                Ok(serde_json::to_string(&g).expect("generation serialises"))
            }
            "profilePlan" => {
                let profile = string_field(req.profile, "profile")?;
                let p = self.engine_ref().profile_plan(&profile)?;
                Ok(serde_json::to_string(&p).expect("profile plan serialises"))
            }
            "forecastState" => {
                let run = string_field(req.run, "run")?;
                let now = self.clock();
                let engine = self.engine_ref();
                // The run must exist: a forecast of it is what the state is for.
                if engine.run_spec(&run).is_none() {
                    return Err(waverun_core::Error::new(
                        waverun_core::ErrorCode::NotFound,
                        format!("run \"{run}\" does not exist"),
                    )
                    .into());
                }
                let a = self.active.as_mut().expect("initialised");
                let mut out = state_buffer(a.state_bytes);
                out.push_str(&format!(
                    r#"{{"run":{},"at":"{}","snapshot":"#,
                    serde_json::to_string(&run).expect("a name serialises"),
                    waverun_core::time::fmt_time(now),
                ));
                a.engine.snapshot_into(&mut out);
                out.push('}');
                a.state_bytes = out.len();
                Ok(out)
            }
            "snapshot" => {
                let (doc, rc) = self.write_snapshot();
                if rc != 0 {
                    self.host.log(
                        GuestLogLevel::Warn,
                        &format!("snapshot_write returned {rc}; the journal still has everything"),
                    );
                }
                Ok(doc)
            }
            other => Err(bad(format!(
                "unknown request type \"{other}\" (ping, simulate, command, status, plan, forecast, runs, tallies, nextWakeup, catalog, freezes, leases, snapshot)"
            ))),
        }
    }

    fn deliver_inner(&mut self, bytes: &[u8]) -> Envelope {
        let env = parse_envelope(bytes)?;
        let observation: Observation =
            serde_json::from_str(field(env.observation, "observation")?.get())
                .map_err(|e| bad(format!("observation: {e}")))?;
        self.require_init()?;
        let events = self.apply(Input::Observation(observation))?;
        Ok(events_json(&events))
    }

    fn wake_inner(&mut self) -> Envelope {
        self.require_init()?;
        let now = self.clock();
        let engine = self.engine_ref();
        let due = engine.poll_timeout().is_some_and(|w| w.at <= now);
        if !due && now <= engine.now() {
            // Nothing due and no time passed: nothing to apply, nothing to journal.
            return Ok(events_json(&[]));
        }
        let events = self.apply_at(now, Input::Timeout)?;
        Ok(events_json(&events))
    }

    fn status_json(&mut self, run: &str) -> Envelope {
        self.require_init()?;
        let mut status = self.engine_ref().run_status(run)?;
        mark_status(&mut status);
        Ok(serde_json::to_string(&status).expect("status serialises"))
    }

    // ------------------------------------------------------------------ the write-ahead path

    fn require_init(&self) -> Result<(), AbiError> {
        if self.active.is_none() {
            return Err(AbiError::new(
                Code::NotInitialized,
                "call waverun_init first",
            ));
        }
        Ok(())
    }

    fn engine_ref(&self) -> &Engine {
        &self.active.as_ref().expect("initialised").engine
    }

    /// The host's clock; an earlier time than the engine's counts as the engine's (the engine
    /// does the same, and the journal records the instant actually used).
    fn clock(&mut self) -> Timestamp {
        let ms = self.host.clock_now_ms();
        let t = DateTime::from_timestamp_millis(ms);
        match (&self.active, t) {
            (Some(a), Some(t)) => t.max(a.engine.now()),
            (Some(a), None) => a.engine.now(),
            (None, Some(t)) => t,
            (None, None) => DateTime::UNIX_EPOCH,
        }
    }

    fn apply(&mut self, input: Input) -> Result<Vec<Event>, AbiError> {
        let now = self.clock();
        self.apply_at(now, input)
    }

    /// Journals `input`, applies it, submits what it starts, records refused submissions and
    /// snapshots when due. Returns the events (also when the engine refused the input).
    fn apply_at(&mut self, now: Timestamp, input: Input) -> Result<Vec<Event>, AbiError> {
        self.journal(now, &input)?;
        let a = self.active.as_mut().expect("initialised");
        let (engine, mut around) = a.surroundings(&mut self.host, true);
        let result = drive::deliver(engine, &mut around, now, input);
        let mut events = around.events;
        self.forget_finished_operations();
        self.maybe_snapshot();
        mark_events(&mut events);
        match result {
            Ok(()) => Ok(events),
            Err(e) => {
                let mut err = AbiError::from(e);
                err.events = events;
                Err(err)
            }
        }
    }

    fn journal(&mut self, now: Timestamp, input: &Input) -> Result<(), AbiError> {
        let a = self.active.as_mut().expect("initialised");
        journal(&mut self.host, &mut a.seq, &mut a.journal_bytes, now, input)
    }

    /// Forgets the payloads of operations and measurements no longer in flight.
    fn forget_finished_operations(&mut self) {
        let a = self.active.as_mut().expect("initialised");
        if a.operations.len() != a.engine.operations_in_flight_count() {
            let engine = &a.engine;
            a.operations
                .retain(|id, _| engine.is_operation_in_flight(id));
        }
        if !a.measurements.is_empty() {
            let awaited: std::collections::BTreeSet<&str> = a
                .engine
                .measurements_in_flight()
                .map(|(id, _)| id)
                .collect();
            a.measurements.retain(|id, _| awaited.contains(id.as_str()));
        }
    }

    fn maybe_snapshot(&mut self) {
        let a = self.active.as_ref().expect("initialised");
        // Amortised: a snapshot costs no more than the journal it replaces, so a large fleet
        // (whose snapshot is big) snapshots less often than every SNAPSHOT_EVERY records.
        if a.seq - a.snapshot_seq >= SNAPSHOT_EVERY && a.journal_bytes >= a.snapshot_bytes {
            let (_, rc) = self.write_snapshot();
            if rc != 0 {
                self.host.log(
                    GuestLogLevel::Warn,
                    &format!("snapshot_write returned {rc}; the journal still has everything"),
                );
            }
        }
    }

    /// Writes a snapshot; returns the document and the host's answer.
    fn write_snapshot(&mut self) -> (String, i32) {
        let a = self.active.as_mut().expect("initialised");
        let ops: Vec<&UpgradeOperation> = a.operations.values().collect();
        let checks: Vec<&CheckRequest> = a.measurements.values().collect();
        let mut doc = state_buffer(a.state_bytes);
        doc.push_str(&format!("{{\"v\":1,\"journalSeq\":{},\"engine\":", a.seq));
        a.engine.snapshot_into(&mut doc);
        doc.push_str(&format!(
            ",\"operations\":{},\"measurements\":{}}}",
            serde_json::to_string(&ops).expect("operations serialise"),
            serde_json::to_string(&checks).expect("measurements serialise")
        ));
        a.state_bytes = doc.len();
        a.snapshot_seq = a.seq;
        a.journal_bytes = 0;
        a.snapshot_bytes = doc.len() as u64;
        let rc = self.host.snapshot_write(&doc);
        (doc, rc)
    }
}

#[cfg(test)]
mod tests;
