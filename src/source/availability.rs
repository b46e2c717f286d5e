//! What this machine can run, asked of the worker side: `gpulab doctor --json` runs
//! once as a child, so the parent (the dashboard) never loads an OpenCL or CUDA
//! library (a GPU API initialised in the parent broke NVIDIA's OpenCL in the
//! workers). Its report is read back as the doctor's own type.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::backend::discover::{Check, DoctorReport, Status};
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

    /// What a doctor's report allows.
    pub fn from_doctor(report: &DoctorReport) -> Availability {
        let cuda = cuda_from_doctor(report);
        if let Some(d) = report.opencl_devices.first() {
            return Availability {
                opencl: Ok(format!(
                    "{} · {} · driver {}",
                    d.name, d.platform, d.driver_version
                )),
                opencl_devices: report.opencl_devices.len(),
                cuda,
            };
        }
        // The first OpenCL check that is not ok says why.
        let reason = first_problem(report, "OpenCL")
            .map(|c| because("no OpenCL device", c))
            .unwrap_or_else(|| "no OpenCL device found (`gpulab doctor` explains)".into());
        Availability {
            cuda,
            ..Availability::none(&reason)
        }
    }

    /// Reads what `gpulab doctor --json` printed.
    pub fn from_doctor_json(text: &str) -> Availability {
        match serde_json::from_str::<DoctorReport>(text) {
            Ok(report) => Availability::from_doctor(&report),
            Err(e) => Availability::none(&format!(
                "`gpulab doctor --json` printed something unreadable: {e}"
            )),
        }
    }

    /// Runs the doctor as a child of `exe` (gpulab itself). Blocking.
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

fn checks<'a>(report: &'a DoctorReport, section: &'a str) -> impl Iterator<Item = &'a Check> {
    report
        .sections
        .iter()
        .filter(move |s| s.name == section)
        .flat_map(|s| s.checks.iter())
}

fn first_problem<'a>(report: &'a DoctorReport, section: &'a str) -> Option<&'a Check> {
    checks(report, section).find(|c| c.status != Status::Ok)
}

fn because(what: &str, check: &Check) -> String {
    match &check.fix {
        Some(fix) => format!("{what}: {}; fix: {fix}", check.detail),
        None => format!("{what}: {}", check.detail),
    }
}

/// CUDA's section of the doctor: its device list when every check is ok, else the
/// first check that is not, with its fix.
fn cuda_from_doctor(report: &DoctorReport) -> Result<String, String> {
    if let Some(bad) = first_problem(report, "CUDA") {
        return Err(because("no CUDA driver", bad));
    }
    checks(report, "CUDA")
        .find(|c| c.name == "devices")
        .map(|c| c.detail.clone())
        .ok_or_else(|| "no CUDA device found (`gpulab doctor` explains)".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::discover::{ClDevice, IcdState, Section};
    use crate::trace::DeviceKind;

    fn check(name: &str, status: Status, detail: &str, fix: Option<&str>) -> Check {
        Check {
            name: name.into(),
            status,
            detail: detail.into(),
            fix: fix.map(String::from),
        }
    }

    fn report(sections: Vec<(&str, Vec<Check>)>, devices: Vec<ClDevice>) -> DoctorReport {
        DoctorReport {
            sections: sections
                .into_iter()
                .map(|(name, checks)| Section {
                    name: name.into(),
                    checks,
                })
                .collect(),
            opencl_devices: devices,
            icd: IcdState::default(),
        }
    }

    #[test]
    fn a_doctor_without_devices_gives_its_reason() {
        let r = report(
            vec![(
                "OpenCL",
                vec![check(
                    "ICD loader",
                    Status::Missing,
                    "libOpenCL.so.1 not found",
                    Some("apt-get install ocl-icd-libopencl1"),
                )],
            )],
            vec![],
        );
        let a = Availability::from_doctor(&r);
        let why = a.blocker(BackendKind::OpenCl).unwrap_or_default();
        assert!(why.contains("libOpenCL.so.1 not found"), "{why}");
        assert!(why.contains("fix: apt-get"), "{why}");
        assert!(!a.any());
    }

    #[test]
    fn cuda_availability_comes_from_the_doctor_too() {
        let ok = report(
            vec![(
                "CUDA",
                vec![
                    check("libcuda.so.1", Status::Ok, "loaded", None),
                    check("devices", Status::Ok, "0: NVIDIA H100 80GB HBM3", None),
                ],
            )],
            vec![],
        );
        let a = Availability::from_doctor(&ok);
        assert_eq!(a.blocker(BackendKind::Cuda), None);
        assert!(a.any());
        let missing = report(
            vec![(
                "CUDA",
                vec![check(
                    "libcuda.so.1",
                    Status::Missing,
                    "libcuda.so.1 not found",
                    Some("install the NVIDIA driver"),
                )],
            )],
            vec![],
        );
        let why = Availability::from_doctor(&missing)
            .blocker(BackendKind::Cuda)
            .unwrap_or_default();
        assert!(
            why.contains("libcuda.so.1 not found") && why.contains("install the NVIDIA driver"),
            "{why}"
        );
    }

    #[test]
    fn a_doctor_with_a_device_names_it() {
        let dev = ClDevice {
            index: 0,
            platform: "PoCL".into(),
            platform_version: "OpenCL 3.0 PoCL".into(),
            name: "cpu-x".into(),
            kind: DeviceKind::Cpu,
            vendor: "pocl".into(),
            driver_version: "5.0".into(),
            global_mem_bytes: 1 << 30,
            opencl_version: "OpenCL 3.0".into(),
        };
        let a = Availability::from_doctor(&report(vec![], vec![dev]));
        assert_eq!(a.opencl, Ok("cpu-x · PoCL · driver 5.0".to_string()));
        assert_eq!(a.blocker(BackendKind::OpenCl), None);
    }

    #[test]
    fn the_doctors_own_json_reads_back_and_garbage_says_so() {
        let r = report(
            vec![("CUDA", vec![check("devices", Status::Ok, "0: X", None)])],
            vec![],
        );
        let json = serde_json::to_string(&r).unwrap_or_default();
        assert_eq!(
            Availability::from_doctor_json(&json).cuda,
            Ok("0: X".into())
        );
        let a = Availability::from_doctor_json("Segmentation fault");
        assert!(!a.any());
        assert!(a.opencl.unwrap_err().contains("unreadable"));
    }
}
