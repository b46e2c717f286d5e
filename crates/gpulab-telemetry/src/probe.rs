//! A probe reads "device memory" for one device: NVML for an NVIDIA GPU, the
//! worker's RSS for a CPU OpenCL device (its device memory is host memory), or
//! nothing, with a note saying why.

use super::nvml::{Gpu0, NvmlProbe};
use super::procfs::{self, Statm};
use super::{Reading, Result, TelemetryError};
use gpulab_events::MemorySource;
use gpulab_events::{DeviceInfo, DeviceKind};
use gpulab_host::clock::now_ns;

enum Inner {
    // Boxed: an `Nvml` is a table of a few hundred symbols.
    Nvml(Box<NvmlProbe>),
    /// `tree`: the RSS of every process descended from the worker, summed.
    Rss {
        statm: Statm,
        total: Option<u64>,
        tree: bool,
    },
    None,
}

/// Reads memory for one device. Owned by one thread at a time (the sampler's), never
/// shared: NVML handles and open `/proc` files are per-probe.
pub struct Probe {
    inner: Inner,
    pid: u32,
    notes: Vec<String>,
}

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probe")
            .field("source", &self.source())
            .field("pid", &self.pid)
            .finish()
    }
}

impl Probe {
    /// The probe for `info`, reading on behalf of the worker `pid`, and notes for
    /// the user (a fallback taken, telemetry missing). Never fails: without a
    /// source the probe's `source()` is `none` and `read()` returns None.
    ///
    /// NVML's device-wide baseline is taken here, so make the probe before the run.
    pub fn for_device(info: &DeviceInfo, pid: u32) -> (Probe, Vec<String>) {
        let mut notes = Vec::new();
        let nvidia = info.vendor.to_ascii_lowercase().contains("nvidia");
        let probe = if info.kind == DeviceKind::Cpu {
            match Probe::rss(pid) {
                Ok(probe) => {
                    notes.push(format!(
                        "{} is a CPU device: its memory is host memory, shown as the worker's \
                         RSS (pid {pid})",
                        info.name
                    ));
                    probe
                }
                Err(e) => {
                    notes.push(format!("no memory telemetry for {}: {e}", info.name));
                    Probe::none(pid)
                }
            }
        } else if nvidia || info.pci_bus_id.is_some() {
            match NvmlProbe::open(info, pid, &mut notes) {
                Some(nvml) => Probe {
                    inner: Inner::Nvml(Box::new(nvml)),
                    pid,
                    notes: Vec::new(),
                },
                None => Probe::none(pid),
            }
        } else {
            notes.push(format!(
                "no device-memory telemetry for {} ({}): gpulab reads NVIDIA GPUs through NVML \
                 and CPU devices through the worker's RSS",
                info.name, info.vendor
            ));
            Probe::none(pid)
        };
        (probe, notes)
    }

    /// NVIDIA GPU 0 and its memory in use now, for a program gpulab is about to
    /// start (`watch`). None when NVML sees no NVIDIA GPU.
    pub fn nvidia_gpu0_now() -> Option<Gpu0> {
        super::nvml::first_gpu()
    }

    /// A probe of NVIDIA GPU 0 on behalf of `pid`, against the device memory in
    /// use when `gpu` was opened (before the program started).
    pub fn nvidia_gpu0(pid: u32, gpu: Gpu0) -> Probe {
        Probe {
            inner: Inner::Nvml(Box::new(NvmlProbe::of_gpu0(gpu, pid))),
            pid,
            notes: Vec::new(),
        }
    }

    /// A probe of process `pid`'s resident memory.
    pub fn rss(pid: u32) -> Result<Probe> {
        Probe::rss_of(pid, false)
    }

    /// A probe of the resident memory of `pid` and every process descended from
    /// it (a watched program's children hold memory of their own).
    pub fn rss_tree(pid: u32) -> Result<Probe> {
        Probe::rss_of(pid, true)
    }

    fn rss_of(pid: u32, tree: bool) -> Result<Probe> {
        let statm = Statm::open(pid)?;
        // Fails now, not at the first sample, when the pid is already gone.
        statm.rss_bytes()?;
        let total = procfs::meminfo().and_then(|m| m.total);
        Ok(Probe {
            inner: Inner::Rss { statm, total, tree },
            pid,
            notes: Vec::new(),
        })
    }

    /// A probe with no source: every read is `NoSource`.
    pub fn none(pid: u32) -> Probe {
        Probe {
            inner: Inner::None,
            pid,
            notes: Vec::new(),
        }
    }

    /// `nvml`, `rss` or `none`; the `source` of the samples it makes.
    pub fn source(&self) -> MemorySource {
        match self.inner {
            Inner::Nvml(_) => MemorySource::Nvml,
            Inner::Rss { .. } => MemorySource::Rss,
            Inner::None => MemorySource::Unavailable,
        }
    }

    /// What the numbers mean, for a chart's axis.
    pub fn label(&self) -> &'static str {
        match self.inner {
            Inner::Nvml(_) => "device memory (NVML)",
            Inner::Rss { .. } => "host memory (worker RSS)",
            Inner::None => "no memory telemetry",
        }
    }

    /// The worker process this probe reads for.
    pub fn pid(&self) -> u32 {
        match &self.inner {
            Inner::Rss { statm, .. } => statm.pid(),
            _ => self.pid,
        }
    }

    pub fn total_bytes(&self) -> Option<u64> {
        match &self.inner {
            Inner::Nvml(n) => Some(n.total()),
            Inner::Rss { total, .. } => *total,
            Inner::None => None,
        }
    }

    /// Device-wide memory in use when an NVML probe was made: what "above the run's
    /// baseline" is measured from when NVML cannot see the worker's pid.
    pub fn baseline_bytes(&self) -> Option<u64> {
        match &self.inner {
            Inner::Nvml(n) => Some(n.baseline()),
            _ => None,
        }
    }

    /// For the worker's readings around its lines: a move of device memory soon
    /// after NVML's process list counts as the worker's own until the next list
    /// checks it, instead of costing a list after every line that moves memory.
    pub fn attribute_moves(&mut self) {
        if let Inner::Nvml(n) = &mut self.inner {
            n.attribute_moves();
        }
    }

    /// Why the probe stopped attributing moves to the worker (another process
    /// moved device memory meanwhile), once.
    pub fn take_contradiction(&mut self) -> Option<String> {
        match &mut self.inner {
            Inner::Nvml(n) => n.take_contradiction(),
            _ => None,
        }
    }

    /// One reading, or None (the reason is what `try_read` returns).
    /// A lab on more than one device: the worker's figure becomes its own
    /// bytes on every GPU of the host (NVML), not its device's alone. No
    /// change for a probe that does not read NVML.
    pub fn every_gpu(&mut self) {
        if let Inner::Nvml(n) = &mut self.inner {
            n.every_gpu();
        }
    }

    /// A lab that makes managed memory: the worker's figure becomes NVML's
    /// device figure less what the rest of the device holds (what no process
    /// held when this was called, and the other processes' listed memory at
    /// each reading), since the pages NVML counts in no process's figure.
    /// Returns the bytes no process held, for the run's note; None (no
    /// change) where the probe does not read NVML or NVML lists nothing.
    pub fn managed(&mut self) -> Option<u64> {
        match &mut self.inner {
            Inner::Nvml(n) => n.managed(),
            _ => None,
        }
    }

    pub fn read(&mut self) -> Option<Reading> {
        self.try_read().ok()
    }

    pub fn try_read(&mut self) -> Result<Reading> {
        match &mut self.inner {
            Inner::Nvml(n) => {
                let (reading, note) = n.read()?;
                self.notes.extend(note);
                Ok(reading)
            }
            Inner::Rss { statm, total, tree } => {
                let t_ns = now_ns();
                let mut rss = statm.rss_bytes()?;
                if *tree {
                    let root = statm.pid();
                    for pid in procfs::process_tree(root)
                        .into_iter()
                        .filter(|&p| p != root)
                    {
                        rss += procfs::host_rss_bytes(pid).unwrap_or(0);
                    }
                }
                Ok(Reading {
                    t_ns,
                    used_bytes: rss,
                    total_bytes: *total,
                    process_bytes: Some(rss),
                    others: None,
                })
            }
            Inner::None => Err(TelemetryError::NoSource),
        }
    }

    /// Memory that can still be allocated: NVML's free bytes, or `MemAvailable`
    /// for host memory. The default run budget is a fraction of it.
    pub fn available_bytes(&mut self) -> Option<u64> {
        match &self.inner {
            Inner::Nvml(n) => n.free_bytes(),
            Inner::Rss { .. } => procfs::meminfo().and_then(|m| m.available),
            Inner::None => None,
        }
    }

    /// Notes that came up while reading (a fallback taken), each handed out once.
    pub fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nvml::UNAVAILABLE;

    fn device(kind: DeviceKind, vendor: &str, bus: Option<&str>) -> DeviceInfo {
        DeviceInfo {
            name: "test device".into(),
            vendor: vendor.into(),
            driver_version: "1".into(),
            platform: "test".into(),
            kind,
            total_bytes: None,
            pci_bus_id: bus.map(str::to_string),
        }
    }

    use gpulab_events::units::MIB;

    /// Set for the child the RSS test starts: that process holds a block only
    /// when told, so no other test thread's allocations move its RSS.
    const RSS_CHILD: &str = "GPULAB_TEST_RSS_CHILD";

    /// The child side of `rss_probe_sees_a_touched_allocation_come_and_go`: on
    /// each line of stdin, allocate-and-touch 64 MiB or free it, then answer.
    #[test]
    #[ignore = "helper process of rss_probe_sees_a_touched_allocation_come_and_go"]
    fn rss_child() {
        use std::io::{BufRead, Write};
        if std::env::var_os(RSS_CHILD).is_none() {
            return;
        }
        let mut held: Vec<Vec<u8>> = Vec::new();
        let mut out = std::io::stdout();
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            match line.trim() {
                "alloc" => {
                    let mut b = vec![0u8; 64 * MIB as usize];
                    for i in (0..b.len()).step_by(4096) {
                        b[i] = 1;
                    }
                    held.push(std::hint::black_box(b));
                }
                "free" => held.clear(),
                _ => break,
            }
            let _ = writeln!(out, "GPULAB-RSS-CHILD {}", held.len());
            let _ = out.flush();
        }
    }

    /// The probe reads another process's RSS (as it reads a worker's), and that
    /// process allocates nothing but the block: the figure moves by the block,
    /// whatever the machine's load or this binary's other tests do.
    #[test]
    fn rss_probe_sees_a_touched_allocation_come_and_go() {
        use std::io::{BufRead, BufReader, Write};
        use std::process::{Command, Stdio};
        let exe = std::env::current_exe().expect("the test binary knows its path");
        let mut child = Command::new(exe)
            .args([
                "probe::tests::rss_child",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(RSS_CHILD, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the test binary starts again");
        let mut to = child.stdin.take().expect("piped stdin");
        let mut from = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut ask = |what: &str| {
            writeln!(to, "{what}").expect("child reads");
            let mut line = String::new();
            loop {
                line.clear();
                let n = from.read_line(&mut line).expect("child answers");
                assert!(n > 0, "the RSS child ended before answering {what}");
                if line.contains("GPULAB-RSS-CHILD") {
                    break;
                }
            }
        };
        let mut probe = match Probe::rss(child.id()) {
            Ok(p) => p,
            Err(e) => panic!("rss probe of the child: {e}"),
        };
        assert_eq!(probe.source(), MemorySource::Rss);
        let mut rss = || match probe.try_read() {
            Ok(r) => r.used_bytes,
            Err(e) => panic!("rss read failed: {e}"),
        };
        ask("free");
        let before = rss();
        ask("alloc");
        let during = rss();
        ask("free");
        let after = rss();
        drop(to);
        let _ = child.wait();
        assert!(
            during >= before + 60 * MIB,
            "before {before} during {during}"
        );
        assert!(after + 60 * MIB <= during, "during {during} after {after}");
    }

    #[test]
    fn cpu_device_reads_rss_with_a_host_memory_note() {
        let (mut probe, notes) =
            Probe::for_device(&device(DeviceKind::Cpu, "pocl", None), std::process::id());
        assert_eq!(probe.source(), MemorySource::Rss);
        assert!(notes.iter().any(|n| n.contains("host memory")), "{notes:?}");
        let reading = probe.read();
        assert!(
            reading
                .as_ref()
                .is_some_and(|r| r.used_bytes > 0 && r.process_bytes == Some(r.used_bytes))
        );
        assert!(probe.total_bytes().is_some_and(|t| t > 0));
        assert!(probe.available_bytes().is_some_and(|a| a > 0));
        let sample = reading.map(|r| r.into_sample(probe.source()));
        assert_eq!(sample.map(|s| s.source), Some(MemorySource::Rss));
    }

    #[test]
    fn nvml_probe_never_panics_and_explains_itself() {
        let info = device(DeviceKind::Gpu, "NVIDIA Corporation", Some("0000:01:00.0"));
        let (mut probe, notes) = Probe::for_device(&info, std::process::id());
        match probe.source() {
            // No driver here: a note, and reads that return nothing.
            MemorySource::Unavailable => {
                assert!(
                    notes.iter().any(|n| n.starts_with("NVML unavailable")),
                    "{notes:?}"
                );
                assert_eq!(probe.read(), None);
                assert_eq!(probe.try_read(), Err(TelemetryError::NoSource));
                assert_eq!(probe.available_bytes(), None);
            }
            // A machine with a GPU.
            MemorySource::Nvml => {
                // An idle GPU may well report 0 bytes used.
                let r = probe.read();
                assert!(
                    r.is_some_and(|r| r.total_bytes.is_some_and(|t| t > 0 && t >= r.used_bytes))
                );
                assert!(probe.available_bytes().is_some());
                assert!(probe.baseline_bytes().is_some());
            }
            other => panic!("unexpected source {other}"),
        }
    }

    #[test]
    fn missing_nvml_note_is_the_documented_text() {
        // Only checkable where libnvidia-ml.so.1 is really absent.
        if nvml_wrapper::Nvml::init()
            .is_err_and(|e| matches!(e, nvml_wrapper::error::NvmlError::LibloadingError(_)))
        {
            let info = device(DeviceKind::Gpu, "NVIDIA Corporation", None);
            let (probe, notes) = Probe::for_device(&info, 1);
            assert_eq!(probe.source(), MemorySource::Unavailable);
            assert_eq!(notes, vec![UNAVAILABLE.to_string()]);
        }
    }

    #[test]
    fn other_vendors_get_no_source_and_a_note() {
        let (probe, notes) = Probe::for_device(&device(DeviceKind::Gpu, "AMD", None), 1);
        assert_eq!(probe.source(), MemorySource::Unavailable);
        assert_eq!(notes.len(), 1);
    }

    #[test]
    fn vanished_pid_is_an_error_not_zero_bytes() {
        let Ok(mut child) = std::process::Command::new("sleep").arg("10").spawn() else {
            return; // no `sleep` binary: nothing to test against
        };
        let pid = child.id();
        let probe = Probe::rss(pid);
        let _ = child.kill();
        let Ok(mut probe) = probe else {
            panic!("rss probe of a live child failed");
        };
        // Killed but not yet reaped, the child is a zombie whose statm reads zeros.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let gone = loop {
            match probe.try_read() {
                Ok(r) if std::time::Instant::now() < deadline => {
                    assert!(r.used_bytes > 0, "a dying process read as 0 bytes");
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                other => break other,
            }
        };
        assert_eq!(gone, Err(TelemetryError::ProcessGone { pid }));
        let _ = child.wait();
        assert_eq!(probe.try_read(), Err(TelemetryError::ProcessGone { pid }));
        assert!(matches!(
            Probe::rss(pid),
            Err(TelemetryError::ProcessGone { .. })
        ));
    }
}
