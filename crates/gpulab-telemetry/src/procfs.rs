//! Host memory from `/proc`: a process's resident set (`statm`) and the machine's
//! `MemTotal` / `MemAvailable`; and the host's load average. A `statm` read is one
//! `pread` of an already open file into a stack buffer: no allocation, no path lookup.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::OnceLock;

use super::{Result, TelemetryError};

/// `statm` is seven decimal page counts; 256 bytes holds the largest possible line.
const STATM_BUF: usize = 256;

/// An open `/proc/<pid>/statm`. The open file stays bound to the process it was
/// opened for, so a recycled pid can never be read by mistake.
#[derive(Debug)]
pub(crate) struct Statm {
    file: File,
    pid: u32,
}

impl Statm {
    pub(crate) fn open(pid: u32) -> Result<Statm> {
        let path = format!("/proc/{pid}/statm");
        match File::open(&path) {
            Ok(file) => Ok(Statm { file, pid }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                Err(TelemetryError::ProcessGone { pid })
            }
            Err(e) => Err(TelemetryError::Io {
                path,
                why: e.to_string(),
            }),
        }
    }

    fn open_self() -> Result<Statm> {
        let pid = std::process::id();
        let file = File::open("/proc/self/statm").map_err(|e| TelemetryError::Io {
            path: "/proc/self/statm".into(),
            why: e.to_string(),
        })?;
        Ok(Statm { file, pid })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Resident bytes of the process. A process that has exited is an error, never
    /// 0 bytes: once reaped the read fails with ESRCH, and while it is a zombie its
    /// address space is gone and `statm` reads all zeros.
    pub(crate) fn rss_bytes(&self) -> Result<u64> {
        let mut buf = [0u8; STATM_BUF];
        let n = match self.file.read_at(&mut buf, 0) {
            Ok(n) => n,
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
                return Err(TelemetryError::ProcessGone { pid: self.pid });
            }
            Err(e) => {
                return Err(TelemetryError::Io {
                    path: format!("/proc/{}/statm", self.pid),
                    why: e.to_string(),
                });
            }
        };
        let (size, resident) = parse_statm(&buf[..n]).ok_or_else(|| TelemetryError::Parse {
            path: format!("/proc/{}/statm", self.pid),
        })?;
        if size == 0 {
            return Err(TelemetryError::ProcessGone { pid: self.pid });
        }
        Ok(resident.saturating_mul(page_size()))
    }
}

/// The first two fields of a `statm` line: total program size and resident pages.
pub(crate) fn parse_statm(bytes: &[u8]) -> Option<(u64, u64)> {
    let mut fields = bytes
        .split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty());
    let size = parse_u64(fields.next()?)?;
    let resident = parse_u64(fields.next()?)?;
    Some((size, resident))
}

fn parse_u64(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |acc, &b| {
        let d = b.checked_sub(b'0').filter(|d| *d <= 9)?;
        acc.checked_mul(10)?.checked_add(u64::from(d))
    })
}

/// The kernel's page size, from the auxiliary vector (`AT_PAGESZ`): std has no
/// safe way to ask, and this avoids an `unsafe sysconf`.
pub(crate) fn page_size() -> u64 {
    static PAGE: OnceLock<u64> = OnceLock::new();
    *PAGE.get_or_init(|| {
        std::fs::read("/proc/self/auxv")
            .ok()
            .and_then(|auxv| auxv_value(&auxv, AT_PAGESZ))
            .filter(|p| p.is_power_of_two())
            .unwrap_or(4096)
    })
}

const AT_PAGESZ: u64 = 6;

/// The value for `key` in a native-endian auxv of (key, value) machine words.
fn auxv_value(auxv: &[u8], key: u64) -> Option<u64> {
    const W: usize = std::mem::size_of::<usize>();
    for pair in auxv.chunks_exact(2 * W) {
        let k = usize::from_ne_bytes(pair[..W].try_into().ok()?) as u64;
        let v = usize::from_ne_bytes(pair[W..].try_into().ok()?) as u64;
        if k == key {
            return Some(v);
        }
        if k == 0 {
            break;
        }
    }
    None
}

/// `MemTotal` and `MemAvailable` from `/proc/meminfo`, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MemInfo {
    pub total: Option<u64>,
    pub available: Option<u64>,
}

pub(crate) fn meminfo() -> Option<MemInfo> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    Some(parse_meminfo(&text))
}

pub(crate) fn parse_meminfo(text: &str) -> MemInfo {
    let mut info = MemInfo {
        total: None,
        available: None,
    };
    for line in text.lines() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let slot = match key {
            "MemTotal" => &mut info.total,
            "MemAvailable" => &mut info.available,
            _ => continue,
        };
        // Values are in kB (KiB) whatever the page size.
        let kib = rest
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse::<u64>()
            .ok();
        *slot = kib.map(|k| k.saturating_mul(gpulab_events::units::KIB));
    }
    info
}

/// The 1-minute load average from `/proc/loadavg` (runnable and uninterruptible
/// tasks, averaged), or None where it cannot be read.
pub fn load_avg() -> Option<f64> {
    parse_loadavg(&std::fs::read_to_string("/proc/loadavg").ok()?)
}

/// How long, in µs since boot, some task has waited for a CPU (the kernel's
/// pressure stall information, `/proc/pressure/cpu`'s `some … total=`); None
/// where the kernel keeps none.
pub fn cpu_waiting_us() -> Option<u64> {
    parse_pressure(&std::fs::read_to_string("/proc/pressure/cpu").ok()?)
}

fn parse_pressure(text: &str) -> Option<u64> {
    let some = text.lines().find(|l| l.starts_with("some "))?;
    some.split_whitespace()
        .find_map(|f| f.strip_prefix("total="))?
        .parse()
        .ok()
}

fn parse_loadavg(text: &str) -> Option<f64> {
    text.split_whitespace()
        .next()?
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
}

/// Resident bytes of process `pid`, or None when it is gone or unreadable.
/// Opens the file each time: for repeated reads use a `Probe`.
/// `root` and every process below it, from `/proc/<pid>/task/<tid>/children`
/// (a process whose threads started children lists them per thread). At most
/// `MAX_TREE` processes; a process gone meanwhile is skipped.
pub fn process_tree(root: u32) -> Vec<u32> {
    const MAX_TREE: usize = 4096;
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() && tree.len() < MAX_TREE {
        let pid = tree[i];
        i += 1;
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.filter_map(Result::ok) {
            let Ok(text) = std::fs::read_to_string(task.path().join("children")) else {
                continue;
            };
            for child in text.split_whitespace().filter_map(|c| c.parse().ok()) {
                if !tree.contains(&child) && tree.len() < MAX_TREE {
                    tree.push(child);
                }
            }
        }
    }
    tree
}

pub fn host_rss_bytes(pid: u32) -> Option<u64> {
    Statm::open(pid).ok()?.rss_bytes().ok()
}

/// Resident bytes of this process: one `pread` of a `/proc/self/statm` opened on the
/// first call. After a `fork` without `exec` the child would read its parent's.
pub fn self_rss_bytes() -> Option<u64> {
    static SELF_STATM: OnceLock<Option<Statm>> = OnceLock::new();
    SELF_STATM
        .get_or_init(|| Statm::open_self().ok())
        .as_ref()?
        .rss_bytes()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_tree_holds_the_children_and_their_children() {
        // sh starts sleep: both are below this test process.
        let Ok(mut child) = std::process::Command::new("sh")
            .args(["-c", "sleep 5 & wait"])
            .spawn()
        else {
            return; // no sh here
        };
        let sh = child.id();
        let mut below_sh = Vec::new();
        for _ in 0..100 {
            below_sh = process_tree(sh);
            if below_sh.len() >= 2 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let mine = process_tree(std::process::id());
        // Stop sh and its sleep, and only those: other tests have children too.
        for pid in below_sh.iter().rev() {
            if let Some(pid) = rustix::process::Pid::from_raw(*pid as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
        let _ = child.wait();
        assert_eq!(mine[0], std::process::id());
        assert!(mine.contains(&sh), "{mine:?}");
        assert_eq!(below_sh.len(), 2, "sh and its sleep: {below_sh:?}");
        assert!(
            below_sh.iter().all(|p| mine.contains(p)),
            "{mine:?} {below_sh:?}"
        );
    }

    #[test]
    fn statm_fields_parse() {
        assert_eq!(parse_statm(b"1234 567 89 1 0 300 0\n"), Some((1234, 567)));
        assert_eq!(parse_statm(b"0 0 0 0 0 0 0\n"), Some((0, 0)));
        assert_eq!(parse_statm(b""), None);
        assert_eq!(parse_statm(b"12"), None);
        assert_eq!(parse_statm(b"12 x4"), None);
        assert_eq!(parse_statm(b"99999999999999999999999 1"), None);
    }

    #[test]
    fn meminfo_parses_kib() {
        let text = "MemTotal:       16318480 kB\nMemFree:  1 kB\nMemAvailable:   8000 kB\n";
        let info = parse_meminfo(text);
        assert_eq!(info.total, Some(16318480 * 1024));
        assert_eq!(info.available, Some(8000 * 1024));
        assert!(meminfo().and_then(|m| m.total).is_some_and(|t| t > 0));
    }

    #[test]
    fn cpu_pressure_reads_the_some_lines_total() {
        let text = "some avg10=25.63 avg60=24.11 avg300=17.80 total=7300284508\n\
                    full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(parse_pressure(text), Some(7_300_284_508));
        assert_eq!(parse_pressure("full avg10=0 total=5\n"), None);
        assert_eq!(parse_pressure("some avg10=1 total=x\n"), None);
        assert_eq!(parse_pressure(""), None);
    }

    #[test]
    fn loadavg_reads_its_first_field() {
        assert_eq!(parse_loadavg("5.21 0.93 1.24 1/78 15451\n"), Some(5.21));
        assert_eq!(parse_loadavg(""), None);
        assert_eq!(parse_loadavg("x 1 2"), None);
        assert_eq!(parse_loadavg("-1 0 0"), None);
    }

    #[test]
    fn auxv_lookup() {
        let w = |x: u64| (x as usize).to_ne_bytes();
        let mut auxv = Vec::new();
        for (k, v) in [(3, 77), (AT_PAGESZ, 16384), (0, 0)] {
            auxv.extend_from_slice(&w(k));
            auxv.extend_from_slice(&w(v));
        }
        assert_eq!(auxv_value(&auxv, AT_PAGESZ), Some(16384));
        assert_eq!(auxv_value(&auxv, 99), None);
        assert!(page_size().is_power_of_two() && page_size() >= 4096);
    }

    #[test]
    fn own_rss_is_positive() {
        assert!(self_rss_bytes().is_some_and(|b| b > 0));
        assert!(host_rss_bytes(std::process::id()).is_some_and(|b| b > 0));
        // No such pid.
        assert_eq!(host_rss_bytes(u32::MAX), None);
    }
}
