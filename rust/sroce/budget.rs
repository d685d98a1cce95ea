// SPDX-License-Identifier: GPL-2.0

//! Per-device object limits (`max_pd`, `max_cq`, ...), enforced.

use core::sync::atomic::{AtomicU32, Ordering};
use kernel::prelude::*;

/// How many objects of one kind exist, against the limit the device
/// advertises for them.
pub(crate) struct Budget {
    used: AtomicU32,
    max: u32,
}

impl Budget {
    /// A budget of `max` objects, none used.
    pub(crate) const fn new(max: u32) -> Self {
        Self {
            used: AtomicU32::new(0),
            max,
        }
    }

    /// Takes one object from the budget; `ENOMEM` when it is spent, which is
    /// what verbs users expect from an exhausted device.
    pub(crate) fn take(&self) -> Result {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            })
            .map(|_| ())
            .map_err(|_| ENOMEM)
    }

    /// Returns one object to the budget.
    pub(crate) fn give(&self) {
        let _ = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }
}
