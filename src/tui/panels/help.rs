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
        let mut lines = Vec::new();
        for mode in [Mode::Main, Mode::Replay, Mode::Filter, Mode::Params] {
            lines.push(Line::styled(mode.title().to_string(), t.title()));
            for b in KEYS.iter().filter(|b| b.mode == mode) {
                lines.push(Line::from(vec![
                    Span::styled(format!("  {:<14}", keys::label(b)), t.key()),
                    Span::raw(b.help),
                ]));
            }
        }
        lines.push(Line::styled(
            "mouse wheel: scroll the panel under the pointer · any key closes this",
            t.dim(),
        ));
        let r = centered(area, 112, lines.len() as u16 + 2);
        Clear.render(r, buf);
        let b = block("Keys", true, t);
        let inner = b.inner(r);
        b.render(r, buf);
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .render(inner, buf);
    }
}
