//! Lesson files: labs in the order a class meets them, a question asked before
//! each run and a hint given after it (`lessons/<id>.toml`). Checked as labs are,
//! every mistake at its `file:line:col`, and against the labs the user has: a
//! step names a lab and a variant that exist.

use std::path::{Path, PathBuf};

use super::catalog::LabSet;
use super::error::{LabError, Result};
use super::mistake::{Mistake, Problem};
use super::raw::{self, Fields, Sp};
use super::suggest;

/// Shipped lessons, compiled in as the labs are.
pub const SHIPPED: &[(&str, &str)] = &[
    (
        "when-memory-comes-back.toml",
        include_str!("../lessons/when-memory-comes-back.toml"),
    ),
    (
        "calls-teachers-asked-for.toml",
        include_str!("../lessons/calls-teachers-asked-for.toml"),
    ),
];

/// A lesson: its steps in the order the class takes them.
#[derive(Debug, Clone, PartialEq)]
pub struct Lesson {
    pub id: String,
    pub title: String,
    /// Said before the first step: what the class is about.
    pub intro: String,
    pub steps: Vec<Step>,
}

/// One lab variant of a lesson, with what to ask before it runs and what to
/// say once its verdicts are in.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub lab: String,
    pub variant: String,
    pub minutes: u32,
    /// Asked before the run, while the class predicts; it must not give the
    /// answer away (the lesson's expectations stay hidden with it).
    pub question: String,
    /// Shown once the run's verdicts are in.
    pub hint: String,
}

impl Lesson {
    /// The minutes the steps take together.
    pub fn minutes(&self) -> u32 {
        self.steps.iter().map(|s| s.minutes).sum()
    }
}

const ROOT_KEYS: &[&str] = &["id", "title", "intro", "steps"];
const STEP_KEYS: &[&str] = &["lab", "variant", "minutes", "question", "hint"];

/// Whether a TOML text reads as a lesson rather than a lab: it has `[[steps]]`
/// and no `[[variants]]`. `gpulab check` uses it to pick the checker.
pub fn looks_like_lesson(text: &str) -> bool {
    let Ok(doc) = toml::de::DeTable::parse(text) else {
        return false;
    };
    let root = doc.get_ref();
    root.get("steps").is_some() && root.get("variants").is_none()
}

/// Parses and checks one lesson against `labs`; `file` names it in messages.
pub fn parse(file: &str, text: &str, labs: &LabSet) -> Result<Lesson> {
    read(text, labs).map_err(|problems| {
        super::catalog::invalid(file, text, &problems, "the lesson is not valid")
    })
}

/// A lesson file on disk.
pub fn load_file(path: &Path, labs: &LabSet) -> Result<Lesson> {
    let bytes = std::fs::read(path).map_err(|source| LabError::Io {
        path: path.to_owned(),
        source,
    })?;
    let file = path.display().to_string();
    match String::from_utf8(bytes) {
        Ok(text) => parse(&file, &text, labs),
        Err(e) => Err(super::catalog::not_utf8(&file, &e)),
    }
}

/// The shipped lessons, each checked against `labs`.
pub fn shipped(labs: &LabSet) -> Vec<Result<Lesson>> {
    SHIPPED
        .iter()
        .map(|(name, text)| parse(&format!("lessons/{name}"), text, labs))
        .collect()
}

/// `--lesson NAME`: a shipped lesson's id, or the path of a lesson file.
pub fn find(name: &str, labs: &LabSet) -> Result<Lesson> {
    let path = PathBuf::from(name);
    if path.extension().is_some_and(|x| x == "toml") || path.components().count() > 1 {
        return load_file(&path, labs);
    }
    let shipped: Vec<Lesson> = shipped(labs).into_iter().collect::<Result<_>>()?;
    if let Some(found) = shipped.iter().find(|l| l.id == name) {
        return Ok(found.clone());
    }
    Err(LabError::UnknownLesson {
        name: name.to_owned(),
        suggestion: suggest::nearest(name, shipped.iter().map(|l| l.id.as_str()))
            .map(str::to_owned),
        known: shipped.iter().map(|l| l.id.clone()).collect(),
    })
}

fn read(text: &str, labs: &LabSet) -> std::result::Result<Lesson, Vec<Problem>> {
    let doc = toml::de::DeTable::parse(text).map_err(|e| vec![raw::toml_problem(text, &e)])?;
    let one = |p: Problem| vec![p];
    let root = Fields::new(text, doc.get_ref(), 0..0, "the lesson file", ROOT_KEYS).map_err(one)?;
    let id = root.string("id").map_err(one)?;
    let title = root.string("title").map_err(one)?;
    let intro = root.string("intro").map_err(one)?;
    let mut problems = Vec::new();
    if !super::validate::is_slug(&id.value) {
        problems.push(Problem::new(
            id.span.clone(),
            Mistake::BadId {
                what: "lesson",
                id: id.value.clone(),
            },
        ));
    }
    for (key, v) in [("title", &title), ("intro", &intro)] {
        if v.value.trim().is_empty() {
            problems.push(Problem::new(v.span.clone(), Mistake::Empty { key }));
        }
    }
    if title.value.contains('\n') {
        problems.push(Problem::new(
            title.span.clone(),
            Mistake::MultiLine { key: "title" },
        ));
    }
    let tables = root.tables("steps", "[[steps]]", STEP_KEYS).map_err(one)?;
    if tables.is_empty() {
        problems.push(Problem::new(0..0, Mistake::NoSteps));
    }
    let mut steps: Vec<(Step, usize)> = Vec::new();
    for t in &tables {
        match step(t, labs) {
            Ok((step, at)) => {
                if let Some((_, first)) = steps
                    .iter()
                    .find(|(s, _)| s.lab == step.lab && s.variant == step.variant)
                {
                    problems.push(Problem::new(
                        at..at + 1,
                        Mistake::Duplicate {
                            what: "a step for lab variant",
                            name: format!("{} [{}]", step.lab, step.variant),
                            first_line: super::diagnostic::line_col(text, *first).0,
                        },
                    ));
                }
                steps.push((step, at));
            }
            Err(mut p) => problems.append(&mut p),
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(Lesson {
        id: id.value,
        title: title.value,
        intro: intro.value,
        steps: steps.into_iter().map(|(s, _)| s).collect(),
    })
}

/// One `[[steps]]` table, and the offset of its `lab` value (where a duplicate
/// is pointed at).
fn step(t: &Fields<'_, '_>, labs: &LabSet) -> std::result::Result<(Step, usize), Vec<Problem>> {
    let one = |p: Problem| vec![p];
    let lab = t.string("lab").map_err(one)?;
    let variant = t.string("variant").map_err(one)?;
    let minutes = t.number("minutes").map_err(one)?;
    let question = t.string("question").map_err(one)?;
    let hint = t.string("hint").map_err(one)?;
    let mut problems = Vec::new();
    let ids = || labs.labs().iter().map(|l| l.id.as_str());
    match labs.labs().iter().find(|l| l.id == lab.value) {
        None => problems.push(Problem::new(
            lab.span.clone(),
            Mistake::UnknownLab {
                id: lab.value.clone(),
                suggestion: suggest::nearest(&lab.value, ids()).map(str::to_owned),
            },
        )),
        Some(found) if found.variants.iter().all(|v| v.name != variant.value) => {
            problems.push(Problem::new(
                variant.span.clone(),
                Mistake::UnknownVariant {
                    name: variant.value.clone(),
                    suggestion: suggest::nearest(
                        &variant.value,
                        found.variants.iter().map(|v| v.name.as_str()),
                    )
                    .map(str::to_owned),
                },
            ));
        }
        Some(_) => {}
    }
    let whole = minutes.value.fract() == 0.0 && (1.0..=120.0).contains(&minutes.value);
    if !whole {
        problems.push(Problem::new(
            minutes.span.clone(),
            Mistake::BadMinutes {
                found: minutes.value,
            },
        ));
    }
    for (key, v) in [("question", &question), ("hint", &hint)] {
        if v.value.trim().is_empty() {
            problems.push(Problem::new(v.span.clone(), Mistake::Empty { key }));
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let Sp { value: lab, span } = lab;
    Ok((
        Step {
            lab,
            variant: variant.value,
            minutes: minutes.value as u32,
            question: question.value,
            hint: hint.value,
        },
        span.start,
    ))
}

#[cfg(test)]
mod tests;
