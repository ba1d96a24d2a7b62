//! Reading the CPU and NUMA topology from sysfs: which CPUs are online, how
//! they group into cores, sockets, L3 (uncore) caches and NUMA nodes, and each
//! node's memory, huge pages and distances.
//!
//! Everything is read below an explicit root (the real machine is `/`), so the
//! trees in `fixtures/sysfs/` and temporary trees in tests stand in for
//! machines. The I/O functions only open files and list directories; the
//! parsers are pure and tested with literals. Every error names the absolute
//! path of the file and the value that failed, and no tree, however broken,
//! makes the reader panic or read more than [`MAX_FILE_BYTES`] of one file.
//!
//! [`CpuInfo`] reports what sysfs says, so `core_id` is only unique within a
//! package. The kubelet's view (a core is named by its lowest CPU) comes from
//! [`SysfsTopology::kubelet_core_ids`] and
//! [`SysfsTopology::kubelet_uncore_cache_ids`].

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow, bail};
use serde::Serialize;

/// The largest file the reader accepts. Sysfs attributes fit in one page, so
/// anything bigger is not the file the reader expects.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// The largest CPU or node number a CPU list may name. Linux allows at most
/// 8192 CPUs (`NR_CPUS` with `MAXSMP`); the cap keeps `0-4294967295` from
/// expanding into billions of entries.
pub const MAX_LIST_ID: u32 = 65_535;

/// The kernel's distance from a node to itself (`LOCAL_DISTANCE`), which is
/// what a kernel without NUMA reports for its single node.
const LOCAL_DISTANCE: u32 = 10;

/// Values longer than this are shortened in error messages.
const MAX_SHOWN_CHARS: usize = 64;

/// The machine as sysfs describes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SysfsTopology {
    /// The online CPUs, in ascending id order.
    pub cpus: Vec<CpuInfo>,
    /// The NUMA nodes (online, else possible), in ascending id order. A
    /// kernel without NUMA support gives one node 0 holding every CPU.
    pub numa_nodes: Vec<NumaNodeInfo>,
}

/// One online logical CPU (`sys/devices/system/cpu/cpuN`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CpuInfo {
    /// The logical CPU number, `N` in `cpuN`.
    pub id: u32,
    /// `topology/core_id`: unique only within a package (see
    /// [`SysfsTopology::kubelet_core_ids`] for machine-wide core ids).
    pub core_id: u32,
    /// `topology/physical_package_id`; a kernel that reports `-1` (no
    /// package known) gives 0.
    pub socket_id: u32,
    /// `topology/die_id`, when the kernel has it and knows it.
    pub die_id: Option<u32>,
    /// `topology/cluster_id` (Linux 5.16+), when the kernel has it and knows it.
    pub cluster_id: Option<u32>,
    /// The NUMA node: the `nodeN/cpulist` that lists the CPU, else the
    /// `nodeN` entry in `cpuN/`; 0 without NUMA.
    pub numa_node: u32,
    /// `id` of the CPU's level-3 cache (`cache/indexK` with `level` 3), when
    /// the kernel reports one.
    pub uncore_cache_id: Option<u32>,
}

/// One NUMA node (`sys/devices/system/node/nodeN`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NumaNodeInfo {
    /// The node number, `N` in `nodeN`.
    pub id: u32,
    /// The online CPUs in the node, ascending; empty for a memory-only node.
    pub cpus: Vec<u32>,
    /// `MemTotal` of `nodeN/meminfo`, in bytes (`proc/meminfo` without NUMA;
    /// 0 when that file is absent too).
    pub memory_bytes: u64,
    /// Huge page size in bytes to `nr_hugepages`, from `nodeN/hugepages/`
    /// (`sys/kernel/mm/hugepages/` without NUMA); empty without huge pages.
    pub hugepages: BTreeMap<u64, u64>,
    /// `nodeN/distance`: the distance to each online node, in node id order
    /// (`[10]` without NUMA, as such a kernel reports).
    pub distances: Vec<u32>,
}

impl SysfsTopology {
    /// CPU id to the core id the kubelet's CPU manager uses.
    ///
    /// The kubelet (cpumanager `topology.Discover` over cAdvisor) groups CPUs
    /// into cores by (NUMA node, `physical_package_id`, `core_id`) and names
    /// each core by its lowest CPU id, which makes core ids unique across the
    /// machine where sysfs `core_id` is only unique within a package.
    pub fn kubelet_core_ids(&self) -> BTreeMap<u32, u32> {
        let mut lowest_cpu: BTreeMap<(u32, u32, u32), u32> = BTreeMap::new();
        for cpu in &self.cpus {
            lowest_cpu
                .entry(core_key(cpu))
                .and_modify(|lowest| *lowest = (*lowest).min(cpu.id))
                .or_insert(cpu.id);
        }
        self.cpus
            .iter()
            .map(|cpu| (cpu.id, lowest_cpu[&core_key(cpu)]))
            .collect()
    }

    /// CPU id to the uncore cache id the kubelet's CPU manager uses.
    ///
    /// cAdvisor counts a level-3 cache as an uncore cache only when fewer CPUs
    /// share it than the CPU's NUMA node holds (cores in the node times threads
    /// in the CPU's core); a node-wide or missing L3 makes the kubelet fall
    /// back to the socket id. Sharing is counted over online CPUs.
    pub fn kubelet_uncore_cache_ids(&self) -> BTreeMap<u32, u32> {
        let mut threads_per_core: BTreeMap<(u32, u32, u32), usize> = BTreeMap::new();
        let mut cores_per_node: BTreeMap<u32, BTreeSet<(u32, u32, u32)>> = BTreeMap::new();
        let mut cpus_per_cache: BTreeMap<u32, usize> = BTreeMap::new();
        for cpu in &self.cpus {
            *threads_per_core.entry(core_key(cpu)).or_default() += 1;
            cores_per_node
                .entry(cpu.numa_node)
                .or_default()
                .insert(core_key(cpu));
            if let Some(cache) = cpu.uncore_cache_id {
                *cpus_per_cache.entry(cache).or_default() += 1;
            }
        }
        self.cpus
            .iter()
            .map(|cpu| {
                let node_threads =
                    cores_per_node[&cpu.numa_node].len() * threads_per_core[&core_key(cpu)];
                let uncore = match cpu.uncore_cache_id {
                    Some(cache) if cpus_per_cache[&cache] != node_threads => cache,
                    _ => cpu.socket_id,
                };
                (cpu.id, uncore)
            })
            .collect()
    }
}

/// What makes two CPUs threads of one core, as cAdvisor decides it.
fn core_key(cpu: &CpuInfo) -> (u32, u32, u32) {
    (cpu.numa_node, cpu.socket_id, cpu.core_id)
}

/// Why a sysfs value did not parse. The reader puts the file's path in front.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// A value that should be a decimal number is not one.
    #[error("`{0}` is not a decimal number")]
    NotANumber(String),
    /// A number above what the field holds.
    #[error("`{value}` is larger than {limit}")]
    TooLarge {
        /// The number as written.
        value: String,
        /// The largest accepted value.
        limit: u64,
    },
    /// A CPU range whose end is below its start.
    #[error("range `{0}` ends before it starts")]
    BackwardsRange(String),
    /// A CPU list with an empty entry, as in `0,,2` or `0-3,`.
    #[error("CPU list `{0}` has an empty entry")]
    EmptyEntry(String),
    /// A line the file must have is not there.
    #[error("no `{0}` line")]
    MissingLine(String),
    /// A value with the wrong shape.
    #[error("`{value}` is not {expected}")]
    Unexpected {
        /// The value as written.
        value: String,
        /// What was expected instead.
        expected: &'static str,
    },
}

/// Read the topology of the machine whose filesystem root is `sysfs_root`
/// (`/` for this machine): `sys/devices/system/{cpu,node}` below it, plus
/// `proc/meminfo` and `sys/kernel/mm/hugepages` when there is no NUMA.
pub fn read_topology(sysfs_root: &Path) -> Result<SysfsTopology> {
    // Absolute, so every error names a path a person can open.
    let root = std::path::absolute(sysfs_root)
        .map_err(|err| anyhow!("{}: {err}", sysfs_root.display()))?;
    let cpu_dir = root.join("sys/devices/system/cpu");
    let online_path = cpu_dir.join("online");
    let online = parse_file(&online_path, parse_cpu_list)?;
    if online.is_empty() {
        bail!("{}: no online CPUs", online_path.display());
    }

    let node_dir = root.join("sys/devices/system/node");
    let numa = if is_dir(&node_dir)? {
        Some(read_numa_nodes(&node_dir, &online)?)
    } else {
        None
    };

    let mut cpus = Vec::with_capacity(online.len());
    for &id in &online {
        let dir = cpu_dir.join(format!("cpu{id}"));
        let numa_node = match &numa {
            None => 0,
            Some(scan) => match scan.cpu_nodes.get(&id) {
                Some(&node) => node,
                None => node_entry(&dir)?.ok_or_else(|| {
                    anyhow!(
                        "{}: CPU {id} is in no NUMA node: no {}/node<N>/cpulist lists it and it has no node<N> entry",
                        dir.display(),
                        node_dir.display()
                    )
                })?,
            },
        };
        cpus.push(read_cpu(&dir, id, numa_node)?);
    }

    let mut numa_nodes = match numa {
        Some(scan) => {
            if let Some(cpu) = cpus
                .iter()
                .find(|cpu| !scan.nodes.iter().any(|node| node.id == cpu.numa_node))
            {
                bail!(
                    "{}: CPU {} is in NUMA node {}, which {} does not list",
                    cpu_dir
                        .join(format!("cpu{}/node{}", cpu.id, cpu.numa_node))
                        .display(),
                    cpu.id,
                    cpu.numa_node,
                    scan.list_path.display()
                );
            }
            scan.nodes
        }
        None => vec![read_single_node(&root)?],
    };
    for node in &mut numa_nodes {
        node.cpus = cpus
            .iter()
            .filter(|cpu| cpu.numa_node == node.id)
            .map(|cpu| cpu.id)
            .collect();
    }
    Ok(SysfsTopology { cpus, numa_nodes })
}

/// The NUMA nodes (CPUs not yet filled in) and which node lists each CPU.
struct NumaScan {
    nodes: Vec<NumaNodeInfo>,
    cpu_nodes: BTreeMap<u32, u32>,
    /// `node/online`, or `node/possible` when there is no `online`.
    list_path: PathBuf,
}

fn read_numa_nodes(node_dir: &Path, online_cpus: &[u32]) -> Result<NumaScan> {
    let mut list_path = node_dir.join("online");
    let text = match read_optional(&list_path)? {
        Some(text) => text,
        None => {
            list_path = node_dir.join("possible");
            read_required(&list_path)?
        }
    };
    let ids = parse_cpu_list(&text).map_err(|err| at(&list_path, err))?;
    if ids.is_empty() {
        bail!("{}: no NUMA nodes", list_path.display());
    }

    let mut nodes = Vec::with_capacity(ids.len());
    let mut cpu_nodes = BTreeMap::new();
    for id in ids {
        let dir = node_dir.join(format!("node{id}"));
        let cpulist_path = dir.join("cpulist");
        for cpu in parse_file(&cpulist_path, parse_cpu_list)? {
            // Some kernels keep offline CPUs in their node's list.
            if online_cpus.binary_search(&cpu).is_err() {
                continue;
            }
            if let Some(other) = cpu_nodes.insert(cpu, id) {
                bail!(
                    "{}: CPU {cpu} is also in NUMA node {other}",
                    cpulist_path.display()
                );
            }
        }
        let memory_bytes = parse_file(&dir.join("meminfo"), |text| parse_node_mem_total(text, id))?;
        let hugepages = read_hugepages(&dir.join("hugepages"))?;
        let distances = parse_file(&dir.join("distance"), parse_distances)?;
        nodes.push(NumaNodeInfo {
            id,
            cpus: Vec::new(),
            memory_bytes,
            hugepages,
            distances,
        });
    }
    Ok(NumaScan {
        nodes,
        cpu_nodes,
        list_path,
    })
}

/// Node 0 of a kernel without NUMA: all memory and the global huge pages.
fn read_single_node(root: &Path) -> Result<NumaNodeInfo> {
    let meminfo_path = root.join("proc/meminfo");
    let memory_bytes = match read_optional(&meminfo_path)? {
        Some(text) => parse_mem_total(&text).map_err(|err| at(&meminfo_path, err))?,
        None => 0,
    };
    Ok(NumaNodeInfo {
        id: 0,
        cpus: Vec::new(),
        memory_bytes,
        hugepages: read_hugepages(&root.join("sys/kernel/mm/hugepages"))?,
        distances: vec![LOCAL_DISTANCE],
    })
}

/// `hugepages-<size>kB/nr_hugepages` under `dir`; empty when `dir` is absent
/// (a kernel without hugetlbfs).
fn read_hugepages(dir: &Path) -> Result<BTreeMap<u64, u64>> {
    let mut pages = BTreeMap::new();
    if !is_dir(dir)? {
        return Ok(pages);
    }
    for name in list_dir(dir)? {
        // Only `hugepages-*` entries are pools; leave room for new attributes.
        if !name.starts_with("hugepages-") {
            continue;
        }
        let size = parse_hugepage_size(&name).map_err(|err| at(&dir.join(&name), err))?;
        let count = parse_file(&dir.join(&name).join("nr_hugepages"), parse_u64)?;
        pages.insert(size, count);
    }
    Ok(pages)
}

fn read_cpu(dir: &Path, id: u32, numa_node: u32) -> Result<CpuInfo> {
    let topology = dir.join("topology");
    Ok(CpuInfo {
        id,
        core_id: parse_file(&topology.join("core_id"), parse_u32)?,
        socket_id: parse_file(&topology.join("physical_package_id"), parse_id_or_unknown)?
            .unwrap_or(0),
        die_id: parse_optional_file(&topology.join("die_id"), parse_id_or_unknown)?.flatten(),
        cluster_id: parse_optional_file(&topology.join("cluster_id"), parse_id_or_unknown)?
            .flatten(),
        numa_node,
        uncore_cache_id: read_l3_id(&dir.join("cache"))?,
    })
}

/// The `id` of the first `indexK` under `cache_dir` whose `level` is 3.
fn read_l3_id(cache_dir: &Path) -> Result<Option<u32>> {
    if !is_dir(cache_dir)? {
        return Ok(None);
    }
    let mut indexes: Vec<(u32, String)> = list_dir(cache_dir)?
        .into_iter()
        .filter_map(|name| Some((numbered(&name, "index")?, name)))
        .collect();
    indexes.sort();
    for (_, name) in indexes {
        let index = cache_dir.join(name);
        if parse_optional_file(&index.join("level"), parse_u32)? == Some(3) {
            return parse_optional_file(&index.join("id"), parse_u32);
        }
    }
    Ok(None)
}

/// The node of the `nodeN` entry in a CPU directory (a symlink in sysfs).
fn node_entry(cpu_dir: &Path) -> Result<Option<u32>> {
    let nodes: BTreeSet<u32> = list_dir(cpu_dir)?
        .iter()
        .filter_map(|name| numbered(name, "node"))
        .collect();
    match nodes.len() {
        0 => Ok(None),
        1 => Ok(nodes.first().copied()),
        _ => bail!(
            "{}: more than one node<N> entry ({})",
            cpu_dir.display(),
            nodes
                .iter()
                .map(|node| format!("node{node}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// `N` from a name `<prefix>N`.
fn numbered(name: &str, prefix: &str) -> Option<u32> {
    let digits = name.strip_prefix(prefix)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn at(path: &Path, err: impl std::fmt::Display) -> anyhow::Error {
    anyhow!("{}: {err}", path.display())
}

fn parse_file<T>(path: &Path, parse: impl FnOnce(&str) -> Result<T, ParseError>) -> Result<T> {
    parse(&read_required(path)?).map_err(|err| at(path, err))
}

fn parse_optional_file<T>(
    path: &Path,
    parse: impl FnOnce(&str) -> Result<T, ParseError>,
) -> Result<Option<T>> {
    match read_optional(path)? {
        Some(text) => parse(&text).map(Some).map_err(|err| at(path, err)),
        None => Ok(None),
    }
}

fn read_required(path: &Path) -> Result<String> {
    read_optional(path)?.ok_or_else(|| anyhow!("{}: no such file", path.display()))
}

/// A small text file, or `None` when nothing is at `path`. Only regular files
/// are read (a FIFO or device would block or never end), never more than
/// [`MAX_FILE_BYTES`] (see [`crate::bounded_read`]).
fn read_optional(path: &Path) -> Result<Option<String>> {
    match crate::bounded_read::read_regular_file_to_string(path, MAX_FILE_BYTES, "sysfs file") {
        Ok(text) => Ok(Some(text)),
        Err(err) if err.is_not_found() => Ok(None),
        Err(err @ crate::bounded_read::ReadError::TooLarge { .. }) => {
            Err(anyhow!("{err}, far more than a sysfs attribute"))
        }
        Err(err) => Err(err.into()),
    }
}

/// Whether `path` is a directory; `false` when nothing is there.
fn is_dir(path: &Path) -> Result<bool> {
    match fs::metadata(path) {
        Ok(metadata) if metadata.is_dir() => Ok(true),
        Ok(_) => bail!("{}: not a directory", path.display()),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(err) => Err(at(path, err)),
    }
}

/// The UTF-8 names in a directory, sorted; sysfs names are ASCII, so others
/// cannot be entries the reader looks for.
fn list_dir(dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in fs::read_dir(dir).map_err(|err| at(dir, err))? {
        let entry = entry.map_err(|err| at(dir, err))?;
        if let Ok(name) = entry.file_name().into_string() {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// Parse a Linux CPU list such as `0-3,8-11` (also used for node lists) into
/// ascending, distinct ids. Surrounding whitespace is ignored and an empty
/// list is valid (a memory-only node's `cpulist` is empty).
pub fn parse_cpu_list(text: &str) -> Result<Vec<u32>, ParseError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(Vec::new());
    }
    // Merge ranges before expanding them, so a long list of repeated large
    // ranges costs its length, not its length times the range size.
    let mut ranges = Vec::new();
    for entry in text.split(',') {
        let entry = entry.trim();
        if entry.is_empty() {
            return Err(ParseError::EmptyEntry(shown(text)));
        }
        let (first, last) = match entry.split_once('-') {
            Some((first, last)) => (list_id(first, entry)?, list_id(last, entry)?),
            None => {
                let id = list_id(entry, entry)?;
                (id, id)
            }
        };
        if last < first {
            return Err(ParseError::BackwardsRange(shown(entry)));
        }
        ranges.push((first, last));
    }
    ranges.sort_unstable();
    let mut ids = Vec::new();
    let mut next = 0u32;
    for (first, last) in ranges {
        let start = first.max(next);
        if start <= last {
            ids.extend(start..=last);
            next = last + 1;
        }
    }
    Ok(ids)
}

/// One end of a CPU list range; `entry` is shown when the piece is empty.
fn list_id(piece: &str, entry: &str) -> Result<u32, ParseError> {
    if piece.is_empty() {
        return Err(ParseError::NotANumber(shown(entry)));
    }
    let id = parse_u64(piece)?;
    if id > u64::from(MAX_LIST_ID) {
        return Err(ParseError::TooLarge {
            value: shown(piece),
            limit: u64::from(MAX_LIST_ID),
        });
    }
    Ok(id as u32)
}

/// A decimal number with optional surrounding whitespace; no sign.
fn parse_u64(text: &str) -> Result<u64, ParseError> {
    let digits = text.trim();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParseError::NotANumber(shown(digits)));
    }
    // Only digits, so the one way to fail is overflow.
    digits.parse().map_err(|_| ParseError::TooLarge {
        value: shown(digits),
        limit: u64::MAX,
    })
}

fn parse_u32(text: &str) -> Result<u32, ParseError> {
    let value = parse_u64(text)?;
    u32::try_from(value).map_err(|_| ParseError::TooLarge {
        value: shown(text.trim()),
        limit: u64::from(u32::MAX),
    })
}

/// A topology id where the kernel writes `-1` for "not known".
fn parse_id_or_unknown(text: &str) -> Result<Option<u32>, ParseError> {
    if text.trim() == "-1" {
        return Ok(None);
    }
    parse_u32(text).map(Some)
}

/// `nodeN/distance`: space-separated distances, at least one.
fn parse_distances(text: &str) -> Result<Vec<u32>, ParseError> {
    let distances = text
        .split_whitespace()
        .map(parse_u32)
        .collect::<Result<Vec<_>, _>>()?;
    if distances.is_empty() {
        return Err(ParseError::Unexpected {
            value: shown(text.trim()),
            expected: "a list of distances",
        });
    }
    Ok(distances)
}

/// `MemTotal` in bytes from a node's `meminfo`
/// (`Node 0 MemTotal:       65400000 kB`).
fn parse_node_mem_total(text: &str, node: u32) -> Result<u64, ParseError> {
    let node = node.to_string();
    text.lines()
        .find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("Node")
                && words.next() == Some(node.as_str())
                && words.next() == Some("MemTotal:"))
            .then(|| kib_to_bytes(words.collect::<Vec<_>>().as_slice(), line))
        })
        .unwrap_or_else(|| Err(ParseError::MissingLine(format!("Node {node} MemTotal:"))))
}

/// `MemTotal` in bytes from `/proc/meminfo` (`MemTotal:       24682416 kB`).
fn parse_mem_total(text: &str) -> Result<u64, ParseError> {
    text.lines()
        .find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("MemTotal:"))
                .then(|| kib_to_bytes(words.collect::<Vec<_>>().as_slice(), line))
        })
        .unwrap_or_else(|| Err(ParseError::MissingLine("MemTotal:".to_string())))
}

/// `["65400000", "kB"]` in bytes; `line` is shown when the shape is wrong.
fn kib_to_bytes(words: &[&str], line: &str) -> Result<u64, ParseError> {
    let [kib, "kB"] = words else {
        return Err(ParseError::Unexpected {
            value: shown(line.trim()),
            expected: "a size in kB",
        });
    };
    let kib = parse_u64(kib)?;
    kib.checked_mul(1024).ok_or_else(|| ParseError::TooLarge {
        value: format!("{kib} kB"),
        limit: u64::MAX / 1024,
    })
}

/// The page size in bytes from a pool directory name (`hugepages-2048kB`).
fn parse_hugepage_size(name: &str) -> Result<u64, ParseError> {
    let unexpected = || ParseError::Unexpected {
        value: shown(name),
        expected: "a hugepages-<size>kB name",
    };
    let kib = name
        .strip_prefix("hugepages-")
        .and_then(|rest| rest.strip_suffix("kB"))
        .ok_or_else(unexpected)?;
    let kib = parse_u64(kib)?;
    kib.checked_mul(1024).ok_or_else(|| ParseError::TooLarge {
        value: shown(name),
        limit: u64::MAX / 1024,
    })
}

/// A value for an error message, shortened so a garbage file stays readable.
fn shown(value: &str) -> String {
    match value.char_indices().nth(MAX_SHOWN_CHARS) {
        Some((cut, _)) => format!("{}…", &value[..cut]),
        None => value.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check_cpu_list(text: &str, expected: Result<Vec<u32>, ParseError>) {
        assert_eq!(parse_cpu_list(text), expected, "parse_cpu_list({text:?})");
    }

    #[test]
    fn cpu_lists() {
        check_cpu_list("0-3,8-11\n", Ok(vec![0, 1, 2, 3, 8, 9, 10, 11]));
        check_cpu_list("0", Ok(vec![0]));
        check_cpu_list("0,128", Ok(vec![0, 128]));
        check_cpu_list("\n", Ok(vec![]));
        check_cpu_list("", Ok(vec![]));
        check_cpu_list("5-5", Ok(vec![5]));
        // Not what the kernel writes, but harmless: sorted and merged.
        check_cpu_list("8-9,0-1,1-2", Ok(vec![0, 1, 2, 8, 9]));
        check_cpu_list("0-65535", Ok((0..=65_535).collect()));
    }

    #[test]
    fn cpu_list_errors() {
        use ParseError::*;
        check_cpu_list("0-x", Err(NotANumber("x".into())));
        check_cpu_list("-1", Err(NotANumber("-1".into())));
        check_cpu_list("1-", Err(NotANumber("1-".into())));
        check_cpu_list("+1", Err(NotANumber("+1".into())));
        check_cpu_list("0,,2", Err(EmptyEntry("0,,2".into())));
        check_cpu_list("0-3,", Err(EmptyEntry("0-3,".into())));
        check_cpu_list("3-1", Err(BackwardsRange("3-1".into())));
        check_cpu_list("1-2-3", Err(NotANumber("2-3".into())));
        // The kernel's `a-b:used/group` input syntax is never printed back.
        check_cpu_list("0-7:2/4", Err(NotANumber("7:2/4".into())));
        check_cpu_list(
            "0-4294967295",
            Err(TooLarge {
                value: "4294967295".into(),
                limit: 65_535,
            }),
        );
        check_cpu_list(
            "99999999999999999999999",
            Err(TooLarge {
                value: "99999999999999999999999".into(),
                limit: u64::MAX,
            }),
        );
    }

    #[test]
    fn repeated_huge_ranges_stay_cheap() {
        let text = vec!["0-65535"; 100_000].join(",");
        assert_eq!(parse_cpu_list(&text).map(|ids| ids.len()), Ok(65_536));
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_u32("42\n"), Ok(42));
        assert_eq!(parse_u32("007"), Ok(7));
        assert_eq!(parse_u32("4294967295"), Ok(u32::MAX));
        assert_eq!(
            parse_u32("4294967296"),
            Err(ParseError::TooLarge {
                value: "4294967296".into(),
                limit: u64::from(u32::MAX)
            })
        );
        assert_eq!(parse_u32("abc"), Err(ParseError::NotANumber("abc".into())));
        assert_eq!(parse_u32(""), Err(ParseError::NotANumber("".into())));
        assert_eq!(parse_u32("1 2"), Err(ParseError::NotANumber("1 2".into())));
        assert_eq!(parse_id_or_unknown("-1\n"), Ok(None));
        assert_eq!(parse_id_or_unknown("3"), Ok(Some(3)));
        assert_eq!(
            parse_id_or_unknown("-2"),
            Err(ParseError::NotANumber("-2".into()))
        );
    }

    #[test]
    fn distances() {
        assert_eq!(parse_distances("10 21\n"), Ok(vec![10, 21]));
        assert_eq!(parse_distances("10"), Ok(vec![10]));
        assert_eq!(
            parse_distances("10 x"),
            Err(ParseError::NotANumber("x".into()))
        );
        assert_eq!(
            parse_distances(" \n"),
            Err(ParseError::Unexpected {
                value: "".into(),
                expected: "a list of distances"
            })
        );
    }

    #[test]
    fn node_meminfo() {
        let text = "Node 1 MemTotal:       65400000 kB\nNode 1 MemFree:        60000000 kB\n";
        assert_eq!(parse_node_mem_total(text, 1), Ok(65_400_000 * 1024));
        assert_eq!(
            parse_node_mem_total(text, 0),
            Err(ParseError::MissingLine("Node 0 MemTotal:".into()))
        );
        assert_eq!(
            parse_node_mem_total("Node 0 MemTotal: 5 MB", 0),
            Err(ParseError::Unexpected {
                value: "Node 0 MemTotal: 5 MB".into(),
                expected: "a size in kB"
            })
        );
        assert_eq!(
            parse_node_mem_total("Node 0 MemTotal: lots kB", 0),
            Err(ParseError::NotANumber("lots".into()))
        );
        assert_eq!(
            parse_node_mem_total("Node 0 MemTotal: 18446744073709551615 kB", 0),
            Err(ParseError::TooLarge {
                value: "18446744073709551615 kB".into(),
                limit: u64::MAX / 1024
            })
        );
    }

    #[test]
    fn proc_meminfo() {
        let text = "MemTotal:       24682416 kB\nMemFree:        18371704 kB\n";
        assert_eq!(parse_mem_total(text), Ok(24_682_416 * 1024));
        assert_eq!(
            parse_mem_total("MemFree: 1 kB\n"),
            Err(ParseError::MissingLine("MemTotal:".into()))
        );
    }

    #[test]
    fn hugepage_sizes() {
        assert_eq!(parse_hugepage_size("hugepages-2048kB"), Ok(2 << 20));
        assert_eq!(parse_hugepage_size("hugepages-1048576kB"), Ok(1 << 30));
        assert_eq!(
            parse_hugepage_size("hugepages-2MB"),
            Err(ParseError::Unexpected {
                value: "hugepages-2MB".into(),
                expected: "a hugepages-<size>kB name"
            })
        );
        assert_eq!(
            parse_hugepage_size("hugepages-kB"),
            Err(ParseError::NotANumber("".into()))
        );
    }

    #[test]
    fn names() {
        assert_eq!(numbered("node12", "node"), Some(12));
        assert_eq!(numbered("node", "node"), None);
        assert_eq!(numbered("node1a", "node"), None);
        assert_eq!(numbered("index3", "index"), Some(3));
        assert_eq!(numbered("uevent", "index"), None);
    }

    #[test]
    fn long_values_are_shortened() {
        let garbage = "x".repeat(1000);
        let message = parse_u32(&garbage).unwrap_err().to_string();
        assert!(message.len() < 100, "{message}");
        assert!(message.contains('…'), "{message}");
    }

    fn cpu(id: u32, core_id: u32, socket_id: u32, numa_node: u32, l3: Option<u32>) -> CpuInfo {
        CpuInfo {
            id,
            core_id,
            socket_id,
            die_id: None,
            cluster_id: None,
            numa_node,
            uncore_cache_id: l3,
        }
    }

    #[test]
    fn kubelet_core_ids_are_lowest_thread() {
        // Two packages that both number their cores from 0.
        let topology = SysfsTopology {
            cpus: vec![
                cpu(0, 0, 0, 0, None),
                cpu(1, 0, 1, 1, None),
                cpu(2, 0, 0, 0, None),
                cpu(3, 0, 1, 1, None),
            ],
            numa_nodes: Vec::new(),
        };
        assert_eq!(
            topology.kubelet_core_ids(),
            BTreeMap::from([(0, 0), (1, 1), (2, 0), (3, 1)])
        );
    }

    #[test]
    fn kubelet_uncore_ids_skip_node_wide_caches() {
        // Node 0: one L3 (7) over the whole node, so the socket id is used.
        // Node 1: two L3s (8, 9) of one core each, so their ids are used.
        // CPU 6 has no L3 at all.
        let topology = SysfsTopology {
            cpus: vec![
                cpu(0, 0, 0, 0, Some(7)),
                cpu(1, 1, 0, 0, Some(7)),
                cpu(2, 0, 1, 1, Some(8)),
                cpu(3, 1, 1, 1, Some(9)),
                cpu(4, 0, 1, 1, Some(8)),
                cpu(5, 1, 1, 1, Some(9)),
                cpu(6, 2, 1, 1, None),
            ],
            numa_nodes: Vec::new(),
        };
        assert_eq!(
            topology.kubelet_uncore_cache_ids(),
            BTreeMap::from([(0, 0), (1, 0), (2, 8), (3, 9), (4, 8), (5, 9), (6, 1)])
        );
    }
}
