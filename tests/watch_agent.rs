//! The agent inside a watched program does it no harm and invents nothing
//! (issue #27, items 1-3), on PoCL: it never writes into the program's files,
//! never kills it with SIGPIPE, never drops an object record, and what a
//! process did in its last moments (a crash, `_exit`, a default signal) arrives.
//! Each program checks itself and prints what it did; the test compares.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use crate::common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::watch::{assert_complete, count, counts, kind, program, watch_json};
use common::{device_lock, gpulab, stderr};
use serde_json::Value;

fn harms(test: &str) -> Option<(tempfile::TempDir, String)> {
    let (dir, exe) = program(test, "harms")?;
    Some((dir, exe.to_string_lossy().into_owned()))
}

fn alive_at_exit(report: &Value) -> u64 {
    report["kinds"].as_array().map_or(0, |ks| {
        ks.iter().filter_map(|k| k["alive_at_exit"].as_u64()).sum()
    })
}

/// Item 1: a process that closes the descriptors it inherited and opens its
/// own files (Python's subprocess does, and so does `exec 6>file` in a shell)
/// finds only its own bytes in them, and its calls are still seen.
#[test]
fn a_program_that_reuses_descriptors_finds_only_its_own_bytes_in_its_files() {
    let test = "a_program_that_reuses_descriptors_finds_only_its_own_bytes_in_its_files";
    let Some((dir, exe)) = harms(test) else {
        return;
    };
    let _device = device_lock();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).expect("data folder");
    let (out, report) = watch_json(&[&exe, "fds", &data.to_string_lossy()]);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("files=clean"), "{text}");
    assert_complete(&report, Some("opencl"));
    let said = counts(&text, "harms: fds");
    for name in ["context", "buffer"] {
        let k = kind(&report, name);
        assert_eq!(k["created"], count(&said, &format!("{name}s")), "{k}");
        assert_eq!(k["released"], k["created"], "{k}");
    }
}

/// Item 3: a tight loop of retain+release pairs outruns any pipe; calls may be
/// dropped (counted), but no object record is, so nothing the program released
/// is reported alive at exit.
#[test]
fn a_million_retain_release_pairs_invent_no_leak() {
    let test = "a_million_retain_release_pairs_invent_no_leak";
    let Some((_dir, exe)) = harms(test) else {
        return;
    };
    let _device = device_lock();
    // Three rounds: the lost records of the old agent hit the last release
    // in about half the runs.
    for round in 0..3 {
        let (out, report) = watch_json(&[&exe, "pairs", "1000000"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(alive_at_exit(&report), 0, "round {round}: {report:#}");
        assert!(
            report["alive_at_exit"]
                .as_array()
                .is_some_and(Vec::is_empty),
            "round {round}: {report:#}"
        );
        for name in ["context", "buffer"] {
            let k = kind(&report, name);
            assert_eq!(
                (&k["created"], &k["released"]),
                (&1.into(), &1.into()),
                "{k}"
            );
        }
        for p in report["processes"].as_array().expect("processes") {
            // Everything sent arrived, the last record included: what was not
            // sent is counted, never silently missing.
            assert_eq!(p["records"], p["received"], "{p}");
        }
    }
}

/// Item 3: a program that releases everything and then crashes gets nothing
/// listed as never released, and its exit status is its own.
#[test]
fn a_crash_after_releasing_everything_is_not_a_leak() {
    let test = "a_crash_after_releasing_everything_is_not_a_leak";
    let Some((_dir, exe)) = harms(test) else {
        return;
    };
    let _device = device_lock();
    for _ in 0..3 {
        let (out, report) = watch_json(&[&exe, "segv"]);
        // 128 + SIGSEGV, as the shell reports the program's own death.
        assert_eq!(out.status.code(), Some(139), "{}", stderr(&out));
        assert_eq!(alive_at_exit(&report), 0, "{report:#}");
        assert_complete(&report, Some("opencl"));
        let p = &report["processes"][0];
        assert_eq!(p["signal"], 11, "the last record names the signal: {p}");
        for name in ["context", "queue", "buffer"] {
            assert_eq!(kind(&report, name)["released"], 1, "{report:#}");
        }
    }
}

/// Item 3: what a crashing program leaked in its last milliseconds arrives.
#[test]
fn a_crash_right_after_a_leak_reports_the_leak() {
    let test = "a_crash_right_after_a_leak_reports_the_leak";
    let Some((_dir, exe)) = harms(test) else {
        return;
    };
    let _device = device_lock();
    let (out, report) = watch_json(&[&exe, "segv-leak"]);
    assert_eq!(out.status.code(), Some(139), "{}", stderr(&out));
    assert_complete(&report, Some("opencl"));
    let buffer = kind(&report, "buffer");
    assert_eq!(buffer["alive_at_exit"], 1, "{report:#}");
    assert_eq!(buffer["alive_bytes"], 16 << 20, "{report:#}");
    assert_eq!(kind(&report, "context")["alive_at_exit"], 1, "{report:#}");
    // Certain: every record of the process arrived.
    let groups = report["alive_at_exit"].as_array().expect("groups");
    assert!(
        groups.iter().all(|g| g["uncertain"].is_null()),
        "{report:#}"
    );
}

/// Item 3: children forked without exec that leave with `_exit` (which runs no
/// exit handler) still send every record.
#[test]
fn children_that_leave_with_underscore_exit_send_every_record() {
    let test = "children_that_leave_with_underscore_exit_send_every_record";
    let Some((_dir, exe)) = harms(test) else {
        return;
    };
    let _device = device_lock();
    let (out, report) = watch_json(&[&exe, "forks", "50"]);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_complete(&report, Some("opencl"));
    let said = counts(&text, "harms: forks");
    assert_eq!(report["processes"].as_array().map(Vec::len), Some(51));
    // What the children made, as they say (a driver may refuse in a forked
    // child: NVIDIA's OpenCL does, and then they made nothing).
    for name in ["context", "buffer"] {
        let made = count(&said, &format!("{name}s"));
        let row = report["kinds"]
            .as_array()
            .and_then(|ks| ks.iter().find(|k| k["kind"] == name));
        let (created, released) = row.map_or((0, 0), |k| {
            (
                k["created"].as_u64().unwrap_or(0),
                k["released"].as_u64().unwrap_or(0),
            )
        });
        assert_eq!((created, released), (made, made), "{name}: {report:#}");
    }
}

/// A program that dies of a signal it left at its default action sends its
/// last record first, and dies of that signal.
#[test]
fn a_default_sigterm_still_ends_the_program_and_its_records_arrive() {
    let test = "a_default_sigterm_still_ends_the_program_and_its_records_arrive";
    let Some((_dir, exe)) = harms(test) else {
        return;
    };
    let _device = device_lock();
    let (out, report) = watch_json(&[&exe, "term"]);
    assert_eq!(out.status.code(), Some(143), "{}", stderr(&out));
    assert_complete(&report, Some("opencl"));
    assert_eq!(report["processes"][0]["signal"], 15);
    assert_eq!(alive_at_exit(&report), 0, "{report:#}");
}

/// Item 2: gpulab killed with SIGKILL mid-run: the program, which keeps
/// calling OpenCL, must not die of SIGPIPE; it finishes as it would have.
#[test]
fn the_program_outlives_a_killed_gpulab() {
    let test = "the_program_outlives_a_killed_gpulab";
    let Some((dir, exe)) = harms(test) else {
        return;
    };
    let _device = device_lock();
    let marker = dir.path().join("done");
    let status = dir.path().join("status");
    // The shell reports the program's own status; it is the watched command.
    let script = format!(
        "'{exe}' spin 1500 '{}'; echo $? > '{}'",
        marker.display(),
        status.display()
    );
    let mut watch = gpulab()
        .args(["watch", "--json", "-o"])
        .arg(dir.path().join("report.json"))
        .args(["--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("gpulab starts");
    std::thread::sleep(Duration::from_millis(500));
    watch.kill().expect("SIGKILL to gpulab");
    let _ = watch.wait();
    let until = Instant::now() + Duration::from_secs(60);
    while !status.exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    let code = std::fs::read_to_string(&status).unwrap_or_default();
    assert_eq!(code.trim(), "0", "the program's status after gpulab died");
    let done = std::fs::read_to_string(&marker).unwrap_or_default();
    assert!(done.starts_with("done "), "{done:?}");
}

/// A process of the program that points the agent's variable at a file of
/// its own, with that file's very device and inode and the region's size,
/// gets nothing written into it: the agent writes only into memory that holds
/// the region's header and the nonce gpulab named.
#[test]
fn a_forged_ring_variable_is_never_written() {
    let test = "a_forged_ring_variable_is_never_written";
    let Some((dir, exe)) = harms(test) else {
        return;
    };
    let _device = device_lock();
    let file = dir.path().join("victim.bin");
    std::fs::write(&file, "victim\n").expect("write");
    let script = format!(
        "truncate -s 200M '{f}' && \
         GPULAB_AGENT_RING=\"$(stat -c %d:%i '{f}'):ff:{f}\" '{exe}' pairs 10 && \
         truncate -s 7 '{f}'",
        f = file.display()
    );
    let (out, _report) = watch_json(&["sh", "-c", &script]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(&file).unwrap_or_default(),
        "victim\n"
    );
}

/// Builds `tests/watch/{name}.c` as a shared library at `out`.
fn shared_library(name: &str, out: &std::path::Path, extra: &[&str]) {
    let built = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(out)
        .arg(common::repo_file(&format!("tests/watch/{name}.c")))
        .args(extra)
        .output()
        .expect("cc starts");
    assert!(built.status.success(), "cc {name}: {}", stderr(&built));
}

/// #44: where the program's own OpenCL loader cannot load layers (CUDA's, on
/// the H200's host), gpulab preloads one that can, which finds the ICDs its
/// own way (ocl-icd reads no `OCL_ICD_FILENAMES`): before, a program that
/// takes the first platform ran on another device watched than bare. A loader
/// without layers that reads `OCL_ICD_FILENAMES` (`plain_loader.c`) and a
/// second ICD (`second_icd.c`) make every order a loader can give; in each,
/// the program prints the same platforms, in the same order, the same signal
/// dispositions right after (ocl-icd's sorting by devices started PoCL, which
/// installs handlers: on the H200's host a program on NVIDIA's OpenCL got
/// five), and makes its buffer on the same device watched as bare, and the
/// buffer is seen.
#[test]
fn a_program_sees_its_own_loaders_platforms_in_its_order_when_gpulab_preloads_another() {
    let test = "a_program_sees_its_own_loaders_platforms_in_its_order_when_gpulab_preloads_another";
    let Some((dir, exe)) = program(test, "platforms") else {
        return;
    };
    let lib = dir.path().join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    shared_library(
        "plain_loader",
        &lib.join("libOpenCL.so.1"),
        &["-Wl,-soname,libOpenCL.so.1", "-ldl"],
    );
    let second = dir.path().join("second.so");
    shared_library("second_icd", &second, &[]);
    let only_second = dir.path().join("vendors");
    std::fs::create_dir_all(&only_second).unwrap();
    std::fs::write(
        only_second.join("second.icd"),
        format!("{}\n", second.display()),
    )
    .unwrap();
    let second = second.display().to_string();
    let cases: [(&str, Option<String>, Option<&std::path::Path>); 5] = [
        ("the vendors folder alone", None, None),
        ("the second ICD first", Some(second.clone()), None),
        ("PoCL twice", Some(format!("libpocl.so.2:{second}")), None),
        (
            "a vendors folder of the user's",
            Some("libpocl.so.2".into()),
            Some(&only_second),
        ),
        (
            "the second ICD three times",
            Some(format!("{second}:{second}:libpocl.so.2")),
            Some(&only_second),
        ),
    ];
    for (case, filenames, vendors) in cases {
        let set = |cmd: &mut std::process::Command| {
            cmd.env("LD_LIBRARY_PATH", &lib)
                .env_remove("OCL_ICD_FILENAMES")
                .env_remove("OCL_ICD_VENDORS");
            if let Some(f) = &filenames {
                cmd.env("OCL_ICD_FILENAMES", f);
            }
            if let Some(v) = vendors {
                cmd.env("OCL_ICD_VENDORS", v);
            }
        };
        let mut bare = std::process::Command::new(&exe);
        set(&mut bare);
        let bare = bare.output().expect("the program starts");
        let bare_out = String::from_utf8_lossy(&bare.stdout).into_owned();
        assert!(bare.status.success(), "{case}: bare: {}", stderr(&bare));
        assert!(
            bare_out.contains("made a buffer on platform"),
            "{case}: {bare_out}"
        );

        let file = dir.path().join("report.json");
        let mut watched = gpulab();
        watched
            .args(["watch", "--json", "--output"])
            .arg(&file)
            .arg("--")
            .arg(&exe);
        set(&mut watched);
        let watched = watched.output().expect("gpulab starts");
        let report: Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap_or_default())
                .unwrap_or_else(|e| panic!("{case}: no report ({e}): {}", stderr(&watched)));
        assert_eq!(
            String::from_utf8_lossy(&watched.stdout),
            bare_out,
            "{case}: the program saw other platforms watched; report: {report:#}"
        );
        let said = report.to_string();
        assert!(
            said.contains("cannot load layers"),
            "{case}: not preloaded: {said}"
        );
        assert!(said.contains("in its order"), "{case}: {said}");
        assert!(
            !said.contains("may have taken another platform"),
            "{case}: {said}"
        );
        assert_eq!(kind(&report, "buffer")["created"], 1, "{case}: {report:#}");
        assert_complete(&report, Some("opencl"));
    }
}

/// #44: gpulab kept every object the program ever made, about 0.5 KB each
/// (311 MB after 600k buffers, 163 MB after 300k on PoCL): now what the
/// program is done with is folded into counts, and gpulab's memory follows
/// what is alive. 300,010 buffers made, 10 never released: the report says
/// exactly that, and gpulab stays under 100 MiB (52 MiB at 600k, release).
#[test]
fn gpulab_memory_follows_what_is_alive_however_many_objects_were_made() {
    let test = "gpulab_memory_follows_what_is_alive_however_many_objects_were_made";
    let Some((dir, exe)) = program(test, "thread_churn") else {
        return;
    };
    let _device = device_lock();
    let file = dir.path().join("report.json");
    let child = gpulab()
        .args(["watch", "--json", "--output"])
        .arg(&file)
        .arg("--")
        .arg(&exe)
        .args(["2", "150000", "5"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gpulab starts");
    let peak = common::watch::peak_rss(&child, Duration::from_secs(600));
    let out = child.wait_with_output().expect("gpulab ends");
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap_or_default())
        .expect("a report");
    let buffers = kind(&report, "buffer");
    assert_eq!(buffers["created"], 300_010, "{buffers}");
    assert_eq!(buffers["alive_at_exit"], 10, "{buffers}");
    assert!(peak.own_kib < 100 << 10, "gpulab peaked at {peak}");
}
