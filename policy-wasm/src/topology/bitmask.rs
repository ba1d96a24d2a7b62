//! NUMA affinity masks: [`BitMask`] and the subset walk [`iterate_bit_masks`].
//!
//! Mirrors upstream `pkg/kubelet/cm/topologymanager/bitmask/bitmask.go`. A
//! mask is a plain `u64`, so NUMA node ids above 63 are errors, as upstream.

use std::fmt;

/// The highest NUMA node id a [`BitMask`] can hold plus one.
const MASK_BITS: usize = 64;

/// A NUMA affinity: bit `n` set means NUMA node `n` (upstream `bitmask.BitMask`).
///
/// The derived `Ord` compares the raw `u64`, which is upstream `IsLessThan`;
/// it also makes the mask usable as a map key (upstream keys by `String()`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BitMask(u64);

/// A NUMA node id outside 0..=63.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BitMaskError {
    /// The offending bit number.
    pub bit: usize,
}

impl fmt::Display for BitMaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("bit number must be in range 0-63")
    }
}

impl core::error::Error for BitMaskError {}

/// The single-bit mask of `bit`, or an error above 63; [`NumaInfo`](super::NumaInfo)
/// builds its default mask with it.
pub(super) fn check_bit(bit: usize) -> Result<u64, BitMaskError> {
    if bit < MASK_BITS {
        Ok(1u64 << bit)
    } else {
        Err(BitMaskError { bit })
    }
}

impl BitMask {
    /// The empty mask (`NewEmptyBitMask`).
    pub const fn empty() -> BitMask {
        BitMask(0)
    }

    /// A mask with `bits` set (`NewBitMask`); any bit above 63 is an error.
    pub fn new(bits: &[usize]) -> Result<BitMask, BitMaskError> {
        let mut mask = BitMask::empty();
        mask.add(bits)?;
        Ok(mask)
    }

    /// The mask of a raw `u64` value.
    pub const fn from_raw(raw: u64) -> BitMask {
        BitMask(raw)
    }

    /// The raw `u64` value.
    pub const fn raw(self) -> u64 {
        self.0
    }

    /// Sets `bits`; on error the mask is left unchanged (`Add`).
    pub fn add(&mut self, bits: &[usize]) -> Result<(), BitMaskError> {
        let mut raw = self.0;
        for &bit in bits {
            raw |= check_bit(bit)?;
        }
        self.0 = raw;
        Ok(())
    }

    /// Clears `bits`; on error the mask is left unchanged (`Remove`).
    pub fn remove(&mut self, bits: &[usize]) -> Result<(), BitMaskError> {
        let mut raw = self.0;
        for &bit in bits {
            raw &= !check_bit(bit)?;
        }
        self.0 = raw;
        Ok(())
    }

    /// Bitwise AND (`And`).
    pub const fn and(self, other: BitMask) -> BitMask {
        BitMask(self.0 & other.0)
    }

    /// Bitwise OR (`Or`).
    pub const fn or(self, other: BitMask) -> BitMask {
        BitMask(self.0 | other.0)
    }

    /// Whether no bit is set (`IsEmpty`).
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether `bit` is set; false for bits above 63 (`IsSet`).
    pub const fn is_set(self, bit: usize) -> bool {
        bit < MASK_BITS && self.0 & (1u64 << bit) != 0
    }

    /// Whether any of `bits` is set (`AnySet`).
    pub fn any_set(self, bits: &[usize]) -> bool {
        bits.iter().any(|&bit| self.is_set(bit))
    }

    /// Number of set bits (`Count`).
    pub const fn count(self) -> usize {
        self.0.count_ones() as usize
    }

    /// The set bits in ascending order (`GetBits`).
    pub fn bits(self) -> Vec<usize> {
        crate::cpu_topology::set_bits(self.raw())
            .map(|bit| bit as usize)
            .collect()
    }

    /// Fewer bits wins; with equal counts the numerically smaller mask (more
    /// low-numbered bits) wins (`IsNarrowerThan`).
    pub const fn is_narrower_than(self, other: BitMask) -> bool {
        if self.count() == other.count() {
            self.0 < other.0
        } else {
            self.count() < other.count()
        }
    }

    /// Raw numeric comparison (`IsLessThan`).
    pub const fn is_less_than(self, other: BitMask) -> bool {
        self.0 < other.0
    }

    /// Raw numeric comparison (`IsGreaterThan`).
    pub const fn is_greater_than(self, other: BitMask) -> bool {
        self.0 > other.0
    }
}

/// Upstream `String()`: binary, zero-padded to a whole number of two-bit groups.
impl fmt::Display for BitMask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const GROUPING: u32 = 2;
        let mut shift = 64 - GROUPING;
        while shift > 0 {
            if self.0 > (1u64 << shift) {
                let width = (shift + GROUPING) as usize;
                return write!(f, "{:0width$b}", self.0);
            }
            shift -= GROUPING;
        }
        write!(f, "{:02b}", self.0)
    }
}

/// Calls `callback` with every non-empty subset of `bits`, in upstream
/// `IterateBitMasks` order: by size 1..=len, and within a size the
/// combinations in lexicographic order of their positions in `bits`
/// (for `[0, 1, 2]`: {0} {1} {2} {0,1} {0,2} {1,2} {0,1,2}).
///
/// Every bit is checked first, so a bad id calls nothing. The number of calls
/// is `2^len - 1`; callers bound `len` by the machine's NUMA node count.
pub fn iterate_bit_masks(
    bits: &[usize],
    mut callback: impl FnMut(BitMask),
) -> Result<(), BitMaskError> {
    let singles = bits
        .iter()
        .map(|&bit| check_bit(bit))
        .collect::<Result<Vec<u64>, _>>()?;
    let n = singles.len();
    for size in 1..=n {
        // `positions` is the current combination, strictly increasing.
        let mut positions: Vec<usize> = (0..size).collect();
        loop {
            callback(BitMask(
                positions.iter().fold(0, |acc, &p| acc | singles[p]),
            ));
            // Advance to the next combination: bump the rightmost position
            // that still has room, and reset everything after it.
            let Some(i) = (0..size).rev().find(|&i| positions[i] < n - size + i) else {
                break;
            };
            positions[i] += 1;
            for j in i + 1..size {
                positions[j] = positions[j - 1] + 1;
            }
        }
    }
    Ok(())
}

/// Every non-empty subset of `bits` in [`iterate_bit_masks`] order.
pub fn bit_masks(bits: &[usize]) -> Result<Vec<BitMask>, BitMaskError> {
    let mut masks = Vec::new();
    iterate_bit_masks(bits, |mask| masks.push(mask))?;
    Ok(masks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::test_support::mask;

    #[test]
    fn bitmask_basics() {
        let m = mask(&[0, 2]);
        assert_eq!(m.raw(), 0b101);
        assert_eq!(m.count(), 2);
        assert_eq!(m.bits(), vec![0, 2]);
        assert!(m.is_set(2) && !m.is_set(1) && !m.is_set(64));
        assert!(m.any_set(&[1, 2]));
        assert_eq!(BitMask::new(&[64]), Err(BitMaskError { bit: 64 }));
        assert_eq!(
            BitMask::new(&[64]).unwrap_err().to_string(),
            "bit number must be in range 0-63"
        );
        let mut unchanged = m;
        assert!(unchanged.add(&[3, 70]).is_err());
        assert_eq!(unchanged, m);
        unchanged.remove(&[0]).unwrap();
        assert_eq!(unchanged, mask(&[2]));
        assert_eq!(mask(&[63]).bits(), vec![63]);
    }

    #[test]
    fn bitmask_narrower_and_less() {
        // Fewer bits wins; equal counts: numerically smaller wins.
        assert!(mask(&[3]).is_narrower_than(mask(&[0, 1])));
        assert!(mask(&[0, 1]).is_narrower_than(mask(&[0, 2])));
        assert!(!mask(&[0, 2]).is_narrower_than(mask(&[0, 1])));
        assert!(!mask(&[1]).is_narrower_than(mask(&[1])));
        assert!(mask(&[0, 1]).is_less_than(mask(&[2])));
        assert!(mask(&[2]).is_greater_than(mask(&[0, 1])));
    }

    #[test]
    fn bitmask_string() {
        assert_eq!(BitMask::empty().to_string(), "00");
        assert_eq!(mask(&[0]).to_string(), "01");
        assert_eq!(mask(&[1]).to_string(), "10");
        assert_eq!(mask(&[0, 1]).to_string(), "11");
        assert_eq!(mask(&[2]).to_string(), "100");
        assert_eq!(mask(&[0, 2]).to_string(), "0101");
        assert_eq!(mask(&[3]).to_string(), "1000");
    }

    #[test]
    fn iterate_bit_masks_order() {
        let got: Vec<Vec<usize>> = bit_masks(&[0, 1, 2])
            .unwrap()
            .into_iter()
            .map(BitMask::bits)
            .collect();
        let want: Vec<Vec<usize>> = vec![
            vec![0],
            vec![1],
            vec![2],
            vec![0, 1],
            vec![0, 2],
            vec![1, 2],
            vec![0, 1, 2],
        ];
        assert_eq!(got, want);
        // Order follows input positions, not ids.
        let got: Vec<u64> = bit_masks(&[3, 1])
            .unwrap()
            .into_iter()
            .map(BitMask::raw)
            .collect();
        assert_eq!(got, vec![0b1000, 0b10, 0b1010]);
        assert_eq!(bit_masks(&[]).unwrap(), vec![]);
        assert_eq!(bit_masks(&[1, 64]), Err(BitMaskError { bit: 64 }));
        let four = bit_masks(&[0, 1, 2, 3]).unwrap();
        assert_eq!(four.len(), 15);
        assert_eq!(four[4].bits(), vec![0, 1]);
        assert_eq!(four[10].bits(), vec![0, 1, 2]);
        assert_eq!(four[14].bits(), vec![0, 1, 2, 3]);
    }
}
