// SPDX-License-Identifier: GPL-2.0

//! Memory access rights (`enum ib_access_flags`, `IB_ACCESS_*`).

use super::bindings;

/// A set of `IB_ACCESS_*` flags, as given at registration or needed by an
/// operation. Local read access is implied by every memory region, so the
/// empty set is what a local read needs.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) struct Access(u32);

impl Access {
    /// The empty set: what local reads (a send's gather list) need.
    pub(crate) const NONE: Self = Self(0);
    /// Local writes: receive buffers, RDMA read and atomic results.
    pub(crate) const LOCAL_WRITE: Self = Self(bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE);
    /// Peers may write with RDMA WRITE.
    pub(crate) const REMOTE_WRITE: Self = Self(bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE);
    /// Peers may read with RDMA READ.
    pub(crate) const REMOTE_READ: Self = Self(bindings::ib_access_flags_IB_ACCESS_REMOTE_READ);
    /// Peers may use atomic operations.
    pub(crate) const REMOTE_ATOMIC: Self = Self(bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC);
    /// Memory windows may be bound to the region.
    pub(crate) const MW_BIND: Self = Self(bindings::ib_access_flags_IB_ACCESS_MW_BIND);
    /// The region's iova starts at 0 rather than at its virtual address.
    pub(crate) const ZERO_BASED: Self = Self(bindings::ib_access_flags_IB_ZERO_BASED);
    /// On-demand paging instead of pinning.
    pub(crate) const ON_DEMAND: Self = Self(bindings::ib_access_flags_IB_ACCESS_ON_DEMAND);
    /// A hint that the memory is backed by huge pages.
    pub(crate) const HUGETLB: Self = Self(bindings::ib_access_flags_IB_ACCESS_HUGETLB);
    /// Persistent-memory flush to the global visibility point.
    pub(crate) const FLUSH_GLOBAL: Self = Self(bindings::ib_access_flags_IB_ACCESS_FLUSH_GLOBAL);
    /// Persistent-memory flush to the persistence point.
    pub(crate) const FLUSH_PERSISTENT: Self =
        Self(bindings::ib_access_flags_IB_ACCESS_FLUSH_PERSISTENT);
    /// Optional hints (relaxed ordering, ...) a device may ignore.
    pub(crate) const OPTIONAL: Self = Self(bindings::ib_access_flags_IB_ACCESS_OPTIONAL);

    /// The flags as passed by the core. Negative values (bit 31) are kept as
    /// an unknown bit, never dropped.
    pub(crate) fn from_raw(flags: kernel::ffi::c_int) -> Self {
        Self(flags as u32)
    }

    /// The set of these raw bits.
    pub(crate) fn from_bits(bits: u32) -> Self {
        Self(bits)
    }

    /// The raw bits.
    pub(crate) fn bits(self) -> u32 {
        self.0
    }

    /// The flags of both sets.
    pub(crate) const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// Whether every flag of `other` is in `self`.
    pub(crate) fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether `self` and `other` share a flag.
    pub(crate) fn intersects(self, other: Self) -> bool {
        self.0 & other.0 != 0
    }

    /// The flags of `self` not in `other`.
    pub(crate) fn without(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }
}
