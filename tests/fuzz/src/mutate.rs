//! Byte-level mutation: flips, inserts, deletions, splices of two inputs, and interesting
//! values (extreme numbers, extreme dates, control characters, huge and empty strings, deep
//! nesting) from a shared dictionary plus the target's own tokens.

use crate::rng::Rng;

/// The largest input the mutator produces.
pub const MAX_INPUT: usize = 64 * 1024;

/// Numbers at and beyond the edges of `u32`, `i64`, `u64` and `f64`.
pub const EXTREME_NUMBERS: &[&str] = &[
    "0",
    "-0",
    "1",
    "-1",
    "2",
    "49",
    "50",
    "51",
    "100",
    "101",
    "255",
    "256",
    "604800",
    "604801",
    "2147483647",
    "2147483648",
    "-2147483648",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "18446744073709551616",
    "1e309",
    "-1e309",
    "1e-400",
    "0.5",
    "1.0",
    "1e2",
    "123456789012345678901234567890",
];

/// Timestamps and dates at the edges of what chrono (and the engine's arithmetic) can hold.
pub const INTERESTING_DATES: &[&str] = &[
    "2026-12-07T00:00:00Z",
    "2026-12-07T00:00:00.000000001Z",
    "1970-01-01T00:00:00Z",
    "0000-01-01T00:00:00Z",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59Z",
    "9999-12-31T23:59:59.999999999Z",
    "+262142-01-01T00:00:00Z",
    "+262142-12-31T23:59:59Z",
    "+262143-01-01T00:00:00Z",
    "-262143-01-01T00:00:00Z",
    "-262144-01-01T00:00:00Z",
    "2026-02-29T00:00:00Z",
    "2028-02-29T12:00:00+14:00",
    "2026-12-07T00:00:00-23:59",
    "2026-12-07T24:00:00Z",
    "2026-12-07T23:59:60Z",
    "2026-12-07",
    "9999-12-31",
    "0000-01-01",
    "2026-02-30",
    "+262142-12-31",
    "00:00",
    "23:59",
    "24:00",
    "9:00",
    "+14:00",
    "-14:00",
    "+14:01",
    "+00:00",
    "-00:00",
];

/// Strings that stress text handling.
pub const INTERESTING_STRINGS: &[&str] = &[
    "",
    " ",
    "\u{0}",
    "\\u0000",
    "\n",
    "\r\n",
    "\t",
    "\u{7f}",
    "\u{feff}",
    "\u{202e}",
    "é",
    "\u{1d11e}",
    "null",
    "~",
    "true",
    "yes",
    "NaN",
    ".inf",
    "*",
    "%",
    "a/b",
    "Member:",
    "Member:x",
    "Group:",
    "Stage:s",
    "AfterStageWait:s",
    ":",
    "-",
    "a-",
    "A",
    "Full",
    "NodeImageOnly",
    "ControlPlaneOnly",
    "Latest",
    "Consistent",
    "Custom",
    "Approval",
    "ScheduledStart",
    "Before",
    "After",
    "Linux",
    "Windows",
    "Monday",
    "Sunday",
    "Last",
    "100%",
    "101%",
    "0%",
    "50%",
    "-5%",
    "%%",
    "1.31.2",
    "1.30.4",
    "1.2147483648.0",
    "99999999999999999999.1.1",
    "AKSUbuntu-2204gen2containerd-202411.03.0",
    "AKSUbuntu-2204gen2containerd-",
    "-202411.03.0",
    "env=dev",
    "env in (dev,prod)",
    "!env",
];

/// Raw byte sequences: YAML and JSON syntax, escapes, anchors, tags.
const TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ":",
    ",",
    "\"",
    "'",
    "\\",
    "\\\"",
    "\\u",
    "\\ud800",
    "\\udc00",
    "- ",
    ": ",
    "\n- ",
    "\n  ",
    "---\n",
    "...\n",
    "? ",
    "&a ",
    "*a",
    "<<: *a",
    "!!binary ",
    "!!str ",
    "!!int ",
    "!!float ",
    "!!map ",
    "!!seq ",
    "!<tag> ",
    "|\n",
    ">\n",
    "#",
    "%YAML 1.1\n",
    "\u{0}",
    "\u{1}",
    "\u{1b}",
    "\u{85}",
    "\u{2028}",
    "\u{fffd}",
    "\r",
];

/// Single bytes worth trying.
const INTERESTING_BYTES: &[u8] = &[
    0, 1, 0x7f, 0x80, 0xc0, 0xff, b'\n', b'\r', b'\t', b' ', b'"', b'\'', b'\\', b'{', b'}', b'[',
    b']', b':', b',', b'-', b'+', b'.', b'0', b'9', b'#', b'&', b'*', b'!', b'%', b'@', b'`', b'|',
    b'>', b'(', b')', b'=', b'/', b'e', b'Z', b'T',
];

fn token(rng: &mut Rng, dict: &[&'static str]) -> &'static str {
    match rng.below(6) {
        0 => rng.pick(EXTREME_NUMBERS),
        1 => rng.pick(INTERESTING_DATES),
        2 => rng.pick(INTERESTING_STRINGS),
        3 => rng.pick(TOKENS),
        _ if !dict.is_empty() => rng.pick(dict),
        _ => rng.pick(TOKENS),
    }
}

/// Applies one byte-level mutation to `data`. `others` are corpus entries to splice with;
/// `dict` the target's tokens.
pub fn mutate_bytes(rng: &mut Rng, data: &mut Vec<u8>, others: &[&[u8]], dict: &[&'static str]) {
    let len = data.len();
    match rng.below(16) {
        0 if len > 0 => {
            let i = rng.below(len);
            data[i] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let i = rng.below(len);
            data[i] = rng.next_u64() as u8;
        }
        2 if len > 0 => {
            let i = rng.below(len);
            data[i] = rng.pick(INTERESTING_BYTES);
        }
        3 => {
            let at = rng.below(len + 1);
            let n = rng.range(1, 8);
            let bytes: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
            data.splice(at..at, bytes);
        }
        4 | 5 if len > 0 => {
            let at = rng.below(len);
            let n = 1 + rng.small(len - at);
            data.drain(at..at + n);
        }
        6 if len > 0 => {
            // Duplicate a chunk elsewhere.
            let at = rng.below(len);
            let n = 1 + rng.small((len - at).min(256));
            let chunk = data[at..at + n].to_vec();
            let to = rng.below(len + 1);
            data.splice(to..to, chunk);
        }
        7 | 8 => {
            let t = token(rng, dict).as_bytes().to_vec();
            let at = rng.below(len + 1);
            data.splice(at..at, t);
        }
        9 if len > 0 => {
            // Replace a run of the same class (digits, letters) by a token.
            let at = rng.below(len);
            let class = |b: u8| (b.is_ascii_digit(), b.is_ascii_alphabetic());
            let c = class(data[at]);
            let mut s = at;
            while s > 0 && class(data[s - 1]) == c {
                s -= 1;
            }
            let mut e = at + 1;
            while e < len && class(data[e]) == c {
                e += 1;
            }
            let t = if data[at].is_ascii_digit() {
                rng.pick(EXTREME_NUMBERS).to_string()
            } else {
                token(rng, dict).to_string()
            };
            data.splice(s..e, t.into_bytes());
        }
        10 if !others.is_empty() => {
            // Splice: a prefix of this input and a suffix of another.
            let other = others[rng.below(others.len())];
            let cut = rng.below(len + 1);
            let from = rng.below(other.len() + 1);
            data.truncate(cut);
            data.extend_from_slice(&other[from..]);
        }
        11 if !others.is_empty() => {
            // Insert a chunk of another input.
            let other = others[rng.below(others.len())];
            if !other.is_empty() {
                let s = rng.below(other.len());
                let n = 1 + rng.small(other.len() - s);
                let at = rng.below(len + 1);
                data.splice(at..at, other[s..s + n].iter().copied());
            }
        }
        12 if len > 0 => {
            // Repeat a chunk: long strings, long lists.
            let at = rng.below(len);
            let n = 1 + rng.small((len - at).min(64));
            let times = rng.pick(&[2usize, 8, 64, 512, 4096]);
            let chunk = data[at..at + n].repeat(times);
            data.splice(at..at, chunk);
        }
        13 => {
            // Deep nesting.
            let depth = rng.pick(&[32usize, 128, 256, 1024, 5000]);
            let (open, close) = rng.pick(&[("[", "]"), ("{\"a\":", "}"), ("- ", ""), ("(", ")")]);
            let at = rng.below(len + 1);
            let mut s = open.repeat(depth);
            if rng.chance(1, 2) {
                s.push_str(&close.repeat(depth));
            }
            data.splice(at..at, s.into_bytes());
        }
        14 if len > 0 => data.truncate(rng.below(len)),
        _ => {
            let at = rng.below(len + 1);
            let t = rng.pick(INTERESTING_STRINGS).as_bytes().to_vec();
            data.splice(at..at, t);
        }
    }
    data.truncate(MAX_INPUT);
}
