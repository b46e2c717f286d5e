//! The status bar: device, driver, backend and sampling rate of what is shown, then
//! either the latest message or the key hints from the keys table.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use crate::keys::{self, Mode};
use crate::runstate::RunState;
use crate::source::Availability;
use crate::theme::Theme;

pub struct StatusBar<'a> {
    pub run: Option<&'a RunState>,
    pub availability: Option<&'a Availability>,
    pub sample_hz: f64,
    pub message: Option<&'a str>,
    /// Whose hints to show.
    pub mode: Mode,
    pub theme: Theme,
}

impl StatusBar<'_> {
    fn device(&self) -> String {
        if let Some(m) = self.run.and_then(|r| r.run.meta()) {
            let rate = self.run.map(measured_rate).unwrap_or_default();
            // A watched program names no driver until it picks a device.
            let driver = if m.device.driver_version.is_empty() {
                String::new()
            } else {
                format!(" · driver {}", m.device.driver_version)
            };
            let apis = self.run.map(|r| r.run.apis()).unwrap_or_default();
            let apis = if apis.is_empty() {
                "no API seen yet".to_string()
            } else {
                apis.iter()
                    .map(|a| a.as_str())
                    .collect::<Vec<_>>()
                    .join("+")
            };
            // Known once a process's agent said what it cost (at its end).
            let cost = self
                .run
                .and_then(|r| r.findings())
                .and_then(|f| f.observer.as_ref())
                .and_then(|c| c.added)
                .map(|added| format!(" (observing +{:.1}%)", added * 100.0))
                .unwrap_or_default();
            // While its launches repeat, the agent watches none of them: said
            // before the driver, so a narrow bar keeps it.
            if self.run.is_some_and(|r| r.run.launches_unwatched_now()) {
                return format!(
                    "{} · {apis}{cost} · new launches only{driver} · {}{rate}",
                    m.device.name, m.device.memory_source
                );
            }
            return format!(
                "{}{driver} · {apis}{cost} · {}{rate}",
                m.device.name, m.device.memory_source
            );
        }
        match self.availability {
            None => "checking devices…".into(),
            Some(a) => match &a.opencl {
                Ok(d) => format!("{d} · opencl · {} Hz in runs", self.sample_hz),
                Err(_) => "no device: recordings only".into(),
            },
        }
    }
}

/// Samples per second the run really got (not the rate asked for).
fn measured_rate(run: &RunState) -> String {
    let stats = &run.run.sample_stats();
    let (Some(a), Some(b)) = (stats.first.as_ref(), run.run.samples().last()) else {
        return String::new();
    };
    let dt = b.t_ns.saturating_sub(a.t_ns) as f64 / 1e9;
    if dt <= 0.0 {
        return String::new();
    }
    format!(" {:.0} Hz", stats.seen.saturating_sub(1) as f64 / dt)
}

impl Widget for &StatusBar<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let t = self.theme;
        buf.set_style(area, t.status_bar());
        let w = area.width as usize;
        let hints: Vec<(String, &str)> = keys::hints(self.mode).collect();
        let hint_len = |(k, h): &(String, &str)| k.chars().count() + h.chars().count() + 3;
        // The hints or the message first; the device gets what they leave, and
        // at least a quarter of the bar.
        let want = match self.message {
            Some(m) => m.chars().count(),
            None => hints.iter().map(hint_len).sum(),
        };
        let device = self.device();
        let device_w = device
            .chars()
            .count()
            .min(w.saturating_sub(want + 4).max(w / 4));
        let device = super::fit(&device, device_w);
        let mut room = w.saturating_sub(device.chars().count() + 4);
        let mut spans = vec![Span::raw(format!(" {device} "))];
        spans.push(Span::raw("│ "));
        match self.message {
            Some(m) => spans.push(Span::styled(m.to_string(), t.warn())),
            None => {
                // Whole hints only: a hint cut in half names no key.
                for hint in &hints {
                    let len = hint_len(hint);
                    if len > room + 2 {
                        break;
                    }
                    room = room.saturating_sub(len);
                    spans.push(Span::styled(hint.0.clone(), t.key()));
                    spans.push(Span::raw(format!(" {}  ", hint.1)));
                }
            }
        }
        Line::from(spans).style(t.status_bar()).render(area, buf);
    }
}
