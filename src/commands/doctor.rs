//! `gpulab doctor`: what this machine can run, and how to fix what it cannot.

use gpulab::backend::discover;
use gpulab::output::{self, Body, Doctor};
use gpulab::report::Provenance;

use super::{EXIT_OK, EXIT_UNAVAILABLE};

/// Exits 3, as `run` does, when nothing here can run a lab, so a script can ask
/// `gpulab doctor` before it runs anything.
pub fn doctor(json: bool, icd_note: Option<String>) -> anyhow::Result<i32> {
    let report = discover::doctor();
    let runnable = report.any_device();
    if json {
        let body = Doctor {
            recorded: Provenance::here(gpulab::hostname()),
            report: &report,
        };
        out!("{}", output::json(Body::Doctor(body))?);
    } else {
        if let Some(note) = icd_note {
            outln!("note: {note}\n");
        }
        out!("{}", report.render_text());
        if !runnable {
            outln!("\nnothing here can run a lab: no OpenCL device and no CUDA device");
        }
    }
    Ok(if runnable { EXIT_OK } else { EXIT_UNAVAILABLE })
}
