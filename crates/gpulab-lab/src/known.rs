//! Calls gpulab's catalog lacks: a real OpenCL or CUDA call (its name is in
//! `known_calls.txt`, gathered from their headers) is said to be one, with the
//! catalog's nearest calls of its own API; any other name is a typo, suggested
//! only among the calls of its own API.

use super::api::{APIS, BackendKind};
use super::mistake::Mistake;

/// Every OpenCL and CUDA call name there is (from their headers), sorted.
const KNOWN_CALLS: &str = include_str!("known_calls.txt");

/// The words of a call's name after its API's prefix, lower-case:
/// `cudaLaunchHostFunc` → launch, host, func; `clSVMAlloc` → svm, alloc.
fn camel_words(name: &str) -> Vec<String> {
    let rest = name
        .strip_prefix("cuda")
        .or_else(|| name.strip_prefix("cu"))
        .or_else(|| name.strip_prefix("cl"))
        .unwrap_or(name);
    let mut out: Vec<String> = Vec::new();
    let chars: Vec<char> = rest.chars().collect();
    let mut word = String::new();
    for (i, &c) in chars.iter().enumerate() {
        // A capital starts a word unless it continues an acronym (`SVM` in
        // `SVMAlloc` ends before the `A` that a lower-case letter follows).
        let next_lower = chars.get(i + 1).is_some_and(char::is_ascii_lowercase);
        let prev_upper = i > 0 && chars[i - 1].is_ascii_uppercase();
        if c.is_ascii_uppercase() && !word.is_empty() && (!prev_upper || next_lower) {
            out.push(std::mem::take(&mut word).to_ascii_lowercase());
        }
        word.push(c);
    }
    if !word.is_empty() {
        out.push(word.to_ascii_lowercase());
    }
    out
}

/// The API a call's name belongs to, by its prefix: `cl…` OpenCL, `cuda…` or
/// `cu…` CUDA; a C library call the catalog has (`malloc`) is its entry's;
/// None for any other name.
pub fn api_of(name: &str) -> Option<BackendKind> {
    let upper_after = |p: &str| {
        name.strip_prefix(p)
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_uppercase()))
    };
    if upper_after("cl") {
        Some(BackendKind::OpenCl)
    } else if upper_after("cuda") || upper_after("cu") {
        Some(BackendKind::Cuda)
    } else {
        crate::api::Api::named(name).map(crate::api::Api::backend)
    }
}

/// What to say of a call the catalog lacks: a real call of its API (with the
/// catalog's nearest calls of that API), or a typo, suggested only among the
/// calls of its own API (the lab's, when the name says none): `clCreateImage`
/// never suggests `cudaMalloc`.
pub fn unknown(name: &str, lab_backend: BackendKind) -> crate::mistake::Mistake {
    let api = api_of(name).unwrap_or(lab_backend);
    let same = || APIS.iter().filter(|s| s.backend == api).map(|s| s.name);
    let real = KNOWN_CALLS
        .lines()
        .filter(|l| !l.starts_with('#'))
        .any(|l| l == name);
    if real {
        // The calls sharing most words with it (`Launch`, `Host`), then the
        // fewest edits away.
        let lower = name.to_ascii_lowercase();
        let words = camel_words(name);
        let mut by: Vec<(usize, usize, &'static str)> = same()
            .map(|c| {
                let shared = camel_words(c).iter().filter(|w| words.contains(w)).count();
                let edits = strsim::damerau_levenshtein(&lower, &c.to_ascii_lowercase());
                (usize::MAX - shared, edits, c)
            })
            .collect();
        by.sort();
        return Mistake::NotInCatalog {
            name: name.to_string(),
            api: match api {
                BackendKind::OpenCl => "OpenCL",
                BackendKind::Cuda => "CUDA",
            },
            nearest: by.into_iter().take(3).map(|(_, _, c)| c).collect(),
        };
    }
    Mistake::UnknownCall {
        name: name.to_string(),
        suggestion: crate::suggest::nearest(name, same()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::lookup;

    #[test]
    fn words_of_a_call() {
        assert_eq!(
            camel_words("cudaLaunchHostFunc"),
            ["launch", "host", "func"]
        );
        assert_eq!(camel_words("clSVMAlloc"), ["svm", "alloc"]);
        assert_eq!(camel_words("clEnqueueSVMFree"), ["enqueue", "svm", "free"]);
    }

    /// #50: every real call the catalog lacks is said to be one, with
    /// calls of its own API only; a typo of a catalog call is suggested that
    /// call, never one of the other API.
    #[test]
    fn a_real_call_is_told_from_a_typo_and_never_crosses_apis() {
        let real: Vec<&str> = KNOWN_CALLS
            .lines()
            .filter(|l| !l.starts_with('#') && lookup(l).is_none())
            .collect();
        assert!(real.len() > 500, "{}", real.len());
        for name in &real {
            let api = api_of(name).unwrap_or_else(|| panic!("{name} has no API prefix"));
            match unknown(name, BackendKind::OpenCl) {
                Mistake::NotInCatalog { nearest, .. } => {
                    assert!(!nearest.is_empty(), "{name}");
                    for n in nearest {
                        assert_eq!(api_of(n), Some(api), "{name} → {n}");
                    }
                }
                other => panic!("{name}: {other:?}"),
            }
        }
        // Every catalog call with one letter dropped: a typo, suggested within
        // its API (or nothing), never a call of the other.
        for spec in APIS {
            let typo: String = spec
                .name
                .char_indices()
                .filter(|(i, _)| *i != spec.name.len() - 2)
                .map(|(_, c)| c)
                .collect();
            if lookup(&typo).is_some() || KNOWN_CALLS.lines().any(|l| l == typo) {
                continue;
            }
            match unknown(&typo, BackendKind::Cuda) {
                Mistake::UnknownCall { suggestion, .. } => {
                    if let Some(s) = suggestion {
                        assert_eq!(api_of(s), api_of(spec.name), "{typo} → {s}");
                    }
                }
                other => panic!("{typo}: {other:?}"),
            }
        }
    }
}
