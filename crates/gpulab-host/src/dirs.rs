//! Where gpulab keeps its files, by one rule: the XDG base directories as the
//! `etcetera` crate reads them (a variable that is empty or not an absolute path is
//! ignored; the home directory comes from `HOME`, else the password database).
//! Also the one way gpulab writes a file others may read at the same time.

use std::io::Write;
use std::path::{Path, PathBuf};

use etcetera::BaseStrategy;

fn xdg() -> Option<etcetera::base_strategy::Xdg> {
    etcetera::base_strategy::Xdg::new().ok()
}

/// `$XDG_DATA_HOME/gpulab`, else `~/.local/share/gpulab`.
pub fn data() -> Option<PathBuf> {
    xdg().map(|x| x.data_dir().join("gpulab"))
}

/// `$XDG_CONFIG_HOME/gpulab`, else `~/.config/gpulab`.
pub fn config() -> Option<PathBuf> {
    xdg().map(|x| x.config_dir().join("gpulab"))
}

/// `$XDG_CACHE_HOME/gpulab`, else `~/.cache/gpulab`.
pub fn cache() -> Option<PathBuf> {
    xdg().map(|x| x.cache_dir().join("gpulab"))
}

/// `$XDG_RUNTIME_DIR/gpulab`, when the session has a runtime directory.
pub fn runtime() -> Option<PathBuf> {
    xdg()
        .and_then(|x| x.runtime_dir())
        .map(|d| d.join("gpulab"))
}

/// Writes `bytes` to `path` so that a reader sees the old file or the new one,
/// never half of it: into a file of this process's own beside it, then renamed
/// over it (two gpulabs writing the same cache entry both leave a whole one).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    write_atomic_with(path, |f| f.write_all(bytes))
}

/// [`write_atomic`] of what `write` writes into the file as it goes (a stream
/// too big to hold), into a folder that must exist (an output path in a
/// missing folder is the user's to fix): the file appears whole under its name
/// or not at all, and a full disk leaves the old file, or nothing, never part
/// of the new one.
pub fn write_atomic_with(
    path: &Path,
    write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .and_then(|mut f| write(&mut f).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// A folder only this user can use under the shared temporary directory, for
/// when there is no home and no runtime directory: `/tmp/gpulab-UID`, made with
/// mode 0700, and refused when it is a link, another user's, or open to others (a
/// name anyone can guess, so anyone could have made it first).
pub fn private_temp() -> Result<PathBuf, String> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let uid = rustix::process::getuid().as_raw();
    let dir = std::env::temp_dir().join(format!("gpulab-{uid}"));
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot make {}: {e}", dir.display())),
    }
    let meta = std::fs::symlink_metadata(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if !meta.file_type().is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(format!(
            "{} is not a private folder of this user (a link, another user's, or open to \
             others); gpulab will not write there",
            dir.display()
        ));
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_atomic_write_replaces_the_whole_file_and_leaves_no_temporary() {
        let dir = std::env::temp_dir().join(format!("gpulab-dirs-test-{}", std::process::id()));
        let file = dir.join("sub").join("entry.ptx");
        write_atomic(&file, b"first version, the longer one").unwrap();
        write_atomic(&file, b"second").unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"second");
        let names: Vec<_> = std::fs::read_dir(dir.join("sub"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("entry.ptx")]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A write that fails halfway (a full disk, a closed stream) leaves the old
    /// file whole, or no file, and no temporary beside it.
    #[test]
    fn a_write_that_fails_halfway_leaves_the_old_file_or_none() {
        let dir = std::env::temp_dir().join(format!("gpulab-dirs-half-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("trace.json");
        let full = |f: &mut std::fs::File| {
            f.write_all(b"{\"traceEvents\":[")?;
            Err(std::io::Error::from_raw_os_error(28)) // ENOSPC
        };
        assert!(write_atomic_with(&file, full).is_err());
        assert!(!file.exists(), "no half file where there was none");
        write_atomic(&file, b"old, whole").unwrap();
        assert!(write_atomic_with(&file, full).is_err());
        assert_eq!(std::fs::read(&file).unwrap(), b"old, whole");
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("trace.json")]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_private_temp_folder_is_this_users_alone() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dir = private_temp().unwrap();
        let meta = std::fs::symlink_metadata(&dir).unwrap();
        assert_eq!(meta.uid(), rustix::process::getuid().as_raw());
        assert_eq!(meta.permissions().mode() & 0o077, 0);
    }
}
