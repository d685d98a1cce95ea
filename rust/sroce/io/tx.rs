// SPDX-License-Identifier: GPL-2.0

//! The send path: one RoCEv2 packet out of a device's net device (RoCE v1
//! frames: [`super::roce_v1`]).
//!
//! The ICRC covers the IP and UDP headers (their invariant fields: for
//! IPv4 that includes the total length and the IP ID), so it can only be
//! computed once those are final. `udp_tunnel_xmit_skb()` writes them and
//! transmits in one call, so sroce writes them itself, as rxe does: the
//! packet is routed, its UDP and IP headers are written in front of the
//! transport bytes, the ICRC is computed over the masked headers and the
//! transport bytes and appended, and the finished datagram goes to
//! `ip_local_out()`/`ip6_local_out()`, which only fill in the IPv4 header
//! checksum (masked by the ICRC) before netfilter and the neighbour layer.
//!
//! Per packet: one skb allocation (the only allocation), one pass of the
//! CRC over the bytes the caller wrote, no copies; the route is looked up
//! once per flow and kept while it holds (see [`RouteCache`]).

use super::{counters::Counter, ROCE_V2_UDP_PORT};
use crate::net::{
    addr::IpAddr,
    crc32::KernelCrc32,
    route::{Route, RouteCache, UdpFlow},
    xmit::{Datagram, IpParams},
};
use crate::rdma::{
    av::AddressVector,
    device::{Device, PORT},
};
use crate::roce::{
    bth::BTH_LEN,
    icrc::{put_icrc, Icrc, IpHeader, ICRC_LEN},
};
use crate::sroce::device::SroceDevice;
use kernel::prelude::*;

/// Where a packet goes and how: the IP/UDP fields a transport engine
/// chooses per packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Flow {
    /// Source address: one of the net device's (the GID's address).
    pub(crate) src: IpAddr,
    /// Destination address, same family as `src`.
    pub(crate) dst: IpAddr,
    /// UDP source port: RoCEv2's flow entropy. Chosen per packet (per
    /// message, per session); conventionally in 0xC000..=0xFFFF.
    pub(crate) src_port: u16,
    /// IPv4 TOS / IPv6 traffic class (GRH traffic class).
    pub(crate) tclass: u8,
    /// IPv4 TTL / IPv6 hop limit (GRH hop limit).
    pub(crate) hop_limit: u8,
    /// Which net device the packet may leave through.
    pub(crate) out: OutPort,
    /// How the packet is framed.
    pub(crate) encap: Encap,
}

/// How a packet is framed on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Encap {
    /// RoCEv2: IP and UDP (port 4791), routed.
    RoceV2,
    /// RoCE v1: an Ethernet frame (Ethertype 0x8915) with a GRH, to `dmac`
    /// on the device's own segment. `src` and `dst` are then the GRH's
    /// GIDs (as addresses), `out` and `src_port` mean nothing.
    RoceV1 {
        /// Destination MAC address (resolved by the core).
        dmac: [u8; 6],
        /// GRH flow label.
        flow_label: u32,
    },
}

impl Encap {
    /// The framing an address vector asks for (its source GID's type).
    pub(crate) fn for_av(av: &AddressVector) -> Self {
        if av.roce_v1 {
            Encap::RoceV1 {
                dmac: av.dmac,
                // The core passes on what the process set: 20 bits count.
                flow_label: av.flow_label & crate::roce::grh::FLOW_LABEL_MAX,
            }
        } else {
            Encap::RoceV2
        }
    }

    /// Whether this is RoCE v1.
    pub(crate) fn is_roce_v1(&self) -> bool {
        matches!(self, Encap::RoceV1 { .. })
    }
}

/// Which net device a packet may leave through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OutPort {
    /// The RDMA device's own net device, as every RoCEv2 stack does.
    Device,
    /// The net device with this index (replies: the one the request came
    /// in on, so they return over the path that delivered it).
    Ifindex(i32),
    /// Wherever the host's routing sends the flow: multipath routes hash
    /// on the 5-tuple, so sessions with different source ports may take
    /// different links.
    Routed,
}

/// Sends one RoCEv2 packet from `dev` along `flow`, its route taken from
/// `routes` (looked up and kept there when it has none that holds).
///
/// `build` gets a zeroed buffer of `max_len` bytes for the transport
/// packet without its ICRC (BTH, extension headers, payload, pad) and
/// returns how many it wrote (at least a BTH, at most `max_len`); sroce
/// appends the ICRC. `build` runs in the caller's context and must not
/// sleep if the caller may not.
///
/// Returns the transport bytes sent (ICRC included). Errors: `ENODEV`
/// (the device has no net device any more), the route lookup's error
/// (`ENETUNREACH`, `EHOSTUNREACH`, `EINVAL` for a foreign source address),
/// `ENOMEM`, `EMSGSIZE`, `EINVAL` (bad length from `build`), what `build`
/// returned, or the IP layer's (`ENOBUFS`...). Every failure is counted;
/// nothing is left allocated.
///
/// Context: process context for now. The net device is found with
/// `ib_device_get_netdev()`, whose lock is not softirq-safe; sending from
/// the receive softirq (ACKs) needs the GID-attribute lookup
/// (`rdma_get_gid_attr`, as rxe does) that arrives with address handles.
pub(crate) fn send(
    dev: &Device<SroceDevice>,
    routes: &mut RouteCache,
    flow: &Flow,
    max_len: usize,
    build: impl FnOnce(&mut [u8]) -> Result<usize>,
) -> Result<usize> {
    if let Encap::RoceV1 { dmac, flow_label } = flow.encap {
        return super::roce_v1::send(dev, flow, &dmac, flow_label, max_len, build);
    }
    let counters = &dev.data().io.counters;
    let (route, udp) = route(dev, routes, flow)?;
    let r = build_and_send(route, &udp, flow, max_len, build);
    match r {
        Ok(n) => {
            counters.inc(Counter::SentPkts);
            counters.add(Counter::SentBytes, n as u64);
        }
        // Data of an on-demand region not present: built again later.
        Err(e) if e == crate::rdma::mr_odp::NOT_PRESENT => {}
        Err(_) => counters.inc(Counter::SendErr),
    }
    r
}

/// The route of a RoCEv2 packet along `flow` (from `routes`, or looked up
/// and kept there), and its UDP flow. A missing route is counted.
pub(super) fn route(
    dev: &Device<SroceDevice>,
    routes: &mut RouteCache,
    flow: &Flow,
) -> Result<(Route, UdpFlow)> {
    let ndev = dev.netdev(PORT).ok_or(ENODEV)?;
    let udp = UdpFlow {
        src: flow.src,
        dst: flow.dst,
        src_port: flow.src_port,
        dst_port: ROCE_V2_UDP_PORT,
    };
    let oif = match flow.out {
        OutPort::Device => ndev.ifindex(),
        OutPort::Ifindex(i) => i,
        OutPort::Routed => 0,
    };
    let route = routes
        .output(ndev.net(), oif, &udp)
        .inspect_err(|_| dev.data().io.counters.inc(Counter::SendNoRoute))?;
    Ok((route, udp))
}

/// The index of the net device a packet along `flow` would leave through
/// now (for picking session ports that take different paths).
pub(crate) fn out_ifindex(dev: &Device<SroceDevice>, flow: &Flow) -> Result<i32> {
    let ndev = dev.netdev(PORT).ok_or(ENODEV)?;
    let oif = match flow.out {
        OutPort::Device => ndev.ifindex(),
        OutPort::Ifindex(i) => i,
        OutPort::Routed => 0,
    };
    let udp = UdpFlow {
        src: flow.src,
        dst: flow.dst,
        src_port: flow.src_port,
        dst_port: ROCE_V2_UDP_PORT,
    };
    let route = Route::output(ndev.net(), oif, &udp)?;
    Ok(route.device().ifindex())
}

fn build_and_send(
    route: Route,
    udp: &UdpFlow,
    flow: &Flow,
    max_len: usize,
    build: impl FnOnce(&mut [u8]) -> Result<usize>,
) -> Result<usize> {
    let room = max_len.checked_add(ICRC_LEN).ok_or(EMSGSIZE)?;
    let mut dgram = Datagram::new(route, udp, room)?;
    let len = build(&mut dgram.payload_mut()[..max_len])?;
    if !(BTH_LEN..=max_len).contains(&len) {
        return Err(EINVAL);
    }
    dgram.truncate(len + ICRC_LEN);
    let mut sealed = dgram.seal(&IpParams {
        tclass: flow.tclass,
        hop_limit: flow.hop_limit,
    })?;
    let (ip, udp_hdr, transport) = sealed.parts_mut();
    let ip = IpHeader::from_bytes(ip).map_err(|_| EINVAL)?;
    let mut icrc = Icrc::new(KernelCrc32, ip, udp_hdr).map_err(|_| EINVAL)?;
    icrc.update(&transport[..len]);
    let value = icrc.finish().map_err(|_| EINVAL)?;
    put_icrc(transport, value).map_err(|_| EINVAL)?;
    sealed.send()?;
    Ok(len + ICRC_LEN)
}
