// SPDX-License-Identifier: GPL-2.0

//! Work requests of kernel consumers (`struct ib_send_wr` / `ib_recv_wr`
//! chains), written into a kernel queue's ring in rxe's WQE layout, so the
//! data path parses and runs them exactly like a process's WQEs.
//!
//! Kernel scatter/gather addresses are kernel virtual addresses (software
//! devices use virtual DMA: no `dma_device`, see `ib_uses_virt_dma`), and
//! their lkey is normally the PD's local DMA lkey, an MR from `get_dma_mr`.

use super::{
    ah::Ah,
    bindings,
    device::Driver,
    rxe_abi::{RECV_WQE_HEADER, SEND_WQE_HEADER, SGE_SIZE},
};
use core::{
    marker::PhantomData,
    mem::{offset_of, size_of},
};
use kernel::prelude::*;

/// Limits a kernel WQE is checked against (the queue's granted sizes).
#[derive(Clone, Copy, Debug)]
pub(crate) struct WqeLimits {
    /// Scatter/gather entries per WQE.
    pub(crate) max_sge: u32,
    /// Inline bytes per send WQE.
    pub(crate) max_inline: u32,
}

const SEND_DMA: usize = offset_of!(bindings::rxe_send_wqe, dma);
const RECV_DMA: usize = offset_of!(bindings::rxe_recv_wqe, dma);
const DMA_LENGTH: usize = offset_of!(bindings::rxe_dma_info, length);
const DMA_RESID: usize = offset_of!(bindings::rxe_dma_info, resid);
const DMA_NUM_SGE: usize = offset_of!(bindings::rxe_dma_info, num_sge);

/// Writes a plain-old-data value at `offset` of `buf`; `EINVAL` if it does
/// not fit.
fn write_at<V: Copy>(buf: &mut [u8], offset: usize, v: V) -> Result {
    let end = offset.checked_add(size_of::<V>()).ok_or(EINVAL)?;
    let dst = buf.get_mut(offset..end).ok_or(EINVAL)?;
    // SAFETY: `dst` has room for `size_of::<V>()` bytes; the write is
    // unaligned and `V` is a C struct or integer (no drop, no padding read).
    unsafe { core::ptr::write_unaligned(dst.as_mut_ptr().cast::<V>(), v) };
    Ok(())
}

/// The scatter/gather list of a kernel work request.
///
/// # Safety
///
/// `sg_list` must point to `num_sge` valid entries when `num_sge > 0`.
unsafe fn sges<'a>(
    sg_list: *const bindings::ib_sge,
    num_sge: i32,
) -> Result<&'a [bindings::ib_sge]> {
    let n = usize::try_from(num_sge).map_err(|_| EINVAL)?;
    if n == 0 || sg_list.is_null() {
        return Ok(&[]);
    }
    // SAFETY: `n` valid entries (caller).
    Ok(unsafe { core::slice::from_raw_parts(sg_list, n) })
}

/// Writes `list` as the WQE's scatter/gather entries at `at`; returns the
/// total length.
fn write_sges(slot: &mut [u8], at: usize, list: &[bindings::ib_sge]) -> Result<u32> {
    let mut total = 0u32;
    for (i, s) in list.iter().enumerate() {
        total = total.checked_add(s.length).ok_or(EINVAL)?;
        let raw = bindings::rxe_sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        };
        write_at(slot, at + i * SGE_SIZE, raw)?;
    }
    Ok(total)
}

/// A chain of send work requests being posted.
///
/// # Invariants
///
/// `cur` is NULL or a valid `ib_send_wr` whose `next` chain is valid for
/// `'a`; when `ud`, every one is embedded in an `ib_ud_wr` (the core's
/// contract for UD and GSI QPs).
pub(crate) struct SendWrs<'a, T: Driver> {
    cur: *const bindings::ib_send_wr,
    ud: bool,
    _p: PhantomData<(&'a bindings::ib_send_wr, T)>,
}

impl<'a, T: Driver> SendWrs<'a, T> {
    /// # Safety
    ///
    /// `wr` must be NULL or a valid chain for `'a`; if `ud`, each request is
    /// the `wr` of an `ib_ud_wr`.
    pub(super) unsafe fn new(wr: *const bindings::ib_send_wr, ud: bool) -> Self {
        // INVARIANT: from the caller.
        Self {
            cur: wr,
            ud,
            _p: PhantomData,
        }
    }

    /// The request not yet posted (the one to report as `bad_wr`).
    pub(super) fn position(&self) -> *const bindings::ib_send_wr {
        self.cur
    }

    /// Whether any request is left.
    pub(crate) fn is_empty(&self) -> bool {
        self.cur.is_null()
    }

    /// The address handle of the current UD request, if any.
    pub(crate) fn ah(&self) -> Option<&'a Ah<T>> {
        if !self.ud || self.cur.is_null() {
            return None;
        }
        // SAFETY: UD requests are embedded in an `ib_ud_wr` at offset 0
        // (type invariant); its `ah` is a live AH of this device (the
        // core's contract for posting).
        unsafe {
            let ud = self.cur.cast::<bindings::ib_ud_wr>();
            let ah = (*ud).ah;
            (!ah.is_null()).then(|| Ah::<T>::from_raw(ah))
        }
    }

    /// Writes the current request into `slot` as an rxe send WQE;
    /// `ah_num` names the address handle of a UD request. `EINVAL` for
    /// requests outside `lim` or operations sroce does not run.
    pub(crate) fn encode(&self, slot: &mut [u8], lim: &WqeLimits, ah_num: u32) -> Result {
        if self.cur.is_null() || slot.len() < SEND_WQE_HEADER {
            return Err(EINVAL);
        }
        // SAFETY: a valid request (type invariant).
        let wr = unsafe { &*self.cur };
        let opcode = match wr.opcode {
            bindings::ib_wr_opcode_IB_WR_RDMA_WRITE => {
                bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_RDMA_WRITE
            }
            bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM => {
                bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_RDMA_WRITE_WITH_IMM
            }
            bindings::ib_wr_opcode_IB_WR_SEND => bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_SEND,
            bindings::ib_wr_opcode_IB_WR_SEND_WITH_IMM => {
                bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_SEND_WITH_IMM
            }
            bindings::ib_wr_opcode_IB_WR_SEND_WITH_INV => {
                bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_SEND_WITH_INV
            }
            bindings::ib_wr_opcode_IB_WR_RDMA_READ => {
                bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_RDMA_READ
            }
            bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP => {
                bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_ATOMIC_CMP_AND_SWP
            }
            bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => {
                bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD
            }
            bindings::ib_wr_opcode_IB_WR_LOCAL_INV => {
                bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_LOCAL_INV
            }
            // Kept as the kernel's value: no uverbs opcode has it.
            bindings::ib_wr_opcode_IB_WR_REG_MR => bindings::ib_wr_opcode_IB_WR_REG_MR,
            _ => return Err(EINVAL),
        };
        let is = |op: u32| wr.opcode == op;
        let rdma = is(bindings::ib_wr_opcode_IB_WR_RDMA_WRITE)
            || is(bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM)
            || is(bindings::ib_wr_opcode_IB_WR_RDMA_READ);
        let atomic = is(bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP)
            || is(bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD);
        let flags = u32::try_from(wr.send_flags).map_err(|_| EINVAL)?;
        let inline = flags & (bindings::ib_send_flags_IB_SEND_INLINE as u32) != 0;
        // SAFETY: the request's list is valid (type invariant).
        let list = unsafe { sges(wr.sg_list, wr.num_sge) }?;

        let mut raw = bindings::rxe_send_wr {
            // SAFETY: both union members are 64 bits; kernel consumers that
            // use `wr_cqe` get the same bits back in the completion.
            wr_id: unsafe { wr.__bindgen_anon_1.wr_id },
            opcode,
            send_flags: flags,
            ..Default::default()
        };
        // SAFETY: both union members are a 32-bit integer.
        raw.ex.invalidate_rkey = unsafe { wr.ex.invalidate_rkey };
        if rdma {
            // SAFETY: RDMA requests are the `wr` of an `ib_rdma_wr` (the
            // core's contract for these opcodes).
            let r = unsafe { &*self.cur.cast::<bindings::ib_rdma_wr>() };
            raw.wr.rdma = bindings::rxe_send_wr__bindgen_ty_2__bindgen_ty_2 {
                remote_addr: r.remote_addr,
                rkey: r.rkey,
                reserved: 0,
            };
        } else if atomic {
            // SAFETY: atomic requests are the `wr` of an `ib_atomic_wr`.
            let a = unsafe { &*self.cur.cast::<bindings::ib_atomic_wr>() };
            raw.wr.atomic = bindings::rxe_send_wr__bindgen_ty_2__bindgen_ty_3 {
                remote_addr: a.remote_addr,
                compare_add: a.compare_add,
                swap: a.swap,
                rkey: a.rkey,
                reserved: 0,
            };
        } else if is(bindings::ib_wr_opcode_IB_WR_REG_MR) {
            // SAFETY: REG_MR requests are the `wr` of an `ib_reg_wr`.
            let r = unsafe { &*self.cur.cast::<bindings::ib_reg_wr>() };
            // The key names the region; its pointer stays out of the ring.
            raw.wr.reg.key = r.key;
            raw.wr.reg.access = u32::try_from(r.access).map_err(|_| EINVAL)?;
        } else if self.ud {
            // SAFETY: UD requests are the `wr` of an `ib_ud_wr` (invariant).
            let u = unsafe { &*self.cur.cast::<bindings::ib_ud_wr>() };
            // Assigning union fields needs no `unsafe`.
            raw.wr.ud.remote_qpn = u.remote_qpn;
            raw.wr.ud.remote_qkey = u.remote_qkey;
            raw.wr.ud.pkey_index = u.pkey_index;
            raw.wr.ud.ah_num = ah_num;
        }
        write_at(slot, 0, raw)?;

        let data_at = SEND_WQE_HEADER;
        let length = if inline {
            let mut at = data_at;
            for s in list {
                let n = s.length as usize;
                let end = at.checked_add(n).ok_or(EINVAL)?;
                if end - data_at > lim.max_inline as usize {
                    return Err(EINVAL);
                }
                let dst = slot.get_mut(at..end).ok_or(EINVAL)?;
                if n > 0 {
                    // SAFETY: inline data of a kernel request is `length`
                    // bytes of mapped kernel memory at `addr` (a virtual
                    // address: virtual DMA), valid during the post call.
                    unsafe {
                        core::ptr::copy_nonoverlapping(
                            s.addr as usize as *const u8,
                            dst.as_mut_ptr(),
                            n,
                        )
                    };
                }
                at = end;
            }
            (at - data_at) as u32
        } else {
            if list.len() > lim.max_sge as usize {
                return Err(EINVAL);
            }
            let total = write_sges(slot, data_at, list)?;
            write_at(slot, SEND_DMA + DMA_NUM_SGE, list.len() as u32)?;
            total
        };
        write_at(slot, SEND_DMA + DMA_LENGTH, length)?;
        write_at(slot, SEND_DMA + DMA_RESID, length)?;
        Ok(())
    }

    /// Moves to the next request.
    pub(crate) fn advance(&mut self) {
        if !self.cur.is_null() {
            // INVARIANT: the chain is valid (type invariant).
            // SAFETY: a valid request.
            self.cur = unsafe { (*self.cur).next };
        }
    }
}

/// A chain of receive work requests being posted.
///
/// # Invariants
///
/// `cur` is NULL or a valid `ib_recv_wr` whose `next` chain is valid for
/// `'a`.
pub(crate) struct RecvWrs<'a> {
    cur: *const bindings::ib_recv_wr,
    _p: PhantomData<&'a bindings::ib_recv_wr>,
}

impl<'a> RecvWrs<'a> {
    /// # Safety
    ///
    /// `wr` must be NULL or a valid chain for `'a`.
    pub(super) unsafe fn new(wr: *const bindings::ib_recv_wr) -> Self {
        // INVARIANT: from the caller.
        Self {
            cur: wr,
            _p: PhantomData,
        }
    }

    /// The request not yet posted (the one to report as `bad_wr`).
    pub(super) fn position(&self) -> *const bindings::ib_recv_wr {
        self.cur
    }

    /// Whether any request is left.
    pub(crate) fn is_empty(&self) -> bool {
        self.cur.is_null()
    }

    /// Writes the current request into `slot` as an rxe receive WQE.
    pub(crate) fn encode(&self, slot: &mut [u8], lim: &WqeLimits) -> Result {
        if self.cur.is_null() || slot.len() < RECV_WQE_HEADER {
            return Err(EINVAL);
        }
        // SAFETY: a valid request (type invariant).
        let wr = unsafe { &*self.cur };
        // SAFETY: the request's list is valid (type invariant).
        let list = unsafe { sges(wr.sg_list, wr.num_sge) }?;
        if list.len() > lim.max_sge as usize {
            return Err(EINVAL);
        }
        // SAFETY: both union members are 64 bits.
        write_at(slot, 0, unsafe { wr.__bindgen_anon_1.wr_id })?;
        let total = write_sges(slot, RECV_WQE_HEADER, list)?;
        write_at(slot, RECV_DMA + DMA_LENGTH, total)?;
        write_at(slot, RECV_DMA + DMA_RESID, total)?;
        write_at(slot, RECV_DMA + DMA_NUM_SGE, list.len() as u32)?;
        Ok(())
    }

    /// Moves to the next request.
    pub(crate) fn advance(&mut self) {
        if !self.cur.is_null() {
            // INVARIANT: the chain is valid (type invariant).
            // SAFETY: a valid request.
            self.cur = unsafe { (*self.cur).next };
        }
    }
}

const _: () = {
    assert!(size_of::<bindings::rxe_sge>() == size_of::<bindings::ib_sge>());
    assert!(SEND_DMA + size_of::<bindings::rxe_dma_info>() == SEND_WQE_HEADER);
    assert!(RECV_DMA + size_of::<bindings::rxe_dma_info>() == RECV_WQE_HEADER);
};
