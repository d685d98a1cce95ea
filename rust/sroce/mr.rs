// SPDX-License-Identifier: GPL-2.0

//! What sroce accepts as a memory registration.
//!
//! The rdma layer pins the memory, builds the translation and hands out
//! keys; this is the policy in front of it: the access rights the verbs
//! allow, the size, and the device's `max_mr` budget.

use super::{device::SroceDevice, limits::MAX_FAST_REG_PAGES};
use crate::rdma::{
    access::Access,
    device::Device,
    mr::{MrKind, MrRequest},
};
use kernel::prelude::*;

/// Rights sroce implements. `MW_BIND` lets memory windows bind to the
/// region; `ZERO_BASED` is accepted (the iova is taken as given), as is
/// the `HUGETLB` hint.
const UNDERSTOOD: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_ATOMIC)
    .union(Access::MW_BIND)
    .union(Access::ZERO_BASED)
    .union(Access::HUGETLB)
    .union(Access::ON_DEMAND);

/// Rights that exist but sroce does not implement.
const UNSUPPORTED: Access = Access::FLUSH_GLOBAL.union(Access::FLUSH_PERSISTENT);

/// Checks a registration against the verbs' rules and sroce's limits:
/// `EINVAL` for unknown flags, a zero length, or remote write
/// or atomic rights without local write (IBTA o10-22); `EOPNOTSUPP` for
/// rights sroce does not implement. Optional hints are ignored, as the
/// verbs allow.
pub(crate) fn check_request(req: &MrRequest) -> Result {
    check_access(req.access)?;
    // No size check beyond this: `max_mr_size` is unlimited (as in rxe),
    // and the core bounds what can be pinned (`RLIMIT_MEMLOCK`, 2^32 pages).
    match req.kind {
        MrKind::User if req.length == 0 => return Err(EINVAL),
        MrKind::FastReg { max_pages } if max_pages == 0 || max_pages > MAX_FAST_REG_PAGES => {
            return Err(EINVAL)
        }
        _ => {}
    }
    Ok(())
}

/// Checks access rights (see [`check_request`]); also what a region's new
/// rights (`ibv_rereg_mr`) must pass.
pub(crate) fn check_access(access: Access) -> Result {
    let access = access.without(Access::OPTIONAL);
    if access.intersects(UNSUPPORTED) {
        return Err(EOPNOTSUPP);
    }
    if access.without(UNDERSTOOD) != Access::NONE {
        return Err(EINVAL);
    }
    if access.intersects(Access::REMOTE_WRITE.union(Access::REMOTE_ATOMIC))
        && !access.contains(Access::LOCAL_WRITE)
    {
        return Err(EINVAL);
    }
    Ok(())
}

/// Per-memory-region state of sroce. Holds one unit of the device's MR
/// budget, returned by [`release`].
pub(crate) struct SroceMemoryRegion;

/// Admits a registration and takes it from the budget.
pub(crate) fn admit(dev: &Device<SroceDevice>, req: &MrRequest) -> Result<SroceMemoryRegion> {
    check_request(req)?;
    dev.data().mrs.take()?;
    Ok(SroceMemoryRegion)
}

/// Returns a deregistered MR's budget.
pub(crate) fn release(dev: &Device<SroceDevice>, _mr: &SroceMemoryRegion) {
    dev.data().mrs.give();
}
