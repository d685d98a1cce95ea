// SPDX-License-Identifier: GPL-2.0

//! Ethernet frames of an Ethertype of one's own: built and sent out of a
//! net device ([`Frame`]) and received from every net device
//! ([`EthertypeReceiver`], `dev_add_pack`). For protocols without IP (RoCE
//! v1); the frames stay on one Ethernet segment.

use super::{
    bindings,
    skb::{SkBuff, TxBuffer},
};
use crate::rdma::netdev::NetDevice;
use core::ptr::NonNull;
use kernel::{prelude::*, sync::Arc, types::Opaque};

/// Length of the Ethernet header written in front of a frame's payload.
const ETH_HEADER_LEN: usize = 14;

/// A frame being filled: a [`TxBuffer`] with headroom for the link header,
/// its data being the payload (what follows the Ethernet header).
///
/// # Invariants
///
/// `buf`'s data is the payload, with at least the device's link-layer
/// reserved space (and an Ethernet header) of headroom before it.
pub(crate) struct Frame {
    buf: TxBuffer,
}

impl Frame {
    /// A frame for `ndev` with a zeroed payload of `len` bytes. Allocates
    /// atomically (callable from any context): `ENOMEM` if that fails,
    /// `EMSGSIZE` if `len` is absurd.
    pub(crate) fn new(ndev: &NetDevice, len: usize) -> Result<Self> {
        // SAFETY: `ndev` is live for the call.
        let ll = unsafe { bindings::sroce_ll_reserved_space(ndev.as_raw()) } as usize;
        // INVARIANT: that headroom, the payload at data.
        Ok(Self {
            buf: TxBuffer::new(ll.max(ETH_HEADER_LEN), len)?,
        })
    }

    /// The payload, to be written.
    pub(crate) fn payload_mut(&mut self) -> &mut [u8] {
        self.buf.data_mut()
    }

    /// Shortens the payload to `len` bytes (no-op if not shorter).
    pub(crate) fn truncate(&mut self, len: usize) {
        self.buf.truncate(len);
    }

    /// Writes the Ethernet header (`ndev`'s address as the source) and
    /// sends the frame out of `ndev`, or, addressed to `ndev` itself, hands
    /// it to `ndev`'s receive path as if it had arrived there (a NIC
    /// does not hear its own frames). Returns the bytes sent (Ethernet
    /// header on). The frame is gone either way: `ENOBUFS` if it was
    /// dropped (full queue), or the stack's errno.
    pub(crate) fn send(self, ndev: &NetDevice, ethertype: u16, dst: &[u8; 6]) -> Result<usize> {
        let raw = self.buf.into_raw();
        let dev = ndev.as_raw();
        let to_self = ndev.mac().is_some_and(|m| m == *dst);
        // SAFETY: a private skb with the headroom reserved in `new`; `dev`
        // is live for the call. The skb is handed on or freed in each
        // branch and not touched after.
        unsafe {
            bindings::sroce_skb_set_dev(raw, dev);
            bindings::sroce_skb_set_protocol(raw, ethertype.to_be());
            bindings::sroce_skb_reset_network_header(raw);
            let payload_len = (*raw).len;
            if bindings::sroce_dev_hard_header(raw, dev, ethertype, dst.as_ptr(), payload_len) < 0 {
                bindings::sroce_kfree_skb(raw);
                return Err(EINVAL);
            }
            let len = (*raw).len as usize;
            if to_self {
                // Pulls the Ethernet header again and marks the frame as
                // for this host, as a received one would be.
                let proto = bindings::eth_type_trans(raw, dev);
                bindings::sroce_skb_set_protocol(raw, proto);
                if bindings::netif_rx(raw) as u32 == bindings::NET_RX_SUCCESS {
                    Ok(len)
                } else {
                    Err(ENOBUFS)
                }
            } else {
                match bindings::sroce_dev_queue_xmit(raw) {
                    // NET_XMIT_SUCCESS, or NET_XMIT_CN: queued, congestion
                    // noted.
                    0 | 2 => Ok(len),
                    r if r > 0 => Err(ENOBUFS),
                    r => Err(Error::from_errno(r)),
                }
            }
        }
    }
}

/// Receives the frames of one Ethertype (see [`EthertypeReceiver`]).
pub(crate) trait FrameHandler: Send + Sync + 'static {
    /// One frame for this host (unicast to the device, broadcast or
    /// multicast), not shared, data pointer after the Ethernet header,
    /// network header set there. `ingress` is the device it arrived on,
    /// valid for this call only.
    ///
    /// Runs in softirq context under RCU: must not sleep.
    fn receive(&self, skb: SkBuff, ingress: &NetDevice);
}

#[repr(C)]
struct Hook<H: FrameHandler> {
    pt: Opaque<bindings::packet_type>,
    handler: Arc<H>,
}

/// A handler for the frames of one Ethertype arriving on any net device in
/// any namespace; removed on drop (which waits for running handlers, so
/// drop it in process context).
///
/// # Invariants
///
/// `hook.pt` is registered with `dev_add_pack`.
pub(crate) struct EthertypeReceiver<H: FrameHandler> {
    hook: Pin<KBox<Hook<H>>>,
}

// SAFETY: the packet type is only touched by the stack under its own
// locks and RCU; the handler is `Send + Sync`.
unsafe impl<H: FrameHandler> Send for EthertypeReceiver<H> {}
// SAFETY: no method takes `&self`; see `Send`.
unsafe impl<H: FrameHandler> Sync for EthertypeReceiver<H> {}

impl<H: FrameHandler> EthertypeReceiver<H> {
    /// Starts handing frames of `ethertype` to `handler`.
    pub(crate) fn new(ethertype: u16, handler: Arc<H>) -> Result<Self> {
        let pt = bindings::packet_type {
            type_: ethertype.to_be(),
            func: Some(Self::callback),
            ..Default::default()
        };
        let hook = KBox::pin(
            Hook {
                pt: Opaque::new(pt),
                handler,
            },
            GFP_KERNEL,
        )?;
        // SAFETY: `hook` is pinned on the heap and stays registered until
        // `drop` removes it (waiting for running callbacks) before freeing.
        unsafe { bindings::dev_add_pack(hook.pt.get()) };
        Ok(Self { hook })
    }

    /// # Safety
    ///
    /// Called by the stack with our registered packet type and a frame it
    /// hands over.
    unsafe extern "C" fn callback(
        skb: *mut bindings::sk_buff,
        dev: *mut bindings::net_device,
        pt: *mut bindings::packet_type,
        _orig_dev: *mut bindings::net_device,
    ) -> kernel::ffi::c_int {
        // SAFETY: we own one reference to `skb`; if it is shared, this
        // gives us a private clone (or frees it and returns NULL).
        let skb = unsafe { bindings::sroce_skb_share_check(skb) };
        let Some(skb) = NonNull::new(skb) else {
            return bindings::NET_RX_DROP as kernel::ffi::c_int;
        };
        // SAFETY: an unshared skb whose reference we pass on.
        let skb = unsafe { SkBuff::from_raw(skb) };
        if skb.is_for_other_host() {
            return bindings::NET_RX_DROP as kernel::ffi::c_int;
        }
        // SAFETY: `pt` is the first field of a live, pinned `Hook<H>` (it is
        // removed before being freed).
        let hook = unsafe { &*pt.cast::<Hook<H>>() };
        // SAFETY: the device a frame arrived on is live during its receive.
        let ingress = unsafe { NetDevice::from_raw(dev) };
        hook.handler.receive(skb, ingress);
        bindings::NET_RX_SUCCESS as kernel::ffi::c_int
    }
}

impl<H: FrameHandler> Drop for EthertypeReceiver<H> {
    fn drop(&mut self) {
        // SAFETY: registered in `new` (type invariant); waits for callbacks
        // in flight, after which the hook may be freed.
        unsafe { bindings::dev_remove_pack(self.hook.pt.get()) };
    }
}
