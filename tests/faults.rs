//! Faults, each real: a worker killed mid-call, a parent killed mid-run, no NVML,
//! a broken OpenCL ICD, a recording that cannot be written, and a variant that
//! cannot run among others. Real binaries, real signals, the OpenCL device this
//! machine has (PoCL in CI).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Output, Stdio};
use std::time::Duration;

use common::procs;
use gpulab::trace::{EndStatus, Event, read_events};
use rustix::process::Signal;

/// A worker that does not go within this has outlived what killed it. Order of
/// magnitude only: reaping on a loaded 2-core box takes milliseconds.
const GONE: Duration = Duration::from_secs(10);

/// `gpulab run cl-finish [finish]` with a 6 s kernel, stepped to inside its
/// `clFinish` (line 43, which waits for the kernel): returns the parent, the
/// worker's pid, and the parent's stdin (kept open so stepping does not end).
fn stepped_into_clfinish(record: &std::path::Path) -> (Child, u32) {
    let mut child = common::gpulab()
        .args(["run", "cl-finish", "--step", "--record"])
        .arg(record)
        .args(["--param", "kernel_ms=6000", "--param", "size_mib=1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gpulab starts");
    let worker = procs::child_of(child.id(), Duration::from_secs(30)).expect("a worker starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    // Step mode prints `next  <line>` before each line; Enter runs it. Step until
    // line 43 is next, then once more: the worker is in clFinish for 6 s.
    let mut line = String::new();
    loop {
        line.clear();
        let n = stderr.read_line(&mut line).expect("stderr reads");
        assert!(n > 0, "gpulab ended before line 43 came up");
        if line.starts_with("next") {
            stdin.write_all(b"\n").expect("a step is sent");
            if line
                .trim_start_matches("next")
                .trim_start()
                .starts_with("43")
            {
                break;
            }
        }
    }
    // The step is on its way; the rest of stderr is drained so gpulab never blocks.
    std::thread::spawn(move || {
        let _keep = stdin;
        let mut rest = String::new();
        while stderr.read_line(&mut rest).is_ok_and(|n| n > 0) {
            rest.clear();
        }
    });
    std::thread::sleep(Duration::from_millis(500));
    (child, worker)
}

/// A real fault re-runs the faulting instruction after each handler returns, so
/// SIGSEGV comes back until the default action kills. PoCL's LLVM and Rust's own
/// stack-overflow handler each catch one SIGSEGV from `kill` and step aside, so the
/// test sends it again the way the fault would, until the worker is gone.
fn segfault(pid: u32) {
    for _ in 0..20 {
        procs::signal(pid, Signal::SEGV);
        if procs::gone_within(pid, Duration::from_millis(300)) {
            return;
        }
    }
}

fn recorded_end(path: &std::path::Path) -> Option<EndStatus> {
    let text = std::fs::read_to_string(path).ok()?;
    let events = read_events(text.as_bytes()).ok()?;
    events.iter().find_map(|e| match e {
        Event::End(end) => Some(end.status.clone()),
        _ => None,
    })
}

#[test]
fn a_worker_killed_mid_call_is_reported_as_crashed_with_its_partial_run() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("a_worker_killed_mid_call_is_reported") {
        return;
    }
    for (signal, name) in [(Signal::KILL, "SIGKILL"), (Signal::SEGV, "SIGSEGV")] {
        let dir = common::temp_dir();
        let record = dir.path().join("crashed.jsonl");
        let (child, worker) = stepped_into_clfinish(&record);
        if signal == Signal::SEGV {
            segfault(worker);
        } else {
            procs::signal(worker, signal);
        }
        let out = child.wait_with_output().expect("gpulab ends");
        let text = common::stdout(&out);
        assert_eq!(out.status.code(), Some(4), "{name}: {text}");
        assert!(
            text.contains(&format!("killed by signal {} ({name})", signal.as_raw())),
            "{name}: {text}"
        );
        // The partial run: the lines done before the kill, with their results.
        assert!(text.contains("clEnqueueNDRangeKernel"), "{name}: {text}");
        assert!(text.contains("clCreateContext"), "{name}: {text}");
        assert!(
            matches!(recorded_end(&record), Some(EndStatus::Crashed { signal: Some(s), .. }) if s == signal.as_raw()),
            "{name}: the recording reads back and ends crashed"
        );
        assert!(
            procs::gone_within(worker, GONE),
            "{name}: worker {worker} lives on"
        );
    }
}

#[test]
fn no_worker_outlives_its_parent_killed_by_any_signal() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("no_worker_outlives_its_parent") {
        return;
    }
    for signal in [Signal::TERM, Signal::INT, Signal::KILL] {
        let child = common::gpulab()
            .args(["run", "cl-finish", "--param", "kernel_ms=8000"])
            .args(["--param", "size_mib=1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("gpulab starts");
        let worker = procs::child_of(child.id(), Duration::from_secs(30)).expect("a worker starts");
        // Killed as soon as the worker exists: also the moment before it has asked
        // to die with its parent (the worker checks for that too).
        procs::signal(child.id(), signal);
        let out = child.wait_with_output().expect("gpulab ends");
        assert!(
            procs::gone_within(worker, GONE),
            "{signal:?}: worker {worker} outlived its parent"
        );
        use std::os::unix::process::ExitStatusExt;
        if signal == Signal::KILL {
            assert_eq!(out.status.signal(), Some(9));
        } else {
            // 128 + the signal, as shells and CI runners read it.
            assert_eq!(
                out.status.code(),
                Some(128 + signal.as_raw()),
                "{signal:?}: {}",
                common::stderr(&out)
            );
        }
    }
}

#[test]
fn a_parent_killed_mid_kernel_takes_its_worker_along() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("a_parent_killed_mid_kernel_takes_its_worker_along") {
        return;
    }
    let dir = common::temp_dir();
    let (mut child, worker) = stepped_into_clfinish(&dir.path().join("r.jsonl"));
    procs::signal(child.id(), Signal::KILL);
    let _ = child.wait();
    assert!(
        procs::gone_within(worker, GONE),
        "worker {worker} outlived a SIGKILLed parent"
    );
}

fn nvml_loads() -> bool {
    #[allow(unsafe_code)]
    // SAFETY: loading NVML runs its initialisers, as gpulab's own NVML use does.
    let lib = unsafe { libloading::Library::new("libnvidia-ml.so.1") };
    lib.is_ok()
}

#[test]
fn without_nvml_doctor_says_so_and_a_run_on_pocl_says_what_it_measures() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("without_nvml_doctor_says_so") {
        return;
    }
    let doctor = common::run(&["doctor"]);
    let text = common::stdout(&doctor);
    let nvml = text
        .lines()
        .skip_while(|l| !l.starts_with("NVML"))
        .nth(1)
        .unwrap_or_default()
        .to_string();
    if nvml_loads() {
        assert!(nvml.contains("ok"), "{text}");
        return;
    }
    assert!(nvml.contains("missing"), "{text}");
    assert!(nvml.contains("libnvidia-ml.so.1"), "{text}");
    let run = common::run(&["run", "cl-finish", "--param", "kernel_ms=10"]);
    let report = common::stdout(&run);
    assert_eq!(run.status.code(), Some(0), "{}", common::stderr(&run));
    assert!(report.contains("host memory of the worker"), "{report}");
    assert!(!common::stderr(&run).contains("panicked"));
}

/// A vendors folder with one `.icd` naming `library`.
fn vendors_with(dir: &std::path::Path, library: &str) -> std::path::PathBuf {
    let vendors = dir.join("vendors");
    std::fs::create_dir_all(&vendors).unwrap();
    std::fs::write(vendors.join("broken.icd"), format!("{library}\n")).unwrap();
    vendors
}

#[test]
fn a_broken_opencl_icd_is_named_with_why_by_doctor_and_run() {
    if !common::opencl_or_skip("a_broken_opencl_icd_is_named") {
        return;
    }
    // A library that is not there, and one that is there but no OpenCL driver
    // (the C library is on every Linux machine).
    for (library, why) in [
        ("/nonexistent/libOpenCL-gone.so", "cannot be loaded"),
        ("libc.so.6", "not an OpenCL driver"),
    ] {
        let dir = common::temp_dir();
        let vendors = vendors_with(dir.path(), library);
        let doctor = common::gpulab()
            .arg("doctor")
            .env("OCL_ICD_VENDORS", &vendors)
            .output()
            .unwrap();
        let text = common::stdout(&doctor);
        assert!(text.contains("broken.icd"), "{library}: {text}");
        assert!(text.contains(why), "{library}: {text}");
        let run = common::gpulab()
            .args(["run", "cl-finish", "--param", "kernel_ms=10"])
            .env("OCL_ICD_VENDORS", &vendors)
            .output()
            .unwrap();
        let err = common::stderr(&run);
        assert_eq!(run.status.code(), Some(3), "{library}: {err}");
        assert!(
            err.contains("broken.icd") && err.contains(why),
            "{library}: {err}"
        );
        // Said once, not once per variant and once more for the run.
        assert_eq!(err.matches(why).count(), 1, "{err}");
        for out in [&doctor, &run] {
            assert!(!common::stderr(out).contains("panicked"), "{library}");
        }
    }
}

fn run_recording_to(record: &str) -> Output {
    common::run(&[
        "run",
        "cl-finish",
        "--param",
        "kernel_ms=10",
        "--param",
        "size_mib=1",
        "--record",
        record,
    ])
}

#[test]
fn a_full_disk_while_recording_keeps_the_report_and_says_why() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("a_full_disk_while_recording_keeps_the_report") {
        return;
    }
    // /dev/full takes the open and refuses every write with ENOSPC: a full disk
    // without root or a tmpfs.
    let out = run_recording_to("/dev/full");
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        common::stdout(&out).contains("status   finished"),
        "the run is reported: {}",
        common::stdout(&out)
    );
    assert!(
        err.contains("/dev/full") && err.contains("No space left on device"),
        "{err}"
    );
}

#[test]
fn an_unwritable_record_path_is_refused_before_the_run() {
    let dir = common::temp_dir();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    // A folder that is a file: refused as root too, unlike a permission bit.
    let record = file.join("run.jsonl").display().to_string();
    let out = run_recording_to(&record);
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&record), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

const TWO_VARIANTS: &str = r#"
id = "fault-second-variant-too-big"
title = "A variant that fits and one that cannot"
backend = "opencl"
claim = "the first variant's buffer is gone at the end"

[teaching]
look = "the second variant asks for more than the budget"
why = "a failed variant fails alone"
instead = "ask for less"

[[params]]
name = "big_mib"
default = 4096
min = 1
max = 8192
unit = "MiB"
help = "the second variant's buffer"

[[variants]]
name = "fits"
description = "one small buffer"
script = '''
ctx = clCreateContext()
buf = clCreateBuffer(ctx, 1 MiB)
clReleaseMemObject(buf)
clReleaseContext(ctx)
'''

[[variants]]
name = "too-big"
description = "a buffer larger than the budget"
script = '''
ctx = clCreateContext()
buf = clCreateBuffer(ctx, {big_mib} MiB)
clReleaseMemObject(buf)
clReleaseContext(ctx)
'''

[[claims]]
name = "nothing-left"
text = "every buffer is gone at the end"
expr = "live(buffers) == 0"
"#;

#[test]
fn a_variant_that_cannot_run_fails_alone_under_all_variants() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("a_variant_that_cannot_run_fails_alone") {
        return;
    }
    let dir = common::temp_dir();
    std::fs::write(dir.path().join("two.toml"), TWO_VARIANTS).unwrap();
    let labs = dir.path().display().to_string();
    let run = |json: bool| {
        let mut args = vec!["--labs", &labs, "run", "fault-second-variant-too-big"];
        args.extend(["--all-variants", "--budget", "64"]);
        if json {
            args.push("--json");
        }
        common::run(&args)
    };
    let out = run(true);
    assert_eq!(out.status.code(), Some(4), "{}", common::stderr(&out));
    let json: serde_json::Value = serde_json::from_str(&common::stdout(&out)).expect("JSON");
    let runs = json["runs"].as_array().expect("a list of runs");
    assert_eq!(runs.len(), 2, "{json:#}");
    assert_eq!(runs[0]["status"], "finished", "{json:#}");
    assert!(
        runs[0]["claims"].as_array().is_some_and(|c| !c.is_empty()),
        "the first variant is judged: {json:#}"
    );
    assert_ne!(runs[1]["status"], "finished", "{json:#}");
    let text = common::stdout(&run(false));
    assert!(text.contains("budget"), "the failure in words: {text}");
    assert!(!text.contains("Unavailable {"), "no Debug dump: {text}");
}

/// A lab file in `--labs` that does not load, run by its id: the error names the
/// file and why, not only "unknown lab".
#[test]
fn running_a_lab_whose_file_did_not_load_says_why() {
    let dir = common::temp_dir();
    let broken = TWO_VARIANTS.replace("[teaching]", "[teachings]");
    std::fs::write(dir.path().join("two.toml"), broken).unwrap();
    let labs = dir.path().display().to_string();
    let out = common::run(&["--labs", &labs, "run", "fault-second-variant-too-big"]);
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("two.toml"), "{err}");
    assert!(err.contains("teaching"), "{err}");
}

/// The driver says no: on an NVIDIA GPU, `--until-failure` runs allocate until
/// `cudaMalloc` is refused (cuda-leak-loop, 4 GiB an iteration) and create OpenCL
/// contexts until `clCreateContext` is (cl-forgotten-events on NVIDIA's OpenCL,
/// each forgotten event keeping its context). Each run reports the refusal as its
/// finding, keeps what it measured before it, exits 0, and the device's memory is
/// back where it was once the worker is gone.
/// `GPULAB_REQUIRE_CUDA=1 cargo test --test labs faults:: -- --ignored` on the GPU host.
#[test]
#[ignore = "needs an NVIDIA GPU: run with -- --ignored on one"]
fn on_a_gpu_a_refused_allocation_or_context_is_the_runs_finding() {
    let _device = common::device_lock();
    let Some(before) = common::gpu_used_or_skip("refusals on a GPU") else {
        return;
    };
    let runs: [&[&str]; 2] = [
        &[
            "run",
            "cuda-leak-loop",
            "--until-failure",
            "--param",
            "size_mib=4096",
            "--param",
            "iterations=1000",
            "--json",
        ],
        &[
            "run",
            "cl-forgotten-events",
            "--until-failure",
            "--param",
            "iterations=1000",
            "--param",
            "size_mib=1",
            "--param",
            "kernel_ms=1",
            "--json",
        ],
    ];
    for args in runs {
        let out = common::run(args);
        let what = args.join(" ");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{what}: {}",
            common::stderr(&out)
        );
        let json: serde_json::Value =
            serde_json::from_str(&common::stdout(&out)).expect("the report is JSON");
        let run = &json["runs"][0];
        eprintln!(
            "{what}: {} on {}; finding: {}; after exit {} bytes against {}",
            run["status"],
            run["device"],
            run["finding"]["said"],
            run["after_exit_bytes"],
            run["after_exit_against"]
        );
        assert!(
            run["device"].as_str().is_some_and(|d| d.contains("NVIDIA")),
            "{what} ran on the GPU: {run:#}"
        );
        assert!(
            run["finding"]["error"]
                .as_str()
                .is_some_and(|e| !e.is_empty()),
            "{what}: the refusal is the finding: {run:#}"
        );
        assert!(
            run["lines"].as_array().is_some_and(|l| !l.is_empty()),
            "{what}: what ran before the refusal is kept: {run:#}"
        );
        let now = common::gpu_used_once_back(before);
        assert!(
            now.abs_diff(before) <= common::GPU_BACK_SLACK,
            "{what}: device memory {now} B after the run, {before} B before"
        );
    }
}

/// A lab of two variants: `stuck` makes a call that cannot return within any
/// time limit a test sets (a clFinish on a 60 s kernel), `quick` ends at once.
fn lab_with_a_call_that_hangs() -> tempfile::TempDir {
    let dir = common::temp_dir();
    let text = r#"
id = "hangs"
title = "A call that does not return in time"
backend = "opencl"
claim = "the run ends at its time limit"

[teaching]
look = "the status line"
why = "a time limit"
instead = "nothing"

[[params]]
name = "kernel_ms"
default = 10
min = 1
max = 100
unit = "ms"
help = "the quick variant's kernel"

[[variants]]
name = "stuck"
description = "waits a minute for its kernel"
script = '''
ctx  = clCreateContext()
q    = clCreateCommandQueue(ctx)
buf  = clCreateBuffer(ctx, 1 MiB)
prog = clCreateProgramWithSource(ctx, spin)
clBuildProgram(prog)
k    = clCreateKernel(prog, spin)
clEnqueueNDRangeKernel(q, k, buf, 60000 ms)
clFinish(q)                      # name: wait
clReleaseKernel(k)
clReleaseProgram(prog)
clReleaseMemObject(buf)
clReleaseCommandQueue(q)
clReleaseContext(ctx)
'''

[[variants]]
name = "quick"
description = "a short kernel"
script = '''
ctx  = clCreateContext()
q    = clCreateCommandQueue(ctx)
buf  = clCreateBuffer(ctx, 1 MiB)
prog = clCreateProgramWithSource(ctx, spin)
clBuildProgram(prog)
k    = clCreateKernel(prog, spin)
clEnqueueNDRangeKernel(q, k, buf, {kernel_ms} ms)
clFinish(q)                      # name: wait
clReleaseKernel(k)
clReleaseProgram(prog)
clReleaseMemObject(buf)
clReleaseCommandQueue(q)
clReleaseContext(ctx)
'''

[[claims]]
name = "waits"
text = "clFinish waits"
expr = "host_ms(wait) >= 0"
"#;
    std::fs::write(dir.path().join("hangs.toml"), text).expect("a temporary folder");
    dir
}

/// A call that cannot return in time ends the run at its limit: exit 124 as
/// timeout(1), the call named with its line, the JSON's outcome `timed_out`,
/// the recording ending so too, and no worker left. The kernel would hold
/// clFinish for 60 s; the limit leaves PoCL's setup (about 2 s here) room on
/// a loaded machine.
#[test]
fn a_call_that_cannot_return_in_time_ends_the_run_at_its_limit() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("a_call_that_cannot_return_in_time_ends_the_run_at_its_limit") {
        return;
    }
    let labs = lab_with_a_call_that_hangs();
    let dir = common::temp_dir();
    let record = dir.path().join("stuck.jsonl");
    let started = std::time::Instant::now();
    let child = common::gpulab()
        .args([
            "run",
            "hangs",
            "--variant",
            "stuck",
            "--time-limit",
            "10",
            "--json",
        ])
        .arg("--labs")
        .arg(labs.path())
        .arg("--record")
        .arg(&record)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gpulab starts");
    let worker = procs::child_of(child.id(), Duration::from_secs(30)).expect("a worker starts");
    let out = child.wait_with_output().expect("gpulab ends");
    let took = started.elapsed();
    let json: serde_json::Value =
        serde_json::from_str(&common::stdout(&out)).expect("the JSON report");
    assert_eq!(
        out.status.code(),
        Some(124),
        "{json}\n{}",
        common::stderr(&out)
    );
    // Order of magnitude: the kernel alone would have held it a minute.
    assert!(took < Duration::from_secs(40), "took {took:?}");
    let run = &json["runs"][0];
    assert_eq!(run["outcome"], "timed_out", "{run}");
    assert_eq!(run["in_flight"]["api"], "clFinish", "{run}");
    assert_eq!(run["in_flight"]["line"], 31, "{run}");
    assert_eq!(run["in_flight"]["limit_ms"], 10_000, "{run}");
    let status = run["status"].as_str().unwrap();
    assert!(
        status.starts_with("timed out after 10.0 s: clFinish at line 31 has not returned after"),
        "{status}"
    );
    let wait = run["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["line"] == 31)
        .unwrap();
    assert_eq!(wait["result"], "did not return", "{wait}");
    assert!(
        matches!(
            recorded_end(&record),
            Some(EndStatus::TimedOut { limit_ms: 10_000, in_flight: Some(c) }) if c.api == "clFinish"
        ),
        "the recording reads back and ends timed out"
    );
    assert!(procs::gone_within(worker, GONE), "worker {worker} lives on");
}

/// A card goes on past a run that timed out, and says so in its row.
#[test]
fn a_card_records_a_run_that_timed_out_and_goes_on() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("a_card_records_a_run_that_timed_out_and_goes_on") {
        return;
    }
    let labs = lab_with_a_call_that_hangs();
    let dir = common::temp_dir();
    let card = dir.path().join("card");
    let out = common::gpulab()
        .args(["card", "--lab", "hangs", "--time-limit", "6", "-o"])
        .arg(&card)
        .arg("--labs")
        .arg(labs.path())
        .output()
        .expect("gpulab starts");
    let said = common::stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    let text = std::fs::read_to_string(card.join("card.json")).expect("card.json");
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let runs = json["runs"].as_array().unwrap();
    let status = |variant: &str| {
        runs.iter()
            .filter(|r| r["variant"] == variant)
            .map(|r| r["status"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert!(!status("stuck").is_empty(), "{text}");
    for s in status("stuck") {
        assert!(s.starts_with("timed out after 6.0 s"), "{s}");
    }
    for s in status("quick") {
        assert_eq!(s, "finished", "{said}");
    }
    assert_eq!(status("quick").len(), status("stuck").len(), "{said}");
}

/// The plain C program that showed NVIDIA's OpenCL deadlocking in
/// clReleaseContext without gpulab (docs/reliability.md) builds and runs the
/// lab's calls on any OpenCL platform, each mode registering exactly the
/// callbacks it names, so it can be run again on the next driver.
#[test]
fn the_driver_hang_reproducer_registers_what_each_mode_says() {
    let Some((_dir, exe)) = common::watch::program(
        "the_driver_hang_reproducer_registers_what_each_mode_says",
        "cl_context_churn",
    ) else {
        return;
    };
    let doctor: serde_json::Value =
        serde_json::from_str(&common::stdout(&common::run(&["doctor", "--json"]))).unwrap();
    let platform = doctor["opencl_devices"][0]["platform"]
        .as_str()
        .expect("an OpenCL device")
        .to_string();
    let contexts_watched = doctor["opencl_devices"][0]["platform_version"]
        .as_str()
        .is_some_and(|v| v.contains("OpenCL 3."));
    for (mode, ctx, mem, done) in [
        ("bare", false, false, false),
        ("ctx", true, false, false),
        ("mem", false, true, false),
        ("dtor", true, true, false),
        ("evcb", false, false, true),
        ("all", true, true, true),
    ] {
        // clSetContextDestructorCallback is OpenCL 3.0.
        if ctx && !contexts_watched {
            continue;
        }
        let out = std::process::Command::new(&exe)
            .args([platform.as_str(), "2", mode, "1"])
            .output()
            .expect("the reproducer runs");
        let text = common::stdout(&out);
        assert!(
            out.status.success(),
            "{mode}: {text}{}",
            common::stderr(&out)
        );
        let n = |b: bool| if b { 2 } else { 0 };
        let want = format!(
            "destroyed contexts {}, buffers {}, completions {}",
            n(ctx),
            n(mem),
            n(done)
        );
        assert!(text.contains(&want), "{mode}: want {want:?} in\n{text}");
        assert!(text.contains("it=1 clReleaseContext"), "{mode}: {text}");
    }
}
