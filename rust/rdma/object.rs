// SPDX-License-Identifier: GPL-2.0

//! Verbs objects the RDMA core allocates for a provider (user context, PD,
//! CQ, ...): the core's C struct at offset 0, then the driver's data.
//!
//! The core allocates `size_ib_*` zeroed bytes, calls the driver's create
//! callback, and frees the memory after the destroy callback. The driver's
//! data is therefore written in the create callback and dropped in the
//! destroy callback; [`CoreObject`] is the one place that does both.

use core::mem::{offset_of, size_of};
use kernel::{prelude::*, types::Opaque};
use pin_init::PinInit;

/// A core object `C` carrying driver data `D`.
///
/// # Invariants
///
/// `core` is at offset 0; `data` is initialised from the end of a
/// successful create callback until the destroy callback drops it.
#[repr(C)]
pub(crate) struct CoreObject<C, D> {
    core: Opaque<C>,
    data: D,
}

impl<C, D> CoreObject<C, D> {
    /// Bytes the core must allocate (`size_ib_*` in `ib_device_ops`).
    pub(super) const SIZE: usize = {
        assert!(offset_of!(Self, core) == 0);
        // The core's kzalloc aligns to 8 bytes.
        assert!(core::mem::align_of::<Self>() <= 8);
        size_of::<Self>()
    };

    /// The driver's data.
    pub(crate) fn data(&self) -> &D {
        &self.data
    }

    /// The core's object.
    pub(super) fn core_ptr(&self) -> *mut C {
        self.core.get()
    }

    /// Writes the driver's data into a freshly allocated object.
    ///
    /// # Safety
    ///
    /// `p` must point to the `C` of an allocation of [`Self::SIZE`] bytes
    /// whose data is not initialised.
    pub(super) unsafe fn init(p: *mut C, data: D) {
        let this = p.cast::<Self>();
        // SAFETY: the allocation is large and aligned enough (caller).
        unsafe { (&raw mut (*this).data).write(data) };
    }

    /// Initialises the driver's data in place (for data that must not move,
    /// such as locks).
    ///
    /// # Safety
    ///
    /// As for [`Self::init`]. On error nothing is initialised.
    pub(super) unsafe fn init_pinned(p: *mut C, data: impl PinInit<D, Error>) -> Result {
        let this = p.cast::<Self>();
        // SAFETY: the allocation is large and aligned enough (caller) and
        // the core never moves it.
        unsafe { data.__init(&raw mut (*this).data) }
    }

    /// Drops the driver's data before the core frees the object.
    ///
    /// # Safety
    ///
    /// `p` must point to an object whose data is initialised and is not used
    /// afterwards.
    pub(super) unsafe fn drop_data(p: *mut C) {
        let this = p.cast::<Self>();
        // SAFETY: initialised and not used again (caller).
        unsafe { core::ptr::drop_in_place(&raw mut (*this).data) };
    }
}

/// Declares the typed object `$name<T>`: a transparent wrapper of
/// `CoreObject<$core, T::$data>`, so the driver type `T` is part of the type.
macro_rules! core_object {
    ($(#[$attr:meta])* $name:ident, $core:ty, $data:ident) => {
        $(#[$attr])*
        #[repr(transparent)]
        pub(crate) struct $name<T: super::device::Driver>(
            super::object::CoreObject<$core, <T as super::device::Driver>::$data>,
        );

        #[allow(dead_code)]
        impl<T: super::device::Driver> $name<T> {
            /// Bytes the core allocates for it.
            pub(super) const SIZE: usize =
                super::object::CoreObject::<$core, <T as super::device::Driver>::$data>::SIZE;

            /// The driver's data.
            pub(crate) fn data(&self) -> &<T as super::device::Driver>::$data {
                self.0.data()
            }

            /// The core's object.
            pub(super) fn core_ptr(&self) -> *mut $core {
                self.0.core_ptr()
            }

            /// Borrows the object behind a core pointer.
            ///
            /// # Safety
            ///
            /// As for `CoreObject::from_raw`.
            pub(super) unsafe fn from_raw<'a>(p: *mut $core) -> &'a Self {
                // SAFETY: transparent wrapper; the rest is the caller's.
                unsafe { &*p.cast::<Self>() }
            }

            /// See `CoreObject::init`.
            ///
            /// # Safety
            ///
            /// As for `CoreObject::init`.
            pub(super) unsafe fn init(p: *mut $core, data: <T as super::device::Driver>::$data) {
                // SAFETY: forwarded.
                unsafe { super::object::CoreObject::<$core, <T as super::device::Driver>::$data>::init(p, data) }
            }

            /// See `CoreObject::init_pinned`.
            ///
            /// # Safety
            ///
            /// As for `CoreObject::init_pinned`.
            pub(super) unsafe fn init_pinned(
                p: *mut $core,
                data: impl pin_init::PinInit<<T as super::device::Driver>::$data, kernel::error::Error>,
            ) -> kernel::error::Result {
                // SAFETY: forwarded.
                unsafe { super::object::CoreObject::<$core, <T as super::device::Driver>::$data>::init_pinned(p, data) }
            }

            /// See `CoreObject::drop_data`.
            ///
            /// # Safety
            ///
            /// As for `CoreObject::drop_data`.
            pub(super) unsafe fn drop_data(p: *mut $core) {
                // SAFETY: forwarded.
                unsafe { super::object::CoreObject::<$core, <T as super::device::Driver>::$data>::drop_data(p) }
            }
        }
    };
}
pub(super) use core_object;
