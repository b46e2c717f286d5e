//! The CUDA kernels of `labs/kernels/*.cu`: compiled together at run time with
//! NVRTC for the device's compute capability, their PTX cached per device and
//! driver under `$XDG_CACHE_HOME/gpulab/`, loaded once when the backend opens. The
//! timed ones (`spin`, `spin2`) count SM clock cycles, calibrated so `N ms` means
//! N ms; the calibration is cached beside the PTX (a run with a cached PTX and
//! calibration never loads NVRTC nor spends 60 ms spinning: #12's run latency).

use std::ffi::c_void;
use std::path::PathBuf;

use cudarc::driver::{result, sys};

use super::load::GPULAB_BAD_OPERANDS;
use crate::DriverError;
use gpulab_events::api::KERNELS;

/// Every kernel's source but the heap's, in one module, so one compile and one
/// load serve all.
pub const SOURCE: &str = concat!(
    include_str!("../../kernels/spin.cu"),
    "\n",
    include_str!("../../kernels/spin2.cu"),
    "\n",
    include_str!("../../kernels/copy.cu"),
    "\n",
    include_str!("../../kernels/pattern.cu"),
);

/// The heap kernel's source, a module of its own: a module whose code calls
/// `malloc` makes the driver carve out the device heap when it is loaded, so
/// gpulab loads it only at the heap kernel's first launch, as a program's
/// lazily loaded module would be (no other lab's memory counts a heap).
pub const HEAP_SOURCE: &str = include_str!("../../kernels/heap.cu");

/// gpulab's two CUDA modules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Module {
    /// Loaded at open: every kernel that needs no device heap.
    Lab,
    /// Loaded at the first launch of a kernel that calls `malloc`.
    Heap,
}

impl Module {
    pub fn source(self) -> &'static str {
        match self {
            Module::Lab => SOURCE,
            Module::Heap => HEAP_SOURCE,
        }
    }

    /// The kernels this module defines.
    pub fn kernels(self) -> impl Iterator<Item = &'static gpulab_events::api::KernelSpec> {
        KERNELS
            .iter()
            .filter(move |k| k.device_heap == (self == Module::Heap))
    }

    fn prefix(self) -> &'static str {
        match self {
            Module::Lab => "spin",
            Module::Heap => "heap",
        }
    }
}

/// The loaded module's functions, one per kernel of the module, in `KERNELS` order.
pub type Functions = Vec<(&'static str, sys::CUfunction)>;
/// Threads per block; the grid has one block per SM, so two spin kernels on two
/// streams can run side by side (an SM holds many such blocks).
pub const BLOCK: u32 = 128;

/// Everything the compiled PTX depends on; two runs with equal keys share a file.
/// NVRTC's version is not in it: a PTX this driver loaded once it loads again,
/// and leaving it out lets a cached run skip loading NVRTC (tens of MB) at all.
/// A cached PTX the driver refuses is compiled again (`CudaBackend::open`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PtxKey {
    pub device: String,
    pub cc: (i32, i32),
    pub driver: i32,
}

impl PtxKey {
    /// `spin-<device>-sm90-drv13000-<source hash>.ptx` (`heap-…` for the heap's module)
    pub fn file_name(&self, module: Module) -> String {
        format!("{}.ptx", self.stem(module))
    }

    /// The spin calibration's file for a device with this clock rate and SM
    /// count: `spin-<device>-sm90-drv13000-<source hash>-1980000khz-132sm.cal`.
    pub fn calibration_name(&self, cal: &Calibration) -> String {
        format!(
            "{}-{}khz-{}sm.cal",
            self.stem(Module::Lab),
            cal.clock_khz.round() as i64,
            cal.sms
        )
    }

    fn stem(&self, module: Module) -> String {
        let dev: String = self
            .device
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        format!(
            "{}-{dev}-sm{}{}-drv{}-{:016x}",
            module.prefix(),
            self.cc.0,
            self.cc.1,
            self.driver,
            fnv1a(module.source().as_bytes())
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
    gpulab_host::dirs::cache().map(|d| d.join("cuda"))
}

/// The PTX of `module` for `key`: from the cache, else compiled with NVRTC and
/// written back (a cache that cannot be written only costs the next run a compile).
pub fn ptx(key: &PtxKey, module: Module) -> Result<(String, bool), String> {
    let path = cache_dir().map(|d| d.join(key.file_name(module)));
    if let Some(p) = &path
        && let Ok(text) = std::fs::read_to_string(p)
        && module
            .kernels()
            .all(|k| text.contains(&format!(".entry {}(", k.name)))
    {
        return Ok((text, true));
    }
    super::load::nvrtc_present().map_err(|e| e.to_string())?;
    let opts = cudarc::nvrtc::CompileOptions {
        options: vec![key.arch()],
        ..Default::default()
    };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(module.source(), opts)
        .map_err(|e| format!("NVRTC could not compile labs/kernels/*.cu: {e:?}"))?;
    let text = ptx.to_src();
    if let Some(p) = &path {
        // Whole or not at all: a second run compiling at the same time, or one
        // killed mid-write, never leaves a half PTX file for the next to load.
        let _ = gpulab_host::dirs::write_atomic(p, text.as_bytes());
    }
    Ok((text, false))
}

/// Forgets the cached PTX of `module` for `key` (the driver refused it).
pub fn forget_ptx(key: &PtxKey, module: Module) {
    if let Some(d) = cache_dir() {
        let _ = std::fs::remove_file(d.join(key.file_name(module)));
    }
}

/// A cached calibration factor: within the range `calibrate` clamps to, else none.
pub fn cached_factor(key: &PtxKey, cal: &Calibration) -> Option<(f64, PathBuf)> {
    let path = cache_dir()?.join(key.calibration_name(cal));
    let factor: f64 = std::fs::read_to_string(&path).ok()?.trim().parse().ok()?;
    (factor.is_finite() && (0.05..=20.0).contains(&factor)).then_some((factor, path))
}

/// Keeps a calibration factor for the next run (whole or not at all).
pub fn store_factor(key: &PtxKey, cal: &Calibration) -> Option<PathBuf> {
    let path = cache_dir()?.join(key.calibration_name(cal));
    gpulab_host::dirs::write_atomic(&path, format!("{}\n", cal.factor).as_bytes()).ok()?;
    Some(path)
}

/// Whether a timed kernel asked for `asked_ms` and measured `ms` says the
/// calibration no longer fits this device (its clocks were changed): off by more
/// than 10% on a kernel long enough to tell (5 ms).
pub fn calibration_is_off(asked_ms: f64, ms: f64) -> bool {
    asked_ms >= 5.0 && ((ms / asked_ms) - 1.0).abs() > 0.10
}

/// Loads `ptx`, the PTX of `module`, into the current context and returns
/// every kernel's function.
pub fn load(ptx: &str, module: Module) -> Result<(sys::CUmodule, Functions), DriverError> {
    let image = std::ffi::CString::new(ptx).map_err(|_| DriverError {
        code: GPULAB_BAD_OPERANDS,
        name: "GPULAB_BAD_OPERANDS (PTX with a NUL byte)".into(),
    })?;
    // SAFETY: `image` is a NUL-terminated PTX text that lives across the call.
    let loaded = unsafe { result::module::load_data(image.as_ptr().cast()) }?;
    let mut funcs = Vec::with_capacity(KERNELS.len());
    for k in module.kernels() {
        let name = std::ffi::CString::new(k.name).map_err(|_| DriverError {
            code: GPULAB_BAD_OPERANDS,
            name: "GPULAB_BAD_OPERANDS (kernel name with a NUL byte)".into(),
        })?;
        // SAFETY: `loaded` was just loaded.
        let func = unsafe { result::module::get_function(loaded, name) }?;
        funcs.push((k.name, func));
    }
    Ok((loaded, funcs))
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
        }
    }

    fn cal(clock_khz: f64, sms: u32) -> Calibration {
        Calibration {
            clock_khz,
            factor: 1.0,
            sms,
        }
    }

    #[test]
    fn ptx_cache_key_names_device_arch_and_driver() {
        let name = key().file_name(Module::Lab);
        assert!(name.starts_with("spin-NVIDIA_H100_80GB_HBM3-sm90-drv13000-"));
        assert!(name.ends_with(".ptx"));
        assert_eq!(
            name,
            key().file_name(Module::Lab),
            "the key is deterministic"
        );
        assert_eq!(key().arch(), "--gpu-architecture=compute_90");
    }

    #[test]
    fn any_change_of_driver_or_device_changes_the_key() {
        let base = key().file_name(Module::Lab);
        let mut k = key();
        k.driver = 12080;
        assert_ne!(k.file_name(Module::Lab), base);
        let mut k = key();
        k.cc = (8, 0);
        assert_ne!(k.file_name(Module::Lab), base);
    }

    #[test]
    fn the_calibration_is_kept_per_clock_rate_and_sm_count() {
        let base = key().calibration_name(&cal(1_980_000.0, 132));
        assert!(base.ends_with("-1980000khz-132sm.cal"), "{base}");
        assert!(base.starts_with(key().file_name(Module::Lab).trim_end_matches(".ptx")));
        assert!(key().file_name(Module::Heap).starts_with("heap-"));
        assert_ne!(key().file_name(Module::Heap), key().file_name(Module::Lab));
        assert_ne!(key().calibration_name(&cal(1_755_000.0, 132)), base);
        assert_ne!(key().calibration_name(&cal(1_980_000.0, 114)), base);
        let mut k = key();
        k.driver = 12080;
        assert_ne!(k.calibration_name(&cal(1_980_000.0, 132)), base);
    }

    #[test]
    fn a_kernel_far_from_its_request_says_the_calibration_is_off() {
        assert!(!calibration_is_off(200.0, 200.6));
        assert!(!calibration_is_off(200.0, 215.0));
        assert!(calibration_is_off(200.0, 230.0));
        assert!(calibration_is_off(200.0, 150.0));
        // Too short to tell: launch overheads are a large part of it.
        assert!(!calibration_is_off(1.0, 2.0));
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
        for module in [Module::Lab, Module::Heap] {
            for k in module.kernels() {
                let entry = format!("extern \"C\" __global__ void {}(", k.name);
                assert!(module.source().contains(&entry), "{}", k.name);
            }
        }
        // Only the heap's module calls `malloc`: loading the other takes no heap.
        assert!(!SOURCE.contains("malloc("));
        assert!(HEAP_SOURCE.contains("malloc("));
        assert_eq!(
            Module::Lab.kernels().count() + Module::Heap.kernels().count(),
            KERNELS.len()
        );
    }
}
