//! The simulated provider: clusters described in a file (the scenario format's members with
//! their `behavior`), upgrading in fleet time. An upgrade takes the member's `upgradeMinutes`
//! (plus a jitter drawn from the key, so a restart draws the same), and the member's first
//! `failAttempts` attempts fail. Like a real platform it keeps its own record of operations,
//! written before it answers: the `sim_operations` table of the daemon's database, through a
//! connection of its own. A daemon killed mid-upgrade therefore finds the upgrade still running,
//! or finished, when it comes back, and a repeated key is the same operation across restarts.

use super::{measurement_error, ProviderError, ProviderErrorCode, Started, UpgradeRequest};
use super::{ClusterTarget, Described, OperationPhase, OperationReport, Provider};
use crate::clock::Clock;
use crate::store::StoreError;
use rusqlite::{params, Connection, OptionalExtension};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;
use waverun_core::health::Measurement;
use waverun_core::sim::{Behavior, ScenarioMember};
use waverun_core::{Maintenance, NodePool, PoolImage};

/// One simulated cluster: what it runs at the start, and how its upgrades behave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimulatedCluster {
    /// The member's name.
    pub name: String,
    /// Its region.
    pub region: String,
    /// The control plane's version at the start.
    pub kubernetes_version: String,
    /// Each node pool (name, OS, image) at the start.
    pub node_pools: Vec<NodePool>,
    /// Its maintenance windows.
    pub maintenance: Maintenance,
    /// How its upgrades go.
    pub behavior: Behavior,
}

impl From<&ScenarioMember> for SimulatedCluster {
    fn from(m: &ScenarioMember) -> SimulatedCluster {
        SimulatedCluster {
            name: m.name.clone(),
            region: m.region.clone(),
            kubernetes_version: m.kubernetes_version.clone(),
            node_pools: m.node_pools.clone(),
            maintenance: m.maintenance.clone(),
            behavior: m.behavior.clone(),
        }
    }
}

/// The simulated clusters of one fleet.
pub struct SimulatedProvider {
    db: Mutex<Db>,
    clusters: BTreeMap<String, SimulatedCluster>,
    clock: Box<dyn Clock + Sync>,
    seed: u64,
}

struct Row {
    operation_id: String,
    due_ms: i64,
    succeeds: bool,
}

/// One upgrade the fleet accepted for a member, as far as what it runs is concerned.
struct Change {
    control_plane: Option<String>,
    node_images: String,
    due_ms: i64,
    succeeds: bool,
}

/// Where the simulated fleet keeps its record: the daemon's SQLite file, or — for several
/// replicas, which must all see the same clusters — the PostgreSQL database they share.
enum Db {
    Sqlite(Connection),
    Postgres {
        client: Box<Option<postgres::Client>>,
        url: String,
    },
}

fn db(e: impl std::fmt::Display) -> ProviderError {
    ProviderError::new(
        ProviderErrorCode::Unavailable,
        format!("simulated fleet: {e}"),
    )
}

impl Db {
    fn pg<'a>(
        client: &'a mut Option<postgres::Client>,
        url: &str,
    ) -> Result<&'a mut postgres::Client, ProviderError> {
        if client.as_ref().is_none_or(postgres::Client::is_closed) {
            *client = Some(crate::store::pg_connect(url).map_err(db)?);
        }
        Ok(client.as_mut().expect("connected above"))
    }

    /// Every upgrade of every member, each member's in the order they take effect: one query
    /// for a whole batch of descriptions.
    fn histories(&mut self) -> Result<HashMap<String, Vec<Change>>, ProviderError> {
        const SQL: &str = "SELECT member, control_plane, node_images, due_ms, succeeds
                           FROM sim_operations ORDER BY member, due_ms, attempt";
        let mut all: HashMap<String, Vec<Change>> = HashMap::new();
        match self {
            Db::Sqlite(c) => {
                let mut st = c.prepare_cached(SQL).map_err(db)?;
                let rows = st
                    .query_map([], |r| {
                        let change = Change {
                            control_plane: r.get(1)?,
                            node_images: r.get(2)?,
                            due_ms: r.get(3)?,
                            succeeds: r.get(4)?,
                        };
                        Ok((r.get::<_, String>(0)?, change))
                    })
                    .map_err(db)?;
                for row in rows {
                    let (member, change) = row.map_err(db)?;
                    all.entry(member).or_default().push(change);
                }
            }
            Db::Postgres { client, url } => {
                for r in Db::pg(client, url)?.query(SQL, &[]).map_err(db)? {
                    let change = Change {
                        control_plane: r.get(1),
                        node_images: r.get(2),
                        due_ms: r.get(3),
                        succeeds: r.get::<_, i64>(4) != 0,
                    };
                    all.entry(r.get(0)).or_default().push(change);
                }
            }
        }
        Ok(all)
    }

    /// Every upgrade of `member`, in the order they take effect.
    fn history(&mut self, member: &str) -> Result<Vec<Change>, ProviderError> {
        const SQL: &str = "SELECT control_plane, node_images, due_ms, succeeds FROM sim_operations
                           WHERE member = $1 ORDER BY due_ms, attempt";
        match self {
            Db::Sqlite(c) => {
                let mut st = c.prepare_cached(&SQL.replace("$1", "?1")).map_err(db)?;
                let rows = st
                    .query_map([member], |r| {
                        Ok(Change {
                            control_plane: r.get(0)?,
                            node_images: r.get(1)?,
                            due_ms: r.get(2)?,
                            succeeds: r.get(3)?,
                        })
                    })
                    .map_err(db)?;
                rows.collect::<Result<_, _>>().map_err(db)
            }
            Db::Postgres { client, url } => Ok(Db::pg(client, url)?
                .query(SQL, &[&member])
                .map_err(db)?
                .iter()
                .map(|r| Change {
                    control_plane: r.get(0),
                    node_images: r.get(1),
                    due_ms: r.get(2),
                    succeeds: r.get::<_, i64>(3) != 0,
                })
                .collect()),
        }
    }

    fn find(&mut self, key: &str) -> Result<Option<Row>, ProviderError> {
        const SQL: &str =
            "SELECT operation_id, due_ms, succeeds FROM sim_operations WHERE key = $1";
        match self {
            Db::Sqlite(c) => c
                .query_row(&SQL.replace("$1", "?1"), [key], |r| {
                    Ok(Row {
                        operation_id: r.get(0)?,
                        due_ms: r.get(1)?,
                        succeeds: r.get(2)?,
                    })
                })
                .optional()
                .map_err(db),
            Db::Postgres { client, url } => Ok(Db::pg(client, url)?
                .query_opt(SQL, &[&key])
                .map_err(db)?
                .map(|r| Row {
                    operation_id: r.get(0),
                    due_ms: r.get(1),
                    succeeds: r.get::<_, i64>(2) != 0,
                })),
        }
    }

    fn count(&mut self, member: &str) -> Result<u64, ProviderError> {
        const SQL: &str = "SELECT COUNT(*) FROM sim_operations WHERE member = $1";
        let n: i64 = match self {
            Db::Sqlite(c) => c
                .query_row(&SQL.replace("$1", "?1"), [member], |r| r.get(0))
                .map_err(db)?,
            Db::Postgres { client, url } => Db::pg(client, url)?
                .query_one(SQL, &[&member])
                .map_err(db)?
                .get(0),
        };
        Ok(n as u64)
    }

    /// Begins the transaction that decides an upgrade of `member`: one at a time per member,
    /// across every process that shares the record.
    fn begin(&mut self, member: &str) -> Result<(), ProviderError> {
        match self {
            Db::Sqlite(c) => c.execute_batch("BEGIN IMMEDIATE").map_err(db),
            Db::Postgres { client, url } => {
                let c = Db::pg(client, url)?;
                c.batch_execute("BEGIN").map_err(db)?;
                c.execute("SELECT pg_advisory_xact_lock(hashtext($1))", &[&member])
                    .map(drop)
                    .map_err(db)
            }
        }
    }

    fn end(&mut self, commit: bool) -> Result<(), ProviderError> {
        let sql = if commit { "COMMIT" } else { "ROLLBACK" };
        match self {
            Db::Sqlite(c) => c.execute_batch(sql).map_err(db),
            Db::Postgres { client, url } => Db::pg(client, url)?.batch_execute(sql).map_err(db),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn insert(
        &mut self,
        key: &str,
        operation_id: &str,
        member: &str,
        attempt: u64,
        accepted_ms: i64,
        due_ms: i64,
        succeeds: bool,
        control_plane: Option<&str>,
        node_images: &str,
    ) -> Result<(), ProviderError> {
        const SQL: &str = "INSERT INTO sim_operations (key, operation_id, member, attempt,
                               accepted_ms, due_ms, succeeds, control_plane, node_images, epoch)
                           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 0)";
        match self {
            Db::Sqlite(c) => c
                .execute(
                    &SQL.replace('$', "?"),
                    params![
                        key,
                        operation_id,
                        member,
                        attempt as i64,
                        accepted_ms,
                        due_ms,
                        succeeds,
                        control_plane,
                        node_images
                    ],
                )
                .map(drop)
                .map_err(db),
            Db::Postgres { client, url } => Db::pg(client, url)?
                .execute(
                    SQL,
                    &[
                        &key as &(dyn postgres::types::ToSql + Sync),
                        &operation_id,
                        &member,
                        &(attempt as i64),
                        &accepted_ms,
                        &due_ms,
                        &i64::from(succeeds),
                        &control_plane,
                        &node_images,
                    ],
                )
                .map(drop)
                .map_err(db),
        }
    }
}

/// FNV-1a over the key, mixed with the seed: the same key draws the same jitter everywhere.
fn draw(seed: u64, key: &str) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed;
    for b in key.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

impl SimulatedProvider {
    /// The clusters, over the daemon's database at `db_path` (opened by the store first, which
    /// creates the `sim_operations` table), in the time of `clock`.
    pub fn open(
        db_path: &Path,
        clusters: impl IntoIterator<Item = SimulatedCluster>,
        clock: impl Clock + Sync + 'static,
        seed: u64,
    ) -> Result<SimulatedProvider, StoreError> {
        let conn = Connection::open(db_path).map_err(|e| StoreError::Database(e.to_string()))?;
        conn.busy_timeout(Duration::from_secs(5))
            .map_err(|e| StoreError::Database(e.to_string()))?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(|e| StoreError::Database(e.to_string()))?;
        Ok(SimulatedProvider {
            db: Mutex::new(Db::Sqlite(conn)),
            clusters: clusters.into_iter().map(|c| (c.name.clone(), c)).collect(),
            clock: Box::new(clock),
            seed,
        })
    }

    /// The clusters, over the PostgreSQL database at `url` that several replicas share
    /// (migrated by the store first, which creates the `sim_operations` table): whichever
    /// replica leads sees the upgrades the others started.
    pub fn open_postgres(
        url: &str,
        clusters: impl IntoIterator<Item = SimulatedCluster>,
        clock: impl Clock + Sync + 'static,
        seed: u64,
    ) -> Result<SimulatedProvider, StoreError> {
        let mut db = Db::Postgres {
            client: Box::new(None),
            url: url.to_string(),
        };
        if let Db::Postgres { client, url } = &mut db {
            Db::pg(client, url).map_err(|e| StoreError::Database(e.message))?;
        }
        Ok(SimulatedProvider {
            db: Mutex::new(db),
            clusters: clusters.into_iter().map(|c| (c.name.clone(), c)).collect(),
            clock: Box::new(clock),
            seed,
        })
    }

    /// Operations the fleet ever accepted for `member` (a repeated key counts once).
    pub fn operations_of(&self, member: &str) -> Result<u64, ProviderError> {
        self.db().count(member)
    }

    fn db(&self) -> MutexGuard<'_, Db> {
        self.db.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn cluster(&self, target: &ClusterTarget) -> Result<&SimulatedCluster, ProviderError> {
        self.clusters.get(&target.member).ok_or_else(|| {
            ProviderError::new(
                ProviderErrorCode::NotFound,
                format!("no simulated cluster {:?}", target.member),
            )
        })
    }

    fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// What the cluster runs at `now`: its start, then every upgrade that succeeded by then.
    fn state_at(c: &SimulatedCluster, history: &[Change], now: i64) -> Described {
        let mut d = Described {
            kubernetes_version: c.kubernetes_version.clone(),
            node_pools: c.node_pools.clone(),
            region: c.region.clone(),
            busy: false,
            power_state: None,
            maintenance: (!c.maintenance.is_empty()).then(|| c.maintenance.clone()),
            labels: BTreeMap::new(),
        };
        for change in history {
            if change.due_ms > now {
                d.busy = true;
                continue;
            }
            if !change.succeeds {
                continue;
            }
            if let Some(cp) = &change.control_plane {
                d.kubernetes_version = cp.clone();
            }
            let images: Vec<PoolImage> =
                serde_json::from_str(&change.node_images).unwrap_or_default();
            for img in images {
                if let Some(p) = d.node_pools.iter_mut().find(|p| p.name == img.node_pool) {
                    p.image_version = img.image_version;
                }
            }
        }
        d
    }

    fn report(row: &Row, now: i64) -> OperationReport {
        let (phase, message) = match (now < row.due_ms, row.succeeds) {
            (true, _) => (OperationPhase::Running, None),
            (false, true) => (OperationPhase::Succeeded, None),
            (false, false) => (
                OperationPhase::Failed,
                Some("simulated upgrade failure".to_string()),
            ),
        };
        let left_ms = (row.due_ms - now).max(0) as u64;
        OperationReport {
            operation_id: row.operation_id.clone(),
            phase,
            message,
            poll_after_seconds: left_ms.div_ceil(1000),
        }
    }

    /// Inside the member's transaction: the operation of `request`'s key if the fleet has it
    /// already, else a new one (refused while another upgrade runs).
    fn decide(
        &self,
        db: &mut Db,
        c: &SimulatedCluster,
        request: &UpgradeRequest,
        now: i64,
    ) -> Result<Started, ProviderError> {
        if let Some(row) = db.find(&request.idempotency_key)? {
            let r = Self::report(&row, now);
            return Ok(Started {
                operation_id: r.operation_id,
                phase: r.phase,
                already_at_target: false,
                poll_after_seconds: r.poll_after_seconds,
            });
        }
        let state = Self::state_at(c, &db.history(&c.name)?, now);
        if state.busy {
            return Err(ProviderError::new(
                ProviderErrorCode::OperationInProgress,
                format!("{}: another upgrade is in progress", c.name),
            ));
        }
        let cp_done = request
            .control_plane
            .as_ref()
            .is_none_or(|v| *v == state.kubernetes_version);
        let images_done = request.node_images.iter().all(|i| state.runs(i));
        let at_target = cp_done && images_done;
        let attempt = db.count(&c.name)? + 1;
        let b = &c.behavior;
        let (due, succeeds) = if at_target {
            (now, true)
        } else {
            let jitter = match b.jitter_minutes {
                0 => 0,
                j => draw(self.seed, &request.idempotency_key) % (u64::from(j) + 1),
            };
            let minutes = u64::from(b.upgrade_minutes) + jitter;
            let due = now.saturating_add((minutes * 60_000).min(i64::MAX as u64) as i64);
            (due, attempt > u64::from(b.fail_attempts))
        };
        let operation_id = format!("sim-{}-{attempt}", c.name);
        let images = serde_json::to_string(&request.node_images).expect("images serialise");
        db.insert(
            &request.idempotency_key,
            &operation_id,
            &c.name,
            attempt,
            now,
            due,
            succeeds,
            request.control_plane.as_deref(),
            &images,
        )?;
        let row = Row {
            operation_id,
            due_ms: due,
            succeeds,
        };
        let r = Self::report(&row, now);
        Ok(Started {
            operation_id: r.operation_id,
            phase: r.phase,
            already_at_target: at_target,
            poll_after_seconds: r.poll_after_seconds,
        })
    }

    /// The provider's checks: describe the cluster; it passes unless it is busy or stopped.
    fn judge(&self, target: &ClusterTarget, what: &str) -> Measurement {
        match self.describe(target) {
            Ok(d) => super::preflight_of(&target.member, &d),
            Err(e) => measurement_error(format!("simulated {what}: {e}")),
        }
    }
}

impl Provider for SimulatedProvider {
    fn name(&self) -> &str {
        "simulated"
    }

    fn describe(&self, target: &ClusterTarget) -> Result<Described, ProviderError> {
        let c = self.cluster(target)?;
        let history = self.db().history(&c.name)?;
        Ok(Self::state_at(c, &history, self.now_ms()))
    }

    /// Every cluster's state from one read of the fleet's record.
    fn describe_many(&self, targets: &[ClusterTarget]) -> Vec<Result<Described, ProviderError>> {
        let now = self.now_ms();
        let histories = match self.db().histories() {
            Ok(h) => h,
            Err(e) => return targets.iter().map(|_| Err(e.clone())).collect(),
        };
        targets
            .iter()
            .map(|t| {
                let c = self.cluster(t)?;
                let history = histories.get(&c.name).map_or(&[][..], Vec::as_slice);
                Ok(Self::state_at(c, history, now))
            })
            .collect()
    }

    /// Passes unless the cluster is busy with another upgrade (or stopped).
    fn preflight(
        &self,
        target: &ClusterTarget,
        upgrade: Option<&waverun_core::UpgradeOperation>,
        _timeout: std::time::Duration,
    ) -> Measurement {
        let _ = upgrade;
        self.judge(target, "pre-flight")
    }

    /// Passes unless the cluster is busy with an upgrade (or stopped).
    fn health(&self, target: &ClusterTarget, _timeout: std::time::Duration) -> Measurement {
        self.judge(target, "health")
    }

    fn start_upgrade(
        &self,
        target: &ClusterTarget,
        request: &UpgradeRequest,
    ) -> Result<Started, ProviderError> {
        let c = self.cluster(target)?;
        let now = self.now_ms();
        let mut db = self.db();
        db.begin(&c.name)?;
        let decided = self.decide(&mut db, c, request, now);
        db.end(decided.is_ok())?;
        decided
    }

    fn get_operation(
        &self,
        target: &ClusterTarget,
        idempotency_key: &str,
    ) -> Result<OperationReport, ProviderError> {
        self.cluster(target)?;
        let now = self.now_ms();
        match self.db().find(idempotency_key)? {
            Some(row) => Ok(Self::report(&row, now)),
            None => Err(ProviderError::new(
                ProviderErrorCode::NotFound,
                format!("no operation with key {idempotency_key:?}"),
            )),
        }
    }
}
