// SPDX-License-Identifier: GPL-2.0

//! Building and sending IP/UDP datagrams from the kernel.
//!
//! Unlike `udp_tunnel_xmit_skb()`, which writes the UDP and IP headers and
//! sends in one call, a [`Datagram`] writes the headers first
//! ([`Datagram::seal`]) and lets the caller read them and still change the
//! payload before [`Sealed::send`]: protocols whose trailer covers the IP
//! header (RoCEv2's ICRC) need exactly that. The headers are final when
//! sealed: the stack only fills in the IPv4 header checksum on the way out.
//!
//! IPv4 datagrams carry DF and IP ID 0 (RFC 6864 atomic datagrams, what
//! Linux itself sends for DF traffic without a connected socket); the UDP
//! checksum is 0 (none) for both families, as RoCEv2 senders do. A
//! datagram marked for UDP segmentation ([`Sealed::set_segments`]) has a
//! UDP checksum (segmentation computes one per segment); Linux gives its
//! IPv4 segments the IDs 0, 1, ...

use super::{addr::IpAddr, bindings, route::Route, route::UdpFlow, skb::TxBuffer};
use kernel::prelude::*;

/// Length of the IPv4 header written (no options).
pub(crate) const IPV4_HEADER_LEN: usize = 20;
/// Length of the IPv6 header written (no extension headers).
pub(crate) const IPV6_HEADER_LEN: usize = 40;
/// Length of the UDP header.
pub(crate) const UDP_HEADER_LEN: usize = 8;

/// IP-level parameters of a datagram.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IpParams {
    /// IPv4 TOS / IPv6 traffic class (DSCP and ECN).
    pub(crate) tclass: u8,
    /// IPv4 TTL / IPv6 hop limit.
    pub(crate) hop_limit: u8,
}

/// A datagram being filled: a [`TxBuffer`] with headroom for the link, IP
/// and UDP headers, its data being the payload.
///
/// # Invariants
///
/// `buf`'s data is the payload (in its pages if it is paged, its linear
/// part then empty) with at least the link-layer reserved space of
/// `route`'s device, an IP and a UDP header of headroom before it; `route`
/// is the route for `flow`.
pub(crate) struct Datagram {
    buf: TxBuffer,
    route: Route,
    flow: UdpFlow,
}

impl Datagram {
    /// A datagram for `flow` along `route` with a zeroed payload of `len`
    /// bytes. Allocates the skb atomically (callable from any context);
    /// `ENOMEM` if that fails, `EMSGSIZE` if `len` is absurd.
    pub(crate) fn new(route: Route, flow: &UdpFlow, len: usize) -> Result<Self> {
        let mut d = Self::with_room(route, flow, len)?;
        d.append(len)?;
        Ok(d)
    }

    /// A datagram for `flow` along `route` with room for `room` bytes of
    /// payload and none yet ([`Self::append`] adds them). Allocates like
    /// [`Self::new`].
    pub(crate) fn with_room(route: Route, flow: &UdpFlow, room: usize) -> Result<Self> {
        Self::with_buffer(route, flow, |headroom| {
            TxBuffer::with_capacity(headroom, room)
        })
    }

    /// As [`Self::with_room`], but with the payload in pages (a paged
    /// [`TxBuffer`]), when a block of pages that size is free, so that
    /// segmentation ([`Sealed::set_segments`]) shares it instead of
    /// copying each piece; `EMSGSIZE` for more than 32 KiB (4 KiB pages).
    pub(crate) fn with_paged_room(route: Route, flow: &UdpFlow, room: usize) -> Result<Self> {
        Self::with_buffer(route, flow, |headroom| {
            TxBuffer::with_paged_capacity(headroom, room)
        })
    }

    /// A datagram whose buffer `alloc` makes with the headroom it is given.
    fn with_buffer(
        route: Route,
        flow: &UdpFlow,
        alloc: impl FnOnce(usize) -> Result<TxBuffer>,
    ) -> Result<Self> {
        let ip_len = if route.is_v6() {
            IPV6_HEADER_LEN
        } else {
            IPV4_HEADER_LEN
        };
        // SAFETY: the route's device is live while we hold the route.
        let ll = unsafe { bindings::sroce_ll_reserved_space(route.device().as_raw()) } as usize;
        let buf = alloc(ll + ip_len + UDP_HEADER_LEN)?;
        // INVARIANT: that headroom, the payload at data (or in the page
        // block of a paged buffer, whose linear part is empty).
        Ok(Self {
            buf,
            route,
            flow: *flow,
        })
    }

    /// Adds `len` zeroed bytes to the payload and returns them; `EMSGSIZE`
    /// if there is no room for them.
    pub(crate) fn append(&mut self, len: usize) -> Result<&mut [u8]> {
        self.buf.append(len)
    }

    /// Payload bytes that can still be appended.
    pub(crate) fn room(&self) -> usize {
        self.buf.room()
    }

    /// The payload, to be written.
    pub(crate) fn payload_mut(&mut self) -> &mut [u8] {
        let paged = self.buf.is_paged();
        let (linear, pages) = self.buf.parts_mut();
        if paged {
            pages
        } else {
            linear
        }
    }

    /// Shortens the payload to `len` bytes (no-op if not shorter).
    pub(crate) fn truncate(&mut self, len: usize) {
        self.buf.truncate(len);
    }

    /// Writes the UDP and IP headers in front of the payload.
    pub(crate) fn seal(self, ip: &IpParams) -> Result<Sealed> {
        let payload_len = self.buf.len();
        let udp_len = payload_len + UDP_HEADER_LEN;
        let udp_len16 = u16::try_from(udp_len).map_err(|_| EMSGSIZE)?;
        let raw = self.buf.as_raw();
        // SAFETY: the headroom reserved in `with_room` fits both headers; the
        // pushed bytes are then written in full before anything reads them.
        let hdrs = unsafe {
            let udp = bindings::skb_push(raw, UDP_HEADER_LEN as u32).cast::<u8>();
            bindings::sroce_skb_reset_transport_header(raw);
            let udp = core::slice::from_raw_parts_mut(udp, UDP_HEADER_LEN);
            udp[0..2].copy_from_slice(&self.flow.src_port.to_be_bytes());
            udp[2..4].copy_from_slice(&self.flow.dst_port.to_be_bytes());
            udp[4..6].copy_from_slice(&udp_len16.to_be_bytes());
            udp[6..8].copy_from_slice(&[0, 0]);
            let ip_len = if self.route.is_v6() {
                IPV6_HEADER_LEN
            } else {
                IPV4_HEADER_LEN
            };
            let iph = bindings::skb_push(raw, ip_len as u32).cast::<u8>();
            bindings::sroce_skb_reset_network_header(raw);
            core::slice::from_raw_parts_mut(iph, ip_len)
        };
        match (self.flow.src, self.flow.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let tot = u16::try_from(udp_len + IPV4_HEADER_LEN).map_err(|_| EMSGSIZE)?;
                hdrs[0] = 0x45;
                hdrs[1] = ip.tclass;
                hdrs[2..4].copy_from_slice(&tot.to_be_bytes());
                hdrs[4..6].copy_from_slice(&[0, 0]); // ID: atomic datagram
                hdrs[6..8].copy_from_slice(&(bindings::IP_DF as u16).to_be_bytes());
                hdrs[8] = ip.hop_limit;
                hdrs[9] = bindings::IPPROTO_UDP as u8;
                hdrs[10..12].copy_from_slice(&[0, 0]); // checksum: ip_local_out
                hdrs[12..16].copy_from_slice(&s);
                hdrs[16..20].copy_from_slice(&d);
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                hdrs[0] = 0x60 | (ip.tclass >> 4);
                hdrs[1] = ip.tclass << 4; // flow label 0
                hdrs[2..4].copy_from_slice(&[0, 0]);
                hdrs[4..6].copy_from_slice(&udp_len16.to_be_bytes());
                hdrs[6] = bindings::IPPROTO_UDP as u8;
                hdrs[7] = ip.hop_limit;
                hdrs[8..24].copy_from_slice(&s);
                hdrs[24..40].copy_from_slice(&d);
            }
            _ => return Err(EINVAL),
        }
        let proto = if self.route.is_v6() {
            bindings::ETH_P_IPV6
        } else {
            bindings::ETH_P_IP
        };
        // SAFETY: a private skb; sets its protocol and output device.
        unsafe {
            bindings::sroce_skb_set_protocol(raw, (proto as u16).to_be());
            bindings::sroce_skb_set_dev(raw, self.route.device().as_raw());
        }
        // INVARIANT: data points at the IP header, then UDP, then payload.
        Ok(Sealed { d: self })
    }
}

/// A datagram with its headers written, ready to send.
///
/// # Invariants
///
/// As [`Datagram`], but `data` points at the IP header, followed by the
/// UDP header and the payload (in a paged buffer: the linear part ends
/// with the UDP header, the payload is in the pages), all initialised;
/// the skb's network and transport headers are set to them and its
/// protocol to their family.
pub(crate) struct Sealed {
    d: Datagram,
}

impl Sealed {
    fn ip_len(&self) -> usize {
        if self.d.route.is_v6() {
            IPV6_HEADER_LEN
        } else {
            IPV4_HEADER_LEN
        }
    }

    /// The IP header, the UDP header and the (writable) payload.
    pub(crate) fn parts_mut(&mut self) -> (&[u8], &[u8], &mut [u8]) {
        let ip_len = self.ip_len();
        let paged = self.d.buf.is_paged();
        let (linear, pages) = self.d.buf.parts_mut();
        let (ip, rest) = linear.split_at_mut(ip_len);
        let (udp, rest) = rest.split_at_mut(UDP_HEADER_LEN);
        (ip, udp, if paged { pages } else { rest })
    }

    /// Marks the datagram for UDP segmentation: its payload is `segs`
    /// pieces of `size` bytes each (the last may be shorter), each to leave
    /// as a datagram of its own with these headers copied, the lengths
    /// (and the IPv4 ID, advanced by one per piece) made its own and its
    /// own UDP checksum, cut by the stack, the NIC or the receiving host's
    /// UDP layer. `EINVAL` unless the payload is that.
    pub(crate) fn set_segments(&mut self, size: usize, segs: usize) -> Result {
        let payload = self.d.buf.len() - self.ip_len() - UDP_HEADER_LEN;
        let below = segs.checked_sub(1).and_then(|n| size.checked_mul(n));
        let (Some(below), Some(all)) = (below, size.checked_mul(segs)) else {
            return Err(EINVAL);
        };
        let fits = size > 0 && segs > 1 && payload > below && payload <= all;
        if !fits {
            return Err(EINVAL);
        }
        // SAFETY: a private skb with its IP and UDP headers written and its
        // network and transport headers set (type invariant); the helper
        // sets its segmentation fields and the UDP pseudo-header checksum.
        unsafe {
            bindings::sroce_skb_set_udp_segments(self.d.buf.as_raw(), size as u32, segs as u32)
        };
        Ok(())
    }

    /// Hands the datagram to the IP layer (netfilter `LOCAL_OUT`, then the
    /// route's output). Returns the bytes handed over (IP header on). The
    /// skb is gone either way; an error means it was dropped (`ENOBUFS`
    /// for a full queue, or the stack's errno).
    pub(crate) fn send(self) -> Result<usize> {
        let Datagram { buf, route, .. } = self.d;
        let len = buf.len();
        let v6 = route.is_v6();
        let dev = route.device().as_raw();
        // SAFETY: `dev` is live while the route is held.
        let net = unsafe { bindings::sroce_dev_net(dev) };
        let raw = buf.into_raw();
        // SAFETY: attaches our route reference to the skb (which now owns
        // it, keeping `dev` and `net` alive), then gives the skb, with its
        // headers in place, to the IP layer, which consumes it.
        let ret = unsafe {
            bindings::sroce_skb_dst_set(raw, route.into_raw());
            if v6 {
                bindings::ip6_local_out(net, core::ptr::null_mut(), raw)
            } else {
                bindings::ip_local_out(net, core::ptr::null_mut(), raw)
            }
        };
        match ret {
            // NET_XMIT_SUCCESS, or NET_XMIT_CN: queued, congestion noted.
            0 | 2 => Ok(len),
            r if r > 0 => Err(ENOBUFS),
            r => Err(Error::from_errno(r)),
        }
    }
}
