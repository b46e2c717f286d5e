//! Phase one: the TOML document read into raw structs that keep the span of every
//! key and value, so validation can point at the exact column. Checks shape only
//! (known keys, types); what the values mean is `validate`'s job.

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::mistake::{Mistake, Problem, Span};
use super::suggest;

/// A value and the bytes of the file it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Sp<T> {
    pub value: T,
    pub span: Span,
}

impl<T> Sp<T> {
    pub fn new(value: T, span: Span) -> Sp<T> {
        Sp { value, span }
    }
}

/// A string value with the file offset of each of its bytes, so a column inside a
/// script or claim expression can be reported as a column of the file.
#[derive(Debug, Clone, PartialEq)]
pub struct RawText {
    pub value: String,
    /// The whole literal, quotes included.
    pub span: Span,
    map: TextMap,
}

#[derive(Debug, Clone, PartialEq)]
enum TextMap {
    /// Byte `i` of the value is byte `start + i` of the file (literal strings).
    Shift(usize),
    /// Byte `i` of the value comes from byte `table[i]` (escapes in basic strings);
    /// one extra entry for the end.
    Table(Vec<usize>),
}

impl RawText {
    /// File offset of byte `i` of the value.
    pub fn file_offset(&self, i: usize) -> usize {
        match &self.map {
            TextMap::Shift(start) => start + i,
            TextMap::Table(t) => t.get(i).or(t.last()).copied().unwrap_or(self.span.start),
        }
    }

    pub fn file_span(&self, local: Span) -> Span {
        self.file_offset(local.start)..self.file_offset(local.end)
    }

    /// A text that sits at the very start of a file, for parser tests.
    #[cfg(test)]
    pub(crate) fn for_tests(s: &str) -> RawText {
        RawText {
            value: s.to_owned(),
            span: 0..s.len(),
            map: TextMap::Shift(0),
        }
    }
}

#[derive(Debug, Clone)]
pub struct RawLab {
    pub id: Sp<String>,
    pub title: Sp<String>,
    pub backend: Sp<String>,
    pub claim: Sp<String>,
    pub look: String,
    pub why: String,
    pub instead: String,
    pub params: Vec<RawParam>,
    /// The `variants` key, for "at least one variant".
    pub variants_span: Span,
    pub variants: Vec<RawVariant>,
    pub claims: Vec<RawClaim>,
}

#[derive(Debug, Clone)]
pub struct RawParam {
    pub name: Sp<String>,
    pub default: Sp<f64>,
    pub min: Sp<f64>,
    pub max: Sp<f64>,
    pub unit: Option<Sp<String>>,
    pub help: String,
}

#[derive(Debug, Clone)]
pub struct RawVariant {
    pub name: Sp<String>,
    pub description: String,
    pub script: RawText,
}

#[derive(Debug, Clone)]
pub struct RawClaim {
    pub name: Sp<String>,
    pub text: String,
    pub expr: RawText,
    pub requires: Option<RawText>,
    pub variants: Option<Vec<Sp<String>>>,
    pub expect: Option<RawExpect>,
}

/// A claim's `expect`: what the lab's author expects it to show (the lesson),
/// for every variant it applies to or per variant.
#[derive(Debug, Clone)]
pub enum RawExpect {
    /// `expect = "holds"`
    Every(Sp<String>),
    /// `expect = { finish = "holds", no-wait = "does not hold" }`
    PerVariant(Vec<(Sp<String>, Sp<String>)>),
}

const ROOT_KEYS: &[&str] = &[
    "id", "title", "backend", "claim", "teaching", "params", "variants", "claims",
];
const TEACHING_KEYS: &[&str] = &["look", "why", "instead"];
const PARAM_KEYS: &[&str] = &["name", "default", "min", "max", "unit", "help"];
const VARIANT_KEYS: &[&str] = &["name", "description", "script"];
const CLAIM_KEYS: &[&str] = &["name", "text", "expr", "requires", "variants", "expect"];

type Res<T> = Result<T, Problem>;

/// Reads the TOML text of a lab file.
pub fn read(text: &str) -> Res<RawLab> {
    let doc = DeTable::parse(text).map_err(|e| toml_problem(text, &e))?;
    let root = Fields::new(text, doc.get_ref(), 0..0, "the lab file", ROOT_KEYS)?;
    let id = root.string("id")?;
    let title = root.string("title")?;
    let backend = root.string("backend")?;
    let claim = root.string("claim")?;
    let teaching = root.table("teaching", "[teaching]", TEACHING_KEYS)?;
    let look = teaching.string("look")?.value;
    let why = teaching.string("why")?.value;
    let instead = teaching.string("instead")?.value;

    let mut params = Vec::new();
    for p in root.tables("params", "[[params]]", PARAM_KEYS)? {
        params.push(RawParam {
            name: p.string("name")?,
            default: p.number("default")?,
            min: p.number("min")?,
            max: p.number("max")?,
            unit: p.opt_string("unit")?,
            help: p.opt_string("help")?.map(|s| s.value).unwrap_or_default(),
        });
    }
    let variants_span = root.get("variants").map_or(0..0, |v| v.span());
    let mut variants = Vec::new();
    for v in root.tables("variants", "[[variants]]", VARIANT_KEYS)? {
        variants.push(RawVariant {
            name: v.string("name")?,
            description: v
                .opt_string("description")?
                .map(|s| s.value)
                .unwrap_or_default(),
            script: v.text("script")?,
        });
    }
    let mut claims = Vec::new();
    for c in root.tables("claims", "[[claims]]", CLAIM_KEYS)? {
        claims.push(RawClaim {
            name: c.string("name")?,
            text: c.string("text")?.value,
            expr: c.text("expr")?,
            requires: match c.get("requires") {
                Some(_) => Some(c.text("requires")?),
                None => None,
            },
            variants: c.opt_string_list("variants")?,
            expect: c.opt_expect("expect")?,
        });
    }
    Ok(RawLab {
        id,
        title,
        backend,
        claim,
        look,
        why,
        instead,
        params,
        variants_span,
        variants,
        claims,
    })
}

pub(crate) fn toml_problem(text: &str, e: &toml::de::Error) -> Problem {
    let span = e.span().unwrap_or(0..0);
    if let Some(problem) = unclosed_string(text, span.start) {
        return problem;
    }
    let mistake = if e.message() == "duplicate key" {
        let key = text.get(span.clone()).unwrap_or("").to_owned();
        Mistake::DuplicateKey { key }
    } else {
        Mistake::Toml {
            message: e.message().replace('\n', "; "),
        }
    };
    Problem::new(span, mistake)
}

/// TOML reads an unclosed `"""` string on to the next `"""` (the opening of
/// the next key's text) and then fails right after it, far from the mistake.
/// When the error is on the line where a multi-line string closed, and that
/// string holds a line that reads like a TOML key with a TOML value (or a table
/// header), it is the one left open: point at its opening. (A script's lines,
/// `buf = clCreateBuffer(…)`, do not read as TOML values.)
fn unclosed_string(text: &str, error_at: usize) -> Option<Problem> {
    let (open, close, delimiter) = multiline_strings(text)
        .into_iter()
        .take_while(|(_, close, _)| *close <= error_at)
        .last()?;
    if text.get(close..error_at)?.contains('\n') {
        return None;
    }
    let inside = text.get(open + 3..close.saturating_sub(3))?;
    let mut offset = open + 3;
    for line in inside.split_inclusive('\n') {
        let trimmed = line.trim();
        let key = trimmed
            .split_once('=')
            .filter(|(k, v)| {
                let (k, v) = (k.trim(), v.trim_start());
                !k.is_empty()
                    && k.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                    // Empty: the value's own opening quotes closed this string.
                    && (v.is_empty()
                        || v.starts_with(['"', '\'', '[', '{', '-', '+'])
                        || v.starts_with(|c: char| c.is_ascii_digit())
                        || v.starts_with("true")
                        || v.starts_with("false"))
            })
            .map(|(k, _)| k.trim());
        let table = trimmed.starts_with('[') && trimmed.ends_with(']');
        if let Some(shown) = key
            .map(|k| format!("{k} ="))
            .or(table.then(|| trimmed.to_string()))
        {
            let line_no = text[..offset].matches('\n').count() + 1;
            return Some(Problem::new(
                open..open + 3,
                Mistake::UnclosedString {
                    delimiter,
                    swallowed: shown,
                    line: line_no,
                },
            ));
        }
        offset += line.len();
    }
    None
}

/// The multi-line strings of a TOML text as (opening, end of closing, delimiter),
/// in order; comments and one-line strings are skipped.
fn multiline_strings(text: &str) -> Vec<(usize, usize, &'static str)> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let rest = &bytes[i..];
        if rest.starts_with(b"\"\"\"") || rest.starts_with(b"'''") {
            let (delimiter, literal) = if rest[0] == b'"' {
                ("\"\"\"", false)
            } else {
                ("'''", true)
            };
            let mut j = i + 3;
            while j < bytes.len() && !bytes[j..].starts_with(delimiter.as_bytes()) {
                j += if !literal && bytes[j] == b'\\' { 2 } else { 1 };
            }
            // A closing delimiter may take up to two more quotes into the text.
            let mut end = (j + 3).min(bytes.len());
            while end < bytes.len() && bytes[end] == delimiter.as_bytes()[0] && end < j + 5 {
                end += 1;
            }
            found.push((i, end, delimiter));
            i = end;
        } else if rest[0] == b'#' {
            i += rest.iter().position(|b| *b == b'\n').unwrap_or(rest.len());
        } else if rest[0] == b'"' || rest[0] == b'\'' {
            let quote = rest[0];
            let mut j = i + 1;
            while j < bytes.len() && bytes[j] != quote && bytes[j] != b'\n' {
                j += if quote == b'"' && bytes[j] == b'\\' {
                    2
                } else {
                    1
                };
            }
            i = j + 1;
        } else {
            i += 1;
        }
    }
    found
}

/// One TOML table whose keys have been checked against the known ones.
pub(crate) struct Fields<'a, 'i> {
    text: &'a str,
    table: &'a DeTable<'i>,
    span: Span,
    name: &'static str,
}

type Value<'i> = Spanned<DeValue<'i>>;

fn found(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

impl<'a, 'i> Fields<'a, 'i> {
    pub(crate) fn new(
        text: &'a str,
        table: &'a DeTable<'i>,
        span: Span,
        name: &'static str,
        known: &'static [&'static str],
    ) -> Res<Fields<'a, 'i>> {
        let mut keys: Vec<_> = table.iter().map(|(k, _)| k).collect();
        keys.sort_by_key(|k| k.span().start);
        for k in keys {
            let key: &str = k.get_ref();
            if !known.contains(&key) {
                return Err(Problem::new(
                    k.span(),
                    Mistake::UnknownKey {
                        key: key.to_owned(),
                        table: name,
                        suggestion: suggest::nearest(key, known.iter().copied()),
                    },
                ));
            }
        }
        Ok(Fields {
            text,
            table,
            span,
            name,
        })
    }

    pub(crate) fn get(&self, key: &str) -> Option<&'a Value<'i>> {
        self.table.get(key)
    }

    fn req(&self, key: &'static str) -> Res<&'a Value<'i>> {
        self.get(key).ok_or_else(|| {
            Problem::new(
                self.span.clone(),
                Mistake::MissingKey {
                    key,
                    table: self.name,
                },
            )
        })
    }

    fn wrong(key: &str, v: &Value<'_>, expected: &'static str) -> Problem {
        Problem::new(
            v.span(),
            Mistake::WrongType {
                key: key.to_owned(),
                expected,
                found: found(v.get_ref()),
            },
        )
    }

    pub(crate) fn string(&self, key: &'static str) -> Res<Sp<String>> {
        let v = self.req(key)?;
        match v.get_ref() {
            DeValue::String(s) => Ok(Sp::new(s.to_string(), v.span())),
            _ => Err(Self::wrong(key, v, "a string")),
        }
    }

    pub(crate) fn opt_string(&self, key: &'static str) -> Res<Option<Sp<String>>> {
        match self.get(key) {
            Some(_) => self.string(key).map(Some),
            None => Ok(None),
        }
    }

    pub(crate) fn text(&self, key: &'static str) -> Res<RawText> {
        let s = self.string(key)?;
        let map = text_map(self.text, &s.span, &s.value);
        Ok(RawText {
            value: s.value,
            span: s.span,
            map,
        })
    }

    pub(crate) fn number(&self, key: &'static str) -> Res<Sp<f64>> {
        let v = self.req(key)?;
        let n = match v.get_ref() {
            DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix())
                .ok()
                .map(|n| n as f64),
            DeValue::Float(f) => f.as_str().replace('_', "").parse::<f64>().ok(),
            _ => return Err(Self::wrong(key, v, "a number")),
        };
        match n {
            Some(n) if n.is_finite() => Ok(Sp::new(n, v.span())),
            _ => Err(Problem::new(v.span(), Mistake::NotFinite { key })),
        }
    }

    fn opt_string_list(&self, key: &'static str) -> Res<Option<Vec<Sp<String>>>> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let DeValue::Array(items) = v.get_ref() else {
            return Err(Self::wrong(key, v, "an array of strings"));
        };
        items
            .iter()
            .map(|it| match it.get_ref() {
                DeValue::String(s) => Ok(Sp::new(s.to_string(), it.span())),
                _ => Err(Self::wrong(key, it, "a string")),
            })
            .collect::<Res<Vec<_>>>()
            .map(Some)
    }

    /// A string, or an inline table of strings keyed by variant.
    fn opt_expect(&self, key: &'static str) -> Res<Option<RawExpect>> {
        const SHAPE: &str = "a string or a table of strings by variant";
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        match v.get_ref() {
            DeValue::String(s) => Ok(Some(RawExpect::Every(Sp::new(s.to_string(), v.span())))),
            DeValue::Table(t) => {
                let mut pairs: Vec<_> = t.iter().collect();
                pairs.sort_by_key(|(k, _)| k.span().start);
                pairs
                    .into_iter()
                    .map(|(k, val)| match val.get_ref() {
                        DeValue::String(s) => Ok((
                            Sp::new(k.get_ref().to_string(), k.span()),
                            Sp::new(s.to_string(), val.span()),
                        )),
                        _ => Err(Self::wrong(key, val, "a string")),
                    })
                    .collect::<Res<Vec<_>>>()
                    .map(|p| Some(RawExpect::PerVariant(p)))
            }
            _ => Err(Self::wrong(key, v, SHAPE)),
        }
    }

    fn table(
        &self,
        key: &'static str,
        name: &'static str,
        known: &'static [&'static str],
    ) -> Res<Fields<'a, 'i>> {
        let v = self.req(key)?;
        match v.get_ref() {
            DeValue::Table(t) => Fields::new(self.text, t, v.span(), name, known),
            _ => Err(Self::wrong(key, v, "a table (`[teaching]`)")),
        }
    }

    /// An array of tables; absent means none.
    pub(crate) fn tables(
        &self,
        key: &'static str,
        name: &'static str,
        known: &'static [&'static str],
    ) -> Res<Vec<Fields<'a, 'i>>> {
        let Some(v) = self.get(key) else {
            return Ok(Vec::new());
        };
        let items = match v.get_ref() {
            DeValue::Array(items) => items,
            DeValue::Table(_) => {
                return Err(Problem::new(v.span(), Mistake::NotArrayOfTables { key }));
            }
            _ => return Err(Self::wrong(key, v, "an array of tables")),
        };
        items
            .iter()
            .map(|it| match it.get_ref() {
                DeValue::Table(t) => Fields::new(self.text, t, it.span(), name, known),
                _ => Err(Problem::new(it.span(), Mistake::NotArrayOfTables { key })),
            })
            .collect()
    }
}

/// Where the bytes of a string value sit in the file. The span covers the quotes;
/// TOML drops a newline right after an opening `'''` or `"""`, and basic strings
/// may hold escapes, so the mapping is rebuilt here and checked against the value
/// the TOML parser decoded. Should they ever disagree, the start of the literal is
/// a safe approximation.
fn text_map(text: &str, span: &Span, value: &str) -> TextMap {
    let Some(raw) = text.get(span.clone()) else {
        return TextMap::Shift(span.start);
    };
    let (delim, escapes) = if raw.starts_with("'''") {
        (3, false)
    } else if raw.starts_with("\"\"\"") {
        (3, true)
    } else if raw.starts_with('"') {
        (1, true)
    } else {
        (1, false)
    };
    let mut start = span.start + delim;
    let mut body = raw
        .get(delim..raw.len().saturating_sub(delim))
        .unwrap_or("");
    if delim == 3 {
        for nl in ["\r\n", "\n"] {
            if let Some(rest) = body.strip_prefix(nl) {
                body = rest;
                start += nl.len();
                break;
            }
        }
    }
    if body == value {
        return TextMap::Shift(start);
    }
    let (decoded, table) = decode(body, start, escapes, value.contains('\r'));
    if decoded == value {
        TextMap::Table(table)
    } else {
        TextMap::Shift(start)
    }
}

/// Decodes a TOML string body, recording the file offset each output byte came from.
fn decode(body: &str, base: usize, escapes: bool, keep_cr: bool) -> (String, Vec<usize>) {
    let mut out = String::new();
    let mut table = Vec::new();
    let push = |out: &mut String, table: &mut Vec<usize>, c: char, at: usize| {
        out.push(c);
        table.extend(std::iter::repeat_n(base + at, c.len_utf8()));
    };
    let mut it = body.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        if c == '\r' && !keep_cr && matches!(it.peek(), Some((_, '\n'))) {
            continue;
        }
        if c != '\\' || !escapes {
            push(&mut out, &mut table, c, i);
            continue;
        }
        let Some((_, e)) = it.next() else { break };
        let simple = match e {
            'b' => Some('\u{8}'),
            't' => Some('\t'),
            'n' => Some('\n'),
            'f' => Some('\u{c}'),
            'r' => Some('\r'),
            'e' => Some('\u{1b}'),
            '"' => Some('"'),
            '\\' => Some('\\'),
            _ => None,
        };
        if let Some(s) = simple {
            push(&mut out, &mut table, s, i);
            continue;
        }
        let digits = match e {
            'x' => 2,
            'u' => 4,
            'U' => 8,
            _ => {
                // A line-ending backslash: skip all whitespace up to the next text.
                while matches!(it.peek(), Some((_, ' ' | '\t' | '\r' | '\n'))) {
                    it.next();
                }
                continue;
            }
        };
        let hex: String = (0..digits)
            .filter_map(|_| it.next().map(|(_, h)| h))
            .collect();
        if let Some(ch) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
            push(&mut out, &mut table, ch, i);
        }
    }
    table.push(base + body.len());
    (out, table)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minimal(extra: &str) -> String {
        format!(
            "id = \"x\"\ntitle = \"t\"\nbackend = \"opencl\"\nclaim = \"c\"\n\
             [teaching]\nlook = \"l\"\nwhy = \"w\"\ninstead = \"i\"\n{extra}"
        )
    }

    #[test]
    fn an_error_after_a_closed_script_is_not_blamed_on_the_script() {
        // The script's lines read like keys, but the script is closed and the
        // error is on a later line of its own.
        let text = minimal(
            "[[variants]]\nname = \"v\"\nscript = '''\nn = 1\nctx = clCreateContext()\n'''\nbad bad\n",
        );
        let Err(problem) = read(&text) else {
            panic!("a TOML error")
        };
        assert!(
            matches!(problem.mistake, Mistake::Toml { .. }),
            "{problem:?}"
        );
    }

    #[test]
    fn an_unclosed_string_is_named_at_its_opening() {
        let text = "id = \"x\"\nwhy = \"\"\"runs on\nclaim = \"\"\"c\"\"\"\n";
        let Err(problem) = read(text) else {
            panic!("a TOML error")
        };
        assert_eq!(problem.span, 15..18, "{problem:?}");
        assert!(
            matches!(&problem.mistake, Mistake::UnclosedString { swallowed, line: 3, .. } if swallowed == "claim ="),
            "{problem:?}"
        );
    }

    #[test]
    fn literal_script_maps_after_the_dropped_newline() {
        let text =
            minimal("[[variants]]\nname = \"v\"\nscript = '''\nctx = clCreateContext()\n'''\n");
        let lab = read(&text).unwrap();
        let s = &lab.variants[0].script;
        assert_eq!(&text[s.file_offset(0)..s.file_offset(3)], "ctx");
    }

    #[test]
    fn escapes_in_basic_strings_keep_file_columns() {
        let text = minimal("[[variants]]\nname = \"v\"\nscript = \"a\\tb = clFinish(q)\"\n");
        let lab = read(&text).unwrap();
        let s = &lab.variants[0].script;
        assert_eq!(s.value, "a\tb = clFinish(q)");
        let at = s.value.find("clFinish").unwrap();
        assert_eq!(&text[s.file_offset(at)..s.file_offset(at) + 8], "clFinish");
    }

    #[test]
    fn multi_line_basic_with_line_continuation() {
        let text = minimal("[[variants]]\nname = \"v\"\nscript = \"\"\"\nab \\\n   cd\"\"\"\n");
        let lab = read(&text).unwrap();
        let s = &lab.variants[0].script;
        assert_eq!(s.value, "ab cd");
        assert_eq!(&text[s.file_offset(3)..s.file_offset(5)], "cd");
    }

    #[test]
    fn unknown_key_suggests_the_nearest() {
        let err = read(&minimal("tittle = \"x\"\n")).unwrap_err();
        // Inside [teaching], since the key follows that header.
        assert!(matches!(
            err.mistake,
            Mistake::UnknownKey { ref key, table: "[teaching]", .. } if key == "tittle"
        ));
        let err = read("tittle = 1\n").unwrap_err();
        assert!(matches!(
            err.mistake,
            Mistake::UnknownKey {
                suggestion: Some("title"),
                ..
            }
        ));
    }

    #[test]
    fn wrong_types_and_missing_keys() {
        let err = read("id = 3\n").unwrap_err();
        assert!(matches!(
            err.mistake,
            Mistake::WrongType {
                expected: "a string",
                found: "an integer",
                ..
            }
        ));
        assert_eq!(err.span, 5..6);
        let err = read("id = \"x\"\n").unwrap_err();
        assert!(matches!(
            err.mistake,
            Mistake::MissingKey { key: "title", .. }
        ));
        let err = read(&minimal("[variants]\nname = \"v\"\n")).unwrap_err();
        assert!(matches!(
            err.mistake,
            Mistake::NotArrayOfTables { key: "variants" }
        ));
    }
}
