//! Recordings the dashboard offers to open read-only: `assets/recordings/` (labs),
//! `assets/watch-recordings/` (real programs under `gpulab watch`), the runs of
//! the shipped driver cards (`assets/cards/<card>/recordings/<device>/`) and
//! `tests/fixtures/recordings/` under a checkout of gpulab, and the ones `R` made.
//! Paths keep the root they were found under, so a recording opens whatever the
//! working directory is.

use std::path::{Path, PathBuf};

pub const FOLDERS: &[&str] = &[
    "assets/recordings",
    "assets/watch-recordings",
    "assets/cards",
    "tests/fixtures/recordings",
];

/// How deep under a folder recordings are looked for: a card's runs sit three
/// levels down (`<card>/recordings/<device>/`).
const DEPTH: usize = 3;

/// Where the shipped recordings may be, in order: the working directory, the
/// source tree the binary was built from, and beside the binary itself
/// (`PREFIX/share/gpulab` for `PREFIX/bin/gpulab`, or the binary's folder).
pub fn roots(cwd: &Path, source: &Path, exe: Option<&Path>) -> Vec<PathBuf> {
    let mut out = vec![cwd.to_path_buf(), source.to_path_buf()];
    if let Some(dir) = exe.and_then(Path::parent) {
        if let Some(prefix) = dir.parent() {
            out.push(prefix.join("share/gpulab"));
        }
        out.push(dir.join("share/gpulab"));
        out.push(dir.to_path_buf());
    }
    out
}

/// Every `*.jsonl` in the folders under `root` and up to three levels below
/// them (the shipped ones sit in `assets/recordings/<device>/`, a card's in
/// `assets/cards/<card>/recordings/<device>/`), sorted by path, each joined to
/// `root` (never made relative: the dashboard opens them from wherever it was
/// started).
pub fn find(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for folder in FOLDERS {
        let mut files = Vec::new();
        collect(&root.join(folder), DEPTH, &mut files);
        files.sort();
        out.extend(files);
    }
    out
}

/// The recordings in `dir` and, `depth` levels down, in its folders (links
/// are not followed: a loop of them would never end).
fn collect(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.filter_map(Result::ok) {
        let Ok(kind) = e.file_type() else { continue };
        let path = e.path();
        if kind.is_dir() && depth > 0 {
            collect(&path, depth - 1, out);
        } else if kind.is_file() && path.extension().is_some_and(|x| x == "jsonl") {
            out.push(path);
        }
    }
}

/// The recordings beside `path` (its own folder's `*.jsonl`, itself among
/// them), sorted: `gpulab replay` lists them so `c` finds the other variant
/// of the same run's device.
pub fn siblings(path: &Path) -> Vec<PathBuf> {
    let dir = path.parent().unwrap_or(Path::new(""));
    // `run.jsonl` names its folder as "": read `.`, keep the paths as given.
    let read = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let mut found = Vec::new();
    collect(read, 0, &mut found);
    let mut out: Vec<PathBuf> = found
        .iter()
        .filter_map(|p| Some(dir.join(p.file_name()?)))
        .collect();
    out.sort();
    out
}

/// The device folder a recording sits in (`nvidia-h100`), when it has one. A
/// card's device folder (`opencl-1-nvidia-h200`: backend, index, device) is
/// said as device and backend (`nvidia-h200 opencl`), a CPU's as `cpu opencl`.
pub fn device(path: &Path) -> Option<String> {
    let dir = path.parent()?.file_name()?.to_string_lossy().into_owned();
    if matches!(dir.as_str(), "recordings" | "watch-recordings" | "runs") {
        return None;
    }
    let in_card = path.components().any(|c| c.as_os_str() == "cards");
    let card_dir = dir.split_once('-').and_then(|(backend, rest)| {
        let (index, name) = rest.split_once('-')?;
        let known = matches!(backend, "opencl" | "cuda");
        (known && index.bytes().all(|b| b.is_ascii_digit())).then_some((backend, name))
    });
    match card_dir.filter(|_| in_card) {
        Some((backend, name)) if name.starts_with("cpu") => Some(format!("cpu {backend}")),
        Some((backend, name)) => Some(format!("{name} {backend}")),
        None => Some(dir),
    }
}

/// The name a list shows: lab, variant and device, in the words a class would
/// say them (`cuda-free-async pipeline-free · h100` for
/// `nvidia-h100/cuda-free-async--pipeline-free.jsonl`); a watched program's
/// recording starts with `watch`. [`fit`] shortens it to a column.
pub fn label(path: &Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    let watched = path
        .components()
        .any(|c| c.as_os_str() == "watch-recordings");
    // A run of the history or one `R` recorded: `DATE-TIME.MS-LAB--VARIANT`,
    // shown as `run`/`rec`, the day and time, then lab and variant.
    let kept = match path
        .parent()
        .and_then(|p| p.file_name())
        .and_then(|d| d.to_str())
    {
        Some("runs") => Some("run"),
        Some("recordings") if !path.components().any(|c| c.as_os_str() == "assets") => Some("rec"),
        _ => None,
    };
    let (when, stem) = match (kept, dated(&stem)) {
        (Some(_), Some((when, rest))) => (Some(when), rest.to_string()),
        _ => (None, stem),
    };
    // `LAB--VARIANT`, or `WHERE--LAB--VARIANT` (a test fixture named by the
    // device it came from).
    let parts: Vec<&str> = stem.split("--").collect();
    let (mut name, prefix) = match parts[..] {
        [lab, variant] if !lab.is_empty() && !variant.is_empty() => {
            (format!("{lab} {variant}"), None)
        }
        [on, lab, variant] if [on, lab, variant].iter().all(|p| !p.is_empty()) => {
            (format!("{lab} {variant}"), Some(on.to_string()))
        }
        _ => (stem.clone(), None),
    };
    if let Some(dir) = device(path).or(prefix) {
        name = format!("{name} · {}", dir.strip_prefix("nvidia-").unwrap_or(&dir));
    }
    if let (Some(kind), Some(when)) = (kept, when) {
        name = format!("{kind} {when} {name}");
    }
    if watched {
        format!("watch {name}")
    } else {
        name
    }
}

/// `20261128-073714.355-cl-finish--finish` as (`11-28 07:37:14`, the rest).
fn dated(stem: &str) -> Option<(String, &str)> {
    let b = stem.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    let shaped = digits(0..8)
        && b.get(8) == Some(&b'-')
        && digits(9..15)
        && b.get(15) == Some(&b'.')
        && digits(16..19)
        && b.get(19) == Some(&b'-');
    if !shaped {
        return None;
    }
    let when = format!(
        "{}-{} {}:{}:{}",
        &stem[4..6],
        &stem[6..8],
        &stem[9..11],
        &stem[11..13],
        &stem[13..15]
    );
    Some((when, &stem[20..]))
}

/// A [`label`] in `width` columns: the lab's name gives way first (cut at its
/// end), so the variant and the device, which tell recordings apart, stay whole.
pub fn fit(label: &str, width: usize) -> String {
    let len = label.chars().count();
    if len <= width {
        return label.to_string();
    }
    let (prefix, rest) = match label.strip_prefix("watch ") {
        Some(rest) => ("watch ", rest),
        None => ("", label),
    };
    if let Some((lab, tail)) = rest.split_once(' ') {
        let keep = width
            .checked_sub(prefix.len() + 1 + 1 + tail.chars().count())
            .filter(|k| *k >= 4);
        if let Some(keep) = keep {
            let lab: String = lab.chars().take(keep).collect();
            return format!("{prefix}{lab}… {tail}");
        }
    }
    let cut: String = label.chars().take(width.saturating_sub(1)).collect();
    cut + "…"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn found_recordings_keep_their_root_so_they_open_from_any_folder() {
        // The workspace, whose assets hold the shipped recordings.
        let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .canonicalize()
            .unwrap();
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
            "cl-finish finish · h100"
        );
        assert_eq!(
            label(Path::new(
                "assets/watch-recordings/nvidia-h100/torch-cache.jsonl"
            )),
            "watch torch-cache · h100"
        );
        assert_eq!(label(Path::new("tests/fixtures/recordings/x.jsonl")), "x");
        // A card's runs: by device and backend.
        let card = Path::new("assets/cards/nvidia-h200/recordings");
        assert_eq!(
            label(&card.join("opencl-1-nvidia-h200/cl-finish--finish.jsonl")),
            "cl-finish finish · h200 opencl"
        );
        assert_eq!(
            label(&card.join("cuda-0-nvidia-h200/cuda-free-sync--free-used.jsonl")),
            "cuda-free-sync free-used · h200 cuda"
        );
        assert_eq!(
            label(&card.join(
                "opencl-0-cpu-skylake-avx512-intel-r-xeon-r-processor/cl-finish--finish.jsonl"
            )),
            "cl-finish finish · cpu opencl"
        );
        assert_eq!(
            label(Path::new(
                "tests/fixtures/recordings/pocl--cl-finish--no-wait.jsonl"
            )),
            "cl-finish no-wait · pocl"
        );
        // A run of the history and one `R` recorded, told apart.
        let name = "20261128-073714.355-cl-finish--finish.jsonl";
        assert_eq!(
            label(&Path::new("/d/gpulab/runs").join(name)),
            "run 11-28 07:37:14 cl-finish finish"
        );
        assert_eq!(
            label(&Path::new("/d/gpulab/recordings").join(name)),
            "rec 11-28 07:37:14 cl-finish finish"
        );
    }

    /// An unpacked release finds its recordings beside the binary, with no
    /// checkout and no source tree.
    #[test]
    fn recordings_are_found_beside_an_installed_binary() {
        let prefix = tempfile::tempdir().unwrap();
        let shipped = prefix
            .path()
            .join("share/gpulab/assets/recordings/nvidia-h100");
        std::fs::create_dir_all(&shipped).unwrap();
        std::fs::write(shipped.join("cl-finish--finish.jsonl"), "").unwrap();
        let exe = prefix.path().join("bin/gpulab");
        let nowhere = prefix.path().join("elsewhere");
        let found = roots(&nowhere, &nowhere, Some(&exe))
            .iter()
            .map(|r| find(r))
            .find(|f| !f.is_empty())
            .unwrap_or_default();
        assert_eq!(found, [shipped.join("cl-finish--finish.jsonl")]);
    }

    #[test]
    fn a_label_too_long_for_the_list_cuts_the_lab_and_keeps_what_tells_recordings_apart() {
        let free = label(Path::new(
            "assets/recordings/nvidia-h100/cuda-free-async--pipeline-free.jsonl",
        ));
        let free_async = label(Path::new(
            "assets/recordings/nvidia-h100/cuda-free-async--pipeline-free-async.jsonl",
        ));
        // The dashboard's list has 36 columns for a name.
        let (a, b) = (fit(&free, 36), fit(&free_async, 36));
        assert_ne!(a, b);
        assert!(
            a.chars().count() <= 36 && b.chars().count() <= 36,
            "{a} / {b}"
        );
        assert!(b.ends_with("pipeline-free-async · h100"), "{b}");
        let peer = label(Path::new(
            "assets/recordings/nvidia-h200-x2/cuda-context-per-device--second-device.jsonl",
        ));
        assert_eq!(fit(&peer, 36), "cuda-contex… second-device · h200-x2");
        assert_eq!(fit("short", 36), "short");
    }
}
