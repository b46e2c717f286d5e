//! The `?` overlay: every binding of the keys table, grouped by where it applies.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Widget, Wrap};

use super::block;
use crate::tui::keys::{self, KEYS, Mode};
use crate::tui::theme::Theme;

pub struct HelpOverlay {
    pub theme: Theme,
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
        let fits = rows.len() as u16 + 3 <= area.height;
        if fits {
            let mut lines: Vec<Line> = rows.iter().map(|r| row_line(r, usize::MAX, t)).collect();
            lines.push(Line::styled(footer, t.dim()));
            let r = centered(area, 112, lines.len() as u16 + 2);
            Clear.render(r, buf);
            let b = block("Keys", true, t);
            let inner = b.inner(r);
            b.render(r, buf);
            Paragraph::new(lines)
                .wrap(Wrap { trim: false })
                .render(inner, buf);
            return;
        }
        // Too short for one column (80x24 has 22 rows): every key still shows, in
        // columns, each help cut to its column.
        let r = centered(area, area.width, area.height);
        Clear.render(r, buf);
        let b = block("Keys", true, t);
        let inner = b.inner(r);
        b.render(r, buf);
        let per_column = inner.height.saturating_sub(1).max(1) as usize;
        let columns = rows.len().div_ceil(per_column).max(1);
        let width = (inner.width as usize / columns).max(1);
        for (c, chunk) in rows.chunks(per_column).enumerate() {
            let lines: Vec<Line> = chunk
                .iter()
                .map(|r| row_line(r, width.saturating_sub(1), t))
                .collect();
            let x = inner.x + (c * width) as u16;
            let col = Rect::new(x, inner.y, width as u16, per_column as u16).intersection(inner);
            Paragraph::new(lines).render(col, buf);
        }
        let foot =
            Rect::new(inner.x, inner.y + per_column as u16, inner.width, 1).intersection(inner);
        Paragraph::new(Line::styled(footer, t.dim())).render(foot, buf);
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
