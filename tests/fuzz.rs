//! Mutation fuzzing of everything that reads untrusted input: the lab parser and
//! validator, the claim-expression parser, and the event reader with the views
//! folded from what it read. None may panic, overflow a 1 MiB stack or hang.
//!
//! The fuzzer is our own (`fuzz/mutate.rs`: a seeded xorshift generator and byte,
//! line and token edits), not cargo-fuzz, which needs nightly, nor `proptest` or
//! `arbitrary`: those generate values from a grammar, while what breaks a reader is
//! a damaged copy of a real file, and a hand-rolled mutator over the shipped files
//! gives that in ~200 lines with no new dependency, reproducibly from one seed.
//!
//! Seeds are the files the project already ships (`labs/`, `tests/labs/`, the
//! recordings); inputs that once crashed a target live in
//! `tests/fuzz/regressions/<target>/` and are replayed first on every run.
//!
//! `cargo test --test outputs fuzz::` runs a few hundred inputs per target (seconds in debug).
//! A long run: `GPULAB_FUZZ_ITERS=1000000 GPULAB_FUZZ_SEED=7 cargo test --release
//! --test outputs fuzz::lab -- --nocapture`; crashing inputs are saved under
//! `target/tmp/` and named in the failure.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

#[path = "fuzz/harness.rs"]
mod harness;
#[path = "fuzz/mutate.rs"]
mod mutate;

use std::path::{Path, PathBuf};

use gpulab::lab::catalog;
use gpulab::lab::error::LabError;
use gpulab::lab::model::Origin;
use gpulab::report::Summary;
use gpulab::report::WatchReport;
use gpulab::run::Run;
use mutate::Rng;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every file under `dir` (recursively) whose name ends in `.ext`, in name order.
fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files(&path, ext));
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
    out.sort();
    out
}

fn read_all(paths: &[PathBuf]) -> Vec<Vec<u8>> {
    paths
        .iter()
        .map(|p| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect()
}

fn regressions(target: &str, ext: &str) -> Vec<Vec<u8>> {
    read_all(&files(
        &root().join("tests/fuzz/regressions").join(target),
        ext,
    ))
}

/// The regressions, then the seeds as they are, then `iters` mutants of them.
fn inputs<'a>(
    target: &str,
    ext: &str,
    seeds: &'a [Vec<u8>],
    iters: usize,
    mut make: impl FnMut(&mut Rng, &'a [Vec<u8>]) -> Vec<u8> + 'a,
) -> impl Iterator<Item = Vec<u8>> + 'a {
    let mut rng = Rng::new(harness::seed() ^ fnv(target));
    regressions(target, ext)
        .into_iter()
        .chain(seeds.iter().cloned())
        .chain((0..iters).map(move |_| make(&mut rng, seeds)))
}

/// Each target draws its own stream from the one seed.
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

// ---- lab files -------------------------------------------------------------

const LAB_WORDS: &[&[u8]] = &[
    b"repeat 1 {\n",
    b"repeat 4294967296 {\n",
    b"}\n",
    b"[[variants]]\n",
    b"[[claims]]\n",
    b"[[params]]\n",
    b"[teaching]\n",
    b"script = '''\n",
    b"expr = \"",
    b"variants = [",
    b"name = ",
    b"default = ",
    b"cudaMalloc(",
    b"clCreateBuffer(ctx, ",
    b"cudaFree(buf)\n",
    b"sleep(",
    b" MiB",
    b" ms",
    b" GiB",
    b"{size_mib}",
    b"{",
    b"# name: x\n",
    b"# expect: ",
    b"forget ",
    b"not ",
    b"((((",
    b"[[[[",
    b"{a={a=",
    b"a.b.c.",
];

fn lab_target(bytes: &[u8]) {
    match catalog::parse_bytes("fuzz.toml", bytes.to_vec(), Origin::Builtin) {
        Ok(lab) => {
            let _ = catalog::resolve_params(&lab, &[]);
        }
        Err(LabError::Invalid(d)) => {
            for mistake in std::iter::once(d.as_ref()).chain(&d.more) {
                let _ = mistake.to_string();
                let _ = mistake.render(false);
            }
            let _ = d.render(true);
        }
        Err(e) => panic!("parse_bytes gave a non-lab error: {e}"),
    }
}

fn lab_seeds() -> Vec<Vec<u8>> {
    let mut paths = files(&root().join("labs"), "toml");
    paths.retain(|p| p.parent() == Some(&root().join("labs")));
    paths.extend(files(&root().join("tests/labs"), "toml"));
    read_all(&paths)
}

#[test]
fn lab_parser_survives_mutated_labs() {
    let seeds = lab_seeds();
    assert!(seeds.len() > 60, "seed labs not found");
    let iters = harness::iterations(400);
    let inputs = inputs("lab", "toml", &seeds, iters, |rng, seeds| {
        let seed = rng_pick(rng, seeds);
        mutate::mutate(rng, seed, LAB_WORDS, seeds)
    });
    let n = harness::run("lab", inputs, lab_target);
    eprintln!("lab: {n} inputs");
}

fn rng_pick<'a>(rng: &mut Rng, seeds: &'a [Vec<u8>]) -> &'a [u8] {
    rng.pick(seeds).as_slice()
}

// ---- claim expressions -----------------------------------------------------

/// A known-good lab whose first claim the claim target replaces.
const HOST_LAB: &str = "labs/cuda-free-sync.toml";
const HOST_EXPR: &str = "expr = \"host_ms(free) >= 0.8 * busy_ms(free)\"";

const CLAIM_WORDS: &[&[u8]] = &[
    b"(",
    b")",
    b"not ",
    b" and ",
    b" or ",
    b" < ",
    b" <= ",
    b" >= ",
    b" > ",
    b" == ",
    b" != ",
    b" * ",
    b" / ",
    b" + ",
    b" - ",
    b"-",
    b"host_ms(",
    b"busy_ms(free)",
    b"host_ms(kernel)",
    b"vram_delta_mib(",
    b"kernel_ms",
    b"size_mib",
    b"0.5",
    b"1e308",
    b"not (",
    b"-(",
];

/// The parser is reached the way a user reaches it: through a lab file, with the
/// mutated text as the first claim's `expr`, in a TOML basic string.
fn claim_lab(expr: &[u8]) -> String {
    let host = std::fs::read_to_string(root().join(HOST_LAB)).expect("read the host lab");
    let mut quoted = String::from("expr = \"");
    for c in String::from_utf8_lossy(expr).chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            c if c.is_control() => quoted.push_str(&format!("\\u{:04x}", c as u32)),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    host.replacen(HOST_EXPR, &quoted, 1)
}

fn claim_target(expr: &[u8]) {
    lab_target(claim_lab(expr).as_bytes());
}

/// Every `expr` and `requires` in the seed labs.
fn claim_seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for lab in lab_seeds() {
        for line in String::from_utf8_lossy(&lab).lines() {
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            if matches!(key.trim(), "expr" | "requires") {
                let value = value.trim().trim_matches('"');
                out.push(value.as_bytes().to_vec());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[test]
fn claim_parser_survives_mutated_claims() {
    let host = std::fs::read_to_string(root().join(HOST_LAB)).expect("read the host lab");
    assert!(
        host.contains(HOST_EXPR),
        "{HOST_LAB} changed its first claim"
    );
    assert!(catalog::parse(HOST_LAB, &claim_lab(b"host_ms(free) < 1"), Origin::Builtin).is_ok());
    let seeds = claim_seeds();
    assert!(seeds.len() > 20, "seed claims not found");
    let iters = harness::iterations(1500);
    let inputs = inputs("claim", "txt", &seeds, iters, |rng, seeds| {
        let seed = rng_pick(rng, seeds);
        mutate::mutate(rng, seed, CLAIM_WORDS, seeds)
    });
    let n = harness::run("claim", inputs, claim_target);
    eprintln!("claim: {n} inputs");
}

// ---- recordings --------------------------------------------------------------

const EVENT_WORDS: &[&[u8]] = &[
    b"{\"type\":",
    b"\"data\":",
    b"{\"type\":\"meta\",\"data\":{}}\n",
    b"null",
    b"true",
    b"[]",
    b"{}",
    b"[[[[[[[[",
    b"{\"a\":{\"a\":",
    b"\"t_ns\":",
    b"\"id\":",
    b"\"line\":",
    b"\"bytes\":",
    b"\"format_version\":",
    b"-1",
    b"0",
    b"1e400",
    b"18446744073709551615",
    b"18446744073709551616",
    b"\\ud800",
    b"\\u0000",
];

/// A window of a recording: its `meta` line, then up to 60 lines from anywhere in
/// it, so a mutant reaches past the header without parsing megabytes.
fn window(rng: &mut Rng, recording: &[u8]) -> Vec<u8> {
    let lines: Vec<&[u8]> = recording.split_inclusive(|&c| c == b'\n').collect();
    let Some((meta, rest)) = lines.split_first() else {
        return Vec::new();
    };
    let start = rng.below(rest.len());
    let len = 1 + rng.below(60);
    let mut out = meta.to_vec();
    for line in rest.iter().skip(start).take(len) {
        out.extend_from_slice(line);
    }
    out
}

fn event_target(bytes: &[u8]) {
    let read = gpulab::trace::read_recording(bytes);
    let mut streamed = 0;
    let problems = gpulab::trace::stream_recording(bytes, |_| streamed += 1);
    let rec = match (read, problems) {
        (Ok(rec), Ok(problems)) => {
            assert_eq!(
                rec.events.len(),
                streamed,
                "read and stream keep the same events"
            );
            assert_eq!(
                rec.problems.len(),
                problems.len(),
                "and find the same problems"
            );
            rec
        }
        (Err(a), Err(b)) => {
            assert_eq!(a.to_string(), b.to_string(), "read and stream refuse alike");
            return;
        }
        (a, b) => panic!("read_recording and stream_recording disagree: {a:?} / {b:?}"),
    };
    for p in &rec.problems {
        let _ = p.to_string();
    }
    let run = Run::from_events(&rec.events);
    let summary = Summary::of(&run);
    let _ = gpulab::report::text(&summary);
    let _ = gpulab::report::markdown(&summary);
    let watch = WatchReport::from_run(&run);
    let _ = watch.text();
    let _ = watch.markdown();
}

fn recording_seeds() -> Vec<Vec<u8>> {
    let mut paths = files(&root().join("assets/recordings"), "jsonl");
    paths.extend(files(&root().join("assets/watch-recordings"), "jsonl"));
    paths.extend(files(&root().join("tests/fixtures/recordings"), "jsonl"));
    read_all(&paths)
}

#[test]
fn event_reader_survives_mutated_recordings() {
    let recordings = recording_seeds();
    assert!(recordings.len() > 40, "seed recordings not found");
    let iters = harness::iterations(300);
    let inputs = inputs("events", "jsonl", &recordings, iters, |rng, seeds| {
        let seed = rng_pick(rng, seeds);
        let base = window(rng, seed);
        let others: Vec<Vec<u8>> = (0..2)
            .map(|_| {
                let seed = rng_pick(rng, seeds);
                window(rng, seed)
            })
            .collect();
        mutate::mutate(rng, &base, EVENT_WORDS, &others)
    });
    let n = harness::run("events", inputs, event_target);
    eprintln!("events: {n} inputs");
}

// ---- deep nesting ------------------------------------------------------------

/// Runs `f` on the fuzz worker's small stack, where an overflow fails the test.
fn on_small_stack(f: fn(&[u8]), input: Vec<u8>) {
    harness::run("deep", std::iter::once(input), f);
}

fn deep_lab_error(text: String) -> String {
    let err = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(move || catalog::parse("deep.toml", &text, Origin::Builtin).map(|_| ()))
        .expect("spawn")
        .join()
        .expect("no panic, no overflow");
    match err {
        Err(e) => e.to_string(),
        Ok(()) => panic!("a deeply nested lab was accepted"),
    }
}

#[test]
fn deep_repeat_nesting_is_a_clear_error() {
    let host = std::fs::read_to_string(root().join(HOST_LAB)).expect("read the host lab");
    let deep = "repeat 1 {\n".repeat(10_000) + &"}\n".repeat(10_000);
    let text = host.replacen(
        "s    = cudaStreamCreate()\n",
        &format!("s = cudaStreamCreate()\n{deep}"),
        1,
    );
    let err = deep_lab_error(text);
    assert!(err.contains("nest at most 8 deep"), "{err}");
}

#[test]
fn deep_claims_are_a_clear_error() {
    for deep in [
        "(".repeat(10_000) + "kernel_ms" + &")".repeat(10_000) + " > 1",
        "not ".repeat(10_000) + "kernel_ms > 1",
        "-".repeat(10_000) + "kernel_ms > 1",
    ] {
        let err = deep_lab_error(claim_lab(deep.as_bytes()));
        assert!(err.contains("at most 48 operators"), "{err}");
    }
}

#[test]
fn deep_toml_is_a_clear_error() {
    for deep in [
        "x = ".to_string() + &"[".repeat(10_000) + &"]".repeat(10_000) + "\n",
        "x = ".to_string() + &"{a=".repeat(10_000) + &"}".repeat(10_000) + "\n",
        "a.".repeat(10_000) + "b = 1\n",
    ] {
        let err = deep_lab_error(deep);
        assert!(err.starts_with("deep.toml:1:"), "{err}");
    }
}

#[test]
fn deep_json_is_a_skipped_line() {
    let meta =
        std::fs::read(root().join("tests/fixtures/recordings/pocl--cl-finish--no-wait.jsonl"))
            .expect("read a recording");
    let mut input: Vec<u8> = meta
        .split_inclusive(|&c| c == b'\n')
        .next()
        .expect("meta")
        .to_vec();
    input.extend("[".repeat(100_000).as_bytes());
    input.push(b'\n');
    on_small_stack(event_target, input.clone());
    let rec = gpulab::trace::read_recording(&input[..]).expect("the meta line is fine");
    assert_eq!(rec.problems.len(), 1, "{:?}", rec.problems);
}
