//! The one place `file:line:col` messages are made and rendered (annotate-snippets, as cargo does), so every
//! mistake in a lab file reads the same way.

use std::fmt;

use annotate_snippets::{AnnotationKind, Level, Renderer, Snippet};

use super::mistake::{Problem, Span};

/// A mistake in a lab file. `Display` gives the one-line form
/// `file:line:col: message`; `render` adds the offending line with a caret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub file: String,
    /// 1-based.
    pub line: u32,
    /// 1-based, in characters.
    pub col: u32,
    /// Length of the offending text in characters (at least 1).
    pub len: u32,
    pub message: String,
    /// "did you mean `clFinish`?" and the like.
    pub help: Option<String>,
    /// The whole offending line, for the caret display.
    pub source_line: String,
    /// The file's other mistakes, in file order after this one's checks.
    pub more: Vec<Diagnostic>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.col, self.message
        )?;
        if let Some(help) = &self.help {
            write!(f, "; {help}")?;
        }
        match self.more.len() {
            0 => Ok(()),
            1 => write!(f, " (and 1 more mistake: `gpulab check {}`)", self.file),
            n => write!(f, " (and {n} more mistakes: `gpulab check {}`)", self.file),
        }
    }
}

/// 1-based line and character column of a byte offset (clamped into the text).
pub fn line_col(text: &str, offset: usize) -> (u32, u32) {
    let offset = floor_char_boundary(text, offset);
    let before = &text[..offset];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = before.matches('\n').count() + 1;
    let col = before[line_start..].chars().count() + 1;
    (to_u32(line), to_u32(col))
}

/// Line numbers of byte offsets in one text, each by a binary search over where
/// its lines start. Counting newlines from the top for every statement made
/// checking a 40,000-line script take 14 s (quadratic).
pub struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    pub fn new(text: &str) -> LineIndex {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        LineIndex { starts }
    }

    /// The 1-based line `offset` is on, as `line_col` counts it.
    pub fn line(&self, offset: usize) -> u32 {
        to_u32(self.starts.partition_point(|&s| s <= offset))
    }
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn floor_char_boundary(text: &str, offset: usize) -> usize {
    let mut i = offset.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

impl Diagnostic {
    /// Words `problem` and locates it in `text`, the file's contents.
    pub fn from_problem(file: &str, text: &str, problem: &Problem) -> Diagnostic {
        let (message, help) = problem.mistake.words();
        Diagnostic::at(file, text, problem.span.clone(), message, help)
    }

    /// A diagnostic about the bytes `span` of `text`.
    pub fn at(
        file: &str,
        text: &str,
        span: Span,
        message: String,
        help: Option<String>,
    ) -> Diagnostic {
        let start = floor_char_boundary(text, span.start);
        let (line, col) = line_col(text, start);
        let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
        let end = floor_char_boundary(text, span.end.clamp(start, line_end));
        let source_line = text[line_start..line_end].trim_end_matches('\r').to_owned();
        Diagnostic {
            file: file.to_owned(),
            line,
            col,
            len: to_u32(text[start..end].chars().count().max(1)),
            message,
            help,
            source_line,
            more: Vec::new(),
        }
    }

    /// This mistake with the file's `more` after it.
    pub fn with_more(mut self, more: Vec<Diagnostic>) -> Diagnostic {
        self.more = more;
        self
    }

    /// The one-line form, then the offending line with the span underlined and the
    /// help, drawn as cargo and rustc draw theirs (annotate-snippets). `color` picks
    /// ANSI colours and Unicode lines; without it the drawing is plain ASCII with `^`
    /// under the span.
    pub fn render(&self, color: bool) -> String {
        let renderer = if color {
            Renderer::styled()
        } else {
            Renderer::plain()
        }
        // The shown line is already cut to a window (`window`); the renderer must not
        // cut it again to a terminal width it cannot know here.
        .term_width(SHOWN_CHARS * 4);
        let (line, span) = self.window();
        let mut group = Level::ERROR.primary_title(self.message.as_str()).element(
            Snippet::source(line.as_str())
                .line_start(self.line as usize)
                .annotation(AnnotationKind::Primary.span(span)),
        );
        if let Some(help) = &self.help {
            group = group.element(Level::HELP.message(help.as_str()));
        }
        let drawn = renderer.render(&[group]);
        // The renderer opens with its own `error: message` line; ours replaces it so
        // the first line is the same `file:line:col:` every editor and terminal can
        // jump to.
        let body: Vec<&str> = drawn.lines().skip(1).collect();
        format!(
            "{}:{}:{}: {}\n{}\n",
            self.file,
            self.line,
            self.col,
            self.message,
            body.join("\n")
        )
    }

    /// The part of the offending line to show, and the span's byte range in it: the
    /// whole line, or for a long one (a minified or generated file) a window
    /// around the span with `…` where it is cut: nobody reads a 70,000-character
    /// line, and a terminal would wrap it past recognition.
    fn window(&self) -> (String, Span) {
        let span = self.line_span();
        let chars = self.source_line.chars().count();
        if chars <= SHOWN_CHARS {
            return (self.source_line.clone(), span);
        }
        let col = self.col.saturating_sub(1) as usize;
        let first = col.saturating_sub(SHOWN_CHARS / 3).min(chars - SHOWN_CHARS);
        let byte_at = |c: usize| {
            self.source_line
                .char_indices()
                .nth(c)
                .map_or(self.source_line.len(), |(i, _)| i)
        };
        let (from, to) = (byte_at(first), byte_at(first + SHOWN_CHARS));
        let lead = if from > 0 { "…" } else { "" };
        let tail = if to < self.source_line.len() {
            "…"
        } else {
            ""
        };
        let text = format!("{lead}{}{tail}", &self.source_line[from..to]);
        let start = lead.len() + span.start.clamp(from, to) - from;
        let end = lead.len() + span.end.clamp(from, to) - from;
        (text, start..end)
    }

    /// Byte range of the span inside `source_line`.
    fn line_span(&self) -> Span {
        let byte_at = |chars: usize| {
            self.source_line
                .char_indices()
                .nth(chars)
                .map_or(self.source_line.len(), |(i, _)| i)
        };
        let col = self.col.saturating_sub(1) as usize;
        let start = byte_at(col);
        let end = byte_at(col + self.len as usize).max(start);
        start..end
    }
}

/// Characters of a long line shown around the span.
const SHOWN_CHARS: usize = 160;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_characters() {
        let text = "ab\ncé d\n";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 3), (2, 1));
        // `é` is two bytes, one column.
        assert_eq!(line_col(text, 6), (2, 3));
        assert_eq!(line_col(text, 999), (3, 1));
        let index = LineIndex::new(text);
        for offset in [0, 1, 2, 3, 5, 6, 8, 999] {
            assert_eq!(index.line(offset), line_col(text, offset).0, "{offset}");
        }
    }

    #[test]
    fn at_clamps_span_to_its_line() {
        let text = "one\ntwo three\nfour";
        let d = Diagnostic::at("f.toml", text, 8..100, "bad".into(), Some("fix".into()));
        assert_eq!(d.to_string(), "f.toml:2:5: bad; fix");
        assert_eq!(d.source_line, "two three");
        assert_eq!(d.len, 5);
    }

    #[test]
    fn render_shows_line_and_caret() {
        let text = "a = 1\nclFnish(q)\n";
        let d = Diagnostic::at(
            "x.toml",
            text,
            6..13,
            "unknown call".into(),
            Some("did you mean `clFinish`?".into()),
        );
        let out = d.render(false);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "x.toml:2:1: unknown call");
        let code = lines
            .iter()
            .position(|l| l.ends_with("clFnish(q)"))
            .unwrap_or(0);
        assert!(code > 0, "{out}");
        assert!(lines[code].trim_start().starts_with('2'), "{out}");
        let caret = lines[code + 1];
        let col_of_code = lines[code].find("clFnish").unwrap_or(0);
        assert_eq!(caret.find('^'), Some(col_of_code), "{out}");
        assert!(out.contains("did you mean `clFinish`?"), "{out}");
    }

    #[test]
    fn render_survives_empty_lines_and_colour() {
        let d = Diagnostic::at("e.toml", "", 0..0, "empty".into(), None);
        assert!(d.render(false).starts_with("e.toml:1:1: empty"));
        assert!(d.render(true).starts_with("e.toml:1:1: empty"));
    }

    /// A mistake far along a very long line is drawn from a window of that line,
    /// with the caret under the mistake (miette, the renderer before, panicked past
    /// column 65,535).
    #[test]
    fn a_mistake_deep_in_a_long_line_is_shown_from_a_window() {
        let line = format!("title = \"{}\" x", "a".repeat(70_000));
        let at = line.len() - 1;
        let d = Diagnostic::at("long.toml", &line, at..at + 1, "bad".into(), None);
        assert_eq!(d.col as usize, line.chars().count());
        for color in [false, true] {
            let out = d.render(color);
            assert!(out.starts_with("long.toml:1:70012: bad"), "{out}");
            assert!(out.lines().all(|l| l.chars().count() < 400), "{out}");
            assert!(out.contains("…aaa"), "{out}");
        }
        let (shown, span) = d.window();
        assert_eq!(&shown[span], "x");
    }
}
