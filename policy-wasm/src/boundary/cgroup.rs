//! The core's cgroup files ([`crate::cgroup_file`]) and placement files
//! ([`crate::placement`]) as the contract's. The shapes are the same, so
//! encoding moves each part: no list is copied and nothing is formatted.

use crate::cgroup_file::{CgroupFile, CgroupFileName, CgroupValue, CpuMaxValue};
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
