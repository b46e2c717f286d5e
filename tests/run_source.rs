//! The run source on its own: stepping, cancelling, a crashing worker, Ctrl-C.
//! Real workers on the OpenCL device this machine has (PoCL in CI).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use gpulab::lab::{Lab, LabSet};
use gpulab::source::{LocalSource, RunHandle, RunRequest, Workload};
use gpulab::trace::{EndStatus, Event};

fn lab(id: &str) -> Lab {
    LabSet::load(&[]).get(id).expect("a shipped lab").clone()
}

fn request(id: &str, params: &[&str], step: bool) -> RunRequest {
    let params = gpulab::lab::catalog::resolve_params(
        &lab(id),
        &params.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
    )
    .expect("valid test parameters");
    let mut req = RunRequest::new(lab(id), &lab(id).variants[0].name, params, 200.0)
        .expect("the lab's first variant");
    req.step = step;
    req
}

/// Starts a lab run on `source`, its events on a channel.
fn start(source: &LocalSource, req: RunRequest) -> RunHandle {
    RunHandle::start(source, Workload::Lab(Box::new(req))).expect("the run starts")
}

fn source() -> LocalSource {
    LocalSource::with_exe(PathBuf::from(env!("CARGO_BIN_EXE_gpulab")))
}

/// Next event other than a memory sample within `wait`, if any (samples arrive
/// all the time while a worker lives).
fn next(handle: &mut RunHandle, wait: Duration) -> Option<Event> {
    let deadline = Instant::now() + wait;
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        match handle.next_event(left).ok()? {
            Event::Sample(_) => continue,
            e => return Some(e),
        }
    }
}

fn drain(handle: &mut RunHandle) -> Vec<Event> {
    let mut out = Vec::new();
    while let Ok(e) = handle.next_event(Duration::from_secs(30)) {
        out.push(e);
    }
    out
}

fn end_of(events: &[Event]) -> Option<EndStatus> {
    events.iter().find_map(|e| match e {
        Event::End(end) => Some(end.status.clone()),
        _ => None,
    })
}

#[test]
fn stepping_runs_one_line_per_step() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("stepping_runs_one_line_per_step") {
        return;
    }
    let mut handle = start(
        &source(),
        request("cl-finish", &["kernel_ms=20", "size_mib=4"], true),
    );
    // Nothing runs until asked: meta and notes come, calls do not.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut saw_meta = false;
    while Instant::now() < deadline {
        match next(&mut handle, Duration::from_millis(300)) {
            Some(Event::Meta(_)) => saw_meta = true,
            Some(Event::Call(c)) => panic!("a call ran before any step: {c:?}"),
            Some(_) => {}
            None if saw_meta => break,
            None => {}
        }
    }
    assert!(saw_meta);
    for expected_line in [36, 37] {
        handle.step();
        let call = loop {
            match next(&mut handle, Duration::from_secs(20)) {
                Some(Event::Call(c)) => break c,
                Some(_) => {}
                None => panic!("no call after a step"),
            }
        };
        assert_eq!(call.line, Some(expected_line));
        // And no further line until the next step.
        while let Some(e) = next(&mut handle, Duration::from_millis(200)) {
            assert!(!matches!(e, Event::Call(_)), "ran ahead: {e:?}");
        }
    }
    handle.run_to_end();
    assert_eq!(end_of(&drain(&mut handle)), Some(EndStatus::Finished));
}

#[test]
fn cancel_kills_the_worker_and_ends_the_stream_as_cancelled() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("cancel_kills_the_worker_and_ends_the_stream_as_cancelled") {
        return;
    }
    let mut handle = start(
        &source(),
        request("cl-finish", &["kernel_ms=10000", "size_mib=4"], false),
    );
    let mut pid = None;
    let deadline = Instant::now() + Duration::from_secs(30);
    // Wait until the kernel is enqueued, then cancel mid-kernel.
    while Instant::now() < deadline {
        match next(&mut handle, Duration::from_secs(1)) {
            Some(Event::Meta(m)) => pid = Some(m.pid),
            Some(Event::Call(c)) if c.api == "clEnqueueNDRangeKernel" => break,
            _ => {}
        }
    }
    let started = Instant::now();
    handle.cancel();
    let events = drain(&mut handle);
    assert_eq!(end_of(&events), Some(EndStatus::Cancelled));
    assert!(
        // Order of magnitude only: a loaded 2-core machine may take seconds to
        // reap the worker, never the 10 s the kernel still had to run.
        started.elapsed() < Duration::from_secs(8),
        "cancel waited for the kernel"
    );
    let pid = pid.expect("meta");
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}/stat")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| s.contains(") Z "))
    );
}

/// A stand-in worker that dies of SIGSEGV, as a driver crash would.
fn crashing_worker(dir: &std::path::Path) -> PathBuf {
    let path = dir.join("crashing-worker");
    std::fs::write(
        &path,
        "#!/bin/sh\necho 'driver said goodbye' >&2\nkill -SEGV $$\n",
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn a_crashed_worker_is_reported_with_its_signal() {
    let dir = common::temp_dir();
    let source = LocalSource::with_exe(crashing_worker(dir.path()));
    let mut handle = start(&source, request("cl-finish", &[], false));
    let events = drain(&mut handle);
    match end_of(&events) {
        Some(EndStatus::Crashed { signal, detail }) => {
            assert_eq!(signal, Some(11));
            assert!(detail.contains("SIGSEGV"), "{detail}");
            assert!(detail.contains("driver said goodbye"), "{detail}");
        }
        other => panic!("expected a crash, got {other:?}"),
    }
    // The parent is fine and can start the next run.
    let mut again = start(&source, request("cl-finish", &[], false));
    assert!(matches!(
        end_of(&drain(&mut again)),
        Some(EndStatus::Crashed { .. })
    ));
}

/// `gpulab run cl-finish` with a 6 s kernel and `extra` arguments, sent `signal`
/// mid-kernel.
fn interrupted(extra: &[&str], signal: rustix::process::Signal) -> std::process::Output {
    let child = common::gpulab()
        .args(["run", "cl-finish", "--param", "kernel_ms=6000"])
        .args(["--param", "size_mib=4"])
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("gpulab starts");
    std::thread::sleep(Duration::from_millis(2500));
    let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("a pid");
    rustix::process::kill_process(pid, signal).expect("the signal is sent");
    child.wait_with_output().expect("gpulab ends")
}

#[test]
fn ctrl_c_prints_the_partial_run_and_exits_130() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("ctrl_c_prints_the_partial_run_and_exits_130") {
        return;
    }
    use rustix::process::Signal;
    // SIGTERM and SIGHUP are Ctrl-C too: the partial report, and the recording;
    // each exits 128 + itself (130, 143, 129), as shells and CI runners expect.
    for (signal, code) in [(Signal::INT, 130), (Signal::TERM, 143), (Signal::HUP, 129)] {
        let dir = common::temp_dir();
        let record = dir.path().join("partial.jsonl");
        let record = record.display().to_string();
        let out = interrupted(&["--record", &record], signal);
        assert_eq!(
            out.status.code(),
            Some(code),
            "{signal:?}: {}",
            common::stderr(&out)
        );
        let text = common::stdout(&out);
        assert!(text.contains("status   cancelled"), "{signal:?}: {text}");
        assert!(text.contains("clCreateContext"), "{signal:?}: {text}");
        let recorded = std::fs::read_to_string(&record).unwrap_or_default();
        let events = gpulab::trace::read_events(recorded.as_bytes()).unwrap_or_default();
        assert!(
            events
                .iter()
                .any(|e| matches!(e, Event::End(end) if end.status == EndStatus::Cancelled)),
            "{signal:?}: the recording ends with the cancelled run:\n{recorded}"
        );
    }
}

/// `--all-variants --json` prints an array whatever happens, also when Ctrl-C
/// stops the run during its first variant (it printed a bare object then).
#[test]
fn all_variants_json_lists_the_runs_even_when_cancelled_early() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("all_variants_json_lists_the_runs_even_when_cancelled_early") {
        return;
    }
    let out = interrupted(&["--all-variants", "--json"], rustix::process::Signal::INT);
    assert_eq!(out.status.code(), Some(130), "{}", common::stderr(&out));
    let json: serde_json::Value = serde_json::from_str(&common::stdout(&out)).expect("JSON");
    let runs = json["runs"].as_array().expect("a list of runs");
    assert!(!runs.is_empty() && runs.len() < 3, "{json:#}");
    assert_eq!(runs[runs.len() - 1]["status"], "cancelled", "{json:#}");
}

/// `--record -`: the event stream on stdout, the report on stderr, and no
/// file named `-`; `gpulab report -` reads it back. Several variants need
/// files.
#[test]
fn record_dash_streams_the_run_to_stdout() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("record_dash_streams_the_run_to_stdout") {
        return;
    }
    let dir = common::temp_dir();
    let out = common::gpulab()
        .current_dir(dir.path())
        .args([
            "run",
            "cl-finish",
            "--param",
            "kernel_ms=20",
            "--record",
            "-",
        ])
        .output()
        .expect("gpulab starts");
    assert!(out.status.success(), "{}", common::stderr(&out));
    let events = gpulab::trace::read_events(out.stdout.as_slice()).expect("a recording on stdout");
    assert!(matches!(events.first(), Some(Event::Meta(_))), "{events:?}");
    assert!(
        common::stderr(&out).contains("clFinish(q)"),
        "the report is on stderr"
    );
    assert!(!dir.path().join("-").exists(), "a file named - was made");
    let several = common::run(&["run", "cl-finish", "--all-variants", "--record", "-"]);
    assert_eq!(
        several.status.code(),
        Some(2),
        "{}",
        common::stderr(&several)
    );
}
