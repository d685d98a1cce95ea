// SPDX-License-Identifier: GPL-2.0

//! A received RoCE packet (v2, or v1), checked, as the transport engines
//! see it.

use crate::net::{addr::IpAddr, skb::SkBuff, xmit::UDP_HEADER_LEN};
use kernel::prelude::*;

/// How many transport bytes (from the BTH) a received packet has in its
/// linear part at least, when it is that long: enough for the BTH and the
/// largest set of extension headers (XRC + atomic: 12 + 4 + 28).
pub(crate) const RX_LINEAR_MIN: usize = 64;

/// A received packet whose ICRC is valid.
///
/// The transport bytes are the UDP payload (RoCEv2) or what follows the
/// GRH (RoCE v1), without the ICRC: BTH, extension headers, payload and
/// pad. Dropping the packet frees it as a
/// drop; [`RxPacket::consume`] when it was used; [`RxPacket::into_skb`] to
/// keep the buffer (e.g. queued for a QP).
///
/// # Invariants
///
/// `skb`'s data starts `at` bytes before the transport bytes (at the UDP
/// header for RoCEv2, at the BTH for RoCE v1), which are followed by the
/// 4-byte ICRC; the first `min(len, RX_LINEAR_MIN)` transport bytes are
/// linear. The network header is the IP header, or the GRH.
pub(crate) struct RxPacket {
    skb: SkBuff,
    src: IpAddr,
    dst: IpAddr,
    src_port: u16,
    ingress: i32,
    len: usize,
    at: usize,
    roce_v1: bool,
}

impl RxPacket {
    /// Wraps a checked RoCEv2 skb, data at the UDP header (see the type
    /// invariants).
    pub(super) fn new(skb: SkBuff, src: IpAddr, dst: IpAddr, src_port: u16, len: usize) -> Self {
        Self {
            skb,
            src,
            dst,
            src_port,
            ingress: 0,
            len,
            at: UDP_HEADER_LEN,
            roce_v1: false,
        }
    }

    /// Wraps a checked RoCE v1 skb, data at the BTH; `src` and `dst` are
    /// the addresses of the GRH's GIDs.
    pub(super) fn new_roce_v1(skb: SkBuff, src: IpAddr, dst: IpAddr, len: usize) -> Self {
        Self {
            skb,
            src,
            dst,
            src_port: 0,
            ingress: 0,
            len,
            at: 0,
            roce_v1: true,
        }
    }

    /// Whether the packet came as RoCE v1 (Ethernet and GRH) rather than
    /// RoCEv2 (IP and UDP).
    pub(crate) fn is_roce_v1(&self) -> bool {
        self.roce_v1
    }

    /// Records the index of the net device the packet arrived on.
    pub(super) fn set_ingress(&mut self, ifindex: i32) {
        self.ingress = ifindex;
    }

    /// The index of the net device the packet arrived on; 0 if it was
    /// looped back by the host's IP stack.
    pub(crate) fn ingress(&self) -> i32 {
        self.ingress
    }

    /// The sender's IP address (RoCE v1: its GID's).
    pub(crate) fn src(&self) -> IpAddr {
        self.src
    }

    /// The IP address it was sent to (one of ours).
    pub(crate) fn dst(&self) -> IpAddr {
        self.dst
    }

    /// The packet's IP header (IPv4 without options, or IPv6), or its GRH
    /// (RoCE v1).
    pub(crate) fn ip_header(&self) -> Option<&[u8]> {
        self.skb.network_header()
    }

    /// The UDP source port the sender chose (0 for RoCE v1).
    pub(crate) fn src_port(&self) -> u16 {
        self.src_port
    }

    /// Length of the transport bytes (BTH to pad; ICRC excluded).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no transport bytes (never, once checked).
    #[expect(
        dead_code,
        reason = "for sessions (per-flow receive) and zero-copy receive"
    )]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The transport bytes that are linear: at least the first
    /// `min(len, RX_LINEAR_MIN)`, possibly all of them.
    pub(crate) fn head(&self) -> &[u8] {
        let data = self.skb.data();
        let end = data.len().min(self.at + self.len);
        data.get(self.at..end).unwrap_or(&[])
    }

    /// Copies transport bytes from `offset` into `buf` (from the linear
    /// part or page fragments). `EINVAL` if the range passes the end.
    pub(crate) fn copy_to(&self, offset: usize, buf: &mut [u8]) -> Result {
        let end = offset.checked_add(buf.len()).ok_or(EINVAL)?;
        if end > self.len {
            return Err(EINVAL);
        }
        self.skb.copy_to(self.at + offset, buf)
    }

    /// Frees the packet as consumed (it was used, not dropped).
    pub(crate) fn consume(self) {
        self.skb.consume();
    }

    /// The buffer itself, data where the type invariants say, for keeping.
    #[expect(
        dead_code,
        reason = "for sessions (per-flow receive) and zero-copy receive"
    )]
    pub(crate) fn into_skb(self) -> SkBuff {
        self.skb
    }
}
