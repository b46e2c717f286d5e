//! What one memory reading costs the parent's sampler: NVML on an NVIDIA GPU
//! (between allocations, when device memory does not move), the worker's RSS
//! elsewhere. On a machine without NVML only the RSS probe is measured. Device figures beside `nvidia-smi -lms 1`
//! are in docs/benchmarks.md.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};

use gpulab::telemetry::Probe;

fn readings(c: &mut Criterion) {
    let pid = std::process::id();
    if let Some(gpu) = Probe::nvidia_gpu0_now() {
        let mut probe = Probe::nvidia_gpu0(pid, gpu);
        // Device memory does not move while this runs: the reading the sampler
        // takes between allocations.
        c.bench_function("sampler/nvml_reading_steady", |b| {
            b.iter(|| black_box(probe.try_read().ok()))
        });
    } else {
        eprintln!("sampler bench: no NVIDIA GPU through NVML here; NVML readings skipped");
    }
    if let Ok(mut probe) = Probe::rss(pid) {
        c.bench_function("sampler/rss_reading", |b| {
            b.iter(|| black_box(probe.try_read().ok()))
        });
    }
}

/// CPU time of this thread, as `top` counts a thread's share of a core.
fn thread_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// `iters` ticks one millisecond apart, each doing `work` after its wake; the
/// result is the thread's CPU time, so criterion reports CPU per tick: what a
/// 1 kHz sampler costs whatever the wall clock does.
fn ticks_cpu(iters: u64, mut work: impl FnMut()) -> Duration {
    let period = Duration::from_millis(1);
    let start = thread_cpu();
    let mut next = std::time::Instant::now();
    for _ in 0..iters {
        next += period;
        let now = std::time::Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        }
        work();
    }
    thread_cpu().saturating_sub(start)
}

fn ticks(c: &mut Criterion) {
    c.bench_function("sampler/tick_cpu/wake_only", |b| {
        b.iter_custom(|iters| ticks_cpu(iters, || {}))
    });
    if let Some(gpu) = Probe::nvidia_gpu0_now() {
        let mut probe = Probe::nvidia_gpu0(std::process::id(), gpu);
        c.bench_function("sampler/tick_cpu/nvml_reading", |b| {
            b.iter_custom(|iters| {
                ticks_cpu(iters, || {
                    black_box(probe.try_read().ok());
                })
            })
        });
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = readings
}
criterion_group! {
    name = tick_benches;
    // Each tick takes a millisecond of wall time: fewer samples, or this group
    // alone would take minutes.
    config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_millis(300));
    targets = ticks
}
criterion_main!(benches, tick_benches);
