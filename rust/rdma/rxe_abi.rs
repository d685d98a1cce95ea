// SPDX-License-Identifier: GPL-2.0

//! The provider-specific command and response structs of rxe's userspace
//! ABI (`include/uapi/rdma/rdma_user_rxe.h`), as plain Rust types the driver
//! fills in. Sizes are checked against the C definitions at build time.

use super::{bindings, queue::MmapInfo};
use core::mem::size_of;
use kernel::transmute::{AsBytes, FromBytes};

/// `struct mminfo`: where userspace maps a queue.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct MmInfo {
    offset: u64,
    size: u32,
    pad: u32,
}

impl From<MmapInfo> for MmInfo {
    fn from(m: MmapInfo) -> Self {
        Self {
            offset: m.offset,
            size: m.size,
            pad: 0,
        }
    }
}

/// `struct rxe_modify_srq_cmd`: where the library wants the resized SRQ's
/// mapping written (an address in the caller's memory).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct ModifySrqCmd {
    pub(crate) mmap_info_addr: u64,
}

// SAFETY: plain integers, no padding; any bit pattern is valid.
unsafe impl FromBytes for ModifySrqCmd {}

/// `struct rxe_create_cq_resp` (and `rxe_resize_cq_resp`, the same layout).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct CqResp {
    /// The completion queue's mapping.
    pub(crate) mi: MmInfo,
}

const _: () = {
    assert!(size_of::<MmInfo>() == size_of::<bindings::mminfo>());
    assert!(size_of::<ModifySrqCmd>() == size_of::<bindings::rxe_modify_srq_cmd>());
    assert!(size_of::<CqResp>() == size_of::<bindings::rxe_create_cq_resp>());
    assert!(size_of::<CqResp>() == size_of::<bindings::rxe_resize_cq_resp>());
};

// SAFETY: `repr(C)` structs of integers with no padding (checked above by
// size), so every byte is initialised and every bit pattern valid.
unsafe impl AsBytes for MmInfo {}
// SAFETY: as above.
unsafe impl FromBytes for MmInfo {}
// SAFETY: as above.
unsafe impl AsBytes for CqResp {}
// SAFETY: as above.
unsafe impl FromBytes for CqResp {}

/// Bytes of one completion queue entry: userspace reads `struct
/// ib_uverbs_wc` from each slot.
pub(crate) const CQE_SIZE: usize = size_of::<bindings::ib_uverbs_wc>();

/// Bytes of a send work queue entry before its scatter/gather list or
/// inline data (`struct rxe_send_wqe`).
pub(crate) const SEND_WQE_HEADER: usize = size_of::<bindings::rxe_send_wqe>();
/// Bytes of a receive work queue entry before its scatter/gather list
/// (`struct rxe_recv_wqe`).
pub(crate) const RECV_WQE_HEADER: usize = size_of::<bindings::rxe_recv_wqe>();
/// Bytes of one scatter/gather entry (`struct rxe_sge`).
pub(crate) const SGE_SIZE: usize = size_of::<bindings::rxe_sge>();

/// `struct rxe_create_qp_resp`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct CreateQpResp {
    /// The receive queue's mapping (zero with a shared receive queue).
    pub(crate) rq_mi: MmInfo,
    /// The send queue's mapping.
    pub(crate) sq_mi: MmInfo,
}

const _: () = assert!(size_of::<CreateQpResp>() == size_of::<bindings::rxe_create_qp_resp>());

// SAFETY: `repr(C)` struct of integers with no padding (checked by size).
unsafe impl AsBytes for CreateQpResp {}
// SAFETY: as above.
unsafe impl FromBytes for CreateQpResp {}

/// `struct rxe_create_srq_resp`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct CreateSrqResp {
    /// The queue's mapping.
    pub(crate) mi: MmInfo,
    /// The SRQ number (used by XRC; reported for completeness).
    pub(crate) srq_num: u32,
    /// Zero.
    pub(crate) reserved: u32,
}

/// `struct rxe_create_ah_resp`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct CreateAhResp {
    /// The AH number userspace puts into UD send WQEs.
    pub(crate) ah_num: u32,
    /// Zero.
    pub(crate) reserved: u32,
}

const _: () = {
    assert!(size_of::<CreateSrqResp>() == size_of::<bindings::rxe_create_srq_resp>());
    assert!(size_of::<CreateAhResp>() == size_of::<bindings::rxe_create_ah_resp>());
};

// SAFETY: `repr(C)` structs of integers with no padding (checked by size).
unsafe impl AsBytes for CreateSrqResp {}
// SAFETY: as above.
unsafe impl FromBytes for CreateSrqResp {}
// SAFETY: as above.
unsafe impl AsBytes for CreateAhResp {}
// SAFETY: as above.
unsafe impl FromBytes for CreateAhResp {}
