// SPDX-License-Identifier: GPL-2.0

//! Holding a UDP port so that no other socket of the namespace can bind
//! it: a kernel UDP socket bound to the wildcard address. IPv6 sockets are
//! dual-stack (`IPV6_V6ONLY` off), so one socket holds the port for IPv4
//! and IPv6; without IPv6, an IPv4 socket holds it for IPv4.
//!
//! Nothing is meant to arrive on such a port (RoCEv2 receivers listen on
//! 4791); a stray datagram waits in the small socket queue until release.

use super::{bindings, netns::Net};
use core::ptr::NonNull;
use kernel::prelude::*;

/// A reserved UDP port, released on drop.
///
/// # Invariants
///
/// `sock` is a live kernel UDP socket bound to `port`, owned by this value.
pub(crate) struct ReservedPort {
    sock: NonNull<bindings::socket>,
    port: u16,
}

// SAFETY: the socket is only released, from any process context.
unsafe impl Send for ReservedPort {}
// SAFETY: `&ReservedPort` only reads `port`.
unsafe impl Sync for ReservedPort {}

impl ReservedPort {
    /// Binds `port` in `net`. Fails with `EADDRINUSE` if any socket holds
    /// it (for IPv4 or IPv6). Process context only.
    pub(crate) fn new(net: &Net, port: u16) -> Result<Self> {
        match Self::bind(net, port, true) {
            Err(e) if e == EAFNOSUPPORT => Self::bind(net, port, false),
            r => r,
        }
    }

    fn bind(net: &Net, port: u16, v6: bool) -> Result<Self> {
        let mut cfg = bindings::udp_port_cfg {
            local_udp_port: port.to_be(),
            ..Default::default()
        };
        let mut sock: *mut bindings::socket = core::ptr::null_mut();
        // SAFETY: `net` is live; `cfg` and `sock` are valid for the call.
        // The IPv6 wildcard with `ipv6_v6only` off also binds IPv4.
        let ret = unsafe {
            if v6 {
                cfg.family = bindings::AF_INET6 as u8;
                cfg.set_ipv6_v6only(0);
                bindings::udp_sock_create6(net.as_raw(), &mut cfg, &mut sock)
            } else {
                cfg.family = bindings::AF_INET as u8;
                bindings::udp_sock_create4(net.as_raw(), &mut cfg, &mut sock)
            }
        };
        kernel::error::to_result(ret)?;
        let sock = NonNull::new(sock).ok_or(EINVAL)?;
        // INVARIANT: created and bound above, owned from here.
        Ok(Self { sock, port })
    }

    /// The port held.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for ReservedPort {
    fn drop(&mut self) {
        // SAFETY: our live socket (type invariant), released once.
        unsafe { bindings::sock_release(self.sock.as_ptr()) };
    }
}
