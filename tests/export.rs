//! Chrome trace export, checked structurally on real recordings: every event has
//! the fields the format requires, timestamps never go back, every async begin has
//! its end, and the tracks are the ones the run had.

mod common;

use std::collections::HashMap;

use serde_json::Value;

fn export(fixture: &str) -> Value {
    let dir = common::temp_dir();
    let out = dir.path().join("trace.json");
    let r = common::run(&[
        "export",
        &common::repo_file(&format!("tests/fixtures/recordings/{fixture}"))
            .display()
            .to_string(),
        "--chrome",
        &out.display().to_string(),
    ]);
    assert_eq!(r.status.code(), Some(0), "{}", common::stderr(&r));
    serde_json::from_str(&std::fs::read_to_string(out).unwrap()).expect("valid JSON")
}

#[test]
fn chrome_traces_are_well_formed() {
    for fixture in [
        "h100-opencl--cl-premature-release--release-then-finish.jsonl",
        "h100-opencl--cl-forgotten-events--forgotten.jsonl",
        "pocl--cl-finish--no-wait.jsonl",
    ] {
        let doc = export(fixture);
        let events = doc["traceEvents"].as_array().expect("traceEvents");
        let mut last_ts = f64::MIN;
        let mut open: HashMap<(String, String), i32> = HashMap::new();
        for e in events {
            let ph = e["ph"].as_str().expect("ph");
            assert!(e["name"].is_string(), "{fixture}: {e}");
            assert!(e["pid"].is_u64(), "{fixture}: {e}");
            if ph == "M" {
                continue;
            }
            let ts = e["ts"].as_f64().expect("ts");
            assert!(ts >= last_ts, "{fixture}: time went back at {e}");
            last_ts = ts;
            match ph {
                "X" => assert!(
                    e["dur"].as_f64().is_some_and(|d| d >= 0.0),
                    "{fixture}: {e}"
                ),
                "b" | "e" => {
                    let key = (
                        e["cat"].as_str().unwrap_or("").to_string(),
                        e["id"].as_str().unwrap_or("").to_string(),
                    );
                    *open.entry(key).or_default() += if ph == "b" { 1 } else { -1 };
                }
                "C" => assert!(e["args"]["MiB"].is_number(), "{fixture}: {e}"),
                "i" => {}
                other => panic!("{fixture}: unexpected phase {other}"),
            }
        }
        assert!(
            open.values().all(|n| *n == 0),
            "{fixture}: unmatched async slices {open:?}"
        );
        let names: Vec<&str> = events
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
            .filter_map(|e| e["args"]["name"].as_str())
            .collect();
        assert!(
            names.contains(&"host") && names.contains(&"queue q"),
            "{fixture}: {names:?}"
        );
        assert!(
            events.iter().any(|e| e["cat"] == "device"),
            "{fixture}: no device spans"
        );
    }
}

#[test]
fn a_forgotten_event_shows_its_context_held_by_the_driver() {
    let doc = export("h100-opencl--cl-forgotten-events--forgotten.jsonl");
    let held = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "b" && e["name"] == "context ctx")
        .filter(|e| {
            e["cat"]
                .as_str()
                .is_some_and(|c| c.starts_with("held by the driver (never"))
        })
        .count();
    assert_eq!(held, 20);
}
