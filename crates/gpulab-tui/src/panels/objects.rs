//! Live objects as gpulab's ledger counts them (never driver reference counts),
//! the bytes the ledger holds against the bytes the device holds above the
//! baseline, the gap highlighted with its causes, and whether memory came back
//! once the worker was gone.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget, Wrap};

use super::{MIB, block, fmt_mib, fmt_signed_mib, usable};
use crate::lab::{Api, ObjKind};
use crate::run::gap;
use crate::runstate::RunState;
use crate::theme::Theme;
use crate::trace::EndStatus;

pub struct ObjectsPanel<'a> {
    pub run: Option<&'a RunState>,
    /// A watched job's process shown alone (`n`); None: every one.
    pub rank: Option<u32>,
    pub theme: Theme,
    pub focused: bool,
}

impl ObjectsPanel<'_> {
    /// The label and bytes columns' widths in a panel `w` wide: narrow panels
    /// (80x24) keep the short labels of the old table.
    fn widths(w: usize) -> (usize, usize) {
        let lw = if w >= 32 { 13 } else { 9 };
        (lw, w.saturating_sub(lw + 6).min(10))
    }

    fn header(&self, w: usize) -> Line<'static> {
        let (lw, bw) = Self::widths(w);
        Line::styled(
            format!(
                "{:<lw$}{:>5} {:>bw$}",
                "kind",
                "live",
                if bw >= 5 { "bytes" } else { "" }
            ),
            self.theme.dim(),
        )
    }

    /// One process's objects (a job's rank, `n`), and what NVML says it
    /// holds against them.
    fn rank_lines(&self, run: &RunState, pid: u32, w: usize) -> Vec<Line<'static>> {
        let (lw, bw) = Self::widths(w);
        let t = self.theme;
        let mut out = vec![self.header(w)];
        let index = &run.run.live_index();
        let of_pid = index.held_by_pid.iter().filter(|((p, _), _)| *p == pid);
        for (&(_, kind), &(n, b)) in of_pid {
            let b = if b > 0 && bw >= 8 {
                fmt_mib(b as f64)
            } else {
                String::new()
            };
            out.push(Line::raw(format!(
                "{:<lw$}{n:>5} {b:>bw$}",
                plural(kind, lw)
            )));
        }
        let held: u64 = run.run.held_by_process(pid).values().sum();
        out.push(Line::from(vec![
            Span::styled("device  ", t.dim()),
            Span::raw(format!("{} in its objects", fmt_mib(held as f64))),
        ]));
        // Composed apart on its GPU (a host of many GPUs): what no share
        // of its own names, as the program's line says it.
        if let Some(own) = run
            .run
            .views()
            .and_then(|v| v.get(pid))
            .and_then(|v| v.run.holders())
        {
            out.push(own_line(&own, t));
        } else if let Some(m) = run.run.ranks().members.get(&pid) {
            let own: u64 = m.on_gpu.values().sum();
            if !m.on_gpu.is_empty() {
                out.push(Line::from(vec![
                    Span::styled("NVML    ", t.dim()),
                    Span::raw(fmt_mib(own as f64)),
                    Span::styled(
                        format!(
                            ", {} in no object",
                            fmt_signed_mib(own as i64 - held as i64)
                        ),
                        t.dim(),
                    ),
                ]));
            }
        }
        out
    }

    /// The panel's lines; of the causes, no more than `h` rows can show.
    fn lines(&self, run: &RunState, w: usize, h: usize) -> Vec<Line<'static>> {
        if let Some(pid) = self.rank {
            return self.rank_lines(run, pid, w);
        }
        let (lw, bw) = Self::widths(w);
        let t = self.theme;
        let live = run.run.live_counts();
        // Folded as objects come and go: a frame never walks the ledger.
        let index = &run.run.live_index();
        let bytes = &index.held_bytes;
        let mut out = vec![self.header(w)];
        // Only the kinds the run's APIs have; before any is known, all.
        let apis = run.run.apis();
        let kinds: Vec<ObjKind> = if apis.is_empty() {
            ObjKind::ALL.to_vec()
        } else {
            let of: Vec<Vec<ObjKind>> = apis.into_iter().map(Api::kinds_of).collect();
            ObjKind::ALL
                .into_iter()
                .filter(|k| of.iter().any(|kinds| kinds.contains(k)))
                .collect()
        };
        let made = |k: ObjKind| index.made.contains(&k);
        for kind in kinds
            .into_iter()
            .filter(|&k| !Api::listed_when_made(k) || made(k))
        {
            let n = live.get(&kind).copied().unwrap_or(0);
            let b = bytes.get(&kind).copied().unwrap_or(0);
            let style = if n > 0 { Style::new() } else { t.dim() };
            let b = if b > 0 && bw >= 8 {
                fmt_mib(b as f64)
            } else {
                String::new()
            };
            out.push(Line::styled(
                format!("{:<lw$}{n:>5} {b:>bw$}", plural(kind, lw)),
                style,
            ));
        }
        let g = gap::within(&run.run, h);
        out.push(Line::from(vec![
            Span::styled("ledger  ", t.dim()),
            Span::raw(fmt_mib(g.ledger as f64)),
        ]));
        // A watched program: its own memory, as the holders compose it (the
        // device's figure counts every process, and after the exit it is back).
        let watched = run.run.meta().is_some_and(|m| m.watch.is_some());
        if run.run.ranks().spread() {
            // One GPU's reading against objects on all of them would say
            // nothing: one rank at a time does (`n`).
            out.push(Line::styled("on several GPUs: n shows one rank", t.dim()));
            return out;
        }
        match run.run.holders().filter(|_| watched) {
            Some(own) => out.push(own_line(&own, t)),
            None => {
                if let Some(d) = g.device {
                    out.push(Line::from(vec![
                        Span::styled("device  ", t.dim()),
                        Span::raw(format!("{} above baseline", fmt_signed_mib(d))),
                    ]));
                }
                if let Some(u) = g.unexplained().filter(|_| g.notable()) {
                    out.push(Line::styled(
                        format!("gap     {} the ledger does not hold", fmt_signed_mib(u)),
                        t.warn().add_modifier(ratatui::style::Modifier::BOLD),
                    ));
                }
            }
        }
        for c in &g.causes {
            out.push(Line::styled(format!("· {c}"), t.warn()));
        }
        if let Some(line) = came_back(run) {
            out.push(Line::styled(line, t.ok()));
        }
        out
    }
}

fn plural(kind: ObjKind, width: usize) -> String {
    let name = kind.plural().replace('_', " ");
    if name.chars().count() <= width {
        return name;
    }
    // "host buffers" in a narrow panel: "host bufs" keeps the words;
    // "managed allocations": "managed".
    name.replace("buffers", "bufs")
        .replace(" allocations", "")
        .chars()
        .take(width)
        .collect()
}

/// After the worker is gone: did the memory come back?
fn came_back(run: &RunState) -> Option<String> {
    let end = run.run.end()?;
    let watched = run.run.meta().is_some_and(|m| m.watch.is_some());
    if watched && run.cpu_device() {
        return Some("the program exited: its host memory went back to the OS".into());
    }
    if run.cpu_device() {
        return Some("worker exited: its host memory went back to the OS".into());
    }
    let (_, after) = run.run.readings_after_exit().last()?;
    let start = run
        .run
        .sample_stats()
        .first
        .as_ref()
        .map(|s| s.used_bytes)?;
    let diff = *after as i64 - start as i64;
    let cancelled = matches!(end.status, EndStatus::Cancelled);
    // What ran: gpulab's worker for a lab, the user's own program watched.
    let who = if watched { "the program" } else { "worker" };
    // Below the start counts as back: other processes may have freed memory too.
    Some(if diff as f64 <= 4.0 * MIB {
        format!(
            "{who} {}: device memory back to its level at the start ({})",
            match (cancelled, watched) {
                (false, _) => "exited",
                (true, false) => "killed",
                (true, true) => "stopped by gpulab",
            },
            fmt_signed_mib(diff)
        )
    } else {
        format!(
            "{who} exited: device memory {} from the start, still coming back",
            fmt_signed_mib(diff)
        )
    })
}

impl Widget for &ObjectsPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let title = match (self.rank, self.run) {
            (Some(pid), Some(run)) => format!(
                "Live objects (ledger) · {} (pid {pid})",
                super::gpus::short_name(run.run.ranks(), pid)
            ),
            _ => "Live objects (ledger)".into(),
        };
        let b = block(title, self.focused, self.theme);
        let inner = b.inner(area);
        b.render(area, buf);
        let Some(inner) = usable(inner) else { return };
        let lines = match self.run {
            Some(run) if run.run.meta().is_some() => {
                self.lines(run, inner.width as usize, inner.height as usize)
            }
            _ => vec![Line::styled("no run yet", self.theme.dim())],
        };
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .render(inner, buf);
    }
}

/// `own     1976.00, +0.00 unexpl.`: a program's (or one rank's) own memory
/// and what no share names, a warning past 4 MiB.
fn own_line(own: &crate::run::holders::Holders, t: Theme) -> Line<'static> {
    let u = own.unexplained();
    Line::from(vec![
        Span::styled("own     ", t.dim()),
        Span::raw(fmt_mib(own.total as f64)),
        Span::styled(
            format!(", {} unexpl.", fmt_signed_mib(u)),
            if u.unsigned_abs() > 4 << 20 {
                t.warn()
            } else {
                t.dim()
            },
        ),
    ])
}
