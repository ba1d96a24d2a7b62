//! The component's `memcmp`.
//!
//! On `wasm32-unknown-unknown` the C memory functions come from
//! compiler-builtins, and its `memcmp` compares one byte per loop turn.
//! The policy compares strings all the time (resource names, the keys of
//! its B-tree maps, container names), so that loop was 3 % of a warm
//! evaluation through the component and 5 % of an admission on 256 CPUs
//! (BENCHMARKS.md, "The component's memcmp"), where native code calls
//! glibc's vectorised one. compiler-builtins links its version weakly, so
//! the strong symbol below replaces it in the component. This one compares
//! eight bytes per turn (one `i64.load` each side), and finds the first
//! differing byte of a differing word from the XOR of the two.
//!
//! Natively the function keeps its mangled name (the platform's `memcmp`
//! is used) and is only built for its tests.

/// `memcmp(a, b, n)`: negative, zero or positive as the first differing
/// byte of `a` is below, equal to or above that of `b` (as unsigned bytes),
/// zero when the first `n` bytes are equal.
///
/// # Safety
///
/// `a` and `b` must each be valid for reads of `n` bytes.
// Never inlined: with LTO the definition is visible to its callers (the
// B-tree searches), and inlining it there made them too large to be inlined
// in turn, which cost the evaluation more than the loop saved.
#[cfg_attr(target_arch = "wasm32", unsafe(no_mangle))]
#[inline(never)]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    // Most comparisons of a B-tree search end at the first byte ("cpu"
    // against "memory"): answer those without building a word.
    if n == 0 {
        return 0;
    }
    // SAFETY: `n >= 1`.
    let (first_a, first_b) = unsafe { (*a, *b) };
    if first_a != first_b {
        return i32::from(first_a) - i32::from(first_b);
    }
    let mut at = 0;
    while n - at >= 8 {
        // SAFETY: `at + 8 <= n`, and both sides are valid for `n` bytes.
        let (x, y) = unsafe { (word::<8>(a, at), word::<8>(b, at)) };
        if x != y {
            // SAFETY: the differing byte is within this word.
            return unsafe { first_difference(a, b, at, x ^ y) };
        }
        at += 8;
    }
    // The tail, below eight bytes, without a loop (a byte loop here is the
    // shape a compiler may turn back into a call to `memcmp`).
    for width in [4, 2, 1] {
        if n - at >= width {
            // SAFETY: `at + width <= n`.
            let (x, y) = unsafe {
                match width {
                    4 => (word::<4>(a, at), word::<4>(b, at)),
                    2 => (word::<2>(a, at), word::<2>(b, at)),
                    _ => (word::<1>(a, at), word::<1>(b, at)),
                }
            };
            if x != y {
                // SAFETY: the differing byte is within these `width` bytes.
                return unsafe { first_difference(a, b, at, x ^ y) };
            }
            at += width;
        }
    }
    0
}

/// `W` bytes of `p` from `at`, as a little-endian integer: the byte at the
/// lowest address is the least significant.
///
/// # Safety
///
/// `p` must be valid for reads of `at + W` bytes.
#[inline(always)]
unsafe fn word<const W: usize>(p: *const u8, at: usize) -> u64 {
    // SAFETY: the caller's promise; an unaligned read of `W` bytes.
    let bytes = unsafe { p.add(at).cast::<[u8; W]>().read_unaligned() };
    let mut padded = [0u8; 8];
    padded[..W].copy_from_slice(&bytes);
    u64::from_le_bytes(padded)
}

/// The sign of the first differing byte of the words at `at`, given their
/// XOR (non-zero): its lowest set bit is in the first differing byte.
///
/// # Safety
///
/// The byte `at + (lowest set bit of diff) / 8` must be readable on both sides.
#[inline(always)]
unsafe fn first_difference(a: *const u8, b: *const u8, at: usize, diff: u64) -> i32 {
    let k = at + (diff.trailing_zeros() / 8) as usize;
    // SAFETY: the caller's promise.
    unsafe { i32::from(*a.add(k)) - i32::from(*b.add(k)) }
}

#[cfg(test)]
mod tests {
    use super::memcmp;

    fn sign(x: i32) -> i32 {
        x.signum()
    }

    /// Against the slices' own ordering, for every length up to 40, every
    /// position of a single differing byte and both directions of the
    /// difference, at unaligned starts.
    #[test]
    fn orders_as_the_bytes_do() {
        let base: Vec<u8> = (0..48u8)
            .map(|i| i.wrapping_mul(37).wrapping_add(5))
            .collect();
        for offset in 0..3 {
            for n in 0..=40 {
                let a = &base[offset..offset + n];
                // SAFETY: both slices hold `n` bytes.
                assert_eq!(unsafe { memcmp(a.as_ptr(), a.as_ptr(), n) }, 0);
                for pos in 0..n {
                    for delta in [1u8, 0x80, 0xff] {
                        let mut b = a.to_vec();
                        b[pos] = b[pos].wrapping_add(delta);
                        let want = a.cmp(&b[..]) as i32;
                        // SAFETY: both slices hold `n` bytes.
                        let got = unsafe { memcmp(a.as_ptr(), b.as_ptr(), n) };
                        assert_eq!(sign(got), want, "n {n} pos {pos} delta {delta}");
                        // SAFETY: as above.
                        let back = unsafe { memcmp(b.as_ptr(), a.as_ptr(), n) };
                        assert_eq!(sign(back), -want, "n {n} pos {pos} delta {delta}");
                    }
                }
            }
        }
    }

    /// Only the first difference counts, and bytes compare unsigned.
    #[test]
    fn the_first_difference_decides_unsigned() {
        let a = b"memory\x01zzzzzzzzzz";
        let b = b"memory\xffaaaaaaaaaa";
        // SAFETY: both hold 17 bytes.
        assert!(unsafe { memcmp(a.as_ptr(), b.as_ptr(), 17) } < 0);
        // SAFETY: the first 6 bytes are equal.
        assert_eq!(unsafe { memcmp(a.as_ptr(), b.as_ptr(), 6) }, 0);
        let c = b"hugepages-2Mi";
        let d = b"hugepages-1Gi";
        // SAFETY: both hold 13 bytes.
        assert!(unsafe { memcmp(c.as_ptr(), d.as_ptr(), 13) } > 0);
    }
}
