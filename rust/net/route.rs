// SPDX-License-Identifier: GPL-2.0

//! Output routes (`struct dst_entry`) for locally generated datagrams.

use super::{addr::IpAddr, bindings, netns::Net};
use crate::rdma::netdev::NetDevice;
use core::ptr::NonNull;
use kernel::{error::from_err_ptr, prelude::*};

/// What a route is looked up for: a UDP flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

    /// The cookie `dst_check()` needs to validate this route later (0 for
    /// IPv4, whose routes are invalidated by a generation count).
    fn cookie(&self) -> u32 {
        if self.v6 {
            // SAFETY: a held IPv6 route is an `rt6_info`.
            unsafe { bindings::sroce_dst_cookie6(self.dst.as_ptr()) }
        } else {
            0
        }
    }

    /// Whether the route still holds: no routing change, no address or
    /// device gone since the lookup (`dst_check()`).
    fn is_current(&self, cookie: u32) -> bool {
        // SAFETY: a held route; `dst_check` only reads it (and returns it
        // or NULL, the reference staying ours either way).
        !unsafe { bindings::sroce_dst_check(self.dst.as_ptr(), cookie) }.is_null()
    }

    /// Gives the reference to the caller (to attach it to an skb).
    pub(super) fn into_raw(self) -> *mut bindings::dst_entry {
        let p = self.dst.as_ptr();
        core::mem::forget(self);
        p
    }
}

impl Clone for Route {
    fn clone(&self) -> Self {
        // SAFETY: takes another reference on a held route.
        unsafe { bindings::sroce_dst_clone(self.dst.as_ptr()) };
        // INVARIANT: one more reference, on the same valid route.
        Self {
            dst: self.dst,
            v6: self.v6,
        }
    }
}

/// Output routes of the last few flows looked up, kept while they hold, as
/// a connected socket keeps its route: the next packet of a flow skips the
/// lookup. A flow is its addresses, ports, namespace and output device;
/// a routing change, or an address or device going away, invalidates a
/// kept route (`dst_check()`), and the next packet looks it up again.
pub(crate) struct RouteCache {
    slots: [Option<CachedRoute>; ROUTE_CACHE_SLOTS],
    /// The slot the next new flow replaces (round robin).
    next: usize,
}

/// Flows a [`RouteCache`] keeps: a QP's requests and its replies, with a
/// few sessions; more flows than this take turns.
const ROUTE_CACHE_SLOTS: usize = 4;

struct CachedRoute {
    /// The namespace the lookup was made in (compared, never followed).
    net: usize,
    oif: i32,
    flow: UdpFlow,
    route: Route,
    cookie: u32,
}

impl RouteCache {
    /// An empty cache.
    pub(crate) const fn new() -> Self {
        Self {
            slots: [const { None }; ROUTE_CACHE_SLOTS],
            next: 0,
        }
    }

    /// The route for `flow` in `net` through device `oif` (see
    /// [`Route::output`]): the kept one if it still holds, else a new
    /// lookup, kept for next time.
    pub(crate) fn output(&mut self, net: &Net, oif: i32, flow: &UdpFlow) -> Result<Route> {
        let net_id = net.as_raw() as usize;
        let hit = self.slots.iter_mut().find(|s| {
            s.as_ref()
                .is_some_and(|c| c.net == net_id && c.oif == oif && c.flow == *flow)
        });
        if let Some(slot) = hit {
            if let Some(c) = slot.as_ref().filter(|c| c.route.is_current(c.cookie)) {
                return Ok(c.route.clone());
            }
            *slot = None;
        }
        let route = Route::output(net, oif, flow)?;
        let cookie = route.cookie();
        let i = self.next;
        self.next = (i + 1) % ROUTE_CACHE_SLOTS;
        self.slots[i] = Some(CachedRoute {
            net: net_id,
            oif,
            flow: *flow,
            route: route.clone(),
            cookie,
        });
        Ok(route)
    }
}

impl Drop for Route {
    fn drop(&mut self) {
        // SAFETY: releases the reference we hold (type invariant).
        unsafe { bindings::dst_release(self.dst.as_ptr()) };
    }
}
