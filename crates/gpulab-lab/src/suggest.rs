//! "Did you mean": the nearest known name to a misspelt one.

/// The candidate nearest to `wanted`, if it is near enough to be a plausible typo.
pub fn nearest<'a>(wanted: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let wanted_lower = wanted.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| {
            let d = strsim::damerau_levenshtein(&wanted_lower, &c.to_ascii_lowercase());
            (d, c)
        })
        .filter(|(d, c)| *d <= (c.len().max(wanted.len()) / 3).max(2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::nearest;

    #[test]
    fn finds_close_names_only() {
        let labs = ["cl-finish", "cl-event-wait", "cl-premature-release"];
        assert_eq!(nearest("cl-finsh", labs), Some("cl-finish"));
        assert_eq!(nearest("cl-premature", labs), None);
        assert_eq!(nearest("zzz", labs), None);
    }

    /// Parameters in `{…}` and claims: two swapped letters are one edit.
    #[test]
    fn a_transposed_parameter_finds_its_name() {
        let params = ["size_mib", "kernel_ms", "iterations"];
        assert_eq!(nearest("kernel_sm", params), Some("kernel_ms"));
        assert_eq!(nearest("size_mb", params), Some("size_mib"));
        assert_eq!(nearest("iteratoins", params), Some("iterations"));
    }
}
