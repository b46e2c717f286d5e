//! Makes an installed-but-unregistered NVIDIA OpenCL ICD visible to gpulab.
//!
//! Containers and some driver installs ship `libnvidia-opencl.so.1` without an
//! `/etc/OpenCL/vendors/nvidia.icd` naming it, so the ICD loader only sees PoCL.
//! Debian's ocl-icd 2.3 ignores `OCL_ICD_FILENAMES` (only the Khronos loader reads
//! it; measured: with it set to a missing library and `OCL_ICD_VENDORS` at an empty
//! directory, ocl-icd lists nothing). Both loaders read `OCL_ICD_VENDORS` as a
//! directory that replaces the vendors directory, so gpulab writes its own: a copy
//! of every system `.icd` file plus one naming the NVIDIA library, and points
//! `OCL_ICD_VENDORS` at it. Workers inherit the variable.

// Two unsafe calls, each with its SAFETY note: setting the environment before any
// thread exists, and asking the dynamic linker whether the NVIDIA ICD loads.
#![allow(
    unsafe_code,
    reason = "the environment and dlopen, to find what is installed"
)]

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

const NVIDIA_LIB: &str = "libnvidia-opencl.so.1";
/// Set beside `OCL_ICD_VENDORS` when gpulab made the directory, so a worker (which
/// inherits both) and `doctor` can tell gpulab's choice from the user's.
const ADDED_MARK: &str = "GPULAB_ICD_ADDED";

/// What the OpenCL loader will see, as `doctor` reports it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct IcdState {
    /// The directory of `.icd` files the system registers (`/etc/OpenCL/vendors`).
    pub vendors_dir: String,
    /// Libraries the `.icd` files there name.
    pub registered: Vec<String>,
    pub nvidia_library: Option<String>,
    pub nvidia_registered: bool,
    /// gpulab's own vendors directory, when it added the NVIDIA ICD itself.
    pub added_by_gpulab: Option<String>,
    /// `OCL_ICD_VENDORS` / `OCL_ICD_FILENAMES` as the user set them.
    pub user_override: Option<String>,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

pub(super) fn system_vendors_dir() -> PathBuf {
    PathBuf::from(env("OPENCL_VENDOR_PATH").unwrap_or_else(|| "/etc/OpenCL/vendors".into()))
}

/// `(file name, library named on its first line)` of each `.icd` file in `dir`.
pub(super) fn icd_files(dir: &Path) -> Vec<(String, String)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, String)> = rd
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            if !name.ends_with(".icd") {
                return None;
            }
            let text = std::fs::read_to_string(e.path()).ok()?;
            Some((name, text.lines().next().unwrap_or("").trim().to_string()))
        })
        .collect();
    out.sort();
    out
}

/// Looks for the NVIDIA OpenCL library where drivers and containers put it, then
/// asks the dynamic linker (ld.so.cache, `LD_LIBRARY_PATH`) by loading it.
pub fn find_nvidia_opencl() -> Option<String> {
    let mut dirs: Vec<PathBuf> = [
        "/usr/local/nvidia/lib64",
        "/usr/local/nvidia/lib",
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    if let Ok(rd) = std::fs::read_dir("/usr/lib") {
        let mut nv: Vec<PathBuf> = rd
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("nvidia"))
            .map(|e| e.path())
            .collect();
        nv.sort();
        dirs.extend(nv);
    }
    if let Some(ld) = env("LD_LIBRARY_PATH") {
        dirs.extend(ld.split(':').filter(|d| !d.is_empty()).map(PathBuf::from));
    }
    if let Some(p) = dirs
        .iter()
        .map(|d| d.join(NVIDIA_LIB))
        .find(|p| p.is_file())
    {
        return Some(p.to_string_lossy().into_owned());
    }
    // SAFETY: loading runs the library's initialisers; the NVIDIA ICD's are the ones
    // any OpenCL program runs on load, and the library is closed again right away.
    let loadable = unsafe { libloading::Library::new(NVIDIA_LIB) }.is_ok();
    loadable.then(|| NVIDIA_LIB.to_string())
}

/// gpulab's own vendors folder: in the session's runtime directory, else the
/// user's cache, else a folder under the shared temporary directory that only this
/// user may use (`dirs::private_temp`).
fn own_vendors_dir() -> Result<PathBuf, String> {
    Ok(own_base()?.join("icd-vendors"))
}

/// Where gpulab keeps the vendors folders it writes: the session's runtime
/// folder, else the cache, else a private folder in the temporary one.
pub(crate) fn own_base() -> Result<PathBuf, String> {
    match crate::dirs::runtime().or_else(crate::dirs::cache) {
        Some(b) => Ok(b),
        None => crate::dirs::private_temp(),
    }
}

/// Writes `dst` as a vendors directory: every `.icd` file of `src` plus one naming
/// `extra_lib`; stale `.icd` files in `dst` are removed. Each file is written
/// whole before it appears (another gpulab's ICD loader may be reading the folder).
pub fn write_vendors_dir(src: &Path, extra_lib: &str, dst: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dst)?;
    let mut wanted: Vec<(String, String)> = icd_files(src);
    wanted.push(("gpulab-nvidia.icd".into(), extra_lib.to_string()));
    for (name, _) in icd_files(dst) {
        if !wanted.iter().any(|(w, _)| *w == name) {
            std::fs::remove_file(dst.join(name))?;
        }
    }
    for (name, lib) in &wanted {
        crate::dirs::write_atomic(&dst.join(name), format!("{lib}\n").as_bytes())?;
    }
    Ok(())
}

pub fn icd_state() -> IcdState {
    let dir = system_vendors_dir();
    let registered: Vec<String> = icd_files(&dir).into_iter().map(|(_, lib)| lib).collect();
    let nvidia_registered = registered.iter().any(|l| l.contains("libnvidia-opencl"));
    let added = env(ADDED_MARK).and(env("OCL_ICD_VENDORS"));
    let user_override = if added.is_some() {
        None
    } else {
        ["OCL_ICD_VENDORS", "OCL_ICD_FILENAMES"]
            .iter()
            .find_map(|n| env(n).map(|v| format!("{n}={v}")))
    };
    IcdState {
        vendors_dir: dir.to_string_lossy().into_owned(),
        registered,
        nvidia_library: find_nvidia_opencl(),
        nvidia_registered,
        added_by_gpulab: added,
        user_override,
    }
}

/// Call from `main` before any OpenCL call. When the NVIDIA OpenCL library exists
/// but no vendors file names it, registers it for this process and its workers
/// (see the module doc) and returns a note saying so. Leaves everything alone when
/// the user set `OCL_ICD_VENDORS`, or named the library in `OCL_ICD_FILENAMES`.
pub fn prepare_icd_environment() -> Option<String> {
    if env(ADDED_MARK).is_some() && env("OCL_ICD_VENDORS").is_some() {
        return None; // a parent gpulab already did it; the worker inherits it
    }
    if let Some(v) = env("OCL_ICD_VENDORS") {
        return Some(format!(
            "OCL_ICD_VENDORS={v} is set; gpulab leaves OpenCL ICD registration as it is"
        ));
    }
    if env("OCL_ICD_FILENAMES").is_some_and(|f| f.contains("libnvidia-opencl")) {
        return None;
    }
    let vendors = match own_vendors()? {
        Ok(v) => v,
        Err(note) => return Some(note),
    };
    // SAFETY: the documented contract is that main calls this before starting any
    // thread, so no other thread can read the environment concurrently.
    unsafe {
        std::env::set_var("OCL_ICD_VENDORS", &vendors.value);
        std::env::set_var(ADDED_MARK, &vendors.library);
    }
    Some(format!(
        "NVIDIA OpenCL library found at {} but not registered in {}; gpulab registered \
         it for its own processes (OCL_ICD_VENDORS={})",
        vendors.library, vendors.system_dir, vendors.value
    ))
}

/// gpulab's own vendors directory: the system's ICDs plus the NVIDIA one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnVendors {
    /// What `OCL_ICD_VENDORS` must be set to.
    pub value: String,
    pub library: String,
    pub system_dir: String,
}

/// Writes gpulab's own vendors directory when the NVIDIA OpenCL library exists but
/// no system `.icd` file names it. `None`: nothing to add; `Err`: a note saying
/// why the directory could not be written.
pub fn own_vendors() -> Option<Result<OwnVendors, String>> {
    let src = system_vendors_dir();
    if icd_files(&src)
        .iter()
        .any(|(_, lib)| lib.contains("libnvidia-opencl"))
    {
        return None;
    }
    let lib = find_nvidia_opencl()?;
    let dst = match own_vendors_dir() {
        Ok(d) => d,
        Err(why) => {
            return Some(Err(format!(
                "NVIDIA OpenCL library found at {lib} but not registered in {}, and gpulab \
                 has no folder of its own to register it in: {why}",
                src.display()
            )));
        }
    };
    if let Err(e) = write_vendors_dir(&src, &lib, &dst) {
        return Some(Err(format!(
            "NVIDIA OpenCL library found at {lib} but not registered in {}, and gpulab could \
             not write its own vendors directory {}: {e}",
            src.display(),
            dst.display()
        )));
    }
    Some(Ok(OwnVendors {
        value: vendors_value(&dst),
        library: lib,
        system_dir: src.display().to_string(),
    }))
}

/// `OCL_ICD_VENDORS` for a program gpulab starts with ocl-icd as its loader (`watch`):
/// The variables gpulab set in its own environment to register the NVIDIA ICD
/// for itself ([`prepare_icd_environment`]), which a program it watches must not
/// inherit: the program sees exactly the OpenCL platforms it sees without gpulab
/// (an OpenCL program that takes the first platform ran on PoCL bare and on the
/// H200 watched). Empty when the user set them.
pub fn set_for_gpulab_only() -> &'static [&'static str] {
    if env(ADDED_MARK).is_some() {
        &["OCL_ICD_VENDORS", ADDED_MARK]
    } else {
        &[]
    }
}

/// The NVIDIA OpenCL library, when one is installed here that the system's
/// vendors directory does not register: a program gpulab watches does not see
/// it, and the report says so.
pub fn unregistered_nvidia() -> Option<(String, String)> {
    let src = system_vendors_dir();
    if icd_files(&src)
        .iter()
        .any(|(_, lib)| lib.contains("libnvidia-opencl"))
    {
        return None;
    }
    find_nvidia_opencl().map(|lib| (lib, src.display().to_string()))
}

/// `OCL_ICD_VENDORS` for a directory. ocl-icd 2.3.2 (Ubuntu, the H100 machine) joins
/// the variable and each file name without a separator, so without the trailing
/// slash it finds no platform at all; 2.3.1 (Debian) accepts both.
fn vendors_value(dir: &Path) -> String {
    let mut v = dir.display().to_string();
    if !v.ends_with('/') {
        v.push('/');
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The mechanism, with PoCL standing in for NVIDIA: an empty system vendors
    /// directory plus gpulab's extra entry must make the loader list the library.
    #[test]
    fn own_vendors_dir_makes_the_loader_see_an_unregistered_icd() {
        let pocl = icd_files(Path::new("/etc/OpenCL/vendors"))
            .into_iter()
            .map(|(_, lib)| lib)
            .find(|l| l.contains("pocl"));
        let (Some(pocl), true) = (pocl, Path::new("/usr/bin/clinfo").exists()) else {
            eprintln!("skipped: needs PoCL registered and clinfo");
            return;
        };
        let Ok(tmp) = tempfile::tempdir() else { return };
        let (empty, dst) = (tmp.path().join("empty"), tmp.path().join("own"));
        assert!(std::fs::create_dir_all(&empty).is_ok());
        assert!(write_vendors_dir(&empty, &pocl, &dst).is_ok());
        assert_eq!(icd_files(&dst).len(), 1);
        let run = |dir: &Path| {
            std::process::Command::new("clinfo")
                .arg("-l")
                .env("OCL_ICD_VENDORS", vendors_value(dir))
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default()
        };
        assert!(!run(&empty).contains("Portable Computing Language"));
        assert!(run(&dst).contains("Portable Computing Language"));
    }

    #[test]
    fn state_reads_the_system_vendors_dir() {
        let s = icd_state();
        assert!(!s.vendors_dir.is_empty());
        if Path::new("/etc/OpenCL/vendors/pocl.icd").exists() && env("OPENCL_VENDOR_PATH").is_none()
        {
            assert!(s.registered.iter().any(|l| l.contains("pocl")));
        }
    }
}
