// SPDX-License-Identifier: GPL-2.0

//! Session events: when a session of a connected queue pair goes down,
//! comes back up or starts probing, or gets a fresh 5-tuple (then with
//! [`abi::ATTR_REPLACED_SPORT`], the port it left from before), a
//! [`abi::CMD_SESSION_EVENT`] message (the attributes of a `session show`
//! entry, with the new state) goes to
//! the `sroce-events` multicast group of the generic netlink family, in the
//! network namespace of the device's net device (`sroce monitor` listens).
//!
//! Reported after each pass of the queue pair that saw the change (so a
//! flap within one pass shows only in the session's counters). Best effort,
//! like every netlink event: a message that cannot be allocated is not
//! sent, and nothing is built while no one listens.

use super::{ctl, device::SroceDevice, io};
use crate::net::genl;
use crate::rdma::device::{Device, PORT};
use crate::roce::session::{ctl as abi, Policy, Session};

/// Reports session `id` of queue pair `qpn` (its state is the new one);
/// `replaced`: it got a fresh 5-tuple (`flow`) and left from this port
/// before. Any context.
pub(crate) fn report(
    dev: &Device<SroceDevice>,
    qpn: u32,
    policy: Policy,
    id: usize,
    session: &Session,
    flow: &io::Flow,
    replaced: Option<u16>,
) {
    let Some(ndev) = dev.netdev(PORT) else {
        return;
    };
    // Best effort (see the module documentation).
    let _ = genl::multicast(ndev.net(), ctl::GROUP_EVENTS, abi::CMD_SESSION_EVENT, |m| {
        m.put(abi::ATTR_DEV_NAME, dev.name())?;
        m.put(abi::ATTR_QPN, &qpn)?;
        m.put(abi::ATTR_POLICY, &abi::policy_to_u8(policy))?;
        ctl::fill_session(m, id, session, flow)?;
        if let Some(old) = replaced {
            m.put(abi::ATTR_REPLACED_SPORT, &old)?;
        }
        Ok(())
    });
}
