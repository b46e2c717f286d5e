//! `docs/report-format.md`, `docs/gpulab.schema.json` and the `--json` outputs
//! agree: every key a real output has (runs on PoCL, a watched program, `list`,
//! `doctor`, and the report of every shipped recording) is documented there,
//! every documented key appears in one of them, and every output is valid
//! against the schema made strict (no key the types do not have).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

/// Documented keys no output here can have, and why; an entry covers the
/// keys below it too.
/// The public corpus's recordings, of programs nobody here wrote.
const CORPUS: [&str; 3] = [
    "tests/fixtures/corpus-h200",
    "tests/fixtures/corpus-pocl",
    "tests/fixtures/corpus-h200-x2",
];

const UNSEEN: &[(&str, &str, &str)] = &[
    (
        "watch",
        "ranks[].not_composed",
        "only a process of a program on many GPUs that held memory on more than one of them (run/views.rs's unit tests build one)",
    ),
    (
        "watch",
        "ranks[].holders.at_peak.before_api_bytes",
        "a CPU device's shares: a process is composed apart only on a host of many NVIDIA GPUs",
    ),
    (
        "watch",
        "ranks[].holders.at_peak.runtime_loaded_bytes",
        "a CPU device's shares: a process is composed apart only on a host of many NVIDIA GPUs",
    ),
    (
        "watch",
        "ranks[].holders.at_peak.own_between_calls_bytes",
        "a CPU device's shares: a process is composed apart only on a host of many NVIDIA GPUs",
    ),
    (
        "watch",
        "ranks[].holders.at_peak.managed_on_device_bytes",
        "only a rank that made managed memory (none of the two-H200 recordings does)",
    ),
    (
        "watch",
        "ranks[].holders.at_peak.managed_on_device_untold",
        "only a rank that made managed memory (none of the two-H200 recordings does)",
    ),
    (
        "watch",
        "ranks[].holders.at_peak.managed_bytes",
        "only a rank that made managed memory (none of the two-H200 recordings does)",
    ),
    (
        "watch",
        "ranks[].holders.at_exit.before_api_bytes",
        "a CPU device's shares: a process is composed apart only on a host of many NVIDIA GPUs",
    ),
    (
        "watch",
        "ranks[].holders.at_exit.runtime_loaded_bytes",
        "a CPU device's shares: a process is composed apart only on a host of many NVIDIA GPUs",
    ),
    (
        "watch",
        "ranks[].holders.at_exit.own_between_calls_bytes",
        "a CPU device's shares: a process is composed apart only on a host of many NVIDIA GPUs",
    ),
    (
        "watch",
        "ranks[].holders.at_exit.managed_on_device_bytes",
        "only a rank that made managed memory (none of the two-H200 recordings does)",
    ),
    (
        "watch",
        "ranks[].holders.at_exit.managed_on_device_untold",
        "only a rank that made managed memory (none of the two-H200 recordings does)",
    ),
    (
        "watch",
        "ranks[].holders.reserves[].kept_from_ms",
        "NVIDIA OpenCL's kept contexts: no recording of many GPUs runs OpenCL",
    ),
    (
        "watch",
        "ranks[].holders.reserves[].kept_until_ms",
        "as `kept_from_ms`",
    ),
    (
        "watch",
        "holders.at_peak.managed_on_device_untold",
        "only a program that made managed memory on a GPU another process used \
         (run/holders.rs's unit test builds one)",
    ),
    (
        "watch",
        "holders.at_exit.managed_on_device_untold",
        "as at the peak",
    ),
    (
        "out_of_memory",
        "first_to_run_out",
        "only a program of many processes that ran out (tests/watch_ranks.rs reads the \
         two-H200 torchrun recording's)",
    ),
    (
        "out_of_memory",
        "ranks",
        "only a program of many processes that ran out (tests/watch_ranks.rs)",
    ),
    (
        "watch",
        "held_by_driver_groups[].made_at",
        "only objects the driver kept whose making call's stack was taken (the shipped \
         recordings' pinned contexts were recorded without)",
    ),
    (
        "watch",
        "ran_out.backtrace[].location",
        "only a refused call in a program built with debug information (the shipped \
         out-of-memory recordings' programs have none)",
    ),
    (
        "watch",
        "processes[].conflicts",
        "only a CUDA program with its own CUPTI client on a GPU",
    ),
    (
        "watch",
        "processes[].signal",
        "only a watched process that dies of a signal (tests/watch_agent.rs has them)",
    ),
    (
        "watch",
        "alive_at_exit[].uncertain",
        "only a process whose last records never arrived: killed by SIGKILL",
    ),
    (
        "watch",
        "held_by_driver[].uncertain",
        "only a process whose last records never arrived: killed by SIGKILL",
    ),
    (
        "doctor",
        "cuda_devices[]",
        "only a machine with a CUDA device (tests/cuda_labs.rs reads it on the GPU)",
    ),
    (
        "run",
        "runs[].spans_not_listed",
        "only a run of more than 10,000 device spans (tests/big_run.rs has one)",
    ),
];

/// `(kind, path)` of every row of the document; kind `*` for the envelope's.
fn documented() -> BTreeSet<(String, String)> {
    let text = std::fs::read_to_string(common::repo_file("docs/report-format.md")).unwrap();
    let mut kind = None;
    let mut rows = BTreeSet::new();
    for line in text.lines() {
        if let Some(head) = line.strip_prefix("## ") {
            // A kind's section names it in backticks; others (the schema, what
            // changed) list no paths.
            kind = if head == "Every output" {
                Some("*".to_string())
            } else {
                head.split('`').nth(1).map(String::from)
            };
        } else if let Some(row) = line.strip_prefix("| `") {
            let path = row.split('`').next().unwrap();
            let kind = kind.clone().expect("a row under a heading");
            assert!(
                rows.insert((kind.clone(), path.to_string())),
                "{kind} {path} twice"
            );
        }
    }
    rows
}

/// Every key path in `v`, with `.*` for the entries of documented maps.
fn keys(
    v: &Value,
    path: &str,
    kind: &str,
    doc: &BTreeSet<(String, String)>,
    out: &mut BTreeSet<String>,
) {
    match v {
        Value::Object(map) => {
            let is_map = doc.contains(&(kind.to_string(), format!("{path}.*")));
            for (k, child) in map {
                let name = if is_map { "*" } else { k.as_str() };
                let p = if path.is_empty() {
                    name.to_string()
                } else {
                    format!("{path}.{name}")
                };
                out.insert(p.clone());
                keys(child, &p, kind, doc, out);
            }
        }
        Value::Array(items) => {
            for item in items {
                keys(item, &format!("{path}[]"), kind, doc, out);
            }
        }
        _ => {}
    }
}

/// The shipped schema with every object closed: each struct's schema takes
/// no key it does not list, and the envelope none its kind's body does not.
/// (The shipped one stays open: an output may gain fields.)
fn strict_schema() -> jsonschema::Validator {
    fn close(v: &mut Value, bodies: &BTreeSet<String>) {
        match v {
            Value::Object(map) => {
                map.values_mut().for_each(|c| close(c, bodies));
                if let Some(Value::Object(defs)) = map.get_mut("$defs") {
                    for (name, def) in defs.iter_mut() {
                        let open = def.get("properties").is_some()
                            && def.get("additionalProperties").is_none();
                        if open && !bodies.contains(name) {
                            def["additionalProperties"] = Value::Bool(false);
                        }
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|c| close(c, bodies)),
            _ => {}
        }
    }
    let text = std::fs::read_to_string(common::repo_file("docs/gpulab.schema.json")).unwrap();
    let mut schema: Value = serde_json::from_str(&text).unwrap();
    // The bodies sit beside the envelope's fields and their `kind`: only the
    // whole can say which keys were not evaluated.
    let bodies: BTreeSet<String> = schema["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| {
            b["$ref"]
                .as_str()?
                .strip_prefix("#/$defs/")
                .map(String::from)
        })
        .collect();
    assert_eq!(bodies.len(), 8, "a body per kind");
    close(&mut schema, &bodies);
    schema["unevaluatedProperties"] = Value::Bool(false);
    jsonschema::draft202012::new(&schema).unwrap()
}

/// Strict enough to refuse a key the types lack, at the top and deep down.
fn refuses_unknown_keys(schema: &jsonschema::Validator, outputs: &[Value]) {
    for out in outputs {
        let mut top = out.clone();
        top["unheard_of"] = Value::from(1);
        assert!(
            !schema.is_valid(&top),
            "{} took an unknown key",
            out["kind"]
        );
    }
    let mut deep = outputs[0].clone();
    deep["runs"][0]["lines"][0]["unheard_of"] = Value::from(1);
    assert!(!schema.is_valid(&deep), "a line took an unknown key");
}

fn json_of(args: &[&str]) -> Value {
    let out = common::run(args);
    assert!(out.status.success(), "{args:?}: {}", common::stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn recordings(dir: &str) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for device in std::fs::read_dir(common::repo_file(dir)).unwrap() {
        for f in std::fs::read_dir(device.unwrap().path()).unwrap() {
            files.push(f.unwrap().path());
        }
    }
    files.sort();
    files
}

/// A card of the shipped H100 recordings and one of the PoCL fixtures
/// (`card --from`), and their matrix (`card merge`).
/// A lab run with predictions, `list`, `doctor`, a watched program and its
/// out-of-memory moment.
fn first_outputs(watched: Value, oom: Value) -> Vec<Value> {
    vec![
        json_of(&[
            "run",
            "cl-finish",
            "--all-variants",
            "--json",
            "--param",
            "kernel_ms=20",
            "--param",
            "size_mib=4",
            "--predict",
            "host-waits=holds,kernel-took-its-time=not_sure,host_ms(wait)=0..1000,busy_ms(wait)=0..0.001",
        ]),
        json_of(&["list", "--json"]),
        json_of(&["doctor", "--json"]),
        watched,
        oom,
    ]
}

/// `gpulab class` of a run made with predictions, its copy, and the lab
/// recordings of the fixtures (none predicted).
fn class(dir: &Path) -> Value {
    let file = dir.join("predicted.jsonl");
    let path = |p: &Path| p.display().to_string();
    let out = common::run(&[
        "run",
        "cl-finish",
        "--variant",
        "no-wait",
        "--param",
        "kernel_ms=20",
        "--predict",
        "host-waits=does_not_hold,host_ms(wait)=0..1000",
        "--record",
        &path(&file),
    ]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    json_of(&[
        "class",
        &path(&file),
        &path(&file),
        &path(&common::repo_file("tests/fixtures/recordings")),
        &path(&common::repo_file("tests/fixtures/loaded")),
        "--json",
    ])
}

fn cards(dir: &Path) -> Vec<Value> {
    let h100 = dir.join("card-h100");
    let pocl = dir.join("card-pocl");
    let matrix = dir.join("matrix");
    let path = |p: &Path| p.display().to_string();
    vec![
        json_of(&[
            "card",
            "--from",
            &path(&common::repo_file("assets/recordings/nvidia-h100")),
            "-o",
            &path(&h100),
            "--json",
        ]),
        json_of(&[
            "card",
            "--from",
            &path(&common::repo_file("tests/fixtures/recordings")),
            "-o",
            &path(&pocl),
            "--json",
        ]),
        // A card of a run on a loaded host: its runs say the load.
        json_of(&[
            "card",
            "--from",
            &path(&common::repo_file("tests/fixtures/loaded")),
            "-o",
            &path(&dir.join("card-loaded")),
            "--json",
        ]),
        json_of(&[
            "card",
            "merge",
            &path(&h100),
            &path(&pocl),
            "-o",
            &path(&matrix),
            "--json",
        ]),
        // The loaded run's card beside the H100's: its cells say the load.
        json_of(&[
            "card",
            "merge",
            &path(&h100),
            &path(&dir.join("card-loaded")),
            "-o",
            &path(&dir.join("matrix-loaded")),
            "--json",
        ]),
    ]
}

/// The PoCL fixture with its `clCreateBuffer` failed for want of host memory, so
/// the report has its `ran_out` (a test cannot make PoCL run out).
fn ran_out_recording(dir: &Path) -> std::path::PathBuf {
    refused(
        "tests/fixtures/recordings/pocl--cl-finish--no-wait.jsonl",
        r#""code":-6,"name":"CL_OUT_OF_HOST_MEMORY""#,
        &dir.join("ran-out.jsonl"),
    )
}

/// A lab recording cut in its first `clReleaseContext` as a run that passed
/// its time limit ends: the `calling` no `call` answered, then `timed_out`,
/// so the report has its `in_flight`.
fn timed_out_recording(dir: &Path) -> std::path::PathBuf {
    use gpulab::trace::{Calling, End, EndStatus, Event, InFlight, read_events, to_line};
    let text = std::fs::read_to_string(common::repo_file(
        "tests/fixtures/recordings/pocl--cl-finish--no-wait.jsonl",
    ))
    .unwrap();
    let mut kept = Vec::new();
    for e in read_events(text.as_bytes()).unwrap() {
        if let Event::Call(c) = &e
            && c.api.as_str() == "clReleaseContext"
        {
            kept.push(Event::Calling(Calling {
                seq: c.seq,
                line: c.line,
                iter: c.iter.clone(),
                api: c.api.clone(),
                t_ns: c.begin_ns,
            }));
            kept.push(Event::End(End {
                t_ns: c.begin_ns + 30_000_000_000,
                status: EndStatus::TimedOut {
                    limit_ms: 40_000,
                    in_flight: Some(InFlight {
                        seq: c.seq,
                        line: c.line,
                        iter: c.iter.clone(),
                        api: c.api.as_str().to_string(),
                        for_ms: 30_000,
                    }),
                },
                leaked: Vec::new(),
            }));
            break;
        }
        kept.push(e);
    }
    let path = dir.join("timed-out.jsonl");
    std::fs::write(&path, kept.iter().map(to_line).collect::<String>()).unwrap();
    path
}

/// A watch recording whose first `clCreateBuffer` the driver refused, so the
/// report has its `ran_out`.
/// ...whose process also ended holding records it could not write, and while
/// a thread was writing one (its `detached` says 2 `lost`, 1 `cut`).
fn watch_ran_out_recording(dir: &Path) -> std::path::PathBuf {
    let made = refused(
        "assets/watch-recordings/nvidia-h100/forgotten-events--forgotten.jsonl",
        r#""code":-4,"name":"CL_MEM_OBJECT_ALLOCATION_FAILURE""#,
        &dir.join("watch-ran-out.jsonl"),
    );
    let text = std::fs::read_to_string(&made).unwrap();
    let detached = r#""kind":"detached","#;
    assert!(text.contains(detached), "the recording's process detached");
    let lost = text.replacen(detached, r#""kind":"detached","lost":2,"cut":1,"#, 1);
    std::fs::write(&made, lost).unwrap();
    made
}

/// `recording` with its first `clCreateBuffer` failed with `error` (its code
/// and name), written to `to`.
fn refused(recording: &str, error: &str, to: &Path) -> std::path::PathBuf {
    let mut flipped = false;
    let failed: String = std::fs::read_to_string(common::repo_file(recording))
        .unwrap()
        .lines()
        .map(|l| {
            let l = if !flipped && l.contains(r#""api":"clCreateBuffer""#) {
                flipped = true;
                l.replace(
                    r#""status":{"kind":"ok"}"#,
                    &format!(r#""status":{{"kind":"error",{error}}}"#),
                )
            } else {
                l.to_string()
            };
            l + "\n"
        })
        .collect();
    assert!(failed.contains(error), "{recording} has a clCreateBuffer");
    std::fs::write(to, failed).unwrap();
    to.to_path_buf()
}

/// A watched C program, with `--backtrace` so the report has its stacks; None
/// (the test skips with a notice) without a C compiler and OpenCL headers,
/// unless `GPULAB_REQUIRE_OPENCL=1` (CI, which installs them).
fn watched_program(dir: &Path) -> Option<(Value, Value)> {
    let exe = dir.join("forgotten_events");
    let built = std::process::Command::new("cc")
        .arg("-g")
        .arg(common::repo_file("tests/watch/forgotten_events.c"))
        .arg("-o")
        .arg(&exe)
        .arg("-lOpenCL")
        .output();
    if !built.as_ref().is_ok_and(|o| o.status.success()) {
        let why = "a C compiler with OpenCL headers (gcc, opencl-c-headers, ocl-icd-opencl-dev)";
        if std::env::var("GPULAB_REQUIRE_OPENCL").as_deref() == Ok("1") {
            panic!("GPULAB_REQUIRE_OPENCL=1 requires {why}: {built:?}");
        }
        common::say_skipped(format_args!(
            "skipping the_document_and_the_json_outputs_agree: no {why}"
        ));
        return None;
    }
    // The report goes to a file: the program's stdout stays its own.
    let report = dir.join("watch.json");
    let oom = dir.join("oom.json");
    let out = common::run(&[
        "watch",
        "--json",
        "-o",
        &report.display().to_string(),
        "--oom",
        &oom.display().to_string(),
        "--backtrace",
        "--",
        &exe.display().to_string(),
        "2",
        "1",
    ]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let text = std::fs::read_to_string(&report).unwrap_or_default();
    let report = serde_json::from_str(&text).unwrap_or_else(|e| panic!("watch --json -o: {e}"));
    // Nothing ran out: the file says so, in the same envelope.
    let text = std::fs::read_to_string(&oom).unwrap_or_default();
    let oom: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("watch --oom: {e}"));
    assert!(
        oom["ran_out"].is_null() && oom["framework_refused"].is_null(),
        "{oom}"
    );
    Some((report, oom))
}

#[test]
fn the_document_and_the_json_outputs_agree() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("the_document_and_the_json_outputs_agree") {
        return;
    }
    let doc = documented();
    let dir = common::temp_dir();
    let Some((watched, oom)) = watched_program(dir.path()) else {
        return;
    };
    let mut outputs = first_outputs(watched, oom);
    // A run on a loaded host, whatever this machine's kernel keeps; runs
    // whose driver deleted an object during another call (the H100's
    // sub-buffer: its parent went with the sub's release) and after the
    // script's last line (PoCL's context).
    for recording in [
        "tests/fixtures/loaded/pocl--cl-finish--finish.jsonl",
        "assets/recordings/nvidia-h100/cl-sub-buffer--parent-first.jsonl",
        "tests/fixtures/recordings/pocl--cl-finish--no-wait.jsonl",
    ] {
        outputs.push(json_of(&[
            "report",
            "--json",
            &common::repo_file(recording).display().to_string(),
        ]));
    }
    // Reports of recordings made to end as few runs do: ran out, timed out.
    for made in [
        ran_out_recording(dir.path()),
        watch_ran_out_recording(dir.path()),
        timed_out_recording(dir.path()),
    ] {
        outputs.push(json_of(&["report", "--json", &made.display().to_string()]));
    }
    outputs.extend(cards(dir.path()));
    outputs.push(class(dir.path()));
    // And the public corpus recorded on the H200: programs nobody here
    // wrote, whose reports say what ours do not (an agent's read as the
    // peak, managed memory beside the shares).
    let corpus = CORPUS
        .into_iter()
        .flat_map(|d| std::fs::read_dir(common::repo_file(d)).unwrap())
        .map(|f| f.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"));
    for file in recordings("assets/recordings")
        .into_iter()
        .chain(recordings("assets/watch-recordings"))
        .chain(corpus)
    {
        outputs.push(json_of(&["report", "--json", &file.display().to_string()]));
    }

    let schema = strict_schema();
    refuses_unknown_keys(&schema, &outputs);
    let mut seen: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for out in &outputs {
        assert_eq!(out["schema_version"], 2, "{out:#}");
        if let Err(e) = schema.validate(out) {
            panic!(
                "a {} output is not valid against docs/gpulab.schema.json: {e} at {}",
                out["kind"],
                e.instance_path()
            );
        }
        let kind = out["kind"].as_str().expect("a kind").to_string();
        let mut found = BTreeSet::new();
        keys(out, "", &kind, &doc, &mut found);
        for key in &found {
            assert!(
                doc.contains(&(kind.clone(), key.clone()))
                    || doc.contains(&("*".into(), key.clone())),
                "{kind} output has `{key}`, which docs/report-format.md does not document"
            );
        }
        seen.entry(kind).or_default().extend(found);
    }
    assert_eq!(
        seen.keys().collect::<Vec<_>>(),
        [
            "card",
            "class",
            "doctor",
            "labs",
            "matrix",
            "out_of_memory",
            "run",
            "watch"
        ],
        "every kind of output was read"
    );
    for (kind, path) in &doc {
        if UNSEEN
            .iter()
            .any(|(k, p, _)| k == kind && (p == path || path.starts_with(&format!("{p}."))))
        {
            continue;
        }
        // A map's entries are named by the run (parameters, tags, kinds): the map
        // itself, even empty, shows where they go.
        let path = path.strip_suffix(".*").unwrap_or(path);
        let found = if kind == "*" {
            seen.values().all(|keys| keys.contains(path))
        } else {
            seen.get(kind).is_some_and(|keys| keys.contains(path))
        };
        assert!(
            found,
            "docs/report-format.md documents `{path}` for {kind}, and no output here has it"
        );
    }
}

/// One variant or all: `run --json` is the same shape, a list of runs.
#[test]
fn one_variant_is_a_list_of_one() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("one_variant_is_a_list_of_one") {
        return;
    }
    let one = json_of(&[
        "run",
        "cl-finish",
        "--variant",
        "no-wait",
        "--json",
        "--param",
        "kernel_ms=20",
        "--param",
        "size_mib=4",
    ]);
    assert_eq!(one["kind"], "run");
    let runs = one["runs"].as_array().expect("a list of runs");
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["variant"], "no-wait");
    // A recording's report has the shape of the run that made it.
    let report = json_of(&[
        "report",
        "--json",
        &common::repo_file("tests/fixtures/recordings/pocl--cl-finish--no-wait.jsonl")
            .display()
            .to_string(),
    ]);
    let a: BTreeSet<&String> = one.as_object().unwrap().keys().collect();
    let b: BTreeSet<&String> = report.as_object().unwrap().keys().collect();
    assert_eq!(a, b);
    let a: BTreeSet<&String> = runs[0].as_object().unwrap().keys().collect();
    let b: BTreeSet<&String> = report["runs"][0].as_object().unwrap().keys().collect();
    assert_eq!(a, b);
}
