//! Receive-side acceptance: which 5-tuples a connected QP takes packets
//! from.
//!
//! The QP is found by the BTH destination QP number, as in every RoCEv2
//! stack; this filter then checks the packet's addresses against the QP
//! (the job of rxe's `check_addr()`, which requires source IP == the AV's
//! destination and destination IP == the AV's source). It applies to RC
//! and UC QPs; UD QPs accept any sender (Q_Key check) and are not
//! filtered.
//!
//! The rule:
//!
//! 1. the UDP destination port is 4791;
//! 2. the destination IP is one of the QP group's local addresses;
//! 3. the source IP is one of the peer's addresses;
//! 4. the UDP source port is **not** checked, for either kind of peer: a
//!    plain RoCEv2 peer picks it itself (rxe: `rdma_get_udp_sport()` of its
//!    flow label, which an application may change), and a sroce peer
//!    spreads a QP over up to 64 ports chosen by its own allocator. For a
//!    plain peer the address sets are exactly the AV's two addresses, i.e.
//!    rxe's rule unchanged.
//!
//! For a sroce peer the filter also *learns* the peer's sessions
//! (source address, source port) as they appear, up to `N` of them, and
//! counts packets and bytes per learned session; packets beyond `N`
//! sessions are accepted and counted apart.
//!
//! Ordering is not the filter's business: packets of one QP arriving on
//! several 5-tuples go through the same PSN check as on one path. The
//! responder accepts the expected PSN only, re-ACKs duplicates and NAKs
//! the first out-of-sequence PSN; the requester drops stale or duplicate
//! responses by PSN. Reordering between sessions is therefore handled like
//! a loss on a single path (go-back-N), and exactly-once delivery holds.

use super::ROCE_V2_UDP_DPORT;

/// An IP address as 16 bytes: IPv6, or IPv4 mapped (`::ffff:a.b.c.d`), the
/// form RoCEv2 GIDs use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NetAddr(pub [u8; 16]);

impl NetAddr {
    /// The IPv4-mapped address of `a.b.c.d`.
    pub const fn from_v4(v4: [u8; 4]) -> Self {
        let [a, b, c, d] = v4;
        NetAddr([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, a, b, c, d])
    }

    /// `true` for an IPv4-mapped address.
    pub fn is_v4(&self) -> bool {
        self.0
            .starts_with(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF])
    }
}

/// What the peer of a QP is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PeerKind {
    /// A standard RoCEv2 stack (rxe, a RoCE NIC): one address each side.
    #[default]
    Plain,
    /// Another sroce: may send from several addresses and ports.
    Sroce,
}

/// Addresses and ports of a received packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FiveTuple {
    /// IP source (the peer).
    pub src: NetAddr,
    /// IP destination (this host).
    pub dst: NetAddr,
    /// UDP source port.
    pub sport: u16,
    /// UDP destination port.
    pub dport: u16,
}

/// Why a packet is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reject {
    /// The UDP destination port is not 4791.
    NotRoceV2Port,
    /// The destination IP is not one of the group's local addresses.
    WrongDestination,
    /// The source IP is not one of the peer's addresses.
    UnknownSource,
}

/// The filter's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Accept; `rx_session` is the learned peer session it was counted on
    /// (`None`: a plain peer, or more peer sessions than the table holds).
    Accept {
        /// Index of the learned peer session.
        rx_session: Option<u8>,
    },
    /// Drop (and count) the packet.
    Reject(Reject),
}

/// A peer session seen on receive, with its counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RxSession {
    /// Peer address.
    pub src: NetAddr,
    /// Peer UDP source port.
    pub sport: u16,
    /// Packets received.
    pub packets: u64,
    /// Bytes received (UDP payload).
    pub bytes: u64,
}

/// Per-QP acceptance filter: up to `A` local and `A` peer addresses, up to
/// `N` learned peer sessions.
#[derive(Clone, Debug)]
pub struct ReceiveFilter<const A: usize, const N: usize> {
    kind: PeerKind,
    local: [NetAddr; A],
    n_local: usize,
    remote: [NetAddr; A],
    n_remote: usize,
    rx: [RxSession; N],
    n_rx: usize,
    other_packets: u64,
    other_bytes: u64,
    rejected: u64,
}

impl<const A: usize, const N: usize> ReceiveFilter<A, N> {
    /// The filter of a QP with a plain RoCEv2 peer: exactly rxe's rule
    /// (`local` = the AV's source address, `remote` = its destination), any
    /// source port.
    pub fn plain(local: NetAddr, remote: NetAddr) -> Self {
        let mut f = Self::empty(PeerKind::Plain);
        if let Some(s) = f.local.first_mut() {
            *s = local;
            f.n_local = 1;
        }
        if let Some(s) = f.remote.first_mut() {
            *s = remote;
            f.n_remote = 1;
        }
        f
    }

    /// The filter of a QP with a sroce peer: the group's local addresses
    /// and the peer's addresses (extra entries beyond `A` are ignored).
    pub fn sroce(locals: &[NetAddr], remotes: &[NetAddr]) -> Self {
        let mut f = Self::empty(PeerKind::Sroce);
        for (slot, a) in f.local.iter_mut().zip(locals) {
            *slot = *a;
            f.n_local = f.n_local.saturating_add(1);
        }
        for (slot, a) in f.remote.iter_mut().zip(remotes) {
            *slot = *a;
            f.n_remote = f.n_remote.saturating_add(1);
        }
        f
    }

    fn empty(kind: PeerKind) -> Self {
        ReceiveFilter {
            kind,
            local: [NetAddr::default(); A],
            n_local: 0,
            remote: [NetAddr::default(); A],
            n_remote: 0,
            rx: [RxSession::default(); N],
            n_rx: 0,
            other_packets: 0,
            other_bytes: 0,
            rejected: 0,
        }
    }

    /// The peer kind.
    pub fn kind(&self) -> PeerKind {
        self.kind
    }

    /// The learned peer sessions.
    pub fn rx_sessions(&self) -> &[RxSession] {
        self.rx.get(..self.n_rx).unwrap_or(&[])
    }

    /// Accepted packets not counted on a learned session.
    pub fn other_packets(&self) -> u64 {
        self.other_packets
    }

    /// Bytes of [`Self::other_packets`].
    pub fn other_bytes(&self) -> u64 {
        self.other_bytes
    }

    /// Rejected packets.
    pub fn rejected(&self) -> u64 {
        self.rejected
    }

    /// The verdict on `t`, without counting.
    pub fn check(&self, t: &FiveTuple) -> Result<(), Reject> {
        if t.dport != ROCE_V2_UDP_DPORT {
            return Err(Reject::NotRoceV2Port);
        }
        let locals = self.local.get(..self.n_local).unwrap_or(&[]);
        if !locals.contains(&t.dst) {
            return Err(Reject::WrongDestination);
        }
        let remotes = self.remote.get(..self.n_remote).unwrap_or(&[]);
        if !remotes.contains(&t.src) {
            return Err(Reject::UnknownSource);
        }
        Ok(())
    }

    /// Decides on a packet of `bytes` bytes received on `t`, and counts it.
    pub fn accept(&mut self, t: &FiveTuple, bytes: u64) -> Verdict {
        if let Err(r) = self.check(t) {
            self.rejected = self.rejected.saturating_add(1);
            return Verdict::Reject(r);
        }
        if self.kind == PeerKind::Plain {
            self.count_other(bytes);
            return Verdict::Accept { rx_session: None };
        }
        let n = self.n_rx;
        let known = self
            .rx
            .get(..n)
            .and_then(|s| s.iter().position(|r| r.src == t.src && r.sport == t.sport));
        let idx = match known {
            Some(i) => Some(i),
            None => match self.rx.get_mut(n) {
                Some(slot) => {
                    *slot = RxSession {
                        src: t.src,
                        sport: t.sport,
                        packets: 0,
                        bytes: 0,
                    };
                    self.n_rx = n.saturating_add(1);
                    Some(n)
                }
                None => None,
            },
        };
        match idx.and_then(|i| self.rx.get_mut(i).map(|r| (i, r))) {
            Some((i, r)) => {
                r.packets = r.packets.saturating_add(1);
                r.bytes = r.bytes.saturating_add(bytes);
                Verdict::Accept {
                    rx_session: Some(i as u8),
                }
            }
            None => {
                self.count_other(bytes);
                Verdict::Accept { rx_session: None }
            }
        }
    }

    fn count_other(&mut self, bytes: u64) {
        self.other_packets = self.other_packets.saturating_add(1);
        self.other_bytes = self.other_bytes.saturating_add(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_is_rxe_rule() {
        let l = NetAddr::from_v4([10, 0, 0, 1]);
        let r = NetAddr::from_v4([10, 0, 0, 2]);
        let mut f = ReceiveFilter::<4, 4>::plain(l, r);
        assert!(l.is_v4());
        let t = FiveTuple {
            src: r,
            dst: l,
            sport: 0xC123,
            dport: 4791,
        };
        assert_eq!(f.accept(&t, 100), Verdict::Accept { rx_session: None });
        let t2 = FiveTuple { sport: 1, ..t };
        assert_eq!(f.accept(&t2, 100), Verdict::Accept { rx_session: None });
        let t3 = FiveTuple { dport: 4790, ..t };
        assert_eq!(f.accept(&t3, 1), Verdict::Reject(Reject::NotRoceV2Port));
        let t4 = FiveTuple { src: l, ..t };
        assert_eq!(f.accept(&t4, 1), Verdict::Reject(Reject::UnknownSource));
        let t5 = FiveTuple { dst: r, ..t };
        assert_eq!(f.accept(&t5, 1), Verdict::Reject(Reject::WrongDestination));
        assert_eq!((f.other_packets(), f.rejected()), (2, 3));
    }
}
