//! What this machine can run, asked of the worker side: `gpulab doctor --json` runs
//! once as a child, so the dashboard process never loads an OpenCL or CUDA library
//! (a GPU API initialised in the parent broke NVIDIA's OpenCL in the workers).

use std::path::Path;
use std::process::{Command, Stdio};

use crate::lab::BackendKind;

/// The devices the doctor found, or why there are none.
#[derive(Debug, Clone, PartialEq)]
pub struct Availability {
    /// First OpenCL device ("name · platform · driver"), or why none.
    pub opencl: Result<String, String>,
    /// How many OpenCL devices.
    pub opencl_devices: usize,
    /// The CUDA devices, or why CUDA labs cannot run.
    pub cuda: Result<String, String>,
}

impl Availability {
    pub fn none(reason: &str) -> Availability {
        Availability {
            opencl: Err(reason.to_string()),
            opencl_devices: 0,
            cuda: Err(reason.to_string()),
        }
    }

    pub fn device(name: &str) -> Availability {
        Availability {
            opencl: Ok(name.to_string()),
            opencl_devices: 1,
            cuda: Err("no CUDA driver (libcuda.so.1 not found)".to_string()),
        }
    }

    /// Why a lab of this backend cannot run here; `None` when it can.
    pub fn blocker(&self, backend: BackendKind) -> Option<String> {
        match backend {
            BackendKind::OpenCl => self.opencl.as_ref().err().cloned(),
            BackendKind::Cuda => self.cuda.as_ref().err().cloned(),
        }
    }

    pub fn any(&self) -> bool {
        self.opencl.is_ok() || self.cuda.is_ok()
    }

    /// Reads `gpulab doctor --json`.
    pub fn from_doctor_json(text: &str) -> Availability {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(text) else {
            return Availability::none("`gpulab doctor --json` printed something unreadable");
        };
        let cuda = cuda_from_doctor(&v);
        let devices = v["opencl_devices"].as_array().cloned().unwrap_or_default();
        if let Some(d) = devices.first() {
            let s = |k: &str| d[k].as_str().unwrap_or("?").to_string();
            return Availability {
                opencl: Ok(format!(
                    "{} · {} · driver {}",
                    s("name"),
                    s("platform"),
                    s("driver_version")
                )),
                opencl_devices: devices.len(),
                cuda,
            };
        }
        // The first OpenCL check that is not ok says why.
        let reason = v["sections"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|s| s["name"] == "OpenCL")
            .flat_map(|s| s["checks"].as_array().cloned().unwrap_or_default())
            .find(|c| c["status"] != "ok")
            .map(|c| {
                let detail = c["detail"].as_str().unwrap_or("missing");
                match c["fix"].as_str() {
                    Some(fix) => format!("no OpenCL device: {detail}; fix: {fix}"),
                    None => format!("no OpenCL device: {detail}"),
                }
            })
            .unwrap_or_else(|| "no OpenCL device found (`gpulab doctor` explains)".into());
        Availability {
            cuda,
            ..Availability::none(&reason)
        }
    }

    /// Runs the doctor as a child of `exe`. Blocking: call it off the UI thread.
    pub fn probe(exe: &Path) -> Availability {
        let out = Command::new(exe)
            .args(["doctor", "--json"])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output();
        match out {
            Ok(o) => Availability::from_doctor_json(&String::from_utf8_lossy(&o.stdout)),
            Err(e) => Availability::none(&format!("cannot start `gpulab doctor`: {e}")),
        }
    }
}

/// CUDA's section of the doctor: its device list when every check is ok, else the
/// first check that is not, with its fix.
fn cuda_from_doctor(v: &serde_json::Value) -> Result<String, String> {
    let checks: Vec<serde_json::Value> = v["sections"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["name"] == "CUDA")
        .flat_map(|s| s["checks"].as_array().cloned().unwrap_or_default())
        .collect();
    if let Some(bad) = checks.iter().find(|c| c["status"] != "ok") {
        let detail = bad["detail"].as_str().unwrap_or("missing");
        return Err(match bad["fix"].as_str() {
            Some(fix) => format!("no CUDA driver: {detail}; fix: {fix}"),
            None => format!("no CUDA driver: {detail}"),
        });
    }
    checks
        .iter()
        .find(|c| c["name"] == "devices")
        .and_then(|c| c["detail"].as_str())
        .map(str::to_string)
        .ok_or_else(|| "no CUDA device found (`gpulab doctor` explains)".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_doctor_without_devices_gives_its_reason() {
        let json = r#"{"sections":[{"name":"OpenCL","checks":[{"name":"ICD loader","status":"missing","detail":"libOpenCL.so.1 not found","fix":"apt-get install ocl-icd-libopencl1"}]}],"opencl_devices":[]}"#;
        let a = Availability::from_doctor_json(json);
        let why = a.blocker(BackendKind::OpenCl).unwrap_or_default();
        assert!(why.contains("libOpenCL.so.1 not found"), "{why}");
        assert!(why.contains("fix: apt-get"), "{why}");
        assert!(!a.any());
    }

    #[test]
    fn cuda_availability_comes_from_the_doctor_too() {
        let ok = r#"{"sections":[{"name":"CUDA","checks":[{"name":"libcuda.so.1","status":"ok","detail":"loaded"},{"name":"devices","status":"ok","detail":"0: NVIDIA H100 80GB HBM3"}]}],"opencl_devices":[]}"#;
        let a = Availability::from_doctor_json(ok);
        assert_eq!(a.blocker(BackendKind::Cuda), None);
        assert!(a.any());
        let missing = r#"{"sections":[{"name":"CUDA","checks":[{"name":"libcuda.so.1","status":"missing","detail":"libcuda.so.1 not found","fix":"install the NVIDIA driver"}]}],"opencl_devices":[]}"#;
        let why = Availability::from_doctor_json(missing)
            .blocker(BackendKind::Cuda)
            .unwrap_or_default();
        assert!(
            why.contains("libcuda.so.1 not found") && why.contains("install the NVIDIA driver"),
            "{why}"
        );
    }

    #[test]
    fn a_doctor_with_a_device_names_it() {
        let json = r#"{"sections":[],"opencl_devices":[{"name":"cpu-x","platform":"PoCL","driver_version":"5.0"}]}"#;
        let a = Availability::from_doctor_json(json);
        assert_eq!(a.opencl, Ok("cpu-x · PoCL · driver 5.0".to_string()));
        assert_eq!(a.blocker(BackendKind::OpenCl), None);
    }
}
