//! Where a card's link may point. A card is a file others send: its recording
//! paths are checked before gpulab makes a link of them, so a card cannot put
//! `javascript:` in a page or name a file by an absolute path.

/// Whether `path`, a recording as a card names it, is a path from the card's
/// folder: relative, file names and `..` steps only (a card made `--from`
/// recordings elsewhere reaches them so), no scheme, no absolute path, nothing
/// that is not printable.
pub fn from_the_card(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && !path.contains('\\')
        && !path.contains(':')
        && !path.chars().any(gpulab_events::printable::acts)
        && path.split('/').all(|step| !step.is_empty() && step != ".")
}

/// `path` as a link target, when it is one gpulab made (a relative path; `..`
/// steps allowed, a matrix reaching its cards' folders): characters that would
/// end or change a Markdown link or an HTML attribute are percent-encoded. None
/// for anything with a scheme or an absolute path, whatever made it.
pub fn target(path: &str) -> Option<String> {
    if path.is_empty()
        || path.starts_with('/')
        || path.contains(':')
        || path.contains('\\')
        || path.chars().any(gpulab_events::printable::acts)
    {
        return None;
    }
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '/' | '.' | '-' | '_' | '~' | '+' | '=' | ',' => {
                out.push(c)
            }
            other => {
                let mut buf = [0u8; 4];
                for b in other.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("%{b:02X}"));
                }
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_card_names_recordings_by_paths_from_its_folder_only() {
        assert!(from_the_card(
            "recordings/opencl-0-cpu/cl-finish--finish.jsonl"
        ));
        assert!(from_the_card(
            "../../recordings/nvidia-h100/cl-finish--finish.jsonl"
        ));
        for bad in [
            "javascript:alert(5)",
            "/etc/passwd",
            "./run.jsonl",
            "a//b",
            "",
            "c:\\x",
            "run\u{202e}lsnoj.exe",
            "run\u{1b}[2J.jsonl",
        ] {
            assert!(!from_the_card(bad), "{bad:?}");
        }
    }

    #[test]
    fn a_link_target_has_no_scheme_and_nothing_that_ends_the_link() {
        assert_eq!(
            target("../../assets/cards/h200/recordings/a b(1).jsonl").as_deref(),
            Some("../../assets/cards/h200/recordings/a%20b%281%29.jsonl")
        );
        assert_eq!(target("javascript:alert(5)"), None);
        assert_eq!(target("/abs"), None);
        assert_eq!(
            target("x\"><script>.jsonl").as_deref(),
            Some("x%22%3E%3Cscript%3E.jsonl")
        );
    }
}
