//! Which OpenCL ICD loader a program will load, and whether it can load layers.
//!
//! `gpulab watch` reaches into a program through an OpenCL loader *layer*
//! (`OPENCL_LAYERS`). ocl-icd has layers from 2.3.0 and the Khronos loader from
//! 2021.04.29, but the loader CUDA's toolkit installs (package `cuda-opencl`) has
//! none, and on a machine with CUDA it is often the first `libOpenCL.so.1` the
//! dynamic linker finds. A loader that reads `OPENCL_LAYERS` names the variable in
//! its code, so its file holds that string; one without layer support does not.
//! Reading the file answers the question without loading any OpenCL library.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

/// The loader's file name as programs link it (its soname).
pub const SONAME: &str = "libOpenCL.so.1";

/// The string a loader with layer support contains.
const LAYERS_MARK: &[u8] = b"OPENCL_LAYERS";
/// The string a loader that reads `OCL_ICD_FILENAMES` contains (the Khronos loader
/// and CUDA's do; Debian's ocl-icd 2.3 does not).
const FILENAMES_MARK: &[u8] = b"OCL_ICD_FILENAMES";

/// One `libOpenCL.so.1` on this machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Loader {
    pub path: String,
    /// It reads `OPENCL_LAYERS`, so the watch agent can be loaded through it.
    pub layers: bool,
    /// It reads `OCL_ICD_FILENAMES`; if not, only `OCL_ICD_VENDORS` or the system
    /// vendors directory tell it which ICDs exist.
    pub reads_filenames: bool,
}

/// The loaders a program would find, in the dynamic linker's order: the first is
/// the one a program linked against `libOpenCL.so.1` loads (unless its own
/// RUNPATH or an `LD_PRELOAD` says otherwise).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Loaders {
    pub found: Vec<Loader>,
}

impl Loaders {
    /// Looks where the dynamic linker looks: `LD_LIBRARY_PATH`, then the
    /// `ldconfig` cache, then the default directories.
    pub fn find() -> Loaders {
        let ld_path = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
        let mut candidates: Vec<PathBuf> = ld_path
            .split(':')
            .filter(|d| !d.is_empty())
            .map(|d| Path::new(d).join(SONAME))
            .collect();
        candidates.extend(ldconfig_cache(SONAME));
        candidates.extend(
            [
                "/lib/x86_64-linux-gnu",
                "/usr/lib/x86_64-linux-gnu",
                "/lib/aarch64-linux-gnu",
                "/usr/lib/aarch64-linux-gnu",
                "/lib64",
                "/usr/lib64",
                "/lib",
                "/usr/lib",
            ]
            .iter()
            .map(|d| Path::new(d).join(SONAME)),
        );
        Loaders::from_candidates(candidates)
    }

    /// Existing files among `candidates`, each once (by its real path), in order.
    pub fn from_candidates(candidates: impl IntoIterator<Item = PathBuf>) -> Loaders {
        let mut seen = Vec::new();
        let mut found = Vec::new();
        for path in candidates {
            let Ok(real) = std::fs::canonicalize(&path) else {
                continue;
            };
            if seen.contains(&real) {
                continue;
            }
            let bytes = std::fs::read(&real).unwrap_or_default();
            seen.push(real);
            found.push(Loader {
                path: path.to_string_lossy().into_owned(),
                layers: contains(&bytes, LAYERS_MARK),
                reads_filenames: contains(&bytes, FILENAMES_MARK),
            });
        }
        Loaders { found }
    }

    /// The loader a program would load by default.
    pub fn first(&self) -> Option<&Loader> {
        self.found.first()
    }

    /// What `watch` should do about the loader: nothing, preload a loader that has
    /// layers, or warn that none has.
    pub fn plan(&self) -> LoaderPlan {
        match self.first() {
            None => LoaderPlan::NoLoader,
            Some(first) if first.layers => LoaderPlan::AsIs(first.clone()),
            Some(first) => match self.found.iter().find(|l| l.layers) {
                Some(other) => LoaderPlan::Preload {
                    instead_of: first.clone(),
                    loader: other.clone(),
                },
                None => LoaderPlan::NoLayers(first.clone()),
            },
        }
    }
}

/// How `gpulab watch` gets its agent into the program's OpenCL calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoaderPlan {
    /// The default loader has layers: nothing to change.
    AsIs(Loader),
    /// The default loader has none, but another does: preload that one. It has the
    /// same soname, so the program's own reference to `libOpenCL.so.1` binds to it.
    Preload { instead_of: Loader, loader: Loader },
    /// No loader here can load a layer.
    NoLayers(Loader),
    /// No `libOpenCL.so.1` at all.
    NoLoader,
}

fn contains(bytes: &[u8], mark: &[u8]) -> bool {
    bytes.windows(mark.len()).any(|w| w == mark)
}

/// Paths `ldconfig -p` lists for `soname`, in the cache's order (the order the
/// dynamic linker tries them). Empty when `ldconfig` is not there.
fn ldconfig_cache(soname: &str) -> Vec<PathBuf> {
    ldconfig_cache_where(|name| name == soname)
}

/// Libraries in the dynamic linker's cache whose names start with `prefix`.
pub(super) fn ldconfig_cache_prefix(prefix: &str) -> Vec<PathBuf> {
    ldconfig_cache_where(|name| name.starts_with(prefix))
}

/// `ldconfig -p`, run once per process (the loaders and libcupti both ask).
fn ldconfig_cache_where(wanted: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    static CACHE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let text = CACHE.get_or_init(|| {
        ["/sbin/ldconfig", "/usr/sbin/ldconfig", "ldconfig"]
            .iter()
            .find_map(|exe| Command::new(exe).arg("-p").output().ok())
            .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
            .unwrap_or_default()
    });
    parse_ldconfig(text, wanted)
}

/// Lines like `\tlibOpenCL.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libOpenCL.so.1`.
fn parse_ldconfig(text: &str, wanted: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|line| {
            let (name, rest) = line.trim().split_once(' ')?;
            let (_, path) = rest.split_once("=> ")?;
            wanted(name).then(|| PathBuf::from(path.trim()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        let sub = dir.join(name);
        let _ = std::fs::create_dir_all(&sub);
        let path = sub.join(SONAME);
        let _ = std::fs::write(&path, bytes);
        path
    }

    #[test]
    fn a_loader_without_layers_is_replaced_by_the_next_one_with_them() {
        let tmp = tempfile::tempdir().expect("a temporary directory");
        let dir = tmp.path();
        let cuda = file(dir, "cuda", b"\x7fELF... clGetPlatformIDs ...");
        let icd = file(dir, "ocl-icd", b"\x7fELF... OPENCL_LAYERS ... 2.3.1");
        let khronos = file(dir, "khronos", b"OCL_ICD_FILENAMES OPENCL_LAYERS");
        let loaders = Loaders::from_candidates([cuda.clone(), dir.join("none"), icd.clone()]);
        assert_eq!(loaders.found.len(), 2);
        match loaders.plan() {
            LoaderPlan::Preload { instead_of, loader } => {
                assert_eq!(instead_of.path, cuda.to_string_lossy());
                assert_eq!(loader.path, icd.to_string_lossy());
            }
            other => panic!("expected a preload, got {other:?}"),
        }
        let only_cuda = Loaders::from_candidates([cuda.clone(), cuda.clone()]);
        assert_eq!(only_cuda.found.len(), 1, "one file, listed once");
        assert!(matches!(only_cuda.plan(), LoaderPlan::NoLayers(_)));
        assert!(matches!(
            Loaders::from_candidates([icd.clone()]).plan(),
            LoaderPlan::AsIs(_)
        ));
        assert_eq!(Loaders::default().plan(), LoaderPlan::NoLoader);
        let k = Loaders::from_candidates([khronos]);
        assert!(k.found[0].layers && k.found[0].reads_filenames);
        assert!(
            !loaders.found[1].reads_filenames,
            "ocl-icd reads no OCL_ICD_FILENAMES"
        );
    }

    #[test]
    fn ldconfig_lines_give_the_paths_of_one_soname_in_order() {
        let text = "3 libs found in cache `/etc/ld.so.cache'\n\
            \tlibOpenCL.so.1 (libc6,x86-64) => /usr/local/cuda/lib64/libOpenCL.so.1\n\
            \tlibOpenCL.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libOpenCL.so.1\n\
            \tlibOpenCL.so (libc6,x86-64) => /lib/x86_64-linux-gnu/libOpenCL.so\n";
        assert_eq!(
            parse_ldconfig(text, |n| n == SONAME),
            vec![
                PathBuf::from("/usr/local/cuda/lib64/libOpenCL.so.1"),
                PathBuf::from("/lib/x86_64-linux-gnu/libOpenCL.so.1"),
            ]
        );
    }
}
