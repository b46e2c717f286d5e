//! The worker: the hidden `gpulab worker` process that runs one lab variant and
//! streams events on stdout. A crash, hang or deliberate leak stays in here; when
//! this process exits the driver takes all of its device memory back.

use std::io::Write;

use crate::backend::{Backend, cuda::CudaBackend, opencl::OpenClBackend};
use crate::clock::now_ns;
use crate::lab::{self, BackendKind, Lab};
use crate::telemetry::Probe;
use crate::trace::{DeviceMeta, End, EndStatus, Event, LabMeta, Meta, Note, NoteLevel};

use super::protocol::{ChannelControl, JsonlSink, Sink, spawn_command_reader};
use super::{Engine, EngineError, Result};

/// What the parent asks a worker to run; passed as command-line flags.
#[derive(Debug, Clone)]
pub struct WorkerRequest {
    /// `builtin:ID` or a path to a lab file.
    pub lab: String,
    pub variant: String,
    pub params: Vec<String>,
    pub device: Option<String>,
    /// Budget in bytes above the baseline; `None` = half the free memory.
    pub budget_bytes: Option<u64>,
    /// `--until-failure`: no budget at all.
    pub unbounded: bool,
    /// Wait for `step`/`run` on stdin before the first line.
    pub step: bool,
}

/// Loads the lab the request names, exactly as the parent validated it.
pub fn load_lab(spec: &str) -> lab::Result<Lab> {
    if let Some(id) = spec.strip_prefix("builtin:") {
        for (file, text) in lab::catalog::SHIPPED {
            if let Ok(lab) = lab::catalog::parse(file, text, lab::Origin::Builtin)
                && lab.id == id
            {
                return Ok(lab);
            }
        }
        return Err(lab::LabError::UnknownLab {
            id: id.to_string(),
            suggestion: None,
        });
    }
    lab::catalog::load_file(std::path::Path::new(spec))
}

/// Runs the request, writing events to `out`. Errors before the first line (no
/// device, bad lab) are returned *and* emitted as an `end` event, so the parent
/// always learns why.
pub fn run(req: &WorkerRequest, out: impl Write) -> Result<EndStatus> {
    let mut sink = JsonlSink(out);
    match prepare_and_run(req, &mut sink) {
        Ok(status) => Ok(status),
        Err(e) => {
            let _ = sink.emit(Event::End(End {
                t_ns: now_ns(),
                status: EndStatus::Failed {
                    line: None,
                    error: e.to_string(),
                },
                leaked: vec![],
            }));
            Err(e)
        }
    }
}

fn prepare_and_run(req: &WorkerRequest, sink: &mut dyn Sink) -> Result<EndStatus> {
    let lab = load_lab(&req.lab)?;
    let variant = lab
        .variant(&req.variant)
        .ok_or_else(|| lab::LabError::UnknownVariant {
            lab: lab.id.clone(),
            variant: req.variant.clone(),
            suggestion: None,
            known: lab.variants.iter().map(|v| v.name.clone()).collect(),
        })?;
    let params = lab::catalog::resolve_params(&lab, &req.params)?;
    let mut backend: Box<dyn Backend> = match lab.backend {
        BackendKind::OpenCl => Box::new(OpenClBackend::open(req.device.as_deref())?),
        BackendKind::Cuda => Box::new(CudaBackend::open(req.device.as_deref())?),
    };
    let pid = std::process::id();
    let (mut probe, notes) = Probe::for_device(backend.device(), pid);
    let baseline = probe
        .read()
        .map(|r| r.process_bytes.unwrap_or(r.used_bytes));
    let budget = if req.unbounded {
        None
    } else {
        req.budget_bytes
            .or_else(|| probe.available_bytes().map(|free| free / 2))
    };
    let info = backend.device().clone();
    sink.emit(Event::Meta(Box::new(Meta {
        format_version: crate::trace::FORMAT_VERSION,
        gpulab_version: env!("CARGO_PKG_VERSION").to_string(),
        t_ns: now_ns(),
        pid,
        hostname: rustix::system::uname()
            .nodename()
            .to_string_lossy()
            .into_owned(),
        backend: lab.backend,
        platform: info.platform.clone(),
        device: DeviceMeta {
            name: info.name.clone(),
            vendor: info.vendor.clone(),
            driver_version: info.driver_version.clone(),
            kind: info.kind,
            total_bytes: info.total_bytes,
            memory_source: probe.source(),
            pci_bus_id: info.pci_bus_id.clone(),
            clock_error_ns: backend.clock_error_ns(),
        },
        lab: Some(LabMeta {
            id: lab.id.clone(),
            title: lab.title.clone(),
            variant: variant.name.clone(),
            params: params.clone(),
            script: script_lines(&variant.script),
        }),
        baseline_bytes: baseline,
        budget_bytes: budget,
        recorded_at: Some(crate::trace::wallclock::Utc::now().rfc3339()),
        watch: None,
    })))
    .map_err(|_| {
        EngineError::Backend(crate::backend::BackendError::Setup(
            "event reader gone".into(),
        ))
    })?;
    for text in notes {
        let _ = sink.emit(Event::Note(Note {
            t_ns: now_ns(),
            level: NoteLevel::Info,
            text,
            line: None,
        }));
    }

    let (tx, rx) = std::sync::mpsc::channel();
    spawn_command_reader(std::io::BufReader::new(std::io::stdin()), tx);
    let mut control = ChannelControl::new(rx, req.step);
    let mut memory = move || {
        probe
            .read()
            .map(|r| r.process_bytes.unwrap_or(r.used_bytes))
    };
    let engine = Engine::new(backend.as_mut(), &mut memory, sink, &mut control, &params)
        .with_budget(baseline, budget);
    Ok(engine.run(&variant.script))
}

/// Every line of the variant's script as written, for replays without the file.
fn script_lines(script: &[lab::Stmt]) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    fn walk(stmts: &[lab::Stmt], out: &mut Vec<(u32, String)>) {
        for s in stmts {
            out.push((s.line, s.text.clone()));
            if let lab::StmtKind::Repeat { body, .. } = &s.kind {
                walk(body, out);
            }
        }
    }
    walk(script, &mut out);
    out
}
