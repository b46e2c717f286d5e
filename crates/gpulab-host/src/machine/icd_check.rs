//! Whether each OpenCL ICD the loader will read can be an OpenCL driver: its
//! library loads, and it exports the entry point every ICD loader asks for. The
//! loaders skip a broken `.icd` silently, so without this a vendors directory
//! naming a missing or foreign library reads as "no OpenCL platform" with no why.

// One unsafe call, with its SAFETY note: loading the library an `.icd` names.
#![allow(
    unsafe_code,
    reason = "dlopen of an OpenCL loader, to ask it what it can do"
)]

use std::path::{Path, PathBuf};

use super::icd::{icd_files, system_vendors_dir};

/// The symbol the Khronos and ocl-icd loaders look up in each ICD library, to
/// ask it for `clIcdGetPlatformIDsKHR` (cl_khr_icd); a library without it is not
/// an OpenCL driver. PoCL exports only this one, not `clIcdGetPlatformIDsKHR`.
const ICD_ENTRY: &[u8] = b"clGetExtensionFunctionAddress";

/// One `.icd` file the loader would skip, and why, in words.
pub fn broken_icds() -> Vec<String> {
    let (dir, files) = vendors();
    files
        .into_iter()
        .filter_map(|(name, lib)| {
            let why = library_problem(&lib)?;
            Some(format!("{}: {why}", dir.join(name).display()))
        })
        .collect()
}

/// The `.icd` files the loader reads: those of `OCL_ICD_VENDORS` (a directory, or
/// one file) when set, else the system's vendors directory.
fn vendors() -> (PathBuf, Vec<(String, String)>) {
    let Some(v) = std::env::var_os("OCL_ICD_VENDORS").filter(|v| !v.is_empty()) else {
        let dir = system_vendors_dir();
        let files = icd_files(&dir);
        return (dir, files);
    };
    let path = PathBuf::from(v);
    if path.is_dir() {
        let files = icd_files(&path);
        return (path, files);
    }
    let lib = std::fs::read_to_string(&path)
        .map(|t| t.lines().next().unwrap_or("").trim().to_string())
        .unwrap_or_default();
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    (dir, vec![(name, lib)])
}

/// Why `lib` cannot be an OpenCL ICD, or `None` when it can.
fn library_problem(lib: &str) -> Option<String> {
    if lib.is_empty() {
        return Some("names no library".into());
    }
    // SAFETY: loading runs the library's initialisers, as the ICD loader itself
    // does with every library a vendors file names; the handle is dropped here.
    let loaded = unsafe { libloading::Library::new(lib) };
    match loaded {
        Err(e) => Some(format!("names {lib}, which cannot be loaded ({e})")),
        Ok(l) => {
            // SAFETY: only the symbol's presence is asked; it is never called.
            let entry = unsafe { l.get::<unsafe extern "C" fn()>(ICD_ENTRY) };
            entry.is_err().then(|| {
                format!(
                    "names {lib}, which is not an OpenCL driver (it has no {})",
                    String::from_utf8_lossy(ICD_ENTRY)
                )
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_and_a_foreign_one_are_named_with_why() {
        let missing = library_problem("/nonexistent/libOpenCL-gone.so").unwrap();
        assert!(missing.contains("cannot be loaded"), "{missing}");
        // The C library is on every Linux machine and is no OpenCL driver.
        let foreign = library_problem("libc.so.6").unwrap();
        assert!(foreign.contains("not an OpenCL driver"), "{foreign}");
        assert!(library_problem("").is_some());
    }

    #[test]
    fn a_working_icd_is_no_problem() {
        let pocl = icd_files(Path::new("/etc/OpenCL/vendors"))
            .into_iter()
            .map(|(_, lib)| lib)
            .find(|l| l.contains("pocl"));
        let Some(pocl) = pocl else {
            eprintln!("skipped: needs PoCL registered");
            return;
        };
        assert_eq!(library_problem(&pocl), None);
    }
}
