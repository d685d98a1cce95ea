// SPDX-License-Identifier: GPL-2.0

//! Several RoCEv2 packets of one flow in one datagram, cut apart by UDP
//! segmentation.
//!
//! A multi-packet message is a run of packets of one size (a WRITE's or
//! SEND's middle packets, a READ's middle responses) to one destination.
//! Sent one by one, each makes its own trip through the IP layer, the
//! qdisc, the link and the receiver's IP and UDP layers. A [`Burst`]
//! writes such a run back to back into one datagram marked for UDP
//! segmentation instead: it travels as one skb as far as it can and is cut
//! into ordinary RoCEv2 datagrams where it must be (by the stack for a
//! link that cannot carry it, by a NIC with UDP segmentation offload, at
//! the latest by the receiving host's UDP layer before the RoCE receiver
//! sees it), so every receiver, rxe or hardware, gets plain RoCEv2.
//!
//! Each packet's ICRC covers lengths and the IPv4 ID of the datagram it
//! ends up in, so it is computed over the headers its segment will carry
//! (`roce::uso::SegmentHeaders`) when the burst is sent. For IPv4 that
//! assumes the segmenter gives segment `i` the datagram's ID plus `i`:
//! Linux's software segmentation does, and NICs' segmentation offload
//! increments the ID as for TCP, but the kernel's documentation of UDP
//! segmentation does not promise it. A NIC that did otherwise would make
//! the peer drop every segment after the first for its ICRC (counted
//! there); the module parameter `udp_segmentation=0` then sends every
//! packet alone. A packet that cannot join (another flow, longer than the
//! run's size, after a shorter last one, no room) sends the burst first;
//! a lone packet is sent as before, and RoCE v1 frames always are.

use super::{
    counters::Counter,
    tx::{self, Flow},
};
use crate::net::{
    crc32::KernelCrc32,
    route::RouteCache,
    xmit::{Datagram, IpParams},
};
use crate::rdma::device::Device;
use crate::roce::{
    bth::BTH_LEN,
    icrc::{put_icrc, Icrc, IpHeader, ICRC_LEN},
    uso::SegmentHeaders,
};
use crate::sroce::device::SroceDevice;
use kernel::prelude::*;

/// Payload bytes of one burst at most: within one order-3 block of pages
/// (32 KiB, the largest the page allocator keeps per-CPU lists for), where
/// the payload goes so that the pieces share it when the datagram is cut;
/// or, when no such block is free, with the skb's headroom and shared
/// info within a 32 KiB linear buffer.
const BURST_BYTES: usize = 31 * 1024;

/// Packets of one burst at most.
const BURST_PACKETS: usize = 64;

/// Packets a new burst is expected to hold at least. Every piece of a
/// burst costs the receiving host an skb (and a copy of its payload, when
/// it was not in pages) when its UDP layer cuts it out, where an skb sent
/// alone is taken as it is: two or three pieces saved the sender less than
/// that cost (4 KiB READs and WRITEs at MTU 1024 measured 0.82-0.99x the
/// bandwidth with bursts of 2-3, before bursts were paged).
const BURST_MIN_PACKETS: usize = 4;

/// Packets gathered for one datagram; sent by [`Burst::flush`] or when
/// dropped.
pub(crate) struct Burst<'a> {
    dev: &'a Device<SroceDevice>,
    open: Option<Open>,
}

/// A burst with at least one packet in it.
struct Open {
    dgram: Datagram,
    flow: Flow,
    /// Transport bytes (ICRC included) of every packet but the last.
    size: usize,
    /// Transport bytes of the last packet: `size`, or less, and then no
    /// packet may follow.
    last: usize,
    /// Packets written.
    count: usize,
    /// Bytes written (the packets back to back).
    used: usize,
}

impl<'a> Burst<'a> {
    /// An empty burst for packets from `dev`.
    pub(crate) fn new(dev: &'a Device<SroceDevice>) -> Self {
        Self { dev, open: None }
    }

    /// Sends a packet of `len` transport bytes (ICRC excluded: BTH to pad)
    /// that `build` writes into a zeroed buffer of that length, along
    /// `flow`: in this burst when it can join it; `more` is how many
    /// packets of the same size are expected to follow on that flow. It
    /// sizes a new burst; with fewer than [`BURST_MIN_PACKETS`] in all the
    /// packet opens none (it is sent at once unless it joins the open
    /// burst).
    ///
    /// Errors as [`tx::send`], counted as it counts them; a burst that
    /// fails when it is sent counts all its packets as send errors.
    pub(crate) fn send(
        &mut self,
        routes: &mut RouteCache,
        flow: &Flow,
        len: usize,
        more: usize,
        build: impl FnOnce(&mut [u8]) -> Result,
    ) -> Result {
        let record = len.checked_add(ICRC_LEN).ok_or(EMSGSIZE)?;
        if len < BTH_LEN {
            return Err(EINVAL);
        }
        if let Some(o) = &self.open {
            let joins = o.flow == *flow
                && o.last == o.size
                && record <= o.size
                && o.count < BURST_PACKETS
                && o.used + record <= BURST_BYTES
                && record <= o.dgram.room();
            if !joins {
                self.flush();
            }
        }
        if self.open.is_none() {
            if more.saturating_add(1) < BURST_MIN_PACKETS
                || flow.encap.is_roce_v1()
                || !crate::module_parameters::udp_segmentation.value()
            {
                return single(self.dev, routes, flow, len, build);
            }
            let room = record
                .saturating_mul(more.saturating_add(1))
                .min(BURST_BYTES);
            match open(self.dev, routes, flow, room.max(record)) {
                Ok(o) => self.open = Some(o),
                // No memory for the larger buffer: this one alone.
                Err(e) if e == ENOMEM => return single(self.dev, routes, flow, len, build),
                Err(e) => return Err(e),
            }
        }
        let Some(o) = self.open.as_mut() else {
            return Err(EINVAL);
        };
        // Its ICRC is appended with the others' when the burst is sent.
        let built = o
            .dgram
            .append(record)
            .and_then(|out| build(&mut out[..len]));
        if let Err(e) = built {
            // Cut off again; an empty burst is dropped. Data of an
            // on-demand region not present is no error: built again later.
            if e != crate::rdma::mr_odp::NOT_PRESENT {
                self.dev.data().io.counters.inc(Counter::SendErr);
            }
            o.dgram.truncate(o.used);
            if o.count == 0 {
                self.open = None;
            }
            return Err(e);
        }
        if o.count == 0 {
            o.size = record;
        }
        o.last = record;
        o.count += 1;
        o.used += record;
        Ok(())
    }

    /// Sends what the burst holds (nothing if empty).
    pub(crate) fn flush(&mut self) {
        let Some(o) = self.open.take().filter(|o| o.count > 0) else {
            return;
        };
        let counters = &self.dev.data().io.counters;
        let (count, used) = (o.count, o.used);
        match seal_and_send(o) {
            Ok(()) => {
                counters.add(Counter::SentPkts, count as u64);
                counters.add(Counter::SentBytes, used as u64);
                if count > 1 {
                    counters.inc(Counter::SentSegmented);
                }
            }
            Err(_) => counters.add(Counter::SendErr, count as u64),
        }
    }
}

impl Drop for Burst<'_> {
    fn drop(&mut self) {
        self.flush();
    }
}

/// One packet in a datagram of its own.
fn single(
    dev: &Device<SroceDevice>,
    routes: &mut RouteCache,
    flow: &Flow,
    len: usize,
    build: impl FnOnce(&mut [u8]) -> Result,
) -> Result {
    tx::send(dev, routes, flow, len, |buf| {
        build(buf.get_mut(..len).ok_or(EINVAL)?)?;
        Ok(len)
    })?;
    Ok(())
}

/// An empty burst along `flow` with room for `room` transport bytes.
fn open(
    dev: &Device<SroceDevice>,
    routes: &mut RouteCache,
    flow: &Flow,
    room: usize,
) -> Result<Open> {
    let (route, udp) = tx::route(dev, routes, flow)?;
    Ok(Open {
        dgram: Datagram::with_paged_room(route, &udp, room)?,
        flow: *flow,
        size: 0,
        last: 0,
        count: 0,
        used: 0,
    })
}

/// Writes the headers and every packet's ICRC (over the headers of the
/// segment it becomes), marks the datagram for segmentation if it holds
/// several packets, and sends it.
fn seal_and_send(o: Open) -> Result {
    let mut sealed = o.dgram.seal(&IpParams {
        tclass: o.flow.tclass,
        hop_limit: o.flow.hop_limit,
    })?;
    let (ip, udp, transport) = sealed.parts_mut();
    let ip = IpHeader::from_bytes(ip).map_err(|_| EINVAL)?;
    let mut at = 0;
    for i in 0..o.count {
        let record = if i + 1 == o.count { o.last } else { o.size };
        let packet = transport.get_mut(at..at + record).ok_or(EINVAL)?;
        at += record;
        let mut icrc = if o.count == 1 {
            Icrc::new(KernelCrc32, ip, udp)
        } else {
            let index = u16::try_from(i).map_err(|_| EINVAL)?;
            let seg = SegmentHeaders::of(ip, udp, index, record).map_err(|_| EINVAL)?;
            Icrc::new(KernelCrc32, seg.ip(), seg.udp())
        }
        .map_err(|_| EINVAL)?;
        icrc.update(&packet[..record - ICRC_LEN]);
        let value = icrc.finish().map_err(|_| EINVAL)?;
        put_icrc(packet, value).map_err(|_| EINVAL)?;
    }
    if o.count > 1 {
        sealed.set_segments(o.size, o.count)?;
    }
    sealed.send()?;
    Ok(())
}
