// SPDX-License-Identifier: GPL-2.0

//! Output routes (`struct dst_entry`) for locally generated datagrams.

use super::{addr::IpAddr, bindings, netns::Net};
use crate::rdma::netdev::NetDevice;
use core::ptr::NonNull;
use kernel::{error::from_err_ptr, prelude::*};

/// What a route is looked up for: a UDP flow.
#[derive(Clone, Copy, Debug)]
pub(crate) struct UdpFlow {
    /// Source address; must be one of the host's (or the lookup fails).
    pub(crate) src: IpAddr,
    /// Destination address, of the same family as `src`.
    pub(crate) dst: IpAddr,
    /// UDP source port (host order). Part of the lookup so the kernel's
    /// multipath routing can hash on it.
    pub(crate) src_port: u16,
    /// UDP destination port (host order).
    pub(crate) dst_port: u16,
}

/// A reference to an output route.
///
/// # Invariants
///
/// Holds one reference on a valid `dst_entry` whose `error` is 0, for a
/// flow of family `v6`.
pub(crate) struct Route {
    dst: NonNull<bindings::dst_entry>,
    v6: bool,
}

// SAFETY: dst references may be taken and dropped from any context.
unsafe impl Send for Route {}
// SAFETY: `&Route` only reads immutable fields of the entry.
unsafe impl Sync for Route {}

impl Route {
    /// Looks up the route for `flow` in `net`, leaving through the device
    /// with index `oif`, or wherever the routing table says if `oif` is 0
    /// (multipath routes then hash on the flow, source port included).
    /// Fails with `EINVAL` (mixed families) or the routing error (e.g.
    /// `ENETUNREACH`, `EINVAL` for a source address not on the host).
    /// Does not sleep.
    pub(crate) fn output(net: &Net, oif: i32, flow: &UdpFlow) -> Result<Self> {
        let net = net.as_raw();
        match (flow.src, flow.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let mut fl = bindings::flowi4::default();
                fl.__fl_common.flowic_oif = oif;
                fl.__fl_common.flowic_proto = bindings::IPPROTO_UDP as u8;
                fl.saddr = u32::from_ne_bytes(s);
                fl.daddr = u32::from_ne_bytes(d);
                fl.uli.ports = bindings::flowi_uli__bindgen_ty_1 {
                    sport: flow.src_port.to_be(),
                    dport: flow.dst_port.to_be(),
                };
                // SAFETY: `net` is live (the device is); `fl` is valid for
                // the call; a NULL socket is allowed.
                let rt = from_err_ptr(unsafe {
                    bindings::ip_route_output_flow(net, &mut fl, core::ptr::null())
                })?;
                const { assert!(core::mem::offset_of!(bindings::rtable, dst) == 0) };
                let dst = NonNull::new(rt.cast::<bindings::dst_entry>()).ok_or(ENETUNREACH)?;
                // INVARIANT: a held route (IPv4 lookups report errors in the
                // return value, never in `dst->error`).
                Ok(Self { dst, v6: false })
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                let mut fl = bindings::flowi6::default();
                fl.__fl_common.flowic_oif = oif;
                fl.__fl_common.flowic_proto = bindings::IPPROTO_UDP as u8;
                fl.saddr.in6_u.u6_addr8 = s;
                fl.daddr.in6_u.u6_addr8 = d;
                fl.uli.ports = bindings::flowi_uli__bindgen_ty_1 {
                    sport: flow.src_port.to_be(),
                    dport: flow.dst_port.to_be(),
                };
                // SAFETY: as above; no socket and no final destination.
                let dst = from_err_ptr(unsafe {
                    bindings::ip6_dst_lookup_flow(
                        net,
                        core::ptr::null(),
                        &mut fl,
                        core::ptr::null(),
                    )
                })?;
                let dst = NonNull::new(dst).ok_or(ENETUNREACH)?;
                // SAFETY: a held, valid dst_entry.
                let err = unsafe { (*dst.as_ptr()).error };
                if err != 0 {
                    // SAFETY: drops the reference the lookup returned.
                    unsafe { bindings::dst_release(dst.as_ptr()) };
                    return Err(Error::from_errno(i32::from(err)));
                }
                // INVARIANT: a held route without error.
                Ok(Self { dst, v6: true })
            }
            _ => Err(EINVAL),
        }
    }

    /// Whether the route is for IPv6.
    pub(crate) fn is_v6(&self) -> bool {
        self.v6
    }

    /// The device the route leaves through.
    pub(crate) fn device(&self) -> &NetDevice {
        // SAFETY: a held route keeps its device from being freed (it is
        // re-pointed to a blackhole device before the device goes).
        unsafe { NetDevice::from_raw(bindings::sroce_dst_dev(self.dst.as_ptr())) }
    }

    /// Gives the reference to the caller (to attach it to an skb).
    pub(super) fn into_raw(self) -> *mut bindings::dst_entry {
        let p = self.dst.as_ptr();
        core::mem::forget(self);
        p
    }
}

impl Drop for Route {
    fn drop(&mut self) {
        // SAFETY: releases the reference we hold (type invariant).
        unsafe { bindings::dst_release(self.dst.as_ptr()) };
    }
}
