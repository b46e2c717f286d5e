//! The startup hook a watched Python program runs (`python/sitecustomize.py`):
//! an archive gpulab keeps in an anonymous memory file and puts first on the
//! program's `PYTHONPATH`, so every Python process of the program reads
//! PyTorch's, CuPy's and JAX's own memory figures and hands them to the agent.
//! Python imports from a zip archive by path, and `/proc/<gpulab's
//! pid>/fd/<n>` is one: nothing is written to disk, nothing is left behind.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

/// The hook's source: the archive's one file.
static HOOK: &str = include_str!("python/sitecustomize.py");
/// The memory file's name, as `/proc/<pid>/fd/<n>` links to it: how an outer
/// watch's hook is told from the user's own path entries.
const MEMFD_NAME: &str = "gpulab-python-hook.zip";

/// The hook's archive, alive as long as a watched process may still start
/// Python.
pub struct PythonHook {
    file: OwnedFd,
}

impl PythonHook {
    pub fn new() -> std::io::Result<PythonHook> {
        let zip = stored_zip("sitecustomize.py", HOOK.as_bytes());
        Ok(PythonHook {
            file: super::agent::memory_file(MEMFD_NAME, &zip)?,
        })
    }

    /// A path any process of this user can import from while gpulab runs.
    pub fn path(&self) -> String {
        format!("/proc/{}/fd/{}", std::process::id(), self.file.as_raw_fd())
    }

    /// The program's `PYTHONPATH`: the hook first, then the entries it had,
    /// less any hook of an outer `gpulab watch` (the outer agent is replaced,
    /// so its hook would find nothing to report to).
    pub fn python_path(&self, theirs: Option<&OsStr>) -> OsString {
        let mut path = OsString::from(self.path());
        // Python reads an empty PYTHONPATH as none at all, not as one empty
        // entry (the current folder, which would shadow the standard library).
        for entry in theirs
            .filter(|t| !t.is_empty())
            .map(|t| t.as_bytes().split(|b| *b == b':'))
            .into_iter()
            .flatten()
        {
            let entry = OsStr::from_bytes(entry);
            if is_a_hook(entry) {
                continue;
            }
            // An empty entry is the current directory to Python: kept as it was.
            path.push(":");
            path.push(entry);
        }
        path
    }
}

fn is_a_hook(entry: &OsStr) -> bool {
    std::fs::read_link(entry).is_ok_and(|target| {
        target
            .to_string_lossy()
            .contains(&format!("memfd:{MEMFD_NAME}"))
    })
}

/// A zip archive holding `data` as `name`, stored (not compressed), dated
/// 1980-01-01: the same bytes every time.
fn stored_zip(name: &str, data: &[u8]) -> Vec<u8> {
    // Both sizes fit the archive's 32-bit fields: the hook is a few KiB.
    let size = u32::try_from(data.len()).unwrap_or(u32::MAX).to_le_bytes();
    let name_len = u16::try_from(name.len()).unwrap_or(u16::MAX).to_le_bytes();
    let crc = crc32fast::hash(data).to_le_bytes();
    // version 2.0, no flags, stored, time 00:00, date 1980-01-01
    let common: [&[u8]; 5] = [&20u16.to_le_bytes(), &[0, 0], &[0, 0], &[0, 0], &[0x21, 0]];
    let mut out = Vec::with_capacity(data.len() + 128);
    out.extend_from_slice(b"PK\x03\x04");
    common.iter().for_each(|f| out.extend_from_slice(f));
    for f in [&crc[..], &size, &size, &name_len, &[0, 0]] {
        out.extend_from_slice(f);
    }
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(data);
    let directory_at = u32::try_from(out.len()).unwrap_or(u32::MAX).to_le_bytes();
    out.extend_from_slice(b"PK\x01\x02");
    out.extend_from_slice(&20u16.to_le_bytes()); // made by: version 2.0
    common.iter().for_each(|f| out.extend_from_slice(f));
    for f in [&crc[..], &size, &size, &name_len] {
        out.extend_from_slice(f);
    }
    // extra, comment, disk, internal and external attributes, header at 0
    out.extend_from_slice(&[0; 12]);
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(name.as_bytes());
    let directory_len = (out.len() - u32::from_le_bytes(directory_at) as usize) as u32;
    out.extend_from_slice(b"PK\x05\x06");
    out.extend_from_slice(&[0; 4]); // this disk, the directory's disk
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&directory_len.to_le_bytes());
    out.extend_from_slice(&directory_at);
    out.extend_from_slice(&[0, 0]); // no comment
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_archive_is_a_zip_with_the_hook_and_the_same_bytes_every_time() {
        let zip = stored_zip("sitecustomize.py", HOOK.as_bytes());
        assert_eq!(zip, stored_zip("sitecustomize.py", HOOK.as_bytes()));
        assert_eq!(&zip[..4], b"PK\x03\x04");
        let end = &zip[zip.len() - 22..];
        assert_eq!(&end[..4], b"PK\x05\x06");
        let at = u32::from_le_bytes(end[16..20].try_into().expect("4 bytes")) as usize;
        assert_eq!(&zip[at..at + 4], b"PK\x01\x02");
        let start = 30 + "sitecustomize.py".len();
        assert_eq!(&zip[start..start + HOOK.len()], HOOK.as_bytes());
    }

    #[test]
    fn the_hook_goes_first_and_their_entries_stay_as_they_were() {
        let hook = PythonHook::new().expect("memfd");
        let own = hook.path();
        assert_eq!(hook.python_path(None), OsString::from(&own));
        let theirs = OsString::from(format!("/a::{own}:/b"));
        // Their empty entry (the current directory) stays; an outer hook goes.
        assert_eq!(
            hook.python_path(Some(&theirs)),
            OsString::from(format!("{own}:/a::/b"))
        );
        // Entries that are not UTF-8, or name nothing, pass as they were.
        let odd = OsStr::from_bytes(b"/\xff\xfe:/no/such/dir");
        let mut want = OsString::from(format!("{own}:"));
        want.push(odd);
        assert_eq!(hook.python_path(Some(odd)), want);
        // An empty PYTHONPATH is none to Python: it must not become the
        // current folder ahead of the standard library (a json.py there ran).
        assert_eq!(hook.python_path(Some(OsStr::new(""))), OsString::from(&own));
    }
}
