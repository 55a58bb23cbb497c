//! One process per data directory: an exclusive `flock(2)` on `<data dir>/waverun.lock`, held
//! for as long as the process that took it lives (the kernel lets go when it exits, however it
//! exits: `kill -9` leaves no stale lock). The file says who holds it, so that a second daemon,
//! or a `waverun store restore`, refuses with a message naming the holder.

use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// The lock file in a data directory.
pub const LOCK_FILE: &str = "waverun.lock";

/// The data directory's lock, held until dropped.
#[derive(Debug)]
pub struct DataDirLock {
    file: std::fs::File,
    path: PathBuf,
}

impl DataDirLock {
    /// Takes the lock of `dir` (created if needed) for `what` (e.g. `waverun serve on
    /// 127.0.0.1:7700`), or says who holds it.
    pub fn acquire(dir: &Path, what: &str) -> Result<DataDirLock, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("data dir {}: {e}", dir.display()))?;
        let path = dir.join(LOCK_FILE);
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        // SAFETY: flock(2) on a descriptor this function owns; it touches no memory.
        let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if r != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(format!("locking {}: {err}", path.display()));
            }
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            return Err(format!(
                "data dir {} is in use by another process ({}): stop it first, or use another data directory",
                dir.display(),
                if holder.is_empty() {
                    "it has not said who it is yet"
                } else {
                    holder
                }
            ));
        }
        let who = format!(
            "{what}, pid {}, since {}",
            std::process::id(),
            crate::now_rfc3339()
        );
        file.set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| file.write_all(who.as_bytes()))
            .and_then(|()| file.flush())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(DataDirLock { file, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for DataDirLock {
    fn drop(&mut self) {
        // Says nobody holds it; the lock itself goes with the descriptor.
        let _ = self.file.set_len(0);
    }
}
