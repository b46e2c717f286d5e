//! The script of the chosen variant: per line its result, host time and memory
//! delta as the run measured them, and the line the worker runs next highlighted
//! (step mode pauses right before it). For a watched program, which has no script,
//! its calls by API in the order they first came.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

use super::{MIB, block, fit, usable};
use crate::lab::{Lab, Params, Stmt, StmtKind};
use crate::runstate::RunState;
use crate::theme::Theme;
use crate::trace::EndStatus;

pub struct ScriptPanel<'a> {
    pub lab: Option<&'a Lab>,
    pub variant: usize,
    pub params: Option<&'a Params>,
    pub run: Option<&'a RunState>,
    pub scroll: u16,
    pub theme: Theme,
    pub focused: bool,
}

struct Row {
    line: u32,
    /// Tagged (`# name:`): a line the lab's claims can measure, the lesson.
    tagged: bool,
    text: String,
    result: String,
    bad: bool,
    host_ms: Option<f64>,
    mem: Option<f64>,
}

fn flatten(stmts: &[Stmt], out: &mut Vec<(u32, String, bool)>) {
    for s in stmts {
        out.push((s.line, s.text.clone(), s.tag.is_some()));
        if let StmtKind::Repeat { body, .. } = &s.kind {
            flatten(body, out);
        }
    }
}

/// A watched program's calls, one row per API: how often, the last error, the
/// mean host time.
fn calls_by_api(run: &RunState) -> Vec<Row> {
    run.run
        .folds()
        .apis
        .iter()
        .enumerate()
        .map(|(i, a)| Row {
            line: i as u32 + 1,
            tagged: false,
            text: a.api.clone(),
            result: match (&a.error, a.calls) {
                (Some(e), _) => e.clone(),
                (None, n) if n > 1 => format!("ok ×{n}"),
                (None, _) => "ok".into(),
            },
            bad: a.error.is_some(),
            host_ms: Some(a.host_ns as f64 / f64::from(a.calls) / 1e6),
            mem: None,
        })
        .collect()
}

impl ScriptPanel<'_> {
    fn watched(&self) -> Option<&crate::trace::WatchMeta> {
        self.run?.run.meta()?.watch.as_ref()
    }

    fn rows(&self) -> Vec<Row> {
        if let Some(run) = self.run.filter(|_| self.watched().is_some()) {
            return calls_by_api(run);
        }
        if let Some(run) = self.run.filter(|r| r.run.meta().is_some()) {
            let stuck = run.stuck.as_ref();
            return run
                .run
                .lines()
                .into_iter()
                .map(|l| Row {
                    result: match (&l.error, l.calls) {
                        _ if let Some(st) = stuck.filter(|st| st.line == Some(l.line)) => {
                            format!("stuck {} s", st.secs)
                        }
                        (_, 0) => String::new(),
                        (Some(e), _) if l.expect_error => format!("{e} (expected)"),
                        (Some(e), _) => e.clone(),
                        (None, n) if n > 1 => format!("ok ×{n}"),
                        (None, _) => "ok".into(),
                    },
                    bad: (l.error.is_some() && !l.expect_error)
                        || stuck.is_some_and(|st| st.line == Some(l.line)),
                    host_ms: (l.calls > 0).then(|| l.host_ms_mean()),
                    mem: l.mem_delta.map(|d| d as f64 / MIB),
                    line: l.line,
                    tagged: l.tag.is_some(),
                    text: l.text,
                })
                .collect();
        }
        let mut lines = Vec::new();
        if let Some(v) = self.lab.and_then(|l| l.variants.get(self.variant)) {
            flatten(&v.script, &mut lines);
        }
        lines
            .into_iter()
            .map(|(line, text, tagged)| Row {
                line,
                tagged,
                text,
                result: String::new(),
                bad: false,
                host_ms: None,
                mem: None,
            })
            .collect()
    }

    fn title(&self) -> String {
        let status = self
            .run
            .map(|r| format!(" · {}", r.status_word()))
            .unwrap_or_default();
        if let Some(w) = self.watched() {
            return format!("Calls · {} (pid {}){status}", w.command.join(" "), w.pid);
        }
        let variant = self
            .run
            .map(RunState::variant)
            .filter(|v| !v.is_empty())
            .or_else(|| {
                self.lab
                    .and_then(|l| l.variants.get(self.variant))
                    .map(|v| v.name.clone())
            })
            .unwrap_or_default();
        let id = self
            .run
            .and_then(RunState::lab_id)
            .or_else(|| self.lab.map(|l| l.id.clone()))
            .unwrap_or_else(|| "no lab".into());
        format!("Script · {id} [{variant}]{status}")
    }

    fn header(&self) -> Option<String> {
        if self.watched().is_some() {
            return Some("the program's API calls, in the order each first came".into());
        }
        let lab = self.lab?;
        let v = lab.variants.get(self.variant)?;
        let params = match self.run.and_then(|r| r.run.meta()?.lab.as_ref()) {
            Some(l) => l.params.clone(),
            None => self.params.cloned().unwrap_or_else(|| lab.default_params()),
        };
        let p: Vec<String> = lab
            .params
            .iter()
            .map(|p| {
                let v = params.get(&p.name).copied().unwrap_or(p.default);
                format!("{}={v}{}", p.name, p.unit.suffix())
            })
            .collect();
        let desc = if self.run.is_some() {
            String::new()
        } else {
            format!("{} · ", v.description)
        };
        Some(format!("{desc}{}", p.join("  ")))
    }
}

/// The first row to show so that the tagged rows are in view in `body_h`
/// rows: all of them with as much of the script before them as fits; when
/// they do not all fit, the window ending at the last (where a lab's outcome
/// is: the wait, the settled memory), not at the first (often the context);
/// 0 without tags.
fn lesson_start(rows: &[Row], body_h: usize) -> usize {
    let mut tagged = rows
        .iter()
        .enumerate()
        .filter(|(_, r)| r.tagged)
        .map(|(i, _)| i);
    let Some(first) = tagged.next() else {
        return 0;
    };
    let last = tagged.next_back().unwrap_or(first);
    let ending_at_last = (last + 1).saturating_sub(body_h);
    if last - first < body_h {
        ending_at_last.min(first)
    } else {
        ending_at_last
    }
}

impl Widget for &ScriptPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let b = block(self.title(), self.focused, self.theme);
        let inner = b.inner(area);
        b.render(area, buf);
        let Some(inner) = usable(inner) else { return };
        let t = self.theme;
        let rows = self.rows();
        let current = self.run.and_then(RunState::next_line);
        let failed = match self.run.and_then(|r| r.run.end()).map(|e| &e.status) {
            Some(EndStatus::Failed { line, .. }) => *line,
            _ => None,
        };
        let mut lines: Vec<Line> = Vec::new();
        let header = self.header();
        let with_header = header.is_some() && inner.height > 4;
        let body_h = inner.height as usize - usize::from(with_header);
        // Keep the next line in view while it runs; before and after, the
        // failed line, else the lesson (the tagged lines claims measure). The
        // user's scroll moves from there.
        let cur_idx = current.and_then(|c| rows.iter().position(|r| r.line == c));
        let failed_idx = failed.and_then(|f| rows.iter().position(|r| r.line == f));
        let auto = match (cur_idx, failed_idx) {
            (Some(i), _) | (None, Some(i)) => i.saturating_sub(body_h / 2),
            (None, None) => lesson_start(&rows, body_h),
        };
        let max_start = rows.len().saturating_sub(body_h);
        let start = (auto + self.scroll as usize).min(max_start);
        if let Some(h) = header.filter(|_| with_header) {
            lines.push(Line::styled(h, t.dim()));
        }
        let w = inner.width as usize;
        // Narrow panels (80 columns, compare mode) keep host ms and the memory
        // delta (the lesson) and show the result as a mark; the name of an error
        // needs room it would not get there anyway.
        let (res_w, mem_w) = match w {
            0..=39 => (0, 0),
            40..=69 => (2, 9),
            _ => (14, 10),
        };
        let stats_w = res_w + 10 + mem_w;
        let text_w = w.saturating_sub(8 + stats_w);
        for r in rows.iter().skip(start).take(body_h) {
            let is_cur = Some(r.line) == current;
            let is_failed = Some(r.line) == failed;
            let mark = if is_cur {
                "▶"
            } else if is_failed {
                "✗"
            } else {
                " "
            };
            let base = if is_cur { t.current() } else { Style::new() };
            let mem = r
                .mem
                .filter(|m| m.abs() >= 0.05)
                .map(|m| format!("{m:+.1}M"))
                .unwrap_or_default();
            let result = match (res_w, r.result.is_empty(), r.bad) {
                (2, false, true) => "✗".to_string(),
                (2, false, false) => "✓".to_string(),
                _ => fit(&r.result, res_w.saturating_sub(1)),
            };
            let stats = format!(
                "{:<res_w$}{:>10}{:>mem_w$}",
                result,
                r.host_ms.map(|m| format!("{m:.3}ms")).unwrap_or_default(),
                if mem_w > 0 { mem } else { String::new() },
            );
            let result_style = if r.bad {
                t.bad()
            } else if r.result.is_empty() {
                t.dim()
            } else {
                t.ok()
            };
            lines.push(Line::from(vec![
                Span::styled(
                    format!("{mark}{:>4}  ", r.line),
                    if is_cur { base } else { t.dim() },
                ),
                Span::styled(format!("{:<text_w$}", fit(&r.text, text_w)), base),
                Span::raw(" "),
                Span::styled(fit(&stats, stats_w), result_style),
            ]));
        }
        if rows.is_empty() {
            let empty = if self.watched().is_some() {
                "no API call seen yet"
            } else {
                "select a lab on the left"
            };
            lines.push(Line::styled(empty, t.dim()));
        }
        Paragraph::new(lines).render(inner, buf);
    }
}

#[cfg(test)]
mod lesson_tests {
    use super::{Row, lesson_start};

    fn rows(tagged: &[usize], n: usize) -> Vec<Row> {
        (0..n)
            .map(|i| Row {
                line: i as u32 + 30,
                tagged: tagged.contains(&i),
                text: String::new(),
                result: String::new(),
                bad: false,
                host_ms: None,
                mem: None,
            })
            .collect()
    }

    #[test]
    fn the_tagged_lines_are_in_view_with_what_comes_before_them() {
        // cl-premature-release: 14 lines, tags on the kernel (9), release
        // (11) and finish (12); 9 rows in view at 160x48.
        assert_eq!(lesson_start(&rows(&[9, 11, 12], 14), 9), 4);
        // They fit from the top: the top.
        assert_eq!(lesson_start(&rows(&[2, 3], 14), 9), 0);
        // They do not all fit: the window ending at the last (the outcome).
        assert_eq!(lesson_start(&rows(&[1, 12], 14), 5), 8);
        // cl-premature-release as it is: the context tagged too (row 0).
        assert_eq!(lesson_start(&rows(&[0, 6, 8, 9, 10], 20), 9), 2);
        assert_eq!(lesson_start(&rows(&[], 14), 5), 0);
    }
}
