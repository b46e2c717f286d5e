//! The error a lab was looking for, read from the recorded calls: a call on a line
//! marked `# expect-error` that returned an error (and the calls after it that
//! failed the same way, which is what a sticky error does), or the failing call
//! an `--until-failure` run went on until. Nothing here knows which codes are
//! sticky: the calls say so, so a replay finds the same.

use serde::Serialize;

use super::Run;
use crate::trace::{Call, CallStatus, EndStatus};

/// Why the failure is the run's point rather than its breakdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// A line marked `# expect-error` returned an error.
    ExpectedError,
    /// An `--until-failure` run reached a failing call.
    UntilFailure,
}

/// A failure the lab (or the user) went looking for.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Finding {
    pub kind: FindingKind,
    pub line: u32,
    /// The line as the script wrote it (the API name when the script is unknown).
    pub call: String,
    pub error: String,
    /// Later lines whose calls failed with the same error (before any call
    /// failed otherwise): the error stayed.
    pub sticky_lines: Vec<u32>,
    /// Lines between those whose calls succeeded: calls that do not see the
    /// error (on the H100, `cudaMemPoolTrimTo` succeeds in a context a sticky
    /// error poisoned), said so the reader is not misled.
    pub passed_lines: Vec<u32>,
    /// The run ended on this failure, or on a later call that failed because of it.
    pub ended_run: bool,
    /// The finding in words, as the reports print it.
    pub said: String,
}

impl Finding {
    /// The run's failure is the finding: `gpulab run` exits 0 on it.
    pub fn explains_end(&self) -> bool {
        self.ended_run
    }
}

fn error_of(c: &Call) -> Option<&str> {
    match &c.status {
        CallStatus::Error { name, .. } => Some(name),
        _ => None,
    }
}

impl Run {
    /// The failure the lab was looking for, if a call returned it.
    pub fn finding(&self) -> Option<Finding> {
        let failed_line = match self.end.as_ref().map(|e| &e.status) {
            Some(EndStatus::Failed { line: Some(l), .. }) => Some(*l),
            _ => None,
        };
        if let Some(f) = self.expected_error(failed_line) {
            return Some(f);
        }
        let until_failure = self
            .meta
            .as_ref()
            .and_then(|m| m.lab.as_ref())
            .is_some_and(|l| l.until_failure);
        let line = failed_line.filter(|_| until_failure)?;
        let error = self.folds.lines.get(&line)?.error.clone()?;
        let api = self.folds.error_api.get(&line)?;
        let text = self.line_text(line, api);
        Some(Finding {
            kind: FindingKind::UntilFailure,
            line,
            said: format!(
                "line {line} `{text}` returned {error}: the failure this --until-failure run went on until"
            ),
            call: text,
            error,
            sticky_lines: Vec::new(),
            passed_lines: Vec::new(),
            ended_run: true,
        })
    }

    /// The first call on an `# expect-error` line that returned an error, and
    /// the later calls that failed the same way (up to one that failed
    /// otherwise), with the ones that succeeded between them.
    fn expected_error(&self, failed_line: Option<u32>) -> Option<Finding> {
        let found = &self.folds.expected;
        let marked = found.marked.as_ref()?;
        let line = marked.line?;
        let error = error_of(marked)?.to_string();
        let sticky_lines = found.sticky_lines.clone();
        let passed = found.passed.clone();
        // Successes after the last repeat of the error say nothing about it.
        let last = sticky_lines.last().copied();
        let passed_lines: Vec<u32> = passed
            .into_iter()
            .filter(|l| last.is_some_and(|last| *l < last))
            .collect();
        let ended_run =
            failed_line.is_some_and(|l| l == line || sticky_lines.last().is_some_and(|s| *s == l));
        let text = self.line_text(line, &marked.api);
        let mut said =
            format!("line {line} `{text}` returned {error}, the error this lab looks for");
        if !sticky_lines.is_empty() {
            let lines: Vec<String> = sticky_lines
                .iter()
                .map(|l| format!("{l} `{}`", self.line_text(*l, "")))
                .collect();
            let plural = |n: usize| if n == 1 { "" } else { "s" };
            if passed_lines.is_empty() {
                said.push_str(&format!(
                    "; later calls failed the same way because the error is sticky (line{} {})",
                    plural(lines.len()),
                    lines.join(", ")
                ));
            } else {
                let passed: Vec<String> = passed_lines
                    .iter()
                    .map(|l| format!("{l} `{}`", self.line_text(*l, "")))
                    .collect();
                said.push_str(&format!(
                    "; later calls failed with the same error (line{} {}), while line{} {} \
                     between them succeeded: the error stayed, though not every call sees it",
                    plural(lines.len()),
                    lines.join(", "),
                    plural(passed.len()),
                    passed.join(", ")
                ));
            }
            if ended_run {
                said.push_str(", and the script stopped there");
            }
        } else if ended_run {
            said.push_str("; the script stopped there");
        }
        Some(Finding {
            kind: FindingKind::ExpectedError,
            line,
            call: text,
            error,
            sticky_lines,
            passed_lines,
            ended_run,
            said,
        })
    }

    /// A script line's text, or `fallback` when the stream has no script.
    fn line_text(&self, line: u32, fallback: &str) -> String {
        self.meta
            .as_ref()
            .and_then(|m| m.lab.as_ref())
            .and_then(|l| l.script.iter().find(|(n, _)| *n == line))
            .map_or_else(|| fallback.to_string(), |(_, t)| t.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;
    use crate::trace::{End, Event, LabMeta, Meta};

    fn call(seq: u64, line: u32, status: CallStatus, expect_error: bool) -> Event {
        Event::Call(Call {
            seq,
            pid: 1,
            thread: 0,
            line: Some(line),
            iter: vec![],
            tag: None,
            api: "cudaStreamSynchronize".into(),
            driver: "cuStreamSynchronize".into(),
            begin_ns: seq * 10,
            end_ns: seq * 10 + 5,
            status,
            expect_error,
            mem_before: None,
            mem_after: None,
            object: None,
            cuda: None,
            memory_step: None,
            refused: None,
            freed_unseen: false,
            returned: None,
        })
    }

    fn err(name: &str) -> CallStatus {
        CallStatus::Error {
            code: 700,
            name: name.into(),
        }
    }

    fn end(status: EndStatus) -> Event {
        Event::End(End {
            t_ns: 1_000,
            status,
            leaked: vec![],
        })
    }

    fn failed(line: u32) -> Event {
        end(EndStatus::Failed {
            line: Some(line),
            error: "it failed".into(),
        })
    }

    fn meta(until_failure: bool) -> Event {
        let script = vec![
            (4, "cudaFree(buf)".into()),
            (5, "cudaStreamSynchronize(s)".into()),
            (6, "cudaStreamDestroy(s)".into()),
        ];
        Event::Meta(Box::new(Meta {
            lab: Some(LabMeta {
                until_failure,
                ..testing::lab("lab", script)
            }),
            ..testing::meta()
        }))
    }

    const ILLEGAL: &str = "CUDA_ERROR_ILLEGAL_ADDRESS";

    #[test]
    fn a_sticky_error_on_a_marked_line_explains_the_failure_after_it() {
        let run = Run::from_events(&[
            meta(false),
            call(0, 4, CallStatus::Ok, false),
            call(1, 5, err(ILLEGAL), true),
            call(2, 6, err(ILLEGAL), false),
            failed(6),
        ]);
        let f = run.finding().unwrap();
        assert_eq!((f.line, f.error.as_str()), (5, ILLEGAL));
        assert_eq!(f.sticky_lines, vec![6]);
        assert!(f.explains_end());
        assert!(
            f.said.starts_with("line 5 `cudaStreamSynchronize(s)` returned CUDA_ERROR_ILLEGAL_ADDRESS, the error this lab looks for; later calls failed the same way because the error is sticky (line 6 `cudaStreamDestroy(s)`)"),
            "{}",
            f.said
        );
    }

    #[test]
    fn an_error_on_an_unmarked_line_is_no_finding() {
        let run = Run::from_events(&[
            meta(false),
            call(0, 4, CallStatus::Ok, false),
            call(1, 5, err(ILLEGAL), false),
            failed(5),
        ]);
        assert_eq!(run.finding(), None);
    }

    #[test]
    fn a_different_error_after_the_marked_one_is_not_explained() {
        let run = Run::from_events(&[
            meta(false),
            call(0, 4, err("CUDA_ERROR_INVALID_VALUE"), true),
            call(1, 5, err(ILLEGAL), false),
            failed(5),
        ]);
        let f = run.finding().unwrap();
        assert!(f.sticky_lines.is_empty());
        assert!(!f.explains_end());
    }

    /// As cuda-mixed-free did on the H100: the sticky error at the marked sync,
    /// `cudaMemPoolTrimTo` still succeeding, then `cudaStreamDestroy` failing
    /// with the same error. The end is the finding, and the success is said.
    #[test]
    fn a_success_between_is_said_and_the_same_error_later_still_explains_the_end() {
        let run = Run::from_events(&[
            meta(false),
            call(0, 4, err(ILLEGAL), true),
            call(1, 5, CallStatus::Ok, false),
            call(2, 6, err(ILLEGAL), false),
            failed(6),
        ]);
        let f = run.finding().unwrap();
        assert_eq!(f.sticky_lines, vec![6]);
        assert_eq!(f.passed_lines, vec![5]);
        assert!(f.explains_end());
        assert!(f.said.contains("while line 5"), "{}", f.said);
    }

    #[test]
    fn a_success_after_the_last_repeat_is_not_said() {
        let run = Run::from_events(&[
            meta(false),
            call(0, 4, err(ILLEGAL), true),
            call(1, 5, err(ILLEGAL), false),
            call(2, 6, CallStatus::Ok, false),
        ]);
        let f = run.finding().unwrap();
        assert!(f.passed_lines.is_empty());
        assert!(!f.said.contains("while"), "{}", f.said);
    }

    #[test]
    fn a_finished_run_still_states_its_expected_error() {
        let run = Run::from_events(&[
            meta(false),
            call(0, 4, err("CUDA_ERROR_INVALID_VALUE"), true),
            call(1, 5, CallStatus::Ok, false),
            end(EndStatus::Finished),
        ]);
        let f = run.finding().unwrap();
        assert!(!f.explains_end());
        assert_eq!(
            f.said,
            "line 4 `cudaFree(buf)` returned CUDA_ERROR_INVALID_VALUE, the error this lab looks for"
        );
    }

    #[test]
    fn a_marked_line_that_succeeded_is_no_finding() {
        let run = Run::from_events(&[
            meta(false),
            call(0, 4, CallStatus::Ok, true),
            end(EndStatus::Finished),
        ]);
        assert_eq!(run.finding(), None);
    }

    #[test]
    fn until_failure_runs_find_the_failure_they_went_for() {
        let events = [
            meta(true),
            call(0, 4, CallStatus::Ok, false),
            call(1, 5, err("CUDA_ERROR_OUT_OF_MEMORY"), false),
            failed(5),
        ];
        let f = Run::from_events(&events).finding().unwrap();
        assert_eq!(f.kind, FindingKind::UntilFailure);
        assert!(f.explains_end());
        assert!(f.said.contains("--until-failure"), "{}", f.said);
        // The same failure without --until-failure is the run's breakdown.
        let mut plain = events.clone();
        plain[0] = meta(false);
        assert_eq!(Run::from_events(&plain).finding(), None);
    }
}
