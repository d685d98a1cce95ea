// SPDX-License-Identifier: GPL-2.0

//! A table of optional values indexed by a small number, readable from any
//! context (an IRQ-safe spinlock) and grown in process context (the bigger
//! vector is allocated outside the lock). Holds the device's queue pairs by
//! number and its address handles by number.

use kernel::{new_spinlock_irq, prelude::*, sync::SpinLockIrq};

/// Values by index; see the module documentation.
#[pin_data]
pub(crate) struct SlotTable<T> {
    #[pin]
    slots: SpinLockIrq<KVVec<Option<T>>>,
}

impl<T: Clone> SlotTable<T> {
    /// An empty table.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            slots <- new_spinlock_irq!(KVVec::new(), "sroce::slot_table"),
        })
    }

    /// Stores `value` at `i`, growing the table if needed with `gfp`
    /// (`GFP_KERNEL`: process context).
    pub(crate) fn insert(&self, i: usize, value: T, gfp: kernel::alloc::Flags) -> Result {
        let mut value = Some(value);
        loop {
            let len = {
                let mut t = self.slots.lock();
                if let Some(slot) = t.get_mut(i) {
                    *slot = value.take();
                    return Ok(());
                }
                t.len()
            };
            let new_len = (i + 1).next_power_of_two().max(64);
            let mut bigger = KVVec::with_capacity(new_len, gfp)?;
            let old = {
                let mut t = self.slots.lock();
                if t.len() != len {
                    // Grown meanwhile: try again.
                    continue;
                }
                for e in t.iter_mut() {
                    // Capacity is reserved: no allocation under the lock.
                    let _ = bigger.push_within_capacity(e.take());
                }
                while bigger.push_within_capacity(None).is_ok() {}
                core::mem::replace(&mut *t, bigger)
            };
            // Freed outside the lock (only empty slots are left in it).
            drop(old);
        }
    }

    /// Removes the value at `i` and returns it (to be dropped outside the
    /// lock). Any context.
    pub(crate) fn take(&self, i: usize) -> Option<T> {
        self.slots.lock().get_mut(i).and_then(Option::take)
    }

    /// A copy of the value at `i`. Any context.
    pub(crate) fn get(&self, i: usize) -> Option<T> {
        self.slots.lock().get(i)?.clone()
    }

    /// Copies of every value, in index order (allocation outside the lock;
    /// retried if the table grows meanwhile). Process context.
    pub(crate) fn snapshot(&self) -> Result<KVec<T>> {
        let mut out = KVec::new();
        loop {
            let want = self.slots.lock().iter().flatten().count();
            out.reserve(want, GFP_KERNEL)?;
            let t = self.slots.lock();
            if t.iter().flatten().count() > out.capacity() {
                continue;
            }
            for v in t.iter().flatten() {
                // Room was reserved above.
                let _ = out.push_within_capacity(v.clone());
            }
            return Ok(out);
        }
    }
}
