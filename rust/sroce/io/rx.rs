// SPDX-License-Identifier: GPL-2.0

//! The receive path: a UDP datagram to port 4791 becomes an [`RxPacket`]
//! for the sroce device of the net device it arrived on.
//!
//! Checks, in order (each failure is a counted drop): an sroce device on
//! the ingress net device, or else on the net device that owns the
//! destination address (a packet that came over another link of a
//! multipath route; else counted per namespace); at least a BTH and
//! an ICRC; an IP header the ICRC can cover (IPv4 without options, IPv6
//! without extension headers); the ICRC, computed over the page fragments
//! in place with the kernel's `crc32_le()`. Runs in softirq context.

use super::{
    counters::Counter,
    packet::{RxPacket, RX_LINEAR_MIN},
    sockets::NsRx,
};
use crate::net::{addr::IpAddr, crc32::KernelCrc32, skb::SkBuff, xmit::UDP_HEADER_LEN};
use crate::rdma::netdev::NetDevice;
use crate::roce::{
    bth::BTH_LEN,
    icrc::{Icrc, IpHeader, ICRC_LEN},
};
use crate::sroce::recv;

/// Receives one datagram (see the module documentation).
pub(super) fn receive(ns: &NsRx, mut skb: SkBuff, ingress: &NetDevice) {
    let dev = ns.device_for_netdev(ingress).or_else(|| {
        // Arrived over another link (multipath): the device of the net
        // device that owns the destination address.
        let dst = skb
            .network_header()
            .and_then(|h| IpHeader::from_bytes(h).ok())
            .and_then(|ip| addresses(&ip))?
            .1;
        let rcu = kernel::sync::rcu::read_lock();
        let owner = NetDevice::by_local_addr(ingress.net(), &dst, &rcu)?;
        ns.device_for_netdev(owner)
    });
    let Some(dev) = dev else {
        ns.count_no_device();
        return;
    };
    let counters = &dev.data().io.counters;
    let followed = skb.unlink_followed_to_same_qp();
    // Read before the checks consume it: a piece that fails them may be
    // the one that pieces held for its QP wait for.
    let dest_qp = skb.bth_dest_qp();
    match check(skb) {
        Ok(mut pkt) => {
            // Replies go back over the link a request came in on (see
            // `OutPort::Ifindex`), but `lo` is no link: a packet to one of
            // the host's own addresses (QP to QP on one device, or between
            // two devices of one namespace) is looped by the IP stack, and
            // a reply pinned to `lo` finds no route (an IPv6 link-local
            // destination is on-link only via its own device). Such
            // replies are routed from the device like any first packet.
            if !ingress.is_loopback() {
                pkt.set_ingress(ingress.ifindex());
            }
            counters.inc(Counter::RcvdPkts);
            counters.add(Counter::RcvdBytes, (pkt.len() + ICRC_LEN) as u64);
            recv::receive(&dev, pkt, followed);
        }
        Err(why) => {
            counters.inc(why);
            if let Some(qpn) = dest_qp {
                recv::release_held(&dev, qpn);
            }
        }
    }
}

/// Source and destination address of an IP header.
fn addresses(ip: &IpHeader<'_>) -> Option<(IpAddr, IpAddr)> {
    match ip {
        IpHeader::V4(h) => Some((
            IpAddr::V4(h.get(12..16)?.try_into().ok()?),
            IpAddr::V4(h.get(16..20)?.try_into().ok()?),
        )),
        IpHeader::V6(h) => Some((
            IpAddr::V6(h.get(8..24)?.try_into().ok()?),
            IpAddr::V6(h.get(24..40)?.try_into().ok()?),
        )),
    }
}

/// Checks a datagram whose data starts at its UDP header; on failure the
/// skb is dropped and the reason returned.
fn check(mut skb: SkBuff) -> Result<RxPacket, Counter> {
    let udp_len = skb.len();
    let Some(len) = udp_len.checked_sub(UDP_HEADER_LEN + ICRC_LEN) else {
        return Err(Counter::RcvdDropShort);
    };
    if len < BTH_LEN {
        return Err(Counter::RcvdDropShort);
    }
    skb.pull_linear(UDP_HEADER_LEN + len.min(RX_LINEAR_MIN))
        .map_err(|_| Counter::RcvdDropNomem)?;

    let (mut icrc, src, dst, src_port) = {
        let ip = skb
            .network_header()
            .and_then(|h| IpHeader::from_bytes(h).ok())
            .ok_or(Counter::RcvdDropMalformed)?;
        let udp = skb
            .data()
            .get(..UDP_HEADER_LEN)
            .ok_or(Counter::RcvdDropMalformed)?;
        let (src, dst) = addresses(&ip).ok_or(Counter::RcvdDropMalformed)?;
        let src_port = u16::from_be_bytes([udp[0], udp[1]]);
        // Fails for IPv4 options and IPv6 extension headers.
        let icrc = Icrc::new(KernelCrc32, ip, udp).map_err(|_| Counter::RcvdDropMalformed)?;
        (icrc, src, dst, src_port)
    };
    let covered_end = UDP_HEADER_LEN + len;
    let fed = skb.for_each_chunk(UDP_HEADER_LEN, covered_end, |chunk| icrc.update(chunk));
    if fed != len {
        return Err(Counter::RcvdDropMalformed);
    }
    let mut trailer = [0u8; ICRC_LEN];
    skb.copy_to(covered_end, &mut trailer)
        .map_err(|_| Counter::RcvdDropMalformed)?;
    match icrc.finish() {
        Ok(v) if v == u32::from_le_bytes(trailer) => {}
        Ok(_) => return Err(Counter::RcvdIcrcErr),
        Err(_) => return Err(Counter::RcvdDropMalformed),
    }
    // INVARIANT (of `RxPacket`): data at the UDP header, `len` transport
    // bytes and the ICRC follow, the first ones made linear above.
    Ok(RxPacket::new(skb, src, dst, src_port, len))
}
