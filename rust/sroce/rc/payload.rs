// SPDX-License-Identifier: GPL-2.0

//! Message bytes between local buffers and packets: the scatter/gather
//! lists of work requests walked under the QP's PD, and a packet built
//! around a payload. Shared by the RC and UD data paths.

use crate::net::route::RouteCache;
use crate::rdma::{
    access::Access, device::Device, mr_odp::NOT_PRESENT, qp::Qp, wc::WcStatus, wqe::Sge,
};
use crate::roce::packet::Headers;
use crate::sroce::{device::SroceDevice, io, odp::PageFault};
use kernel::prelude::*;

/// Why a local buffer could not be read or written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BufferError {
    /// The work request completes with this status.
    Status(WcStatus),
    /// A page of an on-demand region is absent: fault it in, then try
    /// again (see [`crate::sroce::odp`]).
    NotPresent(PageFault),
}

impl From<WcStatus> for BufferError {
    fn from(s: WcStatus) -> Self {
        Self::Status(s)
    }
}

/// Walks the pieces of the local buffer `sges` that hold `len` message bytes
/// from message byte `offset`: calls `f(lkey, addr, at, n)` for `n` bytes at
/// `addr` that are message bytes `at..at + n` of the walk. `LocLenErr` if
/// the buffer ends first.
pub(super) fn for_each_piece(
    sges: &[Sge],
    mut offset: u32,
    len: usize,
    mut f: impl FnMut(u32, u64, usize, usize) -> core::result::Result<(), BufferError>,
) -> core::result::Result<(), BufferError> {
    let mut done = 0;
    for s in sges {
        if done == len {
            break;
        }
        if offset >= s.length {
            offset -= s.length;
            continue;
        }
        let n = ((s.length - offset) as usize).min(len - done);
        f(s.lkey, s.addr.wrapping_add(u64::from(offset)), done, n)?;
        done += n;
        offset = 0;
    }
    if done == len {
        Ok(())
    } else {
        Err(WcStatus::LocLenErr.into())
    }
}

/// The error of a copy to or from `n` bytes at `addr` under `lkey`.
fn copy_error(e: Error, lkey: u32, addr: u64, n: usize, write: bool) -> BufferError {
    if e == NOT_PRESENT {
        BufferError::NotPresent(PageFault {
            key: lkey,
            iova: addr,
            len: n as u64,
            write,
        })
    } else {
        WcStatus::LocProtErr.into()
    }
}

/// Writes `data` into the local buffer `sges` at message byte `offset`,
/// checking each piece under the QP's PD with `right`. Pieces before one
/// whose page is absent are written; writing them again is harmless (the
/// buffer belongs to the operation until it completes).
pub(crate) fn scatter(
    dev: &Device<SroceDevice>,
    qp: &Qp<SroceDevice>,
    sges: &[Sge],
    offset: u32,
    data: &[u8],
    right: Access,
) -> core::result::Result<(), BufferError> {
    for_each_piece(sges, offset, data.len(), |lkey, addr, at, n| {
        let mr = dev
            .check_mr_access(lkey, qp.pd(), addr, n as u64, right)
            .map_err(|_| WcStatus::LocProtErr)?;
        let piece = data.get(at..at + n).ok_or(WcStatus::LocLenErr)?;
        mr.copy_to(addr, piece)
            .map_err(|e| copy_error(e, lkey, addr, n, true))
    })
}

/// Fills `out` from the local buffer `sges` at message byte `offset`.
pub(crate) fn gather(
    dev: &Device<SroceDevice>,
    qp: &Qp<SroceDevice>,
    sges: &[Sge],
    offset: u32,
    out: &mut [u8],
) -> core::result::Result<(), BufferError> {
    let len = out.len();
    for_each_piece(sges, offset, len, |lkey, addr, at, n| {
        let mr = dev
            .check_mr_access(lkey, qp.pd(), addr, n as u64, Access::NONE)
            .map_err(|_| WcStatus::LocProtErr)?;
        let piece = out.get_mut(at..at + n).ok_or(WcStatus::LocLenErr)?;
        mr.copy_from(addr, piece)
            .map_err(|e| copy_error(e, lkey, addr, n, false))
    })
}

/// Transport bytes (ICRC excluded) of a packet with `headers` and
/// `payload_len` bytes of payload: headers, payload, pad.
fn packet_len(headers: &Headers, payload_len: usize) -> usize {
    headers.header_len() + payload_len + crate::roce::packet::pad_len(payload_len) as usize
}

/// Writes `headers` into `buf` and lets `fill` write the `payload_len`
/// bytes after them (the pad stays as the zeroed buffer has it).
fn write_packet(
    buf: &mut [u8],
    headers: &Headers,
    payload_len: usize,
    fill: impl FnOnce(&mut [u8]) -> Result,
) -> Result {
    let n = headers.write(payload_len, buf).map_err(|_| EINVAL)?;
    fill(buf.get_mut(n..n + payload_len).ok_or(EINVAL)?)
}

/// Sends one packet with `headers` and `payload_len` bytes that `fill`
/// writes.
pub(crate) fn send_packet(
    dev: &Device<SroceDevice>,
    routes: &mut RouteCache,
    flow: &io::Flow,
    headers: &Headers,
    payload_len: usize,
    fill: impl FnOnce(&mut [u8]) -> Result,
) -> Result {
    let total = packet_len(headers, payload_len);
    io::send(dev, routes, flow, total, |buf| {
        write_packet(buf, headers, payload_len, fill)?;
        Ok(total)
    })?;
    Ok(())
}

/// Sends one packet as [`send_packet`] does, gathered into `burst` with
/// the packets around it when it can be (see [`io::Burst`]); `more` is how
/// many packets of the same flow are expected to follow. A packet with
/// extension headers (a first one with a RETH or AETH) is longer than the
/// middle ones after it, so it opens no burst.
pub(crate) fn burst_packet(
    burst: &mut io::Burst<'_>,
    routes: &mut RouteCache,
    flow: &io::Flow,
    headers: &Headers,
    payload_len: usize,
    more: usize,
    fill: impl FnOnce(&mut [u8]) -> Result,
) -> Result {
    let more = if headers.header_len() == crate::roce::bth::BTH_LEN {
        more
    } else {
        0
    };
    burst.send(
        routes,
        flow,
        packet_len(headers, payload_len),
        more,
        |buf| write_packet(buf, headers, payload_len, fill),
    )
}
