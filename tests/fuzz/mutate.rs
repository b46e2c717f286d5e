//! The fuzzer's randomness and its mutations: a seeded xorshift generator and
//! byte-, line- and token-level edits of a seed. Never reads files or the clock,
//! so one seed always gives the same inputs.

/// xorshift64* (Vigna): tiny, fast, and good enough to pick mutations; the same
/// seed gives the same inputs on every machine.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // Zero is xorshift's one fixed point.
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }

    pub fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Tokens that have broken parsers before: nesting openers, quotes, escapes,
/// numbers past `u64` and `f64`, non-UTF-8 bytes, control characters.
const COMMON: &[&[u8]] = &[
    b"(",
    b")",
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b"'",
    b"'''",
    b"\"\"\"",
    b"\\",
    b"\\u",
    b"\\U0010ffff",
    b"\n",
    b"\r\n",
    b"\t",
    b"\0",
    b"#",
    b"=",
    b",",
    b"-",
    b"0",
    b"-0",
    b"1e308",
    b"1e309",
    b"-1e309",
    b"nan",
    b"inf",
    b"18446744073709551615",
    b"18446744073709551616",
    b"-9223372036854775809",
    b"99999999999999999999999999999999999999",
    b"0.0000000000000000000000000000001",
    b"\xff",
    b"\xc0\x80",
    b"\xe2\x82",
    b"\x80",
    b"\xed\xa0\x80",
    "\u{feff}".as_bytes(),
    "\u{202e}".as_bytes(),
    "—".as_bytes(),
];

/// One to four edits of `seed`; `dict` adds the target's own words and `others`
/// are seeds to splice lines from.
pub fn mutate(rng: &mut Rng, seed: &[u8], dict: &[&[u8]], others: &[Vec<u8>]) -> Vec<u8> {
    let mut out = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        edit(rng, &mut out, dict, others);
        // Nesting inside repeated lines grows fast; past a few hundred KiB an
        // input tests the allocator, not the parser.
        out.truncate(MAX_LEN);
    }
    out
}

const MAX_LEN: usize = 512 << 10;

fn edit(rng: &mut Rng, b: &mut Vec<u8>, dict: &[&[u8]], others: &[Vec<u8>]) {
    let at = rng.below(b.len() + 1);
    match rng.below(12) {
        0 if !b.is_empty() => {
            let i = rng.below(b.len());
            b[i] ^= 1 << rng.below(8);
        }
        1 if !b.is_empty() => {
            let i = rng.below(b.len());
            b[i] = rng.next() as u8;
        }
        2 => {
            let n = 1 + rng.below(8);
            let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            b.splice(at..at, bytes);
        }
        3 if !b.is_empty() => {
            let end = (at + 1 + rng.below(32)).min(b.len());
            b.drain(at.min(end)..end);
        }
        4 => {
            let tok = if rng.chance(2) && !dict.is_empty() {
                *rng.pick(dict)
            } else {
                *rng.pick(COMMON)
            };
            b.splice(at..at, tok.iter().copied());
        }
        5 => duplicate_line(rng, b),
        6 => delete_line(rng, b),
        7 if !others.is_empty() => {
            let other = rng.pick(others);
            let line = random_line(rng, other).to_vec();
            let at = line_start(b, at);
            b.splice(at..at, line);
        }
        8 => swap_lines(rng, b),
        9 => {
            let n = deep_count(rng);
            let tok = if dict.is_empty() {
                b"(" as &[u8]
            } else {
                rng.pick(dict)
            };
            let deep = tok.repeat(n);
            b.splice(at..at, deep);
        }
        10 => {
            let digits = 20 + rng.below(400);
            let big: Vec<u8> = std::iter::once(b'1')
                .chain((0..digits).map(|_| b'0' + rng.below(10) as u8))
                .collect();
            b.splice(at..at, big);
        }
        _ => {
            // Repeat a short stretch of the input itself: another line, another
            // variant, another key, an unbalanced brace.
            if b.is_empty() {
                return;
            }
            let start = rng.below(b.len());
            let end = (start + 1 + rng.below(64)).min(b.len());
            let piece = b[start..end].to_vec();
            b.splice(at..at, piece);
        }
    }
}

/// Nesting depths that matter: just past the language's own limits, past a small
/// stack, and past any stack.
fn deep_count(rng: &mut Rng) -> usize {
    *rng.pick(&[9, 49, 130, 1_000, 5_000, 20_000])
}

fn line_starts(b: &[u8]) -> Vec<usize> {
    std::iter::once(0)
        .chain(
            b.iter()
                .enumerate()
                .filter(|&(_, &c)| c == b'\n')
                .map(|(i, _)| i + 1),
        )
        .collect()
}

/// The line (with its newline) that a random line start opens.
fn random_line<'a>(rng: &mut Rng, b: &'a [u8]) -> &'a [u8] {
    let starts = line_starts(b);
    let i = rng.below(starts.len());
    let end = starts.get(i + 1).copied().unwrap_or(b.len());
    &b[starts[i]..end]
}

fn line_start(b: &[u8], at: usize) -> usize {
    b[..at]
        .iter()
        .rposition(|&c| c == b'\n')
        .map_or(0, |i| i + 1)
}

fn line_range(rng: &mut Rng, b: &[u8]) -> std::ops::Range<usize> {
    let starts = line_starts(b);
    let i = rng.below(starts.len());
    starts[i]..starts.get(i + 1).copied().unwrap_or(b.len())
}

fn duplicate_line(rng: &mut Rng, b: &mut Vec<u8>) {
    let r = line_range(rng, b);
    let line = b[r.clone()].to_vec();
    let times = if rng.chance(8) { deep_count(rng) } else { 1 };
    let times = times.min(MAX_LEN / line.len().max(1));
    b.splice(r.start..r.start, line.repeat(times));
}

fn delete_line(rng: &mut Rng, b: &mut Vec<u8>) {
    let r = line_range(rng, b);
    b.drain(r);
}

fn swap_lines(rng: &mut Rng, b: &mut Vec<u8>) {
    let starts = line_starts(b);
    if starts.len() < 3 {
        return;
    }
    let i = rng.below(starts.len() - 1);
    let j = i + 1;
    let end = starts.get(j + 1).copied().unwrap_or(b.len());
    let (first, second) = (b[starts[i]..starts[j]].to_vec(), b[starts[j]..end].to_vec());
    b.splice(starts[i]..end, second.into_iter().chain(first));
}
