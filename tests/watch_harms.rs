//! `gpulab watch` must never harm the program it watches, nor lose or invent
//! what it reports (#27): one test per harm, each failing on the code before the
//! fix. Programs here are shell and Python one-liners: what they check is
//! gpulab's own handling (statuses, outputs, processes), not any driver.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use crate::common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{gpulab, stderr, stdout, temp_dir};
use serde_json::Value;

/// Waits for `child`, killing it after a minute (a hang is a failure, not a
/// timing figure).
fn wait(mut child: std::process::Child) -> Output {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    child.wait_with_output().expect("gpulab ends")
}

/// `gpulab watch --json -o report -- sh -c script` in the background, its
/// stdin closed and its output piped.
fn watch_shell(script: &str, report: &Path) -> std::process::Child {
    gpulab()
        .args(["watch", "--json", "-o", &report.display().to_string(), "--"])
        .args(["sh", "-c", script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gpulab starts")
}

/// Waits until `path` exists (the program got that far).
fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The pid the shell writes to `path`, once it is whole: the shell creates
/// the file before it writes the number, so the file alone is not enough.
fn pid_in(path: &Path) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.ends_with('\n')
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        assert!(
            Instant::now() < deadline,
            "{} never held a pid: {text:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn alive(pid: i32) -> bool {
    // A zombie is dead; only its parent (not this test) could reap it.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| !r.trim_start().starts_with('Z'))
    })
}

fn signal(child: &std::process::Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill {sig}");
}

fn report(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("no JSON report ({e}): {text}"))
}

#[test]
fn a_command_that_cannot_start_exits_127_or_126_like_env() {
    let out = common::run(&["watch", "--", "/nonexistent/program"]);
    assert_eq!(out.status.code(), Some(127), "{}", stderr(&out));
    assert!(stderr(&out).contains("/nonexistent/program"));
    let dir = temp_dir();
    let plain = dir.path().join("not-executable");
    std::fs::write(&plain, "#!/bin/sh\n").expect("write");
    let out = common::run(&["watch", "--", &plain.display().to_string()]);
    assert_eq!(out.status.code(), Some(126), "{}", stderr(&out));
}

#[test]
fn an_output_in_a_missing_folder_stops_gpulab_before_the_program_runs() {
    let dir = temp_dir();
    let ran = dir.path().join("ran");
    let nowhere = dir.path().join("no-such-folder").join("report.json");
    let script = format!("touch '{}'", ran.display());
    let out = common::run(&[
        "watch",
        "-o",
        &nowhere.display().to_string(),
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("cannot create"), "{}", stderr(&out));
    assert!(
        !ran.exists(),
        "the program ran although its report had nowhere to go"
    );
}

#[test]
fn a_report_or_recording_that_cannot_be_written_keeps_the_report_and_the_status() {
    if !Path::new("/dev/full").exists() {
        return;
    }
    let out = common::run(&["watch", "-o", "/dev/full", "--", "sh", "-c", "exit 7"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(7), "{err}");
    assert!(
        err.contains("cannot write the report to /dev/full"),
        "{err}"
    );
    assert!(
        err.contains("gpulab watch"),
        "the report is not on stderr: {err}"
    );

    let out = common::run(&["watch", "--record", "/dev/full", "--", "sh", "-c", "exit 5"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert!(err.contains("/dev/full is partial"), "{err}");
}

/// `ulimit -f` killed gpulab with SIGXFSZ, report and status lost.
#[test]
fn a_file_size_limit_costs_the_recording_not_gpulab() {
    let dir = temp_dir();
    let record = dir.path().join("big.jsonl");
    let exe = common::gpulab_exe();
    let exe = exe.display();
    // 1 block: the recording's first line is longer. The program writes nothing.
    // A soft limit, so gpulab can write its agent (a memory file counts too).
    let script = format!(
        "ulimit -S -f 1 && exec '{exe}' watch --record '{}' -- sh -c 'exit 3'",
        record.display()
    );
    let out = Command::new("sh")
        .args(["-c", &script])
        .output()
        .expect("sh");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("is partial"), "{err}");
}

/// A closed stdout panicked (rc 101); now gpulab stops writing quietly, and
/// `watch` still exits with the program's status.
#[test]
fn a_closed_stdout_or_stderr_ends_quietly() {
    let fixture = common::repo_file("tests/fixtures/recordings/pocl--cl-finish--no-wait.jsonl");
    for args in [
        vec!["report".to_string(), fixture.display().to_string()],
        vec!["list".into()],
        // `export … | head`: each output to `-` ends as quietly.
        vec![
            "export".into(),
            fixture.display().to_string(),
            "--chrome".into(),
            "-".into(),
        ],
        vec![
            "export".into(),
            fixture.display().to_string(),
            "--png".into(),
            "-".into(),
        ],
        vec![
            "watch".into(),
            "--".into(),
            "sh".into(),
            "-c".into(),
            "exit 4".into(),
        ],
    ] {
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        let closed = || writer.try_clone().expect("dup");
        let out = gpulab()
            .args(&args)
            .stdout(closed())
            .stderr(closed())
            .output()
            .expect("gpulab starts");
        let code = out.status.code();
        assert_ne!(code, Some(101), "{args:?} panicked");
        let want = if args[0] == "watch" { 4 } else { 141 };
        assert_eq!(code, Some(want), "{args:?}");
    }
    if Path::new("/dev/full").exists() {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let out = gpulab().arg("list").stdout(full).output().expect("gpulab");
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("cannot write to stdout"),
            "{}",
            stderr(&out)
        );
    }
}

/// `watch --json` printed its JSON into the program's stdout (and moved the
/// program's own stdout to stderr to make room): `watch --json | jq` read
/// both, or the program's output was not where the program put it.
#[test]
fn watch_json_never_enters_the_programs_stdout() {
    let out = common::run(&["watch", "--json", "--", "sh", "-c", "echo from-the-program"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "from-the-program\n",
        "stdout is the program's alone"
    );
    let err = stderr(&out);
    let start = err
        .find("{\n")
        .unwrap_or_else(|| panic!("no JSON on stderr: {err}"));
    let json: Value = serde_json::from_str(&err[start..])
        .unwrap_or_else(|e| panic!("the JSON on stderr ends it, whole ({e}): {err}"));
    assert_eq!(json["kind"], "watch");

    let dir = temp_dir();
    let file = dir.path().join("r.json");
    let out = watch_sh("echo from-the-program", &file);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "from-the-program\n");
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(json["kind"], "watch");
}

/// SIGTERM to gpulab signalled only its direct child: a program started through
/// `sh -c` ran on with parent 1, and the report said "worker crashed: killed by
/// signal 15".
#[test]
fn sigterm_stops_the_programs_whole_group_and_the_report_says_gpulab_did() {
    let dir = temp_dir();
    let (pid_file, out_file) = (dir.path().join("pid"), dir.path().join("report.json"));
    let script = format!("sleep 300 & echo $! > '{}'; wait", pid_file.display());
    let child = watch_shell(&script, &out_file);
    let grandchild = pid_in(&pid_file);
    signal(&child, "-TERM");
    let out = wait(child);
    // 128 + SIGTERM.
    assert_eq!(out.status.code(), Some(143), "{}", stderr(&out));
    let report = report(&out_file);
    assert_eq!(report["ended"], "stopped by gpulab", "{report:#}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while alive(grandchild) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !alive(grandchild),
        "the program's child {grandchild} outlived gpulab"
    );
}

/// A process of the program that left its group for a session of its own
/// (setsid, as daemons and job runners do) is stopped with the rest (#44): it
/// survived SIGTERM to gpulab.
#[test]
fn sigterm_stops_a_process_that_left_the_programs_group() {
    let dir = temp_dir();
    let (pid_file, out_file) = (dir.path().join("pid"), dir.path().join("report.json"));
    // `setsid` forks when it leads a group already; the shell waits for it.
    let script = format!(
        "setsid sh -c 'echo $$ > \"{}\"; exec sleep 300' & wait",
        pid_file.display()
    );
    let child = watch_shell(&script, &out_file);
    let escaped = pid_in(&pid_file);
    let stopped = Instant::now();
    signal(&child, "-TERM");
    let out = wait(child);
    // Order of magnitude: the escaped process would have held gpulab (and its
    // output pipes) for its whole 300 s.
    let took = stopped.elapsed();
    let survived = alive(escaped);
    if survived {
        let _ = Command::new("kill")
            .args(["-KILL", &escaped.to_string()])
            .status();
    }
    assert!(
        took < Duration::from_secs(120),
        "gpulab ended {took:?} after SIGTERM"
    );
    assert_eq!(out.status.code(), Some(143), "{}", stderr(&out));
    assert!(
        !survived,
        "the program's process {escaped} in its own session outlived gpulab"
    );
}

/// Ctrl-C reached a program in gpulab's own group from the terminal; a program
/// in a group of its own gets SIGINT from gpulab instead.
#[test]
fn sigint_to_gpulab_reaches_the_program() {
    let dir = temp_dir();
    let ready = dir.path().join("ready");
    let script = format!(
        "trap 'echo got-sigint; exit 3' INT; touch '{}'; sleep 300 & wait",
        ready.display()
    );
    let child = gpulab()
        .args(["watch", "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gpulab starts");
    wait_for(&ready);
    signal(&child, "-INT");
    let out = wait(child);
    assert!(stdout(&out).contains("got-sigint"), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("stopped by gpulab"),
        "{}",
        stderr(&out)
    );
}

/// Peak memory was the direct child's: 1.2 MiB for a shell whose children
/// held 50 MiB.
#[test]
fn memory_is_read_over_the_programs_whole_process_tree() {
    if Command::new("python3")
        .arg("-c")
        .arg("pass")
        .status()
        .is_err()
    {
        return;
    }
    let dir = temp_dir();
    let out_file = dir.path().join("report.json");
    // Four children of 32 MiB each, written so they are resident; the shell
    // itself holds about 1 MiB.
    let hold = "import time; b = b'x' * (32 << 20); time.sleep(2)";
    let script = format!("for i in 1 2 3 4; do python3 -c \"{hold}\" & done; wait");
    let out = watch_sh(&script, &out_file);
    assert!(out.status.success(), "{}", stderr(&out));
    let report = report(&out_file);
    if report["memory_source"] != "rss" {
        return; // NVML reads a GPU here, not host memory
    }
    let peak = report["peak_memory_bytes"].as_u64().unwrap_or(0);
    assert!(peak > 64 << 20, "peak {} MiB: {report:#}", peak >> 20);
}

/// A static binary got only "the agent never reported".
#[test]
fn a_static_binary_is_named_as_one() {
    let dir = temp_dir();
    let src = dir.path().join("s.c");
    let exe = dir.path().join("s");
    std::fs::write(&src, "int main(void) { return 0; }\n").expect("write");
    let built = Command::new("cc")
        .arg("-static")
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .is_ok_and(|o| o.status.success());
    if !built {
        common::say_skipped(format_args!("skipping: no static C library here"));
        return;
    }
    let out_file = dir.path().join("report.json");
    let out = common::run(&[
        "watch",
        "--json",
        "-o",
        &out_file.display().to_string(),
        "--",
        &exe.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = report(&out_file).to_string();
    assert!(text.contains("is statically linked"), "{text}");
}

/// `gpulab watch --json -o report -- sh -c script`, to its end.
fn watch_sh(script: &str, report: &Path) -> Output {
    common::run(&[
        "watch",
        "--json",
        "-o",
        &report.display().to_string(),
        "--",
        "sh",
        "-c",
        script,
    ])
}

/// A process of the program writing into the agents' memory itself, as any
/// of them can (tests/watch/ring_forge.py): `sh -c 'python3 FORGE ARGS; exit N'`.
fn forge(args: &str, exit: i32) -> String {
    let forge = common::repo_file("tests/watch/ring_forge.py");
    format!("python3 '{}' {args}; exit {exit}", forge.display())
}

/// Any process of the program can write into the agents' memory: a record
/// that is not UTF-8 must not stop the reading, a forged `meta` must not
/// replace the report's header.
#[test]
fn junk_and_forged_records_in_the_agents_memory_are_skipped_and_said_once() {
    let dir = temp_dir();
    let out_file = dir.path().join("report.json");
    let script = forge("junk", 6);
    let out = watch_sh(&script, &out_file);
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    let report = report(&out_file);
    assert_eq!(report["command"][0], "sh", "{report:#}");
    assert_eq!(report["calls"], 1, "{report:#}");
    assert_eq!(report["ended"], "exited with status 6", "{report:#}");
    let warnings = report["warnings"].to_string();
    assert!(warnings.contains("not UTF-8"), "{warnings}");
    assert!(warnings.contains("3 forged `end` events"), "{warnings}");
}

/// A process of the program that writes over its agents' memory (a header
/// that names a record longer than the ring) stops the reading of that
/// segment only: what came before arrives, the run ends as the program did,
/// and the report says the segment was written over.
#[test]
fn a_segment_written_over_is_said_and_ends_nothing_else() {
    let dir = temp_dir();
    let out_file = dir.path().join("report.json");
    let out = watch_sh(&forge("scribble", 3), &out_file);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let report = report(&out_file);
    assert_eq!(report["calls"], 1, "{report:#}");
    let warnings = report["warnings"].to_string();
    assert!(
        warnings.contains("wrote over its agent's memory"),
        "{warnings}"
    );
}

/// `watch` kept every event until the end (337 MiB at 500,000 calls): now it
/// folds and records as they come. Order of magnitude only: 300,000 calls
/// cost the old code well over 100 MiB, the new one a few tens whatever the
/// count.
#[test]
fn gpulab_memory_stays_bounded_however_many_calls_arrive() {
    let dir = temp_dir();
    let record = dir.path().join("calls.jsonl");
    let script = forge("flood 300000", 0);
    let child = gpulab()
        .args(["watch", "--record", &record.display().to_string(), "--"])
        .args(["sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gpulab starts");
    let peak = common::watch::peak_rss(&child, Duration::from_secs(300));
    let out = wait(child);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = std::fs::read_to_string(&record)
        .unwrap_or_default()
        .lines()
        .count();
    assert!(lines >= 300_000, "{lines} lines recorded");
    assert!(peak.own_kib < 100 << 10, "gpulab peaked at {peak}");
}

/// NVLink multicast stays off in the program gpulab starts (#33: on shared
/// hosts a multicast object can take the GPUs out of service), the report
/// says so, and a setting of the user's that said otherwise is named there.
#[test]
fn the_watched_program_runs_with_nvlink_multicast_off_and_is_told_what_changed() {
    let dir = temp_dir();
    let file = dir.path().join("r.json");
    let out = gpulab()
        .args(["watch", "--json", "-o"])
        .arg(&file)
        .args([
            "--",
            "sh",
            "-c",
            "echo $NCCL_NVLS_ENABLE $TORCH_SYMM_MEM_DISABLE_MULTICAST $NVSHMEM_DISABLE_NVLS",
        ])
        .env("NCCL_NVLS_ENABLE", "1")
        .env_remove("TORCH_SYMM_MEM_DISABLE_MULTICAST")
        .env_remove("NVSHMEM_DISABLE_NVLS")
        .output()
        .expect("gpulab starts");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "0 1 1\n");
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let said = json.to_string();
    assert!(said.contains("NCCL_NVLS_ENABLE=1 became"), "{json:#}");
    // Without a setting of the user's, the report still says it.
    let out = gpulab()
        .args(["watch", "--json", "-o"])
        .arg(&file)
        .args(["--", "true"])
        .env_remove("NCCL_NVLS_ENABLE")
        .output()
        .expect("gpulab starts");
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert!(
        json["notes"]
            .to_string()
            .contains("keeps NVLink multicast off"),
        "{json:#}"
    );
}
