//! The overhead baseline for docs/benchmarks.md: cuda-free-sync's calls in a plain
//! cudarc program, no gpulab in between (no worker, no ledger, no memory reads, no
//! span events), each call timed on the host. Prints one line per call:
//! `variant call mean_ms min_ms`. Needs an NVIDIA GPU; `cargo run --release
//! --example cuda_plain_free_sync -- 10 256 200`.
#![allow(unsafe_code)]

use std::time::Instant;

use cudarc::driver::sys;
use gpulab::backend::cuda::spin;

fn ck(r: sys::CUresult, what: &str) {
    if r != sys::CUresult::CUDA_SUCCESS {
        eprintln!("{what}: {r:?}");
        std::process::exit(4);
    }
}

fn timed(out: &mut Vec<(String, f64)>, name: &str, f: impl FnOnce() -> sys::CUresult) {
    let t = Instant::now();
    let r = f();
    out.push((name.to_string(), t.elapsed().as_secs_f64() * 1e3));
    ck(r, name);
}

#[expect(
    clippy::too_many_lines,
    reason = "a measurement script: the CUDA calls of the lab, in order"
)]
fn main() {
    let args: Vec<f64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let reps = args.first().copied().unwrap_or(10.0) as usize;
    let size = (args.get(1).copied().unwrap_or(256.0) * 1048576.0) as usize;
    let kernel_ms = args.get(2).copied().unwrap_or(200.0);
    if gpulab::backend::cuda::load::driver_present().is_err() {
        eprintln!("no CUDA driver");
        std::process::exit(3);
    }
    let (mut dev, mut ctx, mut name) = (0, std::ptr::null_mut(), [0u8; 256]);
    let (mut cc0, mut cc1, mut sms, mut khz, mut drv) = (0, 0, 0, 0, 0);
    // SAFETY: the documented start-up sequence with valid out-pointers.
    unsafe {
        ck(sys::cuInit(0), "cuInit");
        ck(sys::cuDeviceGet(&mut dev, 0), "cuDeviceGet");
        let _ = sys::cuDeviceGetName(name.as_mut_ptr().cast(), 256, dev);
        use sys::CUdevice_attribute as A;
        let _ = sys::cuDeviceGetAttribute(
            &mut cc0,
            A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
            dev,
        );
        let _ = sys::cuDeviceGetAttribute(
            &mut cc1,
            A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
            dev,
        );
        let _ =
            sys::cuDeviceGetAttribute(&mut sms, A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
        let _ = sys::cuDeviceGetAttribute(&mut khz, A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev);
        let _ = sys::cuDriverGetVersion(&mut drv);
        ck(sys::cuDevicePrimaryCtxRetain(&mut ctx, dev), "ctx");
        ck(sys::cuCtxSetCurrent(ctx), "ctx current");
    }
    let end = name.iter().position(|&b| b == 0).unwrap_or(0);
    let key = spin::PtxKey {
        device: String::from_utf8_lossy(&name[..end]).into_owned(),
        cc: (cc0, cc1),
        driver: drv,
    };
    let ptx = match spin::ptx(&key, spin::Module::Lab) {
        Ok((p, _)) => p,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(4);
        }
    };
    let Ok((_m, funcs)) = spin::load(&ptx, spin::Module::Lab) else {
        eprintln!("module load failed");
        std::process::exit(4);
    };
    let Some(&(_, func)) = funcs.iter().find(|(n, _)| *n == "spin") else {
        eprintln!("the module has no spin kernel");
        std::process::exit(4);
    };
    // Same conversion as gpulab, without its calibration: the kernel's length only
    // needs to be comparable, the host times of the calls are what is measured.
    let cycles = (kernel_ms * f64::from(khz)) as i64;
    let mut out = Vec::new();
    for variant in ["free-used", "after-device-sync"] {
        for _ in 0..reps {
            let (mut s, mut p) = (std::ptr::null_mut(), 0u64);
            // SAFETY: valid out-pointers, live handles, in the order the lab uses them.
            unsafe {
                timed(&mut out, &format!("{variant} cudaStreamCreate"), || {
                    sys::cuStreamCreate(&mut s, 0)
                });
                timed(&mut out, &format!("{variant} cudaMalloc"), || {
                    sys::cuMemAlloc_v2(&mut p, size)
                });
                let t = Instant::now();
                // SAFETY: loaded function, live stream, `p` holds `size` bytes.
                if let Err(e) = spin::launch(func, s, sms as u32, &[(p, size as u64)], Some(cycles))
                {
                    eprintln!("launch: {e}");
                    std::process::exit(4);
                }
                out.push((
                    format!("{variant} cudaLaunchKernel"),
                    t.elapsed().as_secs_f64() * 1e3,
                ));
                if variant == "free-used" {
                    timed(&mut out, &format!("{variant} cudaFree"), || {
                        sys::cuMemFree_v2(p)
                    });
                    timed(
                        &mut out,
                        &format!("{variant} cudaDeviceSynchronize"),
                        || sys::cuCtxSynchronize(),
                    );
                } else {
                    timed(
                        &mut out,
                        &format!("{variant} cudaDeviceSynchronize"),
                        || sys::cuCtxSynchronize(),
                    );
                    timed(&mut out, &format!("{variant} cudaFree"), || {
                        sys::cuMemFree_v2(p)
                    });
                }
                timed(&mut out, &format!("{variant} cudaStreamDestroy"), || {
                    sys::cuStreamDestroy_v2(s)
                });
            }
        }
    }
    let mut names: Vec<&String> = Vec::new();
    for (n, _) in &out {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    for n in names {
        let v: Vec<f64> = out
            .iter()
            .filter(|(m, _)| m == n)
            .map(|(_, t)| *t)
            .collect();
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        println!("{n} {mean:.4} {min:.4}");
    }
}
