// SPDX-License-Identifier: GPL-2.0

//! Work completions as userspace reads them from a completion queue ring
//! (`struct ib_uverbs_wc`).

use super::{bindings, qp::QpHandle};
use core::mem::size_of;
use kernel::transmute::{AsBytes, FromBytes};

/// Completion status (`enum ib_wc_status`; userspace's `ibv_wc_status`
/// has the same values).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub(crate) enum WcStatus {
    /// Done.
    Success = bindings::ib_wc_status_IB_WC_SUCCESS,
    /// Local length error (receive buffer too small).
    LocLenErr = bindings::ib_wc_status_IB_WC_LOC_LEN_ERR,
    /// Local QP operation error.
    LocQpOpErr = bindings::ib_wc_status_IB_WC_LOC_QP_OP_ERR,
    /// Local protection error (bad lkey, range or right).
    LocProtErr = bindings::ib_wc_status_IB_WC_LOC_PROT_ERR,
    /// Flushed: the QP went to the error state before it was processed.
    WrFlushErr = bindings::ib_wc_status_IB_WC_WR_FLUSH_ERR,
    /// A memory window bind was refused.
    MwBindErr = bindings::ib_wc_status_IB_WC_MW_BIND_ERR,
    /// Bad response.
    BadRespErr = bindings::ib_wc_status_IB_WC_BAD_RESP_ERR,
    /// Remote invalid request.
    RemInvReqErr = bindings::ib_wc_status_IB_WC_REM_INV_REQ_ERR,
    /// Remote access error.
    RemAccessErr = bindings::ib_wc_status_IB_WC_REM_ACCESS_ERR,
    /// Remote operational error.
    RemOpErr = bindings::ib_wc_status_IB_WC_REM_OP_ERR,
    /// Transport retries exhausted.
    RetryExcErr = bindings::ib_wc_status_IB_WC_RETRY_EXC_ERR,
    /// RNR retries exhausted.
    RnrRetryExcErr = bindings::ib_wc_status_IB_WC_RNR_RETRY_EXC_ERR,
    /// Any other failure.
    GeneralErr = bindings::ib_wc_status_IB_WC_GENERAL_ERR,
}

impl WcStatus {
    /// The status with `ib_wc_status` value `code`; values sroce does not
    /// report are [`WcStatus::GeneralErr`].
    pub(crate) fn from_code(code: u32) -> Self {
        match code {
            bindings::ib_wc_status_IB_WC_SUCCESS => Self::Success,
            bindings::ib_wc_status_IB_WC_LOC_LEN_ERR => Self::LocLenErr,
            bindings::ib_wc_status_IB_WC_LOC_QP_OP_ERR => Self::LocQpOpErr,
            bindings::ib_wc_status_IB_WC_LOC_PROT_ERR => Self::LocProtErr,
            bindings::ib_wc_status_IB_WC_WR_FLUSH_ERR => Self::WrFlushErr,
            bindings::ib_wc_status_IB_WC_MW_BIND_ERR => Self::MwBindErr,
            bindings::ib_wc_status_IB_WC_BAD_RESP_ERR => Self::BadRespErr,
            bindings::ib_wc_status_IB_WC_REM_INV_REQ_ERR => Self::RemInvReqErr,
            bindings::ib_wc_status_IB_WC_REM_ACCESS_ERR => Self::RemAccessErr,
            bindings::ib_wc_status_IB_WC_REM_OP_ERR => Self::RemOpErr,
            bindings::ib_wc_status_IB_WC_RETRY_EXC_ERR => Self::RetryExcErr,
            bindings::ib_wc_status_IB_WC_RNR_RETRY_EXC_ERR => Self::RnrRetryExcErr,
            _ => Self::GeneralErr,
        }
    }
}

/// What completed (`enum ib_uverbs_wc_opcode`, plus the receive values).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub(crate) enum WcOpcode {
    /// A send.
    Send = bindings::ib_wc_opcode_IB_WC_SEND,
    /// An RDMA WRITE.
    RdmaWrite = bindings::ib_wc_opcode_IB_WC_RDMA_WRITE,
    /// An RDMA READ.
    RdmaRead = bindings::ib_wc_opcode_IB_WC_RDMA_READ,
    /// An atomic compare-and-swap.
    CompSwap = bindings::ib_wc_opcode_IB_WC_COMP_SWAP,
    /// An atomic fetch-and-add.
    FetchAdd = bindings::ib_wc_opcode_IB_WC_FETCH_ADD,
    /// A local invalidate.
    LocalInv = bindings::ib_wc_opcode_IB_WC_LOCAL_INV,
    /// An RDMA ATOMIC WRITE.
    AtomicWrite = bindings::ib_wc_opcode_IB_WC_ATOMIC_WRITE,
    /// A fast registration.
    RegMr = bindings::ib_wc_opcode_IB_WC_REG_MR,
    /// A memory window binding.
    BindMw = bindings::ib_wc_opcode_IB_WC_BIND_MW,
    /// A receive.
    Recv = bindings::ib_wc_opcode_IB_WC_RECV,
    /// A receive consumed by an RDMA WRITE with immediate.
    RecvRdmaWithImm = bindings::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM,
}

/// A work completion to post to a completion queue.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Completion {
    /// The work request's identifier.
    pub(crate) wr_id: u64,
    /// Outcome.
    pub(crate) status: WcStatus,
    /// What completed.
    pub(crate) opcode: WcOpcode,
    /// Bytes transferred (receives, READs).
    pub(crate) byte_len: u32,
    /// Immediate data (network order, as received), if any.
    pub(crate) imm_data: Option<u32>,
    /// The rkey a SEND with invalidate invalidated, if any.
    pub(crate) invalidated_rkey: Option<u32>,
    /// The local QP.
    pub(crate) qp_num: u32,
    /// The sending QP (UD receives).
    pub(crate) src_qp: u32,
    /// Whether a GRH precedes the data in the receive buffer (UD).
    pub(crate) grh: bool,
}

impl Completion {
    /// A flush-error completion for a work request that was never executed.
    pub(crate) fn flushed(wr_id: u64, opcode: WcOpcode, qp_num: u32) -> Self {
        Self {
            wr_id,
            status: WcStatus::WrFlushErr,
            opcode,
            byte_len: 0,
            imm_data: None,
            invalidated_rkey: None,
            qp_num,
            src_qp: 0,
            grh: false,
        }
    }

    /// Fills a kernel consumer's work completion; `qp` is the QP the
    /// completion belongs to. Kernel flags are the `IB_WC_*` values.
    pub(crate) fn write_ib_wc(&self, qp: QpHandle, wc: &mut bindings::ib_wc) {
        let mut flags = 0;
        wc.__bindgen_anon_1.wr_id = self.wr_id;
        wc.status = self.status as u32;
        wc.opcode = self.opcode as u32;
        wc.vendor_err = 0;
        wc.byte_len = self.byte_len;
        wc.qp = qp.as_raw();
        wc.ex.imm_data = 0;
        if let Some(imm) = self.imm_data {
            flags |= bindings::ib_wc_flags_IB_WC_WITH_IMM;
            wc.ex.imm_data = imm;
        } else if let Some(rkey) = self.invalidated_rkey {
            flags |= bindings::ib_wc_flags_IB_WC_WITH_INVALIDATE;
            wc.ex.invalidate_rkey = rkey;
        }
        if self.grh {
            flags |= bindings::ib_wc_flags_IB_WC_GRH;
        }
        wc.src_qp = self.src_qp;
        wc.slid = 0;
        wc.wc_flags = flags as i32;
        wc.pkey_index = 0;
        wc.sl = 0;
        wc.dlid_path_bits = 0;
        wc.port_num = 1;
        wc.smac = [0; 6];
        wc.vlan_id = 0;
        wc.network_hdr_type = 0;
    }

    /// The ring entry. Its flags are libibverbs' (`IBV_WC_*`), which the
    /// process reads straight from the ring; they differ from the kernel's
    /// `IB_WC_*` for invalidation (bit 3, not bit 2).
    pub(crate) fn to_uverbs(self) -> UverbsWc {
        let mut flags = 0;
        let mut ex = 0;
        if let Some(imm) = self.imm_data {
            flags |= IBV_WC_WITH_IMM;
            ex = imm;
        } else if let Some(rkey) = self.invalidated_rkey {
            flags |= IBV_WC_WITH_INV;
            ex = rkey;
        }
        if self.grh {
            flags |= IBV_WC_GRH;
        }
        UverbsWc {
            wr_id: self.wr_id,
            status: self.status as u32,
            opcode: self.opcode as u32,
            vendor_err: 0,
            byte_len: self.byte_len,
            ex,
            qp_num: self.qp_num,
            src_qp: self.src_qp,
            wc_flags: flags,
            pkey_index: 0,
            slid: 0,
            sl: 0,
            dlid_path_bits: 0,
            port_num: 1,
            reserved: 0,
        }
    }
}

/// libibverbs' `IBV_WC_GRH`.
const IBV_WC_GRH: u32 = 1 << 0;
/// libibverbs' `IBV_WC_WITH_IMM`.
const IBV_WC_WITH_IMM: u32 = 1 << 1;
/// libibverbs' `IBV_WC_WITH_INV`.
const IBV_WC_WITH_INV: u32 = 1 << 3;

/// `struct ib_uverbs_wc`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct UverbsWc {
    wr_id: u64,
    status: u32,
    opcode: u32,
    vendor_err: u32,
    byte_len: u32,
    ex: u32,
    qp_num: u32,
    src_qp: u32,
    wc_flags: u32,
    pkey_index: u16,
    slid: u16,
    sl: u8,
    dlid_path_bits: u8,
    port_num: u8,
    reserved: u8,
}

const _: () = assert!(size_of::<UverbsWc>() == size_of::<bindings::ib_uverbs_wc>());

// SAFETY: `repr(C)` struct of integers laid out without padding (its size
// equals the sum of its fields, checked against the C struct above).
unsafe impl AsBytes for UverbsWc {}
// SAFETY: as above.
unsafe impl FromBytes for UverbsWc {}
