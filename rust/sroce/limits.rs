// SPDX-License-Identifier: GPL-2.0

//! Device and port limits sroce advertises.
//!
//! They are sized like the kernel's rxe so applications tuned for software
//! RoCE behave the same on sroce.

use crate::rdma::attr::{DeviceAttr, IbMtu, PortImmutable};

/// IEEE OUI for the vendor id; 0xFFFFFF means "none assigned".
pub(crate) const VENDOR_ID: u32 = 0x00ff_ffff;
/// GID table entries per port (IPv4 and IPv6 addresses of the net device).
pub(crate) const GID_TABLE_LEN: u32 = 1024;
/// The only P_Key: full-membership default partition.
pub(crate) const DEFAULT_PKEY: u16 = 0xffff;
/// Largest message, in bytes (8 MiB).
pub(crate) const MAX_MSG_SIZE: u32 = 0x0080_0000;
/// Management datagram size (`IB_MGMT_MAD_SIZE`).
pub(crate) const MAD_SIZE: u32 = 256;
/// Largest IB MTU on the wire.
pub(crate) const MAX_IB_MTU: IbMtu = IbMtu::Mtu4096;
/// `IB_PORT_CM_SUP`: connection management (rdma_cm) is supported.
pub(crate) const PORT_CAP_CM_SUP: u32 = 1 << 16;

/// RoCEv2 headers around an IB payload inside one Ethernet MTU: IPv6 header
/// (40, the larger IP header), UDP (8), BTH (12), the largest extension
/// headers (XRC 4 + AtomicETH 28) and ICRC (4). The IB MTU is the largest
/// one that fits in what remains.
pub(crate) const ROCE_OVERHEAD: u32 = 40 + 8 + 12 + 4 + 28 + 4;

/// Protection domains per device.
pub(crate) const MAX_PD: u32 = 0x1_0000;
/// Memory regions per device (below the 2^24 indices MR keys can name).
pub(crate) const MAX_MR: u32 = 0x4_0000;
/// Largest memory region, in bytes: no limit of sroce's own, as in rxe.
/// What a process can pin is bounded by its `RLIMIT_MEMLOCK` and the core's
/// 2^32 pages per pinning.
pub(crate) const MAX_MR_SIZE: u64 = u64::MAX;

/// The device attributes, with the system image GUID given.
pub(crate) fn device_attr(sys_image_guid_be: u64) -> DeviceAttr {
    DeviceAttr {
        sys_image_guid_be,
        max_mr_size: MAX_MR_SIZE,
        page_size_cap: 0xffff_f000,
        vendor_id: VENDOR_ID,
        max_qp: 0x1_0000,
        max_qp_wr: 0x4000,
        device_cap_flags: 0,
        max_sge: 32,
        max_sge_rd: 32,
        max_cq: 0x4000,
        max_cqe: (1 << 15) - 1,
        max_mr: MAX_MR,
        max_pd: MAX_PD,
        max_qp_rd_atom: 128,
        max_res_rd_atom: 0x3f000,
        max_srq: 0x4000,
        max_srq_wr: 0x4000,
        max_srq_sge: 27,
        max_ah: 0x7fff,
        max_mw: 0x4_0000,
        max_fast_reg_page_list_len: 512,
        max_pkeys: 64,
        local_ca_ack_delay: 15,
        atomic_cap_hca: true,
        allow_user_unregister: true,
    }
}

/// The immutable port facts.
pub(crate) fn port_immutable() -> PortImmutable {
    PortImmutable {
        pkey_tbl_len: 1,
        gid_tbl_len: GID_TABLE_LEN,
        max_mad_size: MAD_SIZE,
    }
}

/// The IB MTU usable on a net device of `netdev_mtu` bytes, capped at the
/// largest IB MTU; `None` if even 256 bytes do not fit.
pub(crate) fn ib_mtu_for(netdev_mtu: u32) -> Option<IbMtu> {
    let room = netdev_mtu.checked_sub(ROCE_OVERHEAD)?;
    IbMtu::at_most(room).map(|m| {
        if (m as u32) > (MAX_IB_MTU as u32) {
            MAX_IB_MTU
        } else {
            m
        }
    })
}
