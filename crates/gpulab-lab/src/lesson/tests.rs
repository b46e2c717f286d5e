use super::*;

fn labs() -> LabSet {
    LabSet::load(&[])
}

fn shipped_text() -> &'static str {
    SHIPPED[0].1
}

#[test]
fn every_shipped_lesson_checks_against_the_shipped_labs() {
    let labs = labs();
    for (lesson, (name, _)) in shipped(&labs).into_iter().zip(SHIPPED) {
        let lesson = lesson.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!lesson.steps.is_empty(), "{name}");
        assert_eq!(
            format!("{}.toml", lesson.id),
            *name,
            "a lesson's file is its id"
        );
        for s in &lesson.steps {
            let lab = labs.get(&s.lab).unwrap();
            assert!(lab.variants.iter().any(|v| v.name == s.variant), "{s:?}");
        }
    }
}

#[test]
fn the_shipped_class_takes_its_45_minutes_over_the_seed_scenarios() {
    let lesson = find("when-memory-comes-back", &labs()).unwrap();
    assert_eq!(lesson.minutes(), 45);
    let ids: Vec<&str> = lesson.steps.iter().map(|s| s.lab.as_str()).collect();
    for seed in [
        "cl-premature-release",
        "cl-finish",
        "cl-event-wait",
        "cuda-free-async",
        "cl-forgotten-events",
    ] {
        assert!(ids.contains(&seed), "{seed} missing from {ids:?}");
    }
}

#[test]
fn a_question_never_says_what_the_lesson_expects() {
    // Class mode hides the lesson's expectations before the run; a question
    // that wrote them out would give the answer away.
    let labs = labs();
    for lesson in shipped(&labs) {
        for s in lesson.unwrap().steps {
            let q = s.question.to_lowercase();
            for said in ["holds", "does not hold", "the lesson expects"] {
                assert!(!q.contains(said), "{}: `{said}` in {q:?}", s.lab);
            }
        }
    }
}

/// The shipped lesson with one value changed: each kind of mistake, in each
/// step, is named at the line and column of the changed value.
#[test]
fn every_mistake_in_every_step_is_named_where_it_is() {
    let labs = labs();
    let text = shipped_text();
    type Change = fn(&str) -> String;
    let mutations: &[(&str, Change, &str)] = &[
        ("lab = \"", |v| format!("{v}x"), "unknown lab"),
        ("variant = \"", |v| format!("{v}x"), "unknown variant"),
        ("minutes = ", |_| "0".into(), "`minutes` is 0"),
    ];
    let mut checked = 0;
    for (key, change, said) in mutations {
        for (at, _) in text.match_indices(key) {
            let start = at + key.len();
            let end = start
                + text[start..]
                    .find(['"', '\n'])
                    .unwrap_or(text.len() - start);
            let changed = format!(
                "{}{}{}",
                &text[..start],
                change(&text[start..end]),
                &text[end..]
            );
            let Err(LabError::Invalid(d)) = parse("l.toml", &changed, &labs) else {
                panic!("{key} at {at}: the change was accepted");
            };
            let (line, col) = super::super::diagnostic::line_col(&changed, start);
            // A string's span starts at its opening quote.
            let quoted = usize::from(key.ends_with('"'));
            assert_eq!(
                (d.line, d.col + u32::try_from(quoted).unwrap()),
                (line, col),
                "{key} at {at}: {d}"
            );
            assert!(d.message.contains(said), "{d}");
            checked += 1;
        }
    }
    assert!(checked >= 15, "{checked} mistakes made");
}

#[test]
fn a_misspelt_lab_is_suggested_and_a_repeated_step_named() {
    let labs = labs();
    let text = shipped_text().replacen("lab = \"cl-finish\"", "lab = \"cl-finsh\"", 1);
    let err = parse("l.toml", &text, &labs).unwrap_err().to_string();
    assert!(err.contains("did you mean `cl-finish`"), "{err}");

    let step = "\n[[steps]]\nlab = \"cl-finish\"\nvariant = \"no-wait\"\nminutes = 1\n\
                question = \"q\"\nhint = \"h\"\n";
    let text = format!("{}{step}", shipped_text());
    let err = parse("l.toml", &text, &labs).unwrap_err().to_string();
    assert!(
        err.contains("cl-finish [no-wait]") && err.contains("already defined on line"),
        "{err}"
    );
}

#[test]
fn shapes_a_lesson_must_have() {
    let labs = labs();
    let head = "id = \"x\"\ntitle = \"t\"\nintro = \"i\"\n";
    let cases = [
        (head.to_string(), "at least one `[[steps]]`"),
        (format!("{head}color = 1\n"), "unknown key `color`"),
        (
            format!("{head}[[steps]]\nlab = \"cl-finish\"\nvariant = \"no-wait\"\nminutes = 2.5\nquestion = \"q\"\nhint = \"h\"\n"),
            "`minutes` is 2.5",
        ),
        (
            format!("{head}[[steps]]\nlab = \"cl-finish\"\nvariant = \"no-wait\"\nminutes = 2\nquestion = \" \"\nhint = \"h\"\n"),
            "`question` must not be empty",
        ),
        (
            format!("{head}[[steps]]\nlab = \"cl-finish\"\nvariant = \"no-wait\"\nminutes = 2\nquestion = \"q\"\n"),
            "needs a `hint` key",
        ),
        ("id = \"X y\"\ntitle = \"t\"\nintro = \"i\"\n[[steps]]\nlab = \"cl-finish\"\nvariant = \"no-wait\"\nminutes = 2\nquestion = \"q\"\nhint = \"h\"\n".into(), "lesson id `X y`"),
    ];
    for (text, said) in cases {
        let err = parse("l.toml", &text, &labs).unwrap_err().to_string();
        assert!(err.contains(said), "{said:?} not in {err}");
        assert!(err.starts_with("l.toml:"), "{err}");
    }
}

#[test]
fn a_lesson_is_told_from_a_lab() {
    assert!(looks_like_lesson(shipped_text()));
    for (_, lab) in crate::catalog::SHIPPED {
        assert!(!looks_like_lesson(lab));
    }
    assert!(!looks_like_lesson("not toml ["));
}

#[test]
fn an_unknown_lesson_lists_the_shipped_ones() {
    let err = find("when-memory-come-back", &labs())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("did you mean `when-memory-comes-back`"),
        "{err}"
    );
    let err = find("nothing/here.toml", &labs()).unwrap_err().to_string();
    assert!(err.contains("cannot read nothing/here.toml"), "{err}");
}
