//! Programs nobody here wrote do things no list of test cases foresees: this
//! generates them. `tests/watch/hostile.c` does, at random from a seed,
//! threads that churn buffers, children forked, vforked, exec'd and in their
//! own session, descriptors closed under its own files, standard input
//! closed, one-shot and write-barrier signal handlers, every signal blocked,
//! and several endings. Each seed runs bare and under `gpulab watch`; the
//! two must agree on everything the program can see of itself (exit status,
//! every byte of its output, every file it wrote, its OpenCL device, the
//! descriptors OpenCL opened, its signal dispositions), and the report must
//! say exactly the buffers the program says it made and leaked.
//!
//! `GPULAB_HOSTILE_RUNS` sets how many seeds (120 by default, a few hundred
//! runs); `GPULAB_HOSTILE_FROM` where they start; `GPULAB_HOSTILE_JOBS` how
//! many run at once (2). The soak in docs/reliability.md runs thousands.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::watch::{kind, program};
use common::{gpulab, stderr, stdout, temp_dir};

/// Runs `cmd` to its end, killing it after a minute (a hang is a failure).
fn run(mut cmd: Command) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = child.kill();
    child.wait_with_output().expect("ends")
}

/// Every file under `dir`, by name, with its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .expect("read dir")
        .flatten()
        .filter(|e| e.file_name() != "report.json")
        .map(|e| {
            let bytes = std::fs::read(e.path()).unwrap_or_default();
            (e.file_name().to_string_lossy().into_owned(), bytes)
        })
        .collect()
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What one seed showed; None when it agreed in everything.
fn one(exe: &Path, seed: u64) -> Option<String> {
    let bare_dir = temp_dir();
    let watched_dir = temp_dir();
    let mut bare = Command::new(exe);
    bare.arg(seed.to_string()).arg(bare_dir.path());
    let bare = run(bare);
    let report_path = watched_dir.path().join("report.json");
    let mut watched = gpulab();
    watched
        .args(["watch", "--json", "-o"])
        .arg(&report_path)
        .arg("--")
        .arg(exe)
        .arg(seed.to_string())
        .arg(watched_dir.path());
    let watched = run(watched);
    let said = stdout(&bare);
    let plan = said.lines().next().unwrap_or("").to_string();
    let differs = |what: &str, a: &dyn std::fmt::Debug, b: &dyn std::fmt::Debug| {
        Some(format!(
            "seed {seed} ({plan}): {what} differs\n  bare:    {a:?}\n  watched: {b:?}\n  gpulab said: {}",
            stderr(&watched)
        ))
    };
    // gpulab exits as a shell does: 128 + the signal the program died of.
    let status = |o: &Output| {
        use std::os::unix::process::ExitStatusExt;
        o.status
            .code()
            .or_else(|| o.status.signal().map(|s| 128 + s))
    };
    if status(&bare) != status(&watched) {
        return differs("exit status", &bare.status, &watched.status);
    }
    if said != stdout(&watched) {
        return differs("output", &said, &stdout(&watched));
    }
    if files(bare_dir.path()) != files(watched_dir.path()) {
        return differs(
            "files written",
            &files(bare_dir.path()).keys(),
            &files(watched_dir.path()).keys(),
        );
    }
    let expect = said
        .lines()
        .find_map(|l| l.strip_prefix("expect "))
        .unwrap_or("");
    let number = |key: &str| {
        expect
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(key)?.parse::<u64>().ok())
    };
    let (Some(made), Some(leaked)) = (number("made="), number("leaked=")) else {
        return Some(format!(
            "seed {seed}: the program said no `expect` line: {said}"
        ));
    };
    let report: serde_json::Value = match std::fs::read(&report_path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
    {
        Some(r) => r,
        None => return Some(format!("seed {seed}: no report: {}", stderr(&watched))),
    };
    let buffers = kind(&report, "buffer");
    let reported = (
        buffers["created"].as_u64().unwrap_or(0),
        buffers["alive_at_exit"].as_u64().unwrap_or(0),
    );
    if reported != (made, leaked) {
        return differs(
            "buffers (made, leaked)",
            &(made, leaked),
            &(reported, &report["processes"], &report["warnings"]),
        );
    }
    let warnings = report["warnings"].as_array().cloned().unwrap_or_default();
    let lost = warnings.iter().filter_map(|w| w.as_str()).find(|w| {
        w.contains("never arrived") || w.contains("uncertain") || w.contains("still running")
    });
    lost.and_then(|w| differs("what arrived", &"everything", &w))
}

#[test]
fn generated_hostile_programs_run_watched_exactly_as_they_run_bare() {
    let test = "generated_hostile_programs_run_watched_exactly_as_they_run_bare";
    let Some((_dir, exe)) = program(test, "hostile") else {
        return;
    };
    let runs = env_u64("GPULAB_HOSTILE_RUNS", 120);
    let from = env_u64("GPULAB_HOSTILE_FROM", 0);
    let next = AtomicU64::new(from);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..env_u64("GPULAB_HOSTILE_JOBS", 2) {
            s.spawn(|| {
                loop {
                    let seed = next.fetch_add(1, Ordering::Relaxed);
                    if seed >= from + runs {
                        break;
                    }
                    if let Some(f) = one(&exe, seed) {
                        failures.lock().unwrap().push(f);
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {runs} seeds differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
