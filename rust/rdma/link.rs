// SPDX-License-Identifier: GPL-2.0

//! `rdma link add NAME type TYPE netdev DEV`: registering a link type.
//!
//! C header: `include/rdma/rdma_netlink.h`.

use super::context_slot::ContextSlot;
use super::{bindings, netdev::NetDevice};
use core::marker::PhantomData;
use kernel::{error::from_result, prelude::*, str::CStr, sync::Arc, types::Opaque};

/// A link type the `rdma` tool can create devices of.
pub(crate) trait LinkType: Send + Sync + 'static {
    /// The name after `type` on the command line.
    const NAME: &'static CStr;

    /// Creates and registers a device called `name` on `ndev`.
    ///
    /// Runs in process context with the RDMA core's link lock held for
    /// reading, so it never runs concurrently with unregistering the type.
    fn newlink(&self, name: &CStr, ndev: &NetDevice) -> Result;
}

/// The one link type context of this module, read by the `newlink`
/// trampoline (the C callback has no context argument). Set while a
/// [`LinkRegistration`] exists, NULL otherwise.
static CONTEXT: ContextSlot = ContextSlot::new();

/// A registered link type; unregistered on drop.
///
/// # Invariants
///
/// `ops` is registered with the RDMA core, and [`CONTEXT`] holds a pointer
/// obtained from `Arc::into_raw` of this registration's context.
pub(crate) struct LinkRegistration<L: LinkType> {
    ops: Pin<KBox<Opaque<bindings::rdma_link_ops>>>,
    _type: PhantomData<L>,
}

// SAFETY: the registration is only created and dropped (never shared for
// mutation); the C side synchronises access to `ops` with its link lock.
unsafe impl<L: LinkType> Send for LinkRegistration<L> {}
// SAFETY: no method takes `&self`; see `Send`.
unsafe impl<L: LinkType> Sync for LinkRegistration<L> {}

impl<L: LinkType> LinkRegistration<L> {
    /// Registers `L`; at most one link type registration may exist at a time.
    pub(crate) fn new(ctx: Arc<L>) -> Result<Self> {
        CONTEXT.install(ctx)?;

        let ops = bindings::rdma_link_ops {
            type_: L::NAME.as_char_ptr(),
            newlink: Some(Self::newlink_callback),
            ..Default::default()
        };
        let ops = match KBox::pin(Opaque::new(ops), GFP_KERNEL) {
            Ok(ops) => ops,
            Err(e) => {
                // SAFETY: installed above as `L`; nothing borrows it yet.
                unsafe { CONTEXT.release::<L>() };
                return Err(e.into());
            }
        };
        // SAFETY: `ops` is pinned on the heap and outlives the registration
        // (it is dropped only after `rdma_link_unregister` in `drop`).
        unsafe { bindings::rdma_link_register(ops.get()) };
        Ok(Self {
            ops,
            _type: PhantomData,
        })
    }

    /// # Safety
    ///
    /// Called by the RDMA core with a NUL-terminated name and a held net device.
    unsafe extern "C" fn newlink_callback(
        name: *const kernel::ffi::c_char,
        ndev: *mut bindings::net_device,
    ) -> kernel::ffi::c_int {
        from_result(|| {
            // SAFETY: installed as `L`; the core calls `newlink` under its
            // link lock, which `rdma_link_unregister` takes for writing
            // before the context is released, so it outlives this call.
            let ctx = unsafe { CONTEXT.get::<L>() }.ok_or(ENODEV)?;
            // SAFETY: `name` is a NUL-terminated buffer on the caller's
            // stack; `ndev` is held by the caller for the whole call.
            let (name, ndev) = unsafe { (CStr::from_char_ptr(name), NetDevice::from_raw(ndev)) };
            ctx.newlink(name, ndev)?;
            Ok(0)
        })
    }
}

impl<L: LinkType> Drop for LinkRegistration<L> {
    fn drop(&mut self) {
        // SAFETY: registered in `new` (type invariant); this waits for
        // running `newlink` calls and keeps new ones from starting.
        unsafe { bindings::rdma_link_unregister(self.ops.get()) };
        // SAFETY: installed by `new` as `L`; no `newlink` runs any more.
        unsafe { CONTEXT.release::<L>() };
    }
}
