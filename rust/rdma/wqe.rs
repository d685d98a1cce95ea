// SPDX-License-Identifier: GPL-2.0

//! Work queue entries as userspace writes them into the rings (rxe's
//! `struct rxe_send_wqe` / `struct rxe_recv_wqe`).
//!
//! The kernel never acts on ring memory directly: a WQE is first copied into
//! a kernel buffer (the process can change its ring at any time), then read
//! from the copy here.

use super::{bindings, wc::WcOpcode};
use core::mem::size_of;
use kernel::prelude::*;

/// Bytes of a WQE needed to read its identifier and operation.
pub(crate) const WQE_ID_LEN: usize = size_of::<bindings::rxe_send_wr>();

/// Reads a plain-old-data value at `offset` of `buf`.
fn read_at<T: Copy>(buf: &[u8], offset: usize) -> Result<T> {
    let end = offset.checked_add(size_of::<T>()).ok_or(EINVAL)?;
    let bytes = buf.get(offset..end).ok_or(EINVAL)?;
    // SAFETY: `bytes` holds `size_of::<T>()` initialised bytes; `T` is only
    // instantiated with integer types and C structs of integers, for which
    // every bit pattern is valid; the read is unaligned.
    Ok(unsafe { core::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

/// A send work queue entry, as far as completing it unexecuted needs.
pub(crate) struct SendWqe;

impl SendWqe {
    /// The identifier and the completion opcode of a send WQE; an opcode
    /// sroce does not know completes as a send.
    pub(crate) fn id_and_completion(buf: &[u8]) -> Result<(u64, WcOpcode)> {
        let wr: bindings::rxe_send_wr = read_at(buf, 0)?;
        let opcode = match wr.opcode {
            bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_RDMA_WRITE
            | bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_RDMA_WRITE_WITH_IMM => WcOpcode::RdmaWrite,
            bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_RDMA_READ => WcOpcode::RdmaRead,
            bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_ATOMIC_CMP_AND_SWP => WcOpcode::CompSwap,
            bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD => WcOpcode::FetchAdd,
            bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_LOCAL_INV => WcOpcode::LocalInv,
            _ => WcOpcode::Send,
        };
        Ok((wr.wr_id, opcode))
    }
}

/// A receive work queue entry, as far as completing it unexecuted needs.
pub(crate) struct RecvWqe;

impl RecvWqe {
    /// The identifier of a receive WQE.
    pub(crate) fn id(buf: &[u8]) -> Result<u64> {
        read_at(buf, 0)
    }
}

const _: () = assert!(WQE_ID_LEN >= size_of::<u64>());
