//! The schema, one for every backend (`shared/spec/store.md`), and its forward migrations.
//! Version 1 is the first; a later version adds a migration here and raises
//! [`SCHEMA_VERSION`]. A database of a newer version than this build knows is refused.

/// The newest schema version this build reads and writes.
pub const SCHEMA_VERSION: u32 = 4;

/// The migrations, in order: `MIGRATIONS[i]` takes a database from version `i` to `i + 1`.
pub(super) const MIGRATIONS: &[&str] = &[
    // 0 → 1: the first schema.
    r#"
CREATE TABLE meta (
    key         TEXT PRIMARY KEY,
    value       TEXT NOT NULL,
    epoch       INTEGER NOT NULL
);
CREATE TABLE journal (
    seq         INTEGER PRIMARY KEY,
    now_ms      INTEGER,
    record      BLOB NOT NULL,
    epoch       INTEGER NOT NULL
);
CREATE TABLE snapshots (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    journal_seq INTEGER NOT NULL,
    module_hash TEXT NOT NULL,
    bytes       BLOB NOT NULL,
    epoch       INTEGER NOT NULL
);
CREATE TABLE operations (
    id                    TEXT PRIMARY KEY,
    member                TEXT NOT NULL,
    provider              TEXT NOT NULL,
    request               TEXT NOT NULL,
    state                 TEXT NOT NULL CHECK (state IN ('intent', 'sent', 'done', 'uncertain')),
    provider_operation_id TEXT,
    attempts              INTEGER NOT NULL DEFAULT 0,
    last_error            TEXT,
    epoch                 INTEGER NOT NULL
);
CREATE INDEX operations_by_state ON operations (state, id);
CREATE TABLE events (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms       INTEGER NOT NULL,
    run         TEXT NOT NULL,
    kind        TEXT NOT NULL,
    data        TEXT NOT NULL,
    epoch       INTEGER NOT NULL
);
CREATE INDEX events_by_run ON events (run, seq);
CREATE TABLE resources (
    kind             TEXT NOT NULL,
    name             TEXT NOT NULL,
    etag             TEXT NOT NULL,
    created_by       TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    last_modified_by TEXT NOT NULL,
    last_modified_at TEXT NOT NULL,
    body             TEXT,
    epoch            INTEGER NOT NULL,
    PRIMARY KEY (kind, name)
);
CREATE TABLE audit (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    at          TEXT NOT NULL,
    who         TEXT NOT NULL,
    action      TEXT NOT NULL,
    target      TEXT NOT NULL,
    request_id  TEXT NOT NULL,
    outcome     TEXT NOT NULL,
    detail      TEXT,
    epoch       INTEGER NOT NULL
);
CREATE INDEX audit_by_request ON audit (request_id);
-- The simulated provider's own record (the "remote" platform's), written through its own
-- connection before it answers.
CREATE TABLE sim_operations (
    key           TEXT PRIMARY KEY,
    operation_id  TEXT NOT NULL UNIQUE,
    member        TEXT NOT NULL,
    attempt       INTEGER NOT NULL,
    accepted_ms   INTEGER NOT NULL,
    due_ms        INTEGER NOT NULL,
    succeeds      INTEGER NOT NULL,
    control_plane TEXT,
    node_images   TEXT NOT NULL,
    epoch         INTEGER NOT NULL
);
CREATE INDEX sim_operations_by_member ON sim_operations (member, due_ms);
"#,
    // 1 → 2: which engine modules executed each run (a run records the hash of the module that
    // executed it; a daemon upgraded mid-run adds the new one).
    r#"
CREATE TABLE run_modules (
    run           TEXT NOT NULL,
    module_hash   TEXT NOT NULL,
    first_step_ms INTEGER NOT NULL,
    epoch         INTEGER NOT NULL,
    PRIMARY KEY (run, module_hash)
);
"#,
    // 2 → 3: an audit entry's own key (unique per request the daemon answered), apart from the
    // client's `x-request-id`, which is a field: two requests sent with one id are two entries.
    r#"
ALTER TABLE audit ADD COLUMN request_key TEXT;
CREATE INDEX audit_by_key ON audit (request_key);
"#,
    // 3 → 4: events out. Each event subscription's cursor in the event log (every event at or
    // before it is done), its dead letters, and the newest attempts at its deliveries.
    r#"
CREATE TABLE webhook_cursors (
    subscription TEXT PRIMARY KEY,
    cursor       INTEGER NOT NULL,
    epoch        INTEGER NOT NULL
);
CREATE TABLE webhook_dead_letters (
    subscription TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    at           TEXT NOT NULL,
    attempts     INTEGER NOT NULL,
    error        TEXT NOT NULL,
    epoch        INTEGER NOT NULL,
    PRIMARY KEY (subscription, seq)
);
CREATE TABLE webhook_deliveries (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    subscription TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    attempt      INTEGER NOT NULL,
    at           TEXT NOT NULL,
    status       INTEGER,
    latency_ms   INTEGER NOT NULL,
    outcome      TEXT NOT NULL
                 CHECK (outcome IN ('delivered', 'failed', 'deadLettered', 'redelivered')),
    error        TEXT,
    epoch        INTEGER NOT NULL
);
CREATE INDEX webhook_deliveries_by_subscription ON webhook_deliveries (subscription, id);
"#,
];
