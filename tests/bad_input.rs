//! Bad input gets a clear message and the right exit status; nothing panics.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use crate::common;

#[test]
fn an_unknown_lab_exits_2_with_a_suggestion() {
    let out = common::run(&["run", "cl-finsh"]);
    assert_eq!(out.status.code(), Some(2));
    let err = common::stderr(&out);
    assert!(err.contains("unknown lab `cl-finsh`"), "{err}");
    assert!(err.contains("cl-finish"), "{err}");
    assert!(!err.contains("panicked"));
}

#[test]
fn a_bad_param_is_refused_before_anything_runs() {
    for (param, needle) in [
        ("size_mib=999999", "size_mib"),
        ("size_mb=64", "size_mib"),
        ("size_mib", "="),
        ("size_mib=lots", "size_mib"),
    ] {
        let out = common::run(&["run", "cl-premature-release", "--param", param]);
        assert_eq!(out.status.code(), Some(2), "{param}");
        let err = common::stderr(&out);
        assert!(err.contains(needle), "{param}: {err}");
        assert!(!err.contains("panicked"), "{param}: {err}");
    }
}

#[test]
fn an_unknown_variant_names_the_known_ones() {
    let out = common::run(&["run", "cl-finish", "--variant", "finnish"]);
    assert_eq!(out.status.code(), Some(2));
    let err = common::stderr(&out);
    assert!(
        err.contains("no-wait") && err.contains("did you mean `finish`"),
        "{err}"
    );
}

/// Two variants with a mistake each: `check` names both in one pass, and a
/// command that only skips the file says there is more than the first.
#[test]
fn check_reports_every_mistake_of_a_file_in_one_pass() {
    let dir = common::temp_dir();
    let file = dir.path().join("two.toml");
    let text = std::fs::read_to_string(common::repo_file("labs/cl-finish.toml"))
        .unwrap()
        .replace(
            "clFinish(q)                      # name: wait",
            "clFinsh(q)",
        )
        .replace(
            "clEnqueueReadBuffer(q, buf, CL_TRUE)                 # name: wait",
            "clEnqueueReadBufer(q, buf, CL_TRUE)",
        );
    std::fs::write(&file, text).unwrap();
    let out = common::run(&["check", &file.display().to_string()]);
    assert_eq!(out.status.code(), Some(2));
    let err = common::stderr(&out);
    assert!(
        err.contains("two.toml:43:1: unknown call `clFinsh`"),
        "{err}"
    );
    assert!(
        err.contains("two.toml:82:1: unknown call `clEnqueueReadBufer`"),
        "{err}"
    );
    let list = common::run(&["--labs", &dir.path().display().to_string(), "list"]);
    let said = common::stderr(&list);
    assert!(
        said.contains("(and 1 more mistake: `gpulab check"),
        "{said}"
    );
}

#[test]
fn check_points_at_the_mistake() {
    let dir = common::temp_dir();
    let file = dir.path().join("typo.toml");
    let text = std::fs::read_to_string(common::repo_file("labs/cl-finish.toml"))
        .unwrap()
        .replace(
            "clFinish(q)                      # name: wait",
            "clFinsh(q)                      # name: wait",
        );
    std::fs::write(&file, text).unwrap();
    let out = common::run(&["check", &file.display().to_string()]);
    assert_eq!(out.status.code(), Some(2));
    let err = common::stderr(&out);
    assert!(err.contains("typo.toml:43:1:"), "{err}");
    assert!(err.contains("clFinish"), "{err}");
    let ok = common::run(&[
        "check",
        &common::repo_file("labs/cl-finish.toml")
            .display()
            .to_string(),
    ]);
    assert_eq!(ok.status.code(), Some(0), "{}", common::stderr(&ok));
}

#[test]
fn no_opencl_platform_is_a_clear_error_and_doctor_explains() {
    let empty = common::temp_dir();
    let env = [
        ("OCL_ICD_VENDORS", empty.path().display().to_string()),
        ("OCL_ICD_FILENAMES", String::new()),
    ];
    let out = common::gpulab()
        .args(["run", "cl-finish"])
        .envs(env.clone())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", common::stderr(&out));
    assert!(common::stderr(&out).contains("gpulab doctor"));
    let doc = common::gpulab()
        .args(["doctor"])
        .envs(env)
        .output()
        .unwrap();
    // Without OpenCL, doctor exits 3 as `run` did, unless CUDA can run here.
    let text = common::stdout(&doc);
    let nothing = text.contains("nothing here can run a lab");
    assert_eq!(
        doc.status.code(),
        Some(if nothing { 3 } else { 0 }),
        "{text}"
    );
    assert!(text.contains("OpenCL"), "{text}");
    assert!(!common::stderr(&doc).contains("panicked"));
}

#[test]
fn list_shows_every_lab_in_text_and_json() {
    let out = common::run(&["list"]);
    assert_eq!(out.status.code(), Some(0));
    let text = common::stdout(&out);
    for id in [
        "cl-premature-release",
        "cl-finish",
        "cl-event-wait",
        "cl-forgotten-events",
    ] {
        assert!(text.contains(id), "{text}");
    }
    let json = common::run(&["list", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(v["labs"].as_array().is_some_and(|a| a.len() >= 4));
}

#[test]
fn a_corrupt_recording_names_the_line() {
    let dir = common::temp_dir();
    let file = dir.path().join("bad.jsonl");
    std::fs::write(&file, "{\"type\":\"meta\",\"data\":{}}\nnot json\n").unwrap();
    let out = common::run(&["report", &file.display().to_string()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        common::stderr(&out).contains("line 1"),
        "{}",
        common::stderr(&out)
    );
}

/// Asking for a lab whose file in `--labs` has mistakes shows those mistakes (the
/// file and the place), not "unknown lab".
#[test]
fn running_a_lab_whose_file_has_mistakes_shows_them() {
    let dir = common::lab_with_a_mistake();
    let labs = dir.path().display().to_string();
    let out = common::run(&["--labs", &labs, "run", "my-finish"]);
    assert_eq!(out.status.code(), Some(2));
    let err = common::stderr(&out);
    assert!(!err.contains("unknown lab"), "{err}");
    assert!(
        err.contains("my-finish") && err.contains("mine.toml:"),
        "{err}"
    );
    assert!(err.contains("clFinish"), "{err}");
}

/// A `--labs` folder that is not there is an error for every command, not a
/// warning before running or listing something else.
#[test]
fn a_missing_labs_folder_is_an_error_for_every_command() {
    let dir = common::temp_dir();
    let missing = dir.path().join("nowhere").display().to_string();
    for args in [
        vec!["list"],
        vec!["run", "cl-finish"],
        vec!["check", "labs/cl-finish.toml"],
    ] {
        let mut all = vec!["--labs", missing.as_str()];
        all.extend(args.iter().copied());
        let out = common::run(&all);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = common::stderr(&out);
        assert!(
            err.contains("nowhere") && err.contains("no such folder"),
            "{args:?}: {err}"
        );
    }
}
