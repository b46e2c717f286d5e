//! What the worker pays for one script line besides the call itself, piece by
//! piece: the call event written to the parent's pipe, NVML's memory readings
//! (device handle, `nvmlDeviceGetMemoryInfo` v1 and v2, the process list), and on
//! CUDA the driver's own figures read after every call. The whole per line, from
//! a lab's own report, is in docs/benchmarks.md ("What the worker adds per script
//! line"); these say where it goes. Pieces that need an NVIDIA GPU are skipped
//! without one.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]
#![allow(
    unsafe_code,
    reason = "the benchmark makes its own pipe and times calls through libc"
)]

use std::hint::black_box;
use std::io::Read;
use std::os::fd::FromRawFd;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use nvml_wrapper::Nvml;

use gpulab::backend::Backend;
use gpulab::backend::cuda::CudaBackend;
use gpulab::engine::Emit;
use gpulab::engine::protocol::JsonlOut;
use gpulab::trace::event::{Call, Event};
use gpulab::trace::jsonl;

/// A call event as `cudaStreamSynchronize(s)` inside a `repeat` writes it.
fn typical_call() -> Event {
    Event::Call(Call {
        seq: 12_345,
        pid: 4242,
        thread: 1,
        line: Some(3),
        iter: vec![12_000],
        tag: Some("sync".into()),
        api: "cudaStreamSynchronize".into(),
        driver: "cuStreamSynchronize".into(),
        begin_ns: 1_234_567_890_123,
        end_ns: 1_234_567_891_456,
        mem_before: Some(555_745_280),
        mem_after: Some(555_745_280),
        ..Default::default()
    })
}

/// nvml.h's `nvmlMemory_t` (version 1): total, free, used bytes.
#[repr(C)]
#[derive(Default)]
struct MemoryV1 {
    total: u64,
    free: u64,
    used: u64,
}

/// A pipe whose far end a thread drains, as the parent reads the worker's stdout.
fn drained_pipe() -> Option<std::fs::File> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: both descriptors were just made and are owned here, once each.
    let (mut rx, tx) = unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    };
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        while matches!(rx.read(&mut buf), Ok(n) if n > 0) {}
    });
    Some(tx)
}

fn event_out(c: &mut Criterion) {
    let call = typical_call();
    c.bench_function("worker/serialize_call", |b| {
        b.iter(|| black_box(jsonl::to_line(&call)))
    });
    if let Some(pipe) = drained_pipe() {
        let mut sink = JsonlOut(pipe);
        c.bench_function("worker/emit_call_to_pipe", |b| {
            b.iter(|| sink.emit(black_box(call.clone())))
        });
    }
}

fn nvml(c: &mut Criterion) {
    let Ok(nvml) = Nvml::init() else {
        eprintln!("per_line bench: no NVML here; NVML pieces skipped");
        return;
    };
    let Ok(device) = nvml.device_by_index(0) else {
        eprintln!("per_line bench: NVML lists no GPU 0; NVML pieces skipped");
        return;
    };
    c.bench_function("nvml/device_by_index", |b| {
        b.iter(|| black_box(nvml.device_by_index(0).is_ok()))
    });
    c.bench_function("nvml/memory_info_v2", |b| {
        b.iter(|| black_box(device.memory_info().ok()))
    });
    if let Ok(v1) = nvml.lib().nvmlDeviceGetMemoryInfo.as_ref() {
        // SAFETY: a live device handle of this NVML.
        let handle = unsafe { device.handle() };
        c.bench_function("nvml/memory_info_v1", |b| {
            b.iter(|| {
                let mut m = MemoryV1::default();
                // SAFETY: `m` has nvml.h's `nvmlMemory_t` layout and lives across
                // the call; the handle is live.
                black_box(unsafe { v1(handle, (&raw mut m).cast()) });
                black_box(m.used)
            })
        });
    }
    c.bench_function("nvml/process_list", |b| {
        b.iter(|| black_box(device.running_compute_processes().map(|l| l.len()).ok()))
    });
}

fn cuda(c: &mut Criterion) {
    let mut backend = match CudaBackend::open(None) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("per_line bench: no CUDA here ({e}); CUDA pieces skipped");
            return;
        }
    };
    c.bench_function("cuda/memory_after_call", |b| {
        b.iter(|| black_box(backend.cuda_memory(None)))
    });
    c.bench_function("cuda/mem_get_info", |b| {
        b.iter(|| black_box(cudarc::driver::result::mem_get_info().ok()))
    });
    c.bench_function("cuda/drain", |b| {
        b.iter(|| black_box(backend.drain().len()))
    });
    // A line that allocates or frees: NVML's readings right after the device's
    // memory moved (the worker reads the process list then, for its own share).
    let Ok(nvml) = Nvml::init() else { return };
    let Ok(device) = nvml.device_by_index(0) else {
        return;
    };
    fn after_alloc(iters: u64, read: &dyn Fn()) -> Duration {
        let mut spent = Duration::ZERO;
        for _ in 0..iters {
            // SAFETY: a plain allocation in the current context, freed below.
            let Ok(p) = (unsafe { cudarc::driver::result::malloc_sync(1 << 20) }) else {
                break;
            };
            let t = Instant::now();
            read();
            spent += t.elapsed();
            // SAFETY: `p` was allocated above and is freed once.
            let _ = unsafe { cudarc::driver::result::free_sync(p) };
        }
        spent
    }
    c.bench_function("nvml/memory_info_after_alloc", |b| {
        b.iter_custom(|iters| {
            after_alloc(iters, &|| {
                black_box(device.memory_info().ok());
            })
        })
    });
    c.bench_function("nvml/process_list_after_alloc", |b| {
        b.iter_custom(|iters| {
            after_alloc(iters, &|| {
                black_box(device.running_compute_processes().map(|l| l.len()).ok());
            })
        })
    });
    c.bench_function("cuda/malloc_free_1MiB", |b| {
        b.iter(|| {
            // SAFETY: allocated and freed here, once each.
            if let Ok(p) = unsafe { cudarc::driver::result::malloc_sync(1 << 20) } {
                // SAFETY: as above.
                let _ = unsafe { cudarc::driver::result::free_sync(p) };
            }
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_millis(500));
    targets = event_out, nvml, cuda
}
criterion_main!(benches);
