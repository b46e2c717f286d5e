//! The CUDA kernels of `labs/kernels/*.cu`: compiled together at run time with
//! NVRTC for the device's compute capability, their PTX cached per device and
//! driver under `$XDG_CACHE_HOME/gpulab/`, loaded once when the backend opens. The
//! timed ones (`spin`, `spin2`) count SM clock cycles, calibrated so `N ms` means
//! N ms.

use std::ffi::c_void;
use std::path::PathBuf;

use cudarc::driver::{result, sys};

use super::load::GPULAB_BAD_OPERANDS;
use crate::backend::DriverError;
use crate::lab::api::KERNELS;

/// Every kernel's source in one module, so one compile and one load serve all.
pub const SOURCE: &str = concat!(
    include_str!("../../../labs/kernels/spin.cu"),
    "\n",
    include_str!("../../../labs/kernels/spin2.cu"),
    "\n",
    include_str!("../../../labs/kernels/copy.cu"),
    "\n",
    include_str!("../../../labs/kernels/pattern.cu"),
);

/// The loaded module's functions, one per entry of `KERNELS`, in that order.
pub type Functions = Vec<(&'static str, sys::CUfunction)>;
/// Threads per block; the grid has one block per SM, so two spin kernels on two
/// streams can run side by side (an SM holds many such blocks).
pub const BLOCK: u32 = 128;

/// Everything the compiled PTX depends on; two runs with equal keys share a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PtxKey {
    pub device: String,
    pub cc: (i32, i32),
    pub driver: i32,
    pub nvrtc: (i32, i32),
}

impl PtxKey {
    /// `spin-<device>-sm90-drv13000-nvrtc13.0-<source hash>.ptx`
    pub fn file_name(&self) -> String {
        let dev: String = self
            .device
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        format!(
            "spin-{dev}-sm{}{}-drv{}-nvrtc{}.{}-{:016x}.ptx",
            self.cc.0,
            self.cc.1,
            self.driver,
            self.nvrtc.0,
            self.nvrtc.1,
            fnv1a(SOURCE.as_bytes())
        )
    }

    pub fn arch(&self) -> String {
        format!("--gpu-architecture=compute_{}{}", self.cc.0, self.cc.1)
    }
}

/// A stable hash (std's `DefaultHasher` may change between Rust releases).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// `$XDG_CACHE_HOME/gpulab/cuda`, else `~/.cache/gpulab/cuda`.
pub fn cache_dir() -> Option<PathBuf> {
    crate::dirs::cache().map(|d| d.join("cuda"))
}

/// The PTX for `key`: from the cache, else compiled with NVRTC and written back (a
/// cache that cannot be written only costs the next run a compile).
pub fn ptx(key: &PtxKey) -> Result<(String, bool), String> {
    let path = cache_dir().map(|d| d.join(key.file_name()));
    if let Some(p) = &path
        && let Ok(text) = std::fs::read_to_string(p)
        && KERNELS
            .iter()
            .all(|k| text.contains(&format!(".entry {}(", k.name)))
    {
        return Ok((text, true));
    }
    let opts = cudarc::nvrtc::CompileOptions {
        options: vec![key.arch()],
        ..Default::default()
    };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(SOURCE, opts)
        .map_err(|e| format!("NVRTC could not compile labs/kernels/*.cu: {e:?}"))?;
    let text = ptx.to_src();
    if let Some(p) = &path {
        // Whole or not at all: a second run compiling at the same time, or one
        // killed mid-write, never leaves a half PTX file for the next to load.
        let _ = crate::dirs::write_atomic(p, text.as_bytes());
    }
    Ok((text, false))
}

/// The NVRTC version, (major, minor).
pub fn nvrtc_version() -> (i32, i32) {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two valid out-pointers; the caller checked the library loads.
    let _ = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    (major, minor)
}

/// Loads `ptx` into the current context and returns every kernel's function.
pub fn load(ptx: &str) -> Result<(sys::CUmodule, Functions), DriverError> {
    let image = std::ffi::CString::new(ptx).map_err(|_| DriverError {
        code: GPULAB_BAD_OPERANDS,
        name: "GPULAB_BAD_OPERANDS (PTX with a NUL byte)".into(),
    })?;
    // SAFETY: `image` is a NUL-terminated PTX text that lives across the call.
    let module = unsafe { result::module::load_data(image.as_ptr().cast()) }?;
    let mut funcs = Vec::with_capacity(KERNELS.len());
    for k in KERNELS {
        let name = std::ffi::CString::new(k.name).map_err(|_| DriverError {
            code: GPULAB_BAD_OPERANDS,
            name: "GPULAB_BAD_OPERANDS (kernel name with a NUL byte)".into(),
        })?;
        // SAFETY: `module` was just loaded.
        let func = unsafe { result::module::get_function(module, name) }?;
        funcs.push((k.name, func));
    }
    Ok((module, funcs))
}

/// Milliseconds to SM clock cycles: the clock rate the device reports, corrected by
/// the ratio a calibration launch measured (boost clocks differ from the rate).
#[derive(Debug, Clone, Copy)]
pub struct Calibration {
    pub clock_khz: f64,
    pub factor: f64,
    pub sms: u32,
}

impl Calibration {
    pub fn cycles(&self, ms: f64) -> i64 {
        (ms.max(0.0) * self.clock_khz * self.factor).round() as i64
    }
}

/// Enqueues one launch of `func` on `stream` in the layout every `.cu` kernel
/// shares: each buffer's pointer, then each buffer's size in u32 words, then the
/// clock cycles for a timed kernel.
///
/// # Safety
/// `func` must be a function of the loaded module whose signature has that
/// layout for `bufs.len()` buffers and `cycles`, and `stream` a live stream (or
/// null) of the current context; each buffer must hold its bytes (or be freed,
/// which is a lab's point).
pub unsafe fn launch(
    func: sys::CUfunction,
    stream: sys::CUstream,
    grid: u32,
    bufs: &[(sys::CUdeviceptr, u64)],
    cycles: Option<i64>,
) -> Result<(), DriverError> {
    // Pointers, u64 word counts and the i64 cycle count are all 8 bytes; the
    // driver reads each parameter through its pointer, with the kernel's type.
    let mut values: Vec<u64> = bufs.iter().map(|&(p, _)| p).collect();
    values.extend(bufs.iter().map(|&(_, bytes)| bytes / 4));
    values.extend(cycles.map(|c| c as u64));
    let mut params: Vec<*mut c_void> = values.iter_mut().map(|v| (v as *mut u64).cast()).collect();
    // SAFETY: `params` points to one 8-byte value per parameter of `func`, alive
    // and unmoved across the call (the driver copies them at launch).
    unsafe {
        result::launch_kernel(
            func,
            (grid.max(1), 1, 1),
            (BLOCK, 1, 1),
            0,
            stream,
            &mut params,
        )
    }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> PtxKey {
        PtxKey {
            device: "NVIDIA H100 80GB HBM3".into(),
            cc: (9, 0),
            driver: 13000,
            nvrtc: (13, 0),
        }
    }

    #[test]
    fn ptx_cache_key_names_device_arch_driver_and_nvrtc() {
        let name = key().file_name();
        assert!(name.starts_with("spin-NVIDIA_H100_80GB_HBM3-sm90-drv13000-nvrtc13.0-"));
        assert!(name.ends_with(".ptx"));
        assert_eq!(name, key().file_name(), "the key is deterministic");
        assert_eq!(key().arch(), "--gpu-architecture=compute_90");
    }

    #[test]
    fn any_change_of_driver_or_device_changes_the_key() {
        let base = key().file_name();
        let mut k = key();
        k.driver = 12080;
        assert_ne!(k.file_name(), base);
        let mut k = key();
        k.cc = (8, 0);
        assert_ne!(k.file_name(), base);
        let mut k = key();
        k.nvrtc = (12, 9);
        assert_ne!(k.file_name(), base);
    }

    #[test]
    fn cache_lives_under_xdg_cache_home() {
        // Read-only check of the rule, without touching the environment.
        let absolute = |v: &std::ffi::OsStr| std::path::Path::new(v).is_absolute();
        if let Some(xdg) = std::env::var_os("XDG_CACHE_HOME").filter(|v| absolute(v)) {
            assert_eq!(
                cache_dir(),
                Some(PathBuf::from(xdg).join("gpulab").join("cuda"))
            );
        } else if let Some(home) = std::env::var_os("HOME") {
            assert_eq!(
                cache_dir(),
                Some(PathBuf::from(home).join(".cache/gpulab/cuda"))
            );
        }
    }

    #[test]
    fn milliseconds_become_cycles() {
        let cal = Calibration {
            clock_khz: 1_980_000.0,
            factor: 1.0,
            sms: 132,
        };
        assert_eq!(cal.cycles(1.0), 1_980_000);
        assert_eq!(cal.cycles(-5.0), 0);
    }

    #[test]
    fn the_kernel_source_touches_its_buffer_and_reads_the_clock() {
        assert!(SOURCE.contains("clock64()"));
        assert!(SOURCE.contains("buf[i] ="));
        for k in KERNELS {
            assert!(
                SOURCE.contains(&format!("extern \"C\" __global__ void {}(", k.name)),
                "{}",
                k.name
            );
        }
    }
}
