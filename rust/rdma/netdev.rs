// SPDX-License-Identifier: GPL-2.0

//! Read-only views of a `struct net_device`.

use super::{attr::PortState, bindings};
use kernel::{prelude::*, str::CStr, types::Opaque};

/// A network device the caller holds a reference on (or that the RTNL or a
/// notifier call keeps alive) for as long as the borrow lasts.
///
/// # Invariants
///
/// `inner` is a live, registered `struct net_device`.
#[repr(transparent)]
pub(crate) struct NetDevice(Opaque<bindings::net_device>);

impl NetDevice {
    /// Borrows a net device from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a live `net_device` that stays alive for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::net_device) -> &'a Self {
        // SAFETY: `NetDevice` is a transparent wrapper; the caller guarantees
        // the pointee lives for `'a`.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// The raw pointer, for the `rdma` and `net` layers' calls into C.
    pub(crate) fn as_raw(&self) -> *mut bindings::net_device {
        self.0.get()
    }

    /// The interface name, e.g. `eth0`.
    pub(crate) fn name(&self) -> &CStr {
        // SAFETY: `name` is a NUL-terminated array inside a live net_device
        // (type invariant); renames happen under RTNL and keep it terminated.
        unsafe { CStr::from_char_ptr((*self.as_raw()).name.as_ptr()) }
    }

    /// The current MTU in bytes.
    pub(crate) fn mtu(&self) -> u32 {
        // SAFETY: reading a plain field of a live net_device; `READ_ONCE`
        // semantics are not needed for a value only used as a hint.
        unsafe { (*self.as_raw()).mtu }
    }

    /// The link-layer type (`ARPHRD_*`).
    pub(crate) fn link_type(&self) -> u16 {
        // SAFETY: reading a plain field of a live net_device.
        unsafe { (*self.as_raw()).type_ }
    }

    /// Whether this is an Ethernet device.
    pub(crate) fn is_ethernet(&self) -> bool {
        u32::from(self.link_type()) == bindings::ARPHRD_ETHER
    }

    /// Whether this is a loopback device.
    pub(crate) fn is_loopback(&self) -> bool {
        // SAFETY: reading a plain field of a live net_device.
        let flags = unsafe { (*self.as_raw()).flags };
        flags & bindings::net_device_flags_IFF_LOOPBACK != 0
    }

    /// Whether the interface is administratively up.
    pub(crate) fn is_up(&self) -> bool {
        // SAFETY: the C helper only reads the device's state bits.
        unsafe { bindings::sroce_netif_running(self.as_raw()) }
    }

    /// The six-byte hardware address, if the device has one.
    pub(crate) fn mac(&self) -> Option<[u8; 6]> {
        // SAFETY: `dev_addr` points to `addr_len` valid bytes for the life of
        // a registered net_device; we read at most 6 and only if it has 6.
        unsafe {
            let nd = &*self.as_raw();
            if usize::from(nd.addr_len) < 6 || nd.dev_addr.is_null() {
                return None;
            }
            let mut mac = [0u8; 6];
            core::ptr::copy_nonoverlapping(nd.dev_addr, mac.as_mut_ptr(), 6);
            Some(mac)
        }
    }

    /// The RDMA port state this device implies (up with carrier: active).
    pub(crate) fn ib_port_state(&self) -> PortState {
        // SAFETY: the C helper only reads the device's state bits.
        let st = unsafe { bindings::sroce_ib_get_curr_port_state(self.as_raw()) };
        if st == bindings::ib_port_state_IB_PORT_ACTIVE {
            PortState::Active
        } else {
            PortState::Down
        }
    }
}
