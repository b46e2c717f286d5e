//! Where libcupti is, for `gpulab watch` on CUDA programs.
//!
//! The agent watches a CUDA program through CUPTI, which ships in two ways: with
//! the CUDA toolkit (`/usr/local/cuda*/targets/*/lib`, `extras/CUPTI/lib64`,
//! `$CUDA_HOME`) and as the `nvidia-cuda-cupti` Python wheel, which PyTorch
//! installs into the program's environment (`site-packages/nvidia/*/lib`). The
//! files are only found here, never loaded: the agent loads the one chosen inside
//! the program.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A libcupti on this machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cupti {
    pub path: String,
    /// Where it came from: `--cupti`, `CUDA_HOME`, `toolkit`, `python wheel`.
    pub from: String,
    /// The version its file name carries (`13.0.85` of `libcupti.so.13.0.85`), if any.
    pub version: Option<String>,
}

/// Every libcupti found, best first: the explicit path, then `CUDA_HOME`, the
/// active Python environment's wheel, installed toolkits (newest first), the
/// system's Python wheels, and the dynamic linker's cache.
pub fn find(explicit: Option<&Path>) -> Vec<Cupti> {
    let mut found = Vec::new();
    if let Some(p) = explicit {
        found.push(cupti(p.to_path_buf(), "--cupti"));
        return found;
    }
    let env_dirs = |var: &str| -> Vec<PathBuf> {
        std::env::var_os(var)
            .map(PathBuf::from)
            .into_iter()
            .collect()
    };
    for home in env_dirs("CUDA_HOME")
        .into_iter()
        .chain(env_dirs("CUDA_PATH"))
    {
        found.extend(in_toolkit(&home).map(|p| cupti(p, "CUDA_HOME")));
    }
    for prefix in env_dirs("VIRTUAL_ENV")
        .into_iter()
        .chain(env_dirs("CONDA_PREFIX"))
    {
        found.extend(in_python_prefix(&prefix).map(|p| cupti(p, "python wheel")));
    }
    let mut toolkits = glob_dirs(Path::new("/usr/local"), "cuda");
    toolkits.push(PathBuf::from("/opt/cuda"));
    // `cuda-13.0` before `cuda-12.8`; plain `cuda` (a link to one of them) last.
    toolkits.sort_by_key(|p| std::cmp::Reverse(version_key(p)));
    for home in toolkits {
        found.extend(in_toolkit(&home).map(|p| cupti(p, "toolkit")));
    }
    let mut prefixes = vec![PathBuf::from("/usr/local"), PathBuf::from("/usr")];
    if let Some(home) = std::env::var_os("HOME") {
        prefixes.push(Path::new(&home).join(".local"));
    }
    for prefix in prefixes {
        found.extend(in_python_prefix(&prefix).map(|p| cupti(p, "python wheel")));
    }
    found.extend(
        super::loader::ldconfig_cache_prefix("libcupti.so")
            .into_iter()
            .map(|p| cupti(p, "ldconfig")),
    );
    dedup_by_real_path(found)
}

fn cupti(path: PathBuf, from: &str) -> Cupti {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let version = name
        .strip_prefix("libcupti.so.")
        .filter(|v| !v.is_empty())
        .map(str::to_string);
    Cupti {
        path: path.display().to_string(),
        from: from.into(),
        version,
    }
}

/// libcupti files inside one toolkit installation.
fn in_toolkit(home: &Path) -> impl Iterator<Item = PathBuf> {
    let mut dirs = vec![home.join("extras/CUPTI/lib64"), home.join("lib64")];
    dirs.extend(
        glob_dirs(&home.join("targets"), "")
            .into_iter()
            .map(|t| t.join("lib")),
    );
    dirs.into_iter().flat_map(|d| libraries_in(&d))
}

/// libcupti from the `nvidia-cuda-cupti` wheel in a Python prefix:
/// `lib/python3.*/{site,dist}-packages/nvidia/{cuda_cupti,cu13,cu12,...}/lib`.
fn in_python_prefix(prefix: &Path) -> impl Iterator<Item = PathBuf> {
    let mut dirs = Vec::new();
    for lib in ["lib", "lib64"] {
        for py in glob_dirs(&prefix.join(lib), "python3") {
            for packages in ["site-packages", "dist-packages"] {
                let nvidia = py.join(packages).join("nvidia");
                let mut subs = glob_dirs(&nvidia, "");
                subs.sort_by_key(|p| std::cmp::Reverse(version_key(p)));
                dirs.extend(subs.into_iter().map(|s| s.join("lib")));
            }
        }
    }
    dirs.into_iter().flat_map(|d| libraries_in(&d))
}

/// `libcupti.so*` in `dir`, the most specific version first.
fn libraries_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut libs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libcupti.so"))
        })
        .collect();
    libs.sort_by_key(|p| std::cmp::Reverse(version_key(p)));
    libs
}

/// Directories in `parent` whose names start with `prefix`.
fn glob_dirs(parent: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect()
}

/// The numbers in a path's last component, to sort versions numerically.
fn version_key(p: &Path) -> Vec<u64> {
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect()
}

/// Each file once, the first time it was found.
fn dedup_by_real_path(found: Vec<Cupti>) -> Vec<Cupti> {
    let mut seen = Vec::new();
    found
        .into_iter()
        .filter(|c| {
            let real = std::fs::canonicalize(&c.path).unwrap_or_else(|_| PathBuf::from(&c.path));
            if seen.contains(&real) {
                false
            } else {
                seen.push(real);
                true
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(p: &Path) {
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, b"").expect("write");
    }

    #[test]
    fn a_toolkit_and_a_wheel_are_both_found_with_their_versions() {
        let tmp = tempfile::tempdir().expect("tmp");
        let kit = tmp.path().join("cuda-13.0");
        touch(&kit.join("targets/x86_64-linux/lib/libcupti.so.2025.3.1"));
        touch(&kit.join("extras/CUPTI/lib64/libcupti.so.13"));
        let libs: Vec<_> = in_toolkit(&kit).collect();
        assert_eq!(libs.len(), 2, "{libs:?}");

        let venv = tmp.path().join("venv");
        touch(&venv.join("lib/python3.12/site-packages/nvidia/cu13/lib/libcupti.so.13"));
        touch(&venv.join("lib/python3.12/site-packages/nvidia/cuda_cupti/lib/libcupti.so.12"));
        let wheel: Vec<_> = in_python_prefix(&venv).collect();
        assert_eq!(wheel.len(), 2, "{wheel:?}");
        assert!(wheel[0].ends_with("cu13/lib/libcupti.so.13"), "{wheel:?}");

        let c = cupti(wheel[0].clone(), "python wheel");
        assert_eq!(c.version.as_deref(), Some("13"));
    }

    #[test]
    fn an_explicit_path_is_the_only_answer() {
        let found = find(Some(Path::new("/nowhere/libcupti.so.13")));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].from, "--cupti");
    }

    #[test]
    fn versions_sort_numerically() {
        let mut v = [
            PathBuf::from("cuda-12.9"),
            PathBuf::from("cuda-13.0"),
            PathBuf::from("cuda-12.10"),
        ];
        v.sort_by_key(|p| std::cmp::Reverse(version_key(p)));
        assert_eq!(v[0], PathBuf::from("cuda-13.0"));
        assert_eq!(v[1], PathBuf::from("cuda-12.10"));
    }
}
