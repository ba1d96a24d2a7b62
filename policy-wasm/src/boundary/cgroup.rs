//! The core's cgroup files ([`crate::cgroup_file`]), resource configs
//! ([`crate::cgroup`]), node-level cgroups ([`crate::node_cgroups`]) and
//! placement files ([`crate::placement`]) as the contract's. The shapes
//! are the same, so encoding moves each part: no string is copied, nothing
//! is formatted, and a list of same-sized elements is collected in place.

use crate::cgroup::{HugepageLimit, ResourceConfig};
use crate::cgroup_file::{CgroupFile, CgroupFileName, CgroupValue, CpuMaxValue};
use crate::node_cgroups::{NodeCgroup, NodeCgroupValues};
use crate::placement::{ContainerFiles, PlacementFiles};
use crate::wit;

impl From<CgroupFileName> for wit::CgroupFileName {
    fn from(name: CgroupFileName) -> Self {
        match name {
            CgroupFileName::CpuWeight => wit::CgroupFileName::CpuWeight,
            CgroupFileName::CpuMax => wit::CgroupFileName::CpuMax,
            CgroupFileName::MemoryMin => wit::CgroupFileName::MemoryMin,
            CgroupFileName::MemoryLow => wit::CgroupFileName::MemoryLow,
            CgroupFileName::MemoryHigh => wit::CgroupFileName::MemoryHigh,
            CgroupFileName::MemoryMax => wit::CgroupFileName::MemoryMax,
            CgroupFileName::MemoryOomGroup => wit::CgroupFileName::MemoryOomGroup,
            CgroupFileName::CpusetCpus => wit::CgroupFileName::CpusetCpus,
            CgroupFileName::CpusetMems => wit::CgroupFileName::CpusetMems,
            CgroupFileName::HugetlbMax(size) => wit::CgroupFileName::HugetlbMax(size),
            CgroupFileName::HugetlbRsvdMax(size) => wit::CgroupFileName::HugetlbRsvdMax(size),
        }
    }
}

impl From<CgroupValue> for wit::CgroupValue {
    fn from(value: CgroupValue) -> Self {
        match value {
            CgroupValue::Number(n) => wit::CgroupValue::Number(n),
            CgroupValue::Max => wit::CgroupValue::Max,
            CgroupValue::CpuMax(CpuMaxValue { quota, period }) => {
                wit::CgroupValue::CpuMax(wit::CpuMaxValue { quota, period })
            }
            CgroupValue::IdList(list) => wit::CgroupValue::IdList(list),
        }
    }
}

impl From<CgroupFile> for wit::CgroupFile {
    fn from(file: CgroupFile) -> Self {
        wit::CgroupFile {
            file: file.file.into(),
            value: file.value.into(),
        }
    }
}

/// Cgroup files as the contract's, in order.
pub(crate) fn encode_files(files: Vec<CgroupFile>) -> Vec<wit::CgroupFile> {
    files.into_iter().map(wit::CgroupFile::from).collect()
}

impl From<HugepageLimit> for wit::HugepageLimit {
    fn from(limit: HugepageLimit) -> Self {
        wit::HugepageLimit {
            page_size_bytes: limit.page_size_bytes,
            limit_bytes: limit.limit_bytes,
        }
    }
}

impl From<ResourceConfig> for wit::ResourceConfig {
    fn from(config: ResourceConfig) -> Self {
        wit::ResourceConfig {
            cpu_shares: config.cpu_shares,
            cpu_quota: config.cpu_quota,
            cpu_period: config.cpu_period,
            memory_limit: config.memory_limit,
            hugepage_limits: config
                .hugepage_limits
                .map(|limits| limits.into_iter().map(wit::HugepageLimit::from).collect()),
            unified: config.unified,
        }
    }
}

impl From<NodeCgroup> for wit::NodeCgroup {
    fn from(cgroup: NodeCgroup) -> Self {
        match cgroup {
            NodeCgroup::Kubepods => wit::NodeCgroup::Kubepods,
            NodeCgroup::Burstable => wit::NodeCgroup::Burstable,
            NodeCgroup::Besteffort => wit::NodeCgroup::Besteffort,
            NodeCgroup::KubeReserved => wit::NodeCgroup::KubeReserved,
            NodeCgroup::SystemReserved => wit::NodeCgroup::SystemReserved,
        }
    }
}

impl From<NodeCgroupValues> for wit::NodeCgroupValues {
    fn from(values: NodeCgroupValues) -> Self {
        wit::NodeCgroupValues {
            cgroup: values.cgroup.into(),
            files: encode_files(values.files),
        }
    }
}

impl From<ContainerFiles> for wit::ContainerFiles {
    fn from(container: ContainerFiles) -> Self {
        wit::ContainerFiles {
            name: container.name,
            files: encode_files(container.files),
        }
    }
}

impl From<PlacementFiles> for wit::PlacementFiles {
    fn from(placement: PlacementFiles) -> Self {
        wit::PlacementFiles {
            pod: encode_files(placement.pod),
            containers: placement
                .containers
                .into_iter()
                .map(wit::ContainerFiles::from)
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::mem::{align_of, size_of};

    use super::*;

    /// `Vec::into_iter().map().collect()` reuses the allocation when the
    /// element layouts match: encoding a list of files allocates nothing.
    #[test]
    fn core_and_contract_files_share_a_layout() {
        assert_eq!(size_of::<CgroupFile>(), size_of::<wit::CgroupFile>());
        assert_eq!(align_of::<CgroupFile>(), align_of::<wit::CgroupFile>());
        assert_eq!(size_of::<HugepageLimit>(), size_of::<wit::HugepageLimit>());
        let files = vec![CgroupFile {
            file: CgroupFileName::CpusetCpus,
            value: CgroupValue::IdList("0-3".into()),
        }];
        let before = files.as_ptr() as usize;
        let encoded = encode_files(files);
        assert_eq!(encoded.as_ptr() as usize, before);
        assert_eq!(encoded[0].value, wit::CgroupValue::IdList("0-3".into()));
    }
}
