//! Phase two: a `RawLab` becomes a `Lab` the engine can trust, or the first
//! `Problem` in it. Header, parameters and claims are checked here; each variant's
//! script goes through `simulate`.

use std::collections::BTreeMap;

use super::api::ObjKind;
use super::claim_parse::{NameRef, ParsedExpr, parse_expr};
use super::diagnostic::line_col;
use super::expr::{self, METRICS, MetricArg};
use super::mistake::{Mistake, Problem, Span};
use super::model::{
    BackendKind, Claim, Lab, Origin, Param, ParamUnit, Stmt, StmtKind, Teaching, Unit, Variant,
};
use super::raw::{RawClaim, RawExpect, RawLab, RawParam, RawText, RawVariant, Sp};
use super::script::parse_script;
use super::simulate::Simulator;
use super::suggest;
use gpulab_events::Expected;

type Res<T> = Result<T, Problem>;

/// Tags one variant names, each with its line.
type Tags = BTreeMap<String, u32>;

const NAME_RULE: &str = "may only hold lower-case letters, digits and `-`";
const PARAM_RULE: &str =
    "must start with a lower-case letter and hold only lower-case letters, digits and `_`";

pub(crate) fn is_slug(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

fn is_param_name(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_lowercase())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Validates a raw lab read from `text`.
/// Every mistake is reported, not only the first: each parameter, each
/// variant and each claim is checked on its own. A variant's script stops at
/// its first mistake (what follows depends on it); variants are checked only
/// when the header and parameters they use were good, and claims only when the
/// variants were, so no mistake is a mere echo of another.
pub fn lab(raw: RawLab, text: &str, origin: Origin) -> Result<Lab, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut keep = |r: Res<()>| {
        if let Err(p) = r {
            problems.push(p);
        }
    };
    let backend = header(&raw);
    let params = params(raw.params, text, &mut keep);
    let Ok(backend) = backend.map_err(|p| problems.push(p)) else {
        return Err(problems);
    };
    // Scripts name the parameters: with one missing, they would only echo it.
    if !problems.is_empty() {
        return Err(problems);
    }
    let (variants, tags) = variants(
        &raw.variants,
        raw.variants_span,
        text,
        backend,
        &params,
        &mut problems,
    );
    if !problems.is_empty() {
        return Err(problems);
    }
    let claims = claims(raw.claims, text, &params, &variants, &tags, &mut problems);
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(Lab {
        id: raw.id.value,
        title: raw.title.value,
        backend,
        claim: raw.claim.value,
        teaching: Teaching {
            look: raw.look,
            why: raw.why,
            instead: raw.instead,
        },
        params,
        variants,
        claims,
        origin,
    })
}

/// Line in `text` where `span` starts.
fn line_of(text: &str, span: &Span) -> u32 {
    line_col(text, span.start).0
}

/// Checks the id, title and claim, and reads the backend.
fn header(raw: &RawLab) -> Res<BackendKind> {
    if !is_slug(&raw.id.value) {
        return Err(Problem::new(
            raw.id.span.clone(),
            Mistake::BadId {
                what: "lab",
                id: raw.id.value.clone(),
            },
        ));
    }
    one_line(&raw.title, "title")?;
    let backend = match raw.backend.value.as_str() {
        "opencl" => BackendKind::OpenCl,
        "cuda" => BackendKind::Cuda,
        other => {
            return Err(Problem::new(
                raw.backend.span.clone(),
                Mistake::UnknownBackend {
                    name: other.to_owned(),
                    suggestion: suggest::nearest(other, ["opencl", "cuda"]),
                },
            ));
        }
    };
    one_line(&raw.claim, "claim")?;
    Ok(backend)
}

/// The good parameters; each bad one goes to `problem`.
fn params(raw: Vec<RawParam>, text: &str, problem: &mut impl FnMut(Res<()>)) -> Vec<Param> {
    let mut params = Vec::new();
    let mut seen = BTreeMap::new();
    for p in raw {
        match param(p, &mut seen, text) {
            Ok(p) => params.push(p),
            Err(e) => problem(Err(e)),
        }
    }
    params
}

/// Checks one parameter's name and range; `seen` holds the names before it.
/// The largest magnitude a parameter's default or bounds may have: beyond any
/// size, count or duration a lab can use, and far from where f64 arithmetic on it
/// (times a unit, times iterations) stops being exact enough to judge by.
pub const MAX_PARAM_VALUE: f64 = 1e12;

fn param(p: RawParam, seen: &mut BTreeMap<String, u32>, text: &str) -> Res<Param> {
    let name = &p.name;
    if !is_param_name(&name.value) {
        return Err(bad_name(name, "parameter", PARAM_RULE));
    }
    unique(seen, name, "parameter", line_of(text, &name.span))?;
    // `iterations` (a parameter) and `iterations(loop)` (a metric) read apart;
    // a parameter named like an argument-less metric would not.
    if expr::metric(&name.value).is_some_and(|m| m.arg == MetricArg::None) {
        return Err(Problem::new(
            name.span.clone(),
            Mistake::ParamIsMetric {
                name: name.value.clone(),
            },
        ));
    }
    for v in [&p.default, &p.min, &p.max] {
        if !v.value.is_finite() || v.value.abs() > MAX_PARAM_VALUE {
            return Err(Problem::new(
                v.span.clone(),
                Mistake::ParamTooLarge {
                    name: name.value.clone(),
                    value: v.value,
                    limit: MAX_PARAM_VALUE,
                },
            ));
        }
    }
    if p.min.value > p.max.value {
        return Err(Problem::new(
            p.max.span,
            Mistake::MinAboveMax {
                name: name.value.clone(),
                min: p.min.value,
                max: p.max.value,
            },
        ));
    }
    if !(p.min.value..=p.max.value).contains(&p.default.value) {
        return Err(Problem::new(
            p.default.span,
            Mistake::DefaultOutOfRange {
                name: name.value.clone(),
                default: p.default.value,
                min: p.min.value,
                max: p.max.value,
            },
        ));
    }
    // A unit scripts write (then a script's quantity and the parameter's
    // are compared), or what the parameter counts; a misspelt unit (`MB`,
    // `msec`) is a mistake, not a count.
    let unit = match &p.unit {
        Some(u) if !u.value.is_empty() => match Unit::parse(&u.value) {
            Some(unit) => ParamUnit::Script(unit),
            None => match crate::lower::unit_suggestion(&u.value) {
                Some(suggestion) => {
                    return Err(Problem::new(
                        u.span.clone(),
                        Mistake::UnknownUnit {
                            unit: u.value.clone(),
                            suggestion: Some(suggestion),
                        },
                    ));
                }
                None => ParamUnit::Count(u.value.clone()),
            },
        },
        _ => ParamUnit::None,
    };
    Ok(Param {
        name: p.name.value,
        default: p.default.value,
        min: p.min.value,
        max: p.max.value,
        unit,
        help: p.help,
    })
}

/// Checks each variant's name and simulates its script; returns the variants and
/// their tags, in the same order.
/// The good variants and their tags; each bad one's mistakes go to
/// `problems` (a script's lines that bind nothing are each checked, up to ten
/// mistakes).
fn variants(
    raw: &[RawVariant],
    variants_span: Span,
    text: &str,
    backend: BackendKind,
    params: &[Param],
    problems: &mut Vec<Problem>,
) -> (Vec<Variant>, Vec<Tags>) {
    if raw.is_empty() {
        problems.push(Problem::new(variants_span, Mistake::NoVariants));
    }
    let mut variants = Vec::new();
    let mut tags = Vec::new();
    let mut seen = BTreeMap::new();
    for v in raw {
        match variant(v, &mut seen, text, backend, params) {
            Ok((variant, t)) => {
                variants.push(variant);
                tags.push(t);
            }
            Err(ps) => problems.extend(ps),
        }
    }
    (variants, tags)
}

fn variant(
    v: &RawVariant,
    seen: &mut BTreeMap<String, u32>,
    text: &str,
    backend: BackendKind,
    params: &[Param],
) -> Result<(Variant, Tags), Vec<Problem>> {
    let one = |p: Problem| vec![p];
    if !is_slug(&v.name.value) {
        return Err(one(bad_name(&v.name, "variant", NAME_RULE)));
    }
    unique(seen, &v.name, "variant", line_of(text, &v.name.span)).map_err(one)?;
    let stmts = parse_script(&v.script).map_err(one)?;
    if stmts.is_empty() {
        return Err(one(Problem::new(
            v.script.span.clone(),
            Mistake::EmptyScript {
                variant: v.name.value.clone(),
            },
        )));
    }
    let checked = Simulator::new(text, backend, params).run(&stmts)?;
    Ok((
        Variant {
            name: v.name.value.clone(),
            description: v.description.clone(),
            script: checked.script,
        },
        checked.tags,
    ))
}

/// Checks each claim's name, the variants it names and the names in its expressions.
/// The good claims; each bad one's mistake goes to `problems`.
fn claims(
    raw: Vec<RawClaim>,
    text: &str,
    params: &[Param],
    variants: &[Variant],
    tags: &[Tags],
    problems: &mut Vec<Problem>,
) -> Vec<Claim> {
    let mut claims = Vec::new();
    let mut seen = BTreeMap::new();
    for c in raw {
        match claim(c, &mut seen, text, params, variants, tags) {
            Ok(c) => claims.push(c),
            Err(p) => problems.push(p),
        }
    }
    claims
}

fn claim(
    c: RawClaim,
    seen: &mut BTreeMap<String, u32>,
    text: &str,
    params: &[Param],
    variants: &[Variant],
    tags: &[Tags],
) -> Res<Claim> {
    if !is_slug(&c.name.value) {
        return Err(bad_name(&c.name, "claim", NAME_RULE));
    }
    unique(seen, &c.name, "claim", line_of(text, &c.name.span))?;
    let names = claim_variants(c.variants.as_deref(), variants)?;
    let scope = Scope {
        params,
        variants,
        tags,
        applies: &names,
    };
    let expr = scope.expr(&c.expr)?;
    let requires = c.requires.as_ref().map(|r| scope.expr(r)).transpose()?;
    let unit = |name: &str| {
        params
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.unit.as_str().to_string())
    };
    for (parsed, raw) in std::iter::once((&expr, &c.expr)).chain(requires.iter().zip(&c.requires)) {
        if let Some(m) = expr::mixed_units(&parsed.expr, &unit) {
            return Err(Problem::new(
                raw.span.clone(),
                Mistake::MixedUnits {
                    left: m.left,
                    left_unit: m.left_unit,
                    right: m.right,
                    right_unit: m.right_unit,
                },
            ));
        }
    }
    let expect = expectations(c.expect.as_ref(), &names, variants)?;
    Ok(Claim {
        name: c.name.value,
        text: c.text,
        expr: expr.expr,
        expr_src: c.expr.value,
        requires: requires.map(|r| r.expr),
        requires_src: c.requires.map(|r| r.value),
        variants: names,
        expect,
    })
}

/// A claim's `expect`, one outcome per variant it names: each a variant of the
/// lab that the claim applies to, each outcome `holds`, `does not hold` or
/// `either`.
fn expectations(
    raw: Option<&RawExpect>,
    applies: &[String],
    variants: &[Variant],
) -> Res<BTreeMap<String, Expected>> {
    let applies_to = |v: &str| applies.is_empty() || applies.iter().any(|a| a == v);
    let mut out = BTreeMap::new();
    match raw {
        None => {}
        Some(RawExpect::Every(outcome)) => {
            let outcome = expected_outcome(outcome)?;
            for v in variants.iter().filter(|v| applies_to(&v.name)) {
                out.insert(v.name.clone(), outcome);
            }
        }
        Some(RawExpect::PerVariant(pairs)) => {
            for (variant, outcome) in pairs {
                claim_variants(Some(std::slice::from_ref(variant)), variants)?;
                if !applies_to(&variant.value) {
                    return Err(Problem::new(
                        variant.span.clone(),
                        Mistake::ExpectOutsideClaim {
                            variant: variant.value.clone(),
                            applies: applies
                                .iter()
                                .map(|a| format!("`{a}`"))
                                .collect::<Vec<_>>()
                                .join(", "),
                        },
                    ));
                }
                out.insert(variant.value.clone(), expected_outcome(outcome)?);
            }
        }
    }
    Ok(out)
}

fn expected_outcome(s: &Sp<String>) -> Res<Expected> {
    match s.value.as_str() {
        "holds" => Ok(Expected::Holds),
        // As the text says it, or as the JSON and `--fail-on` spell it.
        "does not hold" | "does_not_hold" => Ok(Expected::DoesNotHold),
        // The lesson teaches that implementations differ.
        "either" => Ok(Expected::Either),
        other => Err(Problem::new(
            s.span.clone(),
            Mistake::BadExpect {
                found: other.to_owned(),
            },
        )),
    }
}

/// The variants a claim names, each checked to exist; empty when it names none.
fn claim_variants(list: Option<&[Sp<String>]>, variants: &[Variant]) -> Res<Vec<String>> {
    let Some(list) = list else {
        return Ok(Vec::new());
    };
    for v in list {
        if !variants.iter().any(|x| x.name == v.value) {
            let known = variants.iter().map(|x| x.name.as_str());
            return Err(Problem::new(
                v.span.clone(),
                Mistake::UnknownVariant {
                    name: v.value.clone(),
                    suggestion: suggest::nearest(&v.value, known).map(str::to_owned),
                },
            ));
        }
    }
    Ok(list.iter().map(|v| v.value.clone()).collect())
}

fn one_line(s: &Sp<String>, key: &'static str) -> Res<()> {
    if s.value.trim().is_empty() {
        return Err(Problem::new(s.span.clone(), Mistake::Empty { key }));
    }
    if s.value.contains('\n') {
        return Err(Problem::new(s.span.clone(), Mistake::MultiLine { key }));
    }
    Ok(())
}

fn bad_name(name: &Sp<String>, what: &'static str, rule: &'static str) -> Problem {
    Problem::new(
        name.span.clone(),
        Mistake::BadName {
            what,
            name: name.value.clone(),
            rule,
        },
    )
}

fn unique(
    seen: &mut BTreeMap<String, u32>,
    name: &Sp<String>,
    what: &'static str,
    line: u32,
) -> Res<()> {
    if let Some(&first_line) = seen.get(&name.value) {
        return Err(Problem::new(
            name.span.clone(),
            Mistake::Duplicate {
                what,
                name: name.value.clone(),
                first_line,
            },
        ));
    }
    seen.insert(name.value.clone(), line);
    Ok(())
}

/// What a claim's names may refer to.
struct Scope<'a> {
    params: &'a [Param],
    variants: &'a [Variant],
    /// Tags of each variant, in the order of `variants`.
    tags: &'a [Tags],
    /// Variants the claim applies to; all when empty.
    applies: &'a [String],
}

impl Scope<'_> {
    fn expr(&self, text: &RawText) -> Res<ParsedExpr> {
        let parsed = parse_expr(text)?;
        // Which variants the claim compares comes first: a claim that compares a
        // variant with itself would otherwise report a tag missing there.
        for r in &parsed.refs {
            self.compared(r)?;
        }
        for r in &parsed.refs {
            self.name(r)?;
        }
        Ok(parsed)
    }

    /// Checks `… in variant NAME`: a variant of the lab that the claim does not
    /// apply to (comparing a variant with itself says nothing). The tags and
    /// variants the name is checked against: that variant's alone, when given.
    fn compared(&self, r: &NameRef) -> Res<Option<String>> {
        let Some(v) = &r.variant else {
            return Ok(None);
        };
        let known = || self.variants.iter().map(|x| x.name.as_str());
        if !known().any(|x| x == v.value) {
            return Err(Problem::new(
                v.span.clone(),
                Mistake::UnknownVariant {
                    name: v.value.clone(),
                    suggestion: suggest::nearest(&v.value, known()).map(str::to_owned),
                },
            ));
        }
        if self.applies.is_empty() || self.applies.contains(&v.value) {
            let others: Vec<String> = known()
                .filter(|x| {
                    *x != v.value
                        && (self.applies.is_empty() || self.applies.iter().any(|a| a == x))
                })
                .map(|x| format!("\"{x}\""))
                .collect();
            return Err(Problem::new(
                v.span.clone(),
                Mistake::ComparesWithItself {
                    variant: v.value.clone(),
                    others: others.join(", "),
                },
            ));
        }
        if r.arg.is_none() && self.params.iter().any(|p| p.name == r.name.value) {
            return Err(Problem::new(
                r.name.span.start..v.span.end,
                Mistake::ParamInVariant {
                    name: r.name.value.clone(),
                },
            ));
        }
        Ok(Some(v.value.clone()))
    }

    fn name(&self, r: &NameRef) -> Res<()> {
        let compared = self.compared(r)?;
        let name = &r.name;
        let Some(arg) = &r.arg else {
            if self.params.iter().any(|p| p.name == name.value) {
                return Ok(());
            }
            return match expr::metric(&name.value) {
                Some(m) if m.arg == MetricArg::None => Ok(()),
                Some(m) => Err(Problem::new(
                    name.span.clone(),
                    Mistake::MetricNeedsArg {
                        name: m.name,
                        arg: if m.arg == MetricArg::Tag {
                            "a tag"
                        } else {
                            "an object kind"
                        },
                    },
                )),
                None => {
                    let known = self
                        .params
                        .iter()
                        .map(|p| p.name.as_str())
                        .chain(METRICS.iter().map(|m| m.name));
                    Err(Problem::new(
                        name.span.clone(),
                        Mistake::BareVariable {
                            name: name.value.clone(),
                            suggestion: suggest::nearest(&name.value, known).map(str::to_owned),
                        },
                    ))
                }
            };
        };
        let Some(m) = expr::metric(&name.value) else {
            return Err(Problem::new(
                name.span.clone(),
                Mistake::UnknownMetric {
                    name: name.value.clone(),
                    suggestion: suggest::nearest(&name.value, METRICS.iter().map(|m| m.name)),
                },
            ));
        };
        match m.arg {
            MetricArg::None => Err(Problem::new(
                name.span.start..arg.span.end + 1,
                Mistake::MetricTakesNoArg { name: m.name },
            )),
            MetricArg::Kind => match ObjKind::from_plural(&arg.value) {
                Some(_) => Ok(()),
                None => Err(Problem::new(
                    arg.span.clone(),
                    Mistake::UnknownKind {
                        kind: arg.value.clone(),
                    },
                )),
            },
            MetricArg::Tag => {
                for (v, tags) in self.variants.iter().zip(self.tags) {
                    let applies = match &compared {
                        Some(other) => v.name == *other,
                        None => self.applies.is_empty() || self.applies.contains(&v.name),
                    };
                    if applies && !tags.contains_key(&arg.value) {
                        return Err(Problem::new(
                            arg.span.clone(),
                            Mistake::TagNotInVariant {
                                tag: arg.value.clone(),
                                variant: v.name.clone(),
                                suggestion: suggest::nearest(
                                    &arg.value,
                                    tags.keys().map(String::as_str),
                                )
                                .map(str::to_owned),
                            },
                        ));
                    }
                    if applies && let Some(problem) = reads_nothing(m.name, arg, &v.script) {
                        return Err(problem);
                    }
                }
                Ok(())
            }
        }
    }
}

/// A metric that reads what a call answered (`pattern`, `complete`, …) on a
/// tag whose line answers nothing it reads: said at the tag.
fn reads_nothing(metric: &'static str, tag: &Sp<String>, script: &[Stmt]) -> Option<Problem> {
    let readers = crate::api::answered_by(metric);
    if readers.is_empty() {
        return None;
    }
    let stmt = tagged(script, &tag.value)?;
    let (line_is, answers) = match &stmt.kind {
        StmtKind::Call { api, .. } => (
            api.name(),
            api.returns().is_some_and(|r| r.metric() == metric),
        ),
        StmtKind::Verify { .. } => ("verify", metric == "pattern"),
        StmtKind::Repeat { .. } => ("repeat", false),
        StmtKind::Sleep { .. } => ("sleep", false),
        StmtKind::Mark { .. } => ("mark", false),
        StmtKind::Forget { .. } => ("forget", false),
    };
    let reads = readers.join("`, `");
    (!answers).then(|| {
        Problem::new(
            tag.span.clone(),
            Mistake::MetricReadsNothing {
                metric,
                tag: tag.value.clone(),
                line_is,
                reads,
            },
        )
    })
}

/// The statement a tag names, inside `repeat` blocks too.
fn tagged<'s>(script: &'s [Stmt], tag: &str) -> Option<&'s Stmt> {
    script.iter().find_map(|s| match &s.kind {
        _ if s.tag.as_deref() == Some(tag) => Some(s),
        StmtKind::Repeat { body, .. } => tagged(body, tag),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Api;
    use crate::model::{Arg, Number, StmtKind, Unit};
    use crate::raw;

    const HEAD: &str = "id = \"t\"\ntitle = \"t\"\nbackend = \"opencl\"\nclaim = \"c\"\n\
        [teaching]\nlook = \"l\"\nwhy = \"w\"\ninstead = \"i\"\n\
        [[params]]\nname = \"n\"\ndefault = 3\nmin = 1\nmax = 10\n";

    fn check(script: &str, claims: &str) -> Res<Lab> {
        let text =
            format!("{HEAD}[[variants]]\nname = \"v\"\nscript = '''\n{script}\n'''\n{claims}");
        let raw = raw::read(&text)?;
        first(lab(raw, &text, Origin::Builtin))
    }

    /// A parameter's unit is one scripts write, what it counts, or none; a
    /// misspelt unit is a mistake at its place.
    #[test]
    fn a_parameters_unit_is_a_script_unit_a_count_or_a_mistake() {
        let unit = |unit: &str| -> Result<ParamUnit, String> {
            let text = format!(
                "{HEAD}unit = \"{unit}\"\n[[variants]]\nname = \"v\"\n\
                 script = '''\nctx = clCreateContext()\nclReleaseContext(ctx)\n'''\n"
            );
            let raw = raw::read(&text).map_err(|p| p.mistake.words().0)?;
            match first(lab(raw, &text, Origin::Builtin)) {
                Ok(l) => Ok(l.params[0].unit.clone()),
                Err(p) => Err(format!("{} at {:?}", p.mistake.words().0, &text[p.span])),
            }
        };
        assert_eq!(unit("MiB"), Ok(ParamUnit::Script(Unit::MiB)));
        assert_eq!(unit("ms"), Ok(ParamUnit::Script(Unit::Ms)));
        assert_eq!(unit(""), Ok(ParamUnit::None));
        assert_eq!(unit("lines"), Ok(ParamUnit::Count("lines".into())));
        for wrong in ["MB", "msec"] {
            let e = unit(wrong).unwrap_err();
            assert!(
                e.starts_with(&format!("unknown unit `{wrong}`")),
                "{wrong}: {e}"
            );
            assert!(e.ends_with(&format!("at \"\\\"{wrong}\\\"\"")), "{e}");
        }
    }

    /// The first mistake, as the tests written before all were reported read it.
    fn first(r: Result<Lab, Vec<Problem>>) -> Res<Lab> {
        r.map_err(|mut all| all.remove(0))
    }

    /// Two variants and one claim over the first, with `expect` as given.
    fn expecting(expect: &str) -> (String, Res<Lab>) {
        let text = format!(
            "{HEAD}[[variants]]\nname = \"a\"\nscript = '''\nctx = clCreateContext()\n'''\n\
             [[variants]]\nname = \"b\"\nscript = '''\nctx = clCreateContext()\n'''\n\
             [[claims]]\nname = \"c\"\ntext = \"t\"\nexpr = \"live(contexts) == 1\"\n\
             variants = [\"a\"]\n{expect}\n"
        );
        let lab = raw::read(&text).and_then(|raw| first(lab(raw, &text, Origin::Builtin)));
        (text, lab)
    }

    #[test]
    fn a_claim_states_its_lesson_per_variant_or_for_all_it_applies_to() {
        let (_, lab) = expecting("expect = \"does not hold\"");
        let c = &lab.unwrap().claims[0];
        assert_eq!(c.expected("a"), Some(Expected::DoesNotHold));
        // Not a variant of the claim: no lesson there.
        assert_eq!(c.expected("b"), None);
        let (_, lab) = expecting("expect = { a = \"holds\" }");
        assert_eq!(lab.unwrap().claims[0].expected("a"), Some(Expected::Holds));
        let (_, lab) = expecting("expect = { a = \"either\" }");
        assert_eq!(lab.unwrap().claims[0].expected("a"), Some(Expected::Either));
        let (_, lab) = expecting("");
        assert!(lab.unwrap().claims[0].expect.is_empty());
    }

    /// #49: every shipped claim states what its lab teaches in every variant
    /// it applies to (`either` where the text says implementations differ),
    /// so no verdict reads as a failure for want of a lesson.
    #[test]
    fn every_shipped_claim_states_its_lesson_in_every_variant() {
        let set = crate::LabSet::load(&[]);
        let mut missing = Vec::new();
        for lab in set.labs() {
            for c in &lab.claims {
                for v in lab.variants.iter().filter(|v| c.applies_to(&v.name)) {
                    if c.expected(&v.name).is_none() {
                        missing.push(format!("{} [{}] {}", lab.id, v.name, c.name));
                    }
                }
            }
        }
        assert!(missing.is_empty(), "no lesson stated: {missing:#?}");
    }

    #[test]
    fn a_lesson_outside_the_claim_or_in_other_words_points_at_itself() {
        let at = |expect: &str, needle: &str| {
            let (text, lab) = expecting(expect);
            let p = lab.unwrap_err();
            assert_eq!(&text[p.span.clone()], needle, "{:?}", p.mistake);
            p.mistake
        };
        assert!(matches!(
            at("expect = { b = \"holds\" }", "b"),
            Mistake::ExpectOutsideClaim { .. }
        ));
        assert!(matches!(
            at("expect = { x = \"holds\" }", "x"),
            Mistake::UnknownVariant { .. }
        ));
        assert!(matches!(
            at("expect = \"passes\"", "\"passes\""),
            Mistake::BadExpect { .. }
        ));
        assert!(matches!(
            at("expect = true", "true"),
            Mistake::WrongType { .. }
        ));
    }

    #[test]
    fn every_variants_and_claims_mistake_is_reported_in_one_pass() {
        let text = format!(
            "{HEAD}[[variants]]\nname = \"a\"\nscript = '''\nclFnish(q)\n'''\n\
             [[variants]]\nname = \"b\"\nscript = '''\nctx = clCreateContext()\nclReleaseContext(ctx)\nclReleaseContext(ctx)\n'''\n\
             [[variants]]\nname = \"Bad Name\"\nscript = '''\nctx = clCreateContext()\n'''\n"
        );
        let all = lab(raw::read(&text).unwrap(), &text, Origin::Builtin).unwrap_err();
        assert_eq!(all.len(), 3, "{all:?}");
        // In file order.
        assert!(
            all.windows(2).all(|w| w[0].span.start < w[1].span.start),
            "{all:?}"
        );
        // With good variants, each bad claim is its own mistake.
        let claims = format!(
            "{HEAD}[[variants]]\nname = \"v\"\nscript = '''\nctx = clCreateContext()\nclReleaseContext(ctx)\n'''\n\
             [[claims]]\nname = \"one\"\ntext = \"t\"\nexpr = \"nope(x) > 1\"\n\
             [[claims]]\nname = \"two\"\ntext = \"t\"\nexpr = \"n >\"\n"
        );
        let all = lab(raw::read(&claims).unwrap(), &claims, Origin::Builtin).unwrap_err();
        assert_eq!(all.len(), 2, "{all:?}");
    }

    /// #50: a variant's lines that bind nothing are each checked in one
    /// pass, so three misspelt calls are three mistakes; a line that binds a
    /// handle ends the pass (the lines after it would fail for want of it);
    /// at most ten are said.
    #[test]
    fn a_variants_mistakes_come_in_one_pass() {
        let all = |script: &str| {
            let text = format!("{HEAD}[[variants]]\nname = \"v\"\nscript = '''\n{script}'''\n");
            let problems = lab(raw::read(&text).unwrap(), &text, Origin::Builtin).unwrap_err();
            problems
                .into_iter()
                .map(|p| text[p.span].to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            all(&format!(
                "{SETUP}clFinsh(q)\nclFlsh(q)\nclReleaseMemObject(nope)\n"
            )),
            ["clFinsh", "clFlsh", "nope"]
        );
        assert_eq!(
            all(&format!("{SETUP}k = clCreateKernl(q)\nclFinsh(q)\n")),
            ["clCreateKernl"]
        );
        // A mistake about a handle: the lines after it that use the handle
        // would only echo it (a write after the release, then the release
        // again), and are not said; a mistake of another line still is.
        assert_eq!(
            all(&format!(
                "{SETUP}clReleaseMemObject(b)\nclEnqueueWriteBuffer(q, b, CL_FALSE)\n\
                 clReleaseMemObject(b)\nclFinsh(q)\n"
            )),
            ["b", "clFinsh"]
        );
        let many: String = (0..15).map(|_| "clFinsh(q)\n").collect();
        assert_eq!(all(&format!("{SETUP}{many}")).len(), 10);
    }

    /// #50: a scaled parameter is checked as the parameter is (it exists,
    /// its unit), and its bound is the parameter's times the factor.
    #[test]
    fn a_scaled_parameter_is_checked_as_its_parameter() {
        let lab = check(
            &format!("{SETUP}sleep 2 * {{n}} ms\nrepeat {{n}} * 3 {{\nclFinish(q)\n}}"),
            "",
        )
        .unwrap();
        let params = lab.default_params();
        let times: Vec<f64> = lab.variants[0]
            .script
            .iter()
            .filter_map(|s| match &s.kind {
                StmtKind::Sleep { duration } => Some(duration.resolve(&params)),
                StmtKind::Repeat { count, .. } => Some(count.resolve(&params)),
                _ => None,
            })
            .collect();
        // n is 3: a sleep of 6 ms, a repeat of 9.
        assert_eq!(times, [6.0, 9.0]);
        assert!(matches!(
            mistake(&format!("{SETUP}sleep 2 * {{m}} ms\n")),
            Mistake::UnknownParam { .. }
        ));
        // Its bound is the parameter's times the factor: n is at most 10.
        assert!(matches!(
            mistake(&format!("{SETUP}sleep 400000 * {{n}} ms\n")),
            Mistake::SleepTooLong { .. }
        ));
    }

    fn mistake(script: &str) -> Mistake {
        match check(script, "") {
            Ok(_) => panic!("no mistake in {script}"),
            Err(p) => p.mistake,
        }
    }

    const SETUP: &str =
        "ctx = clCreateContext()\nq = clCreateCommandQueue(ctx)\nb = clCreateBuffer(ctx, 1 MiB)\n";

    #[test]
    fn cuda_memcpy_picks_its_direction_from_the_handles() {
        let text = HEAD.replace("backend = \"opencl\"", "backend = \"cuda\"")
            + "[[variants]]\nname = \"v\"\nscript = '''\n\
               s = cudaStreamCreate()\nd = cudaMalloc(1 MiB)\nh = cudaMallocHost(1 MiB)\n\
               cudaMemcpyAsync(h, d, s)\ncudaMemcpyAsync(d, h, s)\ncudaMemcpyAsync(s, h, d)\n'''\n";
        let problem = first(lab(raw::read(&text).unwrap(), &text, Origin::Builtin)).unwrap_err();
        // The third has no overload: its message speaks of the first one's arguments.
        assert!(
            matches!(problem.mistake, Mistake::WrongKind { .. }),
            "{:?}",
            problem.mistake
        );
        let ok = text.replace("cudaMemcpyAsync(s, h, d)\n", "");
        let parsed = first(lab(raw::read(&ok).unwrap(), &ok, Origin::Builtin)).unwrap();
        let apis: Vec<Api> = parsed.variants[0]
            .script
            .iter()
            .filter_map(|s| match &s.kind {
                StmtKind::Call { api, .. } => Some(*api),
                _ => None,
            })
            .collect();
        assert_eq!(
            apis[3..],
            [Api::CudaMemcpyAsync, Api::CudaMemcpyAsyncToDevice]
        );
    }

    #[test]
    fn builds_statements_with_file_lines() {
        let lab = check(
            &format!("{SETUP}repeat {{n}} {{ # name: loop\n  clFinish(q)\n}}"),
            "",
        )
        .unwrap();
        let script = &lab.variants[0].script;
        // The script's first line is line 17 of the file.
        assert_eq!(script[0].line, 17);
        assert_eq!(script[2].text, "b = clCreateBuffer(ctx, 1 MiB)");
        let StmtKind::Call { args, .. } = &script[2].kind else {
            panic!()
        };
        assert_eq!(
            args[1],
            Arg::Quantity(crate::model::Quantity {
                value: Number::Lit(1.0),
                unit: Unit::MiB
            })
        );
        assert_eq!(script[3].tag.as_deref(), Some("loop"));
        assert!(
            matches!(&script[3].kind, StmtKind::Repeat { body, .. } if body.len() == 1 && body[0].line == 21)
        );
    }

    #[test]
    fn refcounts_follow_retain_and_release() {
        // Retained once: two releases are fine, the third is a double release.
        let s =
            format!("{SETUP}clRetainMemObject(b)\nclReleaseMemObject(b)\nclReleaseMemObject(b)");
        assert!(check(&s, "").is_ok());
        let m = mistake(&format!("{s}\nclReleaseMemObject(b)"));
        assert!(
            matches!(
                m,
                Mistake::DoubleRelease {
                    line: 22,
                    earlier_iteration: false,
                    ..
                }
            ),
            "{m:?}"
        );
        assert!(check(&format!("{s}\nclReleaseMemObject(b) # expect-error"), "").is_ok());
    }

    #[test]
    fn rebinding_leaks_and_revives_the_name() {
        let s = format!(
            "{SETUP}clReleaseMemObject(b)\nb = clCreateBuffer(ctx, 2 MiB)\nclEnqueueWriteBuffer(q, b, CL_TRUE)"
        );
        assert!(check(&s, "").is_ok());
    }

    #[test]
    fn events_come_from_bound_enqueues_only() {
        let enq = "p = clCreateProgramWithSource(ctx, spin)\nk = clCreateKernel(p, spin)\n";
        let ok = format!(
            "{SETUP}{enq}e = clEnqueueNDRangeKernel(q, k, b, 5 ms)\nr = clEnqueueReadBuffer(q, b, CL_TRUE)\nclWaitForEvents(e, r)\nclReleaseEvent(e)"
        );
        assert!(check(&ok, "").is_ok());
        let unbound =
            format!("{SETUP}{enq}clEnqueueNDRangeKernel(q, k, b, 5 ms)\nclReleaseEvent(e)");
        assert!(matches!(mistake(&unbound), Mistake::UndefinedHandle { .. }));
        let m = mistake(&format!("{SETUP}clWaitForEvents()"));
        assert!(
            matches!(
                m,
                Mistake::ArgCount {
                    at_least: true,
                    expected: 1,
                    found: 0,
                    ..
                }
            ),
            "{m:?}"
        );
    }

    #[test]
    fn loops_are_simulated_twice_only_when_they_can_repeat() {
        let body = "{\n  clEnqueueWriteBuffer(q, b, CL_TRUE)\n  clReleaseMemObject(b)\n}";
        let m = mistake(&format!("{SETUP}repeat 2 {body}"));
        assert!(
            matches!(
                m,
                Mistake::UseAfterRelease {
                    earlier_iteration: true,
                    ..
                }
            ),
            "{m:?}"
        );
        assert!(check(&format!("{SETUP}repeat 1 {body}"), "").is_ok());
        assert!(matches!(
            mistake(&format!("{SETUP}repeat {{n}} {body}")),
            Mistake::UseAfterRelease { .. }
        ));
        // Creating inside the body makes every iteration fine, and tags inside a
        // loop are not duplicates of themselves.
        let fresh = "{\n  c = clCreateBuffer(ctx, 1 MiB) # name: make\n  clReleaseMemObject(c)\n}";
        assert!(check(&format!("{SETUP}repeat 5 {fresh}"), "").is_ok());
    }

    /// Issue #14: wait lists, flags, sub-buffers and maps, good and bad lines,
    /// each bad one at its `line:col`.
    #[test]
    #[expect(clippy::too_many_lines, reason = "a test: one table of cases")]
    fn each_kernel_takes_its_own_buffers_and_duration() {
        let ok = format!(
            "{SETUP}c = clCreateBuffer(ctx, 2 MiB)\n\
             p2 = clCreateProgramWithSource(ctx, spin2)\nk2 = clCreateKernel(p2, spin2)\n\
             pc = clCreateProgramWithSource(ctx, copy)\nkc = clCreateKernel(pc, copy)\n\
             pp = clCreateProgramWithSource(ctx, pattern)\nkp = clCreateKernel(pp, pattern)\n\
             e = clEnqueueNDRangeKernel(q, k2, b, c, {{n}} ms)\n\
             clEnqueueNDRangeKernel(q, kc, b, c, wait [e])\n\
             clEnqueueNDRangeKernel(q, kp, c)\n\
             clReleaseMemObject(b)\n\
             clReleaseEvent(e)"
        );
        let checked = check(&ok, "").unwrap();
        let kernels: Vec<&str> = checked.variants[0]
            .kernels()
            .iter()
            .map(|k| k.name)
            .collect();
        assert_eq!(kernels, ["spin2", "copy", "pattern"]);
        let StmtKind::Call { args, .. } = &checked.variants[0].script[10].kind else {
            panic!()
        };
        assert_eq!(args.len(), 5);
        assert_eq!(args[2], Arg::Handle("b".into()));
        assert_eq!(args[3], Arg::Handle("c".into()));

        let launch = |k: &str, rest: &str| {
            format!(
                "{SETUP}c = clCreateBuffer(ctx, 1 MiB)\np = clCreateProgramWithSource(ctx, {k})\n\
                 k = clCreateKernel(p, {k})\nclEnqueueNDRangeKernel(q, k, {rest})"
            )
        };
        // A wrong count names the kernel and what it takes, and the call as it should read.
        let text = format!(
            "{HEAD}[[variants]]\nname = \"v\"\nscript = '''\n{}\n'''\n",
            launch("spin2", "b, 5 ms")
        );
        let p = first(lab(raw::read(&text).unwrap(), &text, Origin::Builtin)).unwrap_err();
        let d = crate::Diagnostic::from_problem("t.toml", &text, &p).to_string();
        assert!(
            d.contains("`clEnqueueNDRangeKernel` with kernel `spin2` (it takes two buffers and a duration) takes 5 arguments (and an optional wait list), found 4"),
            "{d}"
        );
        assert!(
            d.contains(
                "clEnqueueNDRangeKernel(queue, kernel, buffer, buffer, 50 ms[, wait [event, …]])"
            ),
            "{d}"
        );
        let m = mistake(&launch("copy", "b, c, 5 ms"));
        assert!(
            matches!(
                m,
                Mistake::ArgCount {
                    kernel: Some(("copy", _)),
                    ..
                }
            ),
            "{m:?}"
        );
        let m = mistake(&launch("pattern", "b, c"));
        assert!(
            matches!(
                m,
                Mistake::ArgCount {
                    kernel: Some(("pattern", _)),
                    ..
                }
            ),
            "{m:?}"
        );
        // Every buffer a launch names must be alive, the second as much as the first.
        let m = mistake(&format!(
            "{SETUP}c = clCreateBuffer(ctx, 1 MiB)\nclReleaseMemObject(c)\n\
             p = clCreateProgramWithSource(ctx, copy)\nk = clCreateKernel(p, copy)\n\
             clEnqueueNDRangeKernel(q, k, b, c)"
        ));
        assert!(
            matches!(m, Mistake::UseAfterRelease { ref name, .. } if name == "c"),
            "{m:?}"
        );
        // A program built from one kernel's source has no other kernel.
        let m = mistake(&format!(
            "{SETUP}p = clCreateProgramWithSource(ctx, copy)\nk = clCreateKernel(p, spin)"
        ));
        assert!(
            matches!(m, Mistake::KernelNotInProgram { source: "copy", .. }),
            "{m:?}"
        );
        let m = mistake(&format!("{SETUP}p = clCreateProgramWithSource(ctx, spin3)"));
        assert!(
            matches!(
                m,
                Mistake::UnknownKernel {
                    suggestion: Some(_),
                    ..
                }
            ),
            "{m:?}"
        );
        // An undefined kernel object is named before any count.
        let m = mistake(&format!("{SETUP}clEnqueueNDRangeKernel(q, nope, b)"));
        assert!(matches!(m, Mistake::UndefinedHandle { .. }), "{m:?}");

        // CUDA names the kernel in the launch itself.
        let cuda = |script: &str| {
            let text = HEAD.replace("backend = \"opencl\"", "backend = \"cuda\"")
                + &format!("[[variants]]\nname = \"v\"\nscript = '''\n{script}\n'''\n");
            first(lab(raw::read(&text).unwrap(), &text, Origin::Builtin))
        };
        let setup = "s = cudaStreamCreate()\na = cudaMalloc(1 MiB)\nb = cudaMalloc(1 MiB)\n";
        let checked = cuda(&format!(
            "{setup}cudaLaunchKernel(s, spin2, a, b, 5 ms)\ncudaLaunchKernel(s, copy, a, b)\n\
             cudaLaunchKernel(s, pattern, b)\ncudaFree(a)\ncudaFree(b)"
        ))
        .unwrap();
        assert_eq!(checked.variants[0].kernels().len(), 3);
        let m = cuda(&format!("{setup}cudaLaunchKernel(s, copy, a)"))
            .unwrap_err()
            .mistake;
        assert!(
            matches!(
                m,
                Mistake::ArgCount {
                    kernel: Some(("copy", _)),
                    found: 3,
                    ..
                }
            ),
            "{m:?}"
        );
        let m = cuda(&format!(
            "{setup}cudaFree(b)\ncudaLaunchKernel(s, spin2, a, b, 5 ms)"
        ))
        .unwrap_err()
        .mistake;
        assert!(matches!(m, Mistake::UseAfterRelease { .. }), "{m:?}");
    }

    #[test]
    fn kernel_arguments_hold_no_reference_and_user_events_gate_their_waiters() {
        let enq = "p = clCreateProgramWithSource(ctx, spin2)\nk = clCreateKernel(p, spin2)\n";
        // A kernel argument is no reference: the lab may release the buffer after it.
        let ok = format!(
            "{SETUP}{enq}clSetKernelArg(k, 1, b)\nclReleaseMemObject(b)\nclReleaseKernel(k)"
        );
        let checked = check(&ok, "").unwrap();
        let StmtKind::Call { args, .. } = &checked.variants[0].script[5].kind else {
            panic!()
        };
        assert_eq!(
            args[1],
            Arg::Quantity(crate::Quantity {
                value: Number::Lit(1.0),
                unit: Unit::None
            })
        );
        let m = mistake(&format!("{SETUP}{enq}clSetKernelArg(k, 2, b)"));
        assert!(
            matches!(
                m,
                Mistake::KernelArgIndex {
                    kernel: "spin2",
                    index: 2,
                    buffers: 2
                }
            ),
            "{m:?}"
        );
        let m = mistake(&format!("{SETUP}{enq}clSetKernelArg(k, 1 MiB, b)"));
        assert!(matches!(m, Mistake::ArgType { position: 2, .. }), "{m:?}");
        let m = mistake(&format!(
            "{SETUP}{enq}clReleaseMemObject(b)\nclSetKernelArg(k, 0, b)"
        ));
        assert!(matches!(m, Mistake::UseAfterRelease { .. }), "{m:?}");

        // A user event holds back what waits for it, and the queue behind it.
        let ok = format!(
            "{SETUP}u = clCreateUserEvent(ctx)\n\
             e = clEnqueueFillBuffer(q, b, wait [u])\n\
             r = clEnqueueReadBuffer(q, b, CL_FALSE)\n\
             clFlush(q)\n\
             clSetUserEventStatus(u, CL_COMPLETE)\n\
             clWaitForEvents(e, r)\n\
             clFinish(q)\n\
             clReleaseEvent(u)"
        );
        assert!(check(&ok, "").is_ok());
        let held = format!(
            "{SETUP}u = clCreateUserEvent(ctx)\ne = clEnqueueFillBuffer(q, b, wait [u])\n\
             r = clEnqueueReadBuffer(q, b, CL_FALSE)\n"
        );
        for wait in [
            "clFinish(q)",
            "clWaitForEvents(u)",
            "clWaitForEvents(r)",
            "clEnqueueReadBuffer(q, b, CL_TRUE)",
            "clReleaseCommandQueue(q)",
        ] {
            let m = mistake(&format!("{held}{wait}"));
            assert!(
                matches!(m, Mistake::WaitsForever { ref user_event, .. } if user_event == "u"),
                "{wait}: {m:?}"
            );
        }
        // Another queue is not held back; a blocking read on it may wait.
        assert!(
            check(
                &format!(
                    "{held}q2 = clCreateCommandQueue(ctx)\nclEnqueueReadBuffer(q2, b, CL_TRUE)\nclFinish(q2)"
                ),
                ""
            )
            .is_ok()
        );
        let m = mistake(&format!(
            "{held}clSetUserEventStatus(u, CL_COMPLETE)\nclSetUserEventStatus(u, CL_COMPLETE)"
        ));
        assert!(matches!(m, Mistake::UserEventSetTwice { .. }), "{m:?}");
        let m = mistake(&format!("{held}clSetUserEventStatus(e, CL_COMPLETE)"));
        assert!(matches!(m, Mistake::NotUserEvent { .. }), "{m:?}");
        let m = mistake(&format!("{held}clSetUserEventStatus(u, CL_TRUE)"));
        assert!(matches!(m, Mistake::ArgType { .. }), "{m:?}");
        // The second set is the lesson when the line says so.
        assert!(
            check(
                &format!(
                    "{held}clSetUserEventStatus(u, CL_COMPLETE)\nclSetUserEventStatus(u, CL_COMPLETE)  # expect-error"
                ),
                ""
            )
            .is_ok()
        );
    }

    #[test]
    #[expect(clippy::too_many_lines, reason = "a test: one table of cases")]
    fn wait_lists_flags_sub_buffers_and_maps() {
        let enq = "p = clCreateProgramWithSource(ctx, spin)\nk = clCreateKernel(p, spin)\n";
        let ok = format!(
            "{SETUP}{enq}qo = clCreateCommandQueue(ctx, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)\n\
             h = clCreateBuffer(ctx, 1 MiB, CL_MEM_USE_HOST_PTR)\n\
             s = clCreateSubBuffer(b, 0 MiB, 1 MiB)\n\
             e = clEnqueueNDRangeKernel(q, k, s, 5 ms)\n\
             f = clEnqueueFillBuffer(qo, h, wait [e])\n\
             clEnqueueCopyBuffer(qo, h, b, wait [e, f])\n\
             m = clEnqueueMarkerWithWaitList(qo)\n\
             clEnqueueBarrierWithWaitList(q, wait [m])\n\
             clEnqueueMapBuffer(q, h, CL_TRUE)\n\
             clEnqueueUnmapMemObject(q, h)\n\
             clReleaseMemObject(b)\n\
             clEnqueueReadBuffer(q, s, CL_TRUE, wait [f])"
        );
        let checked = check(&ok, "").unwrap();
        let script = &checked.variants[0].script;
        let StmtKind::Call { args, .. } = &script[9].kind else {
            panic!()
        };
        assert_eq!(args[2], Arg::WaitList(vec!["e".into()]));
        let StmtKind::Call { args, .. } = &script[5].kind else {
            panic!()
        };
        assert_eq!(args[1], Arg::Flag(crate::ClFlag::OutOfOrder));

        // Each bad line: the mistake and where it is, as `gpulab check` prints it.
        let at = |script: &str| {
            let text = format!("{HEAD}[[variants]]\nname = \"v\"\nscript = '''\n{script}\n'''\n");
            let p = first(lab(raw::read(&text).unwrap(), &text, Origin::Builtin)).unwrap_err();
            let d = crate::Diagnostic::from_problem("t.toml", &text, &p);
            let first = d.to_string().lines().next().unwrap_or("").to_owned();
            (p.mistake, first)
        };
        let (m, d) = at(&format!(
            "{SETUP}{enq}clEnqueueNDRangeKernel(q, k, b, 5 ms, wait [nope])"
        ));
        assert!(matches!(m, Mistake::UndefinedHandle { .. }), "{m:?}");
        assert!(d.starts_with("t.toml:22:45: "), "{d}");
        let (m, d) = at(&format!(
            "{SETUP}clEnqueueWriteBuffer(q, b, CL_TRUE, wait [q])"
        ));
        assert!(matches!(m, Mistake::WrongKind { .. }), "{m:?}");
        assert!(d.starts_with("t.toml:20:43: "), "{d}");
        let (m, d) = at(&format!("{SETUP}clFinish(q, wait [q])"));
        assert!(matches!(m, Mistake::ArgCount { .. }), "{m:?}");
        assert!(d.contains("`clFinish` takes 1 argument, found 2"), "{d}");
        let (m, d) = at(&format!("{SETUP}c = clCreateBuffer(ctx, 1 MiB, wait [b])"));
        assert!(matches!(m, Mistake::ArgType { .. }), "{m:?}");
        assert!(d.starts_with("t.toml:20:32: "), "{d}");
        let (m, d) = at(&format!(
            "{SETUP}c = clCreateBuffer(ctx, 1 MiB, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)"
        ));
        assert!(matches!(m, Mistake::ArgType { .. }), "{m:?}");
        assert!(d.contains("CL_MEM_USE_HOST_PTR"), "{d}");
        let (_, d) = at(&format!(
            "{SETUP}e = clEnqueueReadBuffer(q, b, CL_TRUE, CL_TRUE, CL_TRUE)"
        ));
        assert!(
            d.contains("`clEnqueueReadBuffer` takes 3 or 4 arguments, found 5"),
            "{d}"
        );
        let (m, d) = at(&format!(
            "{SETUP}s = clCreateSubBuffer(b, 0 MiB, 1 MiB)\nt = clCreateSubBuffer(s, 0 MiB, 1 MiB)"
        ));
        assert!(matches!(m, Mistake::SubBufferOfSubBuffer { .. }), "{m:?}");
        assert!(d.starts_with("t.toml:21:23: "), "{d}");
        let (m, d) = at(&format!("{SETUP}clEnqueueUnmapMemObject(q, b)"));
        assert_eq!(m, Mistake::NotMapped { name: "b".into() });
        assert!(d.starts_with("t.toml:20:28: "), "{d}");
        let (m, d) = at(&format!(
            "{SETUP}clEnqueueMapBuffer(q, b, CL_TRUE)\nclReleaseMemObject(b)"
        ));
        assert_eq!(
            m,
            Mistake::ReleasedWhileMapped {
                name: "b".into(),
                line: 20
            }
        );
        assert!(d.starts_with("t.toml:21:20: "), "{d}");
        let (m, _) = at(&format!(
            "{SETUP}e = clEnqueueMarkerWithWaitList(q)\nclReleaseEvent(e)\nclEnqueueBarrierWithWaitList(q, wait [e])"
        ));
        assert!(
            matches!(m, Mistake::UseAfterRelease { line: 21, .. }),
            "{m:?}"
        );

        // A sub-buffer outlives its parent's name: the sub-buffer stays usable after
        // the parent's release; the parent's name is dead.
        let sub = format!(
            "{SETUP}s = clCreateSubBuffer(b, 0 MiB, 1 MiB)\nclReleaseMemObject(b)\nclEnqueueFillBuffer(q, s)"
        );
        assert!(check(&sub, "").is_ok());
        assert!(matches!(
            mistake(&format!("{sub}\nclEnqueueFillBuffer(q, b)")),
            Mistake::UseAfterRelease { .. }
        ));
        // Marked mistakes pass.
        assert!(
            check(
                &format!("{SETUP}clEnqueueUnmapMemObject(q, b) # expect-error"),
                ""
            )
            .is_ok()
        );
    }

    #[test]
    fn forget_kills_the_name_without_releasing() {
        let m = mistake(&format!("{SETUP}forget b\nclReleaseMemObject(b)"));
        assert!(
            matches!(m, Mistake::UseAfterForget { line: 20, .. }),
            "{m:?}"
        );
        assert!(
            check(
                &format!("{SETUP}forget b\nclReleaseMemObject(b) # expect-error"),
                ""
            )
            .is_ok()
        );
    }

    #[test]
    fn claims_see_params_metrics_tags_and_kinds() {
        let s = format!("{SETUP}clFinish(q) # name: fin");
        let claim = |e: &str| format!("[[claims]]\nname = \"c\"\ntext = \"t\"\nexpr = \"{e}\"\n");
        assert!(
            check(
                &s,
                &claim("host_ms(fin) < n and live(buffer) >= 0 and bytes_live_mib >= 0")
            )
            .is_ok()
        );
        let err = |e: &str| check(&s, &claim(e)).unwrap_err().mistake;
        assert!(
            matches!(err("host_ms(fn) < 1"), Mistake::TagNotInVariant { ref suggestion, .. } if suggestion.as_deref() == Some("fin"))
        );
        assert!(matches!(
            err("bytes_live_mib(fin) < 1"),
            Mistake::MetricTakesNoArg { .. }
        ));
        assert!(matches!(
            err("live < 1"),
            Mistake::MetricNeedsArg {
                arg: "an object kind",
                ..
            }
        ));
        assert!(matches!(err("m < 1"), Mistake::BareVariable { .. }));
    }

    #[test]
    fn a_claim_compares_with_another_variant_by_its_tags() {
        let two = |claim: &str| {
            let text = format!(
                "{HEAD}[[variants]]\nname = \"a\"\nscript = '''\nctx = clCreateContext() # name: one\n'''\n\
                 [[variants]]\nname = \"b\"\nscript = '''\nctx = clCreateContext() # name: two\n'''\n\
                 [[claims]]\nname = \"c\"\ntext = \"t\"\n{claim}\n"
            );
            first(lab(raw::read(&text).unwrap(), &text, Origin::Builtin))
        };
        let lab =
            two("expr = \"host_ms(one) > host_ms(two) in variant b\"\nvariants = [\"a\"]").unwrap();
        assert_eq!(lab.claims[0].expr.other_variants(), ["b"]);
        let err = |claim: &str| two(claim).unwrap_err().mistake;
        // Applying to every variant, it would compare `b` with itself.
        assert_eq!(
            err("expr = \"host_ms(one) > host_ms(two) in variant b\""),
            Mistake::ComparesWithItself {
                variant: "b".into(),
                others: "\"a\"".into()
            }
        );
        // The tag is looked up in the compared variant, not the claim's own.
        assert!(matches!(
            err("expr = \"host_ms(one) > host_ms(one) in variant b\"\nvariants = [\"a\"]"),
            Mistake::TagNotInVariant { ref variant, ref suggestion, .. }
                if variant == "b" && suggestion.is_none()
        ));
        assert_eq!(
            err("expr = \"host_ms(one) > n in variant b\"\nvariants = [\"a\"]"),
            Mistake::ParamInVariant { name: "n".into() }
        );
        assert!(
            two("expr = \"bytes_live_mib < bytes_live_mib in variant b\"\nvariants = [\"a\"]")
                .is_ok()
        );
    }

    #[test]
    fn names_and_params_are_checked() {
        let p = |extra: &str| {
            let text =
                format!("{HEAD}{extra}[[variants]]\nname = \"v\"\nscript = 'clCreateContext()'\n");
            first(lab(raw::read(&text).unwrap(), &text, Origin::Builtin))
                .unwrap_err()
                .mistake
        };
        assert!(matches!(
            p("[[params]]\nname = \"n\"\ndefault = 1\nmin = 0\nmax = 1\n"),
            Mistake::Duplicate { first_line: 10, .. }
        ));
        assert!(matches!(
            p("[[params]]\nname = \"Big\"\ndefault = 1\nmin = 0\nmax = 1\n"),
            Mistake::BadName { .. }
        ));
        assert!(matches!(
            p("[[params]]\nname = \"bytes_live_mib\"\ndefault = 1\nmin = 0\nmax = 1\n"),
            Mistake::ParamIsMetric { .. }
        ));
        let text = HEAD.replace("title = \"t\"", "title = \"a\\nb\"")
            + "[[variants]]\nname = \"v\"\nscript = 'clCreateContext()'\n";
        assert!(matches!(
            first(lab(raw::read(&text).unwrap(), &text, Origin::Builtin))
                .unwrap_err()
                .mistake,
            Mistake::MultiLine { key: "title" }
        ));
    }

    /// A CUDA variant's first mistake, or the calls it makes.
    fn cuda(script: &str) -> Result<Vec<Api>, Mistake> {
        let text = HEAD.replace("backend = \"opencl\"", "backend = \"cuda\"")
            + &format!("[[variants]]\nname = \"v\"\nscript = '''\n{script}\n'''\n");
        let lab =
            first(lab(raw::read(&text).unwrap(), &text, Origin::Builtin)).map_err(|p| p.mistake)?;
        Ok(calls_of(&lab))
    }

    /// The calls of a lab's first variant, in order.
    fn calls_of(lab: &Lab) -> Vec<Api> {
        lab.variants[0]
            .script
            .iter()
            .filter_map(|s| match &s.kind {
                StmtKind::Call { api, .. } => Some(*api),
                _ => None,
            })
            .collect()
    }

    const VMM: &str = "s = cudaStreamCreate()\nmem = cuMemCreate(2 MiB)\n\
        va = cuMemAddressReserve(2 MiB)\ncuMemMap(va, mem)\ncuMemSetAccess(va)\n";

    #[test]
    fn a_mapping_keeps_its_allocation_after_cu_mem_release() {
        // Released while mapped: the range stays usable until it is unmapped.
        let ok = format!(
            "{VMM}cuMemRelease(mem)\ncudaMemsetAsync(va, s)\ncuMemUnmap(va)\ncuMemAddressFree(va)"
        );
        let apis = cuda(&ok).unwrap();
        assert!(apis.contains(&Api::CudaMemsetAsyncRange), "{apis:?}");
        // After the unmap, the range holds nothing to use.
        assert_eq!(
            cuda(&format!(
                "{VMM}cuMemRelease(mem)\ncuMemUnmap(va)\ncudaMemsetAsync(va, s)"
            )),
            Err(Mistake::RangeNotMapped {
                name: "va".into(),
                unmapped_at: Some(23)
            })
        );
        assert_eq!(
            cuda("va = cuMemAddressReserve(2 MiB)\ncuMemSetAccess(va)"),
            Err(Mistake::RangeNotMapped {
                name: "va".into(),
                unmapped_at: None
            })
        );
        // The handle itself is gone: mapping it again is a use after release.
        assert!(matches!(
            cuda(&format!(
                "{VMM}cuMemRelease(mem)\ncuMemUnmap(va)\ncuMemMap(va, mem)"
            )),
            Err(Mistake::UseAfterRelease { line: 22, .. })
        ));
        assert_eq!(
            cuda(&format!("{VMM}cuMemMap(va, mem)")),
            Err(Mistake::AlreadyMapped {
                name: "va".into(),
                line: 20
            })
        );
        assert_eq!(
            cuda(&format!("{VMM}cuMemAddressFree(va)")),
            Err(Mistake::RangeFreedWhileMapped {
                name: "va".into(),
                line: 20
            })
        );
        // A range is not a buffer, nor an allocation handle a range.
        assert!(matches!(
            cuda(&format!("{VMM}cudaFree(va)")),
            Err(Mistake::WrongKind { .. })
        ));
        assert!(matches!(
            cuda(&format!("{VMM}cuMemUnmap(mem)")),
            Err(Mistake::WrongKind { .. })
        ));
        assert!(cuda(&format!("{VMM}cuMemAddressFree(va) # expect-error")).is_ok());
    }

    #[test]
    fn managed_pool_and_registered_memory_follow_their_handles() {
        let managed = "s = cudaStreamCreate()\nm = cudaMallocManaged(1 MiB)\n\
            cudaMemPrefetchAsync(m, s)\ncudaFree(m)";
        assert!(cuda(managed).is_ok());
        assert!(matches!(
            cuda(&format!("{managed}\ncudaMemPrefetchAsync(m, s)")),
            Err(Mistake::UseAfterRelease { line: 20, .. })
        ));
        // A buffer from a destroyed pool stays the lab's to use and free.
        let pool = "s = cudaStreamCreate()\np = cudaMemPoolCreate()\n\
            cudaMemPoolSetAttribute(p, 64 MiB)\nb = cudaMallocFromPoolAsync(1 MiB, p, s)\n\
            cudaMemPoolDestroy(p)\ncudaMemsetAsync(b, s)\ncudaFreeAsync(b, s)";
        let apis = cuda(pool).unwrap();
        assert!(apis.contains(&Api::CudaMemPoolSetAttributeOf), "{apis:?}");
        assert!(matches!(
            cuda(&format!("{pool}\ncudaMemPoolTrimTo(p, 0 MiB)")),
            Err(Mistake::UseAfterRelease { line: 21, .. })
        ));
        // The default pool's forms stay: a size alone names no pool.
        let apis = cuda("cudaMemPoolSetAttribute(0 MiB)\ncudaMemPoolTrimTo(0 MiB)").unwrap();
        assert_eq!(apis, [Api::CudaMemPoolSetAttribute, Api::CudaMemPoolTrimTo]);
        let host = "h = cudaHostRegister(1 MiB)\nd = cudaMalloc(1 MiB)\n\
            cudaMemcpy(d, h)\ncudaMemcpy(h, d)\ncudaHostUnregister(h)";
        assert_eq!(
            cuda(host).unwrap(),
            [
                Api::CudaHostRegister,
                Api::CudaMalloc,
                Api::CudaMemcpyToDevice,
                Api::CudaMemcpy,
                Api::CudaHostUnregister
            ]
        );
        assert!(matches!(
            cuda(&format!("{host}\ncudaMemcpy(d, h)")),
            Err(Mistake::UseAfterRelease { .. })
        ));
        // Pinned memory goes back the way it came.
        assert_eq!(
            cuda("h = cudaHostRegister(1 MiB)\ncudaFreeHost(h)"),
            Err(Mistake::WrongHostRelease {
                name: "h".into(),
                made_by: "cudaHostRegister",
                release: "cudaHostUnregister"
            })
        );
        assert!(matches!(
            cuda("h = cudaMallocHost(1 MiB)\ncudaHostUnregister(h)"),
            Err(Mistake::WrongHostRelease {
                release: "cudaFreeHost",
                ..
            })
        ));
        assert!(cuda("h = cudaMallocHost(1 MiB)\ncudaHostUnregister(h) # expect-error").is_ok());
    }

    #[test]
    fn host_memory_goes_back_the_way_it_came() {
        // Pageable memory is the C library's, pinned memory the driver's.
        assert_eq!(
            cuda(
                "h = malloc(1 MiB)\nd = cudaMalloc(1 MiB)\ns = cudaStreamCreate()\n\
                  cudaMemcpyAsync(d, h, s)\ncudaMemcpyAsync(h, d, s)\nfree(h)"
            ),
            Ok(vec![
                Api::Malloc,
                Api::CudaMalloc,
                Api::CudaStreamCreate,
                Api::CudaMemcpyAsyncToDevice,
                Api::CudaMemcpyAsync,
                Api::Free
            ])
        );
        for (made, wrong, right) in [
            ("malloc(1 MiB)", "cudaFreeHost", "free"),
            ("cudaHostAlloc(1 MiB)", "free", "cudaFreeHost"),
            ("cudaMallocHost(1 MiB)", "free", "cudaFreeHost"),
            ("cudaHostRegister(1 MiB)", "free", "cudaHostUnregister"),
        ] {
            assert!(
                matches!(
                    cuda(&format!("h = {made}\n{wrong}(h)")),
                    Err(Mistake::WrongHostRelease { release, .. }) if release == right
                ),
                "{made} then {wrong}"
            );
            assert!(cuda(&format!("h = {made}\n{right}(h)")).is_ok(), "{made}");
            // A device free names the host memory's own.
            let m = cuda(&format!("h = {made}\ncudaFree(h)")).unwrap_err();
            assert!(
                matches!(m, Mistake::WrongKind { goes_back: Some((_, r)), .. } if r == right),
                "{m:?}"
            );
        }
        assert!(matches!(
            cuda("h = malloc(1 MiB)\nfree(h)\nfree(h)"),
            Err(Mistake::DoubleRelease { .. })
        ));
    }

    #[test]
    fn host_alloc_takes_flags_as_c_ors_them() {
        for flags in [
            "",
            ", cudaHostAllocDefault",
            ", cudaHostAllocMapped",
            ", cudaHostAllocMapped | cudaHostAllocWriteCombined",
            ", cudaHostAllocPortable|cudaHostAllocMapped | cudaHostAllocWriteCombined",
        ] {
            assert!(
                cuda(&format!("h = cudaHostAlloc(1 MiB{flags})\ncudaFreeHost(h)")).is_ok(),
                "{flags}"
            );
        }
        // A flag of another call, or flags where one call takes a single one.
        assert!(matches!(
            cuda("h = cudaHostAlloc(1 MiB, cudaHostAllocMapped | cudaStreamNonBlocking)"),
            Err(Mistake::ArgType { position: 2, .. })
        ));
        assert!(matches!(
            cuda("s = cudaStreamCreateWithFlags(cudaStreamNonBlocking | cudaHostAllocMapped)"),
            Err(Mistake::ArgType { position: 1, .. })
        ));
    }

    #[test]
    fn a_device_pointer_of_host_memory_dies_with_it() {
        let head = "s = cudaStreamCreate()\nh = cudaHostAlloc(1 MiB, cudaHostAllocMapped)\n\
                    dp = cudaHostGetDevicePointer(h)\n";
        assert!(
            cuda(&format!(
                "{head}cudaLaunchKernel(s, pattern, dp)\ncudaStreamSynchronize(s)\ncudaFreeHost(h)"
            ))
            .is_ok()
        );
        assert!(matches!(
            cuda(&format!("{head}cudaFreeHost(h)\ncudaLaunchKernel(s, pattern, dp)")),
            Err(Mistake::UseAfterRelease { ref name, .. }) if name == "dp"
        ));
        assert!(matches!(
            cuda(&format!("{head}cudaFree(dp)")),
            Err(Mistake::FreeOfDevicePointer {
                release: "cudaFreeHost",
                ..
            })
        ));
        // Pageable memory has none; the driver's answer is there to be seen.
        assert!(matches!(
            cuda("h = malloc(1 MiB)\ndp = cudaHostGetDevicePointer(h)"),
            Err(Mistake::PageableHasNoDevicePointer { .. })
        ));
        assert!(cuda("h = malloc(1 MiB)\ndp = cudaHostGetDevicePointer(h) # expect-error").is_ok());
    }

    #[test]
    fn a_callback_that_releases_a_buffer_holds_the_labs_reference() {
        let kernel = "p = clCreateProgramWithSource(ctx, spin)\nclBuildProgram(p)\n\
                      k = clCreateKernel(p, spin)\nev = clEnqueueNDRangeKernel(q, k, b, 10 ms)\n\
                      clSetEventCallback(ev, CL_COMPLETE, clReleaseMemObject, b)\n";
        assert!(
            check(
                &format!("{SETUP}{kernel}clFinish(q)\nclReleaseEvent(ev)"),
                ""
            )
            .is_ok()
        );
        // The lab no longer holds it: a use or a release of its own is a mistake.
        assert!(matches!(
            mistake(&format!("{SETUP}{kernel}clEnqueueFillBuffer(q, b)")),
            Mistake::UseAfterRelease { .. }
        ));
        assert!(matches!(
            mistake(&format!("{SETUP}{kernel}clReleaseMemObject(b)")),
            Mistake::DoubleRelease { .. }
        ));
        // A retained buffer keeps the reference the callback did not take.
        let retained = kernel.replace("ev = ", "clRetainMemObject(b)\nev = ");
        assert!(
            check(
                &format!("{SETUP}{retained}clReleaseMemObject(b)\nclFinish(q)"),
                ""
            )
            .is_ok()
        );
        // The callback is the one the call installs, by its C name.
        assert!(matches!(
            mistake(&format!(
                "{SETUP}{}",
                kernel.replace("clReleaseMemObject, b", "sleep, b")
            )),
            Mistake::ArgType { position: 3, .. }
        ));
        // CUDA's host functions sleep.
        assert_eq!(
            cuda(
                "s = cudaStreamCreate()\ncudaLaunchHostFunc(s, sleep, 5 ms)\n\
                  cudaStreamAddCallback(s, sleep, 10 ms)"
            ),
            Ok(vec![
                Api::CudaStreamCreate,
                Api::CudaLaunchHostFunc,
                Api::CudaStreamAddCallback
            ])
        );
        assert!(matches!(
            cuda("s = cudaStreamCreate()\ncudaLaunchHostFunc(s, clReleaseMemObject, 5 ms)"),
            Err(Mistake::ArgType { position: 2, .. })
        ));
    }

    #[test]
    fn a_metric_of_what_a_call_answered_needs_a_line_that_answers_it() {
        let kernel = "p = clCreateProgramWithSource(ctx, pattern)\nclBuildProgram(p)\n\
                      k = clCreateKernel(p, pattern)\nev = clEnqueueNDRangeKernel(q, k, b)\n";
        let claim = |expr: &str| {
            format!(
                "[[claims]]\nname = \"c\"\ntext = \"t\"\nexpr = \"{expr}\"\nexpect = \"holds\"\n"
            )
        };
        let script = format!(
            "{SETUP}{kernel}clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS)  # name: st\n\
             clFinish(q)  # name: fin\nclEnqueueReadBuffer(q, b, CL_TRUE)  # name: rb"
        );
        assert!(check(&script, &claim("complete(st) == 1 and pattern(rb) == 1")).is_ok());
        for (expr, line_is) in [
            ("pattern(fin) == 1", "clFinish"),
            ("complete(rb) == 1", "clEnqueueReadBuffer"),
        ] {
            let m = check(&script, &claim(expr)).unwrap_err().mistake;
            assert!(
                matches!(&m, Mistake::MetricReadsNothing { line_is: l, .. } if *l == line_is),
                "{expr}: {m:?}"
            );
        }
        // `verify` reads a host buffer the lab holds, as the program would.
        assert!(cuda("h = cudaMallocHost(1 MiB)\nverify h\ncudaFreeHost(h)").is_ok());
        assert!(matches!(
            cuda("h = cudaMallocHost(1 MiB)\ncudaFreeHost(h)\nverify h"),
            Err(Mistake::UseAfterRelease { .. })
        ));
        assert!(matches!(
            cuda("d = cudaMalloc(1 MiB)\nverify d"),
            Err(Mistake::WrongKind { call: "verify", .. })
        ));
        // Events take flags as C ORs them.
        assert_eq!(
            cuda(
                "e = cudaEventCreateWithFlags(cudaEventDisableTiming | cudaEventBlockingSync)\n\
                  f = cudaEventCreate()\ncudaEventElapsedTime(f, e)"
            ),
            Ok(vec![
                Api::CudaEventCreateWithFlags,
                Api::CudaEventCreate,
                Api::CudaEventElapsedTime
            ])
        );
    }

    #[test]
    fn managed_memory_goes_both_ways_and_only_it_is_the_hosts_to_write() {
        let managed = "s = cudaStreamCreate()\nm = cudaMallocManaged(2 MiB)\n";
        assert_eq!(
            cuda(&format!(
                "{managed}cudaMemPrefetchAsync(m, s)\ncudaMemPrefetchAsync(m, cudaCpuDeviceId, s)\n\
                 cudaMemAdvise(m, cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)\n\
                 cudaMemAdvise(m, cudaMemAdviseSetAccessedBy, 0)\nmemset(m)\ncudaFree(m)"
            )),
            Ok(vec![
                Api::CudaStreamCreate,
                Api::CudaMallocManaged,
                Api::CudaMemPrefetchAsync,
                Api::CudaMemPrefetchAsyncToHost,
                Api::CudaMemAdvise,
                Api::CudaMemAdvise,
                Api::HostMemset,
                Api::CudaFree
            ])
        );
        assert!(matches!(
            cuda("d = cudaMalloc(2 MiB)\nmemset(d)"),
            Err(Mistake::HostTouchOfDeviceMemory {
                made_by: "cudaMalloc",
                ..
            })
        ));
        assert!(matches!(
            cuda(&format!("{managed}cudaMemAdvise(m, cudaCpuDeviceId, 0)")),
            Err(Mistake::ArgType { position: 2, .. })
        ));
    }

    #[test]
    fn limits_are_set_and_read_and_only_cuda_has_a_device_heap() {
        assert_eq!(
            cuda(
                "cudaDeviceSetLimit(cudaLimitMallocHeapSize, 256 MiB)\n\
                 cudaDeviceGetLimit(cudaLimitMallocHeapSize)\n\
                 cudaDeviceSetLimit(cudaLimitStackSize, 16 KiB)\n\
                 s = cudaStreamCreate()\nb = cudaMalloc(1 MiB)\ncudaLaunchKernel(s, heap, b)\n\
                 cudaStreamSynchronize(s)\ncudaFree(b)"
            ),
            Ok(vec![
                Api::CudaDeviceSetLimit,
                Api::CudaDeviceGetLimit,
                Api::CudaDeviceSetLimit,
                Api::CudaStreamCreate,
                Api::CudaMalloc,
                Api::CudaLaunchKernel,
                Api::CudaStreamSynchronize,
                Api::CudaFree
            ])
        );
        for (script, position) in [
            ("cudaDeviceSetLimit(cudaMemAdviseSetReadMostly, 1 MiB)", 1),
            (
                "cudaDeviceSetLimit(cudaLimitStackSize, cudaLimitStackSize)",
                2,
            ),
            ("cudaDeviceGetLimit(64 MiB)", 1),
        ] {
            assert!(
                matches!(cuda(script), Err(Mistake::ArgType { position: p, .. }) if p == position),
                "{script}: {:?}",
                cuda(script)
            );
        }
        assert!(matches!(
            cuda("x = cudaDeviceGetLimit(cudaLimitStackSize)"),
            Err(Mistake::BindsNothing { .. })
        ));
        // OpenCL C has no `malloc`: the heap kernel is CUDA's alone.
        assert!(matches!(
            mistake(&format!("{SETUP}p = clCreateProgramWithSource(ctx, heap)")),
            Mistake::KernelNeedsDeviceHeap { name: "heap" }
        ));
    }

    /// An OpenCL variant's calls, or its first mistake.
    fn opencl(script: &str) -> Result<Vec<Api>, Mistake> {
        check(script, "")
            .map(|lab| calls_of(&lab))
            .map_err(|p| p.mistake)
    }

    #[test]
    fn shared_virtual_memory_is_a_pointer_without_a_reference_count() {
        let svm = "p = clSVMAlloc(ctx, 1 MiB)
pr = clCreateProgramWithSource(ctx, spin)
\
                   k = clCreateKernel(pr, spin)
";
        let calls = opencl(&format!(
            "{SETUP}{svm}clSetKernelArgSVMPointer(k, 0, p)
\
             clEnqueueNDRangeKernel(q, k, p, 5 ms)
clEnqueueSVMFree(q, p)
clFinish(q)"
        ))
        .unwrap();
        assert_eq!(calls[3], Api::ClSVMAlloc);
        assert_eq!(
            calls[6..],
            [
                Api::ClSetKernelArgSVMPointer,
                Api::ClEnqueueNDRangeKernel,
                Api::ClEnqueueSVMFree,
                Api::ClFinish
            ]
        );
        // The calls of a cl_mem refuse the pointer, and say what C writes instead.
        for (line, instead) in [
            ("clReleaseMemObject(p)", "clSVMFree"),
            ("clRetainMemObject(p)", "no reference count"),
            ("clSetKernelArg(k, 0, p)", "clSetKernelArgSVMPointer"),
            ("clEnqueueReadBuffer(q, p, CL_TRUE)", "only a kernel"),
        ] {
            let m = mistake(&format!("{SETUP}{svm}{line}"));
            assert!(
                matches!(&m, Mistake::SvmIsNotAMemObject { instead: i, .. } if i.contains(instead)),
                "{line}: {m:?}"
            );
        }
        // The SVM calls refuse a cl_mem.
        for line in [
            "clSVMFree(ctx, b)",
            "clEnqueueSVMFree(q, b)",
            "clSetKernelArgSVMPointer(k, 0, b)",
        ] {
            let m = mistake(&format!("{SETUP}{svm}{line}"));
            assert!(
                matches!(
                    &m,
                    Mistake::NotSvm {
                        made_by: "clCreateBuffer",
                        ..
                    }
                ),
                "{line}: {m:?}"
            );
        }
        // Freed is freed: a launch or a second free after it uses freed memory.
        for after in ["clEnqueueNDRangeKernel(q, k, p, 5 ms)", "clSVMFree(ctx, p)"] {
            let m = mistake(&format!(
                "{SETUP}{svm}clSVMFree(ctx, p)
{after}"
            ));
            assert!(
                matches!(m, Mistake::UseAfterRelease { .. }),
                "{after}: {m:?}"
            );
        }
        // Unless the line says the mistake is the lesson.
        assert!(
            opencl(&format!(
                "{SETUP}{svm}clReleaseMemObject(p)  # expect-error"
            ))
            .is_ok()
        );
    }

    #[test]
    fn a_migration_goes_to_the_device_or_with_its_flag_to_the_host() {
        assert_eq!(
            opencl(&format!(
                "{SETUP}e = clEnqueueMigrateMemObjects(q, b)
\
                 clEnqueueMigrateMemObjects(q, b, CL_MIGRATE_MEM_OBJECT_HOST, wait [e])
\
                 clEnqueueMigrateMemObjects(q, b, wait [e])
clReleaseEvent(e)"
            ))
            .unwrap()[3..6],
            [
                Api::ClEnqueueMigrateMemObjects,
                Api::ClEnqueueMigrateMemObjectsToHost,
                Api::ClEnqueueMigrateMemObjects
            ]
        );
        assert!(matches!(
            mistake(&format!(
                "{SETUP}clEnqueueMigrateMemObjects(q, b, CL_COMPLETE)"
            )),
            Mistake::ArgType { .. }
        ));
    }

    #[test]
    fn stream_flags_are_cuda_words() {
        assert_eq!(
            cuda("s = cudaStreamCreateWithFlags(cudaStreamNonBlocking)"),
            Ok(vec![Api::CudaStreamCreateWithFlags])
        );
        assert!(cuda("s = cudaStreamCreateWithFlags(cudaStreamDefault)").is_ok());
        assert!(matches!(
            cuda("s = cudaStreamCreateWithFlags(CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)"),
            Err(Mistake::ArgType { .. })
        ));
        assert!(matches!(
            cuda("s = cudaStreamCreateWithFlags()"),
            Err(Mistake::ArgCount { .. })
        ));
    }

    /// Stream on line 17, graph 18, its alloc node 19, a memset node 20.
    const GRAPH: &str = "s = cudaStreamCreate()\ng = cudaGraphCreate()\n\
        a = cudaGraphAddMemAllocNode(g, 2 MiB)\ncudaGraphAddMemsetNode(g, a)\n";

    fn freed_in_graph(line: u32) -> Result<Vec<Api>, Mistake> {
        Err(Mistake::GraphAllocFreedInGraph {
            name: "a".into(),
            line,
        })
    }

    #[test]
    fn a_graph_allocation_lives_from_a_launch_to_its_free() {
        // A free node (line 21) ends it in the graph; the exec outlives its graph.
        let free_node = format!(
            "{GRAPH}cudaGraphAddMemFreeNode(g, a)\ne = cudaGraphInstantiate(g)\n\
             cudaGraphDestroy(g)\ncudaGraphLaunch(e, s)\ncudaStreamSynchronize(s)\n\
             cudaDeviceGraphMemTrim()\ncudaGraphExecDestroy(e)"
        );
        let apis = cuda(&free_node).unwrap();
        assert!(apis.contains(&Api::CudaGraphAddMemFreeNode), "{apis:?}");
        // After the launch it is gone, and only its graph may free it.
        assert_eq!(
            cuda(&format!("{free_node}\ncudaMemsetAsync(a, s)")),
            freed_in_graph(21)
        );
        assert_eq!(
            cuda(&format!("{free_node}\ncudaFreeAsync(a, s)")),
            freed_in_graph(21)
        );
        // A second free node, or a node after the free, comes too late.
        assert_eq!(
            cuda(&format!(
                "{GRAPH}cudaGraphAddMemFreeNode(g, a)\ncudaGraphAddMemFreeNode(g, a)"
            )),
            freed_in_graph(21)
        );
        assert_eq!(
            cuda(&format!(
                "{GRAPH}cudaGraphAddMemFreeNode(g, a)\ncudaGraphAddMemsetNode(g, a)"
            )),
            freed_in_graph(21)
        );
        // Before any launch the allocation has no memory outside its graph.
        assert_eq!(
            cuda(&format!("{GRAPH}cudaMemsetAsync(a, s)")),
            Err(Mistake::GraphAllocNotLaunched {
                name: "a".into(),
                node_line: 19
            })
        );
        assert!(matches!(
            cuda(&format!("{GRAPH}cudaFree(a)")),
            Err(Mistake::GraphAllocNotLaunched { node_line: 19, .. })
        ));
        assert!(cuda(&format!("{GRAPH}cudaFree(a)  # expect-error")).is_ok());
    }

    #[test]
    fn an_allocation_kept_after_the_launch_is_freed_before_the_next() {
        // Instantiated on 21, launched on 22; used and freed after it, then again.
        let kept = format!("{GRAPH}e = cudaGraphInstantiate(g)\ncudaGraphLaunch(e, s)\n");
        let ok = format!(
            "{kept}cudaMemsetAsync(a, s)\ncudaFreeAsync(a, s)\ncudaGraphLaunch(e, s)\n\
             cudaFree(a)\ncudaGraphExecDestroy(e)\ncudaGraphDestroy(g)"
        );
        assert!(cuda(&ok).is_ok(), "{:?}", cuda(&ok));
        let relaunch = Err(Mistake::RelaunchWithLiveAlloc {
            exec: "e".into(),
            name: "a".into(),
            line: 22,
        });
        assert_eq!(cuda(&format!("{kept}cudaGraphLaunch(e, s)")), relaunch);
        // Marked, the refused launch changes nothing: the allocation of line 22
        // is still the one to free.
        assert!(
            cuda(&format!(
                "{kept}cudaGraphLaunch(e, s)  # expect-error\ncudaFreeAsync(a, s)"
            ))
            .is_ok()
        );
        assert_eq!(
            cuda(&format!("{kept}cudaFreeAsync(a, s)\ncudaFreeAsync(a, s)")),
            Err(Mistake::DoubleRelease {
                name: "a".into(),
                line: 23,
                earlier_iteration: false
            })
        );
        assert!(matches!(
            cuda(&format!("{kept}cudaFree(a)\ncudaMemsetAsync(a, s)")),
            Err(Mistake::UseAfterRelease { line: 23, .. })
        ));
        // A loop is checked twice: the free in the body makes the next launch legal.
        let looped = format!(
            "{GRAPH}e = cudaGraphInstantiate(g)\nrepeat 3 {{\ncudaGraphLaunch(e, s)\n\
             cudaFreeAsync(a, s)\n}}"
        );
        assert!(cuda(&looped).is_ok());
        let leaky =
            format!("{GRAPH}e = cudaGraphInstantiate(g)\nrepeat 3 {{\ncudaGraphLaunch(e, s)\n}}");
        assert!(matches!(
            cuda(&leaky),
            Err(Mistake::RelaunchWithLiveAlloc { line: 23, .. })
        ));
    }

    #[test]
    fn graphs_and_execs_keep_their_own_lifetimes() {
        let exec = format!("{GRAPH}e = cudaGraphInstantiate(g)\n");
        assert_eq!(
            cuda(&format!("{exec}cudaGraphAddMemFreeNode(g, a)")),
            Err(Mistake::NodeAfterInstantiate {
                graph: "g".into(),
                exec: "e".into(),
                line: 21
            })
        );
        assert_eq!(
            cuda(&format!("{exec}f = cudaGraphInstantiate(g)")),
            Err(Mistake::InstantiatedTwice {
                graph: "g".into(),
                exec: "e".into(),
                line: 21
            })
        );
        // Once the exec is gone the graph grows and is instantiated again.
        let again = format!(
            "{exec}cudaGraphExecDestroy(e)\ncudaGraphAddMemFreeNode(g, a)\nf = cudaGraphInstantiate(g)"
        );
        assert!(cuda(&again).is_ok());
        assert!(matches!(
            cuda(&format!(
                "{exec}cudaGraphExecDestroy(e)\ncudaGraphLaunch(e, s)"
            )),
            Err(Mistake::UseAfterRelease { line: 22, .. })
        ));
        assert!(matches!(
            cuda(&format!(
                "{exec}cudaGraphDestroy(g)\ncudaGraphAddMemsetNode(g, a)"
            )),
            Err(Mistake::UseAfterRelease { line: 22, .. })
        ));
        assert!(matches!(
            cuda(&format!("{exec}cudaGraphLaunch(g, s)")),
            Err(Mistake::WrongKind { .. })
        ));
        // A node names a buffer the launch needs alive.
        let named = "s = cudaStreamCreate()\nb = cudaMalloc(1 MiB)\ng = cudaGraphCreate()\n\
            cudaGraphAddMemsetNode(g, b)\ne = cudaGraphInstantiate(g)\ncudaFree(b)\n\
            cudaGraphLaunch(e, s)";
        assert_eq!(
            cuda(named),
            Err(Mistake::GraphNamesDead {
                exec: "e".into(),
                name: "b".into(),
                node_line: 20,
                line: 22
            })
        );
        assert_eq!(
            cuda("b = cudaMalloc(1 MiB)\ng = cudaGraphCreate()\ncudaGraphAddMemFreeNode(g, b)"),
            Err(Mistake::FreeNodeNotOwn {
                name: "b".into(),
                graph: "g".into()
            })
        );
    }
}
