//! The plugin runtime against small guests written in WebAssembly text: well-behaved ones that
//! exercise the ABI glue, and hostile ones (endless loops, endless memory growth, the wrong ABI
//! version, foreign imports, broken results). The real plugin is tested in `runtime_plugin.rs`.

mod runtime_support;

use runtime_support::runtime;
use std::collections::BTreeMap;
use std::time::Duration;
use waverun_host::runtime::{
    CacheStatus, CallKind, InstanceConfig, ManualClock, MemoryLog, MemoryPersistence, Persistence,
    PluginError, PluginHost, PluginInstance, PluginLogLevel, PluginModule, PluginRuntime,
    QueueProvider, RuntimeConfig, TrapKind,
};

const OK: &str = r#"{"v":1,"ok":true,"result":{}}"#;
const EVENTS: &str = r#"{"v":1,"ok":true,"result":{"events":[]}}"#;
const ERR: &str = r#"{"v":1,"ok":false,"error":{"code":"InvalidField","message":"stages[0].name: must not be empty","path":"stages[0].name"}}"#;
const RECORD: &str = r#"{"seq":1,"now":"2026-01-01T00:00:00Z","input":"timeout"}"#;
/// A refused input that still fired a timer (ABI 5: the error envelope carries its events).
const ERR_EVENTS: &str = r#"{"v":1,"ok":false,"error":{"code":"InvalidState","message":"gate is already Completed"},"events":[{"at":"2026-12-07T01:00:00Z","kind":"GateCompleted","run":"r1","stage":"s","gateType":"Approval","timing":"Before","gateId":"r1/stage:s/before/0","by":"ops"}]}"#;
const OK_AT: u64 = 0x100;
const EVENTS_AT: u64 = 0x200;
const ERR_AT: u64 = 0x300;
const RECORD_AT: u64 = 0x400;
const ERR_EVENTS_AT: u64 = 0x500;
/// `storage_read` buffer of the reading guest.
const BUF_AT: u64 = 0x4000;

/// `(ptr << 32) | len` of a data segment.
fn packed(at: u64, s: &str) -> i64 {
    ((at << 32) | s.len() as u64) as i64
}

fn wat_str(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

const ABI_IMPORTS: &str = r#"
  (import "waverun_host_v2" "clock_now_ms" (func $clock (result i64)))
  (import "waverun_host_v2" "journal_append" (func $append (param i32 i32) (result i32)))
  (import "waverun_host_v2" "storage_read" (func $read (param i32 i32 i32) (result i32)))
  (import "waverun_host_v2" "log" (func $log (param i32 i32 i32)))"#;

/// A guest implementing the ABI exports trivially; `funcs` replaces (or, with an empty body,
/// removes) exports by name.
fn guest_wat(imports: &str, memory_pages: u32, funcs: &[(&str, &str)]) -> String {
    let mut f: BTreeMap<&str, String> = BTreeMap::new();
    f.insert(
        "waverun_abi_version",
        "(func (export \"waverun_abi_version\") (result i32) (i32.const 2))".into(),
    );
    f.insert(
        "waverun_alloc",
        "(func (export \"waverun_alloc\") (param i32) (result i32) (i32.const 32768))".into(),
    );
    f.insert(
        "waverun_free",
        "(func (export \"waverun_free\") (param i32 i32))".into(),
    );
    let ok = packed(OK_AT, OK);
    let ev = packed(EVENTS_AT, EVENTS);
    let err = packed(ERR_AT, ERR);
    f.insert(
        "waverun_init",
        format!("(func (export \"waverun_init\") (result i64) (i64.const {ok}))"),
    );
    f.insert(
        "waverun_request",
        format!(
            "(func (export \"waverun_request\") (param i32 i32) (result i64) (i64.const {ok}))"
        ),
    );
    f.insert(
        "waverun_deliver",
        format!(
            "(func (export \"waverun_deliver\") (param i32 i32) (result i64) (i64.const {ev}))"
        ),
    );
    f.insert(
        "waverun_wake",
        format!("(func (export \"waverun_wake\") (result i64) (i64.const {ev}))"),
    );
    f.insert(
        "waverun_status",
        format!(
            "(func (export \"waverun_status\") (param i32 i32) (result i64) (i64.const {err}))"
        ),
    );
    f.insert(
        "waverun_next_wakeup",
        "(func (export \"waverun_next_wakeup\") (result i64) (i64.const 1234))".into(),
    );
    for (name, body) in funcs {
        if body.is_empty() {
            f.remove(name);
        } else {
            f.insert(name, body.to_string());
        }
    }
    let mut wat = format!("(module {imports}\n  (memory (export \"memory\") {memory_pages})\n");
    for (at, s) in [
        (OK_AT, OK),
        (EVENTS_AT, EVENTS),
        (ERR_AT, ERR),
        (RECORD_AT, RECORD),
        (ERR_EVENTS_AT, ERR_EVENTS),
    ] {
        wat.push_str(&format!("  (data (i32.const {at}) \"{}\")\n", wat_str(s)));
    }
    for body in f.values() {
        wat.push_str("  ");
        wat.push_str(body);
        wat.push('\n');
    }
    wat.push(')');
    wat
}

fn guest(funcs: &[(&str, &str)]) -> Vec<u8> {
    wat::parse_str(guest_wat(ABI_IMPORTS, 1, funcs)).expect("valid wat")
}

fn host() -> PluginHost {
    PluginHost::new(
        ManualClock::new(0),
        QueueProvider::new(),
        MemoryPersistence::new(),
    )
}

fn instance(rt: &PluginRuntime, wasm: &[u8], config: InstanceConfig) -> PluginInstance {
    let plugin = rt.load(wasm).expect("load");
    let mut i = plugin.instantiate(host(), config).expect("instantiate");
    i.init().expect("init");
    i
}

fn fast_deadlines() -> InstanceConfig {
    let mut c = InstanceConfig::default();
    for k in [
        CallKind::Init,
        CallKind::Request,
        CallKind::Deliver,
        CallKind::Wake,
        CallKind::Query,
    ] {
        c.deadlines.set(k, Duration::from_millis(100));
    }
    c
}

fn trap_of(r: Result<impl std::fmt::Debug, PluginError>) -> waverun_host::runtime::Trap {
    match r {
        Err(PluginError::Trap(t)) => t,
        other => panic!("expected a trap, got {other:?}"),
    }
}

#[test]
fn runtime_types_can_cross_threads() {
    fn send<T: Send>() {}
    fn send_sync<T: Send + Sync>() {}
    send_sync::<PluginRuntime>();
    send_sync::<PluginModule>();
    send::<PluginInstance>();
}

#[test]
fn a_well_behaved_guest_answers_every_call() {
    let (rt, _dir) = runtime();
    let mut i = instance(&rt, &guest(&[]), InstanceConfig::default());
    i.ping().expect("ping");
    assert_eq!(
        i.request(&serde_json::json!({"type": "runs"})).unwrap(),
        serde_json::json!({})
    );
    assert!(i.wake().expect("wake").is_empty());
    assert_eq!(i.next_wakeup().expect("next wakeup"), Some(1234));
    assert!(!i.is_poisoned());
}

#[test]
fn an_endless_loop_hits_the_deadline_and_a_fresh_instance_works() {
    let (rt, _dir) = runtime();
    let wasm = guest(&[(
        "waverun_wake",
        "(func (export \"waverun_wake\") (result i64) (loop $l (br $l)) (unreachable))",
    )]);
    let mut i = instance(&rt, &wasm, fast_deadlines());
    let started = std::time::Instant::now();
    let t = trap_of(i.wake());
    assert_eq!(t.kind, TrapKind::Deadline, "{t:?}");
    assert_eq!(t.call, CallKind::Wake);
    assert!(!t.journaled);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the deadline is 100 ms"
    );
    assert!(i.is_poisoned());
    assert!(matches!(i.ping(), Err(PluginError::Poisoned)));
    i.recover().expect("recover");
    i.ping().expect("the fresh instance answers");
    // A second instance of the same plugin was never affected.
    let mut other = instance(&rt, &wasm, fast_deadlines());
    other.ping().expect("ping");
}

#[test]
fn deadlines_hold_after_the_runtime_handle_is_dropped() {
    let (rt, _dir) = runtime();
    let wasm = guest(&[(
        "waverun_wake",
        "(func (export \"waverun_wake\") (result i64) (loop $l (br $l)) (unreachable))",
    )]);
    let mut i = instance(&rt, &wasm, fast_deadlines());
    drop(rt); // the epoch ticker lives on with the instance
    assert_eq!(trap_of(i.wake()).kind, TrapKind::Deadline);
}

#[test]
fn a_zero_deadline_traps_the_next_call_only() {
    let (rt, _dir) = runtime();
    let mut i = instance(&rt, &guest(&[]), InstanceConfig::default());
    i.set_next_deadline(Duration::ZERO);
    assert_eq!(trap_of(i.ping()).kind, TrapKind::Deadline);
    i.recover().expect("recover");
    i.ping().expect("the next call has the normal deadline");
}

#[test]
fn endless_memory_growth_hits_the_memory_limit() {
    let (rt, _dir) = runtime();
    let wasm = guest(&[(
        "waverun_wake",
        &format!(
            "(func (export \"waverun_wake\") (result i64) \
             (loop $l (br_if $l (i32.ne (memory.grow (i32.const 16)) (i32.const -1)))) \
             (i64.const {}))",
            packed(EVENTS_AT, EVENTS)
        ),
    )]);
    let config = InstanceConfig {
        memory_limit: 8 << 20,
        ..fast_deadlines()
    };
    let mut i = instance(&rt, &wasm, config);
    let t = trap_of(i.wake());
    assert_eq!(t.kind, TrapKind::MemoryLimit, "{t:?}");
    assert!(matches!(i.wake(), Err(PluginError::Poisoned)));
    i.recover().expect("recover");
    i.ping().expect("the fresh instance answers");
}

#[test]
fn a_module_needing_more_memory_than_the_limit_is_refused_at_instantiation() {
    let (rt, _dir) = runtime();
    let wasm = wat::parse_str(guest_wat(ABI_IMPORTS, 64, &[])).unwrap(); // 4 MiB
    let plugin = rt.load(&wasm).expect("load");
    let config = InstanceConfig {
        memory_limit: 1 << 20,
        ..InstanceConfig::default()
    };
    match plugin.instantiate(host(), config) {
        Err(PluginError::Trap(t)) => {
            assert_eq!(t.kind, TrapKind::MemoryLimit);
            assert_eq!(t.call, CallKind::Instantiate);
        }
        Err(e) => panic!("expected a memory-limit trap, got {e}"),
        Ok(_) => panic!("expected a memory-limit trap"),
    }
}

#[test]
fn the_wrong_abi_version_is_refused() {
    let (rt, _dir) = runtime();
    let wasm = guest(&[(
        "waverun_abi_version",
        "(func (export \"waverun_abi_version\") (result i32) (i32.const 1))",
    )]);
    let plugin = rt.load(&wasm).expect("the module itself is fine");
    match plugin.instantiate(host(), InstanceConfig::default()) {
        Err(PluginError::Incompatible(m)) => {
            assert!(m.contains("version 1"), "{m}");
            assert!(m.contains("version 2"), "{m}");
        }
        Err(e) => panic!("expected Incompatible, got {e}"),
        Ok(_) => panic!("a version-1 module was accepted"),
    }
}

#[test]
fn a_module_of_abi_v1_is_refused_by_its_import_module() {
    let (rt, _dir) = runtime();
    let imports = ABI_IMPORTS.replace("waverun_host_v2", "waverun_host_v1");
    let wasm = wat::parse_str(guest_wat(&imports, 1, &[])).unwrap();
    match rt.load(&wasm) {
        Err(e @ PluginError::Incompatible(_)) => {
            let m = e.to_string();
            assert!(m.contains("waverun_host_v1"), "{m}");
            assert!(m.contains("waverun_host_v2"), "{m}");
        }
        Err(e) => panic!("expected Incompatible, got {e}"),
        Ok(_) => panic!("a module of ABI v1 was accepted"),
    }
}

#[test]
fn an_import_outside_the_abi_is_refused_with_its_name() {
    let (rt, _dir) = runtime();
    let imports = format!("{ABI_IMPORTS}\n  (import \"env\" \"abort\" (func (param i32)))");
    let wasm = wat::parse_str(guest_wat(&imports, 1, &[])).unwrap();
    match rt.load(&wasm) {
        Err(e @ PluginError::Incompatible(_)) => {
            let m = e.to_string();
            assert!(m.contains("`env::abort`"), "{m}");
            assert!(m.contains("waverun_host_v2"), "{m}");
        }
        Err(e) => panic!("expected Incompatible, got {e}"),
        Ok(_) => panic!("a module importing env::abort was accepted"),
    }
    // An ABI import name from a later version is refused the same way.
    let imports = format!(
        "{ABI_IMPORTS}\n  (import \"waverun_host_v2\" \"cluster_cancel\" (func (param i32 i32) (result i32)))"
    );
    let wasm = wat::parse_str(guest_wat(&imports, 1, &[])).unwrap();
    let e = rt.load(&wasm).err().expect("refused");
    assert!(e.to_string().contains("cluster_cancel"), "{e}");
}

#[test]
fn an_abi_import_with_the_wrong_type_is_refused() {
    let (rt, _dir) = runtime();
    let imports = r#"(import "waverun_host_v2" "clock_now_ms" (func (result i32)))"#;
    let wasm = wat::parse_str(guest_wat(imports, 1, &[])).unwrap();
    match rt.load(&wasm) {
        Err(e @ PluginError::Incompatible(_)) => {
            assert!(e.to_string().contains("clock_now_ms"), "{e}")
        }
        Err(e) => panic!("expected Incompatible, got {e}"),
        Ok(_) => panic!("a mistyped import was accepted"),
    }
}

#[test]
fn a_missing_export_is_refused_with_its_name() {
    let (rt, _dir) = runtime();
    let plugin = rt.load(&guest(&[("waverun_wake", "")])).expect("load");
    match plugin.instantiate(host(), InstanceConfig::default()) {
        Err(e @ PluginError::Incompatible(_)) => {
            assert!(e.to_string().contains("waverun_wake"), "{e}")
        }
        Err(e) => panic!("expected Incompatible, got {e}"),
        Ok(_) => panic!("accepted"),
    }
}

#[test]
fn guest_errors_are_not_traps() {
    let (rt, _dir) = runtime();
    let wasm = guest(&[(
        "waverun_request",
        &format!(
            "(func (export \"waverun_request\") (param i32 i32) (result i64) (i64.const {}))",
            packed(ERR_AT, ERR)
        ),
    )]);
    let mut i = instance(&rt, &wasm, InstanceConfig::default());
    match i.ping() {
        Err(PluginError::Guest(g)) => {
            assert_eq!(g.code, "InvalidField");
            assert_eq!(g.path.as_deref(), Some("stages[0].name"));
            assert_eq!(g.message, "stages[0].name: must not be empty");
        }
        other => panic!("expected a guest error, got {other:?}"),
    }
    assert!(!i.is_poisoned());
    assert_eq!(i.wake().unwrap(), vec![]);

    let wasm = guest(&[(
        "waverun_request",
        &format!(
            "(func (export \"waverun_request\") (param i32 i32) (result i64) (i64.const {}))",
            packed(ERR_EVENTS_AT, ERR_EVENTS)
        ),
    )]);
    let mut i = instance(&rt, &wasm, InstanceConfig::default());
    match i.ping() {
        Err(PluginError::Guest(g)) => {
            assert_eq!(g.code, "InvalidState");
            assert_eq!(g.path, None);
            assert_eq!(g.events.len(), 1);
            assert_eq!(g.events[0].kind(), waverun_core::EventKind::GateCompleted);
        }
        other => panic!("expected a guest error, got {other:?}"),
    }
}

#[test]
fn a_guest_panic_is_an_unreachable_trap() {
    let (rt, _dir) = runtime();
    let wasm = guest(&[(
        "waverun_request",
        "(func (export \"waverun_request\") (param i32 i32) (result i64) (unreachable))",
    )]);
    let mut i = instance(&rt, &wasm, InstanceConfig::default());
    let t = trap_of(i.ping());
    assert_eq!(t.kind, TrapKind::Unreachable);
    assert_eq!(t.call, CallKind::Request);
}

#[test]
fn endless_recursion_is_a_stack_overflow_trap() {
    let (rt, _dir) = runtime();
    let wasm = guest(&[
        (
            "waverun_wake",
            "(func (export \"waverun_wake\") (result i64) (call $deep))",
        ),
        ("zz_deep", "(func $deep (result i64) (call $deep))"),
    ]);
    let mut i = instance(&rt, &wasm, InstanceConfig::default());
    assert_eq!(trap_of(i.wake()).kind, TrapKind::StackOverflow);
}

#[test]
fn results_outside_the_guest_memory_are_protocol_errors() {
    let (rt, _dir) = runtime();
    let bad = ((0xFFFF_0000u64 << 32) | 100) as i64;
    let wasm = guest(&[(
        "waverun_request",
        &format!(
            "(func (export \"waverun_request\") (param i32 i32) (result i64) (i64.const {bad}))"
        ),
    )]);
    let mut i = instance(&rt, &wasm, InstanceConfig::default());
    match i.ping() {
        Err(PluginError::Protocol(m)) => assert!(m.contains("outside"), "{m}"),
        other => panic!("expected a protocol error, got {other:?}"),
    }
    assert!(i.is_poisoned(), "a broken guest is not called again");
    // Not an envelope.
    let wasm = guest(&[(
        "waverun_request",
        &format!(
            "(func (export \"waverun_request\") (param i32 i32) (result i64) (i64.const {}))",
            packed(RECORD_AT, RECORD)
        ),
    )]);
    let mut i = instance(&rt, &wasm, InstanceConfig::default());
    assert!(matches!(i.ping(), Err(PluginError::Protocol(_))));
}

#[test]
fn an_out_of_bounds_import_buffer_traps_in_the_host() {
    let (rt, _dir) = runtime();
    let wasm = guest(&[(
        "waverun_request",
        "(func (export \"waverun_request\") (param i32 i32) (result i64) \
         (call $log (i32.const 2) (i32.const -256) (i32.const 1000)) (unreachable))",
    )]);
    let mut i = instance(&rt, &wasm, InstanceConfig::default());
    let t = trap_of(i.ping());
    assert_eq!(t.kind, TrapKind::Host);
    assert!(t.message.contains("outside the guest's memory"), "{t:?}");
}

fn appending_guest(then: &str) -> Vec<u8> {
    guest(&[(
        "waverun_wake",
        &format!(
            "(func (export \"waverun_wake\") (result i64) \
             (if (result i64) (i32.eqz (call $append (i32.const {RECORD_AT}) (i32.const {}))) \
               (then {then}) (else (i64.const {}))))",
            RECORD.len(),
            packed(ERR_AT, ERR)
        ),
    )])
}

#[test]
fn journal_append_reaches_persistence_and_reports_durability() {
    let (rt, _dir) = runtime();
    let store = MemoryPersistence::new();
    let plugin = rt
        .load(&appending_guest(&format!(
            "(i64.const {})",
            packed(EVENTS_AT, EVENTS)
        )))
        .unwrap();
    let mut i = plugin
        .instantiate(
            PluginHost::new(ManualClock::new(0), QueueProvider::new(), store.clone()),
            InstanceConfig::default(),
        )
        .unwrap();
    i.wake().expect("durable");
    assert_eq!(store.records(), vec![RECORD.to_string()]);
    assert_eq!(store.last_seq(), 1);
    store.fail_appends(true);
    // The guest sees a non-zero answer and refuses.
    assert!(matches!(i.wake(), Err(PluginError::Guest(_))));
    assert_eq!(store.journal_len(), 1);
}

#[test]
fn a_trap_after_a_durable_append_is_reported_as_journaled() {
    let (rt, _dir) = runtime();
    let mut i = instance(
        &rt,
        &appending_guest("(unreachable)"),
        InstanceConfig::default(),
    );
    let t = trap_of(i.wake());
    assert!(t.journaled, "{t:?}");
    // And the fault-injection hook does the same to a healthy guest.
    let mut i = instance(
        &rt,
        &appending_guest(&format!("(i64.const {})", packed(EVENTS_AT, EVENTS))),
        InstanceConfig::default(),
    );
    i.inject_trap_after_next_append();
    let t = trap_of(i.wake());
    assert_eq!(t.kind, TrapKind::Host);
    assert!(t.journaled);
    i.recover().unwrap();
    i.wake().expect("the hook fires once");
}

#[test]
fn storage_read_hands_back_snapshot_and_journal() {
    // init: len = storage_read(kind, buf, 0); storage_read(kind, buf, len); log(kind + 2, buf, len)
    let read = |kind: i32| {
        format!(
            "(local.set $n (call $read (i32.const {kind}) (i32.const {BUF_AT}) (i32.const 0))) \
             (if (i32.gt_s (local.get $n) (i32.const 0)) (then \
               (drop (call $read (i32.const {kind}) (i32.const {BUF_AT}) (local.get $n))) \
               (call $log (i32.const {}) (i32.const {BUF_AT}) (local.get $n))))",
            kind + 2
        )
    };
    let wasm = guest(&[(
        "waverun_init",
        &format!(
            "(func (export \"waverun_init\") (result i64) (local $n i32) {} {} (i64.const {}))",
            read(0),
            read(1),
            packed(OK_AT, OK)
        ),
    )]);
    let (rt, _dir) = runtime();
    let plugin = rt.load(&wasm).unwrap();

    // Nothing stored: no log lines.
    let log = MemoryLog::default();
    let mut i = plugin
        .instantiate(
            PluginHost::new(
                ManualClock::new(0),
                QueueProvider::new(),
                MemoryPersistence::new(),
            )
            .with_log(log.clone()),
            InstanceConfig::default(),
        )
        .unwrap();
    i.init().unwrap();
    assert!(log.lines().is_empty());

    let mut store = MemoryPersistence::new();
    for seq in 1..=4 {
        let r = format!(r#"{{"seq":{seq},"now":"2026-01-01T00:00:00Z","input":"timeout"}}"#);
        store.append(seq, r.as_bytes()).unwrap();
    }
    store
        .write_snapshot(2, br#"{"v":1,"journalSeq":2,"engine":{}}"#)
        .unwrap();
    // The snapshot made records 1 and 2 droppable; the memory store drops them.
    assert_eq!(store.journal_len(), 2);
    let log = MemoryLog::default();
    let mut i = plugin
        .instantiate(
            PluginHost::new(ManualClock::new(0), QueueProvider::new(), store.clone())
                .with_log(log.clone()),
            InstanceConfig::default(),
        )
        .unwrap();
    i.init().unwrap();
    let lines = log.lines();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(
        lines[0],
        (
            PluginLogLevel::Info,
            r#"{"v":1,"journalSeq":2,"engine":{}}"#.to_string()
        )
    );
    assert_eq!(lines[1].0, PluginLogLevel::Warn);
    assert_eq!(lines[1].1, store.records().join("\n"));
    // recover() reads the same storage again.
    i.recover().unwrap();
    assert_eq!(log.lines().len(), 4);
}

#[test]
fn a_second_load_is_a_cache_hit() {
    let dir = tempfile::tempdir().unwrap();
    let config = RuntimeConfig::with_cache(dir.path());
    let wasm = guest(&[]);
    let rt = PluginRuntime::new(config.clone()).unwrap();
    let first = rt.load(&wasm).unwrap();
    assert_eq!(
        first.cache_status(),
        &CacheStatus::Compiled { stored: true }
    );
    let path = rt.cache_path(&wasm).unwrap();
    assert!(path.exists());
    assert!(path
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with(first.sha256()));
    let second = rt.load(&wasm).unwrap();
    assert_eq!(second.cache_status(), &CacheStatus::Hit);
    // Another runtime (another process, say) over the same directory.
    let rt2 = PluginRuntime::new(config).unwrap();
    let third = rt2.load(&wasm).unwrap();
    assert_eq!(third.cache_status(), &CacheStatus::Hit);
    let mut i = third
        .instantiate(host(), InstanceConfig::default())
        .unwrap();
    i.init().unwrap();
    i.ping().unwrap();
    // Different bytes, different entry.
    let other = guest(&[(
        "waverun_next_wakeup",
        "(func (export \"waverun_next_wakeup\") (result i64) (i64.const -1))",
    )]);
    assert_eq!(
        rt2.load(&other).unwrap().cache_status(),
        &CacheStatus::Compiled { stored: true }
    );
    // No temporary files left behind.
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty());
}

#[test]
fn a_corrupt_cache_file_is_recompiled() {
    let dir = tempfile::tempdir().unwrap();
    let rt = PluginRuntime::new(RuntimeConfig::with_cache(dir.path())).unwrap();
    let wasm = guest(&[]);
    rt.load(&wasm).unwrap();
    let path = rt.cache_path(&wasm).unwrap();
    let digest = {
        let mut p = path.clone().into_os_string();
        p.push(".sha256");
        std::path::PathBuf::from(p)
    };
    let good = std::fs::read(&path).unwrap();

    let check = |what: &str| {
        let p = rt.load(&wasm).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(
            matches!(
                p.cache_status(),
                CacheStatus::Recompiled { stored: true, .. }
            ),
            "{what}: {:?}",
            p.cache_status()
        );
        let mut i = p.instantiate(host(), InstanceConfig::default()).unwrap();
        i.init().unwrap();
        i.ping().unwrap();
        assert_eq!(rt.load(&wasm).unwrap().cache_status(), &CacheStatus::Hit);
    };

    // Garbage.
    std::fs::write(&path, b"not a precompiled module").unwrap();
    check("garbage");
    // Truncated.
    std::fs::write(&path, &good[..good.len() / 2]).unwrap();
    check("truncated");
    // One flipped byte in the middle (the digest catches what wasmtime's header check may not).
    let mut flipped = good.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0xff;
    std::fs::write(&path, &flipped).unwrap();
    check("flipped byte");
    // Garbage with a matching digest: wasmtime's own checks refuse it.
    std::fs::write(&path, b"garbage with a matching digest").unwrap();
    std::fs::write(
        &digest,
        waverun_host::runtime::cache::sha256_hex(b"garbage with a matching digest"),
    )
    .unwrap();
    check("garbage with digest");
    // Digest missing.
    std::fs::remove_file(&digest).unwrap();
    check("no digest");
    // Unwritable cache: still loads, just not stored.
    let ro = tempfile::tempdir().unwrap();
    let rt_ro = PluginRuntime::new(RuntimeConfig::with_cache(ro.path().join("c"))).unwrap();
    std::fs::remove_dir(ro.path().join("c")).unwrap();
    std::fs::write(ro.path().join("c"), b"a file where the directory was").unwrap();
    let p = rt_ro.load(&wasm).unwrap();
    assert_eq!(p.cache_status(), &CacheStatus::Compiled { stored: false });
}

#[test]
fn without_a_cache_directory_modules_are_compiled_in_memory() {
    let rt = PluginRuntime::new(RuntimeConfig::default()).unwrap();
    let p = rt.load(&guest(&[])).unwrap();
    assert_eq!(p.cache_status(), &CacheStatus::Disabled);
    assert!(rt.cache_path(&guest(&[])).is_none());
}

#[test]
fn invalid_wasm_is_a_load_error() {
    let (rt, _dir) = runtime();
    assert!(matches!(
        rt.load(b"\0asm\x01\0\0\0garbage"),
        Err(PluginError::Load(_))
    ));
}

#[test]
fn observations_go_out_in_the_abi_wire_form() {
    use waverun_core::Observation;
    use waverun_host::runtime::wire_observation;
    assert_eq!(
        wire_observation(&Observation::UpgradeSucceeded {
            operation_id: "r/m".into()
        }),
        serde_json::json!({"type": "upgradeSucceeded", "operationId": "r/m"})
    );
    let v = wire_observation(&Observation::MemberObserved {
        name: "m".into(),
        kubernetes_version: "1.31.2".into(),
        node_pools: vec![],
    });
    assert_eq!(v["type"], "memberObserved");
    assert_eq!(v["kubernetesVersion"], "1.31.2");
    assert!(v.get("nodePools").is_some(), "{v}");
}
