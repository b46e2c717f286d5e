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
}

impl Availability {
    pub fn none(reason: &str) -> Availability {
        Availability {
            opencl: Err(reason.to_string()),
            opencl_devices: 0,
        }
    }

    pub fn device(name: &str) -> Availability {
        Availability {
            opencl: Ok(name.to_string()),
            opencl_devices: 1,
        }
    }

    /// Why a lab of this backend cannot run here; `None` when it can.
    pub fn blocker(&self, backend: BackendKind) -> Option<String> {
        match backend {
            BackendKind::OpenCl => self.opencl.as_ref().err().cloned(),
            BackendKind::Cuda => Some("the CUDA backend is not in this build yet".into()),
        }
    }

    pub fn any(&self) -> bool {
        self.opencl.is_ok()
    }

    /// Reads `gpulab doctor --json`.
    pub fn from_doctor_json(text: &str) -> Availability {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(text) else {
            return Availability::none("`gpulab doctor --json` printed something unreadable");
        };
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
        Availability::none(&reason)
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
    fn a_doctor_with_a_device_names_it() {
        let json = r#"{"sections":[],"opencl_devices":[{"name":"cpu-x","platform":"PoCL","driver_version":"5.0"}]}"#;
        let a = Availability::from_doctor_json(json);
        assert_eq!(a.opencl, Ok("cpu-x · PoCL · driver 5.0".to_string()));
        assert_eq!(a.blocker(BackendKind::OpenCl), None);
    }
}
