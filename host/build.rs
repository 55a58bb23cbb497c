//! Builds the engine plugin (`bindings/plugin`, for `wasm32-unknown-unknown`) and embeds it, so
//! that `cargo build --release -p waverun` alone gives a `waverun` that needs no other file.
//!
//! The plugin is built by a nested `cargo build --profile plugin-embed` (small: the daemon's
//! first start compiles it) into `<target>/plugin-embed`: a target directory of its own (the
//! outer build holds the lock on the outer one), shared by every profile of the outer build
//! (dev, release, clippy), so it is compiled once and is fresh after that. `WAVERUN_EMBED_PLUGIN=FILE` embeds a prebuilt module instead (packagers).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let root = manifest
        .parent()
        .expect("host/ is in the workspace")
        .to_path_buf();
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets it"));
    let dest = out.join("waverun_plugin.wasm");
    println!("cargo:rerun-if-env-changed=WAVERUN_EMBED_PLUGIN");
    embed_portal(&root.join("web"), &out.join("portal_assets.rs"));

    if let Some(prebuilt) = env::var_os("WAVERUN_EMBED_PLUGIN").filter(|v| !v.is_empty()) {
        let prebuilt = PathBuf::from(prebuilt);
        println!("cargo:rerun-if-changed={}", prebuilt.display());
        copy(&prebuilt, &dest);
        return;
    }
    for watched in [
        "core/src",
        "core/Cargo.toml",
        "bindings/plugin/src",
        "bindings/plugin/Cargo.toml",
        "Cargo.toml",
        "Cargo.lock",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    let target = outer_target_dir(&out).join("plugin-embed");
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&root)
        .args(["build", "--profile", "plugin-embed", "--locked"])
        .args([
            "-p",
            "waverun-plugin",
            "--target",
            "wasm32-unknown-unknown",
            "--target-dir",
        ])
        .arg(&target);
    // The outer build's settings are not the plugin's: its flags, its target, its jobserver,
    // clippy's driver.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_TARGET_DIR",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_MAKEFLAGS",
        "MAKEFLAGS",
        "MFLAGS",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_PROFILE_RELEASE_DEBUG",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("waverun: cannot run cargo to build the embedded plugin: {e}"));
    if !status.success() {
        panic!(
            "waverun: building the embedded plugin failed ({status}). It needs the \
             wasm32-unknown-unknown target: `rustup target add wasm32-unknown-unknown`; or embed \
             a prebuilt module with WAVERUN_EMBED_PLUGIN=FILE"
        );
    }
    copy(
        &target.join("wasm32-unknown-unknown/plugin-embed/waverun_plugin.wasm"),
        &dest,
    );
}

/// The portal (`web/`): `index.html` and everything under `web/assets/`, as a generated table
/// of `(URL path, bytes)` that `include_bytes!` embeds, so the binary serves the portal with no
/// file beside it and no tool beyond cargo (no npm, no bundler).
fn embed_portal(web: &Path, dest: &Path) {
    let mut files = vec![("/index.html".to_string(), web.join("index.html"))];
    let mut dirs = vec![web.join("assets")];
    while let Some(dir) = dirs.pop() {
        println!("cargo:rerun-if-changed={}", dir.display());
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("waverun: cannot read the portal's {}: {e}", dir.display()))
            .map(|e| e.expect("a directory entry").path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                dirs.push(path);
            } else {
                let rel = path.strip_prefix(web).expect("under web/");
                let url = format!("/{}", rel.to_string_lossy().replace('\\', "/"));
                files.push((url, path));
            }
        }
    }
    files.sort();
    let mut table = String::from("&[\n");
    for (url, path) in &files {
        println!("cargo:rerun-if-changed={}", path.display());
        table.push_str(&format!(
            "    ({url:?}, include_bytes!({:?})),\n",
            path.display().to_string()
        ));
    }
    table.push_str("]\n");
    std::fs::write(dest, table)
        .unwrap_or_else(|e| panic!("waverun: cannot write {}: {e}", dest.display()));
}

fn copy(from: &Path, to: &Path) {
    std::fs::copy(from, to).unwrap_or_else(|e| {
        panic!(
            "waverun: cannot copy the plugin {} to {}: {e}",
            from.display(),
            to.display()
        )
    });
}

/// The outer build's target directory: the nearest ancestor of `OUT_DIR` that cargo marked
/// with `CACHEDIR.TAG`; `OUT_DIR` itself if there is none.
fn outer_target_dir(out: &Path) -> PathBuf {
    out.ancestors()
        .find(|d| d.join("CACHEDIR.TAG").is_file())
        .unwrap_or(out)
        .to_path_buf()
}
