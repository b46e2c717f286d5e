//! The `?` overlay: every binding of the keys table, grouped by where it applies.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Widget, Wrap};

use super::block;
use crate::keys::{self, KEYS, Mode};
use crate::theme::Theme;

pub struct HelpOverlay {
    pub theme: Theme,
    /// Rows scrolled down (↓/↑, PgDn/PgUp) when the keys do not fit at once.
    pub scroll: u16,
}

/// A box of `w`×`h` centred in `area` (clipped to it).
pub fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

impl Widget for &HelpOverlay {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let t = self.theme;
        // (group title, or key label and help)
        let mut rows: Vec<(Option<String>, String)> = Vec::new();
        for mode in [Mode::Main, Mode::Replay, Mode::Filter, Mode::Params] {
            rows.push((None, mode.title().to_string()));
            for b in KEYS.iter().filter(|b| b.mode == mode) {
                rows.push((Some(keys::label(b)), b.help.to_string()));
            }
        }
        let footer = "mouse wheel: scroll the panel under the pointer · any key closes this";
        // The footer goes in the bottom border: every row of the keys is
        // the body's.
        let fits = rows.len() as u16 + 2 <= area.height;
        if fits {
            let lines: Vec<Line> = rows.iter().map(|r| row_line(r, usize::MAX, t)).collect();
            let r = centered(area, 112, lines.len() as u16 + 2);
            Clear.render(r, buf);
            let b = block("Keys", true, t).title_bottom(Line::styled(footer, t.dim()));
            let inner = b.inner(r);
            b.render(r, buf);
            Paragraph::new(lines)
                .wrap(Wrap { trim: false })
                .render(inner, buf);
            return;
        }
        // Too short for one column but wide enough for two: the dashboard's
        // own keys on the left, the other modes' (shorter) on the right, each
        // help whole, wrapped in its column.
        let main = 1 + KEYS.iter().filter(|b| b.mode == Mode::Main).count();
        let (left, right) = rows.split_at(main.min(rows.len()));
        let inner_w = area.width.saturating_sub(2);
        let widest = |part: &[(Option<String>, String)]| {
            part.iter()
                .map(|r| row_line(r, usize::MAX, t).width())
                .max()
                .unwrap_or(0) as u16
        };
        let right_w = widest(right).min(inner_w / 2);
        let left_w = inner_w.saturating_sub(right_w + 2);
        let tall = |part: &[(Option<String>, String)], w: u16| -> u16 {
            part.iter()
                .map(|r| {
                    row_line(r, usize::MAX, t)
                        .width()
                        .max(1)
                        .div_ceil(w.max(1) as usize)
                })
                .sum::<usize>() as u16
        };
        let height = tall(left, left_w).max(tall(right, right_w)) + 2;
        if left_w >= 60 && height <= area.height {
            let r = centered(area, inner_w + 2, height);
            Clear.render(r, buf);
            let b = block("Keys", true, t).title_bottom(Line::styled(footer, t.dim()));
            let inner = b.inner(r);
            b.render(r, buf);
            for (part, x, w) in [
                (left, inner.x, left_w),
                (right, inner.x + left_w + 2, right_w),
            ] {
                let lines: Vec<Line> = part.iter().map(|r| row_line(r, usize::MAX, t)).collect();
                Paragraph::new(lines)
                    .wrap(Wrap { trim: false })
                    .render(Rect::new(x, inner.y, w, inner.height), buf);
            }
            return;
        }
        // Too short for every key at once (80x24 has 22 rows): one column, each
        // help whole (wrapped, never cut), scrolled with ↓/↑ and PgDn/PgUp.
        let b = block("Keys (↓/↑ PgDn/PgUp scroll)", true, t);
        let inner = b.inner(area);
        Clear.render(area, buf);
        b.render(area, buf);
        if inner.height < 2 || inner.width == 0 {
            return;
        }
        let lines: Vec<Line> = rows.iter().map(|r| row_line(r, usize::MAX, t)).collect();
        let width = inner.width as usize;
        let wrapped: usize = lines.iter().map(|l| l.width().max(1).div_ceil(width)).sum();
        let body_h = inner.height - 1;
        let max = wrapped.saturating_sub(body_h as usize) as u16;
        let scroll = self.scroll.min(max);
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((scroll, 0))
            .render(Rect::new(inner.x, inner.y, inner.width, body_h), buf);
        let more = if scroll < max { "more below · " } else { "" };
        let foot = Rect::new(inner.x, inner.y + body_h, inner.width, 1);
        Paragraph::new(Line::styled(format!("{more}{footer}"), t.dim())).render(foot, buf);
    }
}

/// One row of the overlay, cut to `width` characters with an ellipsis.
fn row_line(row: &(Option<String>, String), width: usize, t: Theme) -> Line<'static> {
    let cut = |s: String, w: usize| -> String {
        if s.chars().count() <= w {
            s
        } else {
            let mut c: String = s.chars().take(w.saturating_sub(1)).collect();
            c.push('…');
            c
        }
    };
    match row {
        (None, title) => Line::styled(cut(title.clone(), width), t.title()),
        (Some(label), help) => {
            let key = format!("  {label:<14}");
            let room = width.saturating_sub(key.chars().count());
            if room == 0 {
                return Line::styled(cut(key, width), t.key());
            }
            Line::from(vec![
                Span::styled(key, t.key()),
                Span::raw(cut(help.clone(), room)),
            ])
        }
    }
}
