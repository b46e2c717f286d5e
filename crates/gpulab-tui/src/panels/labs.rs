//! The labs list: each lab with its backend, greyed with the reason when this
//! machine cannot run it (as the doctor child said), the chosen variant under the
//! selection, then the recordings that open read-only. `/` filters.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Widget, Wrap};

use super::{block, fit, usable};
use crate::app::Entry;
use crate::lab::Lab;
use crate::recordings;
use crate::source::Availability;
use crate::theme::Theme;

pub struct LabsPanel<'a> {
    pub labs: &'a [Lab],
    /// User lab files with mistakes: the id each claims and its first mistake.
    pub invalid: &'a [(String, String)],
    /// The recordings' names as the list shows them.
    pub recordings: &'a [String],
    pub entries: &'a [Entry],
    pub selected: usize,
    /// Variant index of the selected lab.
    pub variant: usize,
    pub filter: &'a str,
    pub filtering: bool,
    pub availability: Option<&'a Availability>,
    /// The recording `o` opens for the selected lab, if there is one.
    pub lab_recording: Option<&'a std::path::Path>,
    pub theme: Theme,
    pub focused: bool,
}

impl LabsPanel<'_> {
    fn lines(&self, w: usize) -> (Vec<Line<'static>>, usize) {
        let t = self.theme;
        let mut out = Vec::new();
        let mut selected_row = 0;
        match self.availability {
            None => out.push(Line::styled("checking devices…", t.dim())),
            Some(a) if !a.any() => {
                let why = a.opencl.as_ref().err().cloned().unwrap_or_default();
                out.push(Line::styled(format!("no device here: {why}"), t.warn()));
                if !self.recordings.is_empty() {
                    out.push(Line::styled("recordings below open read-only", t.warn()));
                }
            }
            Some(_) => {}
        }
        let mut in_recordings = false;
        for (i, e) in self.entries.iter().enumerate() {
            let sel = i == self.selected;
            if sel {
                selected_row = out.len();
            }
            let mark = if sel { "▶ " } else { "  " };
            match *e {
                Entry::Lab(li) => {
                    let Some(lab) = self.labs.get(li) else {
                        continue;
                    };
                    let blocker = self.availability.and_then(|a| a.blocker(lab.backend));
                    let backend = lab.backend.as_str();
                    let idw = w.saturating_sub(backend.len() + 3);
                    let text = format!("{mark}{:<idw$} {backend}", fit(&lab.id, idw));
                    let style = match (sel, blocker.is_some()) {
                        (true, _) => t.selected(),
                        (false, true) => t.dim(),
                        (false, false) => ratatui::style::Style::new(),
                    };
                    out.push(Line::styled(text, style));
                    if sel {
                        if let Some(v) = lab.variants.get(self.variant) {
                            out.push(Line::styled(
                                format!(
                                    "  ↳ {} {}/{}",
                                    v.name,
                                    self.variant + 1,
                                    lab.variants.len()
                                ),
                                t.dim(),
                            ));
                        }
                        // Where the lab cannot run, its recording is one key away
                        // (a teacher's laptop without CUDA, the H100's recording).
                        if let Some(rec) = self.lab_recording.filter(|_| blocker.is_some()) {
                            let on = recordings::device(rec).unwrap_or_else(|| "a".into());
                            out.push(Line::styled("    o replays its", t.key()));
                            out.push(Line::styled(format!("    {on} run"), t.key()));
                        }
                        if let Some(why) = blocker {
                            out.push(Line::styled(format!("    can't run: {why}"), t.warn()));
                        }
                    }
                }
                Entry::Invalid(ii) => {
                    let Some((id, why)) = self.invalid.get(ii) else {
                        continue;
                    };
                    const TAG: &str = "invalid";
                    let idw = w.saturating_sub(TAG.len() + 3);
                    let text = format!("{mark}{:<idw$} {TAG}", fit(id, idw));
                    out.push(Line::styled(text, if sel { t.selected() } else { t.dim() }));
                    if sel {
                        // The first mistake, file named without its folder, on a few
                        // lines: `gpulab check FILE` has all of them whole.
                        for l in crate::text::wrap(without_folder(why), w.saturating_sub(4), 4) {
                            out.push(Line::styled(format!("    {l}"), t.warn()));
                        }
                        out.push(Line::styled(fit("    gpulab check FILE: all", w), t.dim()));
                    }
                }
                Entry::Recording(ri) => {
                    if !in_recordings {
                        in_recordings = true;
                        out.push(Line::styled("recordings (read-only)", t.title()));
                        if sel {
                            selected_row = out.len();
                        }
                    }
                    let Some(label) = self.recordings.get(ri) else {
                        continue;
                    };
                    let text = format!("{mark}{}", recordings::fit(label, w.saturating_sub(2)));
                    out.push(Line::styled(
                        text,
                        if sel {
                            t.selected()
                        } else {
                            ratatui::style::Style::new()
                        },
                    ));
                }
            }
        }
        if self.entries.is_empty() {
            out.push(Line::styled("nothing matches the filter", t.dim()));
        }
        (out, selected_row)
    }
}

/// `/home/u/labs/mine.toml:43:1: …` as `mine.toml:43:1: …`.
fn without_folder(located: &str) -> &str {
    let Some(end) = located.find(".toml:") else {
        return located;
    };
    let start = located[..end].rfind('/').map_or(0, |i| i + 1);
    &located[start..]
}

impl Widget for &LabsPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let b = block("Labs", self.focused, self.theme);
        let inner = b.inner(area);
        b.render(area, buf);
        let Some(mut inner) = usable(inner) else {
            return;
        };
        if (self.filtering || !self.filter.is_empty()) && inner.height > 1 {
            let cursor = if self.filtering { "▏" } else { "" };
            let y = inner.y + inner.height - 1;
            buf.set_stringn(
                inner.x,
                y,
                format!("/{}{cursor}", self.filter),
                inner.width as usize,
                self.theme.key(),
            );
            inner.height -= 1;
        }
        let (lines, selected_row) = self.lines(inner.width as usize);
        // Keep the selection in view (the variant lines under it too).
        let h = inner.height as usize;
        let scroll = (selected_row + 5)
            .saturating_sub(h)
            .min(lines.len().saturating_sub(h));
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((scroll as u16, 0))
            .render(inner, buf);
    }
}
