// SPDX-License-Identifier: GPL-2.0

//! Network namespaces: borrowing a device's namespace, and being told when
//! a namespace goes away (`register_pernet_subsys`).
//!
//! Kernel sockets do not keep their namespace alive, so whoever creates
//! them in a namespace must release them from that namespace's `exit`
//! callback at the latest; [`PernetRegistration`] delivers it.

use super::{addr::IpAddr, bindings};
use crate::rdma::context_slot::ContextSlot;
use crate::rdma::netdev::NetDevice;
use core::marker::PhantomData;
use kernel::{prelude::*, sync::Arc, types::Opaque};

/// A network namespace, borrowed from something that keeps it alive (a
/// net device in it, or an `exit` callback for it).
///
/// # Invariants
///
/// Wraps a live `struct net`.
#[repr(transparent)]
pub(crate) struct Net(Opaque<bindings::net>);

impl Net {
    /// # Safety
    ///
    /// `ptr` must be a live namespace for `'a`.
    unsafe fn from_raw<'a>(ptr: *mut bindings::net) -> &'a Self {
        // SAFETY: transparent wrapper; liveness is the caller's promise.
        unsafe { &*ptr.cast::<Self>() }
    }

    pub(super) fn as_raw(&self) -> *mut bindings::net {
        self.0.get()
    }

    /// The namespace's identity, usable after the borrow ends (never
    /// dereferenced). Two live namespaces never share a key; a key may be
    /// reused once its namespace has gone through `exit`.
    pub(crate) fn key(&self) -> NetKey {
        NetKey(self.as_raw() as usize)
    }

    /// Whether the net device with index `ifindex` exists here, is up and
    /// has carrier. Any context.
    pub(crate) fn link_up(&self, ifindex: i32) -> bool {
        // SAFETY: a live namespace (type invariant); the helper looks the
        // device up under RCU and reads its state bits.
        unsafe { bindings::sroce_ifindex_link_up(self.as_raw(), ifindex) }
    }
}

/// The identity of a namespace (see [`Net::key`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct NetKey(usize);

impl NetKey {
    /// The key of the namespace at `ptr` (never dereferenced).
    pub(super) fn of_raw(ptr: *mut bindings::net) -> Self {
        Self(ptr as usize)
    }
}

impl NetDevice {
    /// The network namespace the device is in.
    pub(crate) fn net(&self) -> &Net {
        // SAFETY: a live net device's namespace outlives it (a namespace
        // is torn down only after its devices are gone or moved), and the
        // borrow is tied to the device's.
        unsafe { Net::from_raw(bindings::sroce_dev_net(self.as_raw())) }
    }

    /// The interface index (unique within its namespace).
    pub(crate) fn ifindex(&self) -> i32 {
        // SAFETY: reads a field of a live net device.
        unsafe { bindings::sroce_netdev_ifindex(self.as_raw()) }
    }

    /// The net device of `net` that has the local address `addr`, if any.
    /// The borrow ends with the RCU read-side section `_rcu`.
    pub(crate) fn by_local_addr<'g>(
        net: &Net,
        addr: &IpAddr,
        _rcu: &'g kernel::sync::rcu::Guard,
    ) -> Option<&'g NetDevice> {
        let ndev = match addr {
            // SAFETY: `net` is live; the lookup takes no reference and is
            // valid under RCU, which `_rcu` holds.
            IpAddr::V4(a) => unsafe {
                bindings::sroce_dev_by_addr4(net.as_raw(), u32::from_ne_bytes(*a))
            },
            IpAddr::V6(a) => {
                let mut in6 = bindings::in6_addr::default();
                in6.in6_u.u6_addr8 = *a;
                // SAFETY: as above; `in6` is valid for the call.
                unsafe { bindings::sroce_dev_by_addr6(net.as_raw(), &in6) }
            }
        };
        if ndev.is_null() {
            return None;
        }
        // SAFETY: a device found under RCU stays valid until the read-side
        // section ends, which bounds the returned borrow.
        Some(unsafe { NetDevice::from_raw(ndev) })
    }
}

/// Told when a network namespace is being dismantled.
pub(crate) trait NetnsExit: Send + Sync + 'static {
    /// Called in process context (may sleep) once for every namespace that
    /// goes away, after its net devices are gone, and for every remaining
    /// namespace when the registration is dropped.
    fn exit(&self, net: &Net);
}

/// The context of the one [`PernetRegistration`] (pernet callbacks carry
/// no context argument). Set while the registration exists.
static CONTEXT: ContextSlot = ContextSlot::new();

/// A registered pernet subsystem; unregistered on drop.
///
/// # Invariants
///
/// `ops` is registered, and [`CONTEXT`] holds `Arc::into_raw` of its
/// handler.
pub(crate) struct PernetRegistration<H: NetnsExit> {
    ops: Pin<KBox<Opaque<bindings::pernet_operations>>>,
    _handler: PhantomData<H>,
}

// SAFETY: only created and dropped; the C side serialises access to `ops`
// with `pernet_ops_rwsem`.
unsafe impl<H: NetnsExit> Send for PernetRegistration<H> {}
// SAFETY: no method takes `&self`.
unsafe impl<H: NetnsExit> Sync for PernetRegistration<H> {}

impl<H: NetnsExit> PernetRegistration<H> {
    /// Registers `handler`; at most one registration may exist at a time.
    pub(crate) fn new(handler: Arc<H>) -> Result<Self> {
        CONTEXT.install(handler)?;
        let ops = bindings::pernet_operations {
            exit: Some(Self::exit_callback),
            ..Default::default()
        };
        let ops = KBox::pin(Opaque::new(ops), GFP_KERNEL)
            .map_err(Error::from)
            .and_then(|ops| {
                // SAFETY: `ops` is pinned on the heap and unregistered in
                // `drop` before it is freed.
                let ret = unsafe { bindings::register_pernet_subsys(ops.get()) };
                kernel::error::to_result(ret).map(|()| ops)
            });
        match ops {
            // INVARIANT: registered, context stored.
            Ok(ops) => Ok(Self {
                ops,
                _handler: PhantomData,
            }),
            Err(e) => {
                Self::release_context();
                Err(e)
            }
        }
    }

    fn release_context() {
        // SAFETY: installed by `new` as `H`; no callback can run any more
        // (not or no longer registered).
        unsafe { CONTEXT.release::<H>() };
    }

    /// # Safety
    ///
    /// Called by the pernet core with a namespace being dismantled.
    unsafe extern "C" fn exit_callback(net: *mut bindings::net) {
        // SAFETY: installed as `H`; it lives until `unregister_pernet_subsys`
        // has returned, which waits for running callbacks.
        let Some(h) = (unsafe { CONTEXT.get::<H>() }) else {
            return;
        };
        // SAFETY: `net` is live for the duration of the call.
        let net = unsafe { Net::from_raw(net) };
        h.exit(net);
    }
}

impl<H: NetnsExit> Drop for PernetRegistration<H> {
    fn drop(&mut self) {
        // SAFETY: registered in `new` (type invariant). This calls `exit`
        // for every live namespace, then no callback runs any more.
        unsafe { bindings::unregister_pernet_subsys(self.ops.get()) };
        Self::release_context();
    }
}
