//! Claims that compare two variants, on the real device (PoCL in CI): judged by
//! `run --all-variants` from each variant's own measurements, carried by the
//! recordings, and inconclusive when the other variant did not run.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use crate::common;

use serde_json::Value;

const PARAMS: [&str; 4] = ["--param", "kernel_ms=40", "--param", "size_mib=4"];

fn run_cross(extra: &[&str]) -> Value {
    run_cross_saying(extra).0
}

/// The report, and what gpulab said on stderr.
fn run_cross_saying(extra: &[&str]) -> (Value, String) {
    let labs = common::repo_file("tests/labs/cross");
    let out = common::gpulab()
        .arg("--labs")
        .arg(&labs)
        .args(["run", "cl-cross", "--json"])
        .args(PARAMS)
        .args(extra)
        .output()
        .expect("gpulab starts");
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
    let report = serde_json::from_slice(&out.stdout).expect("a JSON report");
    (report, common::stderr(&out))
}

fn claim<'a>(summary: &'a Value, name: &str) -> &'a Value {
    summary["claims"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no claim {name}: {summary:#}"))
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn all_variants_judges_a_comparison_from_both_variants_own_numbers() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("all_variants_judges_a_comparison") {
        return;
    }
    let dir = common::temp_dir();
    let record = dir.path().join("cross.jsonl");
    let record_s = record.display().to_string();
    let (report, said) = run_cross_saying(&["--all-variants", "--record", &record_s]);
    // The file names gpulab made from the one given are said, one per variant.
    for v in ["finish", "flush"] {
        let file = dir.path().join(format!("cross--{v}.jsonl"));
        assert!(
            said.contains(&format!("recorded {}", file.display())),
            "{said}"
        );
    }
    let summaries = report["runs"].as_array().expect("one summary per variant");
    let of = |variant: &str| {
        summaries
            .iter()
            .find(|s| s["variant"] == variant)
            .unwrap_or_else(|| panic!("no {variant}: {report:#}"))
    };
    let (finish, flush) = (of("finish"), of("flush"));
    let wait = |s: &Value| num(&s["host_ms_by_tag"]["wait"]);
    for (home, other, name, other_name, factor) in [
        (finish, flush, "finish-waits-longer", "flush", 2.0),
        (flush, finish, "flush-is-quicker", "finish", 1.0),
    ] {
        let c = claim(home, name);
        let own = num(&c["values"]["host_ms(wait)"]);
        let theirs = num(&c["values"][format!("host_ms(wait) in variant {other_name}")]);
        // Each value is the one its own variant's report shows.
        assert_eq!(own, wait(home), "{c:#}");
        assert_eq!(theirs, wait(other), "{c:#}");
        // And the verdict is the comparison of those two numbers.
        let holds = if name == "finish-waits-longer" {
            own > factor * theirs
        } else {
            own < theirs
        };
        let want = if holds { "holds" } else { "does_not_hold" };
        if !common::load_decided(c) {
            assert_eq!(c["verdict"], want, "{c:#}");
            assert!(c["reason"].is_null(), "{c:#}");
        }
    }
    // `peak_mib` over a line is at least the memory right after it: the
    // worker's reading at the line's end is one of its readings.
    let peak = claim(finish, "peak-covers-the-end");
    assert_eq!(peak["verdict"], "holds", "{peak:#}");
    // The recording of each variant carries the verdict judged after both ran,
    // and its report gives it back as the live run did.
    let file = dir.path().join("cross--finish.jsonl");
    let out = common::run(&["report", "--json", &file.display().to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
    let replayed: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let replayed = &replayed["runs"][0];
    let live = claim(finish, "finish-waits-longer");
    assert_eq!(claim(replayed, "finish-waits-longer"), live);
    // Text, Markdown and a replay without a terminal say the same verdict,
    // with the other variant's value by its name.
    // (Inconclusive where the host's load decided it: then said so.)
    let label = match live["verdict"].as_str() {
        Some("holds") => "holds",
        Some("does_not_hold") => "does not hold",
        _ => "inconclusive",
    };
    let file_s = file.display().to_string();
    for args in [
        vec!["report", file_s.as_str()],
        vec!["report", "--markdown", file_s.as_str()],
        vec!["replay", file_s.as_str()],
    ] {
        let out = common::run(&args);
        let text = common::stdout(&out);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            common::stderr(&out)
        );
        let line = text
            .lines()
            .find(|l| l.contains("finish-waits-longer"))
            .unwrap_or_else(|| panic!("{args:?}: {text}"));
        assert!(line.contains(label), "{args:?}: {line}");
        assert!(
            text.contains("host_ms(wait) in variant flush = "),
            "{args:?}: {text}"
        );
    }
}

#[test]
fn a_comparison_without_the_other_variant_is_inconclusive_and_says_why() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("a_comparison_without_the_other_variant") {
        return;
    }
    let report = run_cross(&["--variant", "finish"]);
    let report = &report["runs"][0];
    let c = claim(report, "finish-waits-longer");
    assert_eq!(c["verdict"], "inconclusive", "{c:#}");
    let why = c["reason"].as_str().unwrap_or_default();
    assert!(
        why.starts_with("variant `flush` did not run beside this one"),
        "{why}"
    );
    // The claim over the one variant is judged as usual.
    assert_ne!(
        claim(report, "peak-covers-the-end")["verdict"],
        "inconclusive"
    );
}
