//! The run history: every live dashboard run kept as a recording in one folder,
//! the newest 50 and at most 200 MiB of them, the oldest removed first. Owns the
//! folder's naming and pruning; never reads the recordings themselves.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

pub const MAX_RUNS: usize = 50;
pub const MAX_BYTES: u64 = 200 << 20;

/// Overrides the data folder (tests point it at a temporary one).
pub const ENV_DIR: &str = "GPULAB_DATA_DIR";

/// `$GPULAB_DATA_DIR/runs`, else `$XDG_DATA_HOME/gpulab/runs`, else
/// `~/.local/share/gpulab/runs`; `None` without a home.
pub fn dir() -> Option<PathBuf> {
    data_dir().map(|d| d.join("runs"))
}

/// Where `R` writes the runs it was asked to keep: `recordings` beside `runs`,
/// never pruned, never the working directory (which may be a read-only checkout
/// or a lecture's slides folder).
pub fn recordings_dir() -> Option<PathBuf> {
    data_dir().map(|d| d.join("recordings"))
}

/// `$GPULAB_DATA_DIR`, else `$XDG_DATA_HOME/gpulab`, else `~/.local/share/gpulab`
/// (`crate::dirs`: XDG's rules).
pub fn data_dir() -> Option<PathBuf> {
    std::env::var_os(ENV_DIR)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(crate::dirs::data)
}

/// A file name that sorts by time: `20250102-030405.678-lab--variant.jsonl`.
pub fn file_name(now: SystemTime, lab: &str, variant: &str) -> String {
    let d = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    format!(
        "{}.{:03}-{}--{}.jsonl",
        utc(d.as_secs()),
        d.subsec_millis(),
        clean(lab),
        clean(variant)
    )
}

/// `YYYYMMDD-HHMMSS` in UTC.
pub fn utc(secs: u64) -> String {
    crate::trace::wallclock::Utc::from_unix(secs).compact()
}

/// The recordings in `dir`, newest first (names sort by time).
pub fn list(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl") && p.is_file())
        .collect();
    files.sort();
    files.reverse();
    files
}

/// Removes the oldest recordings until at most `max_runs` remain and they take
/// at most `max_bytes`; the newest is always kept. Returns what it removed.
pub fn prune(dir: &Path, max_runs: usize, max_bytes: u64) -> std::io::Result<Vec<PathBuf>> {
    let mut kept = 0usize;
    let mut bytes = 0u64;
    let mut removed = Vec::new();
    for path in list(dir) {
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        if kept > 0 && (kept >= max_runs || bytes.saturating_add(size) > max_bytes) {
            std::fs::remove_file(&path)?;
            removed.push(path);
        } else {
            kept += 1;
            bytes = bytes.saturating_add(size);
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates_are_civil() {
        assert_eq!(utc(0), "19700101-000000");
        assert_eq!(utc(951_782_400 + 3_661), "20000229-010101");
    }

    #[test]
    fn names_sort_by_time_and_keep_odd_labs_out_of_paths() {
        let t = |s| UNIX_EPOCH + std::time::Duration::from_secs(s);
        let a = file_name(t(1_000), "lab/../x", "v 1");
        let b = file_name(t(2_000), "lab", "v");
        assert!(a < b);
        assert!(!a.contains('/'));
        assert!(a.ends_with("-lab____x--v_1.jsonl"), "{a}");
    }
}
