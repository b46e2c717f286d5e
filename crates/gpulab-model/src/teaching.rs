//! A lab's teaching text as a reader sees it: the Markdown of its `look`,
//! `why` and `instead` (code spans, emphasis) read by `pulldown-cmark` into
//! runs of plain, code, emphasised and strong text, which the dashboard styles
//! and the page marks up. Block structure is not theirs to have: paragraphs
//! and line breaks read as one flowing text, split at blank lines.

use pulldown_cmark::{Event, Parser, Tag, TagEnd};

/// One run of teaching text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inline {
    Text(String),
    Code(String),
    Emphasis(String),
    Strong(String),
}

impl Inline {
    pub fn text(&self) -> &str {
        match self {
            Inline::Text(s) | Inline::Code(s) | Inline::Emphasis(s) | Inline::Strong(s) => s,
        }
    }
}

/// The paragraphs of `markdown`, each as its runs in order.
pub fn paragraphs(markdown: &str) -> Vec<Vec<Inline>> {
    let mut out: Vec<Vec<Inline>> = Vec::new();
    let mut cur: Vec<Inline> = Vec::new();
    let (mut emphasis, mut strong) = (0u32, 0u32);
    let push = |cur: &mut Vec<Inline>, s: &str, emphasis: u32, strong: u32| {
        let run = if strong > 0 {
            Inline::Strong(s.to_string())
        } else if emphasis > 0 {
            Inline::Emphasis(s.to_string())
        } else {
            Inline::Text(s.to_string())
        };
        // Neighbouring runs of one kind are one run.
        match (cur.last_mut(), &run) {
            (Some(Inline::Text(a)), Inline::Text(b))
            | (Some(Inline::Emphasis(a)), Inline::Emphasis(b))
            | (Some(Inline::Strong(a)), Inline::Strong(b)) => a.push_str(b),
            _ => cur.push(run),
        }
    };
    for event in Parser::new(markdown) {
        match event {
            Event::Text(s) | Event::Html(s) | Event::InlineHtml(s) => {
                push(&mut cur, &s, emphasis, strong);
            }
            Event::Code(s) => cur.push(Inline::Code(s.to_string())),
            Event::SoftBreak | Event::HardBreak => push(&mut cur, " ", emphasis, strong),
            Event::Start(Tag::Emphasis) => emphasis += 1,
            Event::End(TagEnd::Emphasis) => emphasis = emphasis.saturating_sub(1),
            Event::Start(Tag::Strong) => strong += 1,
            Event::End(TagEnd::Strong) => strong = strong.saturating_sub(1),
            Event::End(
                TagEnd::Paragraph | TagEnd::Heading(_) | TagEnd::Item | TagEnd::CodeBlock,
            ) if !cur.is_empty() => out.push(std::mem::take(&mut cur)),
            _ => {}
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use Inline::*;

    #[test]
    fn code_spans_and_emphasis_are_runs_and_their_marks_are_gone() {
        let p = paragraphs("With `clFinish` the host *waits*; **always**\nwait.");
        assert_eq!(
            p,
            vec![vec![
                Text("With ".into()),
                Code("clFinish".into()),
                Text(" the host ".into()),
                Emphasis("waits".into()),
                Text("; ".into()),
                Strong("always".into()),
                Text(" wait.".into()),
            ]]
        );
    }

    #[test]
    fn blank_lines_split_paragraphs_and_plain_text_stays_as_written() {
        let p = paragraphs("one (a < b) & c\n\ntwo");
        assert_eq!(
            p,
            vec![
                vec![Text("one (a < b) & c".into())],
                vec![Text("two".into())]
            ]
        );
        // A lone asterisk or backtick is text, not a mark.
        let p = paragraphs("2 * 3 and a ` tick");
        let all: String = p[0].iter().map(Inline::text).collect();
        assert_eq!(all, "2 * 3 and a ` tick");
    }
}
