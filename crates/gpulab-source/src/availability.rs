//! What this machine can run, asked of the worker side: `gpulab doctor --json` runs
//! once as a child, so the parent (the dashboard) never loads an OpenCL or CUDA
//! library (a GPU API initialised in the parent broke NVIDIA's OpenCL in the
//! workers). Its report is read back as the doctor's own type.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::backend::discover::{Check, ClDevice, DoctorReport, Status, pick};
use crate::lab::BackendKind;

/// The devices the doctor found, or why there are none.
#[derive(Debug, Clone, PartialEq)]
pub struct Availability {
    /// The OpenCL device a run will use ("name · platform · driver"): the one
    /// `--device` names, else the first GPU, else the first device; or why none.
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

    /// What a doctor's report allows, for runs with `selector` (`--device`).
    pub fn from_doctor(report: &DoctorReport, selector: Option<&str>) -> Availability {
        let cuda = cuda_from_doctor(report);
        let devices: Vec<&ClDevice> = report.opencl_devices.iter().collect();
        if !devices.is_empty() {
            // The same choice the worker makes when it opens the device.
            let opencl = pick(&devices, selector).map(|i| {
                let d = devices[i];
                format!("{} · {} · driver {}", d.name, d.platform, d.driver_version)
            });
            return Availability {
                opencl,
                opencl_devices: devices.len(),
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
    pub fn from_doctor_json(text: &str, selector: Option<&str>) -> Availability {
        match serde_json::from_str::<DoctorReport>(text) {
            Ok(report) => Availability::from_doctor(&report, selector),
            Err(e) => Availability::none(&format!(
                "`gpulab doctor --json` printed something unreadable: {e}"
            )),
        }
    }

    /// Runs the doctor as a child of `exe` (gpulab itself). Blocking.
    pub fn probe(exe: &Path, selector: Option<&str>) -> Availability {
        let mut cmd = Command::new(exe);
        crate::multicast::keep_off_here(&mut cmd);
        let out = cmd
            .args(["doctor", "--json"])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output();
        match out {
            Ok(o) => Availability::from_doctor_json(&String::from_utf8_lossy(&o.stdout), selector),
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
            cuda_devices: Vec::new(),
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
        let a = Availability::from_doctor(&r, None);
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
        let a = Availability::from_doctor(&ok, None);
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
        let why = Availability::from_doctor(&missing, None)
            .blocker(BackendKind::Cuda)
            .unwrap_or_default();
        assert!(
            why.contains("libcuda.so.1 not found") && why.contains("install the NVIDIA driver"),
            "{why}"
        );
    }

    fn device(index: usize, name: &str, platform: &str, kind: DeviceKind) -> ClDevice {
        ClDevice {
            index,
            platform: platform.into(),
            platform_version: format!("OpenCL 3.0 {platform}"),
            name: name.into(),
            kind,
            vendor: String::new(),
            driver_version: "5.0".into(),
            global_mem_bytes: 1 << 30,
            opencl_version: "OpenCL 3.0".into(),
        }
    }

    #[test]
    fn a_doctor_with_a_device_names_it() {
        let dev = device(0, "cpu-x", "PoCL", DeviceKind::Cpu);
        let a = Availability::from_doctor(&report(vec![], vec![dev]), None);
        assert_eq!(a.opencl, Ok("cpu-x · PoCL · driver 5.0".to_string()));
        assert_eq!(a.blocker(BackendKind::OpenCl), None);
    }

    /// PoCL listed first and an H100 second: a run goes to the GPU, so that is the
    /// device named before it (the first device was named, wrongly, on the H100).
    #[test]
    fn the_device_named_is_the_one_the_run_will_use() {
        let r = report(
            vec![],
            vec![
                device(0, "cpu-x", "PoCL", DeviceKind::Cpu),
                device(1, "NVIDIA H100", "NVIDIA CUDA", DeviceKind::Gpu),
            ],
        );
        let named = |sel| Availability::from_doctor(&r, sel).opencl;
        assert_eq!(
            named(None),
            Ok("NVIDIA H100 · NVIDIA CUDA · driver 5.0".into())
        );
        assert_eq!(named(Some("0")), Ok("cpu-x · PoCL · driver 5.0".into()));
        assert_eq!(named(Some("cpu")), Ok("cpu-x · PoCL · driver 5.0".into()));
        let none = named(Some("7")).unwrap_err();
        assert!(
            none.contains("no device 7") && none.contains("1: NVIDIA H100"),
            "{none}"
        );
    }

    #[test]
    fn the_doctors_own_json_reads_back_and_garbage_says_so() {
        let r = report(
            vec![("CUDA", vec![check("devices", Status::Ok, "0: X", None)])],
            vec![],
        );
        let json = serde_json::to_string(&r).unwrap_or_default();
        assert_eq!(
            Availability::from_doctor_json(&json, None).cuda,
            Ok("0: X".into())
        );
        let a = Availability::from_doctor_json("Segmentation fault", None);
        assert!(!a.any());
        assert!(a.opencl.unwrap_err().contains("unreadable"));
    }
}
