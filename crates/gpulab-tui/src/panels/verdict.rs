//! Each claim's verdict with the numbers that decided it, the run's notes, then the
//! lab's teaching text (look / why / instead), scrollable. For a watched program,
//! which has no claims: what it holds now, and what the driver holds for it.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget, Wrap};

use super::{block, usable};
use crate::lab::Lab;
use crate::report::holders::Shares;
use crate::report::watch::{AliveGroup, WatchReport, short_id};
use crate::run::Load;
use crate::run::owners::Owner;
use crate::runstate::{Feed, RunState};
use crate::teaching::{self, Inline};
use crate::theme::Theme;
use crate::trace::{ClaimVerdict, EndStatus, Lesson, NoteLevel, ObjKind, Tone};
use crate::units::mib;

pub struct VerdictPanel<'a> {
    pub lab: Option<&'a Lab>,
    /// The variant shown (of `lab`): whose lesson the claims state before a run.
    pub variant: usize,
    pub run: Option<&'a RunState>,
    /// A watched job's process shown alone (`n`); None: every one.
    pub rank: Option<u32>,
    pub scroll: u16,
    pub theme: Theme,
    pub focused: bool,
    /// Class mode: nothing gives the answer before the verdicts (the
    /// lesson's expectations and the teaching text wait), and each claim
    /// shows what was predicted of it.
    pub class_mode: bool,
    /// The predictions made so far for the lab and variant shown (class
    /// mode, before the run).
    pub predicted: Option<&'a std::collections::BTreeMap<String, crate::trace::Predicted>>,
    /// A lesson's step (`--lesson`): its question before the verdicts, its
    /// hint with them.
    pub step: Option<crate::app::StepShown<'a>>,
}

/// Who holds the program's memory at the latest reading, share by share, the
/// unexplained rest said with its size.
fn holders_line(h: &Shares, ended: bool, t: Theme) -> Line<'static> {
    let when = if ended { "at its last reading" } else { "now" };
    let by: Vec<String> = h
        .objects_held_by
        .iter()
        .filter(|(o, _)| h.objects_held_by.len() > 1 || o.as_str() != "program")
        .map(|(o, b)| format!("{} {:.2}", Owner::label_of(o), mib(*b)))
        .collect();
    let objects = format!(
        "{:.2} MiB held by objects{}",
        mib(h.objects_held_bytes),
        if by.is_empty() {
            String::new()
        } else {
            format!(" ({})", by.join(", "))
        }
    );
    let kept = h.released_not_deleted_bytes
        + h.reserves_released_bytes
        + h.kept_by_pool_bytes
        + h.held_by_graphs_bytes;
    // The shares past the objects, said only where they hold something.
    let shares = [
        (h.before_api_bytes, "by the process before its API's use"),
        (
            h.runtime_loaded_bytes,
            "by its API's runtime, loaded before its first object",
        ),
        (
            h.own_between_calls_bytes,
            "its own, grown while no API call ran",
        ),
        (h.cached_by_allocators_bytes, "cached by allocators"),
        (
            h.reserves_held_bytes,
            "by the reserves of its contexts and modules",
        ),
        (kept, "released, kept by the driver"),
        (
            h.managed_on_device_bytes,
            "for its managed memory on the device",
        ),
    ];
    let parts: Vec<String> = std::iter::once(objects)
        .chain(
            shares
                .iter()
                .filter(|(bytes, _)| *bytes > 0)
                .map(|(bytes, words)| format!("{:.2} MiB {words}", mib(*bytes))),
        )
        .collect();
    let unexplained = h.unexplained_bytes as f64 / f64::from(1 << 20);
    Line::from(vec![
        Span::styled(
            format!("who holds its {:.2} MiB {when}: ", mib(h.total_bytes)),
            t.title(),
        ),
        Span::styled(parts.join(", "), t.dim()),
        Span::styled(
            format!("; unexplained {unexplained:.2} MiB"),
            if unexplained.abs() > 4.0 {
                t.warn()
            } else {
                t.dim()
            },
        ),
        Span::styled(
            match (h.managed_bytes, h.managed_on_device_untold) {
                (0, false) => String::new(),
                (held, false) => format!("; {:.2} MiB of managed memory held", mib(held)),
                (held, true) => format!(
                    "; besides, {:.2} MiB of managed memory, which NVML counts in no process \
                     (how much is on the device not told)",
                    mib(held)
                ),
            },
            t.dim(),
        ),
    ])
}

fn number(v: f64) -> String {
    if v.is_infinite() {
        "never".into()
    } else if v.fract() == 0.0 && v.abs() < 1e9 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

impl VerdictPanel<'_> {
    fn watched(&self) -> bool {
        self.run
            .is_some_and(|r| r.run.meta().is_some_and(|m| m.watch.is_some()))
    }

    /// A watched program's findings so far, from the same report `watch` prints.
    fn findings(&self, run: &RunState) -> Vec<Line<'static>> {
        let t = self.theme;
        let Some(r) = run.findings() else {
            return vec![Line::styled(
                "(the findings come with the next frame)",
                t.dim(),
            )];
        };
        let mut out = Vec::new();
        // A replay stopped halfway is not the program's exit either.
        let ended = run.run.end().is_some();
        let now = if ended { "alive at exit" } else { "alive now" };
        let shown = |pid: u32| self.rank.is_none_or(|r| r == pid);
        let refused = r.framework_refused.as_ref().filter(|f| shown(f.pid));
        // What the refused process held, its three places that held the
        // most: under the refusal, or under the ranks' lines where there are
        // ranks (which one ran out first comes first).
        let held = |out: &mut Vec<Line<'static>>| {
            for line in refused.map(|f| f.held_lines(3)).unwrap_or_default() {
                out.push(Line::styled(line.trim_start().to_string(), t.dim()));
            }
        };
        // The driver's refusal leads, with the places that held the most
        // then (a job of ranks says it in its ranks' lines).
        if r.ranks.is_empty()
            && let Some(o) = r.ran_out.as_ref().filter(|o| shown(o.pid))
        {
            // The call and its frames, then what was held, then the device
            // and the program's figures then.
            let lead = o.lead_lines();
            let (call, then) = lead.split_at(lead.len().min(1 + o.backtrace.len()));
            let places = o.held_lines(3);
            for (i, line) in call.iter().chain(&places).chain(then).enumerate() {
                out.push(Line::styled(
                    line.trim_start().to_string(),
                    if i == 0 { t.bad() } else { t.dim() },
                ));
            }
        }
        if let Some(f) = refused {
            for (i, line) in f.lead_lines().into_iter().enumerate() {
                out.push(Line::styled(
                    line.trim_start().to_string(),
                    if i == 0 { t.bad() } else { t.dim() },
                ));
            }
            // Its tensors by line (a heading and three lines), or how to
            // have them.
            for line in f.tensor_lines().into_iter().take(4) {
                out.push(Line::styled(line.trim_start().to_string(), t.dim()));
            }
            if r.ranks.is_empty() {
                held(&mut out);
            }
        }
        out.extend(misuse_lines(r, &shown, t));
        if let Some(h) = r.holders.as_ref().and_then(|h| h.at_exit.as_ref()) {
            out.push(holders_line(h, ended, t));
        }
        // Said once a process's agent ended and counted what it cost.
        if let Some(cost) = &r.observer {
            out.push(Line::styled(cost.verdict.clone(), t.dim()));
        }
        for k in r.ranks.iter().filter(|k| shown(k.pid)) {
            for (i, line) in k.lines(!r.gpus.is_empty()).into_iter().enumerate() {
                let style = match i {
                    0 if k.ran_out.as_ref().is_some_and(|o| o.first) => t.bad(),
                    0 => t.title(),
                    _ => t.dim(),
                };
                out.push(Line::styled(line.trim_start().to_string(), style));
            }
        }
        if !r.ranks.is_empty() {
            held(&mut out);
        }
        for a in r.frameworks.iter().filter(|a| shown(a.pid)) {
            out.extend(a.lines().into_iter().map(|l| Line::styled(l, t.dim())));
        }
        let alive: Vec<_> = r.alive_at_exit.iter().filter(|g| shown(g.pid)).collect();
        if alive.is_empty() {
            out.push(Line::styled(format!("nothing {now}"), t.ok()));
        }
        for g in alive {
            out.push(alive_line(g, now, t));
        }
        if r.alive_at_exit.iter().any(|g| {
            g.kind == ObjKind::Buffer && g.created_by.starts_with("cuMem") && !g.kept_by_allocator
        }) {
            out.push(Line::styled(
                "a CUDA allocation with no free issued is the process's own: often its \
                 caching allocator's (PyTorch's empty_cache(), CuPy's free_all_blocks() \
                 give it back), not memory the driver kept",
                t.dim(),
            ));
        }
        out.extend(held_lines(r, ended, t));
        for o in &r.outlived_release {
            out.push(Line::styled(
                format!(
                    "{} {} deleted {:.2} ms (median) after their release",
                    o.count,
                    o.kind.counted(o.count).replace('_', " "),
                    o.median_ms
                ),
                t.dim(),
            ));
        }
        out
    }

    fn lines(&self) -> Vec<Line<'static>> {
        let mut out = Vec::new();
        if let Some(run) = self.run.filter(|_| self.watched()) {
            out.extend(self.findings(run));
        }
        let claims = self.run.map(|r| r.run.claims()).unwrap_or(&[]);
        self.lesson_step(claims.is_empty(), &mut out);
        if claims.is_empty() {
            self.pending(&mut out);
        } else {
            self.verdicts(claims, &mut out);
        }
        self.status(&mut out);
        // Class mode: the teaching text opens with the verdicts.
        if !self.class_mode || !claims.is_empty() {
            self.teaching(&mut out);
        }
        out
    }

    /// Where the class is in its lesson, the step's question (at the first
    /// step, before its run, the lesson's introduction too) and, once the
    /// verdicts are in, its hint. Away from the step's lab variant, only where
    /// to go.
    fn lesson_step(&self, before_run: bool, out: &mut Vec<Line<'static>>) {
        let Some(s) = self.step else {
            return;
        };
        let t = self.theme;
        out.push(Line::styled(
            format!(
                "lesson: {} · step {} of {} · {} min (> next step, < previous)",
                s.title,
                s.index + 1,
                s.count,
                s.step.minutes
            ),
            t.title(),
        ));
        if !s.here {
            out.push(Line::styled(
                format!(
                    "this step is {} [{}]: > or < goes back to it",
                    s.step.lab, s.step.variant
                ),
                t.dim(),
            ));
            out.push(Line::raw(""));
            return;
        }
        if s.index == 0 && before_run {
            out.push(Line::raw(s.intro.to_string()));
        }
        out.push(Line::from(vec![
            Span::styled("question: ", t.title()),
            Span::raw(s.step.question.clone()),
        ]));
        // The hint opens with the verdicts, above them, where it is read.
        if !before_run {
            out.push(Line::from(vec![
                Span::styled("hint: ", t.title()),
                Span::raw(s.step.hint.clone()),
            ]));
        }
        out.push(Line::raw(""));
    }

    /// Each claim's verdict, with the numbers that decided it.
    fn verdicts(&self, claims: &[ClaimVerdict], out: &mut Vec<Line<'static>>) {
        let t = self.theme;
        for c in claims {
            let style = match c.tone() {
                Tone::Good => t.ok(),
                Tone::Finding => t.finding(),
                Tone::Bad => t.bad(),
                Tone::Unsure => t.warn(),
                Tone::Neutral => Style::new(),
            };
            let mut head = vec![Span::styled(
                format!("{} {} ", c.mark(), c.verdict.label()),
                style,
            )];
            if let Some(l) = c.lesson() {
                let look = if l == Lesson::Unlike { style } else { t.dim() };
                head.push(Span::styled(format!("({}) ", l.label()), look));
            }
            head.push(Span::styled(format!("— {}: ", c.name), t.dim()));
            head.push(Span::raw(c.text.clone()));
            out.push(Line::from(head));
            if let Some(p) = self.run.and_then(|r| r.run.predictions().get(&c.name)) {
                let style = if p.matches(c.verdict) {
                    t.ok()
                } else {
                    t.title()
                };
                out.push(Line::styled(
                    format!("    {}", crate::report::prediction_line(*p, c)),
                    style,
                ));
            }
            let values: Vec<String> = c
                .values
                .iter()
                .map(|(k, v)| format!("{k} = {}", number(*v)))
                .collect();
            out.push(Line::styled(
                format!("    {}    {}", c.expr, values.join(", ")),
                t.dim(),
            ));
            if let Some(r) = &c.reason {
                out.push(Line::styled(format!("    why inconclusive: {r}"), t.warn()));
            }
        }
        for e in self
            .run
            .map(|r| crate::report::Estimated::of(&r.run))
            .unwrap_or_default()
        {
            let style = if e.within == Some(true) {
                t.ok()
            } else {
                t.title()
            };
            out.push(Line::styled(e.line(), style));
        }
        if let Some(w) = self
            .run
            .and_then(|r| r.run.load())
            .and_then(|l| Load::of(l).warning())
        {
            out.push(Line::styled(format!("! {w}"), t.warn()));
        }
    }

    /// The lab's claims before they are judged, and why they are not yet.
    fn pending(&self, out: &mut Vec<Line<'static>>) {
        let t = self.theme;
        if let Some(lab) = self.lab {
            let why = match self.run {
                Some(r) if r.running() && r.run.end().is_some() => {
                    "the worker has ended; verdicts come once its memory is back"
                }
                Some(r) if r.running() => "verdicts come when the run ends",
                // A replay before its end: the recorded verdicts are still to come.
                Some(r) if matches!(r.origin, Feed::Recording(_)) && r.run.end().is_none() => {
                    "the recorded verdicts come at the end of the recording"
                }
                Some(_) => "no verdicts: the run ended before they could be judged",
                None => "not run yet on this device",
            };
            out.push(Line::styled(format!("claims ({why}):"), t.dim()));
            if self.class_mode {
                out.push(Line::styled(
                    "class mode: predict each claim with its number (again: holds, does not \
                     hold, not sure, none), then Enter runs; the lesson waits for the verdicts",
                    t.title(),
                ));
            }
            let stepped = self.run.filter(|r| r.stepped());
            let variant = lab.variants.get(self.variant).map(|v| v.name.as_str());
            // The claims of the variant shown: the others say nothing of it.
            let applies = |c: &&crate::lab::Claim| variant.is_none_or(|v| c.applies_to(v));
            for (i, c) in lab.claims.iter().filter(applies).enumerate() {
                let mut head = vec![
                    Span::styled("○ ", t.dim()),
                    Span::raw(format!("{}: {}", c.name, c.text)),
                ];
                if self.class_mode {
                    // Its number, and what was predicted: never the lesson.
                    head[0] = Span::styled(format!("{} ", i + 1), t.title());
                    let said = self
                        .predicted
                        .and_then(|p| p.get(&c.name))
                        .map_or("—", |p| p.label());
                    head.push(Span::styled(format!(" · you predict: {said}"), t.title()));
                } else if let Some(e) = variant.and_then(|v| c.expected(v)) {
                    // The lesson before the run says it.
                    head.push(Span::styled(
                        format!(" (the lesson expects: {})", e.label()),
                        t.dim(),
                    ));
                }
                out.push(Line::from(head));
                out.push(Line::styled(format!("    {}", c.expr_src), t.dim()));
                let paced = match stepped {
                    Some(r) if c.applies_to(&r.variant()) => c.paced_metrics(),
                    _ => Vec::new(),
                };
                if !paced.is_empty() {
                    out.push(Line::styled(
                        format!(
                            "    stepping will leave this inconclusive: it reads {}",
                            paced.join(", ")
                        ),
                        t.warn(),
                    ));
                }
            }
        }
    }

    /// The run's finding, how it ended when not as planned, its notes.
    fn status(&self, out: &mut Vec<Line<'static>>) {
        let t = self.theme;
        if let Some(run) = self.run {
            if let Some(f) = &run.finding {
                out.push(Line::styled(format!("finding: {}", f.said), t.title()));
            }
            if let Some(end) = &run.run.end()
                && !matches!(end.status, EndStatus::Finished)
            {
                // A failure that is the lab's finding is stated above; the
                // status stays on screen, as what happened, not as a breakdown.
                let style = if run.finding.as_ref().is_some_and(|f| f.explains_end()) {
                    t.dim()
                } else {
                    t.bad()
                };
                out.push(Line::styled(format!("run {}", end.status.label()), style));
            }
            for n in run.run.notes_said() {
                let style = if n.level == NoteLevel::Warning {
                    t.warn()
                } else {
                    t.dim()
                };
                out.push(Line::styled(format!("note: {}", n.text), style));
            }
            if let Some(e) = &run.error {
                out.push(Line::styled(format!("recording: {e}"), t.bad()));
            }
        }
    }

    /// The lab's teaching text.
    fn teaching(&self, out: &mut Vec<Line<'static>>) {
        let t = self.theme;
        if let Some(lab) = self.lab {
            out.push(Line::raw(""));
            for (head, text) in [
                ("Look", &lab.teaching.look),
                ("Why", &lab.teaching.why),
                ("Instead", &lab.teaching.instead),
            ] {
                // Rendered, not shown as written: `code` and *emphasis* are
                // styles here, their marks gone.
                for (i, para) in teaching::paragraphs(text).into_iter().enumerate() {
                    let lead = if i == 0 {
                        format!("{head}: ")
                    } else {
                        String::new()
                    };
                    let mut spans = vec![Span::styled(lead, t.title())];
                    spans.extend(para.into_iter().map(|run| match run {
                        Inline::Text(s) => Span::raw(s),
                        Inline::Code(s) => Span::styled(s, t.code()),
                        Inline::Emphasis(s) => {
                            Span::styled(s, Style::new().add_modifier(Modifier::ITALIC))
                        }
                        Inline::Strong(s) => {
                            Span::styled(s, Style::new().add_modifier(Modifier::BOLD))
                        }
                    }));
                    out.push(Line::from(spans));
                }
            }
        }
    }
}

impl Widget for &VerdictPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let title = if self.watched() {
            "What the program holds, and why · PgUp/PgDn"
        } else {
            "Verdicts on this device · teaching (PgUp/PgDn)"
        };
        let b = block(title, self.focused, self.theme);
        let inner = b.inner(area);
        b.render(area, buf);
        let Some(inner) = usable(inner) else { return };
        let text = Paragraph::new(self.lines()).wrap(Wrap { trim: false });
        // Never past the end: the last page stays in view.
        let last = rows_past(&text, inner);
        text.scroll((self.scroll.min(last), 0)).render(inner, buf);
    }
}

impl VerdictPanel<'_> {
    /// How far it scrolls in `area` before its last line is at the bottom.
    pub fn max_scroll(&self, area: Rect) -> u16 {
        let inner = block("", false, self.theme).inner(area);
        usable(inner).map_or(0, |inner| {
            rows_past(
                &Paragraph::new(self.lines()).wrap(Wrap { trim: false }),
                inner,
            )
        })
    }
}

/// The rows of wrapped `text` beyond what `area` shows.
fn rows_past(text: &Paragraph<'_>, area: Rect) -> u16 {
    let rows = text.line_count(area.width);
    u16::try_from(rows.saturating_sub(usize::from(area.height))).unwrap_or(u16::MAX)
}

/// Misuses shown in the panel; the report lists them all.
const MISUSES_SHOWN: usize = 5;

/// The calls that named what the program had given up, as the report says
/// them: the first few, each with where it was made (its first two frames),
/// and how many more.
fn misuse_lines(r: &WatchReport, shown: &dyn Fn(u32) -> bool, t: Theme) -> Vec<Line<'static>> {
    let rows: Vec<_> = r.misuse.iter().filter(|m| shown(m.pid)).collect();
    let mut out = Vec::new();
    for m in rows.iter().take(MISUSES_SHOWN) {
        out.push(Line::styled(format!("misuse: {}", m.headline()), t.bad()));
        if let Some(after) = &m.after {
            out.push(Line::styled(
                format!("  not ordered after {after}"),
                t.dim(),
            ));
        }
        for f in m.backtrace.iter().take(2) {
            out.push(Line::styled(format!("  at {}", f.describe()), t.dim()));
        }
    }
    // Rows the report kept past those shown, and any past what it keeps.
    let more = (rows.len().saturating_sub(MISUSES_SHOWN) as u64)
        + r.misuse_count.saturating_sub(r.misuse.len() as u64);
    if more > 0 {
        out.push(Line::styled(
            format!("… and {more} more misuse(s): the report lists them"),
            t.dim(),
        ));
    }
    out
}

/// What the driver still holds after the program released it: a line for each
/// group of alike objects when there are many (a loop's pinned contexts),
/// with the bytes they hold; the report lists each one.
fn held_lines(r: &WatchReport, ended: bool, t: Theme) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let grouped = r.held_by_driver.len() > 1;
    for g in r.held_by_driver_groups.iter().filter(|_| grouped) {
        let what = g.what();
        let line = g.line();
        let detail = line.strip_prefix(&format!("{what}, ")).unwrap_or(&line);
        out.push(Line::from(vec![
            Span::styled(
                format!(
                    "{what} released, not deleted by the driver{}",
                    if ended { "" } else { " yet" }
                ),
                t.bad(),
            ),
            Span::styled(format!(": {detail}"), t.dim()),
        ]));
    }
    for h in r.held_by_driver.iter().filter(|_| !grouped) {
        let pins = if h.pinned_by.is_empty() {
            "nothing the program holds".to_string()
        } else {
            h.pins_text()
        };
        out.push(Line::from(vec![
            Span::styled(
                format!(
                    "{} {}{} released at {:.1} ms, not deleted by the driver{}",
                    h.kind.as_str(),
                    short_id(h.id),
                    h.reserve
                        .as_ref()
                        .map(|r| format!(" (reserve {:.2} MiB)", mib(r.bytes)))
                        .unwrap_or_default(),
                    h.released_ms,
                    if ended { "" } else { " yet" }
                ),
                t.bad(),
            ),
            Span::styled(format!(": pinned by {pins}"), t.dim()),
        ]));
    }
    out
}

/// One group of objects alive at exit: how many, their bytes, who made them
/// and, for a Python program, the line of its own code that did.
fn alive_line(g: &AliveGroup, now: &str, t: Theme) -> Line<'static> {
    let owner = Owner::parse(&g.owner).unwrap_or(Owner::Unknown);
    let through = match owner {
        Owner::Program | Owner::Unknown => String::new(),
        o => format!(", through {}", o.label()),
    };
    // A Python program's own line that made them.
    let line = g
        .backtrace
        .first()
        .filter(|f| f.python)
        .map(|f| format!(" at {}", f.describe()))
        .unwrap_or_default();
    Line::from(vec![
        Span::styled(
            format!(
                "{} {} {now}",
                g.count,
                g.kind.counted(g.count).replace('_', " ")
            ),
            if g.kept_by_allocator || g.kept_by_runtime {
                t.dim()
            } else {
                t.warn()
            },
        ),
        Span::styled(
            format!(
                " ({:.2} MiB), made by {}{line}{}",
                mib(g.bytes),
                crate::run::maker_text(&g.created_by, &through, g.pid, g.thread),
                if g.kept_by_allocator {
                    ": its allocator's, not a leak"
                } else if g.kept_by_runtime {
                    ": the CUDA runtime's or a library's own, not a leak"
                } else {
                    ""
                }
            ),
            t.dim(),
        ),
    ])
}
