//! What can go wrong when loading or calling a plugin.

use std::fmt;
use waverun_core::{Event, FieldError};

/// Which kind of export call; each kind has its own epoch deadline ([`super::Deadlines`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallKind {
    /// Instantiation, including the `waverun_abi_version` check (uses the init deadline).
    Instantiate,
    /// `waverun_init` (restores the snapshot and replays the journal: the longest call).
    Init,
    /// `waverun_request` (API requests, including commands).
    Request,
    /// `waverun_deliver` (cluster results and other observations).
    Deliver,
    /// `waverun_wake` (timers).
    Wake,
    /// Read-only exports: `waverun_abi_version`, `waverun_status`, `waverun_next_wakeup`.
    Query,
}

impl fmt::Display for CallKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CallKind::Instantiate => "instantiation",
            CallKind::Init => "waverun_init",
            CallKind::Request => "waverun_request",
            CallKind::Deliver => "waverun_deliver",
            CallKind::Wake => "waverun_wake",
            CallKind::Query => "query",
        })
    }
}

/// An `ok: false` envelope: the guest refused the call. The instance is healthy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuestError {
    /// Stable code (`InvalidField`, `NotFound`, ..., `PersistenceFailed`; ABI section 5.2).
    pub code: String,
    /// Human-readable message.
    pub message: String,
    /// The field, when the error is about one.
    pub path: Option<String>,
    /// Every broken rule, when the guest lists them (`error.fields`; the first is `path`).
    pub fields: Vec<FieldError>,
    /// Events the call caused although the input was refused: the engine fires the timers due
    /// at `now` before it looks at an input, so a refused command can still have moved a run
    /// (the envelope's top-level `events`). A host must process them like any others.
    pub events: Vec<Event>,
}

impl fmt::Display for GuestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

/// Why a call trapped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TrapKind {
    /// The call ran past its epoch deadline (an endless or very long loop).
    Deadline,
    /// The guest tried to grow its memory beyond the store's limit.
    MemoryLimit,
    /// The guest executed `unreachable` (a Rust guest's panic or abort).
    Unreachable,
    /// The guest exhausted its stack.
    StackOverflow,
    /// A host import refused to go on (the guest broke the ABI, e.g. an out-of-bounds buffer, or
    /// the host's storage could not be read).
    Host,
    /// Any other trap (out-of-bounds access, division by zero, ...).
    Other,
}

impl fmt::Display for TrapKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TrapKind::Deadline => "deadline exceeded",
            TrapKind::MemoryLimit => "memory limit exceeded",
            TrapKind::Unreachable => "unreachable executed (guest panic or abort)",
            TrapKind::StackOverflow => "stack overflow",
            TrapKind::Host => "host import failed",
            TrapKind::Other => "trap",
        })
    }
}

/// A trapped call. The instance is poisoned until [`super::PluginInstance::recover`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trap {
    /// Why.
    pub kind: TrapKind,
    /// Which call.
    pub call: CallKind,
    /// Whether `journal_append` confirmed a record during the call. If it did, the input is
    /// durable and the replay after [`super::PluginInstance::recover`] applies it (do not send
    /// it again); if not, the call has not happened (send it again after recovering). ABI 8.
    pub journaled: bool,
    /// Wasmtime's description (with the guest backtrace when there is one).
    pub message: String,
}

/// Errors of the plugin runtime.
#[derive(Debug)]
pub enum PluginError {
    /// The guest answered with an `ok: false` envelope.
    Guest(GuestError),
    /// The call trapped; the instance is poisoned.
    Trap(Trap),
    /// An earlier call trapped; call [`super::PluginInstance::recover`] first.
    Poisoned,
    /// The module does not implement this host's ABI: wrong `waverun_abi_version`, an import
    /// outside the ABI, a missing or mistyped export.
    Incompatible(String),
    /// The guest broke the call protocol (a result outside its memory, not an envelope, ...).
    Protocol(String),
    /// The module could not be compiled or instantiated.
    Load(String),
    /// Reading the module or using the cache directory failed.
    Io(std::io::Error),
}

impl PluginError {
    /// The trap, if this is one.
    pub fn trap(&self) -> Option<&Trap> {
        match self {
            PluginError::Trap(t) => Some(t),
            _ => None,
        }
    }

    /// The guest error, if this is one.
    pub fn guest(&self) -> Option<&GuestError> {
        match self {
            PluginError::Guest(g) => Some(g),
            _ => None,
        }
    }
}

impl fmt::Display for PluginError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PluginError::Guest(g) => write!(f, "plugin refused the call: {g}"),
            PluginError::Trap(t) => write!(
                f,
                "plugin trapped in {} ({}){}: {}",
                t.call,
                t.kind,
                if t.journaled {
                    ", after journaling its input"
                } else {
                    ""
                },
                t.message
            ),
            PluginError::Poisoned => f.write_str(
                "the plugin instance trapped earlier and must be recovered before it is called again",
            ),
            PluginError::Incompatible(m) => write!(f, "incompatible plugin: {m}"),
            PluginError::Protocol(m) => write!(f, "plugin broke the ABI: {m}"),
            PluginError::Load(m) => write!(f, "cannot load the plugin: {m}"),
            PluginError::Io(e) => write!(f, "plugin I/O: {e}"),
        }
    }
}

impl std::error::Error for PluginError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PluginError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<std::io::Error> for PluginError {
    fn from(e: std::io::Error) -> Self {
        PluginError::Io(e)
    }
}

/// The error a host import returns to trap the guest.
#[derive(Debug)]
pub(crate) struct HostTrap(pub String);

impl fmt::Display for HostTrap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HostTrap {}
