//! Shared by the integration tests: the real binary, and whether OpenCL is here.

#![allow(dead_code)]

pub mod browser;
pub mod dash;
pub mod procs;
pub mod watch;

use std::path::PathBuf;
use std::process::{Command, Output};

/// The binary under test; `GPULAB_TEST_BIN` runs the same tests against another
/// build (an older commit's, to see a regression test fail there, or a release
/// build carried to a GPU machine).
pub fn gpulab_exe() -> PathBuf {
    std::env::var_os("GPULAB_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_gpulab")))
}

pub fn gpulab() -> Command {
    Command::new(gpulab_exe())
}

pub fn run(args: &[&str]) -> Output {
    gpulab()
        .args(args)
        .output()
        .expect("the gpulab binary starts")
}

/// gpulab with `input` on its stdin (`check -`, `replay -`, `export -`).
pub fn run_with_stdin(args: &[&str], input: &[u8]) -> Output {
    use std::io::Write;
    let mut child = gpulab()
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the gpulab binary starts");
    if let Some(mut stdin) = child.stdin.take() {
        // A reader that stops early closes the pipe: that is its answer.
        let _ = stdin.write_all(input);
    }
    child.wait_with_output().expect("gpulab ends")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Held by every test that starts workers on the device: a test binary runs its
/// tests on parallel threads, and PoCL builds or a 2-core machine shared by several
/// workers at once turn behaviour checks into load tests.
pub fn device_lock() -> std::sync::MutexGuard<'static, ()> {
    static DEVICE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    DEVICE.lock().unwrap_or_else(|e| e.into_inner())
}

/// True when an OpenCL device exists. Without one the caller skips with a printed
/// notice, unless `GPULAB_REQUIRE_OPENCL=1` (CI), where a missing platform fails.
/// Says that a test did not run, and why, where the user sees it: on the
/// process's stderr itself, past the test harness's capture (which hides what
/// a passing test prints), so a skip never reads as a pass (#51).
pub fn say_skipped(what: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "NOT RUN: {what}");
}

pub fn opencl_or_skip(test: &str) -> bool {
    // Asked once per test binary: concurrent first calls into an ICD loader are
    // not something to rely on.
    static FOUND: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let found = *FOUND
        .get_or_init(|| gpulab::backend::discover::opencl_devices().is_ok_and(|d| !d.is_empty()));
    if found {
        return true;
    }
    if std::env::var("GPULAB_REQUIRE_OPENCL").as_deref() == Ok("1") {
        panic!(
            "{test}: no OpenCL platform, and GPULAB_REQUIRE_OPENCL=1 requires one (install pocl-opencl-icd)"
        );
    }
    say_skipped(format_args!(
        "skipping {test}: no OpenCL platform found (install pocl-opencl-icd to run it)"
    ));
    false
}

pub fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temporary directory")
}

pub fn repo_file(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// Short values for a lab's usual parameters, for those it has: the code paths of
/// the defaults in a tenth of a second per run on PoCL (cleanup and soak runs).
pub fn short_params(lab: &gpulab::lab::Lab) -> Vec<String> {
    let kernel_ms = if lab.id == "cl-forgotten-events" {
        "5"
    } else {
        "60"
    };
    let size_mib = if lab.id == "cl-sub-buffer" { "8" } else { "4" };
    let short = [
        ("iterations", "3"),
        ("size_mib", size_mib),
        ("sub_mib", "1"),
        ("kernel_ms", kernel_ms),
        ("hold_ms", "20"),
    ];
    short
        .iter()
        .filter(|(name, _)| lab.params.iter().any(|p| p.name == *name))
        .map(|(name, value)| format!("{name}={value}"))
        .collect()
}

/// A folder holding `mine.toml`: cl-finish as lab `my-finish`, with `clFinish`
/// misspelt on one line (a user's lab file with a mistake).
pub fn lab_with_a_mistake() -> tempfile::TempDir {
    let dir = temp_dir();
    let text = std::fs::read_to_string(repo_file("labs/cl-finish.toml"))
        .expect("the shipped lab")
        .replace("id = \"cl-finish\"", "id = \"my-finish\"")
        .replace(
            "clFinish(q)                      # name: wait",
            "clFinsh(q)",
        );
    std::fs::write(dir.path().join("mine.toml"), text).expect("a temporary folder");
    dir
}

/// Runs gpulab with `args` and `--record` into a temporary file: its output and
/// the recording's events. Panics, with what gpulab said, when no readable
/// recording was written.
pub fn run_recorded(args: &[&str]) -> (Output, Vec<gpulab::trace::Event>) {
    let dir = temp_dir();
    let file = dir.path().join("run.jsonl");
    let out = gpulab()
        .args(args)
        .arg("--record")
        .arg(&file)
        .output()
        .expect("the gpulab binary starts");
    let events = std::fs::File::open(&file)
        .ok()
        .and_then(|f| gpulab::trace::read_events(std::io::BufReader::new(f)).ok())
        .unwrap_or_else(|| panic!("{args:?}: no readable recording:\n{}", stderr(&out)));
    (out, events)
}

/// NVIDIA GPU 0's device-wide memory in use now (NVML), or None without one.
pub fn gpu_used() -> Option<u64> {
    gpulab::telemetry::Probe::nvidia_gpu0_now().map(|g| g.used)
}

/// GPU 0's memory in use before a GPU test, or None when there is no GPU and the
/// test is not required to find one (`GPULAB_REQUIRE_CUDA=1` makes that a failure).
pub fn gpu_used_or_skip(test: &str) -> Option<u64> {
    let required = std::env::var("GPULAB_REQUIRE_CUDA").as_deref() == Ok("1");
    let used = gpu_used();
    if used.is_none() {
        assert!(
            !required,
            "{test}: GPULAB_REQUIRE_CUDA=1 but NVML sees no GPU"
        );
        say_skipped(format_args!("skipping {test}: NVML sees no GPU"));
    }
    used
}

/// How far from its level before a run GPU memory may be once the worker is gone.
pub const GPU_BACK_SLACK: u64 = 4 << 20;

/// GPU 0's memory in use once it is back within `GPU_BACK_SLACK` of `before`, or
/// after 10 s: the driver takes a dead process's memory back in its own time.
pub fn gpu_used_once_back(before: u64) -> u64 {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut now = gpu_used().unwrap_or(u64::MAX);
    while now.abs_diff(before) > GPU_BACK_SLACK && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        now = gpu_used().unwrap_or(u64::MAX);
    }
    now
}

/// Whether a claim's verdict (a report's JSON) is one the host's load
/// decided: inconclusive, its reason the load's (`verdict::off_time`). A
/// test that runs a timed lab on this machine accepts it in place of the
/// verdict the numbers would give on an idle host, whatever else runs here.
pub fn load_decided(claim: &serde_json::Value) -> bool {
    claim["verdict"] == "inconclusive"
        && claim["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("the machine was loaded"))
}
