//! What the parent does with a run, timed: parse labs, read a recording, fold it into
//! the Run model, judge the claims and render the report. Figures in
//! docs/benchmarks.md.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

use gpulab::lab::{LabSet, Origin, catalog};
use gpulab::report::{self, Summary};
use gpulab::run::Run;
use gpulab::trace::{self, BackendKind, DeviceKind, Event, MemorySource};

/// A recording-sized stream: cl-forgotten-events at 20 iterations with 1 kHz samples
/// over 5 s, built from the shipped lab so it stays in step with the event types.
fn stream() -> Vec<Event> {
    let lab = LabSet::load(&[])
        .get("cl-forgotten-events")
        .cloned()
        .expect("shipped lab");
    let lab_meta = trace::LabMeta {
        id: lab.id.clone(),
        title: lab.title.clone(),
        variant: "forgotten".into(),
        params: lab.default_params(),
        script: lab.variants[0].lines(),
        stepped: false,
        until_failure: false,
        every_gpu: false,
    };
    let mut lines = vec![trace::to_line(&Event::Meta(Box::new(trace::Meta {
        format_version: trace::FORMAT_VERSION,
        gpulab_version: "bench".into(),
        t_ns: 0,
        pid: 1,
        hostname: "bench".into(),
        backend: BackendKind::OpenCl,
        platform: "bench".into(),
        device: trace::DeviceMeta {
            name: "bench".into(),
            vendor: "bench".into(),
            driver_version: "0".into(),
            kind: DeviceKind::Gpu,
            total_bytes: Some(80 << 30),
            memory_source: MemorySource::Nvml,
            pci_bus_id: None,
            clock_error_ns: Some(7000),
        },
        lab: Some(lab_meta),
        baseline_bytes: Some(3 << 20),
        budget_bytes: None,
        recorded_at: None,
        watch: None,
        destruction: None,
        gpus: Vec::new(),
    })))];
    let mut t = 1_000u64;
    let mut seq = 0;
    let mut mem = 3u64 << 20;
    for i in 0..20u32 {
        for (k, api) in [
            "clCreateContext",
            "clCreateCommandQueue",
            "clCreateBuffer",
            "clCreateProgramWithSource",
            "clBuildProgram",
            "clCreateKernel",
            "clEnqueueNDRangeKernel",
            "clFinish",
            "forget",
            "clReleaseKernel",
            "clReleaseProgram",
            "clReleaseMemObject",
            "clReleaseCommandQueue",
            "clReleaseContext",
        ]
        .iter()
        .enumerate()
        {
            let before = mem;
            if k == 0 {
                mem += 515 << 20;
            }
            lines.push(trace::to_line(&Event::Call(trace::Call {
                seq,
                pid: 1,
                line: Some(47 + k as u32),
                iter: vec![i],
                tag: (k == 11).then(|| "release_buf".to_string()),
                api: (*api).into(),
                driver: api.to_string(),
                begin_ns: t,
                end_ns: t + 50_000,
                mem_before: Some(before),
                mem_after: Some(mem),
                object: Some(seq),
                ..Default::default()
            })));
            seq += 1;
            t += 250_000_000 / 14;
        }
    }
    lines.extend((0..5_000u64).map(|s| sample(s * 1_000_000, mem)));
    lines.push(trace::to_line(&Event::End(trace::End {
        t_ns: t,
        status: trace::EndStatus::Finished,
        leaked: vec![],
    })));
    let text = lines.concat();
    trace::read_events(std::io::Cursor::new(text)).expect("the stream reads back")
}

/// A 1 kHz reading of an 80 GiB GPU with `mem` in use.
fn sample(t_ns: u64, mem: u64) -> String {
    trace::to_line(&Event::Sample(trace::Sample {
        t_ns,
        source: MemorySource::Nvml,
        used_bytes: mem,
        total_bytes: Some(80 << 30),
        process_bytes: None,
        others: None,
    }))
}

/// A lab whose one variant retains and releases a context `pairs` times: a script
/// of 2 * `pairs` lines.
fn long_lab(pairs: usize) -> String {
    let mut script = String::from("ctx = clCreateContext()\n");
    for _ in 0..pairs {
        script.push_str("clRetainContext(ctx)\nclReleaseContext(ctx)\n");
    }
    script.push_str("clReleaseContext(ctx)\n");
    let head = "id = \"long\"\ntitle = \"long\"\nbackend = \"opencl\"\nclaim = \"c\"\n\n\
        [teaching]\nlook = \"l\"\nwhy = \"w\"\ninstead = \"i\"\n\n\
        [[variants]]\nname = \"v\"\ndescription = \"d\"\n";
    let claims = "[[claims]]\nname = \"c\"\ntext = \"t\"\nexpr = \"1 < 2\"\n";
    format!("{head}script = '''\n{script}'''\n\n{claims}")
}

/// `n` executions of one tagged line in a loop, as `per-line-cost-cl` sends them,
/// after `meta`: what the Run folds per call of a long lab.
fn loop_calls(meta: &Event, n: u64) -> Vec<Event> {
    let mut events = vec![meta.clone()];
    for i in 0..n {
        let t = 1_000_000 + i * 5_000;
        events.push(Event::Call(trace::Call {
            seq: i,
            pid: 1,
            line: Some(4),
            iter: vec![i as u32],
            tag: Some("finish".into()),
            api: "clFinish".into(),
            driver: "clFinish".into(),
            begin_ns: t,
            end_ns: t + 3_000,
            mem_before: Some(1 << 30),
            mem_after: Some(1 << 30),
            ..Default::default()
        }));
    }
    events
}

fn benches(c: &mut Criterion) {
    c.bench_function("parse and validate the shipped labs", |b| {
        b.iter(|| {
            for (file, text) in catalog::SHIPPED {
                black_box(catalog::parse(file, text, Origin::Builtin).ok());
            }
        })
    });
    let long = long_lab(20_000);
    c.bench_function("check a 40,000-line lab (was quadratic: 14 s)", |b| {
        b.iter(|| black_box(catalog::parse("long.toml", &long, Origin::Builtin).is_ok()))
    });
    let events = stream();
    let text: String = events.iter().map(trace::to_line).collect();
    c.bench_function("read a 5,300-event recording (JSONL)", |b| {
        b.iter(|| black_box(trace::read_events(std::io::Cursor::new(text.as_bytes())).ok()))
    });
    let lab = LabSet::load(&[])
        .get("cl-forgotten-events")
        .cloned()
        .expect("shipped lab");
    c.bench_function("fold, judge and report a 5,300-event run", |b| {
        b.iter(|| {
            let mut run = Run::from_events(&events);
            for claim in gpulab::verdict::judge(&lab, &run) {
                run.apply(&trace::Event::Claim(claim));
            }
            black_box(report::text(&Summary::of(&run)))
        })
    });
    let calls = loop_calls(&events[0], 200_000);
    let mut group = c.benchmark_group("fold");
    group.throughput(Throughput::Elements(calls.len() as u64));
    group.sample_size(10);
    group.bench_function("fold a 200,000-call loop into a Run (per event)", |b| {
        b.iter(|| black_box(Run::from_events(&calls).lines().len()))
    });
    group.finish();
}

criterion_group!(pipeline, benches);
criterion_main!(pipeline);
