// SPDX-License-Identifier: GPL-2.0

//! Per-port hardware counters (`rdma statistic show link DEV/1`, and
//! `/sys/class/infiniband/DEV/ports/1/hw_counters/`).
//!
//! C header: `include/rdma/ib_verbs.h` (`struct rdma_hw_stats`).
//!
//! A driver names its counters once, in a static table of [`StatDesc`]
//! ([`Driver::PORT_STATS`]), and fills their current values on request
//! ([`Driver::port_stats`]). The core caches the values for
//! `RDMA_HW_STATS_DEFAULT_LIFESPAN` milliseconds.

use super::{
    bindings,
    device::{device_from_raw, Driver, PORT},
};
use kernel::{prelude::*, str::CStr};

/// The name of one counter.
///
/// # Invariants
///
/// `name` points to a NUL-terminated string that lives forever; `priv_` is
/// NULL and `flags` is 0. The value is never written after construction.
#[repr(transparent)]
pub(crate) struct StatDesc(bindings::rdma_stat_desc);

// SAFETY: the descriptor is immutable and only points to `'static` data
// (type invariant), so sharing it between threads is sound.
unsafe impl Sync for StatDesc {}

impl StatDesc {
    /// A counter called `name` (shown as is by `rdma statistic`).
    // `CStrExt::as_char_ptr` is not `const`; the cast below gives the
    // kernel's (unsigned) `char` all the same.
    #[expect(clippy::disallowed_methods)]
    pub(crate) const fn new(name: &'static CStr) -> Self {
        // INVARIANT: a `'static` string, no private data, no flags.
        Self(bindings::rdma_stat_desc {
            name: name.as_ptr().cast(),
            flags: 0,
            priv_: core::ptr::null(),
        })
    }
}

/// `ib_device_ops.alloc_hw_port_stats`.
///
/// # Safety
///
/// Called by the RDMA core for a live device of driver `T`.
pub(super) unsafe extern "C" fn alloc_port<T: Driver>(
    _ib: *mut bindings::ib_device,
    _port: u32,
) -> *mut bindings::rdma_hw_stats {
    let Ok(n) = i32::try_from(T::PORT_STATS.len()) else {
        return core::ptr::null_mut();
    };
    // SAFETY: the descriptors are a `'static` array of `n` transparent
    // `rdma_stat_desc`s, as long-lived as the stats struct needs them.
    unsafe {
        bindings::rdma_alloc_hw_stats_struct(
            T::PORT_STATS.as_ptr().cast(),
            n,
            bindings::RDMA_HW_STATS_DEFAULT_LIFESPAN as kernel::ffi::c_ulong,
        )
    }
}

/// `ib_device_ops.get_hw_stats`: fills every counter, returns how many.
///
/// # Safety
///
/// Called by the RDMA core for a live device of driver `T`, with `stats`
/// NULL or allocated by [`alloc_port`] and locked by the caller.
pub(super) unsafe extern "C" fn get<T: Driver>(
    ib: *mut bindings::ib_device,
    stats: *mut bindings::rdma_hw_stats,
    port: u32,
    _index: kernel::ffi::c_int,
) -> kernel::ffi::c_int {
    if stats.is_null() || port != PORT {
        return EINVAL.to_errno();
    }
    // SAFETY: `stats` is valid and exclusively ours for this call
    // (function contract); `value` holds `num_counters` entries.
    let (n, values) = unsafe {
        let n = (*stats).num_counters;
        let len = usize::try_from(n).unwrap_or(0);
        (n, (*stats).value.as_mut_slice(len))
    };
    // SAFETY: callback on a live device of this driver.
    let dev = unsafe { device_from_raw::<T>(ib) };
    T::port_stats(dev, values);
    n
}
