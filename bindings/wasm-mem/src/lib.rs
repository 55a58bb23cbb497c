//! # waverun-wasm-mem: `memcmp` and `bcmp` for waverun's `wasm32` modules
//!
//! Owns one thing: how the Wasm builds compare bytes. Every string key the engine looks up
//! (a member's name in a `BTreeMap`, a group's, a label's) ends in `memcmp` (order) or `bcmp`
//! (equality). Natively that is the C library's vectorised routine; on `wasm32-unknown-unknown`
//! it is compiler-builtins' byte-at-a-time loop, and in wasmtime every turn of that loop also
//! pays an epoch check (the deadline that stops a runaway plugin). Profiled on the 10,000-member
//! simulation in wasmtime it was the largest single symbol, 11% of the samples; names such as
//! `m000123` are 7 bytes, so the loop ran to the end on every equal or near-equal key.
//!
//! [`compare`] reads 8-byte words (4-byte for 4–7 bytes, overlapping at the end instead of a
//! tail loop) and finds the first differing byte from the XOR's trailing zeros (Wasm memory is
//! little-endian). On `wasm32` it is exported as `memcmp` and `bcmp`; the linker prefers these
//! to compiler-builtins' weak definitions. Other targets get nothing but [`compare`] (tested
//! natively against the slices' own order). The three Wasm modules link this crate with
//! `use waverun_wasm_mem as _;` (`core-probe`, `plugin`, `web`); the modules therefore also
//! export `memcmp` and `bcmp`, which hosts do not call.
//!
//! Measured (`host/benches/wasm_hosts.rs`, the core alone in wasmtime with epoch checks,
//! 10,000 members): 230 ms → 205 ms median of interleaved runs.

#![no_std]

/// Compares `n` bytes at `a` and `b` as `memcmp` does: 0 when equal, else the difference of the
/// first differing bytes (as unsigned).
///
/// # Safety
/// `a..a+n` and `b..b+n` must be readable.
#[inline]
pub unsafe fn compare(a: *const u8, b: *const u8, n: usize) -> i32 {
    use core::ptr::read_unaligned as read;
    if n >= 8 {
        let mut i = 0;
        while i + 8 < n {
            let (x, y) = (read(a.add(i) as *const u64), read(b.add(i) as *const u64));
            if x != y {
                return first_difference(a.add(i), b.add(i), x.to_le(), y.to_le());
            }
            i += 8;
        }
        // The last word, overlapping what was compared already.
        let t = n - 8;
        let (x, y) = (read(a.add(t) as *const u64), read(b.add(t) as *const u64));
        return if x == y {
            0
        } else {
            first_difference(a.add(t), b.add(t), x.to_le(), y.to_le())
        };
    }
    if n >= 4 {
        let (x, y) = (read(a as *const u32), read(b as *const u32));
        if x != y {
            return first_difference(a, b, x.to_le() as u64, y.to_le() as u64);
        }
        let t = n - 4;
        let (x, y) = (read(a.add(t) as *const u32), read(b.add(t) as *const u32));
        return if x == y {
            0
        } else {
            first_difference(a.add(t), b.add(t), x.to_le() as u64, y.to_le() as u64)
        };
    }
    let mut i = 0;
    while i < n {
        let (x, y) = (*a.add(i), *b.add(i));
        if x != y {
            return x as i32 - y as i32;
        }
        i += 1;
    }
    0
}

/// The difference of the first differing bytes of two words read (little-endian) at `a` and
/// `b`; `x != y`.
#[inline(always)]
unsafe fn first_difference(a: *const u8, b: *const u8, x: u64, y: u64) -> i32 {
    let k = ((x ^ y).trailing_zeros() / 8) as usize;
    *a.add(k) as i32 - *b.add(k) as i32
}

#[cfg(target_arch = "wasm32")]
mod symbols {
    use core::ffi::c_void;

    /// `memcmp` for the module: [`crate::compare`].
    ///
    /// # Safety
    /// As `memcmp`'s contract.
    #[no_mangle]
    pub unsafe extern "C" fn memcmp(a: *const c_void, b: *const c_void, n: usize) -> i32 {
        crate::compare(a.cast(), b.cast(), n)
    }

    /// `bcmp` for the module (equality only; the same answer as `memcmp`).
    ///
    /// # Safety
    /// As `bcmp`'s contract.
    #[no_mangle]
    pub unsafe extern "C" fn bcmp(a: *const c_void, b: *const c_void, n: usize) -> i32 {
        crate::compare(a.cast(), b.cast(), n)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::compare;
    use core::cmp::Ordering;
    use std::vec::Vec;

    fn sign(v: i32) -> Ordering {
        v.cmp(&0)
    }

    fn check(a: &[u8], b: &[u8]) {
        assert_eq!(a.len(), b.len());
        let got = unsafe { compare(a.as_ptr(), b.as_ptr(), a.len()) };
        assert_eq!(sign(got), a.cmp(b), "{a:?} vs {b:?}");
        if let Some(k) = a.iter().zip(b).position(|(x, y)| x != y) {
            assert_eq!(got, a[k] as i32 - b[k] as i32, "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn every_length_to_40_orders_as_the_slices_do_whichever_byte_differs() {
        for n in 0..=40usize {
            let base: Vec<u8> = (0..n).map(|i| (i * 37 + 11) as u8).collect();
            check(&base, &base);
            for at in 0..n {
                for delta in [1u8, 0x80, 0xff] {
                    let mut other = base.clone();
                    other[at] = other[at].wrapping_add(delta);
                    check(&base, &other);
                    check(&other, &base);
                    // A second difference later never changes the answer.
                    if at + 1 < n {
                        let mut both = other.clone();
                        both[n - 1] = both[n - 1].wrapping_sub(delta);
                        check(&base, &both);
                    }
                }
            }
        }
    }

    #[test]
    fn keys_like_the_engines_order_as_strings_do() {
        let keys = [
            "m000123", "m000124", "m00012", "s00-g00", "s00-g01", "stage-10", "stage-9",
        ];
        for a in keys {
            for b in keys {
                let n = a.len().min(b.len());
                let got = unsafe { compare(a.as_ptr(), b.as_ptr(), n) };
                assert_eq!(
                    sign(got),
                    a.as_bytes()[..n].cmp(&b.as_bytes()[..n]),
                    "{a} {b}"
                );
            }
        }
    }

    #[test]
    fn unaligned_starts_read_the_same_bytes() {
        let buf: Vec<u8> = (0..64u8).collect();
        let mut copy = buf.clone();
        copy[40] = 0;
        for start in 0..8 {
            for n in 0..(56 - start) {
                check(&buf[start..start + n], &copy[start..start + n]);
            }
        }
    }
}
