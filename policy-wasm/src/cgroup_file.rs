//! The core's cgroup v2 file: which interface file and the value written
//! to it.
//!
//! The types have the contract's shape (`cgroup-file-name`,
//! `cgroup-value`, `cgroup-file`) so that [`crate::cgroup_file_text!`]
//! gives them the same text as the guest's and the host's bindings (one
//! formatter, invoked here too), and so that the boundary encodes a file
//! by moving its parts: a CPU list is never copied or re-rendered.

/// A cgroup v2 interface file the policy sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CgroupFileName {
    /// `cpu.weight`.
    CpuWeight,
    /// `cpu.max`.
    CpuMax,
    /// `memory.min`.
    MemoryMin,
    /// `memory.low`.
    MemoryLow,
    /// `memory.high`.
    MemoryHigh,
    /// `memory.max`.
    MemoryMax,
    /// `memory.oom.group`.
    MemoryOomGroup,
    /// `cpuset.cpus`.
    CpusetCpus,
    /// `cpuset.mems`.
    CpusetMems,
    /// `hugetlb.<size>.max`, for pages of this many bytes.
    HugetlbMax(u64),
    /// `hugetlb.<size>.rsvd.max`, for pages of this many bytes.
    HugetlbRsvdMax(u64),
}

/// `cpu.max`: the CFS quota and period in microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuMaxValue {
    /// The quota; `None` is `max` (no quota).
    pub quota: Option<u64>,
    /// The period.
    pub period: u64,
}

/// What a cgroup file is set to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CgroupValue {
    /// A decimal integer: bytes, a weight, a flag.
    Number(u64),
    /// `max`: no limit.
    Max,
    /// `cpu.max`'s `<quota|max> <period>`.
    CpuMax(CpuMaxValue),
    /// A CPU or NUMA node list in the Linux list format (`0-3,8`).
    IdList(String),
}

/// One cgroup interface file and the value to write to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupFile {
    /// The file inside the cgroup directory.
    pub file: CgroupFileName,
    /// Its value.
    pub value: CgroupValue,
}

crate::cgroup_file_text!();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_core_files_read_and_print_as_the_contract_spells_them() {
        for (name, value) in [
            ("cpu.max", "max 100000"),
            ("cpu.max", "50000 100000"),
            ("hugetlb.2MB.max", "max"),
            ("hugetlb.1GB.rsvd.max", "1073741824"),
            ("cpuset.cpus", "0-3,8"),
        ] {
            let file = CgroupFile::parse(name, value).expect("a file the policy sets");
            assert_eq!(
                (file.file.to_string(), file.value.to_string()),
                (name.to_string(), value.to_string())
            );
        }
    }
}
