//! The web portal (`web/`), served by the daemon beside the API: the assets embedded at build
//! time (`build.rs`) and the pages' URLs, each of which answers with the one HTML shell. The
//! pages are ES modules that route in the browser, talk only to the API (`/api/v1/...`) with the
//! bearer token the user signed in with, and run the embedded engine plugin under the browser's
//! own `WebAssembly` API for validation, planning and simulation.
//!
//! Everything here is public: the assets hold no data and no secret. What the portal shows comes
//! from the API, which checks the token on every request.

use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use sha2::{Digest, Sha256};
use std::sync::OnceLock;

/// `(URL path, bytes)` of `web/index.html` and of every file under `web/assets/`.
static FILES: &[(&str, &[u8])] = include!(concat!(env!("OUT_DIR"), "/portal_assets.rs"));

/// Where the portal fetches the engine plugin (the module the daemon itself runs).
pub const PLUGIN_PATH: &str = "/assets/waverun_plugin.wasm";

/// The pages: every one answers with the shell, which renders the page its URL names.
pub const PAGES: &[&str] = &[
    "/",
    "/fleet",
    "/runs",
    "/runs/{name}",
    "/approvals",
    "/strategies",
    "/strategies/{name}",
    "/editor",
    "/simulate",
    "/profiles",
    "/webhooks",
    "/audit",
];

/// Content security: scripts and connections to this origin only (WebAssembly compiled from
/// bytes needs `'wasm-unsafe-eval'`), no inline script, no framing.
const CSP: &str = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; \
                   style-src 'self'; img-src 'self' data:; connect-src 'self'; \
                   object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'";

/// The portal's routes: the pages and `/assets/...`.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    let mut r = Router::new().route("/assets/{*path}", get(asset));
    for page in PAGES {
        r = r.route(page, get(shell));
    }
    r
}

/// One embedded file: its bytes, content type and strong validator.
struct Asset {
    bytes: &'static [u8],
    content_type: &'static str,
    etag: String,
    /// The hex SHA-256 of `bytes`, sent as `x-waverun-sha256`: the page's engine compares the
    /// plugin's with the `module` of an engine state before it forecasts from that state.
    sha256: String,
}

fn assets() -> &'static [(&'static str, Asset)] {
    static ALL: OnceLock<Vec<(&'static str, Asset)>> = OnceLock::new();
    ALL.get_or_init(|| {
        FILES
            .iter()
            .map(|(path, bytes)| (*path, *bytes))
            .chain(std::iter::once((
                PLUGIN_PATH,
                crate::runtime::EMBEDDED_PLUGIN,
            )))
            .map(|(path, bytes)| {
                let digest = Sha256::digest(bytes);
                let etag = format!("\"{}\"", hex(&digest[..12]));
                let asset = Asset {
                    bytes,
                    content_type: content_type(path),
                    etag,
                    sha256: hex(&digest),
                };
                (path, asset)
            })
            .collect()
    })
}

fn find(path: &str) -> Option<&'static Asset> {
    assets().iter().find(|(p, _)| *p == path).map(|(_, a)| a)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("wasm") => "application/wasm",
        Some("json") => "application/json",
        Some("yaml" | "yml") => "text/yaml; charset=utf-8",
        _ => "application/octet-stream",
    }
}

async fn shell(headers: HeaderMap) -> Response {
    serve(
        find("/index.html").expect("web/index.html is embedded"),
        &headers,
    )
}

async fn asset(Path(path): Path<String>, headers: HeaderMap) -> Response {
    match find(&format!("/assets/{path}")) {
        Some(a) => serve(a, &headers),
        None => crate::api::Problem::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("the portal has no asset /assets/{path}"),
        )
        .into_response(),
    }
}

/// The asset, revalidated on every use (`no-cache` with a strong ETag): a new daemon binary
/// never leaves an old script in a browser's cache.
fn serve(a: &Asset, headers: &HeaderMap) -> Response {
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == a.etag));
    let mut r = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, a.content_type)], a.bytes).into_response()
    };
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&a.etag) {
        h.insert(header::ETAG, v);
    }
    if let Ok(v) = HeaderValue::from_str(&a.sha256) {
        h.insert("x-waverun-sha256", v);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    r
}
