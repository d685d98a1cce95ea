// SPDX-License-Identifier: GPL-2.0

//! Work queue entries as userspace writes them into the rings (rxe's
//! `struct rxe_send_wqe` / `struct rxe_recv_wqe`), turned into checked Rust
//! values.
//!
//! The kernel never acts on ring memory directly: a WQE is first copied into
//! a kernel buffer (the process can change its ring at any time), then
//! parsed here, bounded by the limits the queue was created with.

use super::{
    av::AddressVector,
    bindings,
    mw::BindRequest,
    rxe_abi::{RECV_WQE_HEADER, SEND_WQE_HEADER, SGE_SIZE},
    wc::WcOpcode,
};
use core::mem::{offset_of, size_of};
use kernel::prelude::*;

/// Scatter/gather entries a WQE can carry at most (the device's `max_sge`).
pub(crate) const MAX_SGE: usize = 32;

/// Bytes of a WQE needed to read its identifier and operation.
pub(crate) const WQE_ID_LEN: usize = size_of::<bindings::rxe_send_wr>();

/// One scatter/gather entry: a piece of a registered memory region.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct Sge {
    /// Virtual address (iova) in the region.
    pub(crate) addr: u64,
    /// Bytes.
    pub(crate) length: u32,
    /// Local key of the region.
    pub(crate) lkey: u32,
}

/// The scatter/gather list of a WQE (fixed capacity, no allocation).
#[derive(Clone, Copy)]
pub(crate) struct SgeList {
    entries: [Sge; MAX_SGE],
    len: usize,
}

impl SgeList {
    /// No entries.
    pub(crate) const EMPTY: Self = Self {
        entries: [Sge {
            addr: 0,
            length: 0,
            lkey: 0,
        }; MAX_SGE],
        len: 0,
    };

    /// The entries.
    pub(crate) fn as_slice(&self) -> &[Sge] {
        self.entries.get(..self.len).unwrap_or(&[])
    }

    /// Total bytes, or `None` if it overflows 32 bits (a malformed WQE).
    pub(crate) fn total_len(&self) -> Option<u32> {
        self.as_slice()
            .iter()
            .try_fold(0u32, |acc, s| acc.checked_add(s.length))
    }
}

/// What a send WQE asks for (`IB_UVERBS_WR_*`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum SendOp {
    /// RDMA WRITE.
    Write,
    /// RDMA WRITE with immediate data.
    WriteWithImm,
    /// SEND.
    Send,
    /// SEND with immediate data.
    SendWithImm,
    /// SEND that invalidates a remote key.
    SendWithInv,
    /// RDMA READ.
    Read,
    /// Atomic compare-and-swap.
    CompareSwap,
    /// Atomic fetch-and-add.
    FetchAdd,
    /// RDMA ATOMIC WRITE: 8 bytes stored at once.
    AtomicWrite,
    /// Local invalidate.
    LocalInv,
    /// Fast registration of a memory region (kernel consumers only; the
    /// kernel's `IB_WR_REG_MR` value, which no uverbs opcode uses).
    RegMr,
    /// Binding of a memory window.
    BindMw,
}

impl SendOp {
    fn from_raw(v: u32) -> Option<Self> {
        Some(match v {
            bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_RDMA_WRITE => Self::Write,
            bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_RDMA_WRITE_WITH_IMM => Self::WriteWithImm,
            bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_SEND => Self::Send,
            bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_SEND_WITH_IMM => Self::SendWithImm,
            bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_SEND_WITH_INV => Self::SendWithInv,
            bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_RDMA_READ => Self::Read,
            bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_ATOMIC_CMP_AND_SWP => Self::CompareSwap,
            bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD => Self::FetchAdd,
            bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_ATOMIC_WRITE => Self::AtomicWrite,
            bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_LOCAL_INV => Self::LocalInv,
            bindings::ib_wr_opcode_IB_WR_REG_MR => Self::RegMr,
            bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_BIND_MW => Self::BindMw,
            _ => return None,
        })
    }

    /// The completion opcode of the operation.
    pub(crate) fn completion(self) -> WcOpcode {
        match self {
            Self::Write | Self::WriteWithImm => WcOpcode::RdmaWrite,
            Self::Send | Self::SendWithImm | Self::SendWithInv => WcOpcode::Send,
            Self::Read => WcOpcode::RdmaRead,
            Self::CompareSwap => WcOpcode::CompSwap,
            Self::FetchAdd => WcOpcode::FetchAdd,
            Self::AtomicWrite => WcOpcode::AtomicWrite,
            Self::LocalInv => WcOpcode::LocalInv,
            Self::RegMr => WcOpcode::RegMr,
            Self::BindMw => WcOpcode::BindMw,
        }
    }
}

/// Send flags (`IB_SEND_*`).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct SendFlags {
    /// Wait for prior RDMA READ/atomic to complete first.
    pub(crate) fence: bool,
    /// Generate a completion even without signal-all.
    pub(crate) signaled: bool,
    /// Set the solicited-event bit.
    pub(crate) solicited: bool,
    /// The data is inline in the WQE.
    pub(crate) inline: bool,
}

/// Where the data of a send WQE comes from.
// Both variants are bounded (32 SGEs, 256 inline bytes); a WQE copy lives in
// the QP's in-flight table, not on hot stacks, so no boxing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy)]
pub(crate) enum SendData {
    /// Registered memory.
    Sges(SgeList),
    /// Bytes copied into the WQE (`len` bytes of `bytes`).
    Inline {
        /// The bytes (only the first `len` are meaningful).
        bytes: [u8; 256],
        /// Valid bytes.
        len: usize,
    },
}

/// The operation-specific part of a send WQE.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct RemoteTarget {
    /// Remote virtual address (RDMA/atomic).
    pub(crate) remote_addr: u64,
    /// Remote key (RDMA/atomic).
    pub(crate) rkey: u32,
    /// Compare value (CAS) or addend (FAA).
    pub(crate) compare_add: u64,
    /// Swap value (CAS).
    pub(crate) swap: u64,
}

/// What an `IB_WR_REG_MR` registers: the region the key's index names,
/// under that key, with these rights (the pages are the region's last
/// mapping; the ring never carries a pointer).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct FastRegTarget {
    /// The new key.
    pub(crate) key: u32,
    /// `IB_ACCESS_*` rights.
    pub(crate) access: u32,
}

/// Where a UD send goes: the remote QP and Q_Key, and the address handle
/// by number, or (older provider libraries, `ah_num` 0) the address
/// embedded in the WQE.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct UdTarget {
    /// Destination QP number.
    pub(crate) remote_qpn: u32,
    /// Q_Key (high bit set: use the QP's own).
    pub(crate) remote_qkey: u32,
    /// The address handle's number (0: see `av`).
    pub(crate) ah_num: u32,
    /// The embedded address when `ah_num` is 0.
    pub(crate) av: Option<AddressVector>,
}

/// A parsed send work queue entry.
#[derive(Clone, Copy)]
pub(crate) struct SendWqe {
    /// The caller's identifier, returned in the completion.
    pub(crate) wr_id: u64,
    /// Operation.
    pub(crate) op: SendOp,
    /// Flags.
    pub(crate) flags: SendFlags,
    /// Immediate data (network order, as given) or the rkey to invalidate.
    pub(crate) imm_or_inv: u32,
    /// RDMA/atomic target.
    pub(crate) remote: RemoteTarget,
    /// Local data.
    pub(crate) data: SendData,
    /// Total bytes of local data.
    pub(crate) length: u32,
    /// UD destination (meaningful on UD QPs only).
    pub(crate) ud: UdTarget,
    /// The registration of an `IB_WR_REG_MR`.
    pub(crate) fast_reg: FastRegTarget,
    /// The binding of an `IBV_WR_BIND_MW`.
    pub(crate) bind: BindRequest,
}

/// A parsed receive work queue entry.
#[derive(Clone, Copy)]
pub(crate) struct RecvWqe {
    /// The caller's identifier, returned in the completion.
    pub(crate) wr_id: u64,
    /// Where received data goes.
    pub(crate) sges: SgeList,
}

/// Reads a plain-old-data value at `offset` of `buf`.
fn read_at<T: Copy>(buf: &[u8], offset: usize) -> Result<T> {
    let end = offset.checked_add(size_of::<T>()).ok_or(EINVAL)?;
    let bytes = buf.get(offset..end).ok_or(EINVAL)?;
    // SAFETY: `bytes` holds `size_of::<T>()` initialised bytes; `T` is only
    // instantiated with integer types and C structs of integers, for which
    // every bit pattern is valid; the read is unaligned.
    Ok(unsafe { core::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

/// Parses `num` scatter/gather entries starting at `offset`, at most `max`.
///
/// Fills `list` in place (a list is half a KiB: parsing into a value and
/// moving it would put several on the stack); on error it is left empty.
fn parse_sges(buf: &[u8], offset: usize, num: u32, max: usize, list: &mut SgeList) -> Result {
    list.len = 0;
    let num = num as usize;
    if num > max.min(MAX_SGE) {
        return Err(EINVAL);
    }
    for (i, e) in list.entries.iter_mut().take(num).enumerate() {
        let raw: bindings::rxe_sge = read_at(buf, offset + i * SGE_SIZE)?;
        *e = Sge {
            addr: raw.addr,
            length: raw.length,
            lkey: raw.lkey,
        };
    }
    list.len = num;
    Ok(())
}

const SEND_DMA: usize = offset_of!(bindings::rxe_send_wqe, dma);
const DMA_LENGTH: usize = offset_of!(bindings::rxe_dma_info, length);
const DMA_NUM_SGE: usize = offset_of!(bindings::rxe_dma_info, num_sge);
const DMA_DATA: usize = size_of::<bindings::rxe_dma_info>();

impl SendWqe {
    /// The identifier and the completion opcode of a send WQE, read from a
    /// copy that may not parse (flushing needs no more); an opcode sroce
    /// does not know completes as a send.
    pub(crate) fn id_and_completion(buf: &[u8]) -> Result<(u64, WcOpcode)> {
        let wr: bindings::rxe_send_wr = read_at(buf, 0)?;
        let opcode = match SendOp::from_raw(wr.opcode) {
            Some(op) => op.completion(),
            None => WcOpcode::Send,
        };
        Ok((wr.wr_id, opcode))
    }

    /// Whether a send WQE asks for a completion of its own
    /// (`IBV_SEND_SIGNALED`), read from a copy of at least [`WQE_ID_LEN`]
    /// bytes.
    pub(crate) fn asks_completion(buf: &[u8]) -> Result<bool> {
        let wr: bindings::rxe_send_wr = read_at(buf, 0)?;
        Ok(wr.send_flags & (bindings::ib_send_flags_IB_SEND_SIGNALED as u32) != 0)
    }

    /// Parses a kernel copy of a send queue slot into `dst`, in place (a
    /// WQE is 650 bytes: it is written where it is kept, not moved there);
    /// `dst` is `None` on error. `max_sge` and `max_inline` are the QP's
    /// granted limits.
    pub(crate) fn parse_into(
        buf: &[u8],
        max_sge: usize,
        max_inline: usize,
        dst: &mut Option<Self>,
    ) -> Result {
        *dst = None;
        let wr: bindings::rxe_send_wr = read_at(buf, 0)?;
        let op = SendOp::from_raw(wr.opcode).ok_or(EINVAL)?;
        // Userspace uses the same flag values as the kernel (`IBV_SEND_*`).
        let f = wr.send_flags;
        let flags = SendFlags {
            fence: f & (bindings::ib_send_flags_IB_SEND_FENCE as u32) != 0,
            signaled: f & (bindings::ib_send_flags_IB_SEND_SIGNALED as u32) != 0,
            solicited: f & (bindings::ib_send_flags_IB_SEND_SOLICITED as u32) != 0,
            inline: f & (bindings::ib_send_flags_IB_SEND_INLINE as u32) != 0,
        };
        let length: u32 = read_at(buf, SEND_DMA + DMA_LENGTH)?;
        let num_sge: u32 = read_at(buf, SEND_DMA + DMA_NUM_SGE)?;
        let data_at = SEND_DMA + DMA_DATA;
        // Inline bytes (ATOMIC WRITE: its 8-byte operand, where inline data
        // would be), or `None` for a scatter list.
        let inline = if op == SendOp::AtomicWrite {
            if length != 8 {
                return Err(EINVAL);
            }
            Some(buf.get(data_at..data_at + 8).ok_or(EINVAL)?)
        } else if flags.inline {
            let len = length as usize;
            if len > max_inline || len > 256 {
                return Err(EINVAL);
            }
            Some(buf.get(data_at..data_at + len).ok_or(EINVAL)?)
        } else {
            // The message is what its SGEs describe. rdma-core 44's rxe
            // library writes a wrong total for `ibv_wr_set_sge_list` (the
            // first SGE's length once per SGE); only a WQE without SGEs
            // must agree with its header (a length there is malformed).
            if num_sge == 0 && length != 0 {
                return Err(EINVAL);
            }
            None
        };
        // SAFETY: every union member is plain integers; the opcode says which
        // one is meaningful, and reading another is still defined.
        let remote = unsafe {
            match op {
                SendOp::CompareSwap | SendOp::FetchAdd => RemoteTarget {
                    remote_addr: wr.wr.atomic.remote_addr,
                    rkey: wr.wr.atomic.rkey,
                    compare_add: wr.wr.atomic.compare_add,
                    swap: wr.wr.atomic.swap,
                },
                SendOp::Write | SendOp::WriteWithImm | SendOp::Read | SendOp::AtomicWrite => {
                    RemoteTarget {
                        remote_addr: wr.wr.rdma.remote_addr,
                        rkey: wr.wr.rdma.rkey,
                        ..RemoteTarget::default()
                    }
                }
                _ => RemoteTarget::default(),
            }
        };
        // SAFETY: both union members are a 32-bit integer.
        let imm_or_inv = unsafe { wr.ex.invalidate_rkey };
        let fast_reg = match op {
            // SAFETY: plain integers of the union's `reg` member (its
            // pointer is never read).
            SendOp::RegMr => unsafe {
                FastRegTarget {
                    key: wr.wr.reg.key,
                    access: wr.wr.reg.access,
                }
            },
            _ => FastRegTarget::default(),
        };
        let bind = match op {
            // SAFETY: plain integers of the union's `mw` member.
            SendOp::BindMw => unsafe {
                let mw = wr.wr.mw;
                BindRequest {
                    window_key: mw.mw_rkey,
                    new_key: mw.rkey,
                    region_key: mw.mr_lkey,
                    addr: mw.addr,
                    length: mw.length,
                    access: mw.access,
                }
            },
            _ => BindRequest::default(),
        };
        // SAFETY: plain integers and byte arrays; meaningful for UD QPs.
        let ud = unsafe { wr.wr.ud };
        let ud = UdTarget {
            remote_qpn: ud.remote_qpn,
            remote_qkey: ud.remote_qkey,
            ah_num: ud.ah_num,
            av: (ud.ah_num == 0).then(|| embedded_av(&ud.av)).flatten(),
        };
        let w = dst.insert(Self {
            wr_id: wr.wr_id,
            op,
            flags,
            imm_or_inv,
            remote,
            data: SendData::Sges(SgeList::EMPTY),
            length,
            ud,
            fast_reg,
            bind,
        });
        let parsed = match inline {
            Some(src) => {
                let mut bytes = [0u8; 256];
                bytes[..src.len()].copy_from_slice(src);
                w.data = SendData::Inline {
                    bytes,
                    len: src.len(),
                };
                Ok(())
            }
            None => match &mut w.data {
                SendData::Sges(list) => parse_sges(buf, data_at, num_sge, max_sge, list)
                    .and_then(|()| list.total_len().ok_or(EINVAL))
                    .map(|total| w.length = total),
                SendData::Inline { .. } => Err(EINVAL),
            },
        };
        if parsed.is_err() {
            *dst = None;
        }
        parsed
    }
}

/// The address an older provider library embeds in a UD WQE.
fn embedded_av(av: &bindings::rxe_av) -> Option<AddressVector> {
    let mapped = |a: [u8; 4]| {
        let mut g = [0u8; 16];
        g[10] = 0xff;
        g[11] = 0xff;
        g[12..].copy_from_slice(&a);
        g
    };
    // SAFETY: the unions are byte views of plain data; `network_type` says
    // which socket address is meaningful.
    let (dgid, sgid) = unsafe {
        let dgid = av.grh.dgid.raw;
        let sgid = match u32::from(av.network_type) {
            bindings::RXE_NETWORK_TYPE_IPV4 => {
                mapped(av.sgid_addr._sockaddr_in.sin_addr.s_addr.to_ne_bytes())
            }
            bindings::RXE_NETWORK_TYPE_IPV6 => av.sgid_addr._sockaddr_in6.sin6_addr.in6_u.u6_addr8,
            _ => return None,
        };
        (dgid, sgid)
    };
    Some(AddressVector {
        dgid,
        sgid,
        sgid_index: av.grh.sgid_index,
        flow_label: av.grh.flow_label,
        hop_limit: av.grh.hop_limit,
        traffic_class: av.grh.traffic_class,
        dmac: av.dmac,
        sl: 0,
        // Decided by the source GID's type, which the caller reads from
        // the device's table.
        roce_v1: false,
    })
}

const RECV_DMA: usize = offset_of!(bindings::rxe_recv_wqe, dma);

impl RecvWqe {
    /// The identifier of a receive WQE.
    pub(crate) fn id(buf: &[u8]) -> Result<u64> {
        read_at(buf, 0)
    }

    /// Parses a kernel copy of a receive queue slot into `dst`, in place
    /// (see [`SendWqe::parse_into`]); `dst` is `None` on error. `max_sge`
    /// is the queue's granted limit.
    pub(crate) fn parse_into(buf: &[u8], max_sge: usize, dst: &mut Option<Self>) -> Result {
        *dst = None;
        let wr_id: u64 = read_at(buf, 0)?;
        let num_sge: u32 = read_at(buf, RECV_DMA + DMA_NUM_SGE)?;
        let w = dst.insert(Self {
            wr_id,
            sges: SgeList::EMPTY,
        });
        let parsed = parse_sges(buf, RECV_DMA + DMA_DATA, num_sge, max_sge, &mut w.sges)
            .and_then(|()| w.sges.total_len().ok_or(EINVAL).map(|_| ()));
        if parsed.is_err() {
            *dst = None;
        }
        parsed
    }
}

const _: () = {
    assert!(WQE_ID_LEN >= size_of::<u64>());
    assert!(SEND_DMA + DMA_DATA == SEND_WQE_HEADER);
    assert!(RECV_DMA + DMA_DATA == RECV_WQE_HEADER);
};
