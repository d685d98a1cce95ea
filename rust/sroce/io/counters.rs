// SPDX-License-Identifier: GPL-2.0

//! Per-device packet I/O and transport counters, shown as the port's hardware counters
//! (`rdma statistic show link DEV/1`,
//! `/sys/class/infiniband/DEV/ports/1/hw_counters/NAME`).
//!
//! Byte counts are RoCE transport bytes: the UDP payload (RoCE v1: what
//! follows the GRH), BTH through ICRC.
//! Names shared with rxe mean the same as there.

use crate::rdma::stats::StatDesc;
use core::sync::atomic::{AtomicU64, Ordering};

/// One counter of [`IoCounters`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub(crate) enum Counter {
    /// Packets handed to the IP layer.
    SentPkts,
    /// Their transport bytes.
    SentBytes,
    /// Packets not sent: no route to the destination from this device.
    SendNoRoute,
    /// Packets not sent: no memory, the builder failed, or the IP layer
    /// dropped them.
    SendErr,
    /// Packets received with a valid ICRC and handed to the driver.
    RcvdPkts,
    /// Their transport bytes.
    RcvdBytes,
    /// Packets dropped: ICRC mismatch.
    RcvdIcrcErr,
    /// Packets dropped: shorter than a BTH and an ICRC.
    RcvdDropShort,
    /// Packets dropped: IP header the ICRC cannot cover (IPv4 options,
    /// IPv6 extension headers) or unreadable data.
    RcvdDropMalformed,
    /// Packets dropped: no memory to make the headers linear.
    RcvdDropNomem,
    /// Packets dropped: no queue pair has the BTH's destination QPN (or
    /// it is being destroyed).
    RcvdDropNoQp,
    /// Packets dropped: the queue pair's receive queue was full.
    RcvdDropQpFull,
    /// Responder: requests received with a PSN already executed.
    DuplicateRequest,
    /// Responder: PSN sequence error NAKs sent (a request arrived ahead of
    /// the expected PSN).
    SentSeqNak,
    /// Responder: RNR NAKs sent (no receive WQE posted).
    SentRnrNak,
    /// Requester: PSN sequence error NAKs received.
    RcvdSeqNak,
    /// Requester: RNR NAKs received (each starts an RNR wait).
    RcvdRnrNak,
    /// Requester: transport (local ACK) timer expiries with packets
    /// outstanding.
    LocalAckTimeout,
    /// Requester: retransmissions started (after a timeout, a sequence
    /// NAK or a missing READ/atomic response).
    CompleterRetry,
    /// Requester: packets sent again.
    RetransmittedPkts,
    /// Requester: work requests failed with `IBV_WC_RETRY_EXC_ERR`.
    RetryExceeded,
    /// Requester: work requests failed with `IBV_WC_RNR_RETRY_EXC_ERR`.
    RnrRetryExceeded,
    /// UD packets dropped: wrong Q_Key.
    RcvdDropBadQkey,
    /// UD packets dropped: no receive WQE posted.
    RcvdDropNoRecv,
    /// Fast registrations performed (`IB_WR_REG_MR`).
    FastReg,
    /// Local invalidations performed (`IB_WR_LOCAL_INV`).
    LocalInv,
    /// Regions invalidated by a received SEND with invalidate.
    RemoteInv,
    /// Memory windows bound (`IBV_WR_BIND_MW`, `ibv_bind_mw`).
    MwBind,
    /// Received packets handled in the receive softirq (they found
    /// nothing queued before them and the QP idle, or were pieces of a
    /// segmented datagram held for the pass its last piece runs).
    RcvdSoftirqPasses,
    /// Received packets left to the QP's pass thread (queued behind
    /// others, or the QP was busy).
    RcvdWorkerHandoffs,
    /// UC packets dropped with the message they belong to (packets before
    /// them lost, no receive WQE, an access error, a duplicate).
    RcvdDropUc,
    /// Of the packets sent, those sent as RoCE v1 (Ethernet frames with a
    /// GRH).
    SentRoceV1Pkts,
    /// Of the packets received, those received as RoCE v1.
    RcvdRoceV1Pkts,
    /// RoCE v1 packets dropped: the GRH's destination GID is not one of the
    /// device's RoCE v1 GIDs.
    RcvdDropBadDgid,
    /// Datagrams sent that carried several RoCEv2 packets, to be cut into
    /// one datagram each by UDP segmentation (the stack, the NIC or the
    /// receiving host); their packets count in `sent_pkts` one by one.
    SentSegmented,
    /// On-demand paging: page faults resolved (an access found pages of an
    /// on-demand region absent, the QP's part waited, they were faulted
    /// in).
    OdpPageFaults,
    /// On-demand paging: faults that could not be resolved (the memory is
    /// not mapped); the operation failed with an access error.
    OdpFaultErrors,
    /// On-demand paging: invalidations that dropped pages a region had
    /// faulted in (the process unmapped, freed or moved them).
    OdpInvalidations,
    /// Multipath (`docs/sessions.md`): hellos sent (the requester of a
    /// multi-session group asks whether the peer reorders).
    MpHellosSent,
    /// Multipath: hellos answered (this responder holds and SACKs for
    /// that peer from then on).
    MpHellosAnswered,
    /// Multipath: connections whose peer agreed (its hello ACK arrived).
    MpAgreed,
    /// Multipath: requests that arrived ahead of the expected PSN and were
    /// held until the gap before them filled.
    MpHeld,
    /// Multipath: requests dropped instead of held: too far ahead, or a
    /// copy of one already held.
    MpHoldDropped,
    /// Multipath: selective acknowledgements sent.
    MpSacksSent,
    /// Multipath: selective acknowledgements received.
    MpSacksRcvd,
    /// Multipath: packets resent because a SACK showed them lost (packets
    /// sent after them on the same session arrived).
    MpSelectiveResends,
    /// Multipath: go-back-N resends skipped because the responder holds
    /// the packet.
    MpResendsSkipped,
    /// Multipath: sessions given a fresh 5-tuple because their losses
    /// stayed high.
    MpReplaced,
    /// Multipath: a session's congestion window was cut (a loss in a new
    /// episode, or a transport timeout with its packets in flight).
    MpWindowCuts,
    /// Multipath: new packets waited because no live session had room in
    /// its congestion window.
    MpWindowFull,
    /// Multipath: a message moved to another session partway through
    /// (its session's window was full and another had room).
    MpFlowletSwitches,
    /// Multipath: a session's own retransmit timer expired (its packets
    /// in flight were resent on another session).
    MpSessionTimeouts,
    /// Requester: packets sent once more only to ask for an ACK: unsignaled
    /// messages share one (`docs/performance.md`), and those left without
    /// one when sending paused are asked for by resending the newest.
    AckRequests,
    /// Of the packets handled in the receive softirq, the pieces of a
    /// segmented datagram held for the pass its last piece runs (a burst
    /// costs the QP one pass).
    RcvdHeld,
    /// Requester: packets the local stack refused (a full queue: veth's
    /// backlog, a qdisc), taken back and sent again when it has drained,
    /// not lost (each is also a `SendErr`).
    SendRequeued,
    /// Passes over a QP run on a pass thread (`sroce_pass/N`): work the
    /// receive softirq or the posting process left (packets queued behind
    /// others, timers, a busy QP).
    ThreadPasses,
    /// Send doorbells of a streaming process that left their pass to the
    /// QP's pass thread on another CPU (`rc::doorbell_leaves_pass`).
    DoorbellHandoffs,
}

/// How many [`Counter`]s there are.
const COUNT: usize = Counter::DoorbellHandoffs as usize + 1;

/// The port counters: every [`Counter`], then the namespace-wide count of
/// packets for which no sroce device was found.
pub(crate) static PORT_STATS: [StatDesc; COUNT + 1] = [
    StatDesc::new(c"sent_pkts"),
    StatDesc::new(c"sent_bytes"),
    StatDesc::new(c"send_no_route"),
    StatDesc::new(c"send_err"),
    StatDesc::new(c"rcvd_pkts"),
    StatDesc::new(c"rcvd_bytes"),
    StatDesc::new(c"rcvd_icrc_err"),
    StatDesc::new(c"rcvd_drop_short"),
    StatDesc::new(c"rcvd_drop_malformed"),
    StatDesc::new(c"rcvd_drop_nomem"),
    StatDesc::new(c"rcvd_drop_no_qp"),
    StatDesc::new(c"rcvd_drop_qp_full"),
    // Transport counters; the names rxe also has mean the same there.
    StatDesc::new(c"duplicate_request"),
    StatDesc::new(c"out_of_seq_request"),
    StatDesc::new(c"send_rnr_err"),
    StatDesc::new(c"rcvd_seq_err"),
    StatDesc::new(c"rcvd_rnr_err"),
    StatDesc::new(c"local_ack_timeout_err"),
    StatDesc::new(c"completer_retry_err"),
    StatDesc::new(c"retransmitted_pkts"),
    StatDesc::new(c"retry_exceeded_err"),
    StatDesc::new(c"retry_rnr_exceeded_err"),
    StatDesc::new(c"rcvd_drop_bad_qkey"),
    StatDesc::new(c"rcvd_drop_no_recv"),
    StatDesc::new(c"fast_reg"),
    StatDesc::new(c"local_inv"),
    StatDesc::new(c"remote_inv"),
    StatDesc::new(c"mw_bind"),
    StatDesc::new(c"rcvd_softirq_passes"),
    StatDesc::new(c"rcvd_worker_handoffs"),
    StatDesc::new(c"rcvd_drop_uc"),
    StatDesc::new(c"sent_roce_v1_pkts"),
    StatDesc::new(c"rcvd_roce_v1_pkts"),
    StatDesc::new(c"rcvd_drop_bad_dgid"),
    StatDesc::new(c"sent_segmented"),
    StatDesc::new(c"odp_page_faults"),
    StatDesc::new(c"odp_fault_errors"),
    StatDesc::new(c"odp_invalidations"),
    StatDesc::new(c"mp_hellos_sent"),
    StatDesc::new(c"mp_hellos_answered"),
    StatDesc::new(c"mp_agreed"),
    StatDesc::new(c"mp_held"),
    StatDesc::new(c"mp_hold_dropped"),
    StatDesc::new(c"mp_sacks_sent"),
    StatDesc::new(c"mp_sacks_rcvd"),
    StatDesc::new(c"mp_selective_resends"),
    StatDesc::new(c"mp_resends_skipped"),
    StatDesc::new(c"mp_replaced"),
    StatDesc::new(c"mp_window_cuts"),
    StatDesc::new(c"mp_window_full"),
    StatDesc::new(c"mp_flowlet_switches"),
    StatDesc::new(c"mp_session_timeouts"),
    StatDesc::new(c"ack_requests"),
    StatDesc::new(c"rcvd_held"),
    StatDesc::new(c"send_requeued"),
    StatDesc::new(c"thread_passes"),
    StatDesc::new(c"doorbell_handoffs"),
    // Not per device: packets to port 4791 in this device's network
    // namespace that arrived on a net device without an sroce device.
    StatDesc::new(c"rcvd_drop_no_device"),
];

/// Lock-free counters of one device.
pub(crate) struct IoCounters([AtomicU64; COUNT]);

impl IoCounters {
    /// All zero.
    pub(crate) const fn new() -> Self {
        Self([const { AtomicU64::new(0) }; COUNT])
    }

    /// Adds one to `c`.
    pub(crate) fn inc(&self, c: Counter) {
        self.add(c, 1);
    }

    /// The value of `c`.
    pub(crate) fn get(&self, c: Counter) -> u64 {
        self.0[c as usize].load(Ordering::Relaxed)
    }

    /// Adds `n` to `c`.
    pub(crate) fn add(&self, c: Counter, n: u64) {
        self.0[c as usize].fetch_add(n, Ordering::Relaxed);
    }

    /// Writes the values in [`PORT_STATS`] order; `no_device` is the
    /// namespace-wide last entry.
    pub(crate) fn fill(&self, no_device: u64, values: &mut [u64]) {
        let all = self
            .0
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .chain(core::iter::once(no_device));
        for (v, c) in values.iter_mut().zip(all) {
            *v = c;
        }
    }
}
