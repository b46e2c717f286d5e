//! The replay banner: one line above the panels saying the screen is a
//! recording, where and when it was made, and where the playback stands.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use crate::playback::Playback;
use crate::theme::Theme;
use crate::trace::wallclock::Utc;

pub struct ReplayBanner<'a> {
    pub playback: &'a Playback,
    pub theme: Theme,
}

impl ReplayBanner<'_> {
    /// Where and when the recording was made: device, driver, host, gpulab, and
    /// the date the stream itself states (a file's mtime is whatever a copy or a
    /// checkout gave it, so it is never shown as the recording's date).
    pub fn origin(&self) -> String {
        let p = self.playback;
        let mut parts = Vec::new();
        if let Some(m) = p.meta() {
            parts.push(m.device.name.clone());
            parts.push(format!("driver {}", m.device.driver_version));
            parts.push(format!("host {}", m.hostname));
            parts.push(format!("gpulab {}", m.gpulab_version));
            parts.push(match m.recorded_at.as_deref().map(Utc::parse) {
                Some(Some(t)) => format!("recorded {}", t.human()),
                Some(None) => "recording date unreadable".to_string(),
                None => "recording date unknown".to_string(),
            });
        }
        parts.join(" · ")
    }

    /// Where the playback stands: state, speed, time, events.
    pub fn position(&self) -> String {
        let p = self.playback;
        let state = if !p.paused {
            "▶ playing"
        } else if p.at_end() {
            "■ end"
        } else {
            "⏸ paused"
        };
        format!(
            "{state} {}× {:.2}/{:.2} s · event {}/{}",
            p.speed(),
            p.clock as f64 / 1e9,
            p.duration() as f64 / 1e9,
            p.cursor,
            p.len()
        )
    }
}

impl Widget for &ReplayBanner<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let t = self.theme;
        let position = self.position();
        let room = (area.width as usize).saturating_sub(position.chars().count() + 16);
        let line = Line::from(vec![
            Span::styled(" RECORDING ", t.warn()),
            Span::raw(super::fit(&self.origin(), room)),
            Span::raw(" │ "),
            Span::styled(position, t.title()),
        ]);
        // Whatever was drawn in the row before goes: a shorter line must not
        // leave the end of a longer one behind.
        ratatui::widgets::Clear.render(area, buf);
        buf.set_style(area, t.status_bar());
        line.style(t.status_bar()).render(area, buf);
    }
}
