//! Styles of the dashboard, in one place so `--color never` or `NO_COLOR` turns
//! every colour off at once: without colour, meaning is carried by bold, reverse
//! and dim alone.

use ratatui::style::{Color, Modifier, Style};

use crate::color;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    pub color: bool,
}

impl Theme {
    /// The theme `--color` asks for, by the rule every command follows
    /// (`color::enabled`); the dashboard always draws on a terminal.
    pub fn chosen(choice: color::Choice) -> Theme {
        Theme {
            color: color::for_stream(choice, true),
        }
    }

    pub const PLAIN: Theme = Theme { color: false };

    fn fg(self, c: Color) -> Style {
        if self.color {
            Style::new().fg(c)
        } else {
            Style::new()
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
            Style::new().fg(Color::Cyan)
        } else {
            Style::new().add_modifier(Modifier::BOLD)
        }
    }
    pub fn dim(self) -> Style {
        if self.color {
            Style::new().fg(Color::DarkGray)
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
    pub fn memory(self) -> Style {
        self.fg(Color::Green)
    }
    pub fn memory_b(self) -> Style {
        self.fg(Color::Magenta)
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
        if self.color {
            Style::new().bg(Color::DarkGray).fg(Color::White)
        } else {
            Style::new().add_modifier(Modifier::REVERSED)
        }
    }
}
