// SPDX-License-Identifier: GPL-2.0

//! Kernel UDP sockets whose datagrams go to a callback instead of a queue
//! (`udp_sock_create4/6` + `setup_udp_tunnel_sock`), as VXLAN, Geneve and
//! rxe use.

use super::{bindings, netns::Net, skb::SkBuff};
use crate::rdma::netdev::NetDevice;
use core::{marker::PhantomData, ptr::NonNull};
use kernel::{prelude::*, sync::Arc};

/// Receives the datagrams of a [`TunnelSocket`].
pub(crate) trait EncapHandler: Send + Sync + 'static {
    /// One datagram, already checksum-verified by UDP, with the data
    /// pointer at its UDP header and the network header set. `ingress` is
    /// the device it arrived on, valid for this call only.
    ///
    /// Runs in softirq context under RCU: must not sleep.
    fn receive(&self, skb: SkBuff, ingress: &NetDevice);
}

/// Address family of a tunnel socket.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Family {
    /// IPv4 (`AF_INET`).
    V4,
    /// IPv6 only (`AF_INET6` with `IPV6_V6ONLY`).
    V6,
}

/// A bound kernel UDP socket delivering to an [`EncapHandler`]; released
/// on drop.
///
/// # Invariants
///
/// `sk` is the sock of a live kernel socket set up as a UDP tunnel whose
/// `sk_user_data` is `handler`, a pointer from `Arc::into_raw`.
pub(crate) struct TunnelSocket<H: EncapHandler> {
    sk: NonNull<bindings::sock>,
    handler: *const H,
    _handler: PhantomData<Arc<H>>,
}

// SAFETY: the socket is only released (from any process context), and the
// handler is `Send + Sync`.
unsafe impl<H: EncapHandler> Send for TunnelSocket<H> {}
// SAFETY: no method takes `&self`.
unsafe impl<H: EncapHandler> Sync for TunnelSocket<H> {}

impl<H: EncapHandler> TunnelSocket<H> {
    /// Binds a UDP socket to `port` on every address of `family` in `net`
    /// and routes what it receives to `handler`. Fails with `EADDRINUSE`
    /// if another socket holds the port, `EAFNOSUPPORT` if the family is
    /// disabled. Process context only.
    pub(crate) fn new(net: &Net, family: Family, port: u16, handler: Arc<H>) -> Result<Self> {
        let mut cfg = bindings::udp_port_cfg {
            local_udp_port: port.to_be(),
            ..Default::default()
        };
        let mut sock: *mut bindings::socket = core::ptr::null_mut();
        // SAFETY: `net` is live; `cfg` and `sock` are valid for the call.
        let ret = unsafe {
            match family {
                Family::V4 => {
                    cfg.family = bindings::AF_INET as u8;
                    bindings::udp_sock_create4(net.as_raw(), &mut cfg, &mut sock)
                }
                Family::V6 => {
                    cfg.family = bindings::AF_INET6 as u8;
                    cfg.set_ipv6_v6only(1);
                    // RoCEv2 senders (rxe, and sroce) may leave the UDP
                    // checksum zero over IPv6 too: accept that.
                    cfg.set_use_udp6_rx_checksums(0);
                    bindings::udp_sock_create6(net.as_raw(), &mut cfg, &mut sock)
                }
            }
        };
        kernel::error::to_result(ret)?;
        // SAFETY: on success `sock` is a live socket with its sock set.
        let sk = unsafe { (*sock).sk };
        let Some(sk) = NonNull::new(sk) else {
            // SAFETY: the socket we just created, released once.
            unsafe { bindings::sock_release(sock) };
            return Err(EINVAL);
        };
        let handler = Arc::into_raw(handler);
        let mut tcfg = bindings::udp_tunnel_sock_cfg {
            sk_user_data: handler.cast_mut().cast(),
            encap_type: 1,
            encap_rcv: Some(Self::encap_rcv),
            ..Default::default()
        };
        // SAFETY: `sk` is a fresh, bound UDP socket in `net`; from here on
        // the stack may call `encap_rcv` with it.
        unsafe { bindings::setup_udp_tunnel_sock(net.as_raw(), sk.as_ptr(), &mut tcfg) };
        // INVARIANT: set up above with `handler` as user data.
        Ok(Self {
            sk,
            handler,
            _handler: PhantomData,
        })
    }

    /// # Safety
    ///
    /// Called by UDP in softirq context under RCU with one of our sockets
    /// and an skb whose reference it passes to us.
    unsafe extern "C" fn encap_rcv(
        sk: *mut bindings::sock,
        skb: *mut bindings::sk_buff,
    ) -> kernel::ffi::c_int {
        let Some(skb) = NonNull::new(skb) else {
            return 0;
        };
        // SAFETY: the stack hands us this reference (function contract).
        let skb = unsafe { SkBuff::from_raw(skb) };
        // SAFETY: `sk` is live for the call; the user data is cleared
        // (RCU) before the socket is released, and the handler is freed
        // only after a grace period that follows (see `drop`).
        let handler = unsafe { bindings::sroce_rcu_dereference_sk_user_data(sk) };
        // SAFETY: reads the ingress device of an skb in its receive path.
        let dev = unsafe { bindings::sroce_skb_dev(skb.as_raw()) };
        if handler.is_null() || dev.is_null() {
            drop(skb);
            return 0;
        }
        // SAFETY: a live handler (see above); the ingress device lives at
        // least until this RCU read-side section ends.
        let (handler, dev) = unsafe { (&*handler.cast::<H>(), NetDevice::from_raw(dev)) };
        handler.receive(skb, dev);
        // 0: the datagram was consumed.
        0
    }
}

impl<H: EncapHandler> Drop for TunnelSocket<H> {
    fn drop(&mut self) {
        // SAFETY: our live socket (type invariant). This clears the user
        // data, unhashes the socket and releases it; receive callbacks
        // already running may still use the handler until they return.
        unsafe { bindings::udp_tunnel_sock_release(self.sk.as_ptr()) };
        // Callbacks run under RCU: after a grace period none is left.
        kernel::sync::rcu::synchronize_rcu();
        // SAFETY: the pointer from `Arc::into_raw` in `new`, no longer
        // reachable from the socket or any callback.
        drop(unsafe { Arc::from_raw(self.handler) });
    }
}
