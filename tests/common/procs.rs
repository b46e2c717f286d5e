//! Processes as /proc shows them: a gpulab's workers, whether one still lives,
//! and the test process's own resident memory and open files.

use std::time::{Duration, Instant};

/// `(pid, state, ppid)` from `/proc/<pid>/stat`; the command may hold spaces and
/// parentheses, so the fields are read after its last `)`.
fn stat(pid: u32) -> Option<(char, u32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

/// Running or sleeping: neither gone nor a zombie (a zombie holds no memory, no
/// files and no device context; only its exit status waits for a reaper, and
/// where the reaper is a container's pid 1 that may never come).
pub fn alive(pid: u32) -> bool {
    stat(pid).is_some_and(|(state, _)| state != 'Z' && state != 'X')
}

/// Live children of `parent`.
pub fn children(parent: u32) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| stat(pid).is_some_and(|(s, pp)| pp == parent && s != 'Z' && s != 'X'))
        .collect()
}

/// Waits up to `wait` for `parent` to have a live child; its pid.
pub fn child_of(parent: u32, wait: Duration) -> Option<u32> {
    let deadline = Instant::now() + wait;
    loop {
        if let Some(&c) = children(parent).first() {
            return Some(c);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits up to `wait` for `pid` to be gone (or a zombie); whether it went.
pub fn gone_within(pid: u32, wait: Duration) -> bool {
    let deadline = Instant::now() + wait;
    while alive(pid) {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// This process's resident memory in bytes (`VmRSS`).
pub fn own_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib * 1024)
        .expect("VmRSS in /proc/self/status")
}

/// Open file descriptors of this process.
pub fn own_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count()
}

/// What this process's open files are (`/proc/self/fd` links), counted by
/// target: the evidence when their number grew.
pub fn own_fd_targets() -> String {
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for entry in std::fs::read_dir("/proc/self/fd")
        .into_iter()
        .flatten()
        .flatten()
    {
        let target = std::fs::read_link(entry.path())
            .map(|t| t.display().to_string())
            .unwrap_or_else(|e| format!("({e})"));
        *counts.entry(target).or_default() += 1;
    }
    counts
        .iter()
        .map(|(t, n)| format!("{n} x {t}"))
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn signal(pid: u32, signal: rustix::process::Signal) {
    if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(p, signal);
    }
}
