//! `watch --suppressions FILE`: findings the `--fail-on` gate lets pass, as
//! valgrind's suppression files do for errors a project has judged. Only the
//! gate reads them; the report still lists everything it found.
//!
//! One rule a line, `#` starts a comment:
//!
//! ```text
//! leak   kind=event made_by=clCreateUserEvent
//! leak   frame=*/third_party/*
//! misuse what=sync_free_of_stream_ordered frame=train.cu:*
//! ```
//!
//! A rule is the finding it suppresses (`leak` or `misuse`) and tests that
//! must all hold, each `key=pattern`; a pattern matches the whole value, `*`
//! any run of characters and `?` one. `frame` holds when any frame of the
//! finding's stack matches by function, `file:line` location (its path, or
//! the file's name alone: `train.cu:*`), module path or module name.

use crate::trace::Frame;

use super::{AliveGroup, MisuseRow};

/// The finding a rule suppresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finding {
    Leak,
    Misuse,
}

/// What a test reads of a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    /// The object kind (`event`, `buffer`).
    Kind,
    /// The call that made the object.
    MadeBy,
    /// The misusing call.
    Call,
    /// The misuse, as the report names it (`use_after_release`).
    What,
    /// Any frame of its stack.
    Frame,
}

impl Key {
    fn parse(word: &str) -> Option<Key> {
        Some(match word {
            "kind" => Key::Kind,
            "made_by" => Key::MadeBy,
            "call" => Key::Call,
            "what" => Key::What,
            "frame" => Key::Frame,
            _ => return None,
        })
    }

    /// Whether findings of `f` have this key.
    fn applies(self, f: Finding) -> bool {
        match self {
            Key::Kind | Key::MadeBy | Key::Frame => true,
            Key::Call | Key::What => f == Finding::Misuse,
        }
    }
}

#[derive(Debug, Clone)]
struct Rule {
    /// Where it was written: `file:line`.
    at: String,
    finding: Finding,
    tests: Vec<(Key, String)>,
}

/// The rules of one or more suppression files, in the order written.
#[derive(Debug, Clone, Default)]
pub struct Suppressions {
    rules: Vec<Rule>,
}

impl Suppressions {
    /// Reads the rules of `text`, which came from `file`; a mistake is
    /// `file:line:col: what is wrong`.
    pub fn parse(file: &str, text: &str) -> Result<Suppressions, String> {
        let mut rules = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("");
            let mut words = words_at(line);
            let Some((col, first)) = words.next() else {
                continue;
            };
            let at = |col: usize| format!("{file}:{}:{}", i + 1, col + 1);
            let finding = match first {
                "leak" => Finding::Leak,
                "misuse" => Finding::Misuse,
                "oom" | "error" => {
                    return Err(format!(
                        "{}: `{first}` cannot be suppressed: a refused allocation or a failed \
                         call is the program's answer from the driver; only `leak` and `misuse` \
                         rules are read",
                        at(col)
                    ));
                }
                other => {
                    return Err(format!(
                        "{}: `{other}` is not a finding: a rule starts with `leak` or `misuse`",
                        at(col)
                    ));
                }
            };
            let mut tests = Vec::new();
            for (col, word) in words {
                let Some((key, pattern)) = word.split_once('=') else {
                    return Err(format!(
                        "{}: `{word}` is not a test: write key=pattern (kind, made_by, call, \
                         what, frame)",
                        at(col)
                    ));
                };
                let Some(k) = Key::parse(key) else {
                    return Err(format!(
                        "{}: `{key}` is not a key: kind, made_by, call, what or frame",
                        at(col)
                    ));
                };
                if !k.applies(finding) {
                    return Err(format!(
                        "{}: `{key}` is a misuse's, not a {first}'s",
                        at(col)
                    ));
                }
                if pattern.is_empty() {
                    return Err(format!("{}: `{key}=` has no pattern", at(col)));
                }
                tests.push((k, pattern.to_string()));
            }
            if tests.is_empty() {
                return Err(format!(
                    "{}: a rule with no test would suppress every {first}: add key=pattern, \
                     or `{first} frame=*` to mean it",
                    at(col)
                ));
            }
            rules.push(Rule {
                at: format!("{file}:{}", i + 1),
                finding,
                tests,
            });
        }
        Ok(Suppressions { rules })
    }

    /// The rules of `other` after these.
    pub fn extend(&mut self, other: Suppressions) {
        self.rules.extend(other.rules);
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The first rule that suppresses this group of leaked objects, as `file:line`.
    pub fn leak(&self, g: &AliveGroup) -> Option<&str> {
        self.first(Finding::Leak, |key, pattern| match key {
            Key::Kind => glob(pattern, g.kind.as_str()),
            Key::MadeBy => glob(pattern, &g.created_by),
            Key::Frame => any_frame(pattern, &g.backtrace),
            Key::Call | Key::What => false,
        })
    }

    /// The first rule that suppresses this misuse, as `file:line`.
    pub fn misuse(&self, m: &MisuseRow) -> Option<&str> {
        self.first(Finding::Misuse, |key, pattern| match key {
            Key::Kind => glob(pattern, m.kind.as_str()),
            Key::MadeBy => m
                .made_by
                .as_deref()
                .is_some_and(|b| glob(pattern, b.split_whitespace().next().unwrap_or(b))),
            Key::Call => glob(pattern, &m.call),
            Key::What => glob(pattern, m.what.name()),
            Key::Frame => any_frame(pattern, &m.backtrace),
        })
    }

    fn first(&self, finding: Finding, holds: impl Fn(Key, &str) -> bool) -> Option<&str> {
        self.rules
            .iter()
            .find(|r| r.finding == finding && r.tests.iter().all(|(k, p)| holds(*k, p)))
            .map(|r| r.at.as_str())
    }
}

/// The words of a line with the column each starts at.
fn words_at(line: &str) -> impl Iterator<Item = (usize, &str)> {
    line.split_whitespace().map(move |w| {
        // A word is a subslice of the line: its offset is its column.
        let col = w.as_ptr() as usize - line.as_ptr() as usize;
        (col, w)
    })
}

fn any_frame(pattern: &str, frames: &[Frame]) -> bool {
    frames.iter().any(|f| {
        let module_name = f.module.rsplit('/').next().unwrap_or(&f.module);
        f.function.as_deref().is_some_and(|x| glob(pattern, x))
            || f.location.as_deref().is_some_and(|x| {
                glob(pattern, x) || glob(pattern, x.rsplit('/').next().unwrap_or(x))
            })
            || glob(pattern, &f.module)
            || glob(pattern, module_name)
    })
}

/// Whether `pattern` matches all of `text`: `*` any run of characters, `?`
/// one character, anything else itself.
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    // The last `*` seen and where in the text it was tried to end.
    let (mut pi, mut ti, mut star) = (0, 0, None::<(usize, usize)>);
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(c) if *c == '?' || *c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                // Let the last `*` take one more character.
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{MisuseKind, ObjKind};

    fn frame(function: &str, location: &str) -> Frame {
        Frame {
            module: "/opt/app/bin/app".into(),
            address: 0x10,
            build_id: None,
            function: Some(function.into()),
            location: Some(location.into()),
            python: false,
        }
    }

    fn group(kind: ObjKind, made_by: &str, backtrace: Vec<Frame>) -> AliveGroup {
        AliveGroup {
            kind,
            count: 1,
            bytes: 0,
            created_by: made_by.into(),
            owner: "program".into(),
            kept_by_allocator: false,
            kept_by_runtime: false,
            pid: 1,
            thread: 1,
            uncertain: false,
            backtrace,
        }
    }

    #[test]
    fn globs_match_whole_values_with_stars_and_marks() {
        for (p, t, want) in [
            ("*", "", true),
            ("*", "anything", true),
            ("cl*Event", "clCreateUserEvent", true),
            ("cl*Event", "clCreateUserEvents", false),
            ("train.cu:*", "train.cu:12", true),
            ("*/third_party/*", "/src/third_party/x.c:3", true),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("*a*a*a", "aaaa", true),
            ("*ab", "aab", true),
            ("ab", "abc", false),
            ("", "", true),
        ] {
            assert_eq!(glob(p, t), want, "{p:?} on {t:?}");
        }
    }

    #[test]
    fn a_rule_suppresses_only_what_all_its_tests_match() {
        let s = Suppressions::parse(
            "s.supp",
            "# judged: the user events are the framework's\n\
             leak kind=event made_by=clCreateUserEvent\n\
             \n\
             leak frame=*/third_party/*   # vendored\n\
             misuse what=sync_free_of_stream_ordered frame=train.cu:*\n",
        )
        .unwrap();
        let user = group(ObjKind::Event, "clCreateUserEvent", vec![]);
        assert_eq!(s.leak(&user), Some("s.supp:2"));
        let buffer = group(ObjKind::Buffer, "clCreateUserEvent", vec![]);
        assert_eq!(s.leak(&buffer), None);
        let vendored = group(
            ObjKind::Buffer,
            "clCreateBuffer",
            vec![frame("load", "/src/third_party/x.c:3")],
        );
        assert_eq!(s.leak(&vendored), Some("s.supp:4"));
        let row = |what: MisuseKind, at: &str| MisuseRow {
            what,
            call: "cuMemFree".into(),
            pid: 1,
            thread: 1,
            at_ms: 1.0,
            kind: ObjKind::Buffer,
            object: "#3".into(),
            made_by: Some("cuMemAllocAsync (pid 1, thread 1)".into()),
            made_at: vec![],
            released_ms: None,
            backtrace: vec![frame("main", at)],
            after: None,
        };
        assert_eq!(
            s.misuse(&row(MisuseKind::SyncFreeOfStreamOrdered, "train.cu:40")),
            Some("s.supp:5")
        );
        assert_eq!(
            s.misuse(&row(MisuseKind::DoubleRelease, "train.cu:40")),
            None
        );
        assert_eq!(
            s.misuse(&row(MisuseKind::SyncFreeOfStreamOrdered, "eval.cu:40")),
            None
        );
    }

    #[test]
    fn each_mistake_in_a_file_is_named_at_its_line_and_column() {
        for (text, want) in [
            ("leek kind=event", "f:1:1: `leek` is not a finding"),
            ("leak\n", "f:1:1: a rule with no test"),
            ("\n  leak kind", "f:2:8: `kind` is not a test"),
            ("leak colour=red", "f:1:6: `colour` is not a key"),
            ("leak call=clFinish", "f:1:6: `call` is a misuse's"),
            ("misuse call=", "f:1:8: `call=` has no pattern"),
            ("oom call=cuMemAlloc", "f:1:1: `oom` cannot be suppressed"),
        ] {
            let err = Suppressions::parse("f", text).unwrap_err();
            assert!(
                err.starts_with(want) || err.contains(want),
                "{text:?}: {err}"
            );
        }
    }
}
