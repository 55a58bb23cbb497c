//! The portal as the daemon serves it (the browser tests in `web/test/` drive it in Chromium):
//! every page's URL answers with the one shell, the assets come from the binary with their
//! types, a strict Content-Security-Policy and a strong ETag (a 304 on revalidation), the engine
//! module is the daemon's own plugin, an unknown asset is a problem, and the API beside it is
//! untouched — with the fleet telling the signed-in caller who they are.

mod daemon_support;
mod http_support;
mod runtime_support;

use daemon_support::Daemon;
use waverun_host::api::Role;

const ADMIN: &str = "portal-admin";
const VIEWER: &str = "portal-viewer";

fn daemon() -> Daemon {
    Daemon::start(&[
        ("alice", Role::Admin, ADMIN),
        ("victor", Role::Viewer, VIEWER),
    ])
}

#[test]
fn every_page_url_answers_with_the_shell_without_a_token() {
    let d = daemon();
    for page in [
        "/",
        "/fleet",
        "/runs",
        "/runs/r1",
        "/approvals",
        "/strategies",
        "/strategies/rollout",
        "/editor",
        "/simulate",
        "/profiles",
        "/audit",
    ] {
        let r = d.get(&format!("{}{page}", d.root), None);
        assert_eq!(r.status, 200, "{page}");
        assert_eq!(
            r.header("content-type"),
            Some("text/html; charset=utf-8"),
            "{page}"
        );
        let html = r.body.as_str().unwrap();
        assert!(
            html.contains(r#"<script type="module" src="/assets/app.js">"#),
            "{page}"
        );
        let csp = r.header("content-security-policy").unwrap();
        assert!(
            csp.contains("script-src 'self' 'wasm-unsafe-eval'"),
            "{csp}"
        );
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(r.header("referrer-policy"), Some("no-referrer"));
    }
}

#[test]
fn assets_come_from_the_binary_with_their_type_and_a_strong_etag() {
    let d = daemon();
    for (path, ty) in [
        ("/assets/app.js", "text/javascript; charset=utf-8"),
        ("/assets/pages/run.js", "text/javascript; charset=utf-8"),
        ("/assets/portal.css", "text/css; charset=utf-8"),
        ("/assets/favicon.svg", "image/svg+xml"),
    ] {
        let r = d.get(&format!("{}{path}", d.root), None);
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.header("content-type"), Some(ty), "{path}");
        assert_eq!(r.header("cache-control"), Some("no-cache"), "{path}");
        let on_disk = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../web")
                .join(path.trim_start_matches('/')),
        )
        .unwrap();
        assert_eq!(r.body.as_str(), Some(on_disk.as_str()), "{path}");
        let etag = r.etag.clone().expect("an ETag");
        assert!(etag.starts_with('"') && etag.len() == 26, "{etag}");
        let again = d.call(
            "GET",
            &format!("{}{path}", d.root),
            None,
            &[("if-none-match", &etag)],
            None,
        );
        assert_eq!(again.status, 304, "{path}");
        assert_eq!(again.etag.as_deref(), Some(etag.as_str()));
    }
}

#[test]
fn the_engine_module_the_portal_runs_is_the_daemons_own_plugin() {
    let d = daemon();
    let r = http_support::agent()
        .get(format!("{}/assets/waverun_plugin.wasm", d.root))
        .call()
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers().get("content-type").unwrap(), "application/wasm");
    let sha = r
        .headers()
        .get("x-waverun-sha256")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let bytes = r.into_body().read_to_vec().unwrap();
    assert_eq!(bytes, waverun_host::runtime::EMBEDDED_PLUGIN);
    // Its digest, which an engine state's `module` is compared with before the page forecasts.
    assert_eq!(sha, waverun_host::runtime::cache::sha256_hex(&bytes));
}

#[test]
fn an_unknown_asset_is_a_problem_and_unknown_paths_stay_the_apis() {
    let d = daemon();
    let r = d.get(&format!("{}/assets/nope.js", d.root), None);
    assert_eq!(r.status, 404);
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    assert_eq!(r.body["code"], "NotFound");
    assert!(r.body["detail"]
        .as_str()
        .unwrap()
        .contains("/assets/nope.js"));
    // Not a page: the API's own 404, not the shell.
    let r = d.get(&format!("{}/runs/r1/extra", d.root), None);
    assert_eq!(r.status, 404);
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    // The API still wants its token.
    assert_eq!(d.get("/updateRuns", None).status, 401);
}

#[test]
fn the_fleet_tells_the_caller_who_they_are_and_where_the_events_are() {
    let d = daemon();
    let admin = d.get("", Some(ADMIN));
    assert_eq!(admin.status, 200, "{}", admin.body);
    assert_eq!(
        admin.body["properties"]["caller"],
        serde_json::json!({"name": "alice", "role": "admin"})
    );
    let viewer = d.get("", Some(VIEWER));
    assert_eq!(viewer.body["properties"]["caller"]["role"], "viewer");
    // `lastEventSeq` is where a client follows the events from to see only new ones.
    let last = admin.body["properties"]["lastEventSeq"].as_u64().unwrap();
    let events = d.get(&format!("/events?after={last}"), Some(ADMIN));
    assert_eq!(events.status, 200);
    assert_eq!(events.body["value"], serde_json::json!([]));
}
