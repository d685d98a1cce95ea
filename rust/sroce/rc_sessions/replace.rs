// SPDX-License-Identifier: GPL-2.0

//! Giving a congested session a fresh 5-tuple (`roce::multipath::
//! congestion` decides when): a new source port reserved by the QP's work
//! item, swapped in under the QP's lock, reported on `sroce-events`.

use super::*;

/// What a replacement needs from the group, read under the QP's lock.
struct ReplaceRequest {
    generation: u32,
    id: SessionId,
    flow: io::Flow,
    taken: [u16; MAX_SESSIONS],
    link: Option<usize>,
    links: [i32; MAX_SESSIONS],
    range: PortRange,
    qpn: u32,
    replacements: u64,
}

impl<const W: usize> QpSessions<W> {
    fn replace_request(&self) -> Option<ReplaceRequest> {
        let id = self.replace_wanted?;
        let i = usize::from(id.0);
        let flow = *self.flows.get(i)?;
        let mut taken = [0u16; MAX_SESSIONS];
        for (t, f) in taken.iter_mut().zip(self.flows.iter()) {
            *t = f.src_port;
        }
        let mut links = [0i32; MAX_SESSIONS];
        for (l, k) in links.iter_mut().zip(self.links.iter()) {
            *l = k.ifindex;
        }
        let session = self.group.sessions().get(i)?;
        Some(ReplaceRequest {
            generation: self.generation,
            id,
            flow,
            taken,
            link: (!self.links.is_empty()).then_some(usize::from(session.local_addr())),
            links,
            range: self.origin.ports,
            qpn: self.origin.qpn,
            replacements: session.counters().replacements,
        })
    }

    /// Session `id` of the group `req` was read from leaves from now on
    /// from the port `r` holds, through link `link`. Returns whether it
    /// did, and the reservation to release unlocked (the old one, or `r`
    /// if the group changed meanwhile).
    fn apply_replacement(
        &mut self,
        req: &ReplaceRequest,
        r: ReservedPort,
        link: usize,
        now_us: u64,
    ) -> (bool, Option<ReservedPort>) {
        self.replace_wanted = None;
        let id = req.id;
        let i = usize::from(id.0);
        // A session that failed since it was asked for is the health
        // machine's now (a fresh 5-tuple would declare it Up).
        if self.generation != req.generation
            || self.flows.get(i).map(|f| f.src_port) != Some(req.flow.src_port)
            || !self.is_up(id)
        {
            return (false, Some(r));
        }
        let port = r.port();
        let old = if i == 0 {
            self.port0.replace(r)
        } else {
            match self.ports.get_mut(i - 1) {
                Some(slot) => Some(core::mem::replace(slot, r)),
                None => return (false, Some(r)),
            }
        };
        // Only the port changes: a session pinned to its link stays so.
        if let Some(f) = self.flows.get_mut(i) {
            f.src_port = port;
        }
        let _ = self
            .group
            .replace(id, port, u8::try_from(link).unwrap_or(0), now_us);
        (true, old)
    }
}

/// Gives the session a pass asked for a fresh 5-tuple (its congestion
/// stayed high, `rc::multipath`): a new source port from the device's
/// range is reserved unlocked (a socket bind may sleep), preferably one
/// whose route leaves through another of the group's links than the
/// session's, swapped in under the QP's lock and reported on the
/// `sroce-events` group; the old port is released afterwards. Messages in
/// flight on the old port complete normally (a receiver takes a QP's
/// packets from any source port). Process context: the work item. Not
/// inlined: its frame stays out of the work item's.
#[inline(never)]
pub(crate) fn replace_wanted(qp: &Qp<SroceDevice>) {
    let dev = qp.device();
    let req = {
        let inner = qp.data().lock();
        inner
            .rc
            .as_ref()
            .and_then(|rc| rc.sessions.replace_request())
    };
    let Some(req) = req else { return };
    let picked = dev
        .netdev(PORT)
        .and_then(|ndev| pick_replacement(dev, ndev.net(), &req));
    let mut inner = qp.data().lock();
    let Some(rc) = inner.rc.as_mut() else { return };
    let rc: &mut crate::sroce::rc::RcState = rc;
    let (_, _, now_us) = rc.sessions_origin();
    let Some((r, link)) = picked else {
        // Nothing free now: asked again after the next congested epochs.
        rc.sessions.replace_wanted = None;
        return;
    };
    let (swapped, old) = rc.sessions.apply_replacement(&req, r, link, now_us);
    if swapped {
        rc.mp.session_replaced(req.id, &mut rc.sessions, now_us);
        dev.data().io.counters.inc(Counter::MpReplaced);
        let policy = rc.sessions.policy();
        let i = usize::from(req.id.0);
        if let (Some(s), Some(f)) = (
            rc.sessions.group.sessions().get(i),
            rc.sessions.flows.get(i),
        ) {
            crate::sroce::session_events::report(
                dev,
                qp.data().qpn(),
                policy,
                i,
                s,
                f,
                Some(req.flow.src_port),
            );
        }
    }
    drop(inner);
    drop(old);
}

/// A fresh port for the session of `req`, reserved, on the session's own
/// link: its route leaves through that link or through none of the
/// group's. Never onto another session's link: two sessions on one path
/// would leave the other unwatched, and one failure would take both (two
/// replacements that moved both sessions onto the link then cut failed a
/// stream with `RETRY_EXC_ERR`). In a fabric that hashes flows onto paths
/// a fresh port is another path all the same. Returns the port and the
/// session's link index. Its own frame (route lookups, a socket bind):
/// inlined, its locals would add to the swap's and the report's.
#[inline(never)]
fn pick_replacement(
    dev: &Device<SroceDevice>,
    net: &crate::net::netns::Net,
    req: &ReplaceRequest,
) -> Option<(ReservedPort, usize)> {
    let span = req.range.len().max(1);
    let seed = req.qpn ^ u32::from(req.flow.src_port) ^ (req.replacements as u32).rotate_left(16);
    let mut cursor = crate::roce::session::port_range::hash_32(seed, 16) % span;
    let links = &req.links[..];
    for _ in 0..PORT_TRIES {
        let port = (u32::from(req.range.first()) + cursor % span) as u16;
        cursor = cursor.wrapping_add(1);
        if req.taken.contains(&port) {
            continue;
        }
        let candidate = io::Flow {
            src_port: port,
            out: io::OutPort::Routed,
            ..req.flow
        };
        let out = io::out_ifindex(dev, &candidate).ok();
        let link = out.and_then(|o| links.iter().position(|&l| l == o && o != 0));
        if link.is_some_and(|l| Some(l) != req.link) {
            continue;
        }
        if let Ok(r) = ReservedPort::new(net, port) {
            return Some((r, req.link.unwrap_or(0)));
        }
    }
    None
}
