//! [`ResourceMap`]: a parsed `ResourceList`, ordered by resource name.
//!
//! A pod's lists hold a handful of names (`cpu`, `memory`, now and then
//! `ephemeral-storage` or a `hugepages-<size>`), and an evaluation builds
//! and merges dozens of them per pod. A sorted vector keeps them in one
//! allocation and finds a name in a few comparisons, where a `BTreeMap`
//! allocates a node of eleven slots per map and walks it for every lookup.
//! The API is the part of `BTreeMap`'s the policy uses, with the same
//! order (by name, bytewise) and the same equality.
//!
//! One insertion in the middle moves the entries after it, so nothing that
//! adds many names goes through [`ResourceMap::insert`] one at a time in an
//! order it does not choose: collecting and extending sort once, and
//! [`ResourceMap::merge_with`] (sums and maxima of two maps) walks both maps
//! once. A pod of tens of thousands of names in reverse order then costs a
//! sort, not a quadratic shuffle that would run into the call's deadline.

use std::fmt;

use crate::quantity::Quantity;

/// A parsed `ResourceList`: resource names and their quantities, ordered
/// by name, each name once.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ResourceMap {
    entries: Vec<(String, Quantity)>,
}

impl ResourceMap {
    /// The empty map (allocates nothing).
    pub const fn new() -> ResourceMap {
        ResourceMap {
            entries: Vec::new(),
        }
    }

    /// An empty map with room for `capacity` names.
    pub fn with_capacity(capacity: usize) -> ResourceMap {
        ResourceMap {
            entries: Vec::with_capacity(capacity),
        }
    }

    /// Where `name` is, or where it would go.
    fn find(&self, name: &str) -> Result<usize, usize> {
        self.entries
            .binary_search_by(|(key, _)| key.as_str().cmp(name))
    }

    /// The quantity of `name`.
    pub fn get(&self, name: &str) -> Option<&Quantity> {
        self.find(name).ok().map(|at| &self.entries[at].1)
    }

    /// The quantity of `name`, to change it.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut Quantity> {
        match self.find(name) {
            Ok(at) => Some(&mut self.entries[at].1),
            Err(_) => None,
        }
    }

    /// Whether `name` is in the map.
    pub fn contains_key(&self, name: &str) -> bool {
        self.find(name).is_ok()
    }

    /// Set `name` to `quantity`; the quantity it had, if any.
    pub fn insert(&mut self, name: String, quantity: Quantity) -> Option<Quantity> {
        // Lists mostly arrive sorted (API objects keep their maps in key
        // order): a name after the last one is appended with one comparison.
        if self
            .entries
            .last()
            .is_none_or(|(last, _)| last.as_str() < name.as_str())
        {
            self.entries.push((name, quantity));
            return None;
        }
        match self.find(&name) {
            Ok(at) => Some(std::mem::replace(&mut self.entries[at].1, quantity)),
            Err(at) => {
                self.entries.insert(at, (name, quantity));
                None
            }
        }
    }

    /// Take `name` out; its quantity, if it was there.
    pub fn remove(&mut self, name: &str) -> Option<Quantity> {
        self.find(name).ok().map(|at| self.entries.remove(at).1)
    }

    /// The entry of `name`, to read, insert or change it in one lookup.
    pub fn entry(&mut self, name: String) -> Entry<'_> {
        match self.find(&name) {
            Ok(at) => Entry::Occupied(&mut self.entries[at].1),
            Err(at) => Entry::Vacant {
                entries: &mut self.entries,
                at,
                name,
            },
        }
    }

    /// Keep only the entries `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&String, &mut Quantity) -> bool) {
        self.entries
            .retain_mut(|(name, quantity)| keep(name, quantity));
    }

    /// Fold `other` into `self`, walking both once: a name only in `other`
    /// is added with its quantity, a name in both becomes
    /// `combine(mine, theirs)`.
    pub fn merge_with(
        &mut self,
        other: &ResourceMap,
        combine: impl Fn(Quantity, Quantity) -> Quantity,
    ) {
        if other.is_empty() {
            return;
        }
        if self.covers(other) {
            // The common case (the same few names): change values in place.
            let mut at = 0;
            for (name, theirs) in &other.entries {
                while self.entries[at].0 != *name {
                    at += 1;
                }
                self.entries[at].1 = combine(self.entries[at].1, *theirs);
            }
            return;
        }
        let mine = std::mem::take(&mut self.entries);
        let mut merged = Vec::with_capacity(mine.len() + other.len());
        let mut theirs = other.entries.iter().peekable();
        for (name, quantity) in mine {
            while let Some((other_name, other_quantity)) =
                theirs.next_if(|(other_name, _)| *other_name < name)
            {
                merged.push((other_name.clone(), *other_quantity));
            }
            match theirs.next_if(|(other_name, _)| *other_name == name) {
                Some((_, other_quantity)) => {
                    merged.push((name, combine(quantity, *other_quantity)))
                }
                None => merged.push((name, quantity)),
            }
        }
        merged.extend(theirs.map(|(name, quantity)| (name.clone(), *quantity)));
        self.entries = merged;
    }

    /// Whether every name of `other` is in `self` (one walk of both).
    fn covers(&self, other: &ResourceMap) -> bool {
        let mut mine = self.entries.iter();
        other
            .entries
            .iter()
            .all(|(name, _)| mine.any(|(my_name, _)| my_name == name))
    }

    /// Sort entries that were pushed in any order, the last quantity of a
    /// name winning, as repeated `BTreeMap` inserts leave it.
    fn normalize(&mut self) {
        if self.entries.windows(2).all(|pair| pair[0].0 < pair[1].0) {
            return;
        }
        // Stable: equal names keep their order, so the last pushed is last.
        self.entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut kept: Vec<(String, Quantity)> = Vec::with_capacity(self.entries.len());
        for entry in self.entries.drain(..) {
            match kept.last_mut() {
                Some(last) if last.0 == entry.0 => *last = entry,
                _ => kept.push(entry),
            }
        }
        self.entries = kept;
    }

    /// How many names the map holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the map holds no name.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries, in name order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            inner: self.entries.iter(),
        }
    }

    /// The entries, in name order, quantities changeable.
    pub fn iter_mut(&mut self) -> impl DoubleEndedIterator<Item = (&String, &mut Quantity)> {
        self.entries
            .iter_mut()
            .map(|(name, quantity)| (&*name, quantity))
    }

    /// The names, in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &String> + Clone {
        self.entries.iter().map(|(name, _)| name)
    }

    /// The quantities, in name order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &Quantity> + Clone {
        self.entries.iter().map(|(_, quantity)| quantity)
    }

    /// The quantities, in name order, changeable.
    pub fn values_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut Quantity> {
        self.entries.iter_mut().map(|(_, quantity)| quantity)
    }
}

/// An entry of a [`ResourceMap`] ([`ResourceMap::entry`]).
pub enum Entry<'a> {
    /// The name is in the map.
    Occupied(&'a mut Quantity),
    /// The name is not: inserting puts it at `at`.
    Vacant {
        /// The map's entries.
        entries: &'a mut Vec<(String, Quantity)>,
        /// Where the name goes.
        at: usize,
        /// The name.
        name: String,
    },
}

impl<'a> Entry<'a> {
    /// The quantity, inserting `default` first when the name is not there.
    pub fn or_insert(self, default: Quantity) -> &'a mut Quantity {
        self.or_insert_with(|| default)
    }

    /// The quantity, inserting `default()` first when the name is not there.
    pub fn or_insert_with(self, default: impl FnOnce() -> Quantity) -> &'a mut Quantity {
        match self {
            Entry::Occupied(quantity) => quantity,
            Entry::Vacant { entries, at, name } => {
                entries.insert(at, (name, default()));
                &mut entries[at].1
            }
        }
    }

    /// Change the quantity when the name is there.
    pub fn and_modify(self, change: impl FnOnce(&mut Quantity)) -> Entry<'a> {
        match self {
            Entry::Occupied(quantity) => {
                change(quantity);
                Entry::Occupied(quantity)
            }
            vacant => vacant,
        }
    }
}

/// The entries of a [`ResourceMap`] by reference, in name order.
#[derive(Clone)]
pub struct Iter<'a> {
    inner: std::slice::Iter<'a, (String, Quantity)>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a String, &'a Quantity);

    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next().map(|(name, quantity)| (name, quantity))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.inner
            .next_back()
            .map(|(name, quantity)| (name, quantity))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a ResourceMap {
    type Item = (&'a String, &'a Quantity);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl IntoIterator for ResourceMap {
    type Item = (String, Quantity);
    type IntoIter = std::vec::IntoIter<(String, Quantity)>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

impl FromIterator<(String, Quantity)> for ResourceMap {
    fn from_iter<I: IntoIterator<Item = (String, Quantity)>>(items: I) -> ResourceMap {
        let mut map = ResourceMap::new();
        map.extend(items);
        map
    }
}

impl Extend<(String, Quantity)> for ResourceMap {
    /// Later entries of a name replace earlier ones, as in a `BTreeMap`;
    /// one sort for the whole batch, whatever its order.
    fn extend<I: IntoIterator<Item = (String, Quantity)>>(&mut self, items: I) {
        self.entries.extend(items);
        self.normalize();
    }
}

impl<const N: usize> From<[(String, Quantity); N]> for ResourceMap {
    fn from(items: [(String, Quantity); N]) -> ResourceMap {
        items.into_iter().collect()
    }
}

impl fmt::Debug for ResourceMap {
    /// As a `BTreeMap` prints: `{"cpu": .., "memory": ..}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn q(text: &str) -> Quantity {
        Quantity::parse(text).expect("a quantity")
    }

    /// Every operation agrees with a `BTreeMap` doing the same, in order
    /// and content, over a sequence that inserts, replaces, removes and
    /// changes names in every position.
    #[test]
    fn behaves_as_a_btree_map_of_the_same_operations() {
        let names = [
            "memory",
            "cpu",
            "hugepages-2Mi",
            "ephemeral-storage",
            "a",
            "zz",
        ];
        let mut map = ResourceMap::new();
        let mut model: BTreeMap<String, Quantity> = BTreeMap::new();
        for (step, name) in names.iter().cycle().take(40).enumerate() {
            let quantity = q(&format!("{step}"));
            match step % 5 {
                0 | 1 => assert_eq!(
                    map.insert(name.to_string(), quantity),
                    model.insert(name.to_string(), quantity)
                ),
                2 => assert_eq!(map.remove(name), model.remove(*name)),
                3 => {
                    *map.entry(name.to_string()).or_insert(Quantity::ZERO) = quantity;
                    *model.entry(name.to_string()).or_insert(Quantity::ZERO) = quantity;
                }
                _ => {
                    map.entry(name.to_string())
                        .and_modify(|v| *v = quantity)
                        .or_insert_with(|| Quantity::ZERO);
                    model
                        .entry(name.to_string())
                        .and_modify(|v| *v = quantity)
                        .or_insert_with(|| Quantity::ZERO);
                }
            }
            let ours: Vec<_> = map.iter().map(|(k, v)| (k.clone(), *v)).collect();
            let theirs: Vec<_> = model.iter().map(|(k, v)| (k.clone(), *v)).collect();
            assert_eq!(ours, theirs, "after step {step}");
            assert_eq!(map.len(), model.len());
            for probe in names {
                assert_eq!(
                    map.get(probe),
                    model.get(probe),
                    "{probe} after step {step}"
                );
                assert_eq!(map.contains_key(probe), model.contains_key(probe));
            }
        }
    }

    /// A xorshift64 generator from `seed`: the tests' pseudo-random
    /// sequences are fixed, so a failure replays.
    fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
        move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        }
    }

    /// The same over a long pseudo-random sequence (a fixed xorshift seed,
    /// so a failure replays): names that are prefixes of each other, the
    /// empty name and non-ASCII ones, every operation, and the whole
    /// content, iteration both ways and equality compared after each step.
    #[test]
    fn random_operations_agree_with_a_btree_map() {
        let names = [
            "",
            "cpu",
            "cpus",
            "c",
            "memory",
            "hugepages-1Gi",
            "hugepages-2Mi",
            "é",
        ];
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        let mut map = ResourceMap::new();
        let mut model: BTreeMap<String, Quantity> = BTreeMap::new();
        for step in 0..5_000 {
            let name = names[(next() % names.len() as u64) as usize];
            let quantity = q(&format!("{}", next() % 1000));
            match next() % 6 {
                0 | 1 => assert_eq!(
                    map.insert(name.to_string(), quantity),
                    model.insert(name.to_string(), quantity)
                ),
                2 => assert_eq!(map.remove(name), model.remove(name)),
                3 => {
                    *map.entry(name.to_string()).or_insert(quantity) = plus_one(quantity);
                    *model.entry(name.to_string()).or_insert(quantity) = plus_one(quantity);
                }
                4 => {
                    if let Some(v) = map.get_mut(name) {
                        *v = quantity;
                    }
                    if let Some(v) = model.get_mut(name) {
                        *v = quantity;
                    }
                }
                _ => {
                    map.retain(|_, v| *v < quantity);
                    model.retain(|_, v| *v < quantity);
                }
            }
            let ours: Vec<_> = map.iter().map(|(k, v)| (k.clone(), *v)).collect();
            let theirs: Vec<_> = model.iter().map(|(k, v)| (k.clone(), *v)).collect();
            assert_eq!(ours, theirs, "after step {step}");
            let ours_back: Vec<_> = map.iter().rev().map(|(k, _)| k.clone()).collect();
            let theirs_back: Vec<_> = model.keys().rev().cloned().collect();
            assert_eq!(ours_back, theirs_back);
            let rebuilt: ResourceMap = model.clone().into_iter().collect();
            assert_eq!(map, rebuilt, "equality after step {step}");
        }
    }

    /// `merge_with` against the same fold on a `BTreeMap`, for sums and
    /// maxima, with maps that share all, some or none of their names
    /// (equal quantities of different formats included, so a fold that
    /// took the wrong side of a tie would print differently).
    #[test]
    fn merging_agrees_with_a_btree_map_fold() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        let names = ["a", "cpu", "cpus", "hugepages-2Mi", "memory", "zz"];
        let max = |mine: Quantity, theirs: Quantity| if mine >= theirs { mine } else { theirs };
        for round in 0..500 {
            let mut pick = || -> Vec<(String, Quantity)> {
                let mut picked = Vec::new();
                for name in names {
                    if next().is_multiple_of(2) {
                        // "1Gi" and "1073741824" are equal with different formats.
                        let text = ["1Gi", "1073741824", "2", "500m"][(next() % 4) as usize];
                        picked.push((name.to_string(), q(text)));
                    }
                }
                picked
            };
            let (mine, theirs) = (pick(), pick());
            for (which, combine) in [
                (
                    "sum",
                    Quantity::saturating_add as fn(Quantity, Quantity) -> Quantity,
                ),
                ("max", max),
            ] {
                let mut map: ResourceMap = mine.clone().into_iter().collect();
                map.merge_with(&theirs.clone().into_iter().collect(), combine);
                let mut model: BTreeMap<String, Quantity> = mine.clone().into_iter().collect();
                for (name, quantity) in &theirs {
                    match model.get_mut(name) {
                        Some(v) => *v = combine(*v, *quantity),
                        None => {
                            model.insert(name.clone(), *quantity);
                        }
                    }
                }
                let ours: Vec<_> = map
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_string()))
                    .collect();
                let theirs_text: Vec<_> = model
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_string()))
                    .collect();
                assert_eq!(ours, theirs_text, "{which}, round {round}");
            }
        }
    }

    /// A long batch in reverse order with repeated names collects to the
    /// sorted map, the last quantity of a name winning, in one sort.
    #[test]
    fn a_long_reversed_batch_collects_sorted() {
        let items: Vec<(String, Quantity)> = (0..50_000)
            .rev()
            .map(|i| (format!("example.com/r{i:06}"), q(&format!("{}", i % 7))))
            .chain([("example.com/r000001".to_string(), q("9"))])
            .collect();
        let map: ResourceMap = items.into_iter().collect();
        assert_eq!(map.len(), 50_000);
        assert!(map.keys().zip(map.keys().skip(1)).all(|(a, b)| a < b));
        assert_eq!(map.get("example.com/r000001"), Some(&q("9")));
        assert_eq!(map.get("example.com/r000008"), Some(&q("1")));
    }

    fn plus_one(quantity: Quantity) -> Quantity {
        quantity.saturating_add(q("1"))
    }

    #[test]
    fn collecting_keeps_the_last_quantity_of_a_name_and_sorts_by_name() {
        let map: ResourceMap = [
            ("memory".to_string(), q("1Gi")),
            ("cpu".to_string(), q("1")),
            ("memory".to_string(), q("2Gi")),
        ]
        .into_iter()
        .collect();
        let names: Vec<&String> = map.keys().collect();
        assert_eq!(names, ["cpu", "memory"]);
        assert_eq!(map.get("memory"), Some(&q("2Gi")));
        assert_eq!(
            format!("{map:?}"),
            format!("{:?}", {
                let model: BTreeMap<String, Quantity> = [
                    ("cpu".to_string(), q("1")),
                    ("memory".to_string(), q("2Gi")),
                ]
                .into();
                model
            })
        );
    }

    #[test]
    fn retain_and_equality_follow_content_not_history() {
        let mut a: ResourceMap = [
            ("cpu".to_string(), q("1")),
            ("memory".to_string(), q("1Gi")),
        ]
        .into();
        let b: ResourceMap = [("memory".to_string(), q("1Gi"))].into();
        assert_ne!(a, b);
        a.retain(|name, _| name != "cpu");
        assert_eq!(a, b);
        assert!(ResourceMap::new().is_empty());
    }
}
