//! The pattern kernel's values (`labs/kernels/pattern.cl`, `pattern.cu`: word
//! `i` holds `i * 2654435761` as a 32-bit word), checked in host memory a lab
//! read back: how much of what came back is what the kernel wrote.

/// The pattern kernel's value of word `i`.
pub fn word(i: usize) -> u32 {
    (i as u32).wrapping_mul(2_654_435_761)
}

/// The share (0 to 1) of the whole words in `bytes` bytes at `p` that hold
/// the pattern; `None` for less than one word. Each word is read once, with a
/// volatile read: the memory may be written by a copy the device still runs,
/// which is what a lab checking its data is asking about.
///
/// # Safety
/// `p` must be valid for reads of `bytes` bytes.
pub unsafe fn share_of(p: *const u8, bytes: usize) -> Option<f64> {
    let words = bytes / 4;
    if words == 0 {
        return None;
    }
    // Read as 4 bytes at a time: any alignment will do.
    let p = p.cast::<[u8; 4]>();
    let mut holding = 0usize;
    for i in 0..words {
        // SAFETY: `i < words`, within the `bytes` the caller vouches for.
        if u32::from_ne_bytes(unsafe { p.add(i).read_volatile() }) == word(i) {
            holding += 1;
        }
    }
    Some(holding as f64 / words as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_share_counts_the_words_that_hold_the_pattern() {
        let mut v: Vec<u32> = (0..1000).map(word).collect();
        // SAFETY: `v` holds 4000 bytes of u32s.
        let all = unsafe { share_of(v.as_ptr().cast(), 4000) };
        assert_eq!(all, Some(1.0));
        for w in v.iter_mut().take(250) {
            *w = 0;
        }
        // Word 0 is 0 in the pattern too.
        // SAFETY: as above.
        let most = unsafe { share_of(v.as_ptr().cast(), 4000) };
        assert_eq!(most, Some(751.0 / 1000.0));
        // SAFETY: as above; three bytes hold no whole word.
        let none = unsafe { share_of(v.as_ptr().cast(), 3) };
        assert_eq!(none, None);
    }
}
