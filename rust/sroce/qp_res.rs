// SPDX-License-Identifier: GPL-2.0

//! sroce's attributes of a queue pair in `rdma resource show qp -dd`: the
//! transport's PSNs and the session group.

use super::device::SroceDevice;
use crate::rdma::{qp::Qp, restrack::DriverAttrs};
use crate::roce::session::ctl as abi;
use kernel::prelude::*;

/// The policy's name as a C string (the attribute needs NUL termination).
fn policy_cstr(p: crate::roce::session::Policy) -> &'static CStr {
    match abi::policy_to_u8(p) {
        0 => c"hash",
        1 => c"round-robin",
        2 => c"least-outstanding",
        _ => c"failover",
    }
}

/// Writes the attributes; a QP that is not connected has only its group
/// override (or none).
pub(crate) fn fill(qp: &Qp<SroceDevice>, out: &mut DriverAttrs<'_>) -> Result {
    let inner = qp.data().lock();
    let Some(rc) = inner.rc.as_ref() else {
        return Ok(());
    };
    let (sq_psn, una, rq_psn) = rc.psns();
    out.put_u32_hex(c"sq_psn", sq_psn)?;
    out.put_u32_hex(c"unacked_psn", una)?;
    out.put_u32_hex(c"rq_psn", rq_psn)?;
    // Where the send work stands: WQEs in the ring not yet retired, those
    // of them the engine has taken, and whether its window has room.
    out.put_u32(c"sq_ring_pending", inner.rings.send.pending())?;
    out.put_u32(c"sq_taken", rc.taken)?;
    out.put_u32(c"sq_window_room", u32::from(rc.window_has_room()))?;
    let sessions = &rc.sessions;
    out.put_u32(
        c"session_group_size",
        u32::try_from(sessions.sessions().count()).unwrap_or(u32::MAX),
    )?;
    out.put_str(c"session_policy", policy_cstr(sessions.policy()))?;
    let up = sessions
        .sessions()
        .filter(|(s, _)| s.state() == crate::roce::session::State::Up)
        .count();
    out.put_u32(c"sessions_up", u32::try_from(up).unwrap_or(u32::MAX))?;
    // The multipath transport, per direction: this side sprays and reads
    // SACKs (its peer reorders); this side holds and SACKs.
    out.put_u32(c"multipath_tx", u32::from(rc.mp.requester_on()))?;
    out.put_u32(c"multipath_rx", u32::from(rc.mp.responder_on()))?;
    if let Some(us) = sessions.last_failover_us() {
        out.put_u32(c"last_failover_us", u32::try_from(us).unwrap_or(u32::MAX))?;
        let max = sessions.max_failover_us();
        out.put_u32(c"max_failover_us", u32::try_from(max).unwrap_or(u32::MAX))?;
    }
    Ok(())
}
