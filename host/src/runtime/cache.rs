//! The on-disk cache of precompiled modules.
//!
//! Compiling the plugin with Cranelift takes tens of milliseconds to seconds; loading a
//! precompiled artifact takes well under a millisecond. Entries are named
//! `{sha256 of the wasm bytes}-{hash of the engine's compatibility}.cwasm`, so a changed plugin or
//! a host built with another wasmtime version or configuration never meets a stale entry. Each
//! entry has a sidecar `.sha256` written after the artifact: the artifact's SHA-256 on its first
//! line (so tools can verify it), and an `integrity` line with its length and CRC-32, which is
//! what a load checks, on the same open file that is then handed to wasmtime; anything that does
//! not check out (missing sidecar, wrong length or checksum, deserialization error) is removed and
//! the module recompiled: a corrupt cache costs a compile, never a failure. A sidecar without the
//! `integrity` line (written by an older host) is checked against its SHA-256 instead.
//!
//! ## Why `Module::deserialize_open_file` is sound here
//! Deserializing runs native code from the file without validating it, so the file must be the
//! unmodified output of `wasmtime::Engine::precompile_module` of *this* engine configuration:
//! - only this module writes into the cache directory (created `0700` on Unix), always through a
//!   temporary file renamed into place, so a reader never sees a half-written artifact and a
//!   replaced entry is a new inode (wasmtime maps the file; an old mapping keeps the old bytes);
//! - the name binds the entry to the exact wasm bytes and to the engine's compatibility hash,
//!   and wasmtime itself refuses artifacts of another version or configuration;
//! - the sidecar, which we wrote after the artifact, must match the artifact's length and CRC-32,
//!   which catches truncation, bit rot and accidental edits (a CRC-32 detects every burst error
//!   up to 32 bits and all but 2^-32 of other corruptions; that is its job here, not resisting a
//!   forger, see below). The check reads the very file handle that wasmtime then maps, so a
//!   rename between check and load cannot swap the checked bytes for others.
//!
//! What it does not defend against is someone with write access to the cache directory who
//! writes a matching artifact and sidecar on purpose; that person can already run code as the
//! host's user, so the cache directory must be as private as the host's binary. (A cryptographic
//! digest would not help against that person either: they write the sidecar too. That is why the
//! load checks a CRC-32, about 0.3 ms for the plugin's artifact, rather than a SHA-256, several
//! milliseconds.)

use super::error::PluginError;
use sha2::{Digest, Sha256};
use std::fs;
use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use wasmtime::{Engine as WasmEngine, Module};

/// How a module was obtained.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheStatus {
    /// No cache directory: compiled in memory.
    Disabled,
    /// Loaded from the cache without compiling.
    Hit,
    /// Not in the cache: compiled, and stored unless `stored` is false (the error is ignored).
    Compiled {
        /// Whether the artifact was written to the cache.
        stored: bool,
    },
    /// A cache entry was unusable: removed, compiled again and stored again.
    Recompiled {
        /// What was wrong with the entry.
        reason: String,
        /// Whether the new artifact was written to the cache.
        stored: bool,
    },
}

/// Hex SHA-256 of bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Feeds a `Hash` value into SHA-256 (stable across processes, unlike `DefaultHasher`'s
/// unspecified algorithm).
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        0 // unused: the digest is taken with `finalize`
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// A short hex digest of `wasmtime::Engine::precompile_compatibility_hash`.
pub fn engine_compat_hash(engine: &WasmEngine) -> String {
    let mut h = ShaHasher(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut h);
    hex(&h.0.finalize()[..8])
}

pub(crate) struct ModuleCache {
    dir: PathBuf,
    compat: String,
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl ModuleCache {
    pub(crate) fn new(dir: &Path, engine: &WasmEngine) -> Result<ModuleCache, PluginError> {
        if !dir.exists() {
            let mut b = fs::DirBuilder::new();
            b.recursive(true);
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
            b.create(dir).map_err(|e| {
                PluginError::Io(std::io::Error::new(
                    e.kind(),
                    format!("cache directory {}: {e}", dir.display()),
                ))
            })?;
        }
        Ok(ModuleCache {
            dir: dir.to_path_buf(),
            compat: engine_compat_hash(engine),
        })
    }

    /// The artifact path for wasm bytes whose SHA-256 is `wasm_sha`.
    pub(crate) fn entry_path(&self, wasm_sha: &str) -> PathBuf {
        self.dir.join(format!("{wasm_sha}-{}.cwasm", self.compat))
    }

    pub(crate) fn load(
        &self,
        engine: &WasmEngine,
        wasm: &[u8],
        wasm_sha: &str,
    ) -> Result<(Module, CacheStatus), PluginError> {
        let path = self.entry_path(wasm_sha);
        let digest_path = digest_path(&path);
        let mut reason = None;
        if path.exists() {
            match self.check(&path, &digest_path) {
                Ok(file) => {
                    // SAFETY: see the module docs. `check` proved, on this open file, that it is
                    // the artifact we wrote for exactly these wasm bytes and this engine
                    // configuration (name) and that its bytes are unchanged (length and
                    // checksum); we only ever replace entries by rename, so the mapped file is
                    // never modified in place.
                    match unsafe { Module::deserialize_open_file(engine, file) } {
                        Ok(m) => return Ok((m, CacheStatus::Hit)),
                        Err(e) => reason = Some(format!("deserialize: {e}")),
                    }
                }
                Err(e) => reason = Some(e),
            }
            let _ = fs::remove_file(&digest_path);
            let _ = fs::remove_file(&path);
        }
        let artifact = engine
            .precompile_module(wasm)
            .map_err(|e| PluginError::Load(format!("{e:?}")))?;
        let stored = self.store(&path, &digest_path, &artifact).is_ok();
        // SAFETY: `artifact` is the unmodified output of `precompile_module` on this engine.
        let module = unsafe { Module::deserialize(engine, &artifact) }
            .map_err(|e| PluginError::Load(format!("{e:?}")))?;
        let status = match reason {
            None => CacheStatus::Compiled { stored },
            Some(reason) => CacheStatus::Recompiled { reason, stored },
        };
        Ok((module, status))
    }

    /// Checks the artifact at `path` against its sidecar; returns the open file, rewound.
    fn check(&self, path: &Path, digest_path: &Path) -> Result<fs::File, String> {
        let sidecar = fs::read_to_string(digest_path).map_err(|e| format!("digest: {e}"))?;
        let mut file = fs::File::open(path).map_err(|e| format!("open: {e}"))?;
        match Integrity::parse(&sidecar) {
            Some(want) => {
                let len = file.metadata().map_err(|e| format!("stat: {e}"))?.len();
                if len != want.len {
                    return Err(format!(
                        "artifact is {len} bytes, its sidecar says {}",
                        want.len
                    ));
                }
                let mut crc = crc32fast::Hasher::new();
                let read =
                    read_chunks(&mut file, |c| crc.update(c)).map_err(|e| format!("read: {e}"))?;
                if read != want.len || crc.finalize() != want.crc32 {
                    return Err("artifact does not match its checksum".into());
                }
            }
            None => {
                // A sidecar of an older host: the artifact's SHA-256 only.
                let mut sha = Sha256::new();
                read_chunks(&mut file, |c| sha.update(c)).map_err(|e| format!("read: {e}"))?;
                let want = sidecar.lines().next().unwrap_or_default().trim();
                if hex(&sha.finalize()) != want {
                    return Err("artifact does not match its digest".into());
                }
            }
        }
        Ok(file)
    }

    fn store(&self, path: &Path, digest_path: &Path, artifact: &[u8]) -> std::io::Result<()> {
        write_atomic(&self.dir, path, artifact)?;
        let sidecar = format!(
            "{}\n{}\n",
            sha256_hex(artifact),
            Integrity {
                len: artifact.len() as u64,
                crc32: crc32fast::hash(artifact),
            }
            .line()
        );
        write_atomic(&self.dir, digest_path, sidecar.as_bytes())
    }
}

/// The sidecar's `integrity <len> <crc32 hex>` line: what a load checks.
struct Integrity {
    len: u64,
    crc32: u32,
}

impl Integrity {
    const PREFIX: &'static str = "integrity ";

    fn line(&self) -> String {
        format!("{}{} {:08x}", Self::PREFIX, self.len, self.crc32)
    }

    fn parse(sidecar: &str) -> Option<Integrity> {
        let rest = sidecar
            .lines()
            .find_map(|l| l.trim().strip_prefix(Self::PREFIX))?;
        let (len, crc) = rest.trim().split_once(' ')?;
        Some(Integrity {
            len: len.parse().ok()?,
            crc32: u32::from_str_radix(crc.trim(), 16).ok()?,
        })
    }
}

/// Feeds the whole file to `f` in chunks (small enough to stay in cache); returns the byte
/// count, and leaves the file where it started (offset 0).
fn read_chunks(file: &mut fs::File, mut f: impl FnMut(&[u8])) -> std::io::Result<u64> {
    use std::io::{Seek, SeekFrom};
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        f(&buf[..n]);
        total += n as u64;
    }
    file.seek(SeekFrom::Start(0))?;
    Ok(total)
}

fn digest_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".sha256");
    PathBuf::from(p)
}

/// Writes `bytes` to a temporary file in `dir`, flushes it and renames it to `path`.
fn write_atomic(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(format!(
        ".tmp-{}-{}",
        std::process::id(),
        TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}
