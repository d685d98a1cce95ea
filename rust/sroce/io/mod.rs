// SPDX-License-Identifier: GPL-2.0

//! RoCEv2 packet I/O: UDP port 4791 in and out, ICRC checked and added,
//! counted per device. No verbs semantics: what a packet means is the
//! transport engines' business ([`super::recv`] for now).
//!
//! - Receive: one kernel UDP socket per address family per network
//!   namespace that has sroce devices ([`sockets`]); each datagram is
//!   matched to the sroce device of the net device it arrived on, checked
//!   ([`rx`]) and handed over as an [`RxPacket`].
//! - Send: [`send`] builds one packet along a [`Flow`] whose UDP source
//!   port the caller picks per packet (ECMP entropy; sessions); a
//!   [`Burst`] gathers a run of equal packets into one datagram that UDP
//!   segmentation cuts apart.
//! - RoCE v1 ([`roce_v1`]): the same packets in Ethernet frames with a GRH,
//!   on devices created with the module parameter `roce_v1`.
//!
//! Everything here is safe code over `crate::net` and `crate::rdma`.

pub(crate) mod burst;
pub(crate) mod counters;
pub(crate) mod packet;
pub(crate) mod roce_v1;
pub(crate) mod rx;
pub(crate) mod sockets;
pub(crate) mod tx;

pub(crate) use burst::Burst;
pub(crate) use packet::RxPacket;
pub(crate) use tx::{out_ifindex, send, Encap, Flow, OutPort};

/// The RoCEv2 UDP destination port (IANA).
pub(crate) const ROCE_V2_UDP_PORT: u16 = 4791;
