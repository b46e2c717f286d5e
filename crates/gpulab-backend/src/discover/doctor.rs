//! `gpulab doctor`: what gpulab can reach on this machine (OpenCL, CUDA, NVML) and,
//! for anything missing, how to fix it. Only asks questions; creates no context.

use std::ffi::{c_char, c_int, c_uint};

use serde::{Deserialize, Serialize};

use super::{ClDevice, IcdState, icd_state, opencl_devices};
use gpulab_host::machine::{LoaderPlan, Loaders, cupti};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    Missing,
    Error,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Check {
    pub name: String,
    pub status: Status,
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Section {
    pub name: String,
    pub checks: Vec<Check>,
}

/// What `gpulab doctor --json` prints, and what the run source reads back.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DoctorReport {
    pub sections: Vec<Section>,
    pub opencl_devices: Vec<ClDevice>,
    /// CUDA devices by ordinal, as `--device N` counts them for a CUDA lab.
    pub cuda_devices: Vec<CudaDevice>,
    pub icd: IcdState,
}

/// A CUDA device the driver lists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CudaDevice {
    /// Its ordinal (`cuDeviceGet`), the index `--device` takes for a CUDA lab.
    pub ordinal: u32,
    pub name: String,
}

fn check(name: &str, status: Status, detail: impl Into<String>, fix: Option<&str>) -> Check {
    Check {
        name: name.into(),
        status,
        detail: detail.into(),
        fix: fix.map(String::from),
    }
}

const FIX_PLATFORM: &str = "install an OpenCL platform: `apt-get install pocl-opencl-icd \
    ocl-icd-libopencl1` (CPU) or the NVIDIA driver";

pub fn doctor() -> DoctorReport {
    let icd = icd_state();
    let (opencl, devices) = opencl_section(&icd);
    let (cuda, cuda_devices) = cuda_section();
    DoctorReport {
        sections: vec![opencl, cuda, nvml_section()],
        opencl_devices: devices,
        cuda_devices,
        icd,
    }
}

/// "No platform", with the vendors directory the loader read (the user's
/// `OCL_ICD_VENDORS` when set) and each `.icd` there it had to skip, and why.
fn no_platform(icd: &IcdState) -> String {
    let dir = match &icd.user_override {
        Some(v) => v.clone(),
        None => format!("vendors dir {}", icd.vendors_dir),
    };
    let mut detail = format!("no OpenCL platform ({dir})");
    for broken in gpulab_host::machine::icd_check::broken_icds() {
        detail.push_str(&format!("; the loader skipped {broken}"));
    }
    detail
}

fn opencl_section(icd: &IcdState) -> (Section, Vec<ClDevice>) {
    let mut checks = Vec::new();
    let mut devices = Vec::new();
    if cl3::is_opencl_runtime_available() {
        checks.push(check(
            "ICD loader",
            Status::Ok,
            "libOpenCL.so.1 loaded",
            None,
        ));
        match opencl_devices() {
            Ok(d) if d.is_empty() => checks.push(check(
                "platforms",
                Status::Missing,
                no_platform(icd),
                Some(FIX_PLATFORM),
            )),
            Ok(d) => {
                let list: Vec<String> = d
                    .iter()
                    .map(|x| {
                        format!(
                            "{}: {} [{}] ({})",
                            x.index,
                            x.name,
                            x.kind.as_str(),
                            x.platform_version
                        )
                    })
                    .collect();
                checks.push(check("devices", Status::Ok, list.join("; "), None));
                devices = d;
            }
            Err(e) => checks.push(check(
                "platforms",
                Status::Error,
                e.to_string(),
                Some(FIX_PLATFORM),
            )),
        }
    } else {
        checks.push(check(
            "ICD loader",
            Status::Missing,
            "libOpenCL.so.1 not found",
            Some(FIX_PLATFORM),
        ));
    }
    checks.push(nvidia_icd_check(icd));
    checks.push(layers_check(&Loaders::find().plan()));
    (
        Section {
            name: "OpenCL".into(),
            checks,
        },
        devices,
    )
}

/// Whether `gpulab watch` can load its agent through the OpenCL loader here.
fn layers_check(plan: &LoaderPlan) -> Check {
    let name = "loader layers (gpulab watch)";
    const FIX: &str = "install ocl-icd 2.3 or later (`apt-get install ocl-icd-libopencl1`), \
        which loads layers";
    match plan {
        LoaderPlan::AsIs(l) => check(
            name,
            Status::Ok,
            format!("{} reads OPENCL_LAYERS", l.path),
            None,
        ),
        LoaderPlan::Preload { instead_of, loader } => check(
            name,
            Status::Ok,
            format!(
                "{} cannot load layers; `gpulab watch` preloads {}, which can",
                instead_of.path, loader.path
            ),
            None,
        ),
        LoaderPlan::NoLayers(l) => check(
            name,
            Status::Missing,
            format!(
                "{} cannot load layers, and no other loader here can",
                l.path
            ),
            Some(FIX),
        ),
        LoaderPlan::NoLoader => check(name, Status::Missing, "no libOpenCL.so.1", Some(FIX)),
    }
}

fn nvidia_icd_check(icd: &IcdState) -> Check {
    let name = "NVIDIA OpenCL ICD";
    let Some(lib) = &icd.nvidia_library else {
        return check(
            name,
            Status::Missing,
            "libnvidia-opencl.so.1 not found (only needed for NVIDIA GPUs)",
            Some(
                "install the NVIDIA driver's OpenCL library (e.g. `libnvidia-compute-<version>`), \
                  or in a container expose it with the NVIDIA container toolkit \
                  (NVIDIA_DRIVER_CAPABILITIES=compute,utility)",
            ),
        );
    };
    if icd.nvidia_registered {
        return check(
            name,
            Status::Ok,
            format!("{lib}, registered in {}", icd.vendors_dir),
            None,
        );
    }
    let system_fix = format!(
        "to register system-wide: echo {lib} > {}/nvidia.icd",
        icd.vendors_dir
    );
    if let Some(dir) = &icd.added_by_gpulab {
        return Check {
            fix: Some(system_fix),
            ..check(
                name,
                Status::Ok,
                format!(
                    "found at {lib} but not registered in {}; gpulab adds it itself \
                         (OCL_ICD_VENDORS={dir})",
                    icd.vendors_dir
                ),
                None,
            )
        };
    }
    let why = match &icd.user_override {
        Some(v) => format!("found at {lib} but not registered, and {v} is set so gpulab leaves it"),
        None => format!("found at {lib} but not registered in {}", icd.vendors_dir),
    };
    Check {
        fix: Some(system_fix),
        ..check(name, Status::Missing, why, None)
    }
}

type CuResult = c_int;

/// The CUDA driver API through raw symbols: doctor must not depend on cudarc,
/// which panics when `libcuda.so.1` is missing.
fn cuda_section() -> (Section, Vec<CudaDevice>) {
    let mut checks = Vec::new();
    // SAFETY: loading libcuda runs its initialisers, as any CUDA program does.
    let lib = match unsafe { libloading::Library::new("libcuda.so.1") } {
        Ok(l) => l,
        Err(e) => {
            checks.push(check(
                "libcuda.so.1",
                Status::Missing,
                format!("libcuda.so.1 not loadable ({e})"),
                Some("install the NVIDIA driver; in a container run with `--gpus all` (NVIDIA container toolkit)"),
            ));
            checks.push(cupti_check(&cupti::find(None)));
            let section = Section {
                name: "CUDA".into(),
                checks,
            };
            return (section, Vec::new());
        }
    };
    checks.push(check("libcuda.so.1", Status::Ok, "loaded", None));
    let mut listed = Vec::new();
    match cuda_devices(&lib) {
        Ok((version, devices)) => {
            checks.push(check(
                "driver",
                Status::Ok,
                format!(
                    "CUDA {}.{} driver API",
                    version / 1000,
                    (version % 1000) / 10
                ),
                None,
            ));
            let status = if devices.is_empty() {
                Status::Missing
            } else {
                Status::Ok
            };
            let fix = devices
                .is_empty()
                .then_some("no CUDA device visible: check `nvidia-smi` and CUDA_VISIBLE_DEVICES");
            let names: Vec<String> = devices
                .iter()
                .map(|d| format!("{}: {}", d.ordinal, d.name))
                .collect();
            checks.push(check("devices", status, names.join("; "), fix));
            listed = devices;
        }
        Err(e) => checks.push(check(
            "cuInit",
            Status::Error,
            e,
            Some("check `nvidia-smi`; the kernel module and the user-space driver must match"),
        )),
    }
    checks.push(cupti_check(&cupti::find(None)));
    let section = Section {
        name: "CUDA".into(),
        checks,
    };
    (section, listed)
}

/// Whether `gpulab watch` can see a CUDA program's calls: a libcupti to give it,
/// the CUPTI API version that library reports, and a tool already injected.
fn cupti_check(found: &[cupti::Cupti]) -> Check {
    let name = "libcupti (gpulab watch)";
    let Some(first) = found.first() else {
        return check(
            name,
            Status::Missing,
            "no libcupti found, so `gpulab watch` cannot see CUDA calls",
            Some(
                "install the CUDA toolkit's CUPTI (`apt-get install cuda-cupti-13-0`) or \
                 `pip install nvidia-cuda-cupti`, set CUDA_HOME, or give `gpulab watch --cupti PATH`",
            ),
        );
    };
    let version = match cupti_api_version(&first.path) {
        Ok(v) => format!("CUPTI API version {v}"),
        Err(e) => format!("not loadable here: {e}"),
    };
    let mut detail = format!("{} ({}; {version})", first.path, first.from);
    if found.len() > 1 {
        detail.push_str(&format!("; {} more found", found.len() - 1));
    }
    if let Ok(theirs) = std::env::var("CUDA_INJECTION64_PATH")
        && !theirs.is_empty()
    {
        detail.push_str(&format!(
            "; CUDA_INJECTION64_PATH is {theirs}, which `gpulab watch` replaces for the program"
        ));
    }
    check(name, Status::Ok, detail, None)
}

/// `cuptiGetVersion` of the library at `path`.
fn cupti_api_version(path: &str) -> Result<u32, String> {
    type GetVersion = unsafe extern "C" fn(*mut u32) -> c_int;
    // SAFETY: loading libcupti runs its initialisers, as a profiled program does.
    let lib = unsafe { libloading::Library::new(path) }.map_err(|e| e.to_string())?;
    // SAFETY: cuptiGetVersion's C type (cupti_version.h).
    let get = unsafe { lib.get::<GetVersion>(b"cuptiGetVersion\0") }.map_err(|e| e.to_string())?;
    let mut v = 0u32;
    // SAFETY: `v` is a writable out-pointer.
    match unsafe { get(&mut v) } {
        0 => Ok(v),
        code => Err(format!("cuptiGetVersion returned {code}")),
    }
}

fn cuda_devices(lib: &libloading::Library) -> Result<(i32, Vec<CudaDevice>), String> {
    type Init = unsafe extern "C" fn(c_uint) -> CuResult;
    type OutInt = unsafe extern "C" fn(*mut c_int) -> CuResult;
    type Get = unsafe extern "C" fn(*mut c_int, c_int) -> CuResult;
    type Name = unsafe extern "C" fn(*mut c_char, c_int, c_int) -> CuResult;
    type ErrName = unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult;
    let sym = |e: libloading::Error| format!("libcuda.so.1 lacks a symbol: {e}");
    // SAFETY: each symbol has the C signature of the CUDA driver API (cuda.h) and the
    // library outlives every use below.
    unsafe {
        let init = lib.get::<Init>(b"cuInit\0").map_err(sym)?;
        let version = lib.get::<OutInt>(b"cuDriverGetVersion\0").map_err(sym)?;
        let count = lib.get::<OutInt>(b"cuDeviceGetCount\0").map_err(sym)?;
        let get = lib.get::<Get>(b"cuDeviceGet\0").map_err(sym)?;
        let name = lib.get::<Name>(b"cuDeviceGetName\0").map_err(sym)?;
        let err_name = lib.get::<ErrName>(b"cuGetErrorName\0").ok();
        let named = |r: CuResult| -> String {
            let mut p: *const c_char = std::ptr::null();
            match &err_name {
                Some(f) if f(r, &mut p) == 0 && !p.is_null() => {
                    format!("{} ({r})", std::ffi::CStr::from_ptr(p).to_string_lossy())
                }
                _ => format!("CUDA error {r}"),
            }
        };
        let r = init(0);
        if r != 0 {
            return Err(format!("cuInit: {}", named(r)));
        }
        let mut v: c_int = 0;
        let r = version(&mut v);
        if r != 0 {
            return Err(format!("cuDriverGetVersion: {}", named(r)));
        }
        let mut n: c_int = 0;
        let r = count(&mut n);
        if r != 0 {
            return Err(format!("cuDeviceGetCount: {}", named(r)));
        }
        let mut devices = Vec::new();
        for i in 0..n {
            let mut dev: c_int = 0;
            let mut buf = [0 as c_char; 256];
            let ordinal = u32::try_from(i).unwrap_or_default();
            if get(&mut dev, i) != 0 || name(buf.as_mut_ptr(), buf.len() as c_int, dev) != 0 {
                devices.push(CudaDevice {
                    ordinal,
                    name: "(name unavailable)".into(),
                });
                continue;
            }
            buf[buf.len() - 1] = 0;
            devices.push(CudaDevice {
                ordinal,
                name: std::ffi::CStr::from_ptr(buf.as_ptr())
                    .to_string_lossy()
                    .into_owned(),
            });
        }
        Ok((v, devices))
    }
}

fn nvml_section() -> Section {
    let mut checks = Vec::new();
    match nvml_wrapper::Nvml::init() {
        Err(e) => checks.push(check(
            "NVML",
            Status::Missing,
            format!("NVML unavailable: {e}"),
            Some(
                "install the NVIDIA driver (libnvidia-ml.so.1); without it gpulab has no \
                  device-memory telemetry for NVIDIA GPUs",
            ),
        )),
        Ok(nvml) => {
            let driver = nvml
                .sys_driver_version()
                .unwrap_or_else(|e| format!("? ({e})"));
            checks.push(check("NVML", Status::Ok, format!("driver {driver}"), None));
            let n = nvml.device_count().unwrap_or(0);
            for i in 0..n {
                let detail = match nvml.device_by_index(i) {
                    Ok(d) => format!(
                        "{} bus {} memory {}",
                        d.name().unwrap_or_default(),
                        d.pci_info().map(|p| p.bus_id).unwrap_or_default(),
                        d.memory_info()
                            .map(|m| format!("{} MiB", m.total >> 20))
                            .unwrap_or_default()
                    ),
                    Err(e) => format!("unreadable: {e}"),
                };
                checks.push(check(&format!("device {i}"), Status::Ok, detail, None));
            }
        }
    }
    Section {
        name: "NVML".into(),
        checks,
    }
}

impl DoctorReport {
    pub fn render_text(&self) -> String {
        let mut s = String::new();
        for sec in &self.sections {
            s.push_str(&sec.name);
            s.push('\n');
            for c in &sec.checks {
                let mark = match c.status {
                    Status::Ok => "ok     ",
                    Status::Missing => "missing",
                    Status::Error => "error  ",
                };
                s.push_str(&format!("  {mark}  {}: {}\n", c.name, c.detail));
                if let Some(fix) = &c.fix {
                    s.push_str(&format!("           fix: {fix}\n"));
                }
            }
        }
        s
    }

    /// True when at least one backend can run a lab.
    pub fn any_device(&self) -> bool {
        !self.opencl_devices.is_empty()
            || self.sections.iter().any(|s| {
                s.name == "CUDA"
                    && s.checks
                        .iter()
                        .any(|c| c.name == "devices" && c.status == Status::Ok)
            })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn doctor_reports_every_section_with_fixes_for_what_is_missing() {
        let r = super::doctor();
        let names: Vec<&str> = r.sections.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["OpenCL", "CUDA", "NVML"]);
        for c in r.sections.iter().flat_map(|s| &s.checks) {
            if c.status != super::Status::Ok {
                assert!(c.fix.is_some(), "{} lacks a fix", c.name);
            }
        }
        let text = r.render_text();
        assert!(text.contains("OpenCL") && text.contains("NVML"));
        let json = serde_json::to_string(&r).unwrap_or_default();
        assert!(json.contains("\"status\""));
        println!("{text}");
    }
}
