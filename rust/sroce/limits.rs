// SPDX-License-Identifier: GPL-2.0

//! Device and port limits sroce advertises.
//!
//! They are sized like the kernel's rxe so applications tuned for software
//! RoCE behave the same on sroce.

use crate::rdma::attr::{cap, DeviceAttr, IbMtu, PortImmutable};

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
/// Memory regions per device (below the 2^23 - 1 indices MR keys can name).
pub(crate) const MAX_MR: u32 = 0x4_0000;
/// Memory windows per device (below the 2^23 indices window keys can name).
pub(crate) const MAX_MW: u32 = 0x4_0000;
/// Largest memory region, in bytes: no limit of sroce's own, as in rxe.
/// What a process can pin is bounded by its `RLIMIT_MEMLOCK` and the core's
/// 2^32 pages per pinning.
pub(crate) const MAX_MR_SIZE: u64 = u64::MAX;

/// Completion queues per device.
pub(crate) const MAX_CQ: u32 = 0x4000;
/// Entries per completion queue.
pub(crate) const MAX_CQE: u32 = (1 << 15) - 1;

/// Queue pairs per device.
pub(crate) const MAX_QP: u32 = 0x1_0000;
/// The first queue pair number handed out (below are reserved).
pub(crate) const QPN_BASE: u32 = 16;
/// The general services QP's fixed number.
pub(crate) const GSI_QPN: u32 = 1;
/// Work requests per queue.
pub(crate) const MAX_QP_WR: u32 = 0x4000;
/// Scatter/gather entries per work request.
pub(crate) const MAX_SGE: u32 = 32;
/// Inline data bytes per send work request.
pub(crate) const MAX_INLINE_DATA: u32 = 256;
/// Outstanding RDMA READ/atomic operations per QP, each direction.
pub(crate) const MAX_QP_RD_ATOM: u32 = 128;

/// Shared receive queues per device.
pub(crate) const MAX_SRQ: u32 = 0x4000;
/// Work requests per shared receive queue.
pub(crate) const MAX_SRQ_WR: u32 = 0x4000;
/// Scatter/gather entries per shared receive queue work request.
pub(crate) const MAX_SRQ_SGE: u32 = 27;
/// Pages a fast-registration MR maps at most (as rxe).
pub(crate) const MAX_FAST_REG_PAGES: u32 = 512;
/// Address handles per device.
pub(crate) const MAX_AH: u32 = 0x7fff;

/// The device attributes, with the system image GUID given.
pub(crate) fn device_attr(sys_image_guid_be: u64) -> DeviceAttr {
    DeviceAttr {
        sys_image_guid_be,
        max_mr_size: MAX_MR_SIZE,
        page_size_cap: 0xffff_f000,
        vendor_id: VENDOR_ID,
        max_qp: MAX_QP,
        max_qp_wr: MAX_QP_WR,
        device_cap_flags: cap::MEM_MGT_EXTENSIONS
            | cap::RC_RNR_NAK_GEN
            | cap::PORT_ACTIVE_EVENT
            | cap::SRQ_RESIZE
            | cap::ATOMIC_WRITE
            | cap::MEM_WINDOW
            | cap::MEM_WINDOW_TYPE_2B
            | cap::SYS_IMAGE_GUID,
        max_sge: MAX_SGE,
        max_sge_rd: MAX_SGE,
        max_cq: MAX_CQ,
        max_cqe: MAX_CQE,
        max_mr: MAX_MR,
        max_pd: MAX_PD,
        max_qp_rd_atom: MAX_QP_RD_ATOM,
        max_res_rd_atom: 0x3f000,
        max_srq: MAX_SRQ,
        max_srq_wr: MAX_SRQ_WR,
        max_srq_sge: MAX_SRQ_SGE,
        max_ah: MAX_AH,
        max_mw: MAX_MW,
        max_fast_reg_page_list_len: MAX_FAST_REG_PAGES,
        max_pkeys: 64,
        local_ca_ack_delay: 15,
        atomic_cap_hca: true,
        allow_user_unregister: true,
        on_demand_paging: true,
    }
}

/// The immutable port facts.
pub(crate) fn port_immutable(roce_v1: bool) -> PortImmutable {
    PortImmutable {
        pkey_tbl_len: 1,
        gid_tbl_len: GID_TABLE_LEN,
        max_mad_size: MAD_SIZE,
        roce_v1,
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
