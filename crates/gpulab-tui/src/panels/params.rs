//! The parameter editor overlay: the lab's parameters with value, range, unit and
//! help; values move in 1-2-5 steps and never leave their range.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Widget, Wrap};

use super::block;
use super::help::centered;
use crate::lab::{Lab, Params};
use crate::theme::Theme;

pub struct ParamsOverlay<'a> {
    pub lab: &'a Lab,
    pub values: &'a Params,
    pub selected: usize,
    pub typed: &'a str,
    pub theme: Theme,
}

/// The next value of the 1-2-5 series above (or below) `v`, kept in `min..=max`.
pub fn nudge(v: f64, min: f64, max: f64, up: bool) -> f64 {
    let mut series = Vec::new();
    for exp in -3..=9 {
        for m in [1.0, 2.0, 5.0] {
            series.push(m * 10f64.powi(exp));
        }
    }
    let next = if up {
        series
            .into_iter()
            .find(|s| *s > v * (1.0 + 1e-9))
            .unwrap_or(max)
    } else {
        series
            .into_iter()
            .rev()
            .find(|s| *s < v * (1.0 - 1e-9))
            .unwrap_or(min)
    };
    next.clamp(min, max)
}

impl Widget for &ParamsOverlay<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let t = self.theme;
        let mut lines = Vec::new();
        for (i, p) in self.lab.params.iter().enumerate() {
            let sel = i == self.selected;
            let v = self.values.get(&p.name).copied().unwrap_or(p.default);
            let shown = if sel && !self.typed.is_empty() {
                format!("{}▏", self.typed)
            } else {
                format!("{v}")
            };
            lines.push(Line::from(vec![
                Span::styled(
                    format!(
                        "{} {:<12}{:>10} {:<4}",
                        if sel { "▶" } else { " " },
                        p.name,
                        shown,
                        p.unit.as_str()
                    ),
                    if sel {
                        t.selected()
                    } else {
                        ratatui::style::Style::new()
                    },
                ),
                Span::styled(
                    format!("  {}..={}  default {}", p.min, p.max, p.default),
                    t.dim(),
                ),
            ]));
            lines.push(Line::styled(format!("    {}", p.help), t.dim()));
        }
        lines.push(Line::styled(
            "←/→ change · digits + Enter set · d default · Esc done (the next run uses these)",
            t.dim(),
        ));
        let r = centered(area, 84, lines.len() as u16 + 2);
        Clear.render(r, buf);
        let b = block(format!("Parameters · {}", self.lab.id), true, t);
        let inner = b.inner(r);
        b.render(r, buf);
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .render(inner, buf);
    }
}

#[cfg(test)]
mod tests {
    use super::nudge;

    #[test]
    fn nudges_follow_1_2_5_and_stay_in_range() {
        assert_eq!(nudge(200.0, 10.0, 10000.0, true), 500.0);
        assert_eq!(nudge(200.0, 10.0, 10000.0, false), 100.0);
        assert_eq!(nudge(64.0, 1.0, 4096.0, true), 100.0);
        assert_eq!(nudge(10.0, 10.0, 10000.0, false), 10.0);
        assert_eq!(nudge(4096.0, 1.0, 4096.0, true), 4096.0);
    }
}
