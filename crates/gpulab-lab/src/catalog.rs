//! The labs a user can pick from: the ones shipped inside the binary, then
//! `$XDG_CONFIG_HOME/gpulab/labs`, then every `--labs DIR` (later ones win by id).

use std::path::{Path, PathBuf};

use super::diagnostic::Diagnostic;
use super::error::{LabError, Result};
use super::model::{Lab, Origin, Params};
use super::{raw, suggest, validate};

/// Shipped labs, compiled in so `gpulab` works from any directory.
pub const SHIPPED: &[(&str, &str)] = &[
    (
        "cl-premature-release.toml",
        include_str!("../labs/cl-premature-release.toml"),
    ),
    ("cl-finish.toml", include_str!("../labs/cl-finish.toml")),
    (
        "cl-event-wait.toml",
        include_str!("../labs/cl-event-wait.toml"),
    ),
    (
        "cl-forgotten-events.toml",
        include_str!("../labs/cl-forgotten-events.toml"),
    ),
    (
        "cl-cross-queue-release.toml",
        include_str!("../labs/cl-cross-queue-release.toml"),
    ),
    (
        "cl-sub-buffer.toml",
        include_str!("../labs/cl-sub-buffer.toml"),
    ),
    (
        "cl-map-release.toml",
        include_str!("../labs/cl-map-release.toml"),
    ),
    ("cl-host-ptr.toml", include_str!("../labs/cl-host-ptr.toml")),
    (
        "cuda-free-sync.toml",
        include_str!("../labs/cuda-free-sync.toml"),
    ),
    (
        "cuda-free-async.toml",
        include_str!("../labs/cuda-free-async.toml"),
    ),
    (
        "cuda-cross-stream-free.toml",
        include_str!("../labs/cuda-cross-stream-free.toml"),
    ),
    (
        "cuda-leak-loop.toml",
        include_str!("../labs/cuda-leak-loop.toml"),
    ),
    (
        "cuda-double-free.toml",
        include_str!("../labs/cuda-double-free.toml"),
    ),
    (
        "cuda-pool-retention.toml",
        include_str!("../labs/cuda-pool-retention.toml"),
    ),
    (
        "cuda-managed-residency.toml",
        include_str!("../labs/cuda-managed-residency.toml"),
    ),
    (
        "cuda-mixed-free.toml",
        include_str!("../labs/cuda-mixed-free.toml"),
    ),
    (
        "cuda-forgotten-event.toml",
        include_str!("../labs/cuda-forgotten-event.toml"),
    ),
    (
        "cuda-custom-pool.toml",
        include_str!("../labs/cuda-custom-pool.toml"),
    ),
    (
        "cuda-vmm-release.toml",
        include_str!("../labs/cuda-vmm-release.toml"),
    ),
    (
        "cuda-memcpy-sync.toml",
        include_str!("../labs/cuda-memcpy-sync.toml"),
    ),
    (
        "cuda-graph-free.toml",
        include_str!("../labs/cuda-graph-free.toml"),
    ),
    (
        "cuda-peer-copy.toml",
        include_str!("../labs/cuda-peer-copy.toml"),
    ),
    (
        "cuda-peer-access.toml",
        include_str!("../labs/cuda-peer-access.toml"),
    ),
    (
        "cuda-context-per-device.toml",
        include_str!("../labs/cuda-context-per-device.toml"),
    ),
    (
        "cuda-pageable-copy.toml",
        include_str!("../labs/cuda-pageable-copy.toml"),
    ),
    (
        "cuda-mapped-host.toml",
        include_str!("../labs/cuda-mapped-host.toml"),
    ),
    (
        "cuda-host-func.toml",
        include_str!("../labs/cuda-host-func.toml"),
    ),
    (
        "cl-release-callback.toml",
        include_str!("../labs/cl-release-callback.toml"),
    ),
    (
        "cl-event-status.toml",
        include_str!("../labs/cl-event-status.toml"),
    ),
    (
        "cuda-copy-lands.toml",
        include_str!("../labs/cuda-copy-lands.toml"),
    ),
    (
        "cuda-event-timing.toml",
        include_str!("../labs/cuda-event-timing.toml"),
    ),
    (
        "cuda-managed-both-ways.toml",
        include_str!("../labs/cuda-managed-both-ways.toml"),
    ),
    (
        "cuda-device-heap.toml",
        include_str!("../labs/cuda-device-heap.toml"),
    ),
    ("cl-svm-free.toml", include_str!("../labs/cl-svm-free.toml")),
    ("cl-migrate.toml", include_str!("../labs/cl-migrate.toml")),
];

pub struct LabSet {
    labs: Vec<Lab>,
    /// Files in user folders that failed to load; `list` and `check` show them.
    pub problems: Vec<LabError>,
    /// The id each file in `problems` claims (its `id` key when the file is TOML
    /// enough to have one, else its name), so asking for that id shows why.
    claimed: Vec<(String, usize)>,
}

impl LabSet {
    /// The shipped labs, then each of `extra_dirs`; a later lab replaces an
    /// earlier one with the same id. Never fails: what cannot be read or parsed
    /// lands in `problems`.
    pub fn load(extra_dirs: &[PathBuf]) -> LabSet {
        LabSet::load_with(None, extra_dirs)
    }

    /// As `load`, with the user's own folder between the shipped labs and
    /// `extra_dirs` (gpulab's passes `$XDG_CONFIG_HOME/gpulab/labs`); unlike a
    /// folder the user named, it may be missing.
    pub fn load_with(user_dir: Option<&Path>, extra_dirs: &[PathBuf]) -> LabSet {
        let mut set = LabSet {
            labs: Vec::new(),
            problems: Vec::new(),
            claimed: Vec::new(),
        };
        for (name, text) in SHIPPED {
            match parse(&format!("labs/{name}"), text, Origin::Builtin) {
                Ok(lab) => set.insert(lab),
                Err(e) => set.problems.push(e),
            }
        }
        if let Some(dir) = user_dir {
            set.load_dir(dir, false);
        }
        for dir in extra_dirs {
            set.load_dir(dir, true);
        }
        set
    }

    /// A lab file named by its path (`gpulab run ./mine.toml`): loaded and
    /// put in the set like a `--labs` folder's, its id returned. Its mistakes
    /// are the error, with their places.
    pub fn add_file(&mut self, path: &Path) -> Result<String> {
        let lab = load_file(path)?;
        let id = lab.id.clone();
        self.insert(lab);
        Ok(id)
    }

    fn insert(&mut self, lab: Lab) {
        match self.labs.iter_mut().find(|l| l.id == lab.id) {
            Some(old) => *old = lab,
            None => self.labs.push(lab),
        }
    }

    /// Every `*.toml` in `dir`, in name order. A missing folder is a problem only
    /// when the user named it.
    fn load_dir(&mut self, dir: &Path, named: bool) {
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if !named && e.kind() == std::io::ErrorKind::NotFound => return,
            Err(source) => {
                self.problems.push(LabError::Io {
                    path: dir.to_owned(),
                    source,
                });
                return;
            }
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml") && p.is_file())
            .collect();
        files.sort();
        for path in files {
            match load_file(&path) {
                Ok(lab) => self.insert(lab),
                Err(e) => {
                    if let Some(id) = claimed_id(&path) {
                        self.claimed.push((id, self.problems.len()));
                    }
                    self.problems.push(e);
                }
            }
        }
    }

    pub fn labs(&self) -> &[Lab] {
        &self.labs
    }

    /// Lab files in user folders that have mistakes, each as the id it claims and
    /// its first mistake (one line, with `file:line:col`), in load order. A file
    /// that a later valid file of the same id replaced is left out.
    pub fn invalid(&self) -> Vec<(String, String)> {
        self.claimed
            .iter()
            .filter(|(id, _)| !self.labs.iter().any(|l| &l.id == id))
            .filter_map(|(id, i)| Some((id.clone(), self.problems.get(*i)?.to_string())))
            .collect()
    }

    pub fn get(&self, id: &str) -> Result<&Lab> {
        if let Some(lab) = self.labs.iter().find(|l| l.id == id) {
            return Ok(lab);
        }
        if let Some(problem) = self
            .claimed
            .iter()
            .rev()
            .find(|(claimed, _)| claimed == id)
            .and_then(|(_, i)| self.problems.get(*i))
        {
            return Err(LabError::InvalidLab {
                id: id.to_owned(),
                detail: problem.to_string(),
            });
        }
        let ids = || self.labs.iter().map(|l| l.id.as_str());
        let suggestion = suggest::nearest(id, ids()).or_else(|| {
            // `premature` → `cl-premature-release`: a part of the id, if only one has it.
            let wanted = id.to_ascii_lowercase();
            let mut hits = ids().filter(|i| !wanted.is_empty() && i.contains(wanted.as_str()));
            match (hits.next(), hits.next()) {
                (Some(one), None) => Some(one),
                _ => None,
            }
        });
        Err(LabError::UnknownLab {
            id: id.to_owned(),
            suggestion: suggestion.map(str::to_owned),
        })
    }
}

/// The id a lab file that failed to load was meant to have: its `id` key when the
/// file is TOML with a string `id`, else the file's name without `.toml`.
fn claimed_id(path: &Path) -> Option<String> {
    let from_key = std::fs::read_to_string(path)
        .ok()
        .and_then(|text| text.parse::<toml::Table>().ok())
        .and_then(|t| t.get("id").and_then(|v| v.as_str()).map(str::to_owned));
    from_key.or_else(|| path.file_stem().and_then(|s| s.to_str()).map(str::to_owned))
}

/// Parse and validate one lab from text; `file` names it in messages.
pub fn parse(file: &str, text: &str, origin: Origin) -> Result<Lab> {
    raw::read(text)
        .map_err(|p| vec![p])
        .and_then(|raw| validate::lab(raw, text, origin))
        .map_err(|problems| invalid(file, text, &problems, "the lab is not valid"))
}

/// A file's mistakes as one error: the first, with the others after it
/// (`said` stands in should there be none).
pub(crate) fn invalid(
    file: &str,
    text: &str,
    problems: &[crate::mistake::Problem],
    said: &str,
) -> LabError {
    let mut all = problems
        .iter()
        .map(|p| Diagnostic::from_problem(file, text, p));
    let first = all
        .next()
        .unwrap_or_else(|| Diagnostic::at(file, text, 0..0, said.into(), None));
    LabError::Invalid(Box::new(first.with_more(all.collect())))
}

pub fn load_file(path: &Path) -> Result<Lab> {
    let bytes = std::fs::read(path).map_err(|source| LabError::Io {
        path: path.to_owned(),
        source,
    })?;
    parse_bytes(
        &path.display().to_string(),
        bytes,
        Origin::File(path.to_owned()),
    )
}

/// A lab file's bytes, named `file` in messages. Text that is not UTF-8 is a
/// mistake at the first byte that is not.
pub fn parse_bytes(file: &str, bytes: Vec<u8>, origin: Origin) -> Result<Lab> {
    match String::from_utf8(bytes) {
        Ok(text) => parse(file, &text, origin),
        Err(e) => Err(not_utf8(file, &e)),
    }
}

/// A lab file that is not UTF-8, named at the first byte that is not.
pub(crate) fn not_utf8(file: &str, e: &std::string::FromUtf8Error) -> LabError {
    let at = e.utf8_error().valid_up_to();
    let byte = e.as_bytes().get(at).copied().unwrap_or(0);
    let text = String::from_utf8_lossy(e.as_bytes());
    // In the lossy text the bad byte is U+FFFD, three bytes from `at` on.
    LabError::Invalid(Box::new(Diagnostic::at(
        file,
        &text,
        at..at + '\u{fffd}'.len_utf8(),
        format!("not UTF-8 text: byte 0x{byte:02x}"),
        Some("save the file as UTF-8".into()),
    )))
}

/// Defaults overridden by `key=value` texts from `--param`, each range-checked.
pub fn resolve_params(lab: &Lab, overrides: &[String]) -> Result<Params> {
    let mut params = lab.default_params();
    for text in overrides {
        let bad = |reason: String| LabError::BadParam {
            text: text.clone(),
            reason,
        };
        let Some((name, value)) = text.split_once('=') else {
            return Err(bad("expected NAME=VALUE, e.g. `size_mib=64`".into()));
        };
        let (name, value) = (name.trim(), value.trim());
        let Some(p) = lab.params.iter().find(|p| p.name == name) else {
            let known = lab.params.iter().map(|p| p.name.as_str());
            let reason = match suggest::nearest(name, known) {
                Some(s) => format!(
                    "lab `{}` has no parameter `{name}`; did you mean `{s}`?",
                    lab.id
                ),
                None if lab.params.is_empty() => format!("lab `{}` has no parameters", lab.id),
                None => format!(
                    "lab `{}` has no parameter `{name}` (parameters: {})",
                    lab.id,
                    lab.params
                        .iter()
                        .map(|p| p.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            return Err(bad(reason));
        };
        let v = match value.parse::<f64>() {
            Ok(v) if v.is_finite() => v,
            _ => return Err(bad(format!("`{value}` is not a number"))),
        };
        if !(p.min..=p.max).contains(&v) {
            let unit = p.unit.suffix();
            return Err(bad(format!(
                "{v} is outside the range of `{name}`: {}..={}{unit}",
                p.min, p.max
            )));
        }
        params.insert(name.to_owned(), v);
    }
    Ok(params)
}
