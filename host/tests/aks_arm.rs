//! The AKS provider's footing against real HTTP on loopback: an in-process HTTP/1.1 server
//! (std's `TcpListener`, a few dozen lines below the tests) plays Microsoft Entra, IMDS and
//! Azure Resource Manager as their specifications describe them; a shell script named `az`,
//! first on the credential's `PATH`, stands in for the Azure CLI. Time is a value: every call
//! takes `now`, so refreshes and rate limits are tested without waiting for them.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use waverun_host::providers::aks::arm::{
    ArmCallError, ArmClient, ArmOptions, ArmResponse, ArmTimeouts, BucketLimit, RateLimits,
    API_VERSION, PREVIEW_API_VERSION,
};
use waverun_host::providers::aks::auth::{
    AuthErrorKind, AuthMethod, AuthOptions, AzureAuthConfig, Credential,
};
use waverun_host::providers::{ProviderError, ProviderErrorCode};

/// A fixed "now" (ms since the Unix epoch, in 2030).
const NOW: i64 = 1_900_000_000_000;
const TENANT: &str = "72f988bf-86f1-41af-91ab-2d7cd011db47";
const CLIENT: &str = "11111111-2222-3333-4444-555555555555";
const SECRET: &str = "s3cr3t~value.that-must-never-show";
const SUB: &str = "00000000-1111-2222-3333-444444444444";
const MC: &str = "/subscriptions/00000000-1111-2222-3333-444444444444/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/c1";

// ---------------------------------------------------------------------------------------------
// Credentials

#[test]
fn client_secret_posts_the_form_to_the_tenant_and_caches_the_token() {
    let entra = Server::start(entra(3600));
    let dir = tempfile::tempdir().unwrap();
    let cred = client_secret_credential(&entra, dir.path());

    let a = cred.token(NOW).unwrap();
    let b = cred.token(NOW + 60_000).unwrap();
    assert_eq!(a.secret(), "tok-1");
    assert!(a.same_as(&b), "the second call is answered from the cache");
    let reqs = entra.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, format!("/{TENANT}/oauth2/v2.0/token"));
    assert_eq!(
        r.header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    let form = r.form();
    assert_eq!(form["grant_type"], "client_credentials");
    assert_eq!(form["client_id"], CLIENT);
    assert_eq!(form["client_secret"], SECRET);
    assert_eq!(form["scope"], format!("{}/.default", entra.url()));
    assert_eq!(a.expires_on_ms(), NOW + 3_600_000);
}

#[test]
fn a_token_is_refreshed_five_minutes_before_it_expires() {
    let entra = Server::start(entra(3600));
    let dir = tempfile::tempdir().unwrap();
    let cred = client_secret_credential(&entra, dir.path());

    let first = cred.token(NOW).unwrap();
    let just_before = NOW + 3_600_000 - 300_000 - 1;
    assert!(cred.token(just_before).unwrap().same_as(&first));
    assert_eq!(entra.requests().len(), 1);
    let second = cred.token(just_before + 1).unwrap();
    assert!(!second.same_as(&first));
    assert_eq!(second.secret(), "tok-2");
    assert_eq!(entra.requests().len(), 2);
}

#[test]
fn many_threads_share_one_acquisition() {
    let entra = Server::start(entra(3600));
    let dir = tempfile::tempdir().unwrap();
    let cred = Arc::new(client_secret_credential(&entra, dir.path()));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let cred = cred.clone();
            std::thread::spawn(move || cred.token(NOW).unwrap().secret().to_string())
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), "tok-1");
    }
    assert_eq!(entra.requests().len(), 1);
}

#[test]
fn the_client_secret_file_is_read_again_at_every_acquisition() {
    let entra = Server::start(entra(3600));
    let dir = tempfile::tempdir().unwrap();
    let cred = client_secret_credential(&entra, dir.path());
    cred.token(NOW).unwrap();
    std::fs::write(dir.path().join("secret"), "rotated-secret\n").unwrap();
    cred.token(NOW + 3_600_000).unwrap();
    let secrets: Vec<String> = entra
        .requests()
        .iter()
        .map(|r| r.form()["client_secret"].clone())
        .collect();
    assert_eq!(secrets, [SECRET, "rotated-secret"]);
}

#[test]
fn workload_identity_sends_the_token_file_read_again_at_every_acquisition() {
    let entra = Server::start(entra(3600));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("azure-identity-token");
    std::fs::write(&file, "sa-token-1").unwrap();
    let config = AzureAuthConfig {
        method: AuthMethod::WorkloadIdentity,
        ..AzureAuthConfig::default()
    };
    // The webhook's variables, as a pod gets them.
    let env = env_of(&[
        ("AZURE_TENANT_ID", TENANT),
        ("AZURE_CLIENT_ID", CLIENT),
        ("AZURE_FEDERATED_TOKEN_FILE", file.to_str().unwrap()),
        ("AZURE_AUTHORITY_HOST", &entra.url()),
    ]);
    let cred = Credential::with_env(
        &AzureAuthConfig {
            resource_manager: Some(entra.url()),
            ..config
        },
        &env,
        options(),
    )
    .unwrap();

    cred.token(NOW).unwrap();
    std::fs::write(&file, "sa-token-2").unwrap(); // the kubelet rotated it
    cred.token(NOW + 3_600_000).unwrap();

    let reqs = entra.requests();
    assert_eq!(reqs.len(), 2);
    for (r, assertion) in reqs.iter().zip(["sa-token-1", "sa-token-2"]) {
        let form = r.form();
        assert_eq!(r.path, format!("/{TENANT}/oauth2/v2.0/token"));
        assert_eq!(form["grant_type"], "client_credentials");
        assert_eq!(form["client_id"], CLIENT);
        assert_eq!(
            form["client_assertion_type"],
            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
        );
        assert_eq!(form["client_assertion"], assertion);
        assert!(!form.contains_key("client_secret"));
    }
}

#[test]
fn managed_identity_asks_imds_with_the_metadata_header() {
    let imds = Server::start(|r: &Request| {
        if r.header("metadata") != Some("true") {
            return Answer::json(
                400,
                json!({"error": "invalid_request", "error_description": "Required metadata header not specified"}),
            );
        }
        // IMDS's numbers are strings.
        Answer::json(
            200,
            json!({"access_token": "mi-token", "expires_in": "86399", "expires_on": "1900086399",
                   "refresh_in": "43199", "resource": "https://management.azure.com", "token_type": "Bearer"}),
        )
    });
    let config = AzureAuthConfig {
        method: AuthMethod::ManagedIdentity,
        client_id: Some("mi-client".into()),
        imds_endpoint: Some(imds.url()),
        ..AzureAuthConfig::default()
    };
    let cred = Credential::with_env(&config, &env_of(&[]), options()).unwrap();
    let t = cred.token(NOW).unwrap();
    assert_eq!(t.secret(), "mi-token");
    assert_eq!(t.expires_on_ms(), NOW + 86_399_000);
    assert_eq!(
        t.refresh_at_ms(),
        NOW + 43_199_000,
        "refresh_in is honoured"
    );
    let r = &imds.requests()[0];
    assert_eq!(r.method, "GET");
    let (path, query) = r.path.split_once('?').unwrap();
    assert_eq!(path, "/metadata/identity/oauth2/token");
    let q = decode_form(query);
    assert_eq!(q["api-version"], "2018-02-01");
    assert_eq!(q["resource"], "https://management.azure.com");
    assert_eq!(q["client_id"], "mi-client");
}

#[test]
fn imds_is_found_through_the_sdk_environment_override() {
    let imds = Server::start(|_: &Request| {
        Answer::json(
            200,
            json!({"access_token": "mi", "expires_in": "3600", "token_type": "Bearer"}),
        )
    });
    let config = AzureAuthConfig {
        method: AuthMethod::ManagedIdentity,
        ..AzureAuthConfig::default()
    };
    let env = env_of(&[("AZURE_POD_IDENTITY_AUTHORITY_HOST", &imds.url())]);
    let cred = Credential::with_env(&config, &env, options()).unwrap();
    assert_eq!(cred.token(NOW).unwrap().secret(), "mi");
    assert!(!imds.requests()[0].path.contains("client_id"));
}

#[test]
fn the_azure_cli_is_run_and_its_json_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = fake_az(dir.path(), AZ_OUTPUT);
    let config = AzureAuthConfig {
        method: AuthMethod::AzureCli,
        tenant_id: Some(TENANT.into()),
        ..AzureAuthConfig::default()
    };
    let cred = Credential::with_env(&config, &env_of(&[("PATH", &path)]), options()).unwrap();
    let t = cred.token(NOW).unwrap();
    assert_eq!(t.secret(), "cli-access-token");
    assert_eq!(t.expires_on_ms(), 1_900_003_600_000);
    let args = std::fs::read_to_string(dir.path().join("args")).unwrap();
    assert_eq!(
        args.trim(),
        format!(
            "account get-access-token --output json --resource https://management.azure.com \
             --tenant {TENANT}"
        )
    );
}

#[test]
fn a_failing_azure_cli_is_reported_without_any_token_it_printed() {
    let dir = tempfile::tempdir().unwrap();
    let path = fake_az_failing(
        dir.path(),
        r#"ERROR: something broke; last answer was {"accessToken": "eyJleaked", "tokenType": "Bearer"}"#,
    );
    let config = AzureAuthConfig {
        method: AuthMethod::AzureCli,
        ..AzureAuthConfig::default()
    };
    let cred = Credential::with_env(&config, &env_of(&[("PATH", &path)]), options()).unwrap();
    let e = cred.token(NOW).unwrap_err();
    assert_eq!(e.kind, AuthErrorKind::Refused);
    assert!(
        e.message.contains("exit 1") && e.message.contains("something broke"),
        "{e}"
    );
    assert!(!format!("{e} {e:?}").contains("eyJleaked"), "{e}");

    let not_logged_in = tempfile::tempdir().unwrap();
    let path = fake_az_failing(
        not_logged_in.path(),
        "ERROR: Please run 'az login' to setup account.",
    );
    let cred = Credential::with_env(&config, &env_of(&[("PATH", &path)]), options()).unwrap();
    let e = cred.token(NOW).unwrap_err();
    assert!(e.message.contains("run `az login`"), "{e}");
}

#[test]
fn an_azure_cli_that_hangs_is_killed_at_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let path = fake_az_script(dir.path(), "sleep 30\n");
    let config = AzureAuthConfig {
        method: AuthMethod::AzureCli,
        ..AzureAuthConfig::default()
    };
    let options = AuthOptions {
        cli_timeout: Duration::from_millis(300),
        ..options()
    };
    let cred = Credential::with_env(&config, &env_of(&[("PATH", &path)]), options).unwrap();
    let e = cred.token(NOW).unwrap_err();
    assert_eq!(e.kind, AuthErrorKind::Unavailable);
    assert!(e.message.contains("killed"), "{e}");
}

#[test]
fn auto_falls_back_from_an_absent_imds_to_the_azure_cli() {
    let dir = tempfile::tempdir().unwrap();
    let path = fake_az(dir.path(), AZ_OUTPUT);
    let config = AzureAuthConfig {
        imds_endpoint: Some(format!("http://{}", closed_port())),
        ..AzureAuthConfig::default()
    };
    let cred = Credential::with_env(&config, &env_of(&[("PATH", &path)]), options()).unwrap();
    assert_eq!(cred.method(), AuthMethod::Auto);
    assert_eq!(cred.token(NOW).unwrap().secret(), "cli-access-token");
    assert_eq!(cred.describe(), "auto (azureCli)");
}

#[test]
fn auto_uses_the_environment_client_secret_first() {
    let entra = Server::start(entra(3600));
    let env = env_of(&[
        ("AZURE_TENANT_ID", TENANT),
        ("AZURE_CLIENT_ID", CLIENT),
        ("AZURE_CLIENT_SECRET", SECRET),
        ("AZURE_AUTHORITY_HOST", &entra.url()),
        ("PATH", "/nonexistent"),
    ]);
    let cred = Credential::with_env(&AzureAuthConfig::default(), &env, options()).unwrap();
    assert_eq!(cred.token(NOW).unwrap().secret(), "tok-1");
    assert_eq!(cred.describe(), "auto (clientSecret)");
    assert_eq!(entra.requests()[0].form()["client_secret"], SECRET);
}

#[test]
fn auto_with_nothing_available_says_what_each_way_lacked() {
    let config = AzureAuthConfig {
        imds_endpoint: Some(format!("http://{}", closed_port())),
        ..AzureAuthConfig::default()
    };
    let cred =
        Credential::with_env(&config, &env_of(&[("PATH", "/nonexistent")]), options()).unwrap();
    let e = cred.token(NOW).unwrap_err();
    assert_eq!(e.kind, AuthErrorKind::Config);
    for part in [
        "clientSecret: auth.tenantId",
        "AZURE_TENANT_ID",
        "managedIdentity: no answer from IMDS",
        "azureCli: the Azure CLI (az) is not on PATH",
    ] {
        assert!(e.message.contains(part), "{part:?} in {e}");
    }
}

#[test]
fn missing_settings_name_the_field_and_the_environment_variable() {
    let err = |config: AzureAuthConfig, env: &[(&str, &str)]| {
        Credential::with_env(&config, &env_of(env), options())
            .unwrap_err()
            .to_string()
    };
    let secret = AzureAuthConfig {
        method: AuthMethod::ClientSecret,
        ..AzureAuthConfig::default()
    };
    let e = err(secret.clone(), &[]);
    assert!(
        e.contains("auth.tenantId") && e.contains("AZURE_TENANT_ID"),
        "{e}"
    );
    let e = err(secret.clone(), &[("AZURE_TENANT_ID", TENANT)]);
    assert!(
        e.contains("auth.clientId") && e.contains("AZURE_CLIENT_ID"),
        "{e}"
    );
    let e = err(
        secret,
        &[("AZURE_TENANT_ID", TENANT), ("AZURE_CLIENT_ID", CLIENT)],
    );
    assert!(
        e.contains("auth.clientSecretFile") && e.contains("AZURE_CLIENT_SECRET"),
        "{e}"
    );
    let workload = AzureAuthConfig {
        method: AuthMethod::WorkloadIdentity,
        tenant_id: Some(TENANT.into()),
        client_id: Some(CLIENT.into()),
        ..AzureAuthConfig::default()
    };
    let e = err(workload, &[]);
    assert!(
        e.contains("auth.federatedTokenFile") && e.contains("AZURE_FEDERATED_TOKEN_FILE"),
        "{e}"
    );
    let http_authority = AzureAuthConfig {
        method: AuthMethod::ClientSecret,
        authority_host: Some("http://login.example".into()),
        ..AzureAuthConfig::default()
    };
    let e = err(http_authority, &[]);
    assert!(
        e.contains("auth.authorityHost") && e.contains("https"),
        "{e}"
    );
}

#[test]
fn the_auth_block_is_strict_yaml_and_takes_no_inline_secret() {
    let ok: AzureAuthConfig = waverun_host::parse_text(
        "method: workloadIdentity\ntenantId: t\nclientId: c\nfederatedTokenFile: /var/run/secrets/azure/tokens/azure-identity-token\n",
        false,
    )
    .unwrap();
    assert_eq!(ok.method, AuthMethod::WorkloadIdentity);
    assert_eq!(
        ok.federated_token_file.as_deref(),
        Some(Path::new(
            "/var/run/secrets/azure/tokens/azure-identity-token"
        ))
    );
    let e = waverun_host::parse_text::<AzureAuthConfig>(
        "method: clientSecret\nclientSecret: hunter2\n",
        false,
    )
    .unwrap_err();
    assert!(e.contains("clientSecret"), "{e}");
    assert!(waverun_host::parse_text::<AzureAuthConfig>("method: password\n", false).is_err());
    let default: AzureAuthConfig = waverun_host::parse_text("{}", false).unwrap();
    assert_eq!(default.method, AuthMethod::Auto);
}

#[test]
fn a_wrong_secret_keeps_entras_message_and_never_shows_the_secret() {
    // This Entra even echoes the secret back, to prove it is redacted.
    let refusing = Server::start(|r: &Request| {
        let secret = r.form().get("client_secret").cloned().unwrap_or_default();
        Answer::json(
            401,
            json!({
                "error": "invalid_client",
                "error_description": format!("AADSTS7000215: Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID ({secret}).\r\nTrace ID: 0b5c\r\nCorrelation ID: 9d1e\r\nTimestamp: 2030-03-17 12:00:00Z"),
                "error_codes": [7000215],
                "trace_id": "0b5c",
                "correlation_id": "9d1e"
            }),
        )
    });
    let dir = tempfile::tempdir().unwrap();
    let cred = client_secret_credential(&refusing, dir.path());
    let e = cred.token(NOW).unwrap_err();
    assert_eq!(e.kind, AuthErrorKind::Refused);
    assert!(!e.retryable());
    let shown = format!("{e} {e:?} {cred:?}");
    assert!(
        shown.contains("AADSTS7000215: Invalid client secret provided"),
        "{shown}"
    );
    assert!(shown.contains("auth.clientSecretFile"), "{shown}");
    assert!(!shown.contains(SECRET), "{shown}");

    // Nor does an environment secret or a token show in Debug.
    let ok = Server::start(entra(3600));
    let env = env_of(&[
        ("AZURE_TENANT_ID", TENANT),
        ("AZURE_CLIENT_ID", CLIENT),
        ("AZURE_CLIENT_SECRET", SECRET),
        ("AZURE_AUTHORITY_HOST", &ok.url()),
    ]);
    let config = AzureAuthConfig {
        method: AuthMethod::ClientSecret,
        ..AzureAuthConfig::default()
    };
    let cred = Credential::with_env(&config, &env, options()).unwrap();
    let token = cred.token(NOW).unwrap();
    let shown = format!("{cred:?} {token:?}");
    assert!(!shown.contains(SECRET), "{shown}");
    assert!(!shown.contains("tok-1"), "{shown}");
}

#[test]
fn entra_unreachable_is_retryable() {
    let config = AzureAuthConfig {
        method: AuthMethod::ClientSecret,
        tenant_id: Some(TENANT.into()),
        client_id: Some(CLIENT.into()),
        authority_host: Some(format!("http://{}", closed_port())),
        ..AzureAuthConfig::default()
    };
    let cred = Credential::with_env(
        &config,
        &env_of(&[("AZURE_CLIENT_SECRET", SECRET)]),
        options(),
    )
    .unwrap();
    let e = cred.token(NOW).unwrap_err();
    assert_eq!(e.kind, AuthErrorKind::Unavailable);
    assert!(e.retryable());
    assert!(!format!("{e:?}").contains(SECRET));
}

// ---------------------------------------------------------------------------------------------
// ARM

#[test]
fn relative_paths_get_the_api_version_and_polling_urls_are_used_as_given() {
    let (server, arm) = arm_with(Default::default(), |_: &Request, _| {
        Answer::json(200, json!({"ok": true}))
    });
    arm.get(NOW, MC).unwrap();
    let loc =
        format!("/subscriptions/{SUB}/providers/Microsoft.ContainerService/locations/westeurope");
    arm.get(NOW, &format!("{loc}/nodeImageVersions")).unwrap();
    arm.get(NOW, &format!("{MC}/agentPools/np1/operations/op-1"))
        .unwrap();
    arm.get(NOW, &format!("{loc}/kubernetesVersions")).unwrap();
    arm.get(NOW, &format!("{MC}/agentPools?$top=2")).unwrap();
    // A polling URL (AKS's own shape: no /subscriptions, an older api-version) is used as is.
    let polling = format!(
        "{}/providers/Microsoft.ContainerService/locations/westus/operationStatus/5f2f?api-version=2018-07-31",
        server.url()
    );
    arm.get(NOW, &polling).unwrap();

    let paths: Vec<String> = server
        .arm_requests()
        .iter()
        .map(|r| r.path.clone())
        .collect();
    assert_eq!(
        paths,
        [
            format!("{MC}?api-version={API_VERSION}"),
            format!("{loc}/nodeImageVersions?api-version={PREVIEW_API_VERSION}"),
            format!("{MC}/agentPools/np1/operations/op-1?api-version={PREVIEW_API_VERSION}"),
            format!("{loc}/kubernetesVersions?api-version={API_VERSION}"),
            format!("{MC}/agentPools?$top=2&api-version={API_VERSION}"),
            "/providers/Microsoft.ContainerService/locations/westus/operationStatus/5f2f?api-version=2018-07-31".to_string(),
        ]
    );
    let mut ids = Vec::new();
    for r in server.arm_requests() {
        assert_eq!(r.header("authorization"), Some("Bearer tok-1"));
        assert_eq!(
            r.header("user-agent"),
            Some(concat!("waverun/", env!("CARGO_PKG_VERSION")))
        );
        ids.push(r.header("x-ms-client-request-id").unwrap().to_string());
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 6, "a fresh client request id per request");
    assert_eq!(server.token_requests(), 1, "one token for all of them");
}

#[test]
fn a_polling_url_on_another_host_is_refused_unsent() {
    let (server, arm) = arm_with(Default::default(), |_: &Request, _| {
        Answer::json(200, json!({}))
    });
    let port = server.addr.port();
    for elsewhere in [
        format!("http://127.0.0.2:{port}{MC}/operations/x?api-version=1"),
        format!("https://127.0.0.1:{port}{MC}"),
        format!("http://127.0.0.1:{}{MC}", port.wrapping_add(1)),
        "https://management.azure.com.evil.example/subscriptions/x".to_string(),
        format!("http://127.0.0.1:{port}@evil.example/x"),
        "//evil.example/x".to_string(),
        "subscriptions/x".to_string(),
    ] {
        let e = provider_error(arm.get(NOW, &elsewhere));
        assert_eq!(
            e.code,
            ProviderErrorCode::InvalidRequest,
            "{elsewhere}: {e}"
        );
        assert!(!e.retryable, "{elsewhere}");
    }
    assert!(server.requests().is_empty(), "no token asked, nothing sent");
}

#[test]
fn answers_give_their_headers_and_writes_send_their_body_and_if_match() {
    let (server, arm) = arm_with(Default::default(), |r: &Request, _| {
        match r.method.as_str() {
        "PUT" => Answer::json(200, json!({"properties": {"provisioningState": "Upgrading"}}))
            .header("ETag", "\"etag-2\"")
            .header("x-ms-ratelimit-remaining-subscription-writes", "1199")
            .header("x-ms-request-id", "req-1")
            .header("x-ms-correlation-request-id", "corr-1"),
        "POST" => Answer::json(202, json!({"properties": {"provisioningState": "UpgradingNodeImageVersion"}}))
            .header("Azure-AsyncOperation", "https://management.azure.com/subscriptions/s/providers/Microsoft.ContainerService/locations/westus/operationStatus/op?api-version=2026-08-01")
            .header("Location", "https://management.azure.com/subscriptions/s/providers/Microsoft.ContainerService/locations/westus/operationresults/op?api-version=2026-08-01")
            .header("Retry-After", "15"),
        _ => Answer::json(204, Value::Null)
            .header("x-ms-ratelimit-remaining-subscription-reads", "11999"),
    }
    });
    let body = json!({"location": "westus", "properties": {"kubernetesVersion": "1.34"}});
    let put = arm.put(NOW, MC, &body, Some("\"etag-1\"")).unwrap();
    assert_eq!(put.status, 200);
    assert_eq!(put.body["properties"]["provisioningState"], "Upgrading");
    assert_eq!(put.etag.as_deref(), Some("\"etag-2\""));
    assert_eq!(put.remaining_writes, Some(1199));
    assert_eq!(put.request_id.as_deref(), Some("req-1"));
    assert_eq!(put.correlation_id.as_deref(), Some("corr-1"));

    let post: ArmResponse = arm
        .post(
            NOW,
            &format!("{MC}/agentPools/np1/upgradeNodeImageVersion"),
            None,
        )
        .unwrap();
    assert_eq!(post.status, 202);
    assert!(post
        .azure_async_operation
        .unwrap()
        .contains("/operationStatus/op"));
    assert!(post.location.unwrap().contains("/operationresults/op"));
    assert_eq!(post.retry_after, Some(15));

    let get = arm.get(NOW, MC).unwrap();
    assert_eq!(get.status, 204);
    assert_eq!(get.body, Value::Null);
    assert_eq!(get.remaining_reads, Some(11999));

    let reqs = server.arm_requests();
    assert_eq!(reqs[0].header("if-match"), Some("\"etag-1\""));
    assert_eq!(reqs[0].header("content-type"), Some("application/json"));
    assert_eq!(serde_json::from_str::<Value>(&reqs[0].body).unwrap(), body);
    assert_eq!(reqs[1].header("content-length"), Some("0"));
    assert_eq!(reqs[1].body, "");
    assert_eq!(arm.metrics().remaining_for(SUB), (Some(11999), Some(1199)));
}

#[test]
fn a_401_drops_the_token_and_the_call_is_made_once_more() {
    let (server, arm) = arm_with(Default::default(), |r: &Request, _| {
        if r.header("authorization") == Some("Bearer tok-1") {
            Answer::json(
                401,
                json!({"error": {"code": "ExpiredAuthenticationToken", "message": "The access token expiry UTC time is earlier than current UTC time."}}),
            )
        } else {
            Answer::json(200, json!({"name": "c1"}))
        }
    });
    let r = arm.get(NOW, MC).unwrap();
    assert_eq!(r.body["name"], "c1");
    assert_eq!(server.token_requests(), 2);
    assert_eq!(server.arm_requests().len(), 2);
    // The new token is cached: no third token request.
    arm.get(NOW, MC).unwrap();
    assert_eq!(server.token_requests(), 2);
    assert_eq!(arm.metrics().calls("GET", 401), 1);
    assert_eq!(arm.metrics().calls("GET", 200), 2);
}

#[test]
fn a_second_401_is_unauthenticated() {
    let (server, arm) = arm_with(Default::default(), |_: &Request, _| {
        Answer::json(
            401,
            json!({"error": {"code": "InvalidAuthenticationTokenTenant", "message": "The access token is from the wrong issuer."}}),
        )
    });
    let e = provider_error(arm.put(NOW, MC, &json!({}), None));
    assert_eq!(e.code, ProviderErrorCode::Unauthenticated);
    assert!(!e.uncertain);
    assert!(
        e.message.contains("InvalidAuthenticationTokenTenant"),
        "{e}"
    );
    assert!(!e.message.contains("tok-"), "{e}");
    assert!(!format!("{arm:?}").contains("tok-"), "{arm:?}");
    assert_eq!(server.arm_requests().len(), 2);
    assert_eq!(server.token_requests(), 2);
}

#[test]
fn a_429_is_throttled_and_nothing_is_sent_before_retry_after() {
    let calls = Arc::new(AtomicUsize::new(0));
    let (server, arm) = arm_with(Default::default(), {
        let calls = calls.clone();
        move |_: &Request, _| {
            if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                Answer::json(429, json!({"error": {"code": "SubscriptionRequestsThrottled", "message": "Number of 'read' requests for subscription actor exceeded."}}))
                    .header("Retry-After", "30")
            } else {
                Answer::json(200, json!({"name": "c1"}))
            }
        }
    });
    let e = provider_error(arm.get(NOW, MC));
    assert_eq!(e.code, ProviderErrorCode::Throttled);
    assert!(e.retryable);
    assert_eq!(e.retry_after_seconds, Some(30));
    assert!(e.message.contains("SubscriptionRequestsThrottled"), "{e}");

    // Ten seconds on: refused without being sent, twenty seconds still to wait.
    let e = provider_error(arm.get(NOW + 10_000, MC));
    assert_eq!(e.code, ProviderErrorCode::Throttled);
    assert_eq!(e.retry_after_seconds, Some(20));
    assert_eq!(server.arm_requests().len(), 1);
    // Another subscription is not held back; its writes neither.
    let other = MC.replace(SUB, "99999999-1111-2222-3333-444444444444");
    arm.get(NOW + 10_000, &other).unwrap();
    arm.put(NOW + 10_000, MC, &json!({}), None).unwrap();

    // Once it elapses, reads go again.
    arm.get(NOW + 30_000, MC).unwrap();
    assert_eq!(server.arm_requests().len(), 4);
    let m = arm.metrics();
    assert_eq!(m.throttled(), 1);
    assert_eq!(m.refused_by_rate_limit(), 1);
    assert_eq!(m.throttle_wait_ms().1, 30_000);
}

#[test]
fn a_429_with_an_http_date_retry_after_counts_from_now() {
    let (_server, arm) = arm_with(Default::default(), |_: &Request, _| {
        // NOW is 2030-03-17T17:46:40Z; this is 45 s later.
        Answer::json(
            429,
            json!({"error": {"code": "TooManyRequests", "message": "slow down"}}),
        )
        .header("Retry-After", "Sun, 17 Mar 2030 17:47:25 GMT")
    });
    let e = provider_error(arm.get(NOW, MC));
    assert_eq!(e.retry_after_seconds, Some(45));
}

#[test]
fn the_token_bucket_refuses_a_burst_and_waits_out_a_short_gap() {
    let limits = RateLimits {
        reads: BucketLimit {
            burst: 3.0,
            per_second: 0.01,
        },
        writes: BucketLimit {
            burst: 1.0,
            per_second: 20.0,
        },
        max_wait: Duration::from_secs(1),
    };
    let (server, arm) = arm_with(limits, |_: &Request, _| Answer::json(200, json!({})));
    for _ in 0..3 {
        arm.get(NOW, MC).unwrap();
    }
    let e = provider_error(arm.get(NOW, MC));
    assert_eq!(e.code, ProviderErrorCode::Throttled);
    assert_eq!(e.retry_after_seconds, Some(100));
    assert!(e.message.contains("not sent"), "{e}");
    assert_eq!(server.arm_requests().len(), 3);

    // Writes have their own bucket: the second waits 50 ms (1/20 s) for its token and goes.
    arm.put(NOW, MC, &json!({}), None).unwrap();
    arm.put(NOW, MC, &json!({}), None).unwrap();
    assert_eq!(server.arm_requests().len(), 5);
    assert_eq!(arm.metrics().throttle_wait_ms().0, 50);
    assert_eq!(arm.metrics().refused_by_rate_limit(), 1);
}

#[test]
fn a_reset_after_a_write_was_sent_leaves_its_outcome_unknown() {
    let (server, arm) = arm_with(Default::default(), |_: &Request, _| Answer::Reset);
    let put = provider_error(arm.put(NOW, MC, &json!({"properties": {}}), Some("\"e\"")));
    assert!(put.uncertain, "{put}");
    assert!(put.retryable);
    assert!(put.message.contains("outcome is unknown"), "{put}");
    let post = provider_error(arm.post(NOW, &format!("{MC}/abort"), None));
    assert!(post.uncertain, "{post}");
    // A read is simply unavailable.
    let get = provider_error(arm.get(NOW, MC));
    assert_eq!(get.code, ProviderErrorCode::Unavailable);
    assert!(!get.uncertain);
    assert!(get.retryable);
    assert_eq!(
        server.arm_requests().len(),
        3,
        "each was received once, never resent"
    );
}

#[test]
fn a_timeout_after_a_write_was_sent_leaves_its_outcome_unknown() {
    // The request's deadline leaves a loaded machine time to connect and send (a write that
    // was never sent is certain); the server stays silent well past it.
    let options = ArmOptions {
        timeouts: ArmTimeouts {
            connect: Duration::from_secs(10),
            request: Duration::from_secs(2),
        },
        ..ArmOptions::default()
    };
    let (server, arm) = arm_with_options(options, |_: &Request, _| {
        Answer::Silence(Duration::from_secs(10))
    });
    let e = provider_error(arm.put(NOW, MC, &json!({}), None));
    assert!(e.uncertain, "{e}");
    // The server's thread logs the request once it has read it, which may be after the
    // client gave up waiting.
    let until = Instant::now() + Duration::from_secs(10);
    while server.arm_requests().is_empty() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(server.arm_requests().len(), 1);
}

#[test]
fn a_write_that_never_connected_is_unavailable_and_certain() {
    let entra_server = Server::start(entra(3600));
    let dir = tempfile::tempdir().unwrap();
    let cred = Arc::new(client_secret_credential(&entra_server, dir.path()));
    let arm = ArmClient::new(
        &format!("http://{}", closed_port()),
        cred,
        ArmOptions::default(),
    )
    .unwrap();
    let e = provider_error(arm.put(NOW, MC, &json!({}), None));
    assert_eq!(e.code, ProviderErrorCode::Unavailable);
    assert!(!e.uncertain, "{e}");
    assert!(e.retryable);
}

#[test]
fn error_answers_become_arm_errors_for_the_provider_to_classify() {
    let (_server, arm) = arm_with(Default::default(), |r: &Request, _| {
        if r.path.contains("/conflict") {
            Answer::json(409, json!({"error": {"code": "OperationNotAllowed", "message": "Another operation (c1 - Updating) is in progress, please wait for it to finish before starting a new operation. See https://aka.ms/aks-pending-operation for more details"}}))
                .header("x-ms-correlation-request-id", "corr-9")
        } else if r.path.contains("/deprecated") {
            Answer::json(
                400,
                json!({"error": {"code": "ValidationError", "message": "Upgrade is blocked due to deprecated API usage.", "subcode": "UpgradeBlockedOnDeprecatedAPIUsage"}}),
            )
        } else if r.path.contains("/stale") {
            Answer::json(
                412,
                json!({"code": "PreconditionFailed", "message": "The etag does not match."}),
            )
        } else {
            Answer::text(502, "<html>Bad Gateway</html>")
        }
    });
    let status = |r: Result<ArmResponse, ArmCallError>| match r {
        Err(ArmCallError::Status(e)) => e,
        other => panic!("expected an ARM error, got {other:?}"),
    };
    let e = status(arm.put(NOW, &format!("{MC}/conflict"), &json!({}), None));
    assert_eq!((e.status, e.code.as_str()), (409, "OperationNotAllowed"));
    assert!(e.message.contains("aks-pending-operation"));
    assert_eq!(e.correlation_id.as_deref(), Some("corr-9"));
    let e = status(arm.put(NOW, &format!("{MC}/deprecated"), &json!({}), None));
    assert_eq!(e.code, "ValidationError");
    assert_eq!(
        e.subcode.as_deref(),
        Some("UpgradeBlockedOnDeprecatedAPIUsage")
    );
    assert!(e
        .to_string()
        .contains("subcode UpgradeBlockedOnDeprecatedAPIUsage"));
    let e = status(arm.put(NOW, &format!("{MC}/stale"), &json!({}), Some("\"old\"")));
    assert_eq!((e.status, e.code.as_str()), (412, "PreconditionFailed"));
    let e = status(arm.get(NOW, MC));
    assert_eq!((e.status, e.code.as_str()), (502, "HTTP502"));
    assert!(e.message.contains("Bad Gateway"));
}

#[test]
fn the_metrics_list_calls_by_method_and_status() {
    let (_server, arm) = arm_with(Default::default(), |r: &Request, _| {
        if r.method == "GET" {
            Answer::json(200, json!({}))
                .header("x-ms-ratelimit-remaining-subscription-reads", "249")
        } else {
            Answer::json(
                409,
                json!({"error": {"code": "OperationNotAllowed", "message": "busy"}}),
            )
        }
    });
    arm.get(NOW, MC).unwrap();
    arm.get(NOW, MC).unwrap();
    let _ = arm.put(NOW, MC, &json!({}), None);
    let _ = arm.get(NOW, "https://elsewhere.example/x");
    let samples = arm.metrics().snapshot();
    let find = |name: &str, labels: &[(&str, &str)]| {
        samples
            .iter()
            .find(|s| {
                s.name == name
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.iter().any(|(lk, lv)| lk == k && lv == v))
            })
            .map(|s| s.value)
    };
    assert_eq!(
        find(
            "waverun_arm_requests_total",
            &[("method", "GET"), ("code", "200"), ("class", "2xx")]
        ),
        Some(2)
    );
    assert_eq!(
        find(
            "waverun_arm_requests_total",
            &[("method", "PUT"), ("code", "409"), ("class", "4xx")]
        ),
        Some(1)
    );
    assert_eq!(
        find(
            "waverun_arm_requests_not_sent_total",
            &[("method", "GET"), ("reason", "url")]
        ),
        Some(1)
    );
    assert_eq!(
        find(
            "waverun_arm_ratelimit_remaining",
            &[("subscription", SUB), ("kind", "reads")]
        ),
        Some(249)
    );
    assert!(samples.iter().all(|s| s.value > 0));
}

// ---------------------------------------------------------------------------------------------
// Helpers

fn options() -> AuthOptions {
    AuthOptions {
        imds_probe_timeout: Duration::from_millis(500),
        ..AuthOptions::default()
    }
}

fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let vars: BTreeMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| vars.get(name).cloned()
}

/// A client-secret credential against `entra` (its URL is also the ARM audience), the secret
/// in a file under `dir`.
fn client_secret_credential(entra: &Server, dir: &Path) -> Credential {
    let file = dir.join("secret");
    std::fs::write(&file, format!("{SECRET}\n")).unwrap();
    let config = AzureAuthConfig {
        method: AuthMethod::ClientSecret,
        tenant_id: Some(TENANT.into()),
        client_id: Some(CLIENT.into()),
        client_secret_file: Some(file),
        authority_host: Some(entra.url()),
        resource_manager: Some(entra.url()),
        ..AzureAuthConfig::default()
    };
    Credential::with_env(&config, &env_of(&[]), options()).unwrap()
}

/// Entra's token endpoint: `tok-1`, `tok-2`, … valid `expires_in` seconds.
fn entra(expires_in: u64) -> impl Fn(&Request) -> Answer + Send + Sync + 'static {
    let issued = AtomicUsize::new(0);
    move |r: &Request| {
        if r.method != "POST" || !r.path.ends_with("/oauth2/v2.0/token") {
            return Answer::json(404, json!({"error": "not_found"}));
        }
        let n = issued.fetch_add(1, Ordering::SeqCst) + 1;
        Answer::json(
            200,
            json!({"token_type": "Bearer", "expires_in": expires_in, "ext_expires_in": expires_in,
                   "access_token": format!("tok-{n}")}),
        )
    }
}

/// One server playing Entra (token requests) and ARM (everything else, answered by `arm` with
/// the request's index among ARM requests), and a client of it.
fn arm_with(
    limits: RateLimits,
    arm: impl Fn(&Request, usize) -> Answer + Send + Sync + 'static,
) -> (Server, ArmClient) {
    arm_with_options(
        ArmOptions {
            limits,
            ..ArmOptions::default()
        },
        arm,
    )
}

fn arm_with_options(
    options: ArmOptions,
    arm: impl Fn(&Request, usize) -> Answer + Send + Sync + 'static,
) -> (Server, ArmClient) {
    let token = entra(3600);
    let seen = AtomicUsize::new(0);
    let server = Server::start(move |r: &Request| {
        if r.path.ends_with("/oauth2/v2.0/token") {
            token(r)
        } else {
            arm(r, seen.fetch_add(1, Ordering::SeqCst))
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let cred = Arc::new(client_secret_credential(&server, dir.path()));
    // The secret was read into no cache: keep the file for the client's life.
    std::mem::forget(dir);
    let client = ArmClient::new(&server.url(), cred, options).unwrap();
    (server, client)
}

fn provider_error(r: Result<ArmResponse, ArmCallError>) -> ProviderError {
    match r {
        Err(ArmCallError::Provider(p)) => p,
        other => panic!("expected a provider error, got {other:?}"),
    }
}

/// A loopback address nothing listens on.
fn closed_port() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// `az account get-access-token --output json` as Azure CLI 2.54.0 and later print it:
/// `expiresOn` in local time and `expires_on` in Unix seconds.
const AZ_OUTPUT: &str = r#"{
  "accessToken": "cli-access-token",
  "expiresOn": "2030-03-17 18:46:40.000000",
  "expires_on": 1900003600,
  "subscription": "00000000-1111-2222-3333-444444444444",
  "tenant": "72f988bf-86f1-41af-91ab-2d7cd011db47",
  "tokenType": "Bearer"
}"#;

/// A stand-in for the real Azure CLI: a script named `az` that records its arguments and
/// prints `output` as `az account get-access-token --output json` does. Returns the `PATH` to
/// run it with (its directory first).
fn fake_az(dir: &Path, output: &str) -> String {
    let args = dir.join("args");
    fake_az_script(
        dir,
        &format!(
            "echo \"$@\" > '{}'\ncat <<'EOF'\n{output}\nEOF\n",
            args.display()
        ),
    )
}

/// A stand-in for an Azure CLI that fails: `stderr`, exit status 1.
fn fake_az_failing(dir: &Path, stderr: &str) -> String {
    fake_az_script(dir, &format!("cat >&2 <<'EOF'\n{stderr}\nEOF\nexit 1\n"))
}

/// A script named `az` (a stand-in for the Azure CLI, for tests) running `body`.
fn fake_az_script(dir: &Path, body: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join("az");
    std::fs::write(
        &script,
        format!("#!/bin/sh\n# A stand-in for the Azure CLI (az), for tests.\n{body}"),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!("{}:/usr/bin:/bin", dir.display())
}

/// A request as the server read it.
#[derive(Clone, Debug)]
struct Request {
    method: String,
    /// The path and query, as sent.
    path: String,
    headers: Vec<(String, String)>,
    body: String,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn form(&self) -> BTreeMap<String, String> {
        decode_form(&self.body)
    }
}

fn decode_form(text: &str) -> BTreeMap<String, String> {
    fn dec(s: &str) -> String {
        let b = s.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'%' if i + 2 < b.len() => {
                    let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap();
                    out.push(u8::from_str_radix(hex, 16).unwrap());
                    i += 3;
                }
                b'+' => {
                    out.push(b' ');
                    i += 1;
                }
                c => {
                    out.push(c);
                    i += 1;
                }
            }
        }
        String::from_utf8(out).unwrap()
    }
    text.split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (dec(k), dec(v))
        })
        .collect()
}

/// What the server does with a request.
enum Answer {
    Reply {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// Reset the connection (RST) once the request was read.
    Reset,
    /// Answer nothing for a while, then close.
    Silence(Duration),
}

impl Answer {
    fn json(status: u16, body: Value) -> Answer {
        let body = if body.is_null() {
            String::new()
        } else {
            body.to_string()
        };
        Answer::Reply {
            status,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body,
        }
    }

    fn text(status: u16, body: &str) -> Answer {
        Answer::Reply {
            status,
            headers: vec![("Content-Type".into(), "text/html".into())],
            body: body.to_string(),
        }
    }

    fn header(mut self, name: &str, value: &str) -> Answer {
        if let Answer::Reply { headers, .. } = &mut self {
            headers.push((name.to_string(), value.to_string()));
        }
        self
    }
}

type Handler = dyn Fn(&Request) -> Answer + Send + Sync;

/// A tiny HTTP/1.1 server on loopback: one request per connection (`Connection: close`), each
/// connection on a thread of its own; every request is recorded.
struct Server {
    addr: SocketAddr,
    log: Arc<Mutex<Vec<Request>>>,
    stop: Arc<AtomicBool>,
    accept: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn start(handler: impl Fn(&Request) -> Answer + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let handler: Arc<Handler> = Arc::new(handler);
        let accept = {
            let (log, stop) = (log.clone(), stop.clone());
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let (log, handler) = (log.clone(), handler.clone());
                    std::thread::spawn(move || serve(conn, &log, &*handler));
                }
            })
        };
        Server {
            addr,
            log,
            stop,
            accept: Some(accept),
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn requests(&self) -> Vec<Request> {
        self.log.lock().unwrap().clone()
    }

    fn token_requests(&self) -> usize {
        self.requests()
            .iter()
            .filter(|r| r.path.ends_with("/oauth2/v2.0/token"))
            .count()
    }

    fn arm_requests(&self) -> Vec<Request> {
        self.requests()
            .into_iter()
            .filter(|r| !r.path.ends_with("/oauth2/v2.0/token"))
            .collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr); // wakes the accept loop
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

fn serve(mut conn: TcpStream, log: &Mutex<Vec<Request>>, handler: &Handler) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let Some(req) = read_request(&mut conn) else {
        return;
    };
    log.lock().unwrap().push(req.clone());
    match handler(&req) {
        Answer::Reply {
            status,
            headers,
            body,
        } => {
            let mut head = format!("HTTP/1.1 {status} X\r\n");
            for (k, v) in &headers {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str(&format!(
                "Content-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            ));
            let _ = conn.write_all(head.as_bytes());
            let _ = conn.write_all(body.as_bytes());
            let _ = conn.flush();
        }
        Answer::Reset => reset(conn),
        Answer::Silence(d) => std::thread::sleep(d),
    }
}

/// Closes with RST (SO_LINGER of zero), as a peer that crashed or a middlebox would.
fn reset(conn: TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt(2) on a socket we own, with a value of the size given.
    unsafe {
        libc::setsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &linger as *const libc::linger as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    drop(conn);
}

fn read_request(conn: &mut TcpStream) -> Option<Request> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        if buf.len() > 64 * 1024 {
            return None;
        }
        let n = conn.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_string();
    let path = first.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        let n = conn.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(len);
    Some(Request {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).to_string(),
    })
}
