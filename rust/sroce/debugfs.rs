// SPDX-License-Identifier: GPL-2.0

//! Test hooks in debugfs, `/sys/kernel/debug/sroce/` (root only):
//!
//! - `pinned_pages` (read): pages the module's memory registrations hold
//!   pinned, all devices together (tests check it returns to zero);
//!
//! and per device, in `DEV/`:
//!
//! - `rx_opcodes` (read): `0xOP COUNT` for each BTH opcode received;
//! - `xmit` (write): `SRC DST SPORT LEN` sends one RoCEv2 UD SEND-only
//!   packet to QP 1 (the GSI QP, GSI Q_Key) from address SRC to DST with
//!   UDP source port SPORT and LEN payload bytes `0, 1, 2, ...` (mod 256),
//!   exercising the send path before queue pairs exist. One packet per
//!   write; the write fails with the send's error.
//!
//! The directory is named after the device at creation and not renamed
//! with it. These files are for tests and debugging, not an interface.

use super::{device::SroceDevice, io, recv::OpcodeCounts};
use crate::net::{addr::IpAddr, route::RouteCache};
use crate::rdma::device::{Device, Registry};
use crate::roce::{
    bth::Bth,
    deth::Deth,
    icrc::ICRC_LEN,
    opcode::{Opcode, Operation, Transport},
    packet::{packet_len, Headers},
    psn::Psn,
};
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{
    debugfs::{Dir, File, Scope},
    fmt,
    prelude::*,
    str::CStr,
    sync::Arc,
    uaccess::UserSliceReader,
};

/// Q_Key of the GSI QP (IBTA).
const GSI_QKEY: u32 = 0x8001_0000;
/// Largest payload the `xmit` hook sends.
const XMIT_MAX_PAYLOAD: usize = 4096;

/// What a device's debugfs files use.
pub(crate) struct DevDebug {
    /// The device's [`SroceDevice::id`], to find it in `registry`.
    id: u32,
    registry: Arc<Registry<SroceDevice>>,
    opcodes: Arc<OpcodeCounts>,
    /// PSN of the next hook packet.
    psn: AtomicU32,
}

/// The module-wide `pinned_pages` file in `root`.
pub(crate) fn pinned_pages_file(root: &Dir) -> impl PinInit<File<()>> + '_ {
    root.read_callback_file(c"pinned_pages", (), &show_pinned_pages)
}

fn show_pinned_pages(_: &(), f: &mut fmt::Formatter<'_>) -> fmt::Result {
    writeln!(f, "{}", crate::rdma::umem::pinned_pages())
}

/// The debugfs directory of the device `name`, removed when dropped.
pub(crate) fn device_dir<'a>(
    root: &'a Dir,
    name: &'a CStr,
    id: u32,
    registry: Arc<Registry<SroceDevice>>,
    opcodes: Arc<OpcodeCounts>,
) -> impl PinInit<Scope<DevDebug>, Error> + 'a {
    let data = try_init!(DevDebug {
        id,
        registry,
        opcodes,
        psn: AtomicU32::new(0),
    });
    root.scope(data, name, |d, dir| {
        dir.read_callback_file(c"rx_opcodes", &d.opcodes, &show_opcodes);
        dir.write_only_callback_file(c"xmit", d, &xmit);
    })
}

fn show_opcodes(counts: &Arc<OpcodeCounts>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    for (op, n) in counts.nonzero() {
        writeln!(f, "{op:#04x} {n}")?;
    }
    Ok(())
}

/// The next whitespace-separated word of `text`.
fn word<'t>(text: &mut &'t [u8]) -> Option<&'t [u8]> {
    let start = text.iter().position(|b| !b.is_ascii_whitespace())?;
    let rest = &text[start..];
    let end = rest
        .iter()
        .position(|b| b.is_ascii_whitespace())
        .unwrap_or(rest.len());
    let (w, tail) = rest.split_at(end);
    *text = tail;
    Some(w)
}

fn number<N: core::str::FromStr>(w: Option<&[u8]>) -> Result<N> {
    core::str::from_utf8(w.ok_or(EINVAL)?)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(EINVAL)
}

fn xmit(d: &DevDebug, reader: &mut UserSliceReader) -> Result {
    let mut buf = [0u8; 128];
    let n = reader.len();
    if n > buf.len() {
        return Err(EINVAL);
    }
    reader.read_slice(&mut buf[..n])?;
    let mut text = &buf[..n];
    let src = IpAddr::parse(word(&mut text).ok_or(EINVAL)?).ok_or(EINVAL)?;
    let dst = IpAddr::parse(word(&mut text).ok_or(EINVAL)?).ok_or(EINVAL)?;
    let src_port: u16 = number(word(&mut text))?;
    let payload: usize = number(word(&mut text))?;
    if payload > XMIT_MAX_PAYLOAD || word(&mut text).is_some() {
        return Err(EINVAL);
    }
    let flow = io::Flow {
        src,
        dst,
        src_port,
        tclass: 0,
        hop_limit: 64,
        out: io::OutPort::Device,
        encap: io::Encap::RoceV2,
    };
    let psn = d.psn.fetch_add(1, Ordering::Relaxed);
    d.registry
        .with_device(
            |dev| dev.data().id == d.id,
            |dev| send_gsi(dev, &flow, psn, payload),
        )
        .ok_or(ENODEV)?
}

/// Sends a UD SEND-only packet to the GSI QP with a counting payload.
fn send_gsi(dev: &Device<SroceDevice>, flow: &io::Flow, psn: u32, payload: usize) -> Result {
    let opcode = Opcode::new(Transport::Ud, Operation::SendOnly);
    let mut headers = Headers::new(Bth::new(opcode, 1, Psn::new(psn)));
    headers.deth = Some(Deth {
        qkey: GSI_QKEY,
        src_qp: 1,
    });
    let len = packet_len(opcode, payload).map_err(|_| EINVAL)? - ICRC_LEN;
    // A test packet: its route is looked up for it alone.
    io::send(dev, &mut RouteCache::new(), flow, len, |buf| {
        let at = headers.write(payload, buf).map_err(|_| EINVAL)?;
        let body = buf.get_mut(at..at + payload).ok_or(EINVAL)?;
        for (i, b) in body.iter_mut().enumerate() {
            *b = i as u8;
        }
        // The pad after the payload is already zero.
        Ok(len)
    })?;
    Ok(())
}
