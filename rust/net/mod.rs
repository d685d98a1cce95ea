// SPDX-License-Identifier: GPL-2.0

//! Safe abstractions over the kernel's network stack, for sending and
//! receiving UDP-encapsulated packets (RoCEv2) without a user socket.
//!
//! C headers: `include/linux/skbuff.h`, `include/net/udp_tunnel.h`,
//! `include/net/route.h`, `include/net/ip6_route.h`,
//! `include/net/net_namespace.h`, `include/linux/crc32.h`.
//!
//! Like `rdma/`, this is a layer with raw bindings and `unsafe`; nothing
//! above it has either. It knows nothing of RDMA: it offers owned socket
//! buffers ([`skb::SkBuff`]), kernel UDP tunnel sockets with a receive
//! callback ([`udp_tunnel::TunnelSocket`]), network namespaces and their
//! teardown ([`netns`]), routes ([`route::Route`]), building and sending
//! IP/UDP datagrams whose headers the caller sees before they leave
//! ([`xmit`]), Ethernet frames of an Ethertype of one's own ([`ether`]),
//! and the kernel's CRC-32 ([`crc32::KernelCrc32`]). It shares
//! the bindgen output of `rdma/` (one run over `include/sroce_bindings.h`).

pub(crate) mod addr;
pub(crate) mod crc32;
pub(crate) mod ether;
pub(crate) mod genl;
pub(crate) mod netns;
pub(crate) mod port_reservation;
pub(crate) mod route;
pub(crate) mod skb;
pub(crate) mod udp_tunnel;
pub(crate) mod xmit;

use crate::rdma::bindings;
