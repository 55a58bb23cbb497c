//! The OpenAPI schemas the derives cannot give (feature `openapi`, for the daemon's
//! `/openapi.json`): the model's enums are *open strings* (a client must accept values added
//! later, `shared/spec/api.md` §2), listed in the description rather than as a closed `enum`;
//! a skip target is its `Type:name` string.

use crate::model::{GateTiming, GateType, NodeImageSelectionType, OsType, SkipTarget, UpgradeType};
use crate::state::{Reason, State};
use crate::window::{DayOfWeek, WeekIndex};
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::RefOr;

/// A string schema with `description` (and the values known today, as examples).
fn open_string(description: &str, known: &[&str]) -> RefOr<Schema> {
    let mut b = ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(format!(
            "{description} Known values: {}. Clients must accept others.",
            known.join(", ")
        )));
    for k in known {
        b = b.examples([serde_json::Value::String((*k).to_string())]);
    }
    RefOr::T(Schema::Object(b.build()))
}

macro_rules! open_enum {
    ($t:ty, $description:expr, [$($v:expr),* $(,)?]) => {
        impl utoipa::PartialSchema for $t {
            fn schema() -> RefOr<Schema> {
                open_string($description, &[$($v),*])
            }
        }
        impl utoipa::ToSchema for $t {}
    };
}

open_enum!(
    State,
    "The state of a run, stage, group, member, gate or wait.",
    [
        "NotStarted",
        "Pending",
        "Running",
        "Stopping",
        "Stopped",
        "Skipped",
        "Failed",
        "Completed"
    ]
);
open_enum!(
    Reason,
    "Why a node waits or was skipped.",
    [
        "MaintenanceWindow",
        "VersionNotInRegion",
        "Freeze",
        "Lease",
        "Concurrency",
        "Gate",
        "AfterStageWait",
        "Stop",
        "PreviousStage",
        "Members",
        "AlreadyAtTarget",
        "NoConsistentImage",
        "SkippedByUser",
        "FailureThresholdExceeded",
        "Provider"
    ]
);
open_enum!(GateType, "A gate's kind.", ["Approval", "ScheduledStart"]);
open_enum!(
    GateTiming,
    "Whether a gate comes before or after its stage or group.",
    ["Before", "After"]
);
open_enum!(
    UpgradeType,
    "What an update run upgrades.",
    ["Full", "ControlPlaneOnly", "NodeImageOnly"]
);
open_enum!(
    NodeImageSelectionType,
    "How node images are chosen.",
    ["Latest", "Consistent", "Custom"]
);
open_enum!(
    OsType,
    "A node pool's operating system.",
    ["Linux", "Windows"]
);
open_enum!(
    DayOfWeek,
    "A day of the week.",
    [
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday"
    ]
);
open_enum!(
    WeekIndex,
    "Which week of the month.",
    ["First", "Second", "Third", "Fourth", "Last"]
);

impl utoipa::PartialSchema for SkipTarget {
    fn schema() -> RefOr<Schema> {
        RefOr::T(Schema::Object(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .description(Some(
                    "`Member:name`, `Group:name`, `Stage:name` or `AfterStageWait:stageName`",
                ))
                .examples([serde_json::Value::String("Member:prod-1".to_string())])
                .build(),
        ))
    }
}
impl utoipa::ToSchema for SkipTarget {}
