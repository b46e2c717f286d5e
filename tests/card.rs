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

use crate::common;

use std::path::Path;

use serde_json::Value;

fn read(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `card --from` the test fixtures' recordings, into `dir/good`.
fn card_of_the_fixtures(dir: &Path) -> std::path::PathBuf {
    let good = dir.join("good");
    let fixtures = common::repo_file("tests/fixtures/recordings");
    ok(&[
        "card",
        "--from",
        &fixtures.display().to_string(),
        "-o",
        &good.display().to_string(),
    ]);
    good
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
    // The other variant's figure was read (whatever the verdict: on a loaded
    // host the load may leave it inconclusive, saying so).
    assert!(
        compared["values"]["host_ms(wait) in variant no-wait"].is_number(),
        "{compared}"
    );
    assert!(
        compared["verdict"] != "inconclusive" || common::load_decided(compared),
        "{compared}"
    );
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
    // From the matrix's folder, wherever the test runs.
    assert!(
        matrix.join(cell["recording"].as_str().unwrap()).is_file(),
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
    let good = card_of_the_fixtures(dir.path());
    let path = |p: &Path| p.display().to_string();
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

/// What a hostile card may put in a string (#44): markup, a link with a
/// scheme, a terminal escape that sets the title, a right-to-left override,
/// a table's cell separator, a backtick and a newline.
const HOSTILE: &str =
    "<script>alert(1)</script>[x](javascript:alert(5))\u{1b}]0;pwned\u{7}\u{202e}|`a\nb";

/// Every string of a card that the card still reads with, made hostile.
fn poisoned(card: &Value) -> Value {
    fn leaves(v: &Value, at: Vec<String>, out: &mut Vec<Vec<String>>) {
        match v {
            Value::String(_) => out.push(at),
            Value::Array(items) => {
                for (i, x) in items.iter().enumerate() {
                    let mut p = at.clone();
                    p.push(i.to_string());
                    leaves(x, p, out);
                }
            }
            Value::Object(map) => {
                for (k, x) in map {
                    let mut p = at.clone();
                    p.push(k.clone());
                    leaves(x, p, out);
                }
            }
            _ => {}
        }
    }
    fn at<'a>(v: &'a mut Value, path: &[String]) -> &'a mut Value {
        path.iter().fold(v, |v, k| match v {
            Value::Array(items) => &mut items[k.parse::<usize>().unwrap()],
            other => &mut other[k.as_str()],
        })
    }
    let mut paths = Vec::new();
    leaves(card, Vec::new(), &mut paths);
    let mut out = card.clone();
    let mut taken = 0;
    for path in paths {
        if path.first().is_some_and(|k| k == "kind") {
            continue;
        }
        let payload = if path.last().is_some_and(|k| k == "recording") {
            "javascript:alert(5)".to_string()
        } else {
            HOSTILE.to_string()
        };
        let before = std::mem::replace(at(&mut out, &path), Value::String(payload));
        if serde_json::from_value::<gpulab::card::Card>(out.clone()).is_err() {
            *at(&mut out, &path) = before;
        } else {
            taken += 1;
        }
    }
    assert!(taken > 20, "only {taken} strings took the payload");
    out
}

/// Markdown `text` less its code spans (a run of backticks to the next run of
/// as many), which CommonMark shows literally.
fn without_code_spans(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let run = |at: usize| chars[at..].iter().take_while(|c| **c == '`').count();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' && i + 1 < chars.len() {
            // An escaped character is text, a backtick too.
            out.push(c);
            out.push(chars[i + 1]);
            i += 2;
            continue;
        }
        if c != '`' {
            out.push(c);
            i += 1;
            continue;
        }
        let fence = run(i);
        let close = (i + fence..chars.len())
            .find(|&j| chars[j] == '`' && chars[j - 1] != '`' && run(j) == fence);
        match close {
            Some(j) => i = j + fence,
            None => {
                out.extend(&chars[i..i + fence]);
                i += fence;
            }
        }
    }
    out
}

/// A card whose every string is hostile injects nothing (#44): the matrix's
/// Markdown and page show those strings as text, make no link with a scheme,
/// and what gpulab says on the terminal acts on nothing.
#[test]
fn a_hostile_card_injects_nothing_anywhere() {
    let dir = common::temp_dir();
    let good = card_of_the_fixtures(dir.path());
    let path = |p: &Path| p.display().to_string();
    let hostile = poisoned(&read(&good.join("card.json")));
    // Beside the matrix: a recording path made relative to it is the path as
    // the card wrote it (`javascript:alert(5)` would be a link as it is).
    let matrix = dir.path().join("matrix");
    std::fs::create_dir_all(&matrix).unwrap();
    let bad = matrix.join("hostile.json");
    std::fs::write(&bad, serde_json::to_string(&hostile).unwrap()).unwrap();
    let mut newer = hostile.clone();
    newer["schema_version"] = 9.into();
    newer["gpulab_version"] = HOSTILE.into();
    let newer_file = dir.path().join("newer.json");
    std::fs::write(&newer_file, serde_json::to_string(&newer).unwrap()).unwrap();
    let out = common::run(&[
        "card",
        "merge",
        &path(&bad),
        &path(&newer_file),
        "-o",
        &path(&matrix),
    ]);
    let said = common::stderr(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("no path from the card's folder"), "{said}");
    for (what, text) in [
        ("stderr", said.clone()),
        (
            "matrix.md",
            std::fs::read_to_string(matrix.join("matrix.md")).unwrap(),
        ),
        (
            "matrix.html",
            std::fs::read_to_string(matrix.join("matrix.html")).unwrap(),
        ),
    ] {
        assert!(!text.contains('\u{1b}'), "{what}: a raw escape");
        assert!(!text.contains('\u{202e}'), "{what}: a raw U+202E");
        if what == "stderr" {
            // Markup is only text on a terminal.
            continue;
        }
        // A code span shows its text literally: only what is outside one acts.
        let text = if what == "matrix.md" {
            without_code_spans(&text)
        } else {
            text
        };
        let raw = text.lines().find(|l| l.contains("<script>alert"));
        assert!(raw.is_none(), "{what}: raw markup in {raw:?}");
        if what == "matrix.md" {
            assert!(
                !text.contains("](javascript:"),
                "{what}: a link with a scheme"
            );
        }
        assert!(
            !text.contains("href=\"javascript"),
            "{what}: a link with a scheme"
        );
    }
    // The Markdown's tables keep their shape: every row has its header's
    // number of cell separators (escaped ones are text).
    let md = std::fs::read_to_string(matrix.join("matrix.md")).unwrap();
    let seps = |line: &str| line.replace("\\|", "").matches('|').count();
    let mut header = None;
    for line in md.lines() {
        if !line.starts_with('|') {
            header = None;
            continue;
        }
        match header {
            None => header = Some(seps(line)),
            Some(n) => assert_eq!(seps(line), n, "a row out of shape: {line}"),
        }
    }
}

/// `card --from` walks only what is under its folder (#44): a link to a
/// folder above it (a circle) and a link to one elsewhere are not followed,
/// and said; one link had given 41 copies of one run, two never finished.
#[test]
fn card_from_follows_no_links() {
    let dir = common::temp_dir();
    let from = dir.path().join("from");
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(from.join("sub")).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    let one = common::repo_file("tests/fixtures/recordings/pocl--cl-finish--no-wait.jsonl");
    std::fs::copy(&one, from.join("sub/run.jsonl")).unwrap();
    std::fs::copy(&one, elsewhere.join("other.jsonl")).unwrap();
    std::os::unix::fs::symlink(&from, from.join("sub/up")).unwrap();
    std::os::unix::fs::symlink(&from, from.join("again")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, from.join("out")).unwrap();
    std::os::unix::fs::symlink(elsewhere.join("other.jsonl"), from.join("linked.jsonl")).unwrap();
    let card = dir.path().join("card");
    let path = |p: &Path| p.display().to_string();
    let said = ok(&["card", "--from", &path(&from), "-o", &path(&card)]);
    assert!(said.contains("4 link(s) not followed"), "{said}");
    let runs = read(&card.join("card.json"))["runs"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(runs, 1, "{said}");
}
