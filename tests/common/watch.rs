//! `gpulab watch --json` from the tests, and what every watch report must hold.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use super::{gpulab, opencl_or_skip, repo_file, stderr, stdout, temp_dir};

/// Watches `args`, the report written to a file apart from the program's output.
pub fn watch_json(args: &[&str]) -> (Output, Value) {
    watch_json_with(&[], args)
}

/// [`watch_json`] with `flags` for `gpulab watch`.
pub fn watch_json_with(flags: &[&str], args: &[&str]) -> (Output, Value) {
    let dir = temp_dir();
    let file = dir.path().join("report.json");
    let out = gpulab()
        .arg("watch")
        .arg("--json")
        .arg("--output")
        .arg(&file)
        .args(flags)
        .arg("--")
        .args(args)
        .output()
        .expect("gpulab starts");
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    let report: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "watch --json wrote no report ({e}); stdout:\n{}\nstderr:\n{}",
            stdout(&out),
            stderr(&out)
        )
    });
    (out, report)
}

/// The report's row for one object kind.
pub fn kind<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["kinds"]
        .as_array()
        .and_then(|ks| ks.iter().find(|k| k["kind"] == name))
        .unwrap_or_else(|| panic!("no {name} in the report: {report:#}"))
}

/// Every process's agent said goodbye, dropped nothing, and everything it sent
/// arrived; with `api`, every process watched that API.
pub fn assert_complete(report: &Value, api: Option<&str>) {
    let processes = report["processes"].as_array().expect("processes");
    assert!(!processes.is_empty(), "no agent reported: {report:#}");
    for p in processes {
        if let Some(api) = api {
            assert!(
                p["apis"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|x| x == api)),
                "{api} not watched: {p}"
            );
        }
        assert_eq!(p["dropped"], 0, "records dropped: {p}");
        assert_eq!(p["records"], p["received"], "records lost on the way: {p}");
    }
}

/// A tool the test needs; missing, it skips, or fails where CI requires OpenCL.
pub fn tool_or_skip(test: &str, ok: bool, what: &str) -> bool {
    if ok {
        return true;
    }
    if std::env::var("GPULAB_REQUIRE_OPENCL").as_deref() == Ok("1") {
        panic!(
            "{test}: {what} is missing, and GPULAB_REQUIRE_OPENCL=1 requires it (.ci/run installs it)"
        );
    }
    super::say_skipped(format_args!("skipping {test}: {what} is missing"));
    false
}

/// `name=value` pairs from the program's own summary line.
pub fn counts(text: &str, prefix: &str) -> Vec<(String, u64)> {
    let line = text
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("the program printed no summary line:\n{text}"));
    line.split_whitespace()
        .filter_map(|w| w.split_once('='))
        .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
        .collect()
}

pub fn count(pairs: &[(String, u64)], key: &str) -> u64 {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| *v)
        .unwrap_or_else(|| panic!("no {key} in {pairs:?}"))
}

/// The C program `tests/watch/{name}.c` built for `test` in a temporary folder
/// (kept alive with it); None where the test skips.
pub fn program(test: &str, name: &str) -> Option<(tempfile::TempDir, PathBuf)> {
    if !opencl_or_skip(test) {
        return None;
    }
    let dir = temp_dir();
    let exe = compile(test, dir.path(), name)?;
    Some((dir, exe))
}

/// Builds `tests/watch/{name}.c` against the OpenCL loader, with debug
/// information (for `--backtrace`).
pub fn compile(test: &str, dir: &Path, name: &str) -> Option<PathBuf> {
    let exe = dir.join(name);
    // With the loader's development link (Debian's ocl-icd-opencl-dev), else
    // against its runtime name and CUDA's OpenCL headers (a GPU machine with
    // the toolkit and no -dev packages).
    let cc = |extra: &[&str]| {
        Command::new("cc")
            .arg("-g")
            .arg(repo_file(&format!("tests/watch/{name}.c")))
            .arg("-o")
            .arg(&exe)
            .args(extra)
            .output()
    };
    let mut built = cc(&["-lOpenCL"]);
    if !built.as_ref().is_ok_and(|o| o.status.success()) {
        built = cc(&[
            "-I/usr/local/cuda/include",
            "-l:libOpenCL.so.1",
            "-lpthread",
        ]);
    }
    let ok = built.as_ref().is_ok_and(|o| o.status.success());
    if !ok && let Ok(o) = &built {
        eprintln!("cc: {}", stderr(o));
    }
    tool_or_skip(
        test,
        ok,
        "a C compiler with OpenCL headers (gcc, opencl-c-headers, ocl-icd-opencl-dev)",
    )
    .then_some(exe)
}

/// A churn program (`thread_churn`, `cuda_thread_churn`: THREADS ITERATIONS
/// LEAKS) watched three times: each run's report must count exactly the
/// buffers it made, released and leaked. Call records may be dropped under
/// such churn (counted); object records never are, so the counts are whole.
pub fn churn_reports_exactly_its_leaks(exe: &str, threads: u64, iterations: u64, leaks: u64) {
    for run in 0..3 {
        let (out, report) = watch_json(&[
            exe,
            &threads.to_string(),
            &iterations.to_string(),
            &leaks.to_string(),
        ]);
        assert!(out.status.success(), "run {run}: {}", stderr(&out));
        assert_eq!(
            stdout(&out).trim(),
            format!("leaked {}", threads * leaks),
            "run {run}"
        );
        let buffers = kind(&report, "buffer");
        assert_eq!(
            buffers["created"],
            threads * (iterations + leaks),
            "run {run}: {buffers}"
        );
        assert_eq!(
            buffers["alive_at_exit"],
            threads * leaks,
            "run {run}: {buffers}"
        );
        assert_eq!(
            buffers["released"],
            threads * iterations,
            "run {run}: {buffers}"
        );
    }
}

/// A process's resident memory at its highest, in KiB: its own (anonymous)
/// pages, sampled, and the kernel's high-water mark of all of them (`VmHWM`).
/// The two are told apart because gpulab maps the libraries it names frames
/// in: reading the symbols of a program's 105 MiB libLLVM puts that file's
/// pages, shared with the program and the page cache, into `VmHWM`.
#[derive(Debug, Default, Clone, Copy)]
pub struct Resident {
    pub own_kib: u64,
    pub hwm_kib: u64,
}

impl Resident {
    /// Reads `pid`'s status once; false once it has no memory left (a
    /// zombie) or is gone: the last reading stands.
    pub fn sample(&mut self, pid: u32) -> bool {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            return false;
        };
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        };
        let (Some(hwm), Some(anon)) = (field("VmHWM:"), field("RssAnon:")) else {
            return false;
        };
        self.hwm_kib = self.hwm_kib.max(hwm);
        self.own_kib = self.own_kib.max(anon);
        true
    }
}

impl std::fmt::Display for Resident {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} MiB of its own (VmHWM {} MiB, with the files it mapped)",
            self.own_kib >> 10,
            self.hwm_kib >> 10
        )
    }
}

/// Waits for `child` (at most `limit`), sampling its resident memory as it
/// runs: the last reading before it became a zombie.
pub fn peak_rss(child: &std::process::Child, limit: std::time::Duration) -> Resident {
    let deadline = std::time::Instant::now() + limit;
    let mut peak = Resident::default();
    while peak.sample(child.id()) && std::time::Instant::now() <= deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    peak
}
