//! The CUDA labs through the real binary. Without a CUDA driver (CI, laptops) every
//! CUDA lab must refuse with a clear "no CUDA driver" and exit 3. With one, the
//! gated test runs every variant and checks the bookkeeping, never a verdict.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use crate::common;

use gpulab::lab::{BackendKind, LabSet};
use gpulab::run::Run;
use gpulab::trace::{CallStatus, EndStatus, Event, Verdict, read_events};

fn cuda_labs() -> Vec<gpulab::lab::Lab> {
    LabSet::load(&[])
        .labs()
        .iter()
        .filter(|l| l.backend == BackendKind::Cuda)
        .cloned()
        .collect()
}

#[test]
fn every_cuda_lab_ships() {
    let ids: Vec<String> = cuda_labs().iter().map(|l| l.id.clone()).collect();
    for id in [
        "cuda-free-sync",
        "cuda-free-async",
        "cuda-cross-stream-free",
        "cuda-leak-loop",
        "cuda-double-free",
        "cuda-pool-retention",
        "cuda-mixed-free",
        "cuda-forgotten-event",
        "cuda-custom-pool",
        "cuda-vmm-release",
        "cuda-memcpy-sync",
        "cuda-graph-free",
        "cuda-peer-copy",
        "cuda-peer-access",
        "cuda-context-per-device",
        "cuda-pageable-copy",
        "cuda-mapped-host",
        "cuda-host-func",
        "cuda-copy-lands",
        "cuda-event-timing",
        "cuda-managed-both-ways",
        "cuda-device-heap",
    ] {
        assert!(ids.iter().any(|i| i == id), "{id} missing from {ids:?}");
    }
}

#[test]
fn without_a_driver_every_cuda_lab_exits_3_and_says_why() {
    if gpulab::backend::cuda::load::driver_present().is_ok() {
        common::say_skipped(format_args!("skipping: this machine has a CUDA driver"));
        return;
    }
    for lab in cuda_labs() {
        let out = common::run(&["run", &lab.id]);
        let err = common::stderr(&out);
        assert_eq!(out.status.code(), Some(3), "{}: {err}", lab.id);
        assert!(err.contains("no CUDA driver"), "{}: {err}", lab.id);
        assert!(!err.contains("panicked"), "{}: {err}", lab.id);
    }
}

/// Device-wide used bytes of GPU 0 (NVML), for the baseline check.
fn device_used() -> Option<u64> {
    let nvml = nvml_wrapper::Nvml::init().ok()?;
    let dev = nvml.device_by_index(0).ok()?;
    dev.memory_info().ok().map(|m| m.used)
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with GPULAB_REQUIRE_CUDA=1 -- --ignored"]
fn every_cuda_lab_runs_and_gives_its_memory_back() {
    assert!(
        gpulab::backend::cuda::tests_require_cuda(),
        "set GPULAB_REQUIRE_CUDA=1 to run this on a GPU machine"
    );
    let dir = common::temp_dir();
    let mut summary = Vec::new();
    for lab in cuda_labs() {
        for v in &lab.variants {
            let before = device_used();
            let file = dir.path().join(format!("{}--{}.jsonl", lab.id, v.name));
            let file_s = file.display().to_string();
            let out = common::run(&["run", &lab.id, "--variant", &v.name, "--record", &file_s]);
            let events = std::fs::File::open(&file)
                .ok()
                .and_then(|f| read_events(std::io::BufReader::new(f)).ok())
                .unwrap_or_else(|| {
                    panic!(
                        "{} {}: no readable recording; gpulab said:\n{}",
                        lab.id,
                        v.name,
                        common::stderr(&out)
                    )
                });
            let run = Run::from_events(&events);
            let end = run.end().expect("an end event");
            // A sticky fault in cuda-cross-stream-free ends the script early: that is
            // the lesson, reported as a failed line, not a crash.
            assert!(
                !matches!(end.status, EndStatus::Crashed { .. }),
                "{} {}: {:?}\n{}",
                lab.id,
                v.name,
                end.status,
                common::stderr(&out)
            );
            let unforgotten: Vec<_> = end.leaked.iter().filter(|l| !l.forgotten).collect();
            let finished = matches!(end.status, EndStatus::Finished);
            if finished {
                assert!(
                    unforgotten.is_empty(),
                    "{} {}: ledger ends with {unforgotten:?}",
                    lab.id,
                    v.name
                );
            }
            let after = device_used();
            if let (Some(b), Some(a)) = (before, after) {
                let diff = a as i64 - b as i64;
                assert!(
                    diff.abs() <= 4 << 20,
                    "{} {}: device memory {} MiB off its baseline after the run",
                    lab.id,
                    v.name,
                    diff as f64 / 1048576.0
                );
            }
            let claims = events
                .iter()
                .filter(|e| matches!(e, Event::Claim(_)))
                .count();
            summary.push(format!(
                "{} {}: {} · {} claim(s) · {} span(s)",
                lab.id,
                v.name,
                end.status.label(),
                claims,
                run.spans().len()
            ));
        }
    }
    eprintln!("{}", summary.join("\n"));
}

/// Issue #14: every kernel of `labs/kernels/` launches on the GPU with the
/// buffers it names and reports a device span under its own name.
#[test]
#[ignore = "needs an NVIDIA GPU: run with GPULAB_REQUIRE_CUDA=1 -- --ignored"]
fn every_kernel_runs_with_its_buffers() {
    assert!(
        gpulab::backend::cuda::tests_require_cuda(),
        "set GPULAB_REQUIRE_CUDA=1 to run this on a GPU machine"
    );
    let labs = common::repo_file("tests/labs/kernels")
        .display()
        .to_string();
    let (out, events) = common::run_recorded(&["run", "cuda-kernels", "--labs", &labs]);
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
    let run = Run::from_events(&events);
    assert_eq!(run.end().map(|e| &e.status), Some(&EndStatus::Finished));
    let lines = run.lines();
    assert!(
        lines.iter().all(|l| l.calls == 1 && l.errors == 0),
        "{lines:?}"
    );
    for name in ["pattern", "copy", "spin", "spin2", "heap"] {
        let spans: Vec<_> = run.spans().iter().filter(|s| s.name == name).collect();
        assert_eq!(spans.len(), 1, "`{name}` spans: {:?}", run.spans());
        eprintln!(
            "{name}: {:.3} ms",
            (spans[0].end_ns - spans[0].begin_ns) as f64 / 1e6
        );
    }
}

/// Runs `lab`'s `variant` (with `extra` arguments) and returns its recorded run.
fn recorded(lab: &str, variant: &str, extra: &[&str]) -> Run {
    let mut args = vec!["run", lab, "--variant", variant];
    args.extend_from_slice(extra);
    Run::from_events(&common::run_recorded(&args).1)
}

/// Lines that returned an error without `# expect-error`.
fn failed_lines(run: &Run) -> Vec<String> {
    run.calls()
        .iter()
        .filter(|c| !c.expect_error && matches!(c.status, CallStatus::Error { .. }))
        .map(|c| format!("line {:?} {}: {:?}", c.line, c.api, c.status))
        .collect()
}

/// A run that finished, whose every call succeeded (or failed as marked), that
/// left nothing in the ledger, and whose every claim was decided: holds or not is
/// the device's answer, inconclusive would mean the lab could not ask.
fn assert_clean_and_decided(id: &str, variant: &str, run: &Run) {
    let end = run.end().expect("an end event");
    assert!(
        matches!(end.status, EndStatus::Finished),
        "{id} {variant}: {:?}",
        end.status
    );
    assert_eq!(failed_lines(run), Vec::<String>::new(), "{id} {variant}");
    assert!(end.leaked.is_empty(), "{id} {variant}: {:?}", end.leaked);
    let undecided: Vec<_> = run
        .claims()
        .iter()
        .filter(|c| c.verdict == Verdict::Inconclusive)
        .map(|c| (&c.name, &c.reason))
        .collect();
    assert!(undecided.is_empty(), "{id} {variant}: {undecided:?}");
}

/// The pool, VMM and legacy-stream labs: every call reaches the driver and
/// succeeds, the lab's own pool is read after each line while it lives, every
/// claim is decided (holds or not: that is the device's answer), and nothing is
/// left in the ledger.
#[test]
#[ignore = "needs an NVIDIA GPU: run with GPULAB_REQUIRE_CUDA=1 -- --ignored"]
fn pool_vmm_and_legacy_stream_calls_reach_the_driver() {
    assert!(
        gpulab::backend::cuda::tests_require_cuda(),
        "set GPULAB_REQUIRE_CUDA=1 to run this on a GPU machine"
    );
    let set = LabSet::load(&[]);
    for id in ["cuda-custom-pool", "cuda-vmm-release", "cuda-memcpy-sync"] {
        let lab = set.get(id).unwrap();
        for v in &lab.variants {
            let run = recorded(id, &v.name, &[]);
            assert_clean_and_decided(id, &v.name, &run);
            let own_pool_read = run
                .calls()
                .iter()
                .any(|c| c.cuda.is_some_and(|m| m.custom_pool.is_some()));
            let makes_pool = v
                .script
                .iter()
                .any(|s| s.text.contains("cudaMemPoolCreate"));
            assert_eq!(own_pool_read, makes_pool, "{id} {}", v.name);
        }
    }
}

const MANAGED_LAB: &str = r#"
id = "t-managed-register"
title = "managed and registered memory"
backend = "cuda"
claim = "the calls run"

[teaching]
look = "l"
why = "w"
instead = "i"

[[params]]
name = "size_mib"
default = 64
min = 1
max = 1073741824
unit = "MiB"
help = "size"

[[variants]]
name = "managed"
script = '''
s = cudaStreamCreate()
m = cudaMallocManaged({size_mib} MiB)   # name: managed
cudaMemPrefetchAsync(m, s)              # name: prefetch
cudaLaunchKernel(s, spin, m, 10 ms)
cudaStreamSynchronize(s)
cudaFree(m)
cudaStreamDestroy(s)
'''

[[variants]]
name = "registered"
script = '''
s = cudaStreamCreateWithFlags(cudaStreamNonBlocking)
h = cudaHostRegister({size_mib} MiB)    # name: register
d = cudaMalloc({size_mib} MiB)
cudaMemcpyAsync(d, h, s)
cudaMemcpyAsync(h, d, s)
cudaStreamSynchronize(s)
cudaMemcpy(h, d)
cudaHostUnregister(h)                   # name: unregister
cudaFree(d)
cudaStreamDestroy(s)
'''
"#;

/// Managed memory is prefetched and used, registered host memory copied both
/// ways; a managed size beyond the device's free memory is refused before the
/// driver is asked, even with the budget lifted.
#[test]
#[ignore = "needs an NVIDIA GPU: run with GPULAB_REQUIRE_CUDA=1 -- --ignored"]
fn managed_and_registered_memory_run_and_oversized_managed_is_refused() {
    assert!(
        gpulab::backend::cuda::tests_require_cuda(),
        "set GPULAB_REQUIRE_CUDA=1 to run this on a GPU machine"
    );
    let labs = common::temp_dir();
    std::fs::write(labs.path().join("t-managed-register.toml"), MANAGED_LAB).unwrap();
    let dir = labs.path().display().to_string();
    for v in ["managed", "registered"] {
        let run = recorded("t-managed-register", v, &["--labs", &dir]);
        assert_eq!(failed_lines(&run), Vec::<String>::new(), "{v}");
        let end = run.end().expect("an end event");
        assert!(end.leaked.is_empty(), "{v}: {:?}", end.leaked);
        if v == "managed" {
            assert!(
                run.spans().iter().any(|s| s.name == "prefetch"),
                "no prefetch span: {:?}",
                run.spans()
            );
        }
    }
    // 1 PiB: more than any device's free memory.
    let run = recorded(
        "t-managed-register",
        "managed",
        &[
            "--labs",
            &dir,
            "--until-failure",
            "--param",
            "size_mib=1073741824",
        ],
    );
    let managed = run
        .calls()
        .iter()
        .find(|c| c.api == "cudaMallocManaged")
        .expect("the cudaMallocManaged line ran");
    match &managed.status {
        CallStatus::Error { name, .. } => {
            assert!(name.starts_with("GPULAB_REFUSED"), "{name}");
            assert!(name.contains("free memory"), "{name}");
        }
        other => panic!("a 1 PiB managed allocation was not refused: {other:?}"),
    }
}

/// A relaunch the validator refuses unless marked: the second launch of an
/// exec whose allocation from the first is still allocated, then the same
/// after a cudaFreeAsync, where it must succeed.
const GRAPH_RELAUNCH_LAB: &str = r#"
id = "t-graph-relaunch"
title = "a graph launched again"
backend = "cuda"
claim = "the calls run"

[teaching]
look = "l"
why = "w"
instead = "i"

[[params]]
name = "size_mib"
default = 64
min = 2
max = 1024
unit = "MiB"
help = "size"

[[variants]]
name = "relaunch"
script = '''
s = cudaStreamCreate()
g = cudaGraphCreate()
a = cudaGraphAddMemAllocNode(g, {size_mib} MiB)
cudaGraphAddMemsetNode(g, a)
e = cudaGraphInstantiate(g)
cudaGraphDestroy(g)                   # name: graph_gone — the exec lives on
cudaGraphLaunch(e, s)                 # name: first
cudaGraphLaunch(e, s)                 # name: refused, expect-error
cudaFreeAsync(a, s)
cudaGraphLaunch(e, s)                 # name: again
cudaStreamSynchronize(s)
cudaLaunchKernel(s, pattern, a)       # name: kernel — a graph allocation is a buffer
cudaFree(a)
cudaGraphExecDestroy(e)
cudaDeviceGraphMemTrim()
cudaStreamDestroy(s)
'''
"#;

/// Issue #14, graphs: every call of cuda-graph-free reaches the driver and
/// succeeds, the device's graph memory is read after every line from the
/// first cudaGraphCreate on (and never before), every claim is decided and
/// nothing is left in the ledger. A relaunch with the allocation still live is
/// the driver's CUDA_ERROR_INVALID_VALUE, as the validator says; after a free
/// it runs, and the exec outlives its graph.
#[test]
#[ignore = "needs an NVIDIA GPU: run with GPULAB_REQUIRE_CUDA=1 -- --ignored"]
fn graph_calls_reach_the_driver_and_graph_memory_is_read() {
    assert!(
        gpulab::backend::cuda::tests_require_cuda(),
        "set GPULAB_REQUIRE_CUDA=1 to run this on a GPU machine"
    );
    let set = LabSet::load(&[]);
    let id = "cuda-graph-free";
    let lab = set.get(id).expect("cuda-graph-free ships");
    for v in &lab.variants {
        let run = recorded(id, &v.name, &[]);
        assert_clean_and_decided(id, &v.name, &run);
        let made = run
            .calls()
            .iter()
            .position(|c| c.api == "cudaGraphCreate")
            .expect("the graph is made");
        for (i, c) in run.calls().iter().enumerate() {
            let read = c.cuda.is_some_and(|m| m.graph_mem.is_some());
            assert_eq!(read, i >= made, "{id} {} line {:?}", v.name, c.line);
        }
        assert!(
            run.spans().iter().any(|s| s.name == "graph"),
            "{id} {}: no graph span: {:?}",
            v.name,
            run.spans()
        );
    }

    let labs = common::temp_dir();
    std::fs::write(
        labs.path().join("t-graph-relaunch.toml"),
        GRAPH_RELAUNCH_LAB,
    )
    .unwrap();
    let dir = labs.path().display().to_string();
    let run = recorded("t-graph-relaunch", "relaunch", &["--labs", &dir]);
    let end = run.end().expect("an end event");
    assert!(
        matches!(end.status, EndStatus::Finished),
        "{:?}",
        end.status
    );
    assert_eq!(failed_lines(&run), Vec::<String>::new());
    assert!(end.leaked.is_empty(), "{:?}", end.leaked);
    let status = |tag: &str| {
        run.calls()
            .iter()
            .find(|c| c.tag.as_deref() == Some(tag))
            .map(|c| c.status.clone())
            .unwrap_or_else(|| panic!("`{tag}` did not run"))
    };
    match status("refused") {
        CallStatus::Error { name, .. } => {
            assert_eq!(name, "CUDA_ERROR_INVALID_VALUE", "the relaunch's error")
        }
        other => panic!("a relaunch with a live allocation was not refused: {other:?}"),
    }
    for tag in ["graph_gone", "first", "again", "kernel"] {
        assert_eq!(status(tag), CallStatus::Ok, "{tag}");
    }
}

/// Lines that move device memory: the worker counts a move soon after NVML's
/// process list as its own, and the next list (at most a millisecond later)
/// checks every move counted so. On a device nobody else touches no list
/// contradicts them, an allocation never reads as memory given back (nor a free
/// as memory taken), and the lines' changes add up to the loop's.
#[test]
#[ignore = "needs an NVIDIA GPU: run with GPULAB_REQUIRE_CUDA=1 -- --ignored"]
fn lines_that_move_memory_are_counted_and_checked_against_nvmls_list() {
    assert!(
        gpulab::backend::cuda::tests_require_cuda(),
        "set GPULAB_REQUIRE_CUDA=1 to run this on a GPU machine"
    );
    let labs = common::repo_file("benches/labs");
    let labs = labs.to_string_lossy();
    let (out, events) = common::run_recorded(&[
        "--labs",
        &labs,
        "run",
        "per-line-cost",
        "--variant",
        "alloc-free",
        "--param",
        "lines=5000",
    ]);
    let run = Run::from_events(&events);
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert_clean_and_decided("per-line-cost", "alloc-free", &run);
    let contradicted: Vec<_> = run
        .notes()
        .iter()
        .filter(|n| n.text.contains("outside the worker"))
        .collect();
    assert!(contradicted.is_empty(), "{contradicted:?}");
    let calls: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::Call(c) if c.api == "cudaMalloc" || c.api == "cudaFree" => Some(c),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 10_000);
    let mut moved = 0i128;
    for c in &calls {
        let (Some(before), Some(after)) = (c.mem_before, c.mem_after) else {
            panic!("line {:?} has no reading", c.line);
        };
        let delta = i128::from(after) - i128::from(before);
        let grows = c.api == "cudaMalloc";
        assert!(
            if grows { delta >= 0 } else { delta <= 0 },
            "{} at seq {} moved {delta} bytes",
            c.api,
            c.seq
        );
        moved += delta;
    }
    assert!(
        calls.iter().any(|c| c.mem_after > c.mem_before),
        "no allocation moved memory"
    );
    let first = calls.first().and_then(|c| c.mem_before).unwrap_or(0);
    let last = calls.last().and_then(|c| c.mem_after).unwrap_or(0);
    // Between lines nothing moves on a device nobody else touches.
    assert_eq!(moved, i128::from(last) - i128::from(first));
}

/// The labs for two GPUs (#33): on a host with two, every variant runs to its
/// end and its claims get verdicts from its own numbers (the copy's lesson
/// compared across its two variants); on a host with one, the line that makes
/// device 1 current fails and says why, and nothing else breaks.
#[test]
#[ignore = "needs an NVIDIA GPU: run with GPULAB_REQUIRE_CUDA=1 -- --ignored"]
fn the_two_gpu_labs_measure_on_two_and_say_why_not_on_one() {
    assert!(
        gpulab::backend::cuda::tests_require_cuda(),
        "set GPULAB_REQUIRE_CUDA=1 to run this on a GPU machine"
    );
    // What CUDA sees: NVML ignores CUDA_VISIBLE_DEVICES.
    let gpus = match std::env::var("CUDA_VISIBLE_DEVICES") {
        Ok(v) => v.split(',').filter(|d| !d.trim().is_empty()).count() as u32,
        Err(_) => nvml_wrapper::Nvml::init()
            .ok()
            .and_then(|n| n.device_count().ok())
            .unwrap_or(0),
    };
    for id in [
        "cuda-peer-copy",
        "cuda-peer-access",
        "cuda-context-per-device",
    ] {
        let out = common::run(&["run", id, "--all-variants", "--json"]);
        let text = common::stdout(&out);
        let report: serde_json::Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{id}: no JSON ({e}): {}", common::stderr(&out)));
        let runs = report["runs"].as_array().expect("runs");
        for r in runs {
            let ended = r["status"].to_string();
            if gpus >= 2 {
                assert!(ended.contains("finished"), "{id}: {r:#}");
                for c in r["claims"].as_array().expect("claims") {
                    let verdict = c["verdict"].as_str().unwrap_or("");
                    assert!(
                        ["holds", "does_not_hold", "inconclusive"].contains(&verdict),
                        "{id}: {c}"
                    );
                }
            } else {
                // The line that makes device 1 current stops the run and says
                // why; no claim is judged from what never ran.
                assert!(
                    r["status"]
                        .as_str()
                        .unwrap_or("")
                        .contains("CUDA_ERROR_INVALID_DEVICE"),
                    "{id} on one GPU: {r:#}"
                );
                for c in r["claims"].as_array().expect("claims") {
                    assert_eq!(c["verdict"], "inconclusive", "{id} on one GPU: {c}");
                }
            }
        }
        eprintln!("{id}: {}", common::stderr(&out));
    }
}
