//! Finds OpenCL platforms and devices, the CUDA driver and NVML; `doctor` reports
//! what is missing and how to fix it. Never keeps an API object alive: discovery
//! only asks questions.

mod doctor;

pub use doctor::{Check, CudaDevice, DoctorReport, Section, Status, doctor};
pub use gpulab_host::machine::icd::{IcdState, icd_state, prepare_icd_environment};

use cl3::device::{CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_CPU, CL_DEVICE_TYPE_GPU, cl_device_type};
use cl3::types::cl_device_id;
use opencl3::device::Device;
use opencl3::platform::{Platform, get_platforms};
use serde::{Deserialize, Serialize};

use super::opencl::errors;
use super::{BackendError, DeviceKind};

/// One OpenCL device as `gpulab doctor` and `--device` list them.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ClDevice {
    /// Position in this list; `--device 1` picks it.
    pub index: usize,
    pub platform: String,
    pub platform_version: String,
    pub name: String,
    pub kind: DeviceKind,
    pub vendor: String,
    pub driver_version: String,
    pub global_mem_bytes: u64,
    /// `OpenCL 3.0 CUDA` etc. (CL_DEVICE_VERSION).
    pub opencl_version: String,
}

/// A listed device with the raw ids the backend opens it by.
pub(crate) struct Found {
    pub dev: ClDevice,
    pub device: cl_device_id,
}

pub fn kind_of_type(t: cl_device_type) -> DeviceKind {
    if t & CL_DEVICE_TYPE_GPU != 0 {
        DeviceKind::Gpu
    } else if t & CL_DEVICE_TYPE_CPU != 0 {
        DeviceKind::Cpu
    } else {
        DeviceKind::Other
    }
}

/// Every device of every platform, in the order `--device N` counts them.
pub fn opencl_devices() -> Result<Vec<ClDevice>, BackendError> {
    Ok(enumerate()?.into_iter().map(|f| f.dev).collect())
}

/// ocl-icd's answer when the loader found no platform at all.
const CL_PLATFORM_NOT_FOUND_KHR: i32 = -1001;

/// Held while the platforms and devices are listed and described. PoCL 5
/// initialises its devices on first use without guarding a reader: a thread
/// that asks a device's name while another lists the devices may read a name
/// not set yet (`strlen(NULL)` in `clGetDeviceInfo`, or no platform at all),
/// seen in half the runs of the unit tests on 2 loaded cores.
static DISCOVERY: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub(crate) fn enumerate() -> Result<Vec<Found>, BackendError> {
    let _one_at_a_time = DISCOVERY.lock().unwrap_or_else(|e| e.into_inner());
    let platforms = match get_platforms() {
        Ok(p) => p,
        Err(e) if e.0 == CL_PLATFORM_NOT_FOUND_KHR => Vec::new(),
        Err(e) if e.0 == cl3::error_codes::DLOPEN_RUNTIME_LOAD_FAILED => {
            return Err(BackendError::Unavailable {
                what: "OpenCL".into(),
                why: "libOpenCL.so.1 (the ICD loader) could not be loaded; install \
                      ocl-icd-libopencl1 and an OpenCL platform (`gpulab doctor`)"
                    .into(),
            });
        }
        Err(e) => {
            return Err(BackendError::Unavailable {
                what: "OpenCL".into(),
                why: format!("clGetPlatformIDs failed: {}", errors::name(e.0)),
            });
        }
    };
    let mut found = Vec::new();
    for p in platforms {
        let ids = match p.get_devices(CL_DEVICE_TYPE_ALL) {
            Ok(ids) => ids,
            Err(_) => continue, // a platform without devices (CL_DEVICE_NOT_FOUND)
        };
        for id in ids {
            let dev = describe(found.len(), &p, id);
            found.push(Found { dev, device: id });
        }
    }
    Ok(found)
}

fn describe(index: usize, p: &Platform, id: cl_device_id) -> ClDevice {
    let d = Device::new(id);
    ClDevice {
        index,
        platform: p.name().unwrap_or_default().trim().to_string(),
        platform_version: p.version().unwrap_or_default().trim().to_string(),
        name: d.name().unwrap_or_default().trim().to_string(),
        kind: d.dev_type().map(kind_of_type).unwrap_or(DeviceKind::Other),
        vendor: d.vendor().unwrap_or_default().trim().to_string(),
        driver_version: d.driver_version().unwrap_or_default().trim().to_string(),
        global_mem_bytes: d.global_mem_size().unwrap_or(0),
        opencl_version: d.version().unwrap_or_default().trim().to_string(),
    }
}

/// The device a selector names: an index into `opencl_devices()`, a
/// case-insensitive substring of the device name, or its type as `doctor`
/// prints it (`cpu`, `gpu`); `None` picks the first GPU, else the first device.
pub(crate) fn select<'a>(
    all: &'a [Found],
    selector: Option<&str>,
) -> Result<&'a Found, BackendError> {
    let devices: Vec<&ClDevice> = all.iter().map(|f| &f.dev).collect();
    match pick(&devices, selector) {
        Ok(i) => Ok(&all[i]),
        Err(mut why) => {
            // With no device at all, an `.icd` the loader skipped is the likely why.
            if devices.is_empty() {
                for broken in gpulab_host::machine::icd_check::broken_icds() {
                    why.push_str(&format!("; the OpenCL loader skipped {broken}"));
                }
            }
            Err(BackendError::Unavailable {
                what: "OpenCL device".into(),
                why,
            })
        }
    }
}

/// Which of `devices` a run with `selector` (`--device`) uses, by position: the
/// one rule for the worker that opens it and the dashboard that names it before
/// the run. Why none, otherwise.
pub fn pick(devices: &[&ClDevice], selector: Option<&str>) -> Result<usize, String> {
    if devices.is_empty() {
        return Err(
            "no OpenCL platform or device found; install one (e.g. `apt-get install \
             pocl-opencl-icd` for the CPU) or register the NVIDIA ICD (`gpulab doctor`)"
                .into(),
        );
    }
    let listing = || {
        devices
            .iter()
            .map(|d| format!("{}: {}", d.index, d.name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match selector.map(str::trim) {
        None | Some("") => Ok(devices
            .iter()
            .position(|d| d.kind == DeviceKind::Gpu)
            .unwrap_or(0)),
        Some(s) => {
            if let Ok(i) = s.parse::<usize>() {
                return if i < devices.len() {
                    Ok(i)
                } else {
                    Err(format!("no device {i}; devices are {}", listing()))
                };
            }
            let needle = s.to_lowercase();
            // A name first (a device may be called `cpu-skylake-…`), then
            // the type `doctor` prints in brackets (PoCL 3 names its CPU
            // `pthread-…`).
            devices
                .iter()
                .position(|d| d.name.to_lowercase().contains(&needle))
                .or_else(|| devices.iter().position(|d| d.kind.as_str() == needle))
                .ok_or_else(|| format!("no device matches \"{s}\"; devices are {}", listing()))
        }
    }
}

/// `(major, minor)` from `OpenCL 3.0 PoCL …`; `(1, 0)` when unreadable.
pub fn parse_cl_version(v: &str) -> (u32, u32) {
    v.split_whitespace()
        .nth(1)
        .and_then(|mm| mm.split_once('.'))
        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
        .unwrap_or((1, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(index: usize, name: &str, kind: DeviceKind) -> ClDevice {
        ClDevice {
            index,
            platform: String::new(),
            platform_version: String::new(),
            name: name.into(),
            kind,
            vendor: String::new(),
            driver_version: String::new(),
            global_mem_bytes: 0,
            opencl_version: String::new(),
        }
    }

    #[test]
    fn a_device_is_picked_by_index_name_or_type() {
        let (gpu, cpu) = (
            device(0, "NVIDIA H200", DeviceKind::Gpu),
            device(1, "pthread-Intel(R) Xeon(R)", DeviceKind::Cpu),
        );
        let devices = [&gpu, &cpu];
        assert_eq!(pick(&devices, None), Ok(0));
        assert_eq!(pick(&devices, Some("1")), Ok(1));
        assert_eq!(pick(&devices, Some("xeon")), Ok(1));
        // PoCL 3 calls its CPU `pthread-…`: the type doctor prints finds it.
        assert_eq!(pick(&devices, Some("cpu")), Ok(1));
        assert_eq!(pick(&devices, Some("GPU")), Ok(0));
        // A name wins over a type (PoCL 5's `cpu-skylake-…` is a name).
        let named = device(0, "cpu-skylake", DeviceKind::Cpu);
        assert_eq!(pick(&[&gpu, &named], Some("cpu")), Ok(1));
        assert!(pick(&devices, Some("tpu")).is_err());
    }

    #[test]
    fn versions_parse() {
        assert_eq!(parse_cl_version("OpenCL 3.0 PoCL 3.1+debian"), (3, 0));
        assert_eq!(parse_cl_version("OpenCL 1.2 CUDA 12.4"), (1, 2));
        assert_eq!(parse_cl_version("garbage"), (1, 0));
    }

    #[test]
    fn lists_devices_or_says_why_not() {
        match opencl_devices() {
            Ok(devs) => {
                for (i, d) in devs.iter().enumerate() {
                    assert_eq!(d.index, i);
                    assert!(!d.name.is_empty());
                }
                if devs.is_empty() && crate::opencl::tests_require_opencl() {
                    panic!("GPULAB_REQUIRE_OPENCL=1 but no OpenCL device");
                }
            }
            Err(e) => {
                assert!(!e.to_string().is_empty());
                if crate::opencl::tests_require_opencl() {
                    panic!("GPULAB_REQUIRE_OPENCL=1 but {e}");
                }
            }
        }
    }
}
