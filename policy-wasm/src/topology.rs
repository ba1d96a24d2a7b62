//! The kubelet Topology Manager core: NUMA affinity masks, hint merging, the
//! four policies and the two admission scopes, as pure functions.
//!
//! Mirrors upstream `pkg/kubelet/cm/topologymanager`: `bitmask/bitmask.go`
//! ([`BitMask`], [`iterate_bit_masks`]), `numa_info.go` ([`NumaInfo`]),
//! `policy_options.go` ([`PolicyOptions`]), `policy.go` ([`filter_providers_hints`],
//! [`merge_permutation`], [`HintMerger`]), `policy_{none,best_effort,restricted,
//! single_numa_node}.go` ([`Policy`]), `topology_manager.go` ([`new_manager`]) and
//! `scope_{container,pod}.go` ([`container_scope_admit`], [`pod_scope_admit`],
//! including the KEP-5526 pod-level branch).
//!
//! Hint providers are plain data. One provider's answer is a [`ProviderHints`]:
//! `None` is Go's nil map, `Some(map)` a map whose values keep Go's distinction
//! between a nil hint list (`None`: no preference for that resource) and an
//! empty one (`Some(vec![])`: no possible affinity, so unsatisfiable). A
//! [`BTreeMap`] stands in for Go's map; the merge result does not depend on the
//! iteration order. Feature gates come in as [`OptionGates`], never from globals.

use std::collections::BTreeMap;
use std::fmt;

use crate::features::FeatureGates;

/// Upstream `defaultMaxAllowableNUMANodes`: the NUMA node limit unless raised.
pub const DEFAULT_MAX_ALLOWABLE_NUMA_NODES: usize = 8;
/// The policy option `prefer-closest-numa-nodes` (GA).
pub const PREFER_CLOSEST_NUMA_NODES: &str = "prefer-closest-numa-nodes";
/// The policy option `max-allowable-numa-nodes` (GA).
pub const MAX_ALLOWABLE_NUMA_NODES: &str = "max-allowable-numa-nodes";
/// The admission reason of a topology rejection (`ErrorTopologyAffinity`).
pub const ERROR_TOPOLOGY_AFFINITY: &str = "TopologyAffinityError";

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

fn check_bit(bit: usize) -> Result<u64, BitMaskError> {
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

/// A hint provider's view of where a resource can be placed
/// (upstream `TopologyHint`). `numa_affinity: None` means "don't care".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TopologyHint {
    /// The NUMA nodes, or `None` (nil) for no preference.
    pub numa_affinity: Option<BitMask>,
    /// Whether the provider prefers this placement.
    pub preferred: bool,
}

impl TopologyHint {
    /// A hint with the given mask.
    pub const fn new(mask: BitMask, preferred: bool) -> TopologyHint {
        TopologyHint {
            numa_affinity: Some(mask),
            preferred,
        }
    }

    /// A hint without a mask ("don't care").
    pub const fn any(preferred: bool) -> TopologyHint {
        TopologyHint {
            numa_affinity: None,
            preferred,
        }
    }

    fn count(&self) -> usize {
        self.numa_affinity.map_or(0, BitMask::count)
    }
}

/// One hint provider's answer (`map[string][]TopologyHint`): `None` is a nil
/// map, a `None` list is a nil hint list, `Some(vec![])` an empty one.
pub type ProviderHints = Option<BTreeMap<String, Option<Vec<TopologyHint>>>>;

/// Converts a provider's non-nil hint lists (`map[string][]TopologyHint`
/// without nil lists, as the memory manager returns) to [`ProviderHints`].
pub fn provider_hints(hints: Option<BTreeMap<String, Vec<TopologyHint>>>) -> ProviderHints {
    hints.map(|map| {
        map.into_iter()
            .map(|(name, list)| (name, Some(list)))
            .collect()
    })
}

/// The machine's NUMA nodes and their distances (upstream `NUMAInfo`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NumaInfo {
    /// NUMA node ids, in discovery order.
    pub nodes: Vec<usize>,
    /// `distances[i][j]`: the distance from node `i` to node `j` (sysfs
    /// `node<i>/distance`, indexed by node id). A missing entry counts as 0.
    pub distances: BTreeMap<usize, Vec<u64>>,
}

/// One discovered NUMA node, as `NewNUMAInfo` reads it from cAdvisor.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NumaNode {
    /// The NUMA node id.
    pub id: usize,
    /// Its distance row, if it could be read.
    pub distances: Option<Vec<u64>>,
}

impl NumaInfo {
    /// A `NumaInfo` from its parts.
    pub fn new(nodes: Vec<usize>, distances: BTreeMap<usize, Vec<u64>>) -> NumaInfo {
        NumaInfo { nodes, distances }
    }

    /// Upstream `NewNUMAInfo`: distances are required (and kept) only with
    /// `prefer-closest-numa-nodes`.
    pub fn discover(
        topology: &[NumaNode],
        options: &PolicyOptions,
    ) -> Result<NumaInfo, TopologyError> {
        let mut info = NumaInfo::default();
        for node in topology {
            info.nodes.push(node.id);
            if options.prefer_closest_numa {
                let row = node
                    .distances
                    .clone()
                    .ok_or(TopologyError::MissingNumaDistances)?;
                info.distances.insert(node.id, row);
            }
        }
        Ok(info)
    }

    /// The mask of every NUMA node (`DefaultAffinityMask`). Ids above 63 are
    /// dropped here; [`Policy::new`] rejects them.
    pub fn default_affinity_mask(&self) -> BitMask {
        self.nodes
            .iter()
            .filter_map(|&id| check_bit(id).ok())
            .fold(BitMask::empty(), |m, b| m.or(BitMask(b)))
    }

    /// `m1` if it is narrower than `m2`, else `m2` (`Narrowest`).
    pub fn narrowest(&self, m1: BitMask, m2: BitMask) -> BitMask {
        if m1.is_narrower_than(m2) { m1 } else { m2 }
    }

    /// Upstream `Closest`: different counts fall back to [`NumaInfo::narrowest`];
    /// equal counts pick the smaller average distance, and on a tie the
    /// numerically smaller mask.
    pub fn closest(&self, m1: BitMask, m2: BitMask) -> BitMask {
        if m1.count() != m2.count() {
            return self.narrowest(m1, m2);
        }
        let d1 = self.calculate_average_for(m1);
        let d2 = self.calculate_average_for(m2);
        if d1 == d2 {
            return if m1.is_less_than(m2) { m1 } else { m2 };
        }
        if d1 < d2 { m1 } else { m2 }
    }

    /// The mean of `distances[i][j]` over all ordered pairs of set bits,
    /// diagonal included; 0 for an empty mask (`CalculateAverageFor`).
    pub fn calculate_average_for(&self, mask: BitMask) -> f64 {
        let bits = mask.bits();
        if bits.is_empty() {
            return 0.0;
        }
        // Same summation order as upstream, so equal averages compare equal.
        let mut sum = 0.0f64;
        let mut count = 0.0f64;
        for &from in &bits {
            let row = self.distances.get(&from);
            for &to in &bits {
                let distance = row.and_then(|r| r.get(to)).copied().unwrap_or(0);
                sum += distance as f64;
                count += 1.0;
            }
        }
        sum / count
    }
}

/// Which option gates are on: `TopologyManagerPolicyAlphaOptions` and
/// `TopologyManagerPolicyBetaOptions`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionGates {
    /// `TopologyManagerPolicyAlphaOptions` (default off).
    pub alpha_options: bool,
    /// `TopologyManagerPolicyBetaOptions` (default on).
    pub beta_options: bool,
}

impl Default for OptionGates {
    fn default() -> OptionGates {
        OptionGates {
            alpha_options: false,
            beta_options: true,
        }
    }
}

impl From<&FeatureGates> for OptionGates {
    fn from(gates: &FeatureGates) -> OptionGates {
        OptionGates {
            alpha_options: gates.topology_manager_policy_alpha_options,
            beta_options: gates.topology_manager_policy_beta_options,
        }
    }
}

/// The maturity of a policy option, which decides the gate it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptionMaturity {
    /// Needs `TopologyManagerPolicyAlphaOptions`.
    Alpha,
    /// Needs `TopologyManagerPolicyBetaOptions`.
    Beta,
    /// Always available.
    Stable,
}

/// Every known option and its maturity in Kubernetes 1.36: both options are
/// GA, so the alpha and beta sets are empty upstream.
pub const POLICY_OPTIONS: &[(&str, OptionMaturity)] = &[
    (PREFER_CLOSEST_NUMA_NODES, OptionMaturity::Stable),
    (MAX_ALLOWABLE_NUMA_NODES, OptionMaturity::Stable),
];

/// The parsed topology manager policy options (upstream `PolicyOptions`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PolicyOptions {
    /// `prefer-closest-numa-nodes`.
    pub prefer_closest_numa: bool,
    /// `max-allowable-numa-nodes` (at least [`DEFAULT_MAX_ALLOWABLE_NUMA_NODES`]).
    pub max_allowable_numa_nodes: usize,
}

impl Default for PolicyOptions {
    fn default() -> PolicyOptions {
        PolicyOptions {
            prefer_closest_numa: false,
            max_allowable_numa_nodes: DEFAULT_MAX_ALLOWABLE_NUMA_NODES,
        }
    }
}

/// Upstream `CheckPolicyOptionAvailable`: the option is known and its maturity gate is on.
pub fn check_policy_option_available(
    option: &str,
    gates: OptionGates,
) -> Result<(), TopologyError> {
    check_option_in(POLICY_OPTIONS, option, gates)
}

fn check_option_in(
    table: &[(&str, OptionMaturity)],
    option: &str,
    gates: OptionGates,
) -> Result<(), TopologyError> {
    let Some(&(_, maturity)) = table.iter().find(|(name, _)| *name == option) else {
        return Err(TopologyError::UnknownOption(option.to_string()));
    };
    match maturity {
        OptionMaturity::Alpha if !gates.alpha_options => {
            Err(TopologyError::AlphaOptionNotEnabled(option.to_string()))
        }
        OptionMaturity::Beta if !gates.beta_options => {
            Err(TopologyError::BetaOptionNotEnabled(option.to_string()))
        }
        _ => Ok(()),
    }
}

/// Upstream `NewPolicyOptions`. Options are checked in name order (Go's map
/// order is random, so which of several bad options is reported may differ).
pub fn new_policy_options(
    options: &BTreeMap<String, String>,
    gates: OptionGates,
) -> Result<PolicyOptions, TopologyError> {
    let mut parsed = PolicyOptions::default();
    for (name, value) in options {
        check_policy_option_available(name, gates)?;
        match name.as_str() {
            PREFER_CLOSEST_NUMA_NODES => {
                parsed.prefer_closest_numa =
                    parse_go_bool(value).ok_or_else(|| TopologyError::BadOptionValue {
                        option: name.clone(),
                        value: value.clone(),
                    })?;
            }
            MAX_ALLOWABLE_NUMA_NODES => {
                let number = parse_go_int(value).map_err(|reason| TopologyError::NotAnInteger {
                    option: name.clone(),
                    value: value.clone(),
                    reason,
                })?;
                if number < DEFAULT_MAX_ALLOWABLE_NUMA_NODES as i64 {
                    return Err(TopologyError::MaxAllowableTooLow {
                        option: name.clone(),
                    });
                }
                // On 32-bit targets a huge limit saturates; it is only an upper bound.
                parsed.max_allowable_numa_nodes = usize::try_from(number).unwrap_or(usize::MAX);
            }
            _ => return Err(TopologyError::UnknownOption(name.clone())),
        }
    }
    Ok(parsed)
}

/// Go `strconv.ParseBool`.
fn parse_go_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Why Go `strconv.Atoi` rejected a string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtoiError {
    /// `invalid syntax`.
    InvalidSyntax,
    /// `value out of range`.
    OutOfRange,
}

impl fmt::Display for AtoiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AtoiError::InvalidSyntax => "invalid syntax",
            AtoiError::OutOfRange => "value out of range",
        })
    }
}

/// Go `strconv.Atoi` on a 64-bit platform: optional sign, decimal digits only.
fn parse_go_int(value: &str) -> Result<i64, AtoiError> {
    let (negative, digits) = match value.as_bytes().first() {
        Some(b'-') => (true, &value[1..]),
        Some(b'+') => (false, &value[1..]),
        _ => (false, value),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(AtoiError::InvalidSyntax);
    }
    let mut magnitude: i128 = 0;
    for b in digits.bytes() {
        magnitude = magnitude * 10 + i128::from(b - b'0');
        if magnitude > i128::from(i64::MAX) + 1 {
            return Err(AtoiError::OutOfRange);
        }
    }
    let signed = if negative { -magnitude } else { magnitude };
    i64::try_from(signed).map_err(|_| AtoiError::OutOfRange)
}

/// A topology manager policy name (`--topology-manager-policy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PolicyName {
    /// `none`: no alignment, always admit.
    None,
    /// `best-effort`: merge, always admit.
    BestEffort,
    /// `restricted`: merge, admit only preferred hints.
    Restricted,
    /// `single-numa-node`: single-node (or don't-care) hints only, admit only preferred.
    SingleNumaNode,
}

impl PolicyName {
    /// Parses an upstream policy name.
    pub fn parse(name: &str) -> Result<PolicyName, TopologyError> {
        match name {
            "none" => Ok(PolicyName::None),
            "best-effort" => Ok(PolicyName::BestEffort),
            "restricted" => Ok(PolicyName::Restricted),
            "single-numa-node" => Ok(PolicyName::SingleNumaNode),
            _ => Err(TopologyError::UnknownPolicy(name.to_string())),
        }
    }

    /// The upstream name.
    pub const fn as_str(self) -> &'static str {
        match self {
            PolicyName::None => "none",
            PolicyName::BestEffort => "best-effort",
            PolicyName::Restricted => "restricted",
            PolicyName::SingleNumaNode => "single-numa-node",
        }
    }
}

/// A topology manager scope (`--topology-manager-scope`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// The `none` policy's scope: no hints, every container allocated unaligned.
    None,
    /// `container`: one merge per container (the default).
    Container,
    /// `pod`: one merge for the whole pod.
    Pod,
}

impl Scope {
    /// The name used in the kubelet's configuration (`none` for the `none`
    /// policy, which has no scope of its own).
    pub const fn as_str(self) -> &'static str {
        match self {
            Scope::None => "none",
            Scope::Container => "container",
            Scope::Pod => "pod",
        }
    }

    /// Parses `container` or `pod`.
    pub fn parse(name: &str) -> Result<Scope, TopologyError> {
        match name {
            "container" => Ok(Scope::Container),
            "pod" => Ok(Scope::Pod),
            _ => Err(TopologyError::UnknownScope(name.to_string())),
        }
    }
}

/// Configuration errors of the topology manager, with upstream texts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopologyError {
    /// An option name no maturity set knows.
    UnknownOption(String),
    /// An alpha option while `TopologyManagerPolicyAlphaOptions` is off.
    AlphaOptionNotEnabled(String),
    /// A beta option while `TopologyManagerPolicyBetaOptions` is off.
    BetaOptionNotEnabled(String),
    /// A boolean option whose value `strconv.ParseBool` rejects.
    BadOptionValue {
        /// The option name.
        option: String,
        /// The rejected value.
        value: String,
    },
    /// An integer option whose value `strconv.Atoi` rejects.
    NotAnInteger {
        /// The option name.
        option: String,
        /// The rejected value.
        value: String,
        /// Why it was rejected.
        reason: AtoiError,
    },
    /// `max-allowable-numa-nodes` below [`DEFAULT_MAX_ALLOWABLE_NUMA_NODES`].
    MaxAllowableTooLow {
        /// The option name.
        option: String,
    },
    /// `prefer-closest-numa-nodes` is set but a node has no distance row.
    MissingNumaDistances,
    /// More NUMA nodes than `max-allowable-numa-nodes`.
    TooManyNumaNodes {
        /// The limit in force.
        max: usize,
    },
    /// A NUMA node id a [`BitMask`] cannot hold.
    InvalidNumaNode(BitMaskError),
    /// An unknown policy name.
    UnknownPolicy(String),
    /// An unknown scope name.
    UnknownScope(String),
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopologyError::UnknownOption(name) => {
                write!(f, "unknown Topology Manager Policy option: {name:?}")
            }
            TopologyError::AlphaOptionNotEnabled(name) => {
                write!(
                    f,
                    "Topology Manager Policy Alpha-level Options not enabled, but option {name:?} provided"
                )
            }
            TopologyError::BetaOptionNotEnabled(name) => {
                write!(
                    f,
                    "Topology Manager Policy Beta-level Options not enabled, but option {name:?} provided"
                )
            }
            TopologyError::BadOptionValue { option, value } => {
                write!(
                    f,
                    "bad value for option {option:?}: strconv.ParseBool: parsing {value:?}: invalid syntax"
                )
            }
            TopologyError::NotAnInteger {
                option,
                value,
                reason,
            } => write!(
                f,
                "unable to convert policy option to integer {option:?}: strconv.Atoi: parsing {value:?}: {reason}"
            ),
            TopologyError::MaxAllowableTooLow { option } => write!(
                f,
                "the minimum value of {option:?} should not be less than {DEFAULT_MAX_ALLOWABLE_NUMA_NODES}"
            ),
            TopologyError::MissingNumaDistances => f.write_str(
                "cannot discover NUMA topology: error getting NUMA distances from cadvisor",
            ),
            TopologyError::TooManyNumaNodes { max } => {
                write!(f, "unsupported on machines with more than {max} NUMA Nodes")
            }
            TopologyError::InvalidNumaNode(err) => {
                write!(f, "cannot discover NUMA topology: {err}")
            }
            TopologyError::UnknownPolicy(name) => write!(f, "unknown policy: \"{name}\""),
            TopologyError::UnknownScope(name) => write!(f, "unknown scope: \"{name}\""),
        }
    }
}

impl core::error::Error for TopologyError {}

/// Upstream `filterProvidersHints`: one hint list per (provider, resource).
/// A provider with a nil or empty map, or a resource with a nil list, becomes
/// `[{nil, preferred}]`; a resource with an empty list `[{nil, not preferred}]`.
pub fn filter_providers_hints(providers_hints: &[ProviderHints]) -> Vec<Vec<TopologyHint>> {
    let mut all = Vec::new();
    for provider in providers_hints {
        let Some(resources) = provider.as_ref().filter(|map| !map.is_empty()) else {
            all.push(vec![TopologyHint::any(true)]);
            continue;
        };
        for hints in resources.values() {
            match hints {
                None => all.push(vec![TopologyHint::any(true)]),
                Some(list) if list.is_empty() => all.push(vec![TopologyHint::any(false)]),
                Some(list) => all.push(list.clone()),
            }
        }
    }
    all
}

/// Upstream `mergePermutation`: AND of `default_affinity` with every non-nil
/// mask; preferred only if every hint is preferred and every non-nil mask is
/// identical (so {0} with {0,1} is not preferred). The result always has a mask.
pub fn merge_permutation(default_affinity: BitMask, permutation: &[&TopologyHint]) -> TopologyHint {
    let mut preferred = true;
    let mut merged = default_affinity;
    let mut first: Option<BitMask> = None;
    for hint in permutation {
        if let Some(mask) = hint.numa_affinity {
            let first_mask = *first.get_or_insert(mask);
            if mask != first_mask {
                preferred = false;
            }
            merged = merged.and(mask);
        }
        if !hint.preferred {
            preferred = false;
        }
    }
    TopologyHint::new(merged, preferred)
}

/// Upstream `narrowestHint`: the narrowest non-nil mask in a list (first wins ties).
fn narrowest_mask(hints: &[TopologyHint]) -> Option<BitMask> {
    let mut narrowest: Option<BitMask> = None;
    for mask in hints.iter().filter_map(|h| h.numa_affinity) {
        match narrowest {
            Some(best) if !mask.is_narrower_than(best) => {}
            _ => narrowest = Some(mask),
        }
    }
    narrowest
}

/// Upstream `maxOfMinAffinityCounts`: over every resource list, the count of
/// its narrowest mask; the maximum of those (0 without masks).
pub fn max_of_min_affinity_counts(filtered_hints: &[Vec<TopologyHint>]) -> usize {
    filtered_hints
        .iter()
        .filter_map(|hints| narrowest_mask(hints))
        .map(BitMask::count)
        .max()
        .unwrap_or(0)
}

/// Upstream `HintMerger`: walks the cartesian product of the filtered hint
/// lists and keeps the best merged hint.
#[derive(Clone, Debug)]
pub struct HintMerger<'a> {
    numa_info: &'a NumaInfo,
    hints: &'a [Vec<TopologyHint>],
    /// The target width for non-preferred hints ([`max_of_min_affinity_counts`]).
    pub best_non_preferred_affinity_count: usize,
    /// Whether equal preference is decided by [`NumaInfo::closest`] rather
    /// than [`NumaInfo::narrowest`]: `prefer-closest-numa-nodes`, except
    /// under `single-numa-node`, which ignores it.
    pub prefer_closest: bool,
}

impl<'a> HintMerger<'a> {
    /// Upstream `NewHintMerger`.
    pub fn new(
        numa_info: &'a NumaInfo,
        hints: &'a [Vec<TopologyHint>],
        policy: PolicyName,
        options: &PolicyOptions,
    ) -> HintMerger<'a> {
        HintMerger {
            numa_info,
            hints,
            best_non_preferred_affinity_count: max_of_min_affinity_counts(hints),
            prefer_closest: policy != PolicyName::SingleNumaNode && options.prefer_closest_numa,
        }
    }

    /// Upstream `CompareNUMAAffinityMasks`: `true` keeps `current`.
    fn keep_current_mask(&self, current: &TopologyHint, candidate: &TopologyHint) -> bool {
        let (Some(cur), Some(cand)) = (current.numa_affinity, candidate.numa_affinity) else {
            // Merged hints always carry a mask; keep what we have otherwise.
            return true;
        };
        if cand == cur {
            return true;
        }
        let best = if self.prefer_closest {
            self.numa_info.closest(cur, cand)
        } else {
            self.numa_info.narrowest(cur, cand)
        };
        best == cur
    }

    /// Upstream `compare`: `true` means the candidate replaces the current best.
    fn candidate_wins(&self, current: Option<&TopologyHint>, candidate: &TopologyHint) -> bool {
        if candidate.count() == 0 {
            return false;
        }
        let Some(current) = current else { return true };
        match (current.preferred, candidate.preferred) {
            (false, true) => return true,
            (true, false) => return false,
            (true, true) => return !self.keep_current_mask(current, candidate),
            (false, false) => {}
        }
        // Both non-preferred: move towards the best non-preferred width,
        // without going above it (upstream cases 1, 2, 3a-3c).
        let target = self.best_non_preferred_affinity_count;
        let (cur, cand) = (current.count(), candidate.count());
        if cur > target {
            return !self.keep_current_mask(current, candidate);
        }
        if cur == target {
            return cand == target && !self.keep_current_mask(current, candidate);
        }
        if cand > target {
            return false;
        }
        if cand == target {
            return true;
        }
        if cand != cur {
            return cand > cur;
        }
        !self.keep_current_mask(current, candidate)
    }

    /// Upstream `Merge`: the best merged hint, or `{default mask, not preferred}`
    /// when no permutation yields a non-empty mask. With no lists at all the
    /// single empty permutation gives `{default mask, preferred}`.
    ///
    /// Upstream walks every permutation of the lists, up to 255^4 on 8 NUMA
    /// nodes with four resources (a fuzz input ran for minutes). `compare`
    /// picks the maximum of a total order on (preferred, mask), so only the
    /// set of distinct merged hints matters, not how many permutations give
    /// each or in which order: [`distinct_merges`] builds that set list by
    /// list. `merge_by_permutations` (tests) is the upstream walk it is
    /// checked against.
    pub fn merge(&self) -> TopologyHint {
        let default_affinity = self.numa_info.default_affinity_mask();
        let mut best: Option<TopologyHint> = None;
        for candidate in distinct_merges(default_affinity, self.hints) {
            if self.candidate_wins(best.as_ref(), &candidate) {
                best = Some(candidate);
            }
        }
        best.unwrap_or(TopologyHint::new(default_affinity, false))
    }

    /// The upstream walk over every permutation (the oracle for [`Self::merge`]).
    #[cfg(test)]
    fn merge_by_permutations(&self) -> TopologyHint {
        let default_affinity = self.numa_info.default_affinity_mask();
        let mut best: Option<TopologyHint> = None;
        for_each_permutation(self.hints, |permutation| {
            let candidate = merge_permutation(default_affinity, permutation);
            if self.candidate_wins(best.as_ref(), &candidate) {
                best = Some(candidate);
            }
        });
        best.unwrap_or(TopologyHint::new(default_affinity, false))
    }
}

/// Every distinct [`merge_permutation`] result over the cartesian product of
/// `lists`, without enumerating it. A partial permutation is summarised by
/// (AND of its masks, its first mask while all masks so far are equal and
/// preferred, whether that still holds): two prefixes with the same summary
/// merge every suffix to the same hint. At most 64-bit masks × (first mask
/// or none) × 2 summaries per list, in practice a few hundred.
fn distinct_merges(default_affinity: BitMask, lists: &[Vec<TopologyHint>]) -> Vec<TopologyHint> {
    // (and, first mask, preferred so far); `first` is `None` until a mask
    // is seen and is dropped once `preferred` is false.
    type Summary = (u64, Option<u64>, bool);
    let mut summaries: Vec<Summary> = vec![(default_affinity.raw(), None, true)];
    for list in lists {
        let mut next: Vec<Summary> = Vec::with_capacity(summaries.len() * list.len());
        for &(and, first, preferred) in &summaries {
            for hint in list {
                let mut summary = (and, first, preferred && hint.preferred);
                if let Some(mask) = hint.numa_affinity {
                    summary.0 &= mask.raw();
                    match first {
                        None => summary.1 = Some(mask.raw()),
                        Some(f) if f != mask.raw() => summary.2 = false,
                        Some(_) => {}
                    }
                }
                if !summary.2 {
                    summary.1 = None;
                }
                next.push(summary);
            }
        }
        next.sort_unstable();
        next.dedup();
        summaries = next;
    }
    let mut merged: Vec<(u64, bool)> = summaries
        .into_iter()
        .map(|(and, _, preferred)| (and, preferred))
        .collect();
    merged.sort_unstable();
    merged.dedup();
    merged
        .into_iter()
        .map(|(and, preferred)| TopologyHint::new(BitMask(and), preferred))
        .collect()
}

/// Calls `callback` with every element of the cartesian product of `lists`,
/// the last list varying fastest (upstream `iterateAllProviderTopologyHints`).
#[cfg(test)]
fn for_each_permutation(lists: &[Vec<TopologyHint>], mut callback: impl FnMut(&[&TopologyHint])) {
    if lists.iter().any(Vec::is_empty) {
        return;
    }
    let mut indices = vec![0usize; lists.len()];
    let mut permutation: Vec<&TopologyHint> = lists.iter().map(|list| &list[0]).collect();
    loop {
        callback(&permutation);
        // Odometer step from the last list; stop after the first list wraps.
        let mut position = lists.len();
        loop {
            if position == 0 {
                return;
            }
            position -= 1;
            indices[position] += 1;
            if indices[position] < lists[position].len() {
                permutation[position] = &lists[position][indices[position]];
                break;
            }
            indices[position] = 0;
            permutation[position] = &lists[position][0];
        }
    }
}

/// A topology manager policy bound to the machine's NUMA layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    name: PolicyName,
    numa_info: NumaInfo,
    options: PolicyOptions,
}

impl Policy {
    /// Builds a policy; except for `none`, the machine must not have more NUMA
    /// nodes than `max-allowable-numa-nodes`, and every id must fit a mask.
    pub fn new(
        name: PolicyName,
        numa_info: NumaInfo,
        options: PolicyOptions,
    ) -> Result<Policy, TopologyError> {
        if name != PolicyName::None {
            if numa_info.nodes.len() > options.max_allowable_numa_nodes {
                return Err(TopologyError::TooManyNumaNodes {
                    max: options.max_allowable_numa_nodes,
                });
            }
            BitMask::new(&numa_info.nodes).map_err(TopologyError::InvalidNumaNode)?;
        }
        Ok(Policy {
            name,
            numa_info,
            options,
        })
    }

    /// The policy name.
    pub fn name(&self) -> PolicyName {
        self.name
    }

    /// The NUMA layout.
    pub fn numa_info(&self) -> &NumaInfo {
        &self.numa_info
    }

    /// The parsed options.
    pub fn options(&self) -> &PolicyOptions {
        &self.options
    }

    /// Upstream `Merge`: the best hint and whether the pod may be admitted.
    pub fn merge(&self, providers_hints: &[ProviderHints]) -> (TopologyHint, bool) {
        let hint = match self.name {
            PolicyName::None => return (TopologyHint::default(), true),
            PolicyName::BestEffort | PolicyName::Restricted => {
                let filtered = filter_providers_hints(providers_hints);
                HintMerger::new(&self.numa_info, &filtered, self.name, &self.options).merge()
            }
            PolicyName::SingleNumaNode => {
                let filtered = filter_single_numa_hints(filter_providers_hints(providers_hints));
                let best =
                    HintMerger::new(&self.numa_info, &filtered, self.name, &self.options).merge();
                if best.numa_affinity == Some(self.numa_info.default_affinity_mask()) {
                    TopologyHint::any(best.preferred)
                } else {
                    best
                }
            }
        };
        (hint, self.can_admit(&hint))
    }

    /// Upstream `canAdmitPodResult`: none and best-effort always admit;
    /// restricted and single-numa-node need a preferred hint.
    pub fn can_admit(&self, hint: &TopologyHint) -> bool {
        match self.name {
            PolicyName::None | PolicyName::BestEffort => true,
            PolicyName::Restricted | PolicyName::SingleNumaNode => hint.preferred,
        }
    }
}

/// A hint in words, for rule lines: `[0,1] preferred`, `any NUMA node, not
/// preferred`. NUMA ids as a list, since people read `[0,1]` faster than
/// upstream's binary mask string.
pub fn describe_hint(hint: &TopologyHint) -> String {
    let preferred = if hint.preferred {
        "preferred"
    } else {
        "not preferred"
    };
    match hint.numa_affinity {
        Some(mask) => format!("{} {preferred}", numa_list(mask)),
        None => format!("any NUMA node, {preferred}"),
    }
}

/// `[0,1]`: the NUMA node ids of a mask, ascending.
pub fn numa_list(mask: BitMask) -> String {
    let ids: Vec<String> = mask.bits().iter().map(usize::to_string).collect();
    format!("[{}]", ids.join(","))
}

impl Policy {
    /// Why `can_admit` admitted or refused `hint`, the result of
    /// [`Policy::merge`] over `providers_hints`, in one line: the policy and
    /// scope, the merged hint, the fact that decided and the policy's rule.
    /// For a refusal it names the resources that left no admissible choice,
    /// so a reader can find the offending request without redoing the merge.
    pub fn admit_rule(
        &self,
        scope: Scope,
        providers_hints: &[ProviderHints],
        hint: &TopologyHint,
    ) -> String {
        let head = format!("{} ({} scope)", self.name.as_str(), scope.as_str());
        let merged = describe_hint(hint);
        match self.name {
            PolicyName::None => {
                format!("{head}: no NUMA alignment is asked for; the none policy admits every pod")
            }
            PolicyName::BestEffort => format!(
                "{head}: merged hint {merged}; best-effort admits every merged hint, preferred or not (it only picks the best one)"
            ),
            PolicyName::Restricted if hint.preferred => {
                format!("{head}: merged hint {merged}; restricted admits a preferred merged hint")
            }
            PolicyName::Restricted => {
                let lacking = resources_without(providers_hints, |h| h.preferred);
                let cause = if lacking.is_empty() {
                    "the resources' preferred hints share no NUMA node set".to_string()
                } else {
                    format!("{} no preferred hint", has_list(&lacking))
                };
                format!(
                    "{head}: merged hint {merged}: {cause}; restricted admits only a preferred merged hint"
                )
            }
            PolicyName::SingleNumaNode if hint.preferred => format!(
                "{head}: merged hint {merged}; single-numa-node admits a preferred hint on one NUMA node (or on none: no resource asked for alignment)"
            ),
            PolicyName::SingleNumaNode => {
                // The same filter `merge` applied (`filterSingleNumaHints`):
                // a resource left with nothing is why no preferred merge exists.
                let lacking = resources_without(providers_hints, |h| {
                    h.preferred && h.numa_affinity.is_none_or(|m| m.count() == 1)
                });
                let cause = if lacking.is_empty() {
                    "the resources' preferred single-NUMA-node hints share no NUMA node".to_string()
                } else {
                    format!(
                        "{} no preferred hint on a single NUMA node",
                        has_list(&lacking)
                    )
                };
                format!(
                    "{head}: merged hint {merged}: {cause}; single-numa-node admits only a preferred hint on one NUMA node"
                )
            }
        }
    }
}

/// The resources of the providers' answers (after `filterProvidersHints`'
/// defaults: a nil map or nil list is one preferred don't-care hint, an
/// empty list one non-preferred don't-care hint) none of whose hints `keep`
/// accepts, in provider then resource order.
fn resources_without(
    providers_hints: &[ProviderHints],
    keep: impl Fn(&TopologyHint) -> bool,
) -> Vec<String> {
    let mut lacking = Vec::new();
    for resources in providers_hints.iter().flatten() {
        for (name, hints) in resources {
            let accepted = match hints {
                None => keep(&TopologyHint::any(true)),
                Some(list) if list.is_empty() => keep(&TopologyHint::any(false)),
                Some(list) => list.iter().any(&keep),
            };
            if !accepted {
                lacking.push(name.clone());
            }
        }
    }
    lacking
}

/// `cpu has` / `cpu and memory have`.
fn has_list(names: &[String]) -> String {
    match names {
        [one] => format!("{one} has"),
        _ => format!("{} have", names.join(" and ")),
    }
}

/// Upstream `filterSingleNumaHints`: keep preferred hints that are don't-care or one node wide.
fn filter_single_numa_hints(all: Vec<Vec<TopologyHint>>) -> Vec<Vec<TopologyHint>> {
    all.into_iter()
        .map(|hints| {
            hints
                .into_iter()
                .filter(|h| h.preferred && h.numa_affinity.is_none_or(|m| m.count() == 1))
                .collect()
        })
        .collect()
}

/// A configured topology manager: its policy and scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manager {
    /// The merge policy.
    pub policy: Policy,
    /// Where hints are asked for.
    pub scope: Scope,
}

/// Upstream `NewManager`, in its order of checks: `none` short-circuits (options
/// and scope are not even parsed); then options, NUMA discovery, the node limit,
/// the policy name, and the scope name.
pub fn new_manager(
    policy_name: &str,
    scope_name: &str,
    options: &BTreeMap<String, String>,
    gates: OptionGates,
    topology: &[NumaNode],
) -> Result<Manager, TopologyError> {
    if policy_name == PolicyName::None.as_str() {
        let numa_info = NumaInfo::new(topology.iter().map(|n| n.id).collect(), BTreeMap::new());
        let policy = Policy {
            name: PolicyName::None,
            numa_info,
            options: PolicyOptions::default(),
        };
        return Ok(Manager {
            policy,
            scope: Scope::None,
        });
    }
    let options = new_policy_options(options, gates)?;
    let numa_info = NumaInfo::discover(topology, &options)?;
    if numa_info.nodes.len() > options.max_allowable_numa_nodes {
        return Err(TopologyError::TooManyNumaNodes {
            max: options.max_allowable_numa_nodes,
        });
    }
    let name = PolicyName::parse(policy_name)?;
    let policy = Policy::new(name, numa_info, options)?;
    let scope = Scope::parse(scope_name)?;
    Ok(Manager { policy, scope })
}

/// A topology admission rejection (upstream `TopologyAffinityError` and its
/// KEP-5526 pod-level variant). Both carry the reason [`ERROR_TOPOLOGY_AFFINITY`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdmitError {
    /// The merged hint is not admissible under the policy.
    TopologyAffinity,
    /// The same, for a pod admitted through its pod-level resources (pod scope, KEP-5526).
    PodLevelTopologyAffinity,
}

impl AdmitError {
    /// The admission reason.
    pub const fn reason(self) -> &'static str {
        ERROR_TOPOLOGY_AFFINITY
    }
}

impl fmt::Display for AdmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AdmitError::TopologyAffinity => "Resources cannot be allocated with Topology locality",
            AdmitError::PodLevelTopologyAffinity => {
                "pod with pod-level resources failed admission under pod-scope topology manager"
            }
        })
    }
}

impl core::error::Error for AdmitError {}

/// Container scope, one container: merge the providers' container hints
/// (`GetTopologyHints`) and admit or reject. The kubelet then stores the hint
/// and calls every provider's `Allocate` before asking about the next container,
/// so a caller whose providers' answers depend on earlier allocations calls
/// this once per container, in `init_containers ++ containers` order.
pub fn container_scope_affinity(
    policy: &Policy,
    providers_hints: &[ProviderHints],
) -> Result<TopologyHint, AdmitError> {
    match policy.merge(providers_hints) {
        (hint, true) => Ok(hint),
        (_, false) => Err(AdmitError::TopologyAffinity),
    }
}

/// Container scope, whole pod: [`container_scope_affinity`] for each
/// `(container name, providers' hints)` in order; the first rejection rejects
/// the pod. Returns the hint to store per container.
pub fn container_scope_admit(
    policy: &Policy,
    containers: &[(String, Vec<ProviderHints>)],
) -> Result<Vec<(String, TopologyHint)>, AdmitError> {
    containers
        .iter()
        .map(|(name, hints)| {
            container_scope_affinity(policy, hints).map(|hint| (name.clone(), hint))
        })
        .collect()
}

/// How pod scope hands the admitted pod to the providers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodAllocation {
    /// KEP-5526: one `AllocatePod` per provider.
    PerPod,
    /// Legacy: `Allocate` per container, in `init_containers ++ containers` order.
    PerContainer,
}

/// Pod scope's branch: the pod-level path needs `PodLevelResourceManagers` and
/// `IsPodLevelResourcesSet(pod)` (the pod's `spec.resources` has a cpu, memory
/// or hugepages request or limit).
pub fn pod_scope_allocation(
    pod_level_resource_managers: bool,
    pod_level_resources_set: bool,
) -> PodAllocation {
    if pod_level_resource_managers && pod_level_resources_set {
        PodAllocation::PerPod
    } else {
        PodAllocation::PerContainer
    }
}

/// The outcome of a pod-scope admission.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodScopeAdmission {
    /// The merged pod hint.
    pub hint: TopologyHint,
    /// The same hint, stored for every container in `init_containers ++ containers` order.
    pub container_hints: Vec<(String, TopologyHint)>,
    /// Which provider calls follow.
    pub allocation: PodAllocation,
}

/// Pod scope: one merge over the providers' pod hints (`GetPodTopologyHints`),
/// the same hint for every container, and the allocation path. A rejection on
/// the pod-level path is [`AdmitError::PodLevelTopologyAffinity`].
pub fn pod_scope_admit(
    policy: &Policy,
    container_names: &[String],
    providers_pod_hints: &[ProviderHints],
    allocation: PodAllocation,
) -> Result<PodScopeAdmission, AdmitError> {
    let (hint, admit) = policy.merge(providers_pod_hints);
    if !admit {
        return Err(match allocation {
            PodAllocation::PerPod => AdmitError::PodLevelTopologyAffinity,
            PodAllocation::PerContainer => AdmitError::TopologyAffinity,
        });
    }
    let container_hints = container_names
        .iter()
        .map(|name| (name.clone(), hint))
        .collect();
    Ok(PodScopeAdmission {
        hint,
        container_hints,
        allocation,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn mask(bits: &[usize]) -> BitMask {
        BitMask::new(bits).expect("valid bits")
    }

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

    fn eight_nodes() -> NumaInfo {
        let rows: [[u64; 8]; 8] = [
            [10, 11, 12, 12, 30, 30, 30, 30],
            [11, 10, 12, 12, 30, 30, 30, 30],
            [12, 12, 10, 11, 30, 30, 30, 30],
            [12, 12, 11, 10, 30, 30, 30, 30],
            [30, 30, 30, 30, 10, 11, 12, 12],
            [30, 30, 30, 30, 11, 10, 12, 12],
            [30, 30, 30, 30, 12, 12, 10, 11],
            [30, 30, 30, 30, 12, 12, 13, 10],
        ];
        NumaInfo::new(
            (0..8).collect(),
            rows.iter()
                .enumerate()
                .map(|(i, r)| (i, r.to_vec()))
                .collect(),
        )
    }

    /// `merge` over distinct merged hints against upstream's walk over every
    /// permutation: random hint lists (nil masks, duplicates, empty lists),
    /// random distances, every merging policy, with and without
    /// `prefer-closest-numa-nodes`.
    #[test]
    fn merge_of_distinct_hints_matches_the_permutation_walk() {
        let mut rng = crate::cpu_manager::Rng(0x005e_ed0f_7090_109e);
        let rounds: usize = std::env::var("MERGE_EQUIVALENCE_ROUNDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(20_000);
        for round in 0..rounds {
            let nodes = 1 + rng.below(6) as usize;
            let mut distances = BTreeMap::new();
            for i in 0..nodes {
                let row = (0..nodes)
                    .map(|j| if i == j { 10 } else { 11 + rng.below(4) * 5 })
                    .collect();
                distances.insert(i, row);
            }
            let info = NumaInfo::new((0..nodes).collect(), distances);
            let full = (1u64 << nodes) - 1;
            let lists: Vec<Vec<TopologyHint>> = (0..rng.below(5))
                .map(|_| {
                    (0..rng.below(7))
                        .map(|_| TopologyHint {
                            numa_affinity: (!rng.chance(15))
                                .then(|| BitMask(rng.below(full + 1) & full)),
                            preferred: rng.chance(50),
                        })
                        .collect()
                })
                .collect();
            let policy = [
                PolicyName::BestEffort,
                PolicyName::Restricted,
                PolicyName::SingleNumaNode,
            ][rng.below(3) as usize];
            let options = PolicyOptions {
                prefer_closest_numa: rng.chance(50),
                ..PolicyOptions::default()
            };
            let merger = HintMerger::new(&info, &lists, policy, &options);
            assert_eq!(
                merger.merge(),
                merger.merge_by_permutations(),
                "round {round}: {lists:?} {policy:?} {options:?}"
            );
        }
    }

    #[test]
    fn numa_info_average_and_closest() {
        let info = eight_nodes();
        assert_eq!(info.calculate_average_for(mask(&[0, 2])), 11.0);
        assert_eq!(info.calculate_average_for(mask(&[0, 4])), 20.0);
        assert_eq!(info.calculate_average_for(BitMask::empty()), 0.0);
        assert_eq!(
            info.default_affinity_mask(),
            mask(&[0, 1, 2, 3, 4, 5, 6, 7])
        );
        // Different counts: narrowest.
        assert_eq!(info.closest(mask(&[0, 4]), mask(&[5])), mask(&[5]));
        // Same count: smaller average distance.
        assert_eq!(info.closest(mask(&[0, 4]), mask(&[4, 5])), mask(&[4, 5]));
        assert_eq!(info.closest(mask(&[0, 2]), mask(&[0, 4])), mask(&[0, 2]));
        // Equal averages: the numerically smaller mask, whatever the argument order.
        assert_eq!(info.closest(mask(&[2, 3]), mask(&[0, 1])), mask(&[0, 1]));
        assert_eq!(info.closest(mask(&[0, 1]), mask(&[2, 3])), mask(&[0, 1]));
        // The asymmetric row 7 (7->6 = 13) makes {6,7} farther than {4,5}.
        assert_eq!(info.closest(mask(&[6, 7]), mask(&[4, 5])), mask(&[4, 5]));
        assert_eq!(info.narrowest(mask(&[0, 4]), mask(&[0, 2])), mask(&[0, 2]));
    }

    #[test]
    fn numa_info_discover() {
        let nodes = [
            NumaNode {
                id: 0,
                distances: Some(vec![10, 20]),
            },
            NumaNode {
                id: 1,
                distances: None,
            },
        ];
        let plain = NumaInfo::discover(&nodes, &PolicyOptions::default()).unwrap();
        assert_eq!(plain.nodes, vec![0, 1]);
        assert!(plain.distances.is_empty());
        let closest = PolicyOptions {
            prefer_closest_numa: true,
            ..PolicyOptions::default()
        };
        let err = NumaInfo::discover(&nodes, &closest).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot discover NUMA topology: error getting NUMA distances from cadvisor"
        );
    }

    fn opts(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn policy_options_parse() {
        let gates = OptionGates::default();
        assert_eq!(
            new_policy_options(&opts(&[]), gates),
            Ok(PolicyOptions::default())
        );
        let parsed = new_policy_options(
            &opts(&[
                (PREFER_CLOSEST_NUMA_NODES, "True"),
                (MAX_ALLOWABLE_NUMA_NODES, "16"),
            ]),
            gates,
        );
        assert_eq!(
            parsed,
            Ok(PolicyOptions {
                prefer_closest_numa: true,
                max_allowable_numa_nodes: 16
            })
        );
        // GA options need no gate.
        let off = OptionGates {
            alpha_options: false,
            beta_options: false,
        };
        assert!(new_policy_options(&opts(&[(PREFER_CLOSEST_NUMA_NODES, "1")]), off).is_ok());

        let cases: &[(&[(&str, &str)], &str)] = &[
            (
                &[("bogus", "x")],
                "unknown Topology Manager Policy option: \"bogus\"",
            ),
            (
                &[(PREFER_CLOSEST_NUMA_NODES, "yes")],
                "bad value for option \"prefer-closest-numa-nodes\": strconv.ParseBool: parsing \"yes\": invalid syntax",
            ),
            (
                &[(MAX_ALLOWABLE_NUMA_NODES, "8x")],
                "unable to convert policy option to integer \"max-allowable-numa-nodes\": strconv.Atoi: parsing \"8x\": invalid syntax",
            ),
            (
                &[(MAX_ALLOWABLE_NUMA_NODES, "99999999999999999999")],
                "unable to convert policy option to integer \"max-allowable-numa-nodes\": strconv.Atoi: parsing \"99999999999999999999\": value out of range",
            ),
            (
                &[(MAX_ALLOWABLE_NUMA_NODES, "7")],
                "the minimum value of \"max-allowable-numa-nodes\" should not be less than 8",
            ),
            (
                &[(MAX_ALLOWABLE_NUMA_NODES, "-9")],
                "the minimum value of \"max-allowable-numa-nodes\" should not be less than 8",
            ),
        ];
        for (input, want) in cases {
            let err = new_policy_options(&opts(input), gates).expect_err(want);
            assert_eq!(err.to_string(), *want);
        }
        assert_eq!(
            new_policy_options(&opts(&[(MAX_ALLOWABLE_NUMA_NODES, "+8")]), gates)
                .map(|o| o.max_allowable_numa_nodes),
            Ok(8)
        );
    }

    #[test]
    fn option_maturity_gates() {
        let table = [
            ("a", OptionMaturity::Alpha),
            ("b", OptionMaturity::Beta),
            ("s", OptionMaturity::Stable),
        ];
        let none = OptionGates {
            alpha_options: false,
            beta_options: false,
        };
        let all = OptionGates {
            alpha_options: true,
            beta_options: true,
        };
        assert_eq!(
            check_option_in(&table, "a", none).unwrap_err().to_string(),
            "Topology Manager Policy Alpha-level Options not enabled, but option \"a\" provided"
        );
        assert_eq!(
            check_option_in(&table, "b", none).unwrap_err().to_string(),
            "Topology Manager Policy Beta-level Options not enabled, but option \"b\" provided"
        );
        assert!(check_option_in(&table, "s", none).is_ok());
        assert!(
            check_option_in(&table, "a", all).is_ok() && check_option_in(&table, "b", all).is_ok()
        );
        assert_eq!(
            check_option_in(&table, "z", all),
            Err(TopologyError::UnknownOption("z".into()))
        );
    }

    fn topology(n: usize) -> Vec<NumaNode> {
        (0..n)
            .map(|id| NumaNode {
                id,
                distances: Some(vec![10; n]),
            })
            .collect()
    }

    #[test]
    fn manager_construction() {
        let gates = OptionGates::default();
        let none = new_manager(
            "none",
            "bogus",
            &opts(&[("bogus", "x")]),
            gates,
            &topology(12),
        )
        .unwrap();
        assert_eq!(
            (none.policy.name(), none.scope),
            (PolicyName::None, Scope::None)
        );
        let m = new_manager("restricted", "pod", &opts(&[]), gates, &topology(2)).unwrap();
        assert_eq!(
            (m.policy.name(), m.scope),
            (PolicyName::Restricted, Scope::Pod)
        );
        let err =
            new_manager("best-effort", "container", &opts(&[]), gates, &topology(9)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unsupported on machines with more than 8 NUMA Nodes"
        );
        assert!(
            new_manager(
                "best-effort",
                "container",
                &opts(&[(MAX_ALLOWABLE_NUMA_NODES, "9")]),
                gates,
                &topology(9)
            )
            .is_ok()
        );
        let err = new_manager("bogus", "container", &opts(&[]), gates, &topology(2)).unwrap_err();
        assert_eq!(err.to_string(), "unknown policy: \"bogus\"");
        let err = new_manager("best-effort", "node", &opts(&[]), gates, &topology(2)).unwrap_err();
        assert_eq!(err.to_string(), "unknown scope: \"node\"");
        // Options are checked before the policy name.
        let err = new_manager(
            "bogus",
            "container",
            &opts(&[("x", "y")]),
            gates,
            &topology(2),
        )
        .unwrap_err();
        assert_eq!(err, TopologyError::UnknownOption("x".into()));
        let bad_id = NumaInfo::new(vec![0, 64], BTreeMap::new());
        assert_eq!(
            Policy::new(PolicyName::BestEffort, bad_id, PolicyOptions::default())
                .unwrap_err()
                .to_string(),
            "cannot discover NUMA topology: bit number must be in range 0-63"
        );
    }

    fn four_node_policy(name: PolicyName) -> Policy {
        Policy::new(
            name,
            NumaInfo::new(vec![0, 1, 2, 3], BTreeMap::new()),
            PolicyOptions::default(),
        )
        .unwrap()
    }

    fn one(resource: &str, hints: Option<Vec<TopologyHint>>) -> ProviderHints {
        Some(BTreeMap::from([(resource.to_string(), hints)]))
    }

    fn two_node_policy(name: PolicyName) -> Policy {
        Policy::new(
            name,
            NumaInfo::new(vec![0, 1], BTreeMap::new()),
            PolicyOptions::default(),
        )
        .unwrap()
    }

    /// The rule line of a merge, with the merge's own result.
    fn rule_of(policy: &Policy, scope: Scope, providers: &[ProviderHints]) -> (bool, String) {
        let (hint, admit) = policy.merge(providers);
        (admit, policy.admit_rule(scope, providers, &hint))
    }

    /// The rule lines of `admit_rule` on inputs of upstream's merge tests
    /// (policy_single_numa_node_test.go, policy_test.go); the merged hints
    /// they name are upstream's expected ones.
    #[test]
    fn admit_rules_name_the_policy_the_hint_and_the_cause() {
        let pref = |bits: &[usize]| TopologyHint::new(mask(bits), true);
        let not = |bits: &[usize]| TopologyHint::new(mask(bits), false);
        let single = two_node_policy(PolicyName::SingleNumaNode);
        // "Single NUMA hint generation": resource1 only fits on both nodes,
        // upstream merges to {nil, false}.
        let providers = [Some(BTreeMap::from([
            ("resource1".to_string(), Some(vec![pref(&[0, 1])])),
            (
                "resource2".to_string(),
                Some(vec![pref(&[0]), pref(&[1]), not(&[0, 1])]),
            ),
        ]))];
        assert_eq!(
            rule_of(&single, Scope::Pod, &providers),
            (
                false,
                "single-numa-node (pod scope): merged hint any NUMA node, not preferred: resource1 has no preferred hint on a single NUMA node; single-numa-node admits only a preferred hint on one NUMA node".to_string()
            )
        );
        // "Two providers, 1 hint each, no common mask": both single-node, apart.
        let apart = [
            one("resource1", Some(vec![pref(&[0])])),
            one("resource2", Some(vec![pref(&[1])])),
        ];
        assert_eq!(
            rule_of(&single, Scope::Container, &apart),
            (
                false,
                "single-numa-node (container scope): merged hint any NUMA node, not preferred: the resources' preferred single-NUMA-node hints share no NUMA node; single-numa-node admits only a preferred hint on one NUMA node".to_string()
            )
        );
        // "One no-preference provider": admitted on {0}.
        let no_preference = [
            one(
                "resource1",
                Some(vec![pref(&[0]), pref(&[1]), not(&[0, 1])]),
            ),
            None,
        ];
        assert_eq!(
            rule_of(&single, Scope::Container, &no_preference),
            (
                true,
                "single-numa-node (container scope): merged hint [0] preferred; single-numa-node admits a preferred hint on one NUMA node (or on none: no resource asked for alignment)".to_string()
            )
        );
        // "Two providers, 1 hint each, same mask, 1 preferred, 1 not":
        // upstream merges to {0} not preferred under restricted and best-effort.
        let half = [
            one("resource1", Some(vec![pref(&[0])])),
            one("resource2", Some(vec![not(&[0])])),
        ];
        let restricted = two_node_policy(PolicyName::Restricted);
        assert_eq!(
            rule_of(&restricted, Scope::Container, &half),
            (
                false,
                "restricted (container scope): merged hint [0] not preferred: resource2 has no preferred hint; restricted admits only a preferred merged hint".to_string()
            )
        );
        let best_effort = two_node_policy(PolicyName::BestEffort);
        assert_eq!(
            rule_of(&best_effort, Scope::Pod, &half),
            (
                true,
                "best-effort (pod scope): merged hint [0] not preferred; best-effort admits every merged hint, preferred or not (it only picks the best one)".to_string()
            )
        );
        // No common mask under restricted: upstream falls back to the
        // default affinity {0,1}, not preferred.
        assert_eq!(
            rule_of(&restricted, Scope::Pod, &apart),
            (
                false,
                "restricted (pod scope): merged hint [0,1] not preferred: the resources' preferred hints share no NUMA node set; restricted admits only a preferred merged hint".to_string()
            )
        );
        // An empty list (no placement possible) and a nil one, both named.
        let empty = [one("cpu", Some(vec![])), one("memory", Some(vec![]))];
        let (admit, rule) = rule_of(&restricted, Scope::Pod, &empty);
        assert!(!admit);
        assert!(
            rule.contains(": cpu and memory have no preferred hint;"),
            "{rule}"
        );
        assert_eq!(
            rule_of(&restricted, Scope::Pod, &[one("cpu", None)]),
            (
                true,
                "restricted (pod scope): merged hint [0,1] preferred; restricted admits a preferred merged hint".to_string()
            )
        );
    }

    #[test]
    fn merge_edge_cases() {
        let best_effort = four_node_policy(PolicyName::BestEffort);
        // No providers: the single empty permutation gives the default mask, preferred.
        assert_eq!(
            best_effort.merge(&[]),
            (TopologyHint::new(mask(&[0, 1, 2, 3]), true), true)
        );
        // An empty list is unsatisfiable: default mask, not preferred, still admitted.
        assert_eq!(
            best_effort.merge(&[one("r", Some(vec![]))]),
            (TopologyHint::new(mask(&[0, 1, 2, 3]), false), true)
        );
        // Identical masks only: {0} and {0,1} both preferred merge to {0} not preferred.
        let merged = merge_permutation(
            mask(&[0, 1, 2, 3]),
            &[
                &TopologyHint::new(mask(&[0]), true),
                &TopologyHint::new(mask(&[0, 1]), true),
            ],
        );
        assert_eq!(merged, TopologyHint::new(mask(&[0]), false));
        let none = four_node_policy(PolicyName::None);
        assert_eq!(
            none.merge(&[one("r", Some(vec![]))]),
            (TopologyHint::default(), true)
        );
        let single = four_node_policy(PolicyName::SingleNumaNode);
        // Only a two-node hint: filtered away, the merge falls back to {nil, false}.
        let hints = one("r", Some(vec![TopologyHint::new(mask(&[0, 1]), true)]));
        assert_eq!(single.merge(&[hints]), (TopologyHint::any(false), false));
        assert_eq!(single.merge(&[None]), (TopologyHint::any(true), true));
    }

    #[test]
    fn scopes() {
        let restricted = four_node_policy(PolicyName::Restricted);
        let good = one("cpu", Some(vec![TopologyHint::new(mask(&[1]), true)]));
        let bad = one("cpu", Some(vec![TopologyHint::new(mask(&[1]), false)]));
        let names = vec!["init".to_string(), "app".to_string()];
        let admitted = pod_scope_admit(
            &restricted,
            &names,
            std::slice::from_ref(&good),
            pod_scope_allocation(true, true),
        )
        .unwrap();
        assert_eq!(admitted.allocation, PodAllocation::PerPod);
        assert_eq!(admitted.container_hints.len(), 2);
        assert!(
            admitted
                .container_hints
                .iter()
                .all(|(_, h)| *h == TopologyHint::new(mask(&[1]), true))
        );
        assert_eq!(
            pod_scope_allocation(false, true),
            PodAllocation::PerContainer
        );
        assert_eq!(
            pod_scope_allocation(true, false),
            PodAllocation::PerContainer
        );
        let err = pod_scope_admit(
            &restricted,
            &names,
            std::slice::from_ref(&bad),
            PodAllocation::PerPod,
        )
        .unwrap_err();
        assert_eq!(err, AdmitError::PodLevelTopologyAffinity);
        assert_eq!(err.reason(), "TopologyAffinityError");
        let err = pod_scope_admit(
            &restricted,
            &names,
            std::slice::from_ref(&bad),
            PodAllocation::PerContainer,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Resources cannot be allocated with Topology locality"
        );
        let containers = vec![
            ("init".to_string(), vec![good.clone()]),
            ("app".to_string(), vec![bad]),
        ];
        assert_eq!(
            container_scope_admit(&restricted, &containers),
            Err(AdmitError::TopologyAffinity)
        );
        let containers = vec![
            ("init".to_string(), vec![good]),
            ("app".to_string(), vec![None]),
        ];
        let hints = container_scope_admit(&restricted, &containers).unwrap();
        assert_eq!(hints[0].1, TopologyHint::new(mask(&[1]), true));
        assert_eq!(hints[1].1, TopologyHint::new(mask(&[0, 1, 2, 3]), true));
    }

    // ---- Vectors: tests/vectors/k8s-managers/topology-manager-merge.json ----

    fn vectors() -> Value {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/vectors/k8s-managers/topology-manager-merge.json"
        );
        let text = std::fs::read_to_string(path).unwrap_or_else(|err| {
            panic!(
                "topology vectors missing at {path}: {err}; tests/vectors is part of the repository"
            )
        });
        serde_json::from_str(&text).unwrap_or_else(|err| panic!("{path}: invalid JSON: {err}"))
    }

    fn json_mask(value: &Value) -> Option<BitMask> {
        let bits: Vec<usize> = value
            .as_array()?
            .iter()
            .map(|b| b.as_u64().expect("mask bit") as usize)
            .collect();
        Some(BitMask::new(&bits).expect("mask bits in range"))
    }

    fn json_hint(value: &Value) -> TopologyHint {
        TopologyHint {
            numa_affinity: json_mask(&value["mask"]),
            preferred: value["preferred"].as_bool().expect("preferred"),
        }
    }

    fn json_provider(value: &Value) -> ProviderHints {
        let map = value.as_object()?;
        Some(
            map.iter()
                .map(|(resource, hints)| {
                    (
                        resource.clone(),
                        hints
                            .as_array()
                            .map(|list| list.iter().map(json_hint).collect()),
                    )
                })
                .collect(),
        )
    }

    fn json_numa_info(value: &Value) -> NumaInfo {
        let nodes: Vec<usize> = value["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .map(|n| n.as_u64().unwrap() as usize)
            .collect();
        let distances = value["distances"]
            .as_array()
            .expect("distances")
            .iter()
            .enumerate()
            .map(|(i, row)| {
                (
                    nodes[i],
                    row.as_array()
                        .unwrap()
                        .iter()
                        .map(|d| d.as_u64().unwrap())
                        .collect(),
                )
            })
            .collect();
        NumaInfo::new(nodes, distances)
    }

    #[test]
    fn topology_manager_merge_vectors() {
        let doc = vectors();
        let cases = doc["cases"].as_array().expect("cases");
        assert_eq!(cases.len(), 77, "unexpected number of topology vectors");
        let mut failures = Vec::new();
        for case in cases {
            let name = case["name"].as_str().unwrap_or("?");
            let input = &case["input"];
            let options: BTreeMap<String, String> = input["policy_options"]
                .as_object()
                .expect("policy_options")
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().expect("option value").to_string()))
                .collect();
            let options = new_policy_options(&options, OptionGates::default()).expect("options");
            let numa =
                json_numa_info(&doc["numa_infos"][input["numa_info"].as_str().expect("numa_info")]);
            let policy_name =
                PolicyName::parse(input["policy"].as_str().expect("policy")).expect("policy name");
            let policy = Policy::new(policy_name, numa, options).expect("policy");
            let providers: Vec<ProviderHints> = input["providers_hints"]
                .as_array()
                .expect("providers_hints")
                .iter()
                .map(json_provider)
                .collect();
            let (hint, admit) = policy.merge(&providers);
            let want_hint = json_hint(&case["expected"]["hint"]);
            let want_admit = case["expected"]["admit"].as_bool().expect("admit");
            if hint != want_hint || admit != want_admit {
                failures.push(format!(
                    "{name}: got {hint:?} admit={admit}, want {want_hint:?} admit={want_admit}"
                ));
            }
        }
        assert!(
            failures.is_empty(),
            "{} of {} vectors failed:\n{}",
            failures.len(),
            cases.len(),
            failures.join("\n")
        );
    }
}
