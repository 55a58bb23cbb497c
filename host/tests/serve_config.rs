//! `waverun serve`'s configuration: the shipped example reads; unknown keys, bad values and an
//! unprotected non-loopback listener are refused with the field named; the environment and
//! flags override the file.

use std::path::PathBuf;
use waverun_host::serve::{Overrides, ResolvedProvider, ServeConfig};

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn write(dir: &tempfile::TempDir, text: &str) -> PathBuf {
    let p = dir.path().join("waverun.yaml");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn the_example_config_reads() {
    let c = ServeConfig::resolve(
        Some(&workspace().join("host/examples/waverun.yaml")),
        Overrides::default(),
    )
    .unwrap();
    assert_eq!(c.listen.to_string(), "127.0.0.1:7700");
    assert_eq!(c.fleet, "default");
    assert_eq!(c.tokens.len(), 2);
    assert_eq!(c.time_scale, 1.0);
    let fleet_file = c.fleet_file.expect("the example names a fleet file");
    assert!(fleet_file.is_file(), "{}", fleet_file.display());
}

#[test]
fn relative_paths_in_the_file_are_relative_to_the_file_and_flags_to_the_working_directory() {
    let dir = tempfile::tempdir().unwrap();
    let text = "dataDir: data\nfleetFile: fleets/f.yaml\nproviders:\n  a: {type: exec, command: [bin/adapter, x], \
                secretEnv: {T: {fromFile: secrets/t}}}\n  b: {type: exec, command: [adapter]}\n";
    let c = ServeConfig::resolve(Some(&write(&dir, text)), Overrides::default()).unwrap();
    assert_eq!(c.data_dir, dir.path().join("data"));
    assert_eq!(c.fleet_file, Some(dir.path().join("fleets/f.yaml")));
    let exec = |name: &str| match &c.providers[name] {
        ResolvedProvider::Exec { config, .. } => config.clone(),
        other => panic!("{name}: {other:?}"),
    };
    let a = exec("a");
    assert_eq!(
        PathBuf::from(&a.command[0]),
        dir.path().join("bin/adapter"),
        "a program path is the file's"
    );
    assert_eq!(a.command[1], "x", "arguments are left alone");
    assert_eq!(
        a.secret_env["T"],
        waverun_host::providers::SecretSource::FromFile(dir.path().join("secrets/t"))
    );
    assert_eq!(
        exec("b").command[0],
        "adapter",
        "a bare program name is looked up on PATH"
    );
    let flags = Overrides {
        data_dir: Some(PathBuf::from("elsewhere")),
        fleet_file: Some(PathBuf::from("f2.yaml")),
        ..Overrides::default()
    };
    let c = ServeConfig::resolve(Some(&write(&dir, text)), flags).unwrap();
    assert_eq!(c.data_dir, PathBuf::from("elsewhere"));
    assert_eq!(c.fleet_file, Some(PathBuf::from("f2.yaml")));
}

#[test]
fn unknown_keys_and_bad_values_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let e = ServeConfig::resolve(
        Some(&write(&dir, "listn: 127.0.0.1:1\n")),
        Overrides::default(),
    )
    .unwrap_err();
    assert!(e.contains("listn") && e.contains("listen"), "{e}");
    let e = ServeConfig::resolve(
        Some(&write(&dir, "listen: nowhere\n")),
        Overrides::default(),
    )
    .unwrap_err();
    assert!(e.contains("listen") && e.contains("ADDR:PORT"), "{e}");
    let e = ServeConfig::resolve(Some(&write(&dir, "timeScale: 0\n")), Overrides::default())
        .unwrap_err();
    assert!(e.contains("timeScale"), "{e}");
    let e = ServeConfig::resolve(
        Some(&write(&dir, "fleet: Not_A_Name\n")),
        Overrides::default(),
    )
    .unwrap_err();
    assert!(e.contains("fleet"), "{e}");
    let bad_token = "tokens:\n- {name: a, role: viewer, sha256: abc}\n";
    let e = ServeConfig::resolve(Some(&write(&dir, bad_token)), Overrides::default()).unwrap_err();
    assert!(e.contains("tokens[0].sha256"), "{e}");
    let bad_role = "tokens:\n- {name: a, role: god, sha256: abc}\n";
    let e = ServeConfig::resolve(Some(&write(&dir, bad_role)), Overrides::default()).unwrap_err();
    assert!(e.contains("role"), "{e}");
}

#[test]
fn without_tokens_only_a_loopback_address_is_accepted() {
    let e = ServeConfig::resolve(
        None,
        Overrides {
            listen: Some("0.0.0.0:7700".to_string()),
            ..Overrides::default()
        },
    )
    .unwrap_err();
    assert!(e.contains("loopback") && e.contains("tokens"), "{e}");
    let ok = ServeConfig::resolve(
        None,
        Overrides {
            listen: Some("[::1]:7700".to_string()),
            ..Overrides::default()
        },
    );
    assert!(ok.is_ok(), "{ok:?}");
}

#[test]
fn flags_override_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        &dir,
        "listen: 127.0.0.1:1000\nfleet: from-file\ntimeScale: 5\n",
    );
    let c = ServeConfig::resolve(
        Some(&file),
        Overrides {
            listen: Some("127.0.0.1:2000".to_string()),
            fleet: Some("from-flag".to_string()),
            ..Overrides::default()
        },
    )
    .unwrap();
    assert_eq!(c.listen.port(), 2000);
    assert_eq!(c.fleet, "from-flag");
    assert_eq!(c.time_scale, 5.0);
}

#[test]
fn providers_and_members_are_checked_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let refused = |text: &str| {
        ServeConfig::resolve(Some(&write(&dir, text)), Overrides::default()).unwrap_err()
    };
    let e = refused("providers:\n  gke: {type: exec, command: [a], comand: [b]}\n");
    assert!(
        e.contains("providers.gke") && e.contains("comand") && e.contains("command"),
        "{e}"
    );
    let e = refused("providers:\n  gke: {type: ssh, command: [a]}\n");
    assert!(e.contains("providers.gke") && e.contains("type"), "{e}");
    let e = refused("providers:\n  simulated: {type: exec, command: [a]}\n");
    assert!(
        e.contains("providers.simulated") && e.contains("built-in"),
        "{e}"
    );
    let e = refused("providers:\n  gke: {type: exec, command: []}\n");
    assert!(e.contains("providers.gke.command"), "{e}");
    let e = refused("providers:\n  gke: {type: exec, command: [a], timeouts: {describe: -1}}\n");
    assert!(e.contains("providers.gke.timeouts.describe"), "{e}");
    let e =
        refused("providers:\n  gke: {type: exec, command: [a], secretEnv: {T: {fromVault: x}}}\n");
    assert!(e.contains("providers.gke: secretEnv.T"), "{e}");
    let e = refused("members:\n- {name: a, provider: gke}\n");
    assert!(
        e.contains("members[0].provider") && e.contains("simulated"),
        "{e}"
    );
    let e =
        refused("members:\n- {name: a, provider: simulated}\n- {name: a, provider: simulated}\n");
    assert!(e.contains("members[1].name"), "{e}");
    let e = refused("members:\n- {name: a, provider: simulated, grup: x}\n");
    assert!(e.contains("members[0].grup"), "{e}");
    let e = refused("observeIntervalSeconds: 0\n");
    assert!(e.contains("observeIntervalSeconds"), "{e}");
    let ok = "providers:\n  gke:\n    type: exec\n    command: [/bin/adapter, --flag]\n    secretEnv: {T: {fromFile: /run/t}}\n    timeouts: {startUpgrade: 60}\nmembers:\n- {name: a, provider: gke, clusterRef: {cluster: a}, group: g}\nobserveIntervalSeconds: 60\n";
    let c = ServeConfig::resolve(Some(&write(&dir, ok)), Overrides::default()).unwrap();
    let ResolvedProvider::Exec { timeouts, .. } = &c.providers["gke"] else {
        panic!("an exec provider")
    };
    assert_eq!(timeouts.start_upgrade.as_secs(), 60);
    assert_eq!(timeouts.describe.as_secs(), 30);
    assert_eq!(c.members[0].group.as_deref(), Some("g"));
    assert_eq!(c.observe_interval.as_secs(), 60);
}

#[test]
fn a_non_loopback_listener_needs_tls_or_insecure_http_and_refuses_example_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let strong = waverun_host::api::token_hash("f3b1c2d4e5a6978812345678abcdef0123456789");
    let text = format!("tokens: [{{name: ops, role: admin, sha256: {strong}}}]\n");
    let on = |listen: &str, insecure: bool, text: &str| {
        ServeConfig::resolve(
            Some(&write(&dir, text)),
            Overrides {
                listen: Some(listen.to_string()),
                insecure_http: insecure,
                ..Overrides::default()
            },
        )
    };
    let e = on("0.0.0.0:7700", false, &text).unwrap_err();
    assert!(
        e.contains("no tls is configured") && e.contains("--insecure-http"),
        "{e}"
    );
    let c = on("0.0.0.0:7700", true, &text).unwrap();
    assert!(c.insecure_http && c.tls.is_none());
    let with_tls = format!("{text}tls: {{certFile: tls.pem, keyFile: tls.key}}\n");
    let c = on("0.0.0.0:7700", false, &with_tls).unwrap();
    let tls = c.tls.expect("tls is configured");
    assert_eq!(tls.cert, dir.path().join("tls.pem"), "relative to the file");
    // The example file's tokens ("test", "test2") are refused on the network, by index.
    let weak = format!(
        "tokens: [{{name: ops, role: admin, sha256: {strong}}}, {{name: x, role: viewer, sha256: {}}}]\n",
        waverun_host::api::token_hash("test")
    );
    let e = on("0.0.0.0:7700", true, &weak).unwrap_err();
    assert!(
        e.starts_with("tokens[1].sha256:") && e.contains("\"test\""),
        "{e}"
    );
    // ... and accepted on loopback.
    assert!(on("127.0.0.1:7700", false, &weak).is_ok());
}

#[test]
fn limits_and_the_public_url_are_checked_with_their_field_named() {
    let dir = tempfile::tempdir().unwrap();
    for (text, field) in [
        ("limits: {connections: 0}\n", "limits.connections"),
        (
            "limits: {headerReadSeconds: -1}\n",
            "limits.headerReadSeconds",
        ),
        ("limits: {streamsPerToken: 0}\n", "limits.streamsPerToken"),
        ("publicUrl: ftp://x.example\n", "publicUrl"),
        ("publicUrl: https://x.example/api?x=1\n", "publicUrl"),
        ("publicUrl: https://user@x.example\n", "publicUrl"),
    ] {
        let e = ServeConfig::resolve(Some(&write(&dir, text)), Overrides::default()).unwrap_err();
        assert!(e.starts_with(field), "{text}: {e}");
    }
    let e = ServeConfig::resolve(
        Some(&write(&dir, "limits: {conections: 5}\n")),
        Overrides::default(),
    )
    .unwrap_err();
    assert!(
        e.contains("limits.conections") || e.contains("conections"),
        "{e}"
    );
    let c = ServeConfig::resolve(
        Some(&write(
            &dir,
            "publicUrl: https://waverun.example.com/\nlimits: {connections: 10, headerReadSeconds: 2.5}\n",
        )),
        Overrides::default(),
    )
    .unwrap();
    assert_eq!(c.public_url.as_deref(), Some("https://waverun.example.com"));
    assert_eq!(c.limits.connections, 10);
    assert_eq!(c.limits.header_read, std::time::Duration::from_millis(2500));
}

#[test]
fn an_aks_provider_takes_its_auth_and_limits_and_refuses_typos_and_limits_above_arms() {
    let dir = tempfile::tempdir().unwrap();
    let ok = "providers:\n  azure:\n    type: aks\n    auth: {method: clientSecret, tenantId: t, clientId: c, clientSecretFile: secrets/app}\n    limits: {writesPerSecond: 0.1}\n    pollIntervalSeconds: 5\nmembers:\n- {name: a, provider: azure, clusterResourceId: /subscriptions/0b1e0f3a-0000-4000-8000-000000000001/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/a}\n";
    let c = ServeConfig::resolve(Some(&write(&dir, ok)), Overrides::default()).unwrap();
    let ResolvedProvider::Aks(aks) = &c.providers["azure"] else {
        panic!("an aks provider")
    };
    assert_eq!(
        aks.auth.client_secret_file,
        Some(dir.path().join("secrets/app")),
        "the secret file is relative to the config file"
    );
    assert_eq!(aks.poll_interval_seconds, Some(5));
    let refused = |text: &str| {
        ServeConfig::resolve(Some(&write(&dir, text)), Overrides::default()).unwrap_err()
    };
    let e = refused("providers:\n  azure: {type: aks, auth: {metod: clientSecret}}\n");
    assert!(e.contains("providers.azure: auth.metod"), "{e}");
    let e = refused("providers:\n  azure: {type: aks, limits: {writesPerSecond: 50}}\n");
    assert!(e.contains("providers.azure.limits.writesPerSecond"), "{e}");
    let e = refused("providers:\n  azure: {type: aks}\nmembers:\n- {name: a, provider: azure, clusterResourceId: /subscriptions/s1/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/a}\n");
    assert!(
        e.contains("members[0].clusterResourceId") && e.contains("not a GUID"),
        "{e}"
    );
    let e = refused("providers:\n  azure: {type: aks}\nmembers:\n- {name: a, provider: azure}\n");
    assert!(e.contains("members[0].clusterResourceId: missing"), "{e}");
    let e = refused("providers:\n  azure: {type: aks, clientSecret: hunter2}\n");
    assert!(e.contains("clientSecret") && !e.contains("hunter2"), "{e}");
}

#[test]
fn the_health_checks_section_reads_with_paths_relative_to_the_file_and_refuses_unknown_keys() {
    let dir = tempfile::tempdir().unwrap();
    let text = "healthChecks:\n  prometheus: {url: \"https://prom.example:9090\", caFile: certs/ca.pem, secret: prom}\n  \
                secrets:\n    prom: {origins: [\"https://prom.example:9090\"], headers: {Authorization: {fromFile: secrets/prom}}}\n    \
                hooks: {origins: [\"https://hooks.example\"], headers: {X-Api-Key: {fromEnv: HOOK_KEY}}}\n  \
                exec: {allow: [/usr/local/bin/smoke], stateDir: state/health}\n";
    let c = ServeConfig::resolve(Some(&write(&dir, text)), Overrides::default()).unwrap();
    let h = &c.health_checks;
    let p = h.prometheus.as_ref().expect("prometheus");
    assert_eq!(p.ca_file, Some(dir.path().join("certs/ca.pem")));
    assert_eq!(
        h.secrets["prom"].headers["Authorization"],
        waverun_host::providers::SecretSource::FromFile(dir.path().join("secrets/prom"))
    );
    assert_eq!(
        h.secrets["hooks"].headers["X-Api-Key"],
        waverun_host::providers::SecretSource::FromEnv("HOOK_KEY".to_string())
    );
    assert_eq!(h.exec.allow, vec![PathBuf::from("/usr/local/bin/smoke")]);
    assert_eq!(h.exec.state_dir, Some(dir.path().join("state/health")));
    // Absent: the default (nothing configured).
    let c = ServeConfig::resolve(Some(&write(&dir, "fleet: f\n")), Overrides::default()).unwrap();
    assert!(c.health_checks.prometheus.is_none() && c.health_checks.secrets.is_empty());

    let e = ServeConfig::resolve(
        Some(&write(
            &dir,
            "healthChecks:\n  prometheus: {url: \"http://127.0.0.1:9090\", tiemout: 3}\n",
        )),
        Overrides::default(),
    )
    .unwrap_err();
    assert!(
        e.contains("healthChecks.prometheus") && e.contains("tiemout"),
        "{e}"
    );
    let e = ServeConfig::resolve(
        Some(&write(
            &dir,
            "healthChecks:\n  promethues: {url: \"http://127.0.0.1:9090\"}\n",
        )),
        Overrides::default(),
    )
    .unwrap_err();
    assert!(
        e.contains("healthChecks") && e.contains("promethues"),
        "{e}"
    );
    // The checker's own rules, with the field named.
    let e = ServeConfig::resolve(
        Some(&write(
            &dir,
            "healthChecks:\n  exec: {allow: [bin/smoke]}\n",
        )),
        Overrides::default(),
    )
    .unwrap_err();
    assert!(e.contains("healthChecks.exec.allow[0]"), "{e}");
    let e = ServeConfig::resolve(
        Some(&write(&dir, "healthChecks:\n  secrets:\n    s: {origins: [\"http://hooks.example\"], headers: {X: {fromEnv: V}}}\n")),
        Overrides::default(),
    )
    .unwrap_err();
    assert!(e.contains("healthChecks.secrets.s.origins[0]"), "{e}");
}

#[test]
fn webhooks_settings_are_checked_and_their_secrets_read_relative_to_the_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("pager.secret"),
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("short.secret"), "whsec_c2hvcnQ=\n").unwrap();
    let ok = "webhooks:\n  allowLoopback: true\n  timeoutSeconds: 2.5\n  maxResponseBytes: 1024\n  secrets:\n    pager: {fromFile: pager.secret}\n";
    let c = ServeConfig::resolve(Some(&write(&dir, ok)), Overrides::default()).unwrap();
    assert!(c.webhooks.sender.policy.allow_loopback);
    assert_eq!(
        c.webhooks.sender.timeout,
        std::time::Duration::from_millis(2500)
    );
    assert_eq!(c.webhooks.sender.max_response_bytes, 1024);
    assert_eq!(
        c.webhooks.secrets["pager"].secret(),
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    );
    // Without the block: loopback refused, the defaults.
    let c = ServeConfig::resolve(Some(&write(&dir, "{}\n")), Overrides::default()).unwrap();
    assert!(!c.webhooks.sender.policy.allow_loopback);
    assert_eq!(
        c.webhooks.sender.timeout,
        std::time::Duration::from_secs(10)
    );
    for (text, field, rule) in [
        (
            "webhooks: {timeoutSeconds: 0}\n",
            "webhooks.timeoutSeconds",
            "(0, 60]",
        ),
        (
            "webhooks: {timeoutSeconds: 61}\n",
            "webhooks.timeoutSeconds",
            "(0, 60]",
        ),
        (
            "webhooks: {maxResponseBytes: 0}\n",
            "webhooks.maxResponseBytes",
            "at least 1",
        ),
        (
            "webhooks: {secrets: {pager: {fromFile: missing.secret}}}\n",
            "webhooks.secrets.pager",
            "missing.secret",
        ),
        (
            "webhooks: {secrets: {pager: {fromFile: short.secret}}}\n",
            "webhooks.secrets.pager",
            "24 to 64 bytes",
        ),
        (
            "webhooks: {secrets: {pager: {fromEnv: WAVERUN_TEST_NO_SUCH_SECRET}}}\n",
            "webhooks.secrets.pager",
            "WAVERUN_TEST_NO_SUCH_SECRET",
        ),
    ] {
        let e = ServeConfig::resolve(Some(&write(&dir, text)), Overrides::default()).unwrap_err();
        assert!(e.starts_with(field) && e.contains(rule), "{text}: {e}");
    }
    let e = ServeConfig::resolve(
        Some(&write(&dir, "webhooks: {allowLoopbak: true}\n")),
        Overrides::default(),
    )
    .unwrap_err();
    assert!(e.contains("allowLoopbak"), "{e}");
}

#[test]
fn a_postgres_store_takes_its_password_from_a_secret_and_refuses_one_in_the_url() {
    use waverun_host::serve::StoreChoice;
    let dir = tempfile::tempdir().unwrap();
    let refused = |text: &str| {
        ServeConfig::resolve(Some(&write(&dir, text)), Overrides::default()).unwrap_err()
    };
    let e = refused("store: {type: postgres}\n");
    assert!(e.starts_with("store.url: missing"), "{e}");
    let e = refused("store: {type: postgres, url: \"postgresql://u:hunter2@db/w\"}\n");
    assert!(e.starts_with("store.url: holds a password"), "{e}");
    assert!(!e.contains("hunter2"), "the password was echoed: {e}");
    let e = refused("store: {type: mysql}\n");
    assert!(e.starts_with("store.type: \"mysql\""), "{e}");
    let e = refused("store: {type: postgres, url: \"host=db\", leaseSeconds: 0.5}\n");
    assert!(e.starts_with("store.leaseSeconds: 0.5"), "{e}");
    let e = refused("store: {type: sqlite, holder: a}\n");
    assert!(e.contains("settings of type: postgres"), "{e}");
    let e = refused("store: {type: postgres, url: \"host=db\", lease: 3}\n");
    assert!(e.contains("lease"), "{e}");
    let e = refused(
        "store: {type: postgres, url: \"host=db\", passwordFrom: {fromEnv: WAVERUN_NO_SUCH_VAR_9}}\n",
    );
    assert!(e.starts_with("store.passwordFrom:"), "{e}");

    std::fs::write(dir.path().join("pw"), "s3cr et'\n").unwrap();
    let ok = "store: {type: postgres, url: \"postgresql://waverun@db:5432/w\", \
              passwordFrom: {fromFile: pw}, holder: a, leaseSeconds: 3}\n";
    let c = ServeConfig::resolve(Some(&write(&dir, ok)), Overrides::default()).unwrap();
    let StoreChoice::Postgres(pg) = &c.store else {
        panic!("not postgres: {:?}", c.store)
    };
    assert_eq!(pg.holder.as_deref(), Some("a"));
    assert_eq!(pg.lease, std::time::Duration::from_secs(3));
    let parsed: postgres::Config = pg.url.parse().unwrap();
    assert_eq!(parsed.get_password(), Some(&b"s3cr et'"[..]));
    assert!(
        !format!("{:?}", c.store).contains("s3cr"),
        "Debug shows the password"
    );
    let kv = "store: {type: postgres, url: \"host=db user=w\", passwordFrom: {fromFile: pw}}\n";
    let c = ServeConfig::resolve(Some(&write(&dir, kv)), Overrides::default()).unwrap();
    let StoreChoice::Postgres(pg) = &c.store else {
        panic!("not postgres")
    };
    let parsed: postgres::Config = pg.url.parse().unwrap();
    assert_eq!(parsed.get_password(), Some(&b"s3cr et'"[..]));
    assert_eq!(pg.holder, None);

    // TLS: libpq's sslmode values; the authorities in caFile (a file that exists) or the
    // url's sslrootcert, not both.
    let e = refused("store: {type: postgres, url: \"host=db sslmode=strict\"}\n");
    assert!(e.starts_with("store.url: sslmode: \"strict\""), "{e}");
    let e = refused("store: {type: postgres, url: \"host=db\", caFile: /nonexistent/ca.pem}\n");
    assert!(e.starts_with("store.caFile: /nonexistent/ca.pem"), "{e}");
    std::fs::write(dir.path().join("ca.pem"), "").unwrap();
    let ca = dir.path().join("ca.pem");
    let e = refused(&format!(
        "store: {{type: postgres, url: \"host=db sslrootcert=/x.pem\", caFile: {}}}\n",
        ca.display()
    ));
    assert!(
        e.starts_with("store.caFile: the url names sslrootcert"),
        "{e}"
    );
    let e = refused(&format!(
        "store: {{type: sqlite, caFile: {}}}\n",
        ca.display()
    ));
    assert!(e.contains("settings of type: postgres"), "{e}");
    let tls = format!(
        "store: {{type: postgres, url: \"postgresql://w@db/w?sslmode=verify-full\", caFile: {}}}\n",
        ca.display()
    );
    let c = ServeConfig::resolve(Some(&write(&dir, &tls)), Overrides::default()).unwrap();
    let StoreChoice::Postgres(pg) = &c.store else {
        panic!("not postgres")
    };
    let target = waverun_host::store::pg_tls::parse(&pg.url).unwrap();
    assert_eq!(target.root_cert.as_deref(), Some(ca.as_path()));
    assert_eq!(target.mode, waverun_host::store::pg_tls::SslMode::Require);
}
