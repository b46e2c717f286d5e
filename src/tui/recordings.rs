//! Recordings the dashboard offers to open read-only: `assets/recordings/` (labs),
//! `assets/watch-recordings/` (real programs under `gpulab watch`) and
//! `tests/fixtures/recordings/` under a checkout of gpulab, and the ones `R` made.
//! Paths keep the root they were found under, so a recording opens whatever the
//! working directory is.

use std::path::{Path, PathBuf};

pub const FOLDERS: &[&str] = &[
    "assets/recordings",
    "assets/watch-recordings",
    "tests/fixtures/recordings",
];

/// Every `*.jsonl` in the folders under `root` and one level below them (the
/// shipped ones sit in `assets/recordings/<device>/`), sorted by path, each
/// joined to `root` (never made relative: the dashboard opens them from wherever
/// it was started).
pub fn find(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for folder in FOLDERS {
        let mut files = Vec::new();
        let top = root.join(folder);
        collect(&top, &mut files);
        if let Ok(entries) = std::fs::read_dir(&top) {
            for dir in entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_dir())
            {
                collect(&dir, &mut files);
            }
        }
        files.sort();
        out.extend(files);
    }
    out
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    out.extend(
        entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl") && p.is_file()),
    );
}

/// The device folder a recording sits in (`nvidia-h100`), when it has one.
pub fn device(path: &Path) -> Option<String> {
    let dir = path.parent()?.file_name()?.to_string_lossy().into_owned();
    (!matches!(dir.as_str(), "recordings" | "watch-recordings" | "runs")).then_some(dir)
}

/// The name a list shows: the file name without `.jsonl`, after its device folder
/// when it has one (`nvidia-h100/cuda-free-async--pipeline-free`).
pub fn label(path: &Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    let parent = path
        .parent()
        .and_then(|p| p.file_name())
        .map(|p| p.to_string_lossy().into_owned());
    let watched = path
        .components()
        .any(|c| c.as_os_str() == "watch-recordings");
    let name = match parent {
        Some(dir) if dir != "recordings" && dir != "watch-recordings" => format!("{dir}/{stem}"),
        _ => stem,
    };
    if watched {
        format!("watch {name}")
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn found_recordings_keep_their_root_so_they_open_from_any_folder() {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let found = find(&root);
        assert!(!found.is_empty());
        for p in &found {
            assert!(p.starts_with(&root), "{} lost its root", p.display());
        }
    }

    #[test]
    fn labels_name_the_device_and_mark_watched_programs() {
        assert_eq!(
            label(Path::new(
                "assets/recordings/nvidia-h100/cl-finish--finish.jsonl"
            )),
            "nvidia-h100/cl-finish--finish"
        );
        assert_eq!(
            label(Path::new(
                "assets/watch-recordings/nvidia-h100/torch-cache.jsonl"
            )),
            "watch nvidia-h100/torch-cache"
        );
        assert_eq!(label(Path::new("tests/fixtures/recordings/x.jsonl")), "x");
    }
}
