//! The OpenCL platforms a program's own loader gives it, asked before the
//! program starts, in a process of gpulab's own.
//!
//! Where that loader cannot load layers, `gpulab watch` preloads one that can
//! ([`super::LoaderPlan::Preload`]); the two may find other ICDs, in another
//! order (ocl-icd reads no `OCL_ICD_FILENAMES` and orders a vendors folder its
//! own way), and a program that takes the first platform would run on another
//! device. So gpulab asks the program's loader which platforms it gives and
//! from which libraries ([`ask`], through the hidden `gpulab opencl-platforms`,
//! so that a driver that crashes or hangs while it starts takes nothing of
//! gpulab's with it), gives the preloaded loader a vendors folder of exactly
//! those libraries ([`vendors_folder`]), and its agent gives the program those
//! platforms in that order (`gpulab_events::platforms`).

#![allow(
    unsafe_code,
    reason = "loads the program's OpenCL loader and calls two of its C entry points; each block says why it holds"
)]

use std::ffi::c_void;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gpulab_events::platforms::{PlatformKey, decode, encode, hex, unhex};

/// How long a loader and its drivers may take to list their platforms.
const LIMIT: Duration = Duration::from_secs(20);

const CL_SUCCESS: i32 = 0;
const CL_PLATFORM_NOT_FOUND_KHR: i32 = -1001;

/// What the program's own loader gives: its platforms, in its order, and the
/// ICD libraries it loaded to find them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Listed {
    pub platforms: Vec<PlatformKey>,
    /// The real path of each library the loader loaded that is an ICD (it
    /// exports `clGetExtensionFunctionAddress` itself), in load order.
    pub libraries: Vec<String>,
}

/// Loads `loader` into this process and lists its platforms, in its order,
/// and the ICDs it loaded. (A platform's dispatch table does not tell its
/// library: NVIDIA's lives in memory it allocated.)
pub fn list_through(loader: &Path) -> Result<Listed, String> {
    type GetIds = unsafe extern "C" fn(u32, *mut *mut c_void, *mut u32) -> i32;
    type GetInfo = unsafe extern "C" fn(*mut c_void, u32, usize, *mut c_void, *mut usize) -> i32;
    let shown = loader.display();
    let before = loaded_objects();
    // SAFETY: an OpenCL loader's initialisers only set up its own state.
    let lib = unsafe { libloading::Library::new(loader) }
        .map_err(|e| format!("cannot load {shown}: {e}"))?;
    // SAFETY: the two entry points have these C types (cl.h).
    let (ids, info) = unsafe {
        (
            lib.get::<GetIds>(b"clGetPlatformIDs\0"),
            lib.get::<GetInfo>(b"clGetPlatformInfo\0"),
        )
    };
    let (ids, info) = ids
        .and_then(|ids| info.map(|info| (ids, info)))
        .map_err(|e| format!("{shown} is not an OpenCL loader: {e}"))?;
    let mut n = 0u32;
    // SAFETY: a count query.
    match unsafe { ids(0, std::ptr::null_mut(), &mut n) } {
        CL_SUCCESS | CL_PLATFORM_NOT_FOUND_KHR => {}
        status => return Err(format!("{shown}: clGetPlatformIDs returned {status}")),
    }
    let mut handles = vec![std::ptr::null_mut(); n as usize];
    if n > 0 {
        // SAFETY: room for `n` handles.
        let status = unsafe { ids(n, handles.as_mut_ptr(), std::ptr::null_mut()) };
        if status != CL_SUCCESS {
            return Err(format!("{shown}: clGetPlatformIDs returned {status}"));
        }
    }
    let platforms = handles
        .into_iter()
        .map(|h| {
            PlatformKey::asked(|param, buffer| {
                let mut size = 0usize;
                let value = if buffer.is_empty() {
                    std::ptr::null_mut()
                } else {
                    buffer.as_mut_ptr().cast()
                };
                // SAFETY: clGetPlatformInfo on a handle the loader gave, with
                // a buffer of `buffer.len()` bytes or none.
                let status = unsafe { info(h, param, buffer.len(), value, &mut size) };
                (status == CL_SUCCESS).then_some(size)
            })
        })
        .collect();
    let own = std::fs::canonicalize(loader).unwrap_or_else(|_| loader.to_path_buf());
    let libraries = loaded_objects()
        .into_iter()
        .filter(|l| !before.contains(l) && *l != own && is_icd(l))
        .map(|l| l.display().to_string())
        .collect();
    Ok(Listed {
        platforms,
        libraries,
    })
}

/// The real paths of the objects loaded in this process, in load order.
fn loaded_objects() -> Vec<PathBuf> {
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> libc::c_int {
        // SAFETY: the linker passes a valid entry; `data` is the Vec below.
        let (info, names) = unsafe { (&*info, &mut *data.cast::<Vec<Vec<u8>>>()) };
        if !info.dlpi_name.is_null() {
            // SAFETY: a NUL-terminated name owned by the linker.
            let name = unsafe { std::ffi::CStr::from_ptr(info.dlpi_name) };
            if !name.is_empty() {
                names.push(name.to_bytes().to_vec());
            }
        }
        0
    }
    let mut names: Vec<Vec<u8>> = Vec::new();
    // SAFETY: `each` only reads the entries and pushes into `names`.
    unsafe { libc::dl_iterate_phdr(Some(each), (&raw mut names).cast()) };
    names
        .iter()
        .filter_map(|n| std::fs::canonicalize(std::ffi::OsStr::from_bytes(n)).ok())
        .collect()
}

/// Whether the loaded library at `path` exports the entry a loader looks up
/// in an ICD, itself (not through a library it depends on).
fn is_icd(path: &Path) -> bool {
    let Ok(name) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: RTLD_NOLOAD only looks the library up; the handle is closed below.
    let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
    if handle.is_null() {
        return false;
    }
    // SAFETY: a symbol lookup in a library this process holds.
    let entry = unsafe { libc::dlsym(handle, c"clGetExtensionFunctionAddress".as_ptr()) };
    let own = library_of(entry).is_some_and(|l| l == path);
    // SAFETY: the handle dlopen gave above.
    unsafe { libc::dlclose(handle) };
    own
}

/// The real path of the library holding `address`.
fn library_of(address: *const c_void) -> Option<PathBuf> {
    // SAFETY: an all-zero Dl_info is a valid out-parameter.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the loaded objects' tables.
    if address.is_null() || unsafe { libc::dladdr(address, &mut info) } == 0 {
        return None;
    }
    if info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr's file name is a NUL-terminated string owned by the linker.
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    std::fs::canonicalize(std::ffi::OsStr::from_bytes(name.to_bytes())).ok()
}

/// What the hidden command prints: a line per ICD library (`L` and its path)
/// and per platform (`P` and its key), each in a form no byte breaks.
pub fn to_lines(listed: &Listed) -> String {
    let libraries = listed
        .libraries
        .iter()
        .map(|l| format!("L {}\n", hex(l.as_bytes())));
    let platforms = listed
        .platforms
        .iter()
        .map(|p| format!("P {}\n", encode(std::slice::from_ref(p))));
    libraries.chain(platforms).collect()
}

/// What [`to_lines`] wrote; `None` for anything else.
pub fn from_lines(text: &str) -> Option<Listed> {
    let mut listed = Listed::default();
    for line in text.lines() {
        match line.split_once(' ')? {
            ("L", library) => listed
                .libraries
                .push(String::from_utf8(unhex(library)?).ok()?),
            ("P", key) => {
                let [key] = <[PlatformKey; 1]>::try_from(decode(key)?).ok()?;
                listed.platforms.push(key);
            }
            _ => return None,
        }
    }
    Some(listed)
}

/// Asks `loader` for its platforms through `exe opencl-platforms LOADER`, in
/// gpulab's environment less `remove` (what gpulab set for itself alone), as
/// the program will see it; at most [`LIMIT`].
pub fn ask(exe: &Path, loader: &Path, remove: &[&str]) -> Result<Listed, String> {
    let mut cmd = Command::new(exe);
    cmd.arg("opencl-platforms")
        .arg(loader)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for name in remove {
        cmd.env_remove(name);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    let readers = [
        child.stdout.take().map(reader),
        child.stderr.take().map(reader),
    ];
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < LIMIT => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("it gave no answer in {} s", LIMIT.as_secs()));
            }
            Err(e) => return Err(format!("cannot wait for it: {e}")),
        }
    };
    let [out, err] = readers.map(|r| r.and_then(|r| r.join().ok()).unwrap_or_default());
    if !status.success() {
        let why = err
            .lines()
            .last()
            .unwrap_or("no reason given")
            .trim()
            .to_string();
        return Err(format!("it ended with {status}: {why}"));
    }
    from_lines(&out).ok_or_else(|| "its answer could not be read".to_string())
}

fn reader(from: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = from.take(1 << 20).read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// What the program's own loader gives, and a vendors folder of its ICDs for
/// the loader gpulab preloads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bare {
    pub platforms: Vec<PlatformKey>,
    pub vendors: PathBuf,
}

/// [`ask`], then [`vendors_folder`] in gpulab's own folder.
pub fn ask_for_watch(exe: &Path, loader: &Path, remove: &[&str]) -> Result<Bare, String> {
    let listed = ask(exe, loader, remove)?;
    let vendors = vendors_folder(&super::icd::own_base()?, &listed.libraries)?;
    Ok(Bare {
        platforms: listed.platforms,
        vendors,
    })
}

/// A vendors folder under `base` naming each of `libraries` once, kept by
/// gpulab and named after its contents (two watches of the same machine share
/// it, and nothing is left that a later one would not reuse).
pub fn vendors_folder(base: &Path, libraries: &[String]) -> Result<PathBuf, String> {
    let mut distinct: Vec<&String> = Vec::new();
    for l in libraries {
        if !distinct.contains(&l) {
            distinct.push(l);
        }
    }
    let joined: Vec<u8> = distinct.iter().flat_map(|l| l.bytes().chain([0])).collect();
    let dir = base
        .join("watch-vendors")
        .join(format!("{:016x}", fnv1a(&joined)));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    for (i, library) in distinct.iter().enumerate() {
        let file = dir.join(format!("{i:02}.icd"));
        crate::dirs::write_atomic(&file, format!("{library}\n").as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    }
    Ok(dir)
}

/// FNV-1a, 64 bits: a stable name for a folder's contents.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_survives_any_library_path_and_platform_string() {
        let listed = Listed {
            platforms: vec![
                PlatformKey {
                    name: b"Portable Computing Language".to_vec(),
                    vendor: b"The pocl project\n".to_vec(),
                    version: b"OpenCL 3.0 PoCL".to_vec(),
                },
                PlatformKey::default(),
            ],
            libraries: vec![
                "/opt/odd dir/lib pocl.so".into(),
                "/usr/lib/libnv.so.1".into(),
            ],
        };
        assert_eq!(from_lines(&to_lines(&listed)), Some(listed));
        assert_eq!(from_lines(""), Some(Listed::default()));
        assert_eq!(from_lines("L zz"), None);
        assert_eq!(from_lines("P 00.00.00,00.00.00"), None, "one key a line");
        assert_eq!(from_lines("X 00"), None);
    }

    #[test]
    fn the_icds_a_loader_loads_are_told_by_their_own_entry() {
        // The C library is loaded and is no ICD; PoCL, where it is installed,
        // is one once loaded.
        let own = loaded_objects();
        let libc = own.iter().find(|l| l.to_string_lossy().contains("libc.so"));
        assert!(libc.is_some_and(|l| !is_icd(l)), "{own:?}");
        // SAFETY: PoCL's initialisers set up its own state only.
        if let Ok(_pocl) = unsafe { libloading::Library::new("libpocl.so.2") } {
            let icds: Vec<_> = loaded_objects().into_iter().filter(|l| is_icd(l)).collect();
            assert!(
                icds.iter().any(|l| l.to_string_lossy().contains("libpocl")),
                "{icds:?}"
            );
        }
    }

    #[test]
    fn a_vendors_folder_names_each_library_once_and_is_named_by_them() {
        let base = tempfile::tempdir().expect("temp dir");
        let libs = ["/a/libpocl.so.2", "/b/libnv.so.1", "/a/libpocl.so.2"].map(String::from);
        let dir = vendors_folder(base.path(), &libs).expect("written");
        let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
            .expect("a folder")
            .map(|e| {
                let e = e.expect("an entry");
                let text = std::fs::read_to_string(e.path()).expect("a file");
                (e.file_name().to_string_lossy().into_owned(), text)
            })
            .collect();
        files.sort();
        assert_eq!(
            files,
            [
                ("00.icd", "/a/libpocl.so.2\n"),
                ("01.icd", "/b/libnv.so.1\n")
            ]
            .map(|(n, t)| (n.to_string(), t.to_string()))
        );
        assert_eq!(
            vendors_folder(base.path(), &libs),
            Ok(dir.clone()),
            "the same again"
        );
        assert_ne!(vendors_folder(base.path(), &libs[1..]), Ok(dir));
    }

    #[test]
    fn a_library_that_is_no_loader_is_said() {
        let err = list_through(Path::new("/nonexistent/libOpenCL.so.1")).unwrap_err();
        assert!(err.contains("cannot load"), "{err}");
        let libc = Path::new("/lib/x86_64-linux-gnu/libc.so.6");
        if libc.exists() {
            let err = list_through(libc).unwrap_err();
            assert!(err.contains("not an OpenCL loader"), "{err}");
        }
    }
}
