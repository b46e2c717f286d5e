//! Script lines → raw statements with file spans. One line is one statement; `#`
//! starts a comment that may hold `name: TAG` and `expect-error`. Knows the grammar
//! only: whether a call exists or a handle is alive is `validate`'s job.

use winnow::LocatingSlice;
use winnow::ascii::{space0, space1};
use winnow::combinator::{alt, cut_err, delimited, opt, preceded, repeat};
use winnow::error::{ContextError, StrContext, StrContextValue};
use winnow::prelude::*;
use winnow::token::{one_of, take_till, take_while};

use super::mistake::{Mistake, Problem, Span};
use super::raw::{RawText, Sp};

#[derive(Debug, Clone, PartialEq)]
pub struct RawStmt {
    /// The statement's code, without its comment, in file bytes.
    pub span: Span,
    pub text: String,
    pub tag: Option<Sp<String>>,
    pub expect_error: bool,
    /// `# stop-on-error`: a failure of this line ends the script on any backend.
    pub stop_on_error: bool,
    pub kind: RawKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum RawKind {
    Call {
        bind: Option<Sp<String>>,
        name: Sp<String>,
        args: Vec<Sp<RawArg>>,
        /// The closing `)`, where a missing argument is reported.
        close: Span,
    },
    Repeat {
        count: RawQty,
        body: Vec<RawStmt>,
    },
    Sleep {
        duration: RawQty,
    },
    Mark {
        text: String,
    },
    Forget {
        handle: Sp<String>,
    },
    Verify {
        handle: Sp<String>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum RawArg {
    /// A handle, a kernel name or `CL_TRUE`/`CL_FALSE`: which one is for the
    /// call's signature to say.
    Word(String),
    Qty(RawQty),
    /// `wait [e1, e2]`, each event name with its span.
    Wait(Vec<Sp<String>>),
    /// Flags joined by `|` (`cudaHostAllocMapped | cudaHostAllocWriteCombined`),
    /// each with its span.
    Flags(Vec<Sp<String>>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct RawQty {
    pub value: Sp<RawNum>,
    pub unit: Option<Sp<String>>,
}

impl RawQty {
    pub fn span(&self) -> Span {
        let end = self
            .unit
            .as_ref()
            .map_or(self.value.span.end, |u| u.span.end);
        self.value.span.start..end
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum RawNum {
    Lit(f64),
    Param(String),
    /// A parameter scaled by a number: `2 * {kernel_ms}`, `{size_mib} / 4`.
    Scaled(f64, String),
}

/// What one line holds before `repeat` blocks are nested.
enum Line {
    Stmt(RawStmt),
    Open(RawStmt),
    Close { span: Span, tag: Option<Sp<String>> },
}

/// How deep `repeat` blocks may nest. Validation walks a body twice to see its
/// second iteration, so each level doubles its work (2^8 walks at this depth).
pub const MAX_REPEAT_DEPTH: usize = 8;

/// Parses a variant's script into statements, `repeat` bodies nested.
pub fn parse_script(script: &RawText) -> Result<Vec<RawStmt>, Problem> {
    // Each open `repeat` with the statements of its body so far.
    let mut stack: Vec<(RawStmt, Vec<RawStmt>)> = Vec::new();
    let mut top: Vec<RawStmt> = Vec::new();
    let mut start = 0;
    for raw_line in script.value.split('\n') {
        let line_start = start;
        start += raw_line.len() + 1;
        let Some(line) = parse_line(script, line_start, raw_line.trim_end_matches('\r'))? else {
            continue;
        };
        match line {
            Line::Stmt(s) => match stack.last_mut() {
                Some((_, body)) => body.push(s),
                None => top.push(s),
            },
            Line::Open(s) => {
                if stack.len() >= MAX_REPEAT_DEPTH {
                    return Err(Problem::new(
                        s.span,
                        Mistake::RepeatTooDeep {
                            limit: MAX_REPEAT_DEPTH,
                        },
                    ));
                }
                stack.push((s, Vec::new()))
            }
            Line::Close { span, tag } => {
                if let Some(tag) = tag {
                    return Err(Problem::new(tag.span, Mistake::TagOnClose));
                }
                let Some((mut open, body)) = stack.pop() else {
                    return Err(Problem::new(span, Mistake::StrayClose));
                };
                if let RawKind::Repeat { body: b, .. } = &mut open.kind {
                    *b = body;
                }
                match stack.last_mut() {
                    Some((_, outer)) => outer.push(open),
                    None => top.push(open),
                }
            }
        }
    }
    if let Some((open, _)) = stack.pop() {
        return Err(Problem::new(open.span, Mistake::UnclosedRepeat));
    }
    Ok(top)
}

/// Byte index of the `#` that starts the comment, outside `"…"`.
fn comment_start(line: &str) -> Option<usize> {
    let mut in_string = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => in_string = !in_string,
            '#' if !in_string => return Some(i),
            _ => {}
        }
    }
    None
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Byte index of `word` in `text` where it stands as a word of its own.
fn find_word(text: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = text[from..].find(word).map(|i| i + from) {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        let bounded = |c: Option<char>| !c.is_some_and(|c| is_ident_char(c) || c == '-');
        if bounded(before) && bounded(after) {
            return Some(i);
        }
        from = i + word.len();
    }
    None
}

/// The words a comment may hold besides `name: TAG` and free text.
pub const MARKS: [&str; 2] = ["expect-error", "stop-on-error"];

/// The first word of `comment` that is nearly a mark but not one (`expect-eror`,
/// `expected-error`, `stop_on_error`, `Expect-Error`): its byte offset, the word,
/// and the mark it stands for. Comments are free text otherwise, so only a word
/// within two edits of a mark is taken for one; "expected" or "error" alone are
/// prose.
fn misspelt_mark(comment: &str) -> Option<(usize, String, &'static str)> {
    let is_word_char = |c: char| c.is_ascii_alphabetic() || c == '-' || c == '_';
    let mut words = Vec::new();
    let mut start = None;
    for (i, c) in comment.char_indices().chain([(comment.len(), ' ')]) {
        match (start, is_word_char(c)) {
            (None, true) => start = Some(i),
            (Some(s), false) => {
                words.push((s, &comment[s..i]));
                start = None;
            }
            _ => {}
        }
    }
    words.into_iter().find_map(|(i, raw)| {
        let word = raw.trim_matches(['-', '_']);
        let i = i + (raw.len() - raw.trim_start_matches(['-', '_']).len());
        if MARKS.contains(&word) || word.len() < 8 {
            return None;
        }
        let lower = word.to_ascii_lowercase();
        MARKS
            .iter()
            .map(|m| (strsim::damerau_levenshtein(&lower, m), *m))
            .filter(|(d, _)| *d <= 2)
            .min_by_key(|(d, _)| *d)
            .map(|(_, m)| (i, word.to_string(), m))
    })
}

/// What a line's comment marks it with: `name: TAG`, `expect-error`,
/// `stop-on-error`.
#[derive(Default)]
struct Marks {
    tag: Option<Sp<String>>,
    expect_error: bool,
    stop_on_error: bool,
}

/// Reads the marks of a comment that starts at byte `at` of the script; a bad
/// tag or a misspelt mark is a problem at its place.
fn marks(script: &RawText, at: usize, comment: &str) -> Result<Marks, Problem> {
    let mut tag = None;
    if let Some(n) = find_word(comment, "name:").or_else(|| {
        // `name:` followed directly by the tag has no word boundary after the colon.
        comment
            .find("name:")
            .filter(|&i| !comment[..i].chars().next_back().is_some_and(is_ident_char))
    }) {
        let after = &comment[n + 5..];
        let skip = after.len() - after.trim_start().len();
        let word: String = after[skip..]
            .chars()
            .take_while(|&c| is_ident_char(c))
            .collect();
        let word_at = at + n + 5 + skip;
        if word.is_empty() || word.starts_with(|c: char| c.is_ascii_digit()) {
            let name_at = at + n;
            return Err(Problem::new(
                script.file_span(name_at..name_at + 5),
                Mistake::BadTag,
            ));
        }
        let len = word.len();
        tag = Some(Sp::new(word, script.file_span(word_at..word_at + len)));
    }
    let expect_error = find_word(comment, "expect-error").is_some();
    let stop_on_error = find_word(comment, "stop-on-error").is_some();
    if let Some((i, word, suggestion)) = misspelt_mark(comment) {
        let word_at = at + i;
        let len = word.len();
        return Err(Problem::new(
            script.file_span(word_at..word_at + len),
            Mistake::UnknownMark { word, suggestion },
        ));
    }
    Ok(Marks {
        tag,
        expect_error,
        stop_on_error,
    })
}

fn parse_line(script: &RawText, at: usize, line: &str) -> Result<Option<Line>, Problem> {
    let (code, comment) = match comment_start(line) {
        Some(h) => (&line[..h], Some((h + 1, &line[h + 1..]))),
        None => (line, None),
    };
    let lead = code.len() - code.trim_start().len();
    let code = code.trim();
    if code.is_empty() {
        return Ok(None);
    }
    let code_at = at + lead;
    let file = |local: Span| script.file_span(local.start + code_at..local.end + code_at);

    let Marks {
        tag,
        expect_error,
        stop_on_error,
    } = match comment {
        Some((c_at, comment)) => marks(script, at + c_at, comment)?,
        None => Marks::default(),
    };

    let whole = file(0..code.len());
    let stmt = |kind| RawStmt {
        span: whole.clone(),
        text: code.to_owned(),
        tag: tag.clone(),
        expect_error,
        stop_on_error,
        kind,
    };
    if code == "}" {
        return Ok(Some(Line::Close { span: whole, tag }));
    }
    let keyword = code
        .split(|c: char| c.is_whitespace())
        .next()
        .filter(|w| matches!(*w, "repeat" | "sleep" | "mark" | "forget" | "verify"))
        .filter(|w| {
            let rest = code[w.len()..].trim_start();
            !rest.is_empty() && !rest.starts_with(['=', '('])
        });
    let parsed = match keyword {
        Some("repeat") => run(repeat_line, code).map(|count| {
            Line::Open(stmt(RawKind::Repeat {
                count,
                body: Vec::new(),
            }))
        }),
        Some("sleep") => {
            run(sleep_line, code).map(|duration| Line::Stmt(stmt(RawKind::Sleep { duration })))
        }
        Some("mark") => run(mark_line, code).map(|text| Line::Stmt(stmt(RawKind::Mark { text }))),
        Some("forget") => {
            run(forget_line, code).map(|handle| Line::Stmt(stmt(RawKind::Forget { handle })))
        }
        Some("verify") => {
            run(verify_line, code).map(|handle| Line::Stmt(stmt(RawKind::Verify { handle })))
        }
        _ => run(call_line, code).map(|(bind, name, args, close)| {
            Line::Stmt(stmt(RawKind::Call {
                bind,
                name,
                args,
                close,
            }))
        }),
    };
    match parsed {
        Ok(line) => Ok(Some(map_spans(line, &file))),
        Err((offset, expected)) => {
            let (found, span) = found_at(code, offset);
            Err(Problem::new(
                file(span),
                Mistake::ScriptSyntax { expected, found },
            ))
        }
    }
}

/// Describes the text at `offset` of a line for "expected …, found …": the
/// token there (after blanks) and its span.
pub(crate) fn found_at(code: &str, offset: usize) -> (String, Span) {
    let rest = code.get(offset..).unwrap_or("");
    let start = offset + (rest.len() - rest.trim_start().len());
    let rest = rest.trim_start();
    let Some(first) = rest.chars().next() else {
        return ("end of line".into(), start..start);
    };
    let token: String = if is_ident_char(first) || first == '.' {
        rest.chars()
            .take_while(|&c| is_ident_char(c) || c == '.')
            .collect()
    } else {
        first.to_string()
    };
    let end = start + token.len();
    (format!("`{token}`"), start..end)
}

/// Spans from the grammar are relative to the code; move them into the file.
fn map_spans(line: Line, file: &impl Fn(Span) -> Span) -> Line {
    let sp = |s: Sp<String>| Sp::new(s.value, file(s.span));
    let qty = |q: RawQty| RawQty {
        value: Sp::new(q.value.value, file(q.value.span)),
        unit: q.unit.map(sp),
    };
    let kind = |k: RawKind| match k {
        RawKind::Call {
            bind,
            name,
            args,
            close,
        } => RawKind::Call {
            bind: bind.map(sp),
            name: sp(name),
            args: args
                .into_iter()
                .map(|a| {
                    let span = file(a.span);
                    let value = match a.value {
                        RawArg::Qty(q) => RawArg::Qty(qty(q)),
                        RawArg::Wait(evs) => RawArg::Wait(evs.into_iter().map(sp).collect()),
                        RawArg::Flags(fs) => RawArg::Flags(fs.into_iter().map(sp).collect()),
                        w @ RawArg::Word(_) => w,
                    };
                    Sp::new(value, span)
                })
                .collect(),
            close: file(close),
        },
        RawKind::Repeat { count, body } => RawKind::Repeat {
            count: qty(count),
            body,
        },
        RawKind::Sleep { duration } => RawKind::Sleep {
            duration: qty(duration),
        },
        RawKind::Forget { handle } => RawKind::Forget { handle: sp(handle) },
        RawKind::Verify { handle } => RawKind::Verify { handle: sp(handle) },
        m @ RawKind::Mark { .. } => m,
    };
    match line {
        Line::Stmt(s) => Line::Stmt(RawStmt {
            kind: kind(s.kind),
            ..s
        }),
        Line::Open(s) => Line::Open(RawStmt {
            kind: kind(s.kind),
            ..s
        }),
        c @ Line::Close { .. } => c,
    }
}

// --- the grammar, over one line's code with spans relative to it ---

pub(crate) type In<'a> = LocatingSlice<&'a str>;

pub(crate) fn expected(what: &'static str) -> StrContext {
    StrContext::Expected(StrContextValue::Description(what))
}

/// Runs a line parser; on failure, the offset and what was expected there.
pub(crate) fn run<'a, O>(
    p: impl Parser<In<'a>, O, winnow::error::ErrMode<ContextError>>,
    code: &'a str,
) -> Result<O, (usize, String)> {
    run_until(p, code, "end of line")
}

/// `run`, naming what should follow a complete parse.
pub(crate) fn run_until<'a, O>(
    mut p: impl Parser<In<'a>, O, winnow::error::ErrMode<ContextError>>,
    code: &'a str,
    end: &str,
) -> Result<O, (usize, String)> {
    p.parse(LocatingSlice::new(code)).map_err(|e| {
        // Contexts pile up as the error unwinds; the innermost says it best.
        let wanted = e.inner().context().find_map(|c| match c {
            StrContext::Expected(v) => Some(v.to_string()),
            _ => None,
        });
        (e.offset(), wanted.unwrap_or_else(|| end.to_owned()))
    })
}

pub(crate) fn ident<'a>(i: &mut In<'a>) -> ModalResult<Sp<String>> {
    (
        one_of(|c: char| c.is_ascii_alphabetic() || c == '_'),
        take_while(0.., is_ident_char),
    )
        .take()
        .with_span()
        .map(|(s, span): (&str, Span)| Sp::new(s.to_owned(), span))
        .parse_next(i)
}

pub(crate) fn number(i: &mut In<'_>) -> ModalResult<f64> {
    (
        take_while(1.., |c: char| c.is_ascii_digit()),
        opt(('.', take_while(1.., |c: char| c.is_ascii_digit()))),
    )
        .take()
        .try_map(str::parse::<f64>)
        .parse_next(i)
}

fn param(i: &mut In<'_>) -> ModalResult<String> {
    delimited(
        '{',
        cut_err(ident).context(expected("a parameter name")),
        cut_err('}').context(expected("`}`")),
    )
    .map(|s| s.value)
    .parse_next(i)
}

fn num(i: &mut In<'_>) -> ModalResult<Sp<RawNum>> {
    // `2 * {kernel_ms}` and `{kernel_ms} * 2` or `/ 2`: a parameter scaled,
    // wherever a number goes (a sleep, a size, a repeat count).
    let times = (space0, '*', space0);
    let scaled_before = (number, times, param).map(|(f, _, p)| RawNum::Scaled(f, p));
    let scaled_after = (
        param,
        space0,
        alt(('*', '/')),
        space0,
        number.verify(|n: &f64| *n != 0.0),
    )
        .map(|(p, _, op, _, n)| RawNum::Scaled(if op == '*' { n } else { 1.0 / n }, p));
    alt((
        scaled_before,
        scaled_after,
        number.map(RawNum::Lit),
        param.map(RawNum::Param),
    ))
    .with_span()
    .map(|(v, span)| Sp::new(v, span))
    .parse_next(i)
}

fn unit(i: &mut In<'_>) -> ModalResult<Sp<String>> {
    take_while(1.., |c: char| c.is_ascii_alphabetic())
        .with_span()
        .map(|(s, span): (&str, Span)| Sp::new(s.to_owned(), span))
        .parse_next(i)
}

fn qty(i: &mut In<'_>) -> ModalResult<RawQty> {
    (num, opt(preceded(space0, unit)))
        .map(|(value, unit)| RawQty { value, unit })
        .parse_next(i)
}

/// `wait [e1, e2]`: a word `wait` followed by `[` (a handle may still be named `wait`).
fn wait_list(i: &mut In<'_>) -> ModalResult<Vec<Sp<String>>> {
    let first = preceded(
        ("wait", space0, '[', space0),
        cut_err(ident).context(expected("an event handle")),
    )
    .parse_next(i)?;
    let rest: Vec<Sp<String>> = repeat(
        0..,
        preceded(
            (space0, ',', space0),
            cut_err(ident).context(expected("an event handle")),
        ),
    )
    .parse_next(i)?;
    (space0, cut_err(']').context(expected("`,` or `]`"))).parse_next(i)?;
    Ok(std::iter::once(first).chain(rest).collect())
}

/// `A | B [| C …]`: two or more flag words joined by `|`, as C ORs them.
fn flag_words(i: &mut In<'_>) -> ModalResult<Vec<Sp<String>>> {
    let first = ident.parse_next(i)?;
    let rest: Vec<Sp<String>> = repeat(
        1..,
        preceded(
            (space0, '|', space0),
            cut_err(ident).context(expected("a flag after `|`")),
        ),
    )
    .parse_next(i)?;
    Ok(std::iter::once(first).chain(rest).collect())
}

fn arg(i: &mut In<'_>) -> ModalResult<Sp<RawArg>> {
    alt((
        qty.map(RawArg::Qty),
        wait_list.map(RawArg::Wait),
        flag_words.map(RawArg::Flags),
        ident.map(|s| RawArg::Word(s.value)),
    ))
    .with_span()
    .map(|(v, span)| Sp::new(v, span))
    .context(expected("an argument"))
    .parse_next(i)
}

type CallParts = (Option<Sp<String>>, Sp<String>, Vec<Sp<RawArg>>, Span);

fn call_line(i: &mut In<'_>) -> ModalResult<CallParts> {
    let bind = opt((ident, space0, '=', space0).map(|(b, ..)| b)).parse_next(i)?;
    let name = cut_err(ident)
        .context(expected("an API call such as `clFinish(q)`"))
        .parse_next(i)?;
    (space0, cut_err('(').context(expected("`(`")), space0).parse_next(i)?;
    let mut args = Vec::new();
    if let Some(first) = opt(arg).parse_next(i)? {
        args.push(first);
        let rest: Vec<Sp<RawArg>> =
            repeat(0.., preceded((space0, ',', space0), cut_err(arg))).parse_next(i)?;
        args.extend(rest);
    }
    let close =
        preceded(space0, cut_err(')').context(expected("`,` or `)`")).span()).parse_next(i)?;
    Ok((bind, name, args, close))
}

fn repeat_line(i: &mut In<'_>) -> ModalResult<RawQty> {
    let value = preceded(
        ("repeat", space1),
        cut_err(num).context(expected("a count such as `10` or `{iterations}`")),
    )
    .parse_next(i)?;
    (space0, cut_err('{').context(expected("`{`"))).parse_next(i)?;
    Ok(RawQty { value, unit: None })
}

fn sleep_line(i: &mut In<'_>) -> ModalResult<RawQty> {
    preceded(
        ("sleep", space1),
        cut_err(qty).context(expected("a duration such as `10 ms`")),
    )
    .parse_next(i)
}

fn mark_line(i: &mut In<'_>) -> ModalResult<String> {
    preceded(
        ("mark", space1),
        cut_err(delimited(
            '"',
            take_till(0.., '"'),
            cut_err('"').context(expected("a closing `\"`")),
        ))
        .context(expected("a quoted text such as `\"warm up\"`")),
    )
    .map(str::to_owned)
    .parse_next(i)
}

fn forget_line(i: &mut In<'_>) -> ModalResult<Sp<String>> {
    preceded(
        ("forget", space1),
        cut_err(ident).context(expected("a handle name")),
    )
    .parse_next(i)
}

fn verify_line(i: &mut In<'_>) -> ModalResult<Sp<String>> {
    preceded(
        ("verify", space1),
        cut_err(ident).context(expected("a host buffer's name")),
    )
    .parse_next(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A script as the value of a literal string starting at file offset 0.
    fn script(s: &str) -> RawText {
        RawText::for_tests(s)
    }

    fn one(s: &str) -> RawStmt {
        let mut v = parse_script(&script(s)).unwrap();
        assert_eq!(v.len(), 1, "{v:?}");
        v.remove(0)
    }

    fn err(s: &str) -> Problem {
        parse_script(&script(s)).unwrap_err()
    }

    #[test]
    fn call_with_bind_and_every_argument_form() {
        let s = one("ev = clEnqueueNDRangeKernel(q, k , buf,{kernel_ms} ms) # name: run");
        assert_eq!(
            s.text,
            "ev = clEnqueueNDRangeKernel(q, k , buf,{kernel_ms} ms)"
        );
        assert_eq!(s.tag.as_ref().map(|t| t.value.as_str()), Some("run"));
        let RawKind::Call {
            bind, name, args, ..
        } = s.kind
        else {
            panic!("not a call");
        };
        assert_eq!(bind.map(|b| b.value), Some("ev".into()));
        assert_eq!(name.value, "clEnqueueNDRangeKernel");
        assert_eq!(name.span, 5..27);
        assert_eq!(args.len(), 4);
        assert_eq!(args[2].value, RawArg::Word("buf".into()));
        let RawArg::Qty(q) = &args[3].value else {
            panic!("not a quantity");
        };
        assert_eq!(q.value.value, RawNum::Param("kernel_ms".into()));
        assert_eq!(q.unit.as_ref().map(|u| u.value.as_str()), Some("ms"));
        assert_eq!(args[3].span, 39..53);
    }

    /// #50: a parameter scaled by a number goes wherever a number goes.
    #[test]
    fn a_scaled_parameter_is_a_number() {
        let s = one("sleep 2 * {kernel_ms} ms");
        let RawKind::Sleep { duration } = s.kind else {
            panic!("not a sleep: {s:?}");
        };
        assert_eq!(
            duration.value.value,
            RawNum::Scaled(2.0, "kernel_ms".into())
        );
        assert_eq!(duration.unit.as_ref().map(|u| u.value.as_str()), Some("ms"));
        let s = one("b = clCreateBuffer(ctx, {size_mib}/4 MiB)");
        let RawKind::Call { args, .. } = s.kind else {
            panic!("not a call");
        };
        let RawArg::Qty(q) = &args[1].value else {
            panic!("not a quantity");
        };
        assert_eq!(q.value.value, RawNum::Scaled(0.25, "size_mib".into()));
    }

    #[test]
    fn numbers_units_and_empty_calls() {
        let s = one("b = clCreateBuffer(ctx, 1.5 GiB)");
        let RawKind::Call { args, .. } = s.kind else {
            panic!()
        };
        let RawArg::Qty(q) = &args[1].value else {
            panic!()
        };
        assert_eq!(q.value.value, RawNum::Lit(1.5));
        let s = one("ctx = clCreateContext( )");
        assert!(matches!(s.kind, RawKind::Call { ref args, .. } if args.is_empty()));
    }

    #[test]
    fn comments_tags_and_expect_error() {
        let v = parse_script(&script(
            "# a whole-line comment\n\n  clReleaseMemObject(buf)  # name: again — double expect-error\n",
        ))
        .unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].tag.as_ref().map(|t| t.value.as_str()), Some("again"));
        assert!(v[0].expect_error);
        assert_eq!(v[0].span, 26..49);
        assert!(!one("clFinish(q) # rename: x, an error expected").expect_error);
        assert!(one("cudaFree(p) # stop-on-error: the rest needs it").stop_on_error);
        assert!(!one("cudaFree(p) # name: free").stop_on_error);
        assert!(one("clFinish(q) # rename: x").tag.is_none());
        assert!(matches!(
            err("clFinish(q) # name: ").mistake,
            Mistake::BadTag
        ));
    }

    #[test]
    fn a_tag_and_a_mark_share_one_comment() {
        for c in [
            "cudaFree(buf) # name: free, expect-error",
            "cudaFree(buf) # expect-error, name: free",
            "cudaFree(buf) # name: free — expect-error: the double free is the point",
        ] {
            let s = one(c);
            assert_eq!(s.tag.map(|t| t.value), Some("free".into()), "{c}");
            assert!(s.expect_error, "{c}");
        }
    }

    #[test]
    fn a_misspelt_mark_is_an_error_with_the_mark_it_meant() {
        for (comment, word, meant) in [
            ("# name: free, expect-eror", "expect-eror", "expect-error"),
            ("# expected-error", "expected-error", "expect-error"),
            ("# expect_error", "expect_error", "expect-error"),
            ("# Expect-Error", "Expect-Error", "expect-error"),
            (
                "# stop-on-errors: the rest needs it",
                "stop-on-errors",
                "stop-on-error",
            ),
        ] {
            let line = format!("cudaFree(buf) {comment}");
            let e = err(&line);
            assert_eq!(
                e.mistake,
                Mistake::UnknownMark {
                    word: word.into(),
                    suggestion: meant
                },
                "{line}"
            );
            let at = line.find(word).unwrap();
            assert_eq!(e.span, at..at + word.len(), "{line}");
        }
        // Prose stays prose.
        for prose in [
            "# an error is expected here",
            "# name: sync — a fault of the kernel surfaces here",
            "# the error-path is tested elsewhere",
            "# expectations: none",
        ] {
            assert!(
                parse_script(&script(&format!("cudaFree(buf) {prose}"))).is_ok(),
                "{prose}"
            );
        }
    }

    #[test]
    fn directives() {
        assert!(matches!(
            one("sleep {settle_ms} ms").kind,
            RawKind::Sleep { .. }
        ));
        assert_eq!(
            one("mark \"warm # up\"").kind,
            RawKind::Mark {
                text: "warm # up".into()
            }
        );
        assert!(
            matches!(one("forget ev").kind, RawKind::Forget { ref handle } if handle.value == "ev")
        );
        // A handle may be called like a keyword when it is bound.
        assert!(matches!(
            one("mark = clCreateContext()").kind,
            RawKind::Call { .. }
        ));
    }

    #[test]
    fn repeat_blocks_nest() {
        let v = parse_script(&script(
            "repeat 3 { # name: outer\n  repeat {n} {\n    clFinish(q)\n  }\n  clFlush(q)\n}\nclFinish(q)",
        ))
        .unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].tag.as_ref().map(|t| t.value.as_str()), Some("outer"));
        let RawKind::Repeat { count, body } = &v[0].kind else {
            panic!()
        };
        assert_eq!(count.value.value, RawNum::Lit(3.0));
        assert_eq!(body.len(), 2);
        assert!(matches!(&body[0].kind, RawKind::Repeat { body, .. } if body.len() == 1));
    }

    #[test]
    fn block_mistakes() {
        let e = err("repeat 2 {\n  clFinish(q)\n");
        assert_eq!((e.mistake, e.span), (Mistake::UnclosedRepeat, 0..10));
        let e = err("clFinish(q)\n}\n");
        assert_eq!((e.mistake, e.span), (Mistake::StrayClose, 12..13));
        assert_eq!(err("repeat 2 {\n} # name: x").mistake, Mistake::TagOnClose);
    }

    #[test]
    fn syntax_errors_say_what_was_expected_where() {
        let e = err("clFinish(q");
        assert_eq!(
            e.mistake,
            Mistake::ScriptSyntax {
                expected: "`,` or `)`".into(),
                found: "end of line".into()
            }
        );
        assert_eq!(e.span, 10..10);
        let e = err("clFinish q");
        assert_eq!(e.span, 9..10);
        assert!(
            matches!(e.mistake, Mistake::ScriptSyntax { ref expected, .. } if expected == "`(`")
        );
        let e = err("clCreateBuffer(ctx, {size MiB)");
        assert_eq!(e.span, 26..29);
        let e = err("clFinish(q) x");
        assert!(
            matches!(e.mistake, Mistake::ScriptSyntax { ref expected, ref found } if expected == "end of line" && found == "`x`")
        );
        let e = err("repeat 3\n}");
        assert!(
            matches!(e.mistake, Mistake::ScriptSyntax { ref expected, .. } if expected == "`{`")
        );
        let e = err("clCreateBuffer(ctx, {size MiB)");
        assert!(
            matches!(e.mistake, Mistake::ScriptSyntax { ref expected, .. } if expected == "`}`")
        );
        let e = err("clFinish(q,)");
        assert!(
            matches!(e.mistake, Mistake::ScriptSyntax { ref expected, ref found } if expected == "an argument" && found == "`)`")
        );
    }

    #[test]
    fn wait_lists_are_a_trailing_argument() {
        let s = one("ev = clEnqueueReadBuffer(qb, buf, CL_FALSE, wait [k1, k2])");
        let RawKind::Call { args, .. } = s.kind else {
            panic!()
        };
        assert_eq!(args.len(), 4);
        let RawArg::Wait(evs) = &args[3].value else {
            panic!("not a wait list: {:?}", args[3]);
        };
        let names: Vec<&str> = evs.iter().map(|e| e.value.as_str()).collect();
        assert_eq!(names, ["k1", "k2"]);
        assert_eq!(evs[1].span, 54..56);
        assert_eq!(args[3].span, 44..57);
        // `wait` alone is still a handle name, and `wait[e]` needs no blank.
        let s = one("clFinish(wait)");
        assert!(
            matches!(s.kind, RawKind::Call { ref args, .. } if args[0].value == RawArg::Word("wait".into()))
        );
        assert!(parse_script(&script("clEnqueueBarrierWithWaitList(q, wait[e])")).is_ok());
        let e = err("clEnqueueBarrierWithWaitList(q, wait [])");
        assert_eq!(
            e.mistake,
            Mistake::ScriptSyntax {
                expected: "an event handle".into(),
                found: "`]`".into()
            }
        );
        assert_eq!(e.span, 38..39);
        let e = err("clEnqueueBarrierWithWaitList(q, wait [e1 e2])");
        assert!(
            matches!(e.mistake, Mistake::ScriptSyntax { ref expected, .. } if expected == "`,` or `]`")
        );
    }

    /// Nesting past the limit is an error at the first `repeat` too deep, found
    /// before anything walks the nest (30,000 levels once overflowed the stack).
    #[test]
    fn repeat_nesting_is_bounded() {
        let nest = |depth: usize| {
            let mut s = "repeat 2 {\n".repeat(depth);
            s.push_str("ctx = clCreateContext()\n");
            s.push_str(&"}\n".repeat(depth));
            s
        };
        assert!(parse_script(&RawText::for_tests(&nest(MAX_REPEAT_DEPTH))).is_ok());
        for depth in [MAX_REPEAT_DEPTH + 1, 30_000] {
            let e = parse_script(&RawText::for_tests(&nest(depth))).unwrap_err();
            assert_eq!(
                e.mistake,
                Mistake::RepeatTooDeep {
                    limit: MAX_REPEAT_DEPTH
                }
            );
            let line = "repeat 2 {\n".len() * MAX_REPEAT_DEPTH;
            assert_eq!(e.span, line..line + "repeat 2 {".len());
        }
    }
}
