// SPDX-License-Identifier: GPL-2.0

//! Net device event notifications (`register_netdevice_notifier`).

use super::{bindings, netdev::NetDevice};
use kernel::{prelude::*, sync::Arc, types::Opaque};

/// A net device event sroce reacts to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum NetdevEvent {
    /// The device is being unregistered.
    Unregister,
    /// The MTU changed.
    ChangeMtu,
    /// Administratively up.
    Up,
    /// Administratively down.
    Down,
    /// Carrier or other state change.
    Change,
}

impl NetdevEvent {
    fn from_raw(ev: u64) -> Option<Self> {
        let ev = u32::try_from(ev).ok()?;
        Some(match ev {
            bindings::netdev_cmd_NETDEV_UNREGISTER => Self::Unregister,
            bindings::netdev_cmd_NETDEV_CHANGEMTU => Self::ChangeMtu,
            bindings::netdev_cmd_NETDEV_UP => Self::Up,
            bindings::netdev_cmd_NETDEV_DOWN => Self::Down,
            bindings::netdev_cmd_NETDEV_CHANGE => Self::Change,
            _ => return None,
        })
    }
}

/// Receives net device events.
pub(crate) trait NetdevHandler: Send + Sync + 'static {
    /// Called under RTNL for every event on every net device.
    fn event(&self, event: NetdevEvent, ndev: &NetDevice);
}

#[repr(C)]
struct Block<H: NetdevHandler> {
    nb: Opaque<bindings::notifier_block>,
    handler: Arc<H>,
}

/// A registered netdev notifier; unregistered on drop.
///
/// # Invariants
///
/// `block.nb` is registered with the netdev notifier chain.
pub(crate) struct NetdevNotifier<H: NetdevHandler> {
    block: Pin<KBox<Block<H>>>,
}

// SAFETY: the notifier block is only touched by the C notifier chain under
// its own lock; the handler is `Send + Sync`.
unsafe impl<H: NetdevHandler> Send for NetdevNotifier<H> {}
// SAFETY: no method takes `&self`; see `Send`.
unsafe impl<H: NetdevHandler> Sync for NetdevNotifier<H> {}

impl<H: NetdevHandler> NetdevNotifier<H> {
    /// Registers `handler` for all net devices in all namespaces.
    pub(crate) fn new(handler: Arc<H>) -> Result<Self> {
        let nb = bindings::notifier_block {
            notifier_call: Some(Self::callback),
            ..Default::default()
        };
        let block = KBox::pin(
            Block {
                nb: Opaque::new(nb),
                handler,
            },
            GFP_KERNEL,
        )?;
        // SAFETY: `block` is pinned on the heap and stays registered until
        // `drop` unregisters it before freeing.
        kernel::error::to_result(unsafe { bindings::register_netdevice_notifier(block.nb.get()) })?;
        Ok(Self { block })
    }

    /// # Safety
    ///
    /// Called by the notifier chain with our registered block and a netdev
    /// notifier info.
    unsafe extern "C" fn callback(
        nb: *mut bindings::notifier_block,
        event: kernel::ffi::c_ulong,
        info: *mut kernel::ffi::c_void,
    ) -> kernel::ffi::c_int {
        if let Some(ev) = NetdevEvent::from_raw(event as u64) {
            // SAFETY: `nb` is the first field of a live, pinned `Block<H>`
            // (it is unregistered before being freed).
            let block = unsafe { &*nb.cast::<Block<H>>() };
            // SAFETY: `info` is the notifier info of a netdev event; the
            // device is alive for the duration of the call (RTNL held).
            let ndev =
                unsafe { NetDevice::from_raw(bindings::sroce_netdev_notifier_info_to_dev(info)) };
            block.handler.event(ev, ndev);
        }
        bindings::NOTIFY_DONE as kernel::ffi::c_int
    }
}

impl<H: NetdevHandler> Drop for NetdevNotifier<H> {
    fn drop(&mut self) {
        // SAFETY: registered in `new` (type invariant).
        unsafe { bindings::unregister_netdevice_notifier(self.block.nb.get()) };
    }
}
