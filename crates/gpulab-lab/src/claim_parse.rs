//! Claim expressions (`host_ms(release) < 0.2 * kernel_ms`) → `Expr`, with the span
//! of every name so validation can point at a misspelt metric. Checks syntax and that
//! numbers and comparisons are combined sensibly; what names mean is `validate`'s job.
//!
//! Precedence, loosest first: `or`, `and`, `not`, comparisons (not chained),
//! `+ -`, `* /`, unary `-`. `in variant NAME` follows one metric and binds to it
//! alone (`2 * host_ms(free) in variant sync` doubles the other variant's value);
//! the name runs to the next space, `-` included, as variant names may hold `-`.

use winnow::ascii::{space0, space1};
use winnow::combinator::{alt, cut_err, delimited, not, opt, preceded, repeat, terminated};
use winnow::prelude::*;
use winnow::token::{one_of, take_while};

use super::expr::{BinOp, Expr};
use super::mistake::{Mistake, Problem, Span};
use super::raw::{RawText, Sp};
use super::script::{In, expected, found_at, ident, number, run_until};

/// A parsed claim expression and every name it mentions.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedExpr {
    pub expr: Expr,
    pub refs: Vec<NameRef>,
}

/// A bare name (`kernel_ms`) or a metric call (`host_ms(release)`), in file spans,
/// with the other variant it is measured in (`… in variant sync`), if any.
#[derive(Debug, Clone, PartialEq)]
pub struct NameRef {
    pub name: Sp<String>,
    pub arg: Option<Sp<String>>,
    pub variant: Option<Sp<String>>,
}

/// The expression with spans, before types are checked.
#[derive(Debug, Clone)]
struct Node {
    span: Span,
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    Num(f64),
    /// A number and its unit, converted: `1 s` is (1000, "ms").
    Qty(f64, &'static str),
    Name(Sp<String>),
    Metric(Sp<String>, Sp<String>),
    /// A name or metric call, measured in the named variant.
    InVariant(Box<Node>, Sp<String>),
    Neg(Box<Node>),
    Not(Box<Node>),
    Bin(BinOp, Box<Node>, Box<Node>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ty {
    Num,
    Bool,
}

/// Operators and parentheses a claim may use. The parser and every walk over the
/// expression recurse once per level, and a claim's depth is at most this count:
/// the bound keeps a malformed or hostile lab file from overflowing the stack.
pub const MAX_EXPR_OPERATORS: usize = 48;

pub fn parse_expr(text: &RawText) -> Result<ParsedExpr, Problem> {
    let src = text.value.as_str();
    if let Some(at) = past_operator_limit(src) {
        return Err(Problem::new(
            text.file_span(at..at + 1),
            Mistake::ExprTooLong {
                limit: MAX_EXPR_OPERATORS,
            },
        ));
    }
    let node = run_until(
        delimited(space0, or_expr, space0),
        src,
        "an operator or the end",
    )
    .map_err(|(offset, expected)| {
        let (found, span) = found_at(src, offset);
        let found = if found == "end of line" {
            "the end".into()
        } else {
            found
        };
        Problem::new(
            text.file_span(span),
            Mistake::ExprSyntax { expected, found },
        )
    })?;
    let mut refs = Vec::new();
    let (expr, ty) = lower(&node, text, &mut refs)?;
    if ty != Ty::Bool {
        return Err(Problem::new(
            text.file_span(node.span),
            Mistake::ExprType {
                message: "a claim must compare, e.g. `host_ms(release) < 0.2 * kernel_ms`",
            },
        ));
    }
    Ok(ParsedExpr { expr, refs })
}

/// Byte offset of the operator or parenthesis past `MAX_EXPR_OPERATORS`, if any.
/// Counts `(`, the arithmetic and comparison symbols, and the words `not`, `and`,
/// `or`: every way a level of nesting can be made.
fn past_operator_limit(src: &str) -> Option<usize> {
    let mut count = 0;
    let mut word_start = None;
    for (i, c) in src.char_indices().chain(std::iter::once((src.len(), ' '))) {
        if c.is_alphanumeric() || c == '_' {
            word_start.get_or_insert(i);
            continue;
        }
        if let Some(start) = word_start.take()
            && matches!(&src[start..i], "not" | "and" | "or")
        {
            count += 1;
            if count > MAX_EXPR_OPERATORS {
                return Some(start);
            }
        }
        if matches!(c, '(' | '+' | '-' | '*' | '/' | '<' | '>' | '=' | '!') {
            count += 1;
            if count > MAX_EXPR_OPERATORS {
                return Some(i);
            }
        }
    }
    None
}

fn lower(n: &Node, text: &RawText, refs: &mut Vec<NameRef>) -> Result<(Expr, Ty), Problem> {
    let fail = |node: &Node, message| {
        Err(Problem::new(
            text.file_span(node.span.clone()),
            Mistake::ExprType { message },
        ))
    };
    let file = |s: &Sp<String>| Sp::new(s.value.clone(), text.file_span(s.span.clone()));
    Ok(match &n.kind {
        Kind::Num(v) => (Expr::Num(*v), Ty::Num),
        Kind::Qty(v, unit) => (Expr::Qty(*v, unit), Ty::Num),
        Kind::Name(name) => {
            refs.push(NameRef {
                name: file(name),
                arg: None,
                variant: None,
            });
            (Expr::Var(name.value.clone()), Ty::Num)
        }
        Kind::Metric(name, arg) => {
            refs.push(NameRef {
                name: file(name),
                arg: Some(file(arg)),
                variant: None,
            });
            let expr = Expr::Metric {
                name: name.value.clone(),
                arg: arg.value.clone(),
            };
            (expr, Ty::Num)
        }
        Kind::InVariant(inner, variant) => {
            // The parser puts `in variant` only after a name or a metric call,
            // whose reference was the last one pushed.
            let (e, ty) = lower(inner, text, refs)?;
            if let Some(r) = refs.last_mut() {
                r.variant = Some(file(variant));
            }
            (Expr::InVariant(Box::new(e), variant.value.clone()), ty)
        }
        Kind::Neg(e) => match lower(e, text, refs)? {
            (e, Ty::Num) => (Expr::Neg(Box::new(e)), Ty::Num),
            _ => return fail(e, "`-` needs a number, not a comparison"),
        },
        Kind::Not(e) => match lower(e, text, refs)? {
            (e, Ty::Bool) => (Expr::Not(Box::new(e)), Ty::Bool),
            _ => return fail(e, "`not` needs a comparison after it"),
        },
        Kind::Bin(op, l, r) => {
            let (le, lt) = lower(l, text, refs)?;
            let (re, rt) = lower(r, text, refs)?;
            let (want, out, message) = match op {
                BinOp::And | BinOp::Or => (
                    Ty::Bool,
                    Ty::Bool,
                    "`and`/`or` join comparisons such as `a < b`",
                ),
                BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div => (
                    Ty::Num,
                    Ty::Num,
                    "arithmetic needs numbers, not comparisons",
                ),
                _ => (
                    Ty::Num,
                    Ty::Bool,
                    "a comparison needs numbers on both sides; join comparisons with `and`/`or`",
                ),
            };
            if lt != want {
                return fail(l, message);
            }
            if rt != want {
                return fail(r, message);
            }
            if *op == BinOp::Div && matches!(re, Expr::Num(z) | Expr::Qty(z, _) if z == 0.0) {
                return fail(r, "division by zero: the claim could never be judged");
            }
            (Expr::Bin(*op, Box::new(le), Box::new(re)), out)
        }
    })
}

const KEYWORDS: &[&str] = &["and", "or", "not", "in"];

fn keyword<'a>(
    word: &'static str,
) -> impl Parser<In<'a>, &'a str, winnow::error::ErrMode<winnow::error::ContextError>> {
    terminated(
        word,
        not(one_of(|c: char| c.is_ascii_alphanumeric() || c == '_')),
    )
}

fn bin(op: BinOp, l: Node, r: Node) -> Node {
    Node {
        span: l.span.start..r.span.end,
        kind: Kind::Bin(op, Box::new(l), Box::new(r)),
    }
}

fn fold(first: Node, rest: Vec<(BinOp, Node)>) -> Node {
    rest.into_iter().fold(first, |l, (op, r)| bin(op, l, r))
}

fn or_expr(i: &mut In<'_>) -> ModalResult<Node> {
    let first = and_expr(i)?;
    let rest = repeat(
        0..,
        preceded(
            (space0, keyword("or"), space0),
            cut_err(and_expr).context(expected("a comparison")),
        )
        .map(|r| (BinOp::Or, r)),
    )
    .parse_next(i)?;
    Ok(fold(first, rest))
}

fn and_expr(i: &mut In<'_>) -> ModalResult<Node> {
    let first = not_expr(i)?;
    let rest = repeat(
        0..,
        preceded(
            (space0, keyword("and"), space0),
            cut_err(not_expr).context(expected("a comparison")),
        )
        .map(|r| (BinOp::And, r)),
    )
    .parse_next(i)?;
    Ok(fold(first, rest))
}

fn not_expr(i: &mut In<'_>) -> ModalResult<Node> {
    alt((
        (
            keyword("not").span(),
            preceded(space0, cut_err(not_expr).context(expected("a comparison"))),
        )
            .map(|(kw, e)| Node {
                span: kw.start..e.span.end,
                kind: Kind::Not(Box::new(e)),
            }),
        cmp_expr,
    ))
    .parse_next(i)
}

fn cmp_op(i: &mut In<'_>) -> ModalResult<BinOp> {
    alt((
        "<=".value(BinOp::Le),
        ">=".value(BinOp::Ge),
        "==".value(BinOp::Eq),
        "!=".value(BinOp::Ne),
        "<".value(BinOp::Lt),
        ">".value(BinOp::Gt),
    ))
    .parse_next(i)
}

fn cmp_expr(i: &mut In<'_>) -> ModalResult<Node> {
    let l = add_expr(i)?;
    let r = opt((
        preceded(space0, cmp_op),
        preceded(
            space0,
            cut_err(add_expr).context(expected("a number or a name")),
        ),
    ))
    .parse_next(i)?;
    Ok(match r {
        Some((op, r)) => bin(op, l, r),
        None => l,
    })
}

fn add_expr(i: &mut In<'_>) -> ModalResult<Node> {
    let first = mul_expr(i)?;
    let op = alt(('+'.value(BinOp::Add), '-'.value(BinOp::Sub)));
    let rest = repeat(
        0..,
        (
            preceded(space0, op),
            preceded(
                space0,
                cut_err(mul_expr).context(expected("a number or a name")),
            ),
        ),
    )
    .parse_next(i)?;
    Ok(fold(first, rest))
}

fn mul_expr(i: &mut In<'_>) -> ModalResult<Node> {
    let first = unary(i)?;
    let op = alt(('*'.value(BinOp::Mul), '/'.value(BinOp::Div)));
    let rest = repeat(
        0..,
        (
            preceded(space0, op),
            preceded(
                space0,
                cut_err(unary).context(expected("a number or a name")),
            ),
        ),
    )
    .parse_next(i)?;
    Ok(fold(first, rest))
}

fn unary(i: &mut In<'_>) -> ModalResult<Node> {
    alt((
        (
            '-'.span(),
            preceded(
                space0,
                cut_err(unary).context(expected("a number or a name")),
            ),
        )
            .map(|(minus, e)| Node {
                span: minus.start..e.span.end,
                kind: Kind::Neg(Box::new(e)),
            }),
        atom,
    ))
    .parse_next(i)
}

fn atom(i: &mut In<'_>) -> ModalResult<Node> {
    alt((
        (
            number,
            // `5 ms`, `1 s`, `64 MiB`: a unit, as script lines write them.
            opt(preceded(
                space0,
                take_while(1.., |c: char| c.is_ascii_alphabetic() || c == 'µ')
                    .verify_map(|u: &str| crate::expr::claim_unit(u)),
            )),
        )
            .with_span()
            .map(|((v, unit), span)| Node {
                span,
                kind: match unit {
                    Some((factor, unit)) => Kind::Qty(v * factor, unit),
                    None => Kind::Num(v),
                },
            }),
        named,
        (
            '(',
            delimited(space0, cut_err(or_expr), space0),
            cut_err(')').context(expected("`)`")),
        )
            .with_span()
            .map(|((_, e, _), span)| Node { span, ..e }),
    ))
    .context(expected("a number, a name or `(`"))
    .parse_next(i)
}

/// A parameter, an argument-less metric or a metric call, and what follows
/// it: `in variant NAME` measures it in that variant. A variant name is a slug
/// (`after-event-sync`), so it runs to the next character that cannot be in
/// one: a minus right after it is part of the name (subtract with spaces:
/// `… in variant a - 1`).
fn named(i: &mut In<'_>) -> ModalResult<Node> {
    let node = (
        ident.verify(|s: &Sp<String>| !KEYWORDS.contains(&s.value.as_str())),
        opt(preceded(
            (space0, '(', space0),
            cut_err(terminated(
                ident.context(expected("a tag or object kind")),
                (space0, cut_err(')').context(expected("`)`"))),
            )),
        )),
    )
        .with_span()
        .map(|((name, arg), span)| Node {
            span,
            kind: match arg {
                Some(arg) => Kind::Metric(name, arg),
                None => Kind::Name(name),
            },
        })
        .parse_next(i)?;
    let variant = opt(preceded(
        (space1, keyword("in"), space1),
        cut_err(preceded(
            (keyword("variant"), space1).context(expected("`variant` after `in`")),
            take_while(1.., |c: char| {
                c.is_ascii_alphanumeric() || c == '_' || c == '-'
            })
            .with_span()
            .map(|(s, span): (&str, Span)| Sp::new(s.to_owned(), span))
            .context(expected("a variant name")),
        )),
    ))
    .parse_next(i)?;
    Ok(match variant {
        Some(v) => Node {
            span: node.span.start..v.span.end,
            kind: Kind::InVariant(Box::new(node), v),
        },
        None => node,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Expr {
        parse_expr(&RawText::for_tests(s)).unwrap().expr
    }

    fn e(s: &str) -> Problem {
        parse_expr(&RawText::for_tests(s)).unwrap_err()
    }

    fn num(v: f64) -> Box<Expr> {
        Box::new(Expr::Num(v))
    }

    fn var(v: &str) -> Box<Expr> {
        Box::new(Expr::Var(v.into()))
    }

    /// #50: a number in a claim may carry a unit, as script lines do; it is
    /// held in the unit its kind's metrics are in, and a word that is no unit
    /// is still a mistake.
    #[test]
    fn numbers_carry_units() {
        assert_eq!(
            p("host_ms(release) < 5 ms"),
            Expr::Bin(
                BinOp::Lt,
                Box::new(Expr::Metric {
                    name: "host_ms".into(),
                    arg: "release".into()
                }),
                Box::new(Expr::Qty(5.0, "ms"))
            )
        );
        let Expr::Bin(_, _, r) = p("x > 1.5 s") else {
            panic!()
        };
        assert_eq!(*r, Expr::Qty(1500.0, "ms"));
        let Expr::Bin(_, _, r) = p("x > 512KiB") else {
            panic!()
        };
        assert_eq!(*r, Expr::Qty(0.5, "MiB"));
        let Expr::Bin(_, _, r) = p("x > 250 us and y < 2 GiB") else {
            panic!()
        };
        assert!(matches!(*r, Expr::Bin(BinOp::Lt, _, ref q) if **q == Expr::Qty(2048.0, "MiB")));
        assert!(matches!(p("x > 5 and y < 1"), Expr::Bin(BinOp::And, ..)));
        e("x > 5 parsecs");
        e("x > 5 ms / 0 s");
    }

    #[test]
    fn precedence_and_associativity() {
        // 1 + 2 * 3 - 4 < x  ==  ((1 + (2*3)) - 4) < x
        let got = p("1 + 2 * 3 - 4 < x");
        let want = Expr::Bin(
            BinOp::Lt,
            Box::new(Expr::Bin(
                BinOp::Sub,
                Box::new(Expr::Bin(
                    BinOp::Add,
                    num(1.0),
                    Box::new(Expr::Bin(BinOp::Mul, num(2.0), num(3.0))),
                )),
                num(4.0),
            )),
            var("x"),
        );
        assert_eq!(got, want);
        // `and` binds tighter than `or`, `not` looser than a comparison.
        let got = p("a < 1 or not b > 2 and c == 3");
        let Expr::Bin(BinOp::Or, _, r) = got else {
            panic!("{got:?}")
        };
        let Expr::Bin(BinOp::And, l, _) = *r else {
            panic!()
        };
        assert!(matches!(*l, Expr::Not(ref inner) if matches!(**inner, Expr::Bin(BinOp::Gt, ..))));
    }

    #[test]
    fn metrics_negation_and_parentheses() {
        let got = p("-(host_ms( release ) - 1) / 2 >= live(events)");
        let Expr::Bin(BinOp::Ge, l, r) = got else {
            panic!()
        };
        assert!(matches!(*l, Expr::Bin(BinOp::Div, ref n, _) if matches!(**n, Expr::Neg(_))));
        assert_eq!(
            *r,
            Expr::Metric {
                name: "live".into(),
                arg: "events".into()
            }
        );
        let parsed = parse_expr(&RawText::for_tests("host_ms(release) < 0.2 * kernel_ms")).unwrap();
        assert_eq!(parsed.refs.len(), 2);
        assert_eq!(parsed.refs[0].name.span, 0..7);
        assert_eq!(
            parsed.refs[0].arg.as_ref().map(|a| a.span.clone()),
            Some(8..15)
        );
        assert_eq!(parsed.refs[1].name.value, "kernel_ms");
        // `order` and `notes` are names, not keywords.
        assert!(matches!(p("order < notes"), Expr::Bin(BinOp::Lt, ..)));
    }

    #[test]
    fn syntax_errors_point_at_the_column() {
        let x = e("host_ms(release) < ");
        assert_eq!(x.span, 19..19);
        assert!(matches!(x.mistake, Mistake::ExprSyntax { ref found, .. } if found == "the end"));
        let x = e("host_ms(release < 1");
        assert!(matches!(x.mistake, Mistake::ExprSyntax { ref expected, .. } if expected == "`)`"));
        let x = e("a < b < c");
        assert_eq!(x.span, 6..7);
        let x = e("a << b");
        assert_eq!(x.span, 3..4);
        let x = e("(a < b");
        assert!(matches!(x.mistake, Mistake::ExprSyntax { ref expected, .. } if expected == "`)`"));
        assert!(matches!(e("").mistake, Mistake::ExprSyntax { .. }));
    }

    #[test]
    fn types_must_fit() {
        assert!(matches!(
            e("host_ms(x) * 2").mistake,
            Mistake::ExprType { .. }
        ));
        assert!(matches!(e("a and b < 1").mistake, Mistake::ExprType { .. }));
        assert!(matches!(
            e("(a < 1) + 2 > 0").mistake,
            Mistake::ExprType { .. }
        ));
        assert!(matches!(e("not a").mistake, Mistake::ExprType { .. }));
        assert_eq!(e("1 < 2 and 3").span, 10..11);
    }

    #[test]
    fn in_variant_binds_to_the_one_metric_before_it() {
        let m = |name: &str, arg: &str| {
            Box::new(Expr::Metric {
                name: name.into(),
                arg: arg.into(),
            })
        };
        let got = p("host_ms(free) > 10 * host_ms(free) in variant after-event-sync");
        let want = Expr::Bin(
            BinOp::Gt,
            m("host_ms", "free"),
            Box::new(Expr::Bin(
                BinOp::Mul,
                num(10.0),
                Box::new(Expr::InVariant(
                    m("host_ms", "free"),
                    "after-event-sync".into(),
                )),
            )),
        );
        assert_eq!(got, want);
        assert_eq!(got.other_variants(), ["after-event-sync"]);
        // The name ends at a space: a minus after one is subtraction.
        let got = p("bytes_live_mib in variant a - 1 > 0");
        let Expr::Bin(BinOp::Gt, l, _) = got else {
            panic!("{got:?}")
        };
        assert!(
            matches!(*l, Expr::Bin(BinOp::Sub, ref v, _) if matches!(**v, Expr::InVariant(ref x, ref name) if name == "a" && **x == Expr::Var("bytes_live_mib".into()))),
            "{l:?}"
        );
        let parsed = parse_expr(&RawText::for_tests(
            "host_ms(x) < host_ms( x ) in variant  v2",
        ))
        .unwrap();
        assert_eq!(parsed.refs[0].variant, None);
        let v = parsed.refs[1].variant.as_ref().unwrap();
        assert_eq!((v.value.as_str(), v.span.clone()), ("v2", 38..40));
        assert_eq!(
            p("host_ms(x) < host_ms(x) in variant v2").to_string(),
            "host_ms(x) < host_ms(x) in variant v2"
        );
    }

    #[test]
    fn in_variant_needs_its_words_and_a_name() {
        let x = e("host_ms(x) in sync > 1");
        assert_eq!(x.span, 14..18);
        assert!(
            matches!(x.mistake, Mistake::ExprSyntax { ref expected, .. } if expected == "`variant` after `in`"),
            "{x:?}"
        );
        let x = e("host_ms(x) in variant > 1");
        assert!(
            matches!(x.mistake, Mistake::ExprSyntax { ref expected, .. } if expected == "a variant name"),
            "{x:?}"
        );
        // It follows one metric, not a group: the reader could not tell what
        // else it measures.
        let x = e("(host_ms(x) + 1) in variant v > 1");
        assert_eq!(x.span, 17..19);
        assert!(matches!(e("in < 1").mistake, Mistake::ExprSyntax { .. }));
    }

    /// Deep or long claims get a clear error, never a stack overflow; one at the
    /// limit still parses, on a test thread's small stack and without optimisation.
    #[test]
    fn claims_past_the_operator_limit_are_refused_and_one_at_it_parses() {
        let n = MAX_EXPR_OPERATORS - 1; // parentheses, plus the one `<`
        let at_limit = format!("{}1{} < 2", "(".repeat(n), ")".repeat(n));
        assert!(matches!(p(&at_limit), Expr::Bin(BinOp::Lt, _, _)));
        for long in [
            format!("{}1{} < 2", "(".repeat(1500), ")".repeat(1500)),
            format!("{}1 < 2", "not ".repeat(10_000)),
            format!("{} > 2", vec!["1"; 30_000].join(" + ")),
            format!("{} > 2", vec!["a < 1"; 30_000].join(" and ")),
        ] {
            assert_eq!(
                e(&long).mistake,
                Mistake::ExprTooLong {
                    limit: MAX_EXPR_OPERATORS
                }
            );
        }
        // A literal zero divisor is refused; a parameter that may be 0 is the
        // verdict's to judge (inconclusive), not the parser's.
        for zero in ["1 / 0 < 2", "0/0 < 1", "x / 0.0 > 1"] {
            assert!(
                matches!(e(zero).mistake, Mistake::ExprType { message } if message.starts_with("division by zero")),
                "{zero}"
            );
        }
        assert!(matches!(p("1 / x < 2"), Expr::Bin(BinOp::Lt, _, _)));
        // Words that merely contain `or`/`and`/`not` are names, not operators.
        assert_eq!(past_operator_limit(&"order_notes_band ".repeat(1000)), None);
    }
}
