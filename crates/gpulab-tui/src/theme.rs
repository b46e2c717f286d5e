//! Styles of the dashboard, in one place so `--color never` or `NO_COLOR` turns
//! every colour off at once: without colour, meaning is carried by bold, reverse
//! and dim alone. `--theme light` swaps the colours that vanish on a white
//! background (yellow, cyan, a dark-grey bar) for darker ones.

use ratatui::style::{Color, Modifier, Style};

use crate::color;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    pub color: bool,
    /// Drawn for a light terminal background.
    pub light: bool,
}

impl Theme {
    /// The theme `--color` asks for, by the rule every command follows
    /// (`color::enabled`); the dashboard always draws on a terminal.
    pub fn chosen(choice: color::Choice) -> Theme {
        Theme {
            color: color::for_stream(choice, true),
            light: false,
        }
    }

    /// This theme for a light background (`light`) or a dark one.
    pub fn on_light(self, light: bool) -> Theme {
        Theme { light, ..self }
    }

    pub const PLAIN: Theme = Theme {
        color: false,
        light: false,
    };

    /// What a terminal's `COLORFGBG` ("15;0": foreground;background, set by
    /// rxvt, Konsole and others) says: a background of colour 7 (white) or 15
    /// (bright white) is light; anything else, or no variable, is dark.
    pub fn light_background(colorfgbg: Option<&str>) -> bool {
        colorfgbg
            .and_then(|v| v.rsplit(';').next())
            .is_some_and(|bg| matches!(bg.trim(), "7" | "15"))
    }

    fn fg(self, c: Color) -> Style {
        if self.color {
            Style::new().fg(self.on_background(c))
        } else {
            Style::new()
        }
    }

    /// The dark theme's colour `c` as this theme draws it: on a light background
    /// the pale ones become the darker shades of the 256-colour palette.
    fn on_background(self, c: Color) -> Color {
        if !self.light {
            return c;
        }
        match c {
            Color::Yellow => Color::Indexed(130),
            Color::Cyan => Color::Indexed(25),
            Color::Green => Color::Indexed(28),
            Color::Magenta => Color::Indexed(90),
            Color::DarkGray => Color::Indexed(244),
            Color::Blue => Color::Indexed(19),
            Color::Red => Color::Indexed(160),
            other => other,
        }
    }

    pub fn title(self) -> Style {
        self.fg(Color::Cyan).add_modifier(Modifier::BOLD)
    }
    pub fn border(self) -> Style {
        self.fg(Color::DarkGray)
    }
    pub fn focused_border(self) -> Style {
        if self.color {
            self.fg(Color::Cyan)
        } else {
            Style::new().add_modifier(Modifier::BOLD)
        }
    }
    pub fn dim(self) -> Style {
        if self.color {
            self.fg(Color::DarkGray)
        } else {
            Style::new().add_modifier(Modifier::DIM)
        }
    }
    pub fn selected(self) -> Style {
        Style::new().add_modifier(Modifier::REVERSED)
    }
    pub fn current(self) -> Style {
        self.fg(Color::Yellow).add_modifier(Modifier::BOLD)
    }
    pub fn ok(self) -> Style {
        self.fg(Color::Green)
    }
    pub fn bad(self) -> Style {
        self.fg(Color::Red).add_modifier(Modifier::BOLD)
    }
    pub fn warn(self) -> Style {
        self.fg(Color::Yellow)
    }
    /// A code span of teaching text (`clFinish`).
    pub fn code(self) -> Style {
        if self.color {
            self.fg(Color::Cyan)
        } else {
            Style::new().add_modifier(Modifier::BOLD)
        }
    }
    /// A verdict unlike the lesson: a finding about this device, not a failure.
    pub fn finding(self) -> Style {
        self.fg(Color::Magenta).add_modifier(Modifier::BOLD)
    }
    pub fn memory(self) -> Style {
        self.fg(Color::Green)
    }
    pub fn memory_b(self) -> Style {
        self.fg(Color::Magenta)
    }
    /// The shares of a watched program's memory stacked under its curve,
    /// bottom to top: objects held, an allocator's cache, reserves, what the
    /// driver kept after a release.
    pub fn shares(self) -> [Style; 4] {
        [
            self.fg(Color::Cyan),
            self.fg(Color::Blue),
            self.fg(Color::Yellow),
            self.fg(Color::Red),
        ]
    }
    /// The processes of a job, one colour each (by rank), stacked in a GPU's lane.
    pub fn ranks(self) -> [Style; 6] {
        [
            self.fg(Color::Cyan),
            self.fg(Color::Yellow),
            self.fg(Color::Magenta),
            self.fg(Color::Blue),
            self.fg(Color::Green),
            self.fg(Color::Red),
        ]
    }
    pub fn baseline(self) -> Style {
        self.dim()
    }
    pub fn budget(self) -> Style {
        self.fg(Color::Red)
    }
    pub fn host(self) -> Style {
        self.fg(Color::Blue)
    }
    pub fn device(self) -> Style {
        self.fg(Color::Green)
    }
    pub fn key(self) -> Style {
        self.fg(Color::Cyan).add_modifier(Modifier::BOLD)
    }
    pub fn status_bar(self) -> Style {
        if self.color && self.light {
            Style::new().bg(Color::Indexed(252)).fg(Color::Black)
        } else if self.color {
            Style::new().bg(Color::DarkGray).fg(Color::White)
        } else {
            Style::new().add_modifier(Modifier::REVERSED)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colorfgbg_names_a_light_background_by_its_last_field() {
        assert!(Theme::light_background(Some("0;15")));
        assert!(Theme::light_background(Some("0;default;7")));
        assert!(!Theme::light_background(Some("15;0")));
        assert!(!Theme::light_background(Some("")));
        assert!(!Theme::light_background(None));
    }

    /// On a light background no style keeps a colour that vanishes on white, and
    /// without colour the light theme draws exactly as the dark one.
    #[test]
    fn the_light_theme_has_no_pale_colours() {
        let light = Theme::chosen(color::Choice::Always).on_light(true);
        let styles = [
            light.title(),
            light.border(),
            light.focused_border(),
            light.dim(),
            light.current(),
            light.ok(),
            light.bad(),
            light.warn(),
            light.memory(),
            light.memory_b(),
            light.host(),
            light.device(),
            light.key(),
        ];
        for s in styles {
            assert!(
                !matches!(
                    s.fg,
                    Some(Color::Yellow | Color::Cyan | Color::White | Color::Gray)
                ),
                "{s:?}"
            );
        }
        assert_ne!(light.status_bar().bg, Some(Color::DarkGray));
        let plain = Theme::PLAIN;
        assert_eq!(plain.on_light(true).warn(), plain.warn());
        assert_eq!(plain.on_light(true).status_bar(), plain.status_bar());
    }
}
