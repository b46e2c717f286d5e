//! `gpulab watch --json` from the tests, and what every watch report must hold.

use std::process::Output;

use serde_json::Value;

use super::{gpulab, stderr, stdout, temp_dir};

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
