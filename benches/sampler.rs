//! What one memory reading costs the parent's sampler: NVML on an NVIDIA GPU
//! (between allocations, when device memory does not move), the worker's RSS
//! elsewhere. On a machine without NVML only the RSS probe is measured. Device figures beside `nvidia-smi -lms 1`
//! are in docs/benchmarks.md.

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

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = readings
}
criterion_main!(benches);
