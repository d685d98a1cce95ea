// SPDX-License-Identifier: GPL-2.0

//! RoCE v1 (IBA annex A16): the same transport packets as RoCEv2, framed
//! as Ethernet (Ethertype 0x8915) with a GRH instead of IP and UDP, for
//! peers on one Ethernet segment. Only devices created while the module
//! parameter `roce_v1` is set speak it (their GID tables then hold RoCE v1
//! entries beside the v2 ones); a queue pair uses it when its source GID is
//! of that type.
//!
//! - Send ([`send`]): the GRH carries the flow's GIDs, traffic class, flow
//!   label and hop limit; the frame goes to the address vector's MAC (the
//!   core resolved it), or is looped back when that is the device's own.
//! - Receive ([`RoceV1Rx`]): frames of the Ethertype on an sroce device's
//!   net device; checks, in order (each failure a counted drop): a GRH
//!   (IPVer 6, NxtHdr 0x1B) and its payload length, at least a BTH and an
//!   ICRC, a destination GID of the device's RoCE v1 GIDs, the ICRC. Then
//!   the packet goes the way RoCEv2 packets go ([`recv::receive`]).
//!
//! A RoCE v1 queue pair has one session: there is no UDP source port to
//! vary and no route to choose.

use super::{
    counters::Counter,
    packet::{RxPacket, RX_LINEAR_MIN},
    tx::Flow,
};
use crate::net::{
    addr::IpAddr,
    crc32::KernelCrc32,
    ether::{Frame, FrameHandler},
    skb::SkBuff,
};
use crate::rdma::{
    device::{Device, Registry, PORT},
    netdev::NetDevice,
};
use crate::roce::{
    bth::BTH_LEN,
    grh::{Grh, GRH_LEN},
    icrc::{put_icrc, Icrc, ICRC_LEN},
};
use crate::sroce::{device::SroceDevice, recv};
use kernel::{prelude::*, sync::Arc};

/// The RoCE v1 Ethertype (IBTA annex A16; the kernel's `ETH_P_IBOE`).
pub(crate) const ETHERTYPE: u16 = 0x8915;

/// Sends one RoCE v1 packet from `dev` to `dmac`: as [`super::send`], the
/// transport bytes written by `build`, the GRH and ICRC by sroce.
pub(super) fn send(
    dev: &Device<SroceDevice>,
    flow: &Flow,
    dmac: &[u8; 6],
    flow_label: u32,
    max_len: usize,
    build: impl FnOnce(&mut [u8]) -> Result<usize>,
) -> Result<usize> {
    let counters = &dev.data().io.counters;
    let ndev = dev.netdev(PORT).ok_or(ENODEV)?;
    let r = build_and_send(&ndev, flow, dmac, flow_label, max_len, build);
    match r {
        Ok(n) => {
            counters.inc(Counter::SentPkts);
            counters.inc(Counter::SentRoceV1Pkts);
            counters.add(Counter::SentBytes, n as u64);
        }
        // Data of an on-demand region not present: built again later.
        Err(e) if e == crate::rdma::mr_odp::NOT_PRESENT => {}
        Err(_) => counters.inc(Counter::SendErr),
    }
    r
}

fn build_and_send(
    ndev: &NetDevice,
    flow: &Flow,
    dmac: &[u8; 6],
    flow_label: u32,
    max_len: usize,
    build: impl FnOnce(&mut [u8]) -> Result<usize>,
) -> Result<usize> {
    let room = max_len.checked_add(GRH_LEN + ICRC_LEN).ok_or(EMSGSIZE)?;
    let mut frame = Frame::new(ndev, room)?;
    let (grh_bytes, transport) = frame.payload_mut().split_at_mut(GRH_LEN);
    let len = build(&mut transport[..max_len])?;
    if !(BTH_LEN..=max_len).contains(&len) {
        return Err(EINVAL);
    }
    let grh = Grh {
        traffic_class: flow.tclass,
        flow_label,
        payload_len: u16::try_from(len + ICRC_LEN).map_err(|_| EMSGSIZE)?,
        hop_limit: flow.hop_limit,
        sgid: flow.src.gid(),
        dgid: flow.dst.gid(),
    };
    grh.write(grh_bytes).map_err(|_| EINVAL)?;
    let mut icrc = Icrc::new_roce_v1(KernelCrc32, grh_bytes).map_err(|_| EINVAL)?;
    icrc.update(&transport[..len]);
    let value = icrc.finish().map_err(|_| EINVAL)?;
    put_icrc(&mut transport[..len + ICRC_LEN], value).map_err(|_| EINVAL)?;
    frame.truncate(GRH_LEN + len + ICRC_LEN);
    frame.send(ndev, ETHERTYPE, dmac)?;
    Ok(len + ICRC_LEN)
}

/// Receives RoCE v1 frames for the driver's devices (see the module
/// documentation).
pub(crate) struct RoceV1Rx {
    /// Where the device a frame is for is found.
    pub(crate) devices: Arc<Registry<SroceDevice>>,
}

impl FrameHandler for RoceV1Rx {
    fn receive(&self, skb: SkBuff, ingress: &NetDevice) {
        // Not an sroce device's net device (or one without RoCE v1): not
        // ours to count; freed as a drop.
        let Some(dev) = self.devices.device_for_netdev(ingress) else {
            return;
        };
        if !dev.data().roce_v1 {
            return;
        }
        let counters = &dev.data().io.counters;
        match check(&dev, skb) {
            Ok(pkt) => {
                counters.inc(Counter::RcvdPkts);
                counters.inc(Counter::RcvdRoceV1Pkts);
                counters.add(Counter::RcvdBytes, (pkt.len() + ICRC_LEN) as u64);
                recv::receive(&dev, pkt, false);
            }
            Err(why) => counters.inc(why),
        }
    }
}

/// Checks a frame whose data starts at its GRH; on failure the skb is
/// dropped and the reason returned.
fn check(dev: &Device<SroceDevice>, mut skb: SkBuff) -> Result<RxPacket, Counter> {
    if skb.len() < GRH_LEN + BTH_LEN + ICRC_LEN {
        return Err(Counter::RcvdDropShort);
    }
    let linear = (skb.len() - GRH_LEN).min(RX_LINEAR_MIN);
    skb.pull_linear(GRH_LEN + linear)
        .map_err(|_| Counter::RcvdDropNomem)?;
    let grh_bytes = skb
        .data()
        .get(..GRH_LEN)
        .ok_or(Counter::RcvdDropMalformed)?;
    let (grh, _) = Grh::parse(grh_bytes).map_err(|_| Counter::RcvdDropMalformed)?;
    let mut icrc =
        Icrc::new_roce_v1(KernelCrc32, grh_bytes).map_err(|_| Counter::RcvdDropMalformed)?;
    // The payload length says where the packet ends: Ethernet may have
    // padded a short frame.
    let Some(len) = usize::from(grh.payload_len).checked_sub(ICRC_LEN) else {
        return Err(Counter::RcvdDropShort);
    };
    if len < BTH_LEN {
        return Err(Counter::RcvdDropShort);
    }
    if GRH_LEN + len + ICRC_LEN > skb.len() {
        return Err(Counter::RcvdDropMalformed);
    }
    if !dev.has_roce_v1_gid(PORT, &grh.dgid) {
        return Err(Counter::RcvdDropBadDgid);
    }
    let fed = skb.for_each_chunk(GRH_LEN, GRH_LEN + len, |chunk| icrc.update(chunk));
    if fed != len {
        return Err(Counter::RcvdDropMalformed);
    }
    let mut trailer = [0u8; ICRC_LEN];
    skb.copy_to(GRH_LEN + len, &mut trailer)
        .map_err(|_| Counter::RcvdDropMalformed)?;
    match icrc.finish() {
        Ok(v) if v == u32::from_le_bytes(trailer) => {}
        Ok(_) => return Err(Counter::RcvdIcrcErr),
        Err(_) => return Err(Counter::RcvdDropMalformed),
    }
    // The GRH stays before the data pointer as the network header (set
    // there by the stack's receive path), where UD receives copy it from.
    skb.pull(GRH_LEN).map_err(|_| Counter::RcvdDropNomem)?;
    let src = IpAddr::from_gid(&grh.sgid);
    let dst = IpAddr::from_gid(&grh.dgid);
    // INVARIANT (of `RxPacket`): data at the BTH, `len` transport bytes
    // and the ICRC follow, the first ones made linear above.
    Ok(RxPacket::new_roce_v1(skb, src, dst, len))
}
