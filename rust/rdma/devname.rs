// SPDX-License-Identifier: GPL-2.0

//! A device's name, for control paths.

use super::{
    bindings,
    device::{Device, Driver},
};
use kernel::str::{CStr, CStrExt};

impl<T: Driver> Device<T> {
    /// The device's current name (`rdma dev set NAME name NEW` changes it).
    ///
    /// A name read concurrently with a rename may be the old or the new
    /// one; use it for lookups and reports, as the RDMA core's own
    /// `ibdev_*` messages do.
    pub(crate) fn name(&self) -> &CStr {
        // SAFETY: a registered or registering device has a name, a
        // NUL-terminated string owned by its `struct device`, which lives
        // at least as long as `self`.
        unsafe { CStr::from_char_ptr(bindings::sroce_ib_device_name(self.as_raw())) }
    }
}
