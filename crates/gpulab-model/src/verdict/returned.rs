//! Metrics that read what a call answered beside its status
//! (`Call::returned`): whether an event had completed, the device's free
//! memory, the time between two events, and whether data read back holds
//! what the pattern kernel wrote. Decided by what came back, never by timings.

use gpulab_lab::api::{Api, Returns};

use crate::run::Run;
use crate::trace::CallStatus;

/// `cudaEventQuery`'s answer for an event whose work has not completed.
const CUDA_ERROR_NOT_READY: i64 = 600;

/// What the tagged line's first execution answered, read by `metric`
/// (one of `Returns`' metrics: `complete`, `free_mib`, `elapsed_ms`,
/// `limit_mib`, `pattern`).
pub fn returned(run: &Run, metric: &str, tag: &str) -> Result<f64, String> {
    let t = run
        .tagged(tag)
        .ok_or_else(|| format!("`{tag}` never ran in this run"))?;
    let c = &t.first;
    let api = c.api.api();
    // `verify h` is gpulab's directive, named as written.
    let gives = match api {
        Some(api) => api.returns(),
        None if c.api == "verify" => Some(Returns::Pattern),
        None => None,
    };
    if gives.map(Returns::metric) != Some(metric) {
        return Err(format!(
            "`{tag}` is a `{}`, which answers nothing `{metric}` reads (it reads what `{}` answer)",
            c.api,
            gpulab_lab::api::answered_by(metric).join("`, `")
        ));
    }
    // An event not yet complete is `cudaEventQuery`'s answer, not a failure.
    if api == Some(Api::CudaEventQuery) {
        return match &c.status {
            CallStatus::Ok => Ok(1.0),
            CallStatus::Error { code, .. } if *code == CUDA_ERROR_NOT_READY => Ok(0.0),
            CallStatus::Error { name, .. } => Err(format!("`{tag}` failed with {name}")),
            CallStatus::Directive => Err(format!("`{tag}` did not reach the driver")),
        };
    }
    if let CallStatus::Error { name, .. } = &c.status {
        return Err(format!(
            "`{tag}` failed with {name}, so it answered nothing"
        ));
    }
    c.returned.ok_or_else(|| match api {
        Some(Api::ClEnqueueReadBuffer) => format!(
            "`{tag}` is a non-blocking read: its data had not landed when it returned (read with `CL_TRUE`, or `verify` after a wait)"
        ),
        _ if c.api == "verify" => format!(
            "`{tag}` read nothing: the host buffer was no longer the lab's"
        ),
        _ => format!("`{tag}` answered nothing this gpulab could read"),
    })
}
