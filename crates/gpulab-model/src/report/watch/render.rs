//! A watched program's report as text and Markdown.

use super::*;

/// `text` with its first letter in capitals.
fn upper_first(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

impl WatchReport {
    /// The command on one line: a newline or other control character in an
    /// argument (`python3 -c "…"`) is written as its escape.
    fn command_line(&self) -> String {
        self.command
            .join(" ")
            .chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect()
    }

    /// What the report leads with: the refused call and what a framework
    /// said of its refusal.
    fn ran_out_lines(&self) -> Vec<String> {
        let mut out = self
            .ran_out
            .as_ref()
            .map(WatchRanOut::lines)
            .unwrap_or_default();
        if let Some(f) = &self.framework_refused {
            out.extend(f.lines());
        }
        out
    }

    /// The APIs watched in any process: `opencl`, `cuda`, `cuda+opencl`, `none`.
    fn apis(&self) -> String {
        let apis: BTreeSet<&str> = self
            .processes
            .iter()
            .flat_map(|p| p.apis.iter().map(String::as_str))
            .collect();
        if apis.is_empty() {
            "none".into()
        } else {
            apis.into_iter().collect::<Vec<_>>().join("+")
        }
    }

    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "gpulab watch: {} (pid {}) {} after {:.2} s",
            self.command_line(),
            self.pid,
            self.ended,
            self.seconds()
        );
        let records: u64 = self.processes.iter().filter_map(|p| p.records).sum();
        let dropped: u64 = self.processes.iter().filter_map(|p| p.dropped).sum();
        let _ = writeln!(
            s,
            "agent: {} process(es) ({}), {} calls ({} failed), {records} records sent, {dropped} dropped",
            self.processes.len(),
            self.apis(),
            self.calls,
            self.failed_calls
        );
        if let Some(cost) = &self.observer {
            let _ = writeln!(s, "{}", cost.verdict);
        }
        for line in self.ran_out_lines() {
            let _ = writeln!(s, "{line}");
        }
        for line in self.memory_lines() {
            let _ = writeln!(s, "{line}");
        }
        if let Some(h) = &self.holders {
            let _ = write!(
                s,
                "\nwho holds it ({}):\n{}",
                self.memory_source_label(),
                h.table().text()
            );
            for line in self.holders_lines(h) {
                let _ = writeln!(s, "{line}");
            }
        }
        for line in self.frameworks.iter().flat_map(AllocatorReport::lines) {
            let _ = writeln!(s, "{line}");
        }
        if !self.ranks.is_empty() {
            let _ = writeln!(s, "\n{}:", self.ranks_heading());
            for r in &self.ranks {
                for line in r.lines(!self.gpus.is_empty()) {
                    let _ = writeln!(s, "{line}");
                }
            }
        }
        if !self.kinds.is_empty() {
            let _ = write!(s, "\n{}", self.kinds_table().text());
        }
        self.misuse_text(&mut s);
        self.alive_text(&mut s);
        if let Some(line) = self.freed_unseen.line() {
            let _ = writeln!(s, "\n{line}");
        }
        self.held_text(&mut s);
        for o in &self.outlived_release {
            let _ = if o.count == 1 {
                writeln!(
                    s,
                    "\n1 {} deleted by the driver {:.2} ms after the program released it",
                    o.kind.as_str().replace('_', " "),
                    o.max_ms
                )
            } else {
                writeln!(
                    s,
                    "\n{} {} deleted by the driver after the program released them: median \
                     {:.2} ms, longest {:.2} ms after the release",
                    o.count,
                    o.kind.plural(),
                    o.median_ms,
                    o.max_ms
                )
            };
        }
        for n in &self.notes {
            let _ = writeln!(s, "\nnote: {n}");
        }
        for w in &self.warnings {
            let _ = writeln!(s, "\nwarning: {w}");
        }
        s
    }

    /// What the program left alive, by maker (the uncertain ones apart).
    /// Calls on objects the program had released, each with where it was
    /// made and what made the object.
    fn misuse_text(&self, s: &mut String) {
        if self.misuse_count == 0 {
            return;
        }
        let n = self.misuse_count;
        let _ = writeln!(
            s,
            "\nmisuse: {n} call{} named an object the program had already released (the \
             driver may have answered, or done anything: the object was no longer the \
             program's), or freed stream-ordered memory synchronously:",
            if n == 1 { "" } else { "s" }
        );
        for m in &self.misuse {
            m.text(s);
        }
        let shown = self.misuse.len() as u64;
        if shown < n {
            let _ = writeln!(s, "  … and {} more", n - shown);
        }
    }

    fn alive_text(&self, s: &mut String) {
        for section in [
            AliveSection::Leaked,
            AliveSection::Allocator,
            AliveSection::Runtime,
            AliveSection::Uncertain,
        ] {
            let groups: Vec<&AliveGroup> = self
                .alive_at_exit
                .iter()
                .filter(|g| g.section() == section)
                .collect();
            if groups.is_empty() {
                continue;
            }
            let _ = writeln!(
                s,
                "\n{}",
                match section {
                    AliveSection::Leaked => "alive at exit, never released by the program:",
                    AliveSection::Allocator =>
                        "alive at exit, held by a framework's allocator (its cache and the \
                         tensors alive then, which the exit returns to the driver; its own \
                         figures are above):",
                    AliveSection::Runtime =>
                        "alive at exit, held for the process's life by the CUDA runtime or \
                         a library that called the driver (the primary context it retained, \
                         the modules of its kernels, its pool of streams, a CUDA library's \
                         workspaces kept for its handles; the exit gives them back, not the \
                         program's leaks; compute-sanitizer's leak check counts the \
                         allocations among them as leaks, for nothing freed them):",
                    AliveSection::Uncertain =>
                        "alive at exit as far as seen (uncertain: the process's last records \
                         never arrived, a release may be missing):",
                }
            );
            for g in groups {
                let by = match g.owner.as_str() {
                    "program" | "unknown" => String::new(),
                    _ => format!(", through {}", Owner::label_of(&g.owner)),
                };
                let _ = writeln!(
                    s,
                    "  {:>5} {:<12} {:>10.2} MiB  made by {}",
                    g.count,
                    g.kind.counted(g.count),
                    mib(g.bytes),
                    crate::run::maker_text(&g.created_by, &by, g.pid, g.thread),
                );
                for f in &g.backtrace {
                    let _ = writeln!(s, "          at {}", fit(&f.describe(), FRAME_WIDTH));
                }
                // Events and kernels carry no stack unless asked: say how to
                // find where a leaked one was made.
                if g.backtrace.is_empty()
                    && section == AliveSection::Leaked
                    && matches!(g.kind, ObjKind::Event | ObjKind::Kernel)
                {
                    let _ = writeln!(
                        s,
                        "          (where: `gpulab watch --backtrace` takes the making call's \
                         stack for {} too)",
                        g.kind.plural()
                    );
                }
            }
        }
    }

    /// What the program released and the driver still holds, and what pins it.
    fn held_text(&self, s: &mut String) {
        if !self.held_by_driver.is_empty() {
            let _ = writeln!(s, "\nreleased by the program, never deleted by the driver:");
            if self.held_by_driver.len() > 1 {
                for g in &self.held_by_driver_groups {
                    let _ = writeln!(s, "  {}", g.line());
                }
            }
            for h in &self.held_by_driver {
                let pins = if h.pinned_by.is_empty() {
                    "nothing the program holds refers to it".to_string()
                } else {
                    format!("pinned by {}", h.pins_text())
                };
                let _ = writeln!(
                    s,
                    "  {}: {pins}{}",
                    h.what(),
                    if h.uncertain {
                        " (uncertain: its process's last records never arrived)"
                    } else {
                        ""
                    }
                );
            }
        }
    }

    /// The Markdown section of what the driver still holds: the groups, then
    /// each object.
    fn held_markdown(&self, s: &mut String) {
        if self.held_by_driver.is_empty() {
            return;
        }
        let _ = writeln!(s, "\n## Released, never deleted by the driver\n");
        if self.held_by_driver.len() > 1 {
            for g in &self.held_by_driver_groups {
                let _ = writeln!(s, "- {}", g.line());
            }
        }
        for h in &self.held_by_driver {
            let _ = writeln!(
                s,
                "- {}; pinned by: {}",
                h.what(),
                if h.pinned_by.is_empty() {
                    "nothing the program holds".to_string()
                } else {
                    h.pins_text()
                }
            );
        }
    }

    /// How long the program ran, in the seconds the text reports say.
    fn seconds(&self) -> f64 {
        self.duration_ms / 1e3
    }

    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "# gpulab watch: {}\n",
            md_code(&self.command_line(), false)
        );
        let _ = writeln!(
            s,
            "- pid {}, {} after {:.2} s",
            self.pid,
            self.ended,
            self.seconds()
        );
        let _ = writeln!(
            s,
            "- {} calls ({} failed) from {} process(es) ({})",
            self.calls,
            self.failed_calls,
            self.processes.len(),
            self.apis()
        );
        if let Some(cost) = &self.observer {
            let _ = writeln!(s, "- {}", cost.verdict);
        }
        for line in self.ran_out_lines() {
            let _ = writeln!(s, "- {}", line.trim_start());
        }
        for line in self.memory_lines() {
            let _ = writeln!(s, "- {line}");
        }
        if let Some(h) = &self.holders {
            let _ = write!(
                s,
                "\n## Who holds it ({})\n\n{}",
                self.memory_source_label(),
                h.table().markdown()
            );
            for line in self.holders_lines(h) {
                let _ = writeln!(s, "- {line}");
            }
        }
        for a in &self.frameworks {
            let mut lines = a.lines().into_iter();
            if let Some(head) = lines.next() {
                let _ = writeln!(s, "- {head}");
            }
            for line in lines {
                let _ = writeln!(s, "  - {}", line.trim_start());
            }
        }
        if !self.ranks.is_empty() {
            let _ = writeln!(s, "\n## {}\n", upper_first(&self.ranks_heading()));
            for r in &self.ranks {
                let mut lines = r.lines(!self.gpus.is_empty()).into_iter();
                if let Some(head) = lines.next() {
                    let _ = writeln!(s, "- {}", head.trim_start());
                }
                for line in lines {
                    let _ = writeln!(s, "  - {}", line.trim_start());
                }
            }
        }
        let _ = write!(s, "\n{}", self.kinds_table().markdown());
        self.alive_markdown(&mut s);
        self.held_markdown(&mut s);
        for n in &self.notes {
            let _ = writeln!(s, "\n> note: {n}");
        }
        for w in &self.warnings {
            let _ = writeln!(s, "\n> warning: {w}");
        }
        s
    }

    /// The objects alive at exit, as a Markdown table, then the stacks that made them.
    fn alive_markdown(&self, s: &mut String) {
        if !self.alive_at_exit.is_empty() {
            let _ = writeln!(
                s,
                "\n## Alive at exit\n\n| count | kind | MiB | made by | pid | thread |\n|---:|---|---:|---|---:|---:|"
            );
            for g in &self.alive_at_exit {
                let _ = writeln!(
                    s,
                    "| {} | {}{} | {:.2} | {} | {} | {} |",
                    g.count,
                    g.kind.counted(g.count),
                    match g.section() {
                        AliveSection::Leaked => "",
                        AliveSection::Allocator => " (its allocator's)",
                        AliveSection::Runtime => " (the runtime's or a library's)",
                        AliveSection::Uncertain => " (uncertain)",
                    },
                    mib(g.bytes),
                    md_code(&g.created_by, true),
                    g.pid,
                    g.thread
                );
            }
            for (i, g) in self.alive_at_exit.iter().enumerate() {
                if g.backtrace.is_empty() {
                    continue;
                }
                let _ = writeln!(
                    s,
                    "\nRow {}: {} {} made at\n",
                    i + 1,
                    g.count,
                    g.kind.counted(g.count)
                );
                for f in &g.backtrace {
                    let _ = writeln!(s, "- {}", md_code(&f.describe(), false));
                }
            }
        }
    }

    /// Per kind of object: made, released, most alive at once, alive at exit.
    fn kinds_table(&self) -> Table {
        Table {
            columns: &[
                ("objects", 12, false),
                ("created", 8, true),
                ("released", 9, true),
                ("most alive", 11, true),
                ("alive at exit", 14, true),
                ("MiB alive", 10, true),
            ],
            rows: self
                .kinds
                .iter()
                .map(|k| {
                    vec![
                        k.kind.plural().to_string(),
                        k.created.to_string(),
                        k.released.to_string(),
                        k.peak_alive.to_string(),
                        k.alive_at_exit.to_string(),
                        format!("{:.2}", mib(k.alive_bytes)),
                    ]
                })
                .collect(),
        }
    }

    /// What the program's memory did, each figure with what it is measured against.
    fn memory_lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        let used: Vec<&GpuReport> = self.gpus.iter().filter(|g| !g.pids.is_empty()).collect();
        if used.len() > 1 {
            out.push(format!(
                "the program held memory on {} GPUs: each is measured apart, and who holds it \
                 is said per process below (one GPU's reading set against objects on all of \
                 them would explain nothing)",
                used.len()
            ));
            out.extend(used.iter().map(|g| g.line()));
        } else if let [g] = used.as_slice()
            && g.index != self.gpus.first().map_or(0, |f| f.index)
        {
            out.push(format!(
                "the program held memory on GPU {} alone: its figures are that GPU's, per \
                 process below",
                g.index
            ));
            out.push(g.line());
        }
        match (self.peak_memory_bytes, &self.peak_read) {
            (Some(peak), _) if let Some(at) = self.peak_objects_at_ms => out.push(format!(
                "peak memory: at least {:.1} MiB, what its objects held at once at {at:.1} ms \
                 (their making calls' sizes), more than any reading of its memory caught",
                mib(peak)
            )),
            (Some(peak), Some(read)) => out.push(format!(
                "peak memory (the device's memory as the agent read it {} {} at {:.1} ms, \
                 less the rest of the device's at NVML's latest sample): {:.1} MiB",
                read.side,
                read.api,
                read.at_ms,
                mib(peak)
            )),
            (Some(peak), None) => out.push(format!(
                "peak memory ({}): {:.1} MiB",
                self.memory_source_label(),
                mib(peak)
            )),
            (None, _) => {}
        }
        if let (Some(growth), Some(base)) =
            (self.peak_device_growth_bytes, self.device_baseline_bytes)
        {
            out.push(format!(
                "device memory: at most {:.1} MiB above the {:.1} MiB in use before the program \
                 started (all processes on the GPU)",
                mib(growth),
                mib(base)
            ));
        }
        out
    }

    /// What the per-process section says and measures against.
    fn ranks_heading(&self) -> String {
        let named: Vec<String> = self
            .gpus
            .iter()
            .filter(|g| !g.pids.is_empty())
            .map(|g| format!("GPU {} {}", g.index, g.name))
            .collect();
        format!(
            "per process ({} of the program; {}objects as each process's agent reported \
             them){}",
            self.ranks.len(),
            if self.gpus.is_empty() {
                ""
            } else {
                "bytes on each GPU are NVML's per-process figure, "
            },
            if named.is_empty() {
                String::new()
            } else {
                format!("; {}", named.join(", "))
            }
        )
    }

    /// The lines under the who-holds table: the table's own, and where the
    /// headline's peak is its objects' (no reading caught it), why the
    /// table's peak is lower.
    fn holders_lines(&self, h: &super::HoldersReport) -> Vec<String> {
        let mut out = h.lines();
        let table_peak = h.at_peak.as_ref().map_or(0, |s| s.total_bytes);
        if let Some(peak) = self
            .peak_memory_bytes
            .filter(|p| self.peak_objects_at_ms.is_none() && *p > table_peak + (2 << 20))
        {
            out.insert(
                0,
                format!(
                    "the table's peak is its highest reading that could be composed: the \
                     readings up to {:.1} MiB fell while a context was being made or torn \
                     down, or lagged what the records said, where no share can be told; who \
                     held that memory is not known",
                    mib(peak)
                ),
            );
        }
        if let (Some(at), Some(peak)) = (self.peak_objects_at_ms, self.peak_memory_bytes) {
            out.insert(
                0,
                format!(
                    "the table's peak is its highest reading; its objects held {:.1} MiB at once \
                     at {at:.1} ms, between two readings, so its memory then was at least that, \
                     and who held the rest then is not known",
                    mib(peak)
                ),
            );
        }
        out
    }

    fn memory_source_label(&self) -> &str {
        // Managed pages on the device are in the figures once the program
        // made managed memory: NVML's figure for it counts none of them.
        let managed = self.holders.as_ref().is_some_and(|h| {
            [&h.at_peak, &h.at_exit]
                .iter()
                .any(|s| s.as_ref().is_some_and(|s| s.managed_on_device_bytes > 0))
        });
        match self.memory_source {
            MemorySource::Rss => "the program's resident host memory",
            MemorySource::Nvml if managed => {
                "the program's own device memory: NVML's figure for it and what the device \
                 held for its managed memory"
            }
            MemorySource::Nvml => "the program's own device memory, NVML",
            MemorySource::Unavailable => "not measured",
        }
    }
}
