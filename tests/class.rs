//! Predict, then observe, as a class (#49): `gpulab run --predict` records
//! each prediction beside the verdict (report and recording), and `gpulab
//! class` turns several students' recordings into one table, each
//! prediction judged by its own run's verdict, a copy counted once.

use crate::common;

use serde_json::Value;

/// A student's run of `cl-finish` [no-wait] on PoCL, recorded, with
/// `predict`.
fn student(dir: &std::path::Path, name: &str, predict: &str) -> (Value, std::path::PathBuf) {
    let file = dir.join(format!("{name}.jsonl"));
    let out = common::run(&[
        "run",
        "cl-finish",
        "--variant",
        "no-wait",
        "--param",
        "kernel_ms=20",
        "--param",
        "size_mib=4",
        "--predict",
        predict,
        "--json",
        "--record",
        &file.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    (report["runs"][0].clone(), file)
}

/// The verdict a run's report gave `claim`.
fn verdict(run: &Value, claim: &str) -> String {
    run["claims"]
        .as_array()
        .expect("claims")
        .iter()
        .find(|c| c["name"] == claim)
        .and_then(|c| c["verdict"].as_str())
        .unwrap_or_else(|| panic!("no {claim}: {run:#}"))
        .to_string()
}

#[test]
fn predictions_are_recorded_beside_the_verdicts_and_a_class_table_judges_each_by_its_run() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("predictions_are_recorded_beside_the_verdicts") {
        return;
    }
    let dir = common::temp_dir();
    let (a, a_file) = student(
        dir.path(),
        "a",
        "host-waits=holds,kernel-took-its-time=not_sure",
    );
    let (b, b_file) = student(dir.path(), "b", "host-waits=does_not_hold");
    assert_eq!(a["predicted"]["host-waits"], "holds", "{a:#}");
    assert_eq!(a["predicted"]["kernel-took-its-time"], "not_sure", "{a:#}");
    assert_eq!(b["predicted"]["host-waits"], "does_not_hold", "{b:#}");
    // In the recording, after its header and before its first line.
    let text = std::fs::read_to_string(&a_file).expect("recording");
    let kinds: Vec<String> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|e| e["type"].as_str().map(str::to_string))
        .collect();
    let first_prediction = kinds
        .iter()
        .position(|k| k == "prediction")
        .expect("predicted");
    assert!(first_prediction >= 1 && kinds[..first_prediction].iter().all(|k| k == "meta"));
    assert!(kinds[first_prediction..].contains(&"call".to_string()));

    // The class: each prediction judged by its own run's verdict (the
    // device's, measured: not the lesson's), a copy of `a` counted once.
    let copy = dir.path().join("copies");
    std::fs::create_dir(&copy).expect("folder");
    std::fs::copy(&a_file, copy.join("a-again.jsonl")).expect("copy");
    let out_dir = dir.path().join("class");
    let out = common::run(&[
        "class",
        &a_file.display().to_string(),
        &b_file.display().to_string(),
        &copy.display().to_string(),
        "-o",
        &out_dir.display().to_string(),
        "--json",
    ]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let class: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(class["kind"], "class");
    assert_eq!(
        (class["runs"].as_u64(), class["predicting_runs"].as_u64()),
        (Some(2), Some(2))
    );
    let aside = class["set_aside"].as_array().expect("set aside");
    assert_eq!(aside.len(), 1, "{class:#}");
    assert!(
        aside[0]["why"]
            .as_str()
            .is_some_and(|w| w.contains("a.jsonl")),
        "{class:#}"
    );
    let row = class["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["claim"] == "host-waits")
        .expect("host-waits");
    let right = [(&a, "holds"), (&b, "does_not_hold")]
        .iter()
        .filter(|(run, p)| verdict(run, "host-waits") == *p)
        .count() as u64;
    let judged = [&a, &b]
        .iter()
        .filter(|run| verdict(run, "host-waits") != "inconclusive")
        .count() as u64;
    assert_eq!(
        (row["right"].as_u64(), row["judged"].as_u64()),
        (Some(right), Some(judged))
    );
    assert_eq!(row["predicted"]["holds"], 1);
    assert_eq!(row["predicted"]["does_not_hold"], 1);
    for name in ["class.json", "class.md", "class.html"] {
        assert!(out_dir.join(name).is_file(), "{name}");
    }
    let md = std::fs::read_to_string(out_dir.join("class.md")).expect("class.md");
    assert!(md.contains("cl-finish · no-wait · host-waits"), "{md}");

    // A claim the lab does not have is refused, naming those it has.
    let out = common::run(&["run", "cl-finish", "--predict", "host-wait=holds"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        common::stderr(&out).contains("its claims there: host-waits"),
        "{}",
        common::stderr(&out)
    );
}

/// Four busy loops on two cores while `cl-finish` [finish] ran on PoCL
/// (`tests/fixtures/loaded/`): the claims that read a time are inconclusive,
/// with the load the parent measured and the kernel's figures as the reason,
/// so the class table counts nobody right or wrong on them.
#[test]
fn a_run_the_load_decided_leaves_its_timing_claims_inconclusive_and_judges_nobody() {
    let file = common::repo_file("tests/fixtures/loaded/pocl--cl-finish--finish.jsonl");
    let out = common::run(&["report", "--json", &file.display().to_string()]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let run = &report["runs"][0];
    assert_eq!(run["load"]["loaded"], true, "{run:#}");
    assert!(run["load"]["cpu_waiting"].as_f64() > Some(0.5), "{run:#}");
    for claim in ["host-waits", "kernel-took-its-time"] {
        assert_eq!(verdict(run, claim), "inconclusive", "{run:#}");
    }
    let why = run["claims"][0]["reason"].as_str().unwrap_or_default();
    assert!(
        why.starts_with("the machine was loaded") && why.contains("of the 200 ms asked"),
        "{why}"
    );
    let out = common::run(&["class", &file.display().to_string(), "--json"]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let class: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    for row in class["rows"].as_array().expect("rows") {
        assert_eq!(row["judged"], 0, "{row:#}");
    }
}
