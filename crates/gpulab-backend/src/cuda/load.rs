//! Before cudarc is touched: is the driver library there at all? cudarc panics on a
//! missing library or symbol, so gpulab looks first (libloading) and still catches
//! a panic at every call into it. Also the names of driver status codes, and the
//! conversion of cudarc's result-layer errors into them.

use std::panic::{AssertUnwindSafe, catch_unwind};

use cudarc::driver::sys::CUresult;

use crate::{BackendError, DriverError};

/// The driver library cudarc loads (`libcuda.so.1` on Linux).
pub const DRIVER_LIB: &str = "libcuda.so.1";

/// `Ok` when the CUDA driver library can be loaded; the error says why not.
pub fn driver_present() -> Result<(), BackendError> {
    // SAFETY: loading libcuda runs its initialisers, as any CUDA program does; the
    // handle is dropped at once (cudarc keeps its own).
    match unsafe { libloading::Library::new(DRIVER_LIB) } {
        Ok(_) => Ok(()),
        Err(e) => Err(BackendError::Unavailable {
            what: "no CUDA driver".into(),
            why: format!(
                "{DRIVER_LIB} could not be loaded ({e}); install the NVIDIA driver on a machine with an NVIDIA GPU"
            ),
        }),
    }
}

/// `Ok(name)` of the first NVRTC library cudarc would find, or why none loads.
pub fn nvrtc_present() -> Result<String, BackendError> {
    let candidates = cudarc::get_lib_name_candidates("nvrtc");
    for name in &candidates {
        // SAFETY: as for the driver: loading runs the library's initialisers only.
        if unsafe { libloading::Library::new(name) }.is_ok() {
            return Ok(name.clone());
        }
    }
    Err(BackendError::Unavailable {
        what: "no NVRTC".into(),
        why: format!(
            "none of {} could be loaded; the spin kernel is compiled at run time with NVRTC (CUDA toolkit or the nvidia-cuda-nvrtc package)",
            candidates.join(", ")
        ),
    })
}

/// Runs `f`, turning a panic inside cudarc (a symbol missing from an old driver)
/// into a driver error instead of a dead worker.
pub fn guard<T>(what: &str, f: impl FnOnce() -> Result<T, DriverError>) -> Result<T, DriverError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(DriverError {
                code: GPULAB_DRIVER_PANIC,
                name: format!("GPULAB_DRIVER_PANIC ({what}: {msg})"),
            })
        }
    }
}

/// gpulab's own status codes, outside the driver's range.
pub const GPULAB_DRIVER_PANIC: i64 = -90_001;
pub const GPULAB_BAD_OPERANDS: i64 = -90_002;

/// The status's name as cuda.h spells it (`CUDA_ERROR_INVALID_VALUE`).
pub fn error_name(r: CUresult) -> String {
    format!("{r:?}")
}

pub fn driver_error(r: CUresult) -> DriverError {
    DriverError {
        code: r as i64,
        name: error_name(r),
    }
}

/// cudarc's result layer answers with its own error type; a lab line reports the
/// status under its cuda.h name, as every other driver error.
impl From<cudarc::driver::DriverError> for DriverError {
    fn from(e: cudarc::driver::DriverError) -> Self {
        driver_error(e.0)
    }
}

/// Errors after which the context is unusable: every later call in the process
/// returns the same code (cuda.h: "the process must be terminated and relaunched").
pub fn is_sticky(code: i64) -> bool {
    matches!(
        code,
        700 | 702 | 710 | 714 | 715 | 716 | 717 | 718 | 719 | 999
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_print_their_cuda_names() {
        assert_eq!(
            error_name(CUresult::CUDA_ERROR_INVALID_VALUE),
            "CUDA_ERROR_INVALID_VALUE"
        );
        let e = driver_error(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS);
        assert_eq!(
            (e.code, e.name.as_str()),
            (700, "CUDA_ERROR_ILLEGAL_ADDRESS")
        );
        assert!(CUresult::CUDA_SUCCESS.result().is_ok());
        let not_ready = CUresult::CUDA_ERROR_NOT_READY
            .result()
            .map_err(DriverError::from);
        assert_eq!(
            not_ready.map_err(|e| (e.code, e.name)),
            Err((600, "CUDA_ERROR_NOT_READY".into()))
        );
    }

    #[test]
    fn only_context_killing_errors_are_sticky() {
        assert!(is_sticky(700));
        assert!(is_sticky(719));
        assert!(!is_sticky(1)); // CUDA_ERROR_INVALID_VALUE: the context lives on
        assert!(!is_sticky(600)); // CUDA_ERROR_NOT_READY
        assert!(!is_sticky(2)); // CUDA_ERROR_OUT_OF_MEMORY
    }

    #[test]
    fn a_panic_becomes_a_driver_error() {
        let r: Result<(), DriverError> = guard("test", || panic!("Missing symbol cuFoo"));
        let e = r.err().map(|e| e.name).unwrap_or_default();
        assert!(e.contains("Missing symbol cuFoo"), "{e}");
    }
}
