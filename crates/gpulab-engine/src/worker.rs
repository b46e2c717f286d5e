//! The worker: the hidden `gpulab worker` process that runs one lab variant and
//! streams events on stdout. A crash, hang or deliberate leak stays in here; when
//! this process exits the driver takes all of its device memory back.

use std::io::{BufRead, Write};

use gpulab_backend::{Backend, cuda::CudaBackend, opencl::OpenClBackend};
use gpulab_events::{DeviceMeta, End, EndStatus, Event, LabMeta, Meta, Note, NoteLevel};
use gpulab_host::clock::now_ns;
use gpulab_lab::BackendKind;
use gpulab_telemetry::Probe;

use super::interpreter::{MemoryNow, MemoryReader};
use super::protocol::{ChannelControl, Control, Emit, JsonlOut, spawn_command_reader};
use super::request::WorkerRequest;
use super::{Engine, EngineError, Result};

/// The parent's pid, set by the run source on every worker it starts.
pub const PARENT_PID_ENV: &str = "GPULAB_PARENT_PID";

/// Makes this worker die with the parent that started it: a worker nobody reads
/// would hold device memory forever. `PR_SET_PDEATHSIG` covers a parent that dies
/// from now on; one that died between its fork and this call (a SIGKILL right
/// after the spawn) left us with another parent already, which the pid it passed
/// tells. `false`: that parent is gone, exit now.
pub fn die_with_parent() -> bool {
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    let expected = std::env::var(PARENT_PID_ENV)
        .ok()
        .and_then(|p| p.parse::<i32>().ok());
    let parent = rustix::process::getppid().map(|p| p.as_raw_nonzero().get());
    match expected {
        Some(pid) => parent == Some(pid),
        // Started by hand (`gpulab worker < request`): no parent to follow.
        None => true,
    }
}

/// Reads the request from the first line of `input`, runs it, and takes command
/// words from the rest of `input`; events go to `out`. Errors before the first
/// line (no device, a damaged request) are returned *and* emitted as an `end`
/// event, so the parent always learns why.
pub fn serve(mut input: impl BufRead + Send + 'static, out: impl Write) -> Result<EndStatus> {
    let mut sink = JsonlOut(out);
    let started = WorkerRequest::read(&mut input)
        .map_err(EngineError::Request)
        .and_then(|req| {
            let (tx, rx) = std::sync::mpsc::channel();
            spawn_command_reader(input, tx);
            let mut control = ChannelControl::new(rx, req.step);
            prepare_and_run(&req, &mut sink, &mut control)
        });
    match started {
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

fn prepare_and_run(
    req: &WorkerRequest,
    sink: &mut dyn Emit,
    control: &mut dyn Control,
) -> Result<EndStatus> {
    gpulab_host::clock::phase("worker: request read");
    // NVML's init (~15 ms on the H100) runs beside the driver's, not after it.
    gpulab_telemetry::warm_up_nvml();
    let (lab, variant, params) = (&req.lab, &req.variant, &req.params);
    let mut backend: Box<dyn Backend> = match lab.backend {
        BackendKind::OpenCl => Box::new(OpenClBackend::open_for(
            req.device.as_deref(),
            &variant.kernels(),
        )?),
        BackendKind::Cuda => Box::new(CudaBackend::open_for(
            req.device.as_deref(),
            &variant.kernels(),
        )?),
    };
    gpulab_host::clock::phase("worker: backend open");
    let pid = std::process::id();
    let (mut probe, notes, every_gpu) = probe_for(variant, backend.as_ref());
    gpulab_host::clock::phase("worker: probe open");
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
        format_version: gpulab_events::FORMAT_VERSION,
        gpulab_version: env!("CARGO_PKG_VERSION").to_string(),
        t_ns: now_ns(),
        pid,
        hostname: gpulab_host::hostname(),
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
            script: variant.lines(),
            stepped: req.step,
            until_failure: req.unbounded,
            every_gpu,
        }),
        baseline_bytes: baseline,
        budget_bytes: budget,
        recorded_at: Some(gpulab_events::wallclock::Utc::now().rfc3339()),
        watch: None,
        destruction: Some(backend.destruction_watched()),
        gpus: Vec::new(),
    })))
    .map_err(|_| {
        EngineError::Backend(gpulab_backend::BackendError::Setup(
            "event reader gone".into(),
        ))
    })?;
    gpulab_host::clock::phase("worker: meta");
    for text in notes {
        let _ = sink.emit(Event::Note(Note {
            t_ns: now_ns(),
            level: NoteLevel::Info,
            text,
            line: None,
        }));
    }

    probe.attribute_moves();
    let mut memory = LineReadings(probe);
    let engine = Engine::new(backend.as_mut(), &mut memory, sink, control, params)
        .with_budget(baseline, budget)
        .until_failure(req.unbounded);
    Ok(engine.run(&variant.script))
}

/// The probe of the worker's memory as the variant needs it (its bytes on
/// every GPU, or the device's figure less the rest where managed memory is
/// made), the notes that say so, and whether it reads every GPU.
fn probe_for(variant: &gpulab_lab::Variant, backend: &dyn Backend) -> (Probe, Vec<String>, bool) {
    let pid = std::process::id();
    let (mut probe, mut notes) = Probe::for_device(backend.device(), pid);
    notes.extend(backend.notes());
    let every_gpu = variant.calls(gpulab_events::Api::CudaSetDevice);
    if every_gpu {
        probe.every_gpu();
        notes.push(
            "this lab makes more than one device current: its memory figures are the \
             worker's own bytes on every GPU of the host (NVML), each device's context and \
             buffers together"
                .into(),
        );
    }
    if variant.calls(gpulab_events::Api::CudaMallocManaged)
        && let Some(rest) = probe.managed()
    {
        notes.push(format!(
            "this lab makes managed memory, whose pages on the device NVML counts in no \
             process's figure: the worker's memory figures are the device's (NVML) less what \
             the rest of it held, {:.1} MiB that no process held when the run began and the \
             other processes' own at each reading",
            gpulab_events::units::mib(rest)
        ));
    }
    (probe, notes, every_gpu)
}

/// The worker's readings around its lines, and the probe's notes for the run.
struct LineReadings(Probe);

impl MemoryReader for LineReadings {
    fn read(&mut self) -> Option<MemoryNow> {
        self.0.read().map(|r| MemoryNow {
            process: r.process_bytes.unwrap_or(r.used_bytes),
            device: r.used_bytes,
        })
    }

    // The probe's other notes (NVML not listing the worker) are the parent's
    // sampler's to say: it reads the same list.
    fn take_notes(&mut self) -> Vec<String> {
        self.0.take_contradiction().into_iter().collect()
    }
}
