//! `gpulab card` on PoCL: every OpenCL lab and variant on every OpenCL device
//! here, recorded beside the card; `card --from` the shipped H100 recordings;
//! `card merge` of the two, and of cards it must refuse, saying why, while it
//! merges the rest.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

mod common;

use std::path::Path;

use serde_json::Value;

fn read(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn ok(args: &[&str]) -> String {
    let out = common::run(args);
    assert!(out.status.success(), "{args:?}: {}", common::stderr(&out));
    common::stderr(&out)
}

/// The chosen OpenCL labs' every variant, once per OpenCL device `doctor`
/// lists, each run recorded where the card says, the card in three formats.
#[test]
fn the_card_runs_every_opencl_lab_on_every_opencl_device() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("the_card_runs_every_opencl_lab_on_every_opencl_device") {
        return;
    }
    let dir = common::temp_dir();
    let out = dir.path().join("card");
    // Three labs (the card of every lab ran on the H200 and on PoCL 5.0 there:
    // assets/cards/nvidia-h200), one of them with variants to compare.
    let chosen = ["cl-finish", "cl-event-wait", "cl-sub-buffer"];
    let mut args = vec!["card".to_string(), "-o".into(), out.display().to_string()];
    for lab in chosen {
        args.extend(["--lab".to_string(), lab.to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let said = ok(&args);
    let labs: Value =
        serde_json::from_str(&common::stdout(&common::run(&["list", "--json"]))).unwrap();
    let variants: usize = labs["labs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["backend"] == "opencl" && chosen.contains(&l["id"].as_str().unwrap()))
        .map(|l| l["variants"].as_array().unwrap().len())
        .sum();
    let doctor: Value =
        serde_json::from_str(&common::stdout(&common::run(&["doctor", "--json"]))).unwrap();
    let devices = doctor["opencl_devices"].as_array().unwrap().len();
    let card = read(&out.join("card.json"));
    assert_eq!(card["kind"], "card");
    let runs = card["runs"].as_array().unwrap();
    assert_eq!(runs.len(), variants * devices, "{said}");
    assert_eq!(card["devices"].as_array().unwrap().len(), devices);
    assert!(
        said.contains(&format!("[{0}/{0}]", runs.len())),
        "progress: {said}"
    );
    for run in runs {
        assert_eq!(run["status"], "finished", "{run}");
        let recording = out.join(run["recording"].as_str().unwrap());
        assert!(recording.is_file(), "{}", recording.display());
        assert!(!run["claims"].as_array().unwrap().is_empty(), "{run}");
    }
    // The comparisons between variants were judged from this card's own runs.
    let finish = runs
        .iter()
        .find(|r| r["lab"] == "cl-finish" && r["variant"] == "finish")
        .unwrap();
    let compared = finish["claims"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "waiting-costs-the-kernel")
        .unwrap();
    assert_ne!(compared["verdict"], "inconclusive", "{compared}");
    let md = std::fs::read_to_string(out.join("card.md")).unwrap();
    let claims: usize = runs
        .iter()
        .map(|r| r["claims"].as_array().unwrap().len())
        .sum();
    assert_eq!(
        md.matches("](#n-").count(),
        claims,
        "a linked cell per claim"
    );
    let html = std::fs::read_to_string(out.join("card.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("</html>"));
}

/// The H100's card from its shipped recordings (no device), merged with a
/// PoCL card: the claims the two judge differently come first.
#[test]
fn the_h100_recordings_make_a_card_that_merges_with_another() {
    let dir = common::temp_dir();
    let h100 = dir.path().join("h100");
    let pocl = dir.path().join("pocl");
    let matrix = dir.path().join("matrix");
    let path = |p: &Path| p.display().to_string();
    ok(&[
        "card",
        "--from",
        &path(&common::repo_file("assets/recordings/nvidia-h100")),
        "-o",
        &path(&h100),
    ]);
    ok(&[
        "card",
        "--from",
        &path(&common::repo_file("tests/fixtures/recordings")),
        "-o",
        &path(&pocl),
    ]);
    let card = read(&h100.join("card.json"));
    let shipped = std::fs::read_dir(common::repo_file("assets/recordings/nvidia-h100"))
        .unwrap()
        .count();
    assert_eq!(card["runs"].as_array().unwrap().len(), shipped);
    ok(&[
        "card",
        "merge",
        &path(&h100),
        &path(&pocl),
        "-o",
        &path(&matrix),
    ]);
    let m = read(&matrix.join("matrix.json"));
    assert_eq!(m["kind"], "matrix");
    let columns = m["columns"].as_array().unwrap();
    assert_eq!(columns.len(), 2, "the H100 and PoCL: {columns:?}");
    let rows = m["rows"].as_array().unwrap();
    let first_same = rows.iter().position(|r| r["differs"] == false).unwrap();
    assert!(rows[..first_same].iter().all(|r| r["differs"] == true));
    assert!(rows[first_same..].iter().all(|r| r["differs"] == false));
    // A difference is one the numbers show: each side's verdict from its own run.
    for row in &rows[..first_same] {
        let verdicts: Vec<&Value> = row["cells"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| !c.is_null())
            .map(|c| &c["verdict"])
            .collect();
        assert!(
            verdicts.len() > 1 && verdicts.iter().any(|v| *v != verdicts[0]),
            "{row}"
        );
    }
    // The recordings' links reach the files from where the matrix was merged.
    let cell = rows
        .iter()
        .flat_map(|r| r["cells"].as_array().unwrap())
        .find(|c| !c.is_null())
        .unwrap();
    assert!(
        Path::new(cell["recording"].as_str().unwrap()).is_file(),
        "{cell}"
    );
    let md = std::fs::read_to_string(matrix.join("matrix.md")).unwrap();
    assert!(md.contains("## Claims whose verdicts differ"), "{md}");
}

/// A card from another schema, a truncated one, something else entirely and a
/// device two cards hold: each said, on stderr and in the matrix; the rest
/// merged, exit 0.
#[test]
fn cards_that_cannot_be_merged_are_said_and_the_rest_merged() {
    let dir = common::temp_dir();
    let good = dir.path().join("good");
    let path = |p: &Path| p.display().to_string();
    ok(&[
        "card",
        "--from",
        &path(&common::repo_file("tests/fixtures/recordings")),
        "-o",
        &path(&good),
    ]);
    let text = std::fs::read_to_string(good.join("card.json")).unwrap();
    let newer = dir.path().join("newer.json");
    std::fs::write(
        &newer,
        text.replacen("\"schema_version\": 2", "\"schema_version\": 9", 1),
    )
    .unwrap();
    let truncated = dir.path().join("truncated.json");
    std::fs::write(&truncated, &text[..text.len() / 2]).unwrap();
    let other = dir.path().join("labs.json");
    std::fs::write(&other, common::stdout(&common::run(&["list", "--json"]))).unwrap();
    let twice = dir.path().join("twice.json");
    std::fs::write(&twice, &text).unwrap();
    let matrix = dir.path().join("matrix");
    let out = common::run(&[
        "card",
        "merge",
        &path(&good),
        &path(&newer),
        &path(&truncated),
        &path(&other),
        &path(&twice),
        "-o",
        &path(&matrix),
    ]);
    let stderr = common::stderr(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("written by a newer gpulab"), "{stderr}");
    assert!(stderr.contains("truncated"), "{stderr}");
    assert!(stderr.contains("is not a card"), "{stderr}");
    assert!(stderr.contains("left out of this card"), "{stderr}");
    let m = read(&matrix.join("matrix.json"));
    // Three files, and each device of the card given twice.
    let devices = read(&good.join("card.json"))["devices"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(
        m["problems"].as_array().unwrap().len(),
        3 + devices,
        "{m:#}"
    );
    assert!(!m["rows"].as_array().unwrap().is_empty());
    // Nothing to merge at all is a usage error.
    let out = common::run(&["card", "merge", &path(&truncated), "-o", &path(&matrix)]);
    assert_eq!(out.status.code(), Some(2), "{}", common::stderr(&out));
}
