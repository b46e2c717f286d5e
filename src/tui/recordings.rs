//! Recordings the dashboard offers to open read-only: `assets/recordings/` and
//! `tests/fixtures/recordings/` under the working directory (where a checkout of
//! gpulab keeps them), newest folder first.

use std::path::{Path, PathBuf};

pub const FOLDERS: &[&str] = &["assets/recordings", "tests/fixtures/recordings"];

/// Every `*.jsonl` in the folders under `root`, sorted by name within a folder.
pub fn find(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for folder in FOLDERS {
        let Ok(entries) = std::fs::read_dir(root.join(folder)) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl") && p.is_file())
            .map(|p| p.strip_prefix(root).map(Path::to_path_buf).unwrap_or(p))
            .collect();
        files.sort();
        out.extend(files);
    }
    out
}

/// The name a list shows: the file name without `.jsonl`.
pub fn label(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}
