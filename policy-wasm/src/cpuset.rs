//! CPU sets in the Kubernetes/Linux list format (`k8s.io/utils/cpuset`).
//!
//! A [`CpuSet`] is a sorted set of logical CPU ids. Its text form is the
//! canonical list format the kubelet checkpoints and cgroup `cpuset.cpus`
//! files use: ranges of consecutive ids joined by commas, `"0-3,8"`, with
//! `""` for the empty set. Parsing accepts the same grammar as upstream
//! `cpuset.Parse` (single ids and `a-b` ranges with `a <= b`) plus
//! surrounding whitespace, so a sysfs file with its trailing newline parses.
//!
//! Ids above [`MAX_CPU_ID`] are rejected: no real machine has them, and a
//! range such as `0-4000000000` must not turn into four billion entries.

use std::fmt;
use std::str::FromStr;

/// The largest CPU id a [`CpuSet`] accepts from outside (Linux `NR_CPUS` is at most 8192 today).
pub const MAX_CPU_ID: u32 = 16_383;

/// Why a CPU list or id was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CpuSetError {
    /// An element between commas is empty or not a decimal id or `a-b` range.
    InvalidElement {
        /// The element as written.
        element: String,
    },
    /// A range whose start is above its end (`"5-3"`).
    InvalidRange {
        /// The range as written.
        element: String,
        /// Its start.
        start: u32,
        /// Its end.
        end: u32,
    },
    /// An id above [`MAX_CPU_ID`].
    IdTooLarge {
        /// The id (saturated to `u64`).
        id: u64,
    },
}

impl fmt::Display for CpuSetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CpuSetError::InvalidElement { element } => {
                write!(
                    f,
                    "invalid cpu list element {element:?}: expected a cpu id or a range `a-b`"
                )
            }
            CpuSetError::InvalidRange {
                element,
                start,
                end,
            } => {
                write!(f, "invalid range {element:?} ({start} > {end})")
            }
            CpuSetError::IdTooLarge { id } => {
                write!(f, "cpu id {id} exceeds the maximum {MAX_CPU_ID}")
            }
        }
    }
}

impl std::error::Error for CpuSetError {}

/// A set of logical CPU ids, kept sorted and free of duplicates.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CpuSet {
    ids: Vec<u32>,
}

impl CpuSet {
    /// The empty set.
    pub const fn new() -> CpuSet {
        CpuSet { ids: Vec::new() }
    }

    /// A set of the given ids; fails on an id above [`MAX_CPU_ID`].
    pub fn from_ids(ids: impl IntoIterator<Item = u32>) -> Result<CpuSet, CpuSetError> {
        let mut collected = Vec::new();
        for id in ids {
            if id > MAX_CPU_ID {
                return Err(CpuSetError::IdTooLarge { id: u64::from(id) });
            }
            collected.push(id);
        }
        Ok(CpuSet::from_vec(collected))
    }

    /// Parse the list format (`"0-3,8"`; `""` or blanks = empty).
    pub fn parse(text: &str) -> Result<CpuSet, CpuSetError> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(CpuSet::new());
        }
        // Canonical text (ascending, disjoint ranges) expands directly; from
        // the first range out of order on, a bitmap of every possible id
        // takes the ranges, which keeps memory bounded whatever the text repeats.
        let mut ranges: Vec<(u32, u32)> = Vec::new();
        let mut seen: Option<Vec<u64>> = None;
        for element in text.split(',') {
            let element = element.trim();
            let invalid = || CpuSetError::InvalidElement {
                element: element.to_string(),
            };
            let (start, end) = match element.split_once('-') {
                None => {
                    let id = parse_id(element).ok_or_else(invalid)?;
                    (id, id)
                }
                Some((a, b)) => (
                    parse_id(a).ok_or_else(invalid)?,
                    parse_id(b).ok_or_else(invalid)?,
                ),
            };
            for id in [start, end] {
                if id > u64::from(MAX_CPU_ID) {
                    return Err(CpuSetError::IdTooLarge { id });
                }
            }
            // Both ends are at most MAX_CPU_ID here, so the conversions are lossless.
            let (start, end) = (start as u32, end as u32);
            if start > end {
                return Err(CpuSetError::InvalidRange {
                    element: element.to_string(),
                    start,
                    end,
                });
            }
            if seen.is_none() && ranges.last().is_none_or(|&(_, last)| start > last) {
                ranges.push((start, end));
                continue;
            }
            let bitmap = seen.get_or_insert_with(|| {
                let mut bitmap = vec![0u64; (MAX_CPU_ID as usize + 1).div_ceil(64)];
                for (start, end) in ranges.drain(..) {
                    set_bits(&mut bitmap, start, end);
                }
                bitmap
            });
            set_bits(bitmap, start, end);
        }
        let Some(seen) = seen else {
            let total = ranges.iter().map(|&(s, e)| (e - s) as usize + 1).sum();
            let mut ids = Vec::with_capacity(total);
            for (start, end) in ranges {
                ids.extend(start..=end);
            }
            return Ok(CpuSet { ids });
        };
        // Walk the set bits word by word (most words are empty).
        let mut ids = Vec::new();
        for (index, &word) in seen.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                ids.push(index as u32 * 64 + bits.trailing_zeros());
                bits &= bits - 1;
            }
        }
        Ok(CpuSet { ids })
    }

    /// A set from ids already known to be sane (topology ids); sorts and deduplicates.
    pub(crate) fn from_vec(mut ids: Vec<u32>) -> CpuSet {
        ids.sort_unstable();
        ids.dedup();
        CpuSet { ids }
    }

    /// The number of CPUs.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Whether `cpu` is in the set.
    pub fn contains(&self, cpu: u32) -> bool {
        self.ids.binary_search(&cpu).is_ok()
    }

    /// The ids in ascending order.
    pub fn as_slice(&self) -> &[u32] {
        &self.ids
    }

    /// An iterator over the ids in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.ids.iter().copied()
    }

    /// The ids that are in `self` or `other`.
    pub fn union(&self, other: &CpuSet) -> CpuSet {
        let mut ids = Vec::with_capacity(self.ids.len() + other.ids.len());
        let (mut i, mut j) = (0, 0);
        while i < self.ids.len() && j < other.ids.len() {
            let (a, b) = (self.ids[i], other.ids[j]);
            if a < b {
                ids.push(a);
                i += 1;
            } else if b < a {
                ids.push(b);
                j += 1;
            } else {
                ids.push(a);
                i += 1;
                j += 1;
            }
        }
        ids.extend_from_slice(&self.ids[i..]);
        ids.extend_from_slice(&other.ids[j..]);
        CpuSet { ids }
    }

    /// The ids that are in both `self` and `other`.
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        CpuSet {
            ids: self.filter_by(other, true),
        }
    }

    /// The ids of `self` that are not in `other`.
    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        CpuSet {
            ids: self.filter_by(other, false),
        }
    }

    /// The ids of `self` that are (`keep_common`) or are not in `other`,
    /// found by walking both sorted lists once.
    fn filter_by(&self, other: &CpuSet, keep_common: bool) -> Vec<u32> {
        let other = other.ids.as_slice();
        if other.len() * 16 < self.ids.len() {
            // A few ids against many (the reserved or taken CPUs against a
            // pool): find each in `self` and keep or copy the runs between.
            let mut ids = Vec::with_capacity(if keep_common {
                other.len()
            } else {
                self.ids.len()
            });
            let mut from = 0;
            for &id in other {
                let Ok(at) = self.ids[from..].binary_search(&id) else {
                    continue;
                };
                let at = from + at;
                if keep_common {
                    ids.push(id);
                } else {
                    ids.extend_from_slice(&self.ids[from..at]);
                }
                from = at + 1;
            }
            if !keep_common {
                ids.extend_from_slice(&self.ids[from..]);
            }
            return ids;
        }
        let mut ids = Vec::with_capacity(if keep_common {
            self.ids.len().min(other.len())
        } else {
            self.ids.len()
        });
        let mut j = 0;
        for &id in &self.ids {
            while j < other.len() && other[j] < id {
                j += 1;
            }
            let common = j < other.len() && other[j] == id;
            if common == keep_common {
                ids.push(id);
            }
        }
        ids
    }

    /// Whether every id of `self` is in `other`.
    pub fn is_subset_of(&self, other: &CpuSet) -> bool {
        let mut j = 0;
        for &id in &self.ids {
            while j < other.ids.len() && other.ids[j] < id {
                j += 1;
            }
            if j == other.ids.len() || other.ids[j] != id {
                return false;
            }
        }
        true
    }

    /// Whether `self` and `other` share no id.
    pub fn is_disjoint(&self, other: &CpuSet) -> bool {
        let (mut i, mut j) = (0, 0);
        while i < self.ids.len() && j < other.ids.len() {
            match self.ids[i].cmp(&other.ids[j]) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => return false,
            }
        }
        true
    }
}

/// Set the bits `start..=end` of a bitmap of every possible id.
fn set_bits(bitmap: &mut [u64], start: u32, end: u32) {
    for id in start..=end {
        bitmap[id as usize / 64] |= 1u64 << (id % 64);
    }
}

/// A decimal id with at most 19 digits (so it fits `u64`); `None` for anything else.
fn parse_id(text: &str) -> Option<u64> {
    let text = text.trim();
    if text.is_empty() || text.len() > 19 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

impl fmt::Display for CpuSet {
    /// The canonical list format: `"0-3,8"`, `""` when empty.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Each range is formatted by hand into a small buffer: the generic
        // integer formatting costs more than the rest of an admission's output.
        let mut index = 0;
        let mut first = true;
        while index < self.ids.len() {
            let start = self.ids[index];
            let mut end = start;
            while index + 1 < self.ids.len() && self.ids[index + 1] == end + 1 {
                index += 1;
                end = self.ids[index];
            }
            let mut buf = [0u8; 24];
            let mut len = 0;
            if !first {
                buf[0] = b',';
                len = 1;
            }
            first = false;
            len = push_decimal(&mut buf, len, start);
            if start != end {
                buf[len] = b'-';
                len = push_decimal(&mut buf, len + 1, end);
            }
            f.write_str(std::str::from_utf8(&buf[..len]).map_err(|_| fmt::Error)?)?;
            index += 1;
        }
        Ok(())
    }
}

/// Write `value` in decimal into `buf` at `at`; returns the end (a u32 has
/// at most 10 digits, and the callers leave room for two).
fn push_decimal(buf: &mut [u8; 24], at: usize, value: u32) -> usize {
    let mut digits = [0u8; 10];
    let mut n = 0;
    let mut rest = value;
    loop {
        digits[n] = b'0' + (rest % 10) as u8;
        n += 1;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    for (slot, digit) in buf[at..at + n].iter_mut().zip(digits[..n].iter().rev()) {
        *slot = *digit;
    }
    at + n
}

impl FromStr for CpuSet {
    type Err = CpuSetError;

    fn from_str(text: &str) -> Result<CpuSet, CpuSetError> {
        CpuSet::parse(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check_round_trip(text: &str, canonical: &str) {
        let set = CpuSet::parse(text).expect("parses");
        assert_eq!(set.to_string(), canonical, "canonical form of {text:?}");
        assert_eq!(CpuSet::parse(canonical).expect("canonical parses"), set);
    }

    #[test]
    fn cpuset_parses_and_prints_the_list_format() {
        check_round_trip("", "");
        check_round_trip("  \n", "");
        check_round_trip("0", "0");
        check_round_trip("0-3,8", "0-3,8");
        check_round_trip("8,0-3", "0-3,8");
        check_round_trip("0,1,2,3,5,7,8,9", "0-3,5,7-9");
        check_round_trip("2-2", "2");
        check_round_trip("1-3,2-5", "1-5");
        check_round_trip("0-1,3,5-7,9,11\n", "0-1,3,5-7,9,11");
        let repeated = ["0-16383"; 1000].join(",");
        assert_eq!(CpuSet::parse(&repeated).unwrap().len(), 16384);
    }

    #[test]
    fn cpuset_rejects_bad_text_and_absurd_ids() {
        for bad in [
            "a", "1,,2", ",", "1-", "-1", "1-2-3", "0x3", "+1", "1 2", "3-a",
        ] {
            assert!(
                matches!(CpuSet::parse(bad), Err(CpuSetError::InvalidElement { .. })),
                "{bad:?}"
            );
        }
        assert_eq!(
            CpuSet::parse("5-3"),
            Err(CpuSetError::InvalidRange {
                element: "5-3".to_string(),
                start: 5,
                end: 3
            })
        );
        assert_eq!(
            CpuSet::parse("0-4000000000"),
            Err(CpuSetError::IdTooLarge { id: 4_000_000_000 })
        );
        assert_eq!(
            CpuSet::parse("99999999999999999999"),
            Err(CpuSetError::InvalidElement {
                element: "99999999999999999999".to_string()
            })
        );
        assert_eq!(
            CpuSet::from_ids([1, MAX_CPU_ID + 1]),
            Err(CpuSetError::IdTooLarge {
                id: u64::from(MAX_CPU_ID) + 1
            })
        );
        assert_eq!(
            CpuSet::parse("5-3").unwrap_err().to_string(),
            "invalid range \"5-3\" (5 > 3)"
        );
    }

    #[test]
    fn cpuset_set_algebra() {
        let a = CpuSet::parse("0-5").unwrap();
        let b = CpuSet::parse("4-9").unwrap();
        assert_eq!(a.union(&b).to_string(), "0-9");
        assert_eq!(a.intersection(&b).to_string(), "4-5");
        assert_eq!(a.difference(&b).to_string(), "0-3");
        assert_eq!(b.difference(&a).to_string(), "6-9");
        assert!(CpuSet::parse("1,3").unwrap().is_subset_of(&a));
        assert!(!b.is_subset_of(&a));
        assert!(
            CpuSet::parse("0-1")
                .unwrap()
                .is_disjoint(&CpuSet::parse("2-3").unwrap())
        );
        assert!(CpuSet::new().is_subset_of(&CpuSet::new()));
        assert_eq!(
            CpuSet::from_ids([3, 1, 3, 2]).unwrap().as_slice(),
            &[1, 2, 3]
        );
        assert!(a.contains(5) && !a.contains(6));
    }
}
