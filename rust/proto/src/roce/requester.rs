//! The RC requester: a fixed-capacity window of send work requests, PSN
//! assignment, and the choice of the next request packet to (re)transmit.
//!
//! [`SendQueue`] holds every posted work request until its completion is
//! taken with [`SendQueue::pop_completion`]. The driver:
//!
//! 1. posts work requests with [`SendQueue::post`];
//! 2. calls [`SendQueue::next_packet`] until it returns `None`, building and
//!    sending each [`RequestPacket`] (payload copied from the work
//!    request's local buffer at `offset`);
//! 3. hands every RC response to [`SendQueue::on_response`] and acts on
//!    the returned [`Action`](super::completer::Action) (see
//!    [`completer`](super::completer)); timer expiries go to
//!    [`SendQueue::on_timeout`] and [`SendQueue::on_rnr_timer`];
//! 4. drains completions with [`SendQueue::pop_completion`].
//!
//! PSNs are assigned when a work request's first packet is sent, so a
//! request held back (by the `max_rd_atomic` limit, a fence or the PSN
//! window) gets the PSN after its predecessor's last.

use super::error::Error;
use super::opcode::Operation;
use super::psn::Psn;
use super::segment::{MessagePlan, Mtu, RethSpan, WqeOp};
use super::wc::WcStatus;

/// Requester parameters, from the QP attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RequesterConfig {
    /// Path MTU.
    pub mtu: Mtu,
    /// Most RDMA READ and atomic requests outstanding at once
    /// (`max_rd_atomic`, the initiator depth); 0 forbids them.
    pub max_rd_atomic: u8,
    /// Transport retries (`retry_cnt`, 0..=7) after a timeout or a
    /// sequence-error NAK, reset whenever a response makes progress.
    pub retry_cnt: u8,
    /// RNR retries (`rnr_retry`, 0..=7; 7 means forever), reset on progress.
    pub rnr_retry: u8,
    /// Most PSNs sent but unacknowledged before new packets wait (a single
    /// message larger than this is still sent when nothing else is
    /// outstanding). Clamped to `1..=`[`MessagePlan::MAX_PSNS`].
    pub max_unacked_psns: u32,
    /// Set AckReq on every `ack_interval`-th packet of a long message, in
    /// addition to its last packet (0: only the last).
    pub ack_interval: u32,
    /// Most SEND and RDMA WRITE messages whose completion nobody waits
    /// for (unsignaled) sent before one asks for an ACK: such a message's
    /// last packet asks only when it is the `ack_coalesce`-th message, or
    /// ends a quarter of the PSN window, since the last packet that asked.
    /// A signaled message, a READ or atomic, a resent packet and the
    /// periodic requests of a long message always ask. 1 (the default)
    /// asks at the end of every message, as rxe does. Clamped to half the
    /// queue's capacity, so unrequested messages alone can fill neither
    /// the queue nor the window; what is left unrequested when sending
    /// pauses needs a probe ([`SendQueueWith::wants_ack_request`]).
    pub ack_coalesce: u32,
    /// Whether the peer acknowledges packets (RC). Without (UC) a request
    /// completes once its last packet is handed out, nothing is ever
    /// unacknowledged or resent, and only SEND and RDMA WRITE (with or
    /// without immediate) and local operations are accepted.
    pub acknowledged: bool,
}

impl RequesterConfig {
    /// Defaults like rxe's: one READ/atomic outstanding, 7 retries, RNR
    /// retry forever, 128 unacknowledged PSNs, AckReq every 64 packets and
    /// at the end of every message.
    pub const fn new(mtu: Mtu) -> Self {
        RequesterConfig {
            mtu,
            max_rd_atomic: 1,
            retry_cnt: 7,
            rnr_retry: 7,
            max_unacked_psns: 128,
            ack_interval: 64,
            ack_coalesce: 1,
            acknowledged: true,
        }
    }
}

/// What the requester needs to know about a send work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SendWqe {
    /// The driver's handle for the work request (e.g. its send queue
    /// index), returned in packets and completions.
    pub tag: u32,
    /// Operation.
    pub op: WqeOp,
    /// Total length in bytes (8 for atomics).
    pub len: u32,
    /// `IB_SEND_FENCE`: wait until every earlier READ and atomic has
    /// completed before starting this request.
    pub fence: bool,
    /// Whether its completion is wanted (signaled, or the QP signals every
    /// request): its last packet always asks for an ACK.
    pub signaled: bool,
}

/// One request packet to send, from [`SendQueue::next_packet`].
///
/// The driver builds it: BTH (opcode `Rc`/`operation`, `psn`, `ack_req`,
/// the SE bit from the work request for the last packet), then the
/// extension headers the opcode needs (RETH from `reth`, AtomicETH,
/// ImmDt or IETH from the work request), then `payload_len` bytes of the
/// local buffer starting at `offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RequestPacket {
    /// The work request's tag.
    pub tag: u32,
    /// PSN.
    pub psn: Psn,
    /// RC opcode operation.
    pub operation: Operation,
    /// Whether to set AckReq.
    pub ack_req: bool,
    /// Byte offset of the payload in the local buffer (READ request: of the
    /// first byte requested).
    pub offset: u32,
    /// Payload bytes to carry.
    pub payload_len: u32,
    /// RETH relative to the work request's remote address, if any.
    pub reth: Option<RethSpan>,
    /// Whether this PSN was sent before (a retransmission).
    pub retransmit: bool,
}

/// A finished work request, from [`SendQueue::pop_completion`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Completion {
    /// The work request's tag.
    pub tag: u32,
    /// Operation.
    pub op: WqeOp,
    /// Completion status.
    pub status: WcStatus,
    /// Length of the work request in bytes.
    pub byte_len: u32,
}

/// One posted work request and its transport state: an element of a send
/// queue's storage (see [`SlotStore`]), opaque outside the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Slot {
    pub(super) wqe: SendWqe,
    pub(super) plan: MessagePlan,
    /// First PSN, valid once `started`.
    pub(super) first_psn: Psn,
    pub(super) started: bool,
    /// Set once the request is finished (acknowledged or failed).
    pub(super) status: Option<WcStatus>,
}

impl Slot {
    /// The PSN after the message's last.
    pub(super) const fn end_psn(&self) -> Psn {
        self.first_psn.wrapping_add(self.plan.psn_count())
    }
}

/// Where a send queue keeps its work requests: a fixed array in tests and
/// on the host ([`SendQueue`]), or a heap buffer in a kernel, where a
/// deep queue should not be built on the stack. Its length is the queue's
/// capacity; every slot must be `None` when the queue is made.
pub trait SlotStore: AsRef<[Option<Slot>]> + AsMut<[Option<Slot>]> {}

impl<T> SlotStore for T where T: AsRef<[Option<Slot>]> + AsMut<[Option<Slot>]> {}

/// The requester side of an RC QP with room for `N` work requests that
/// are posted but not yet popped as completions, kept in an array.
pub type SendQueue<const N: usize> = SendQueueWith<[Option<Slot>; N]>;

/// The requester side of an RC QP, its work requests (posted but not yet
/// popped as completions) kept in `S`, as many as it has slots.
#[derive(Clone, Debug)]
pub struct SendQueueWith<S> {
    pub(super) cfg: RequesterConfig,
    pub(super) slots: S,
    /// Ring index of the oldest slot.
    pub(super) head: usize,
    /// Slots in use.
    pub(super) len: usize,
    /// Slots, from the head, that are finished (acknowledged or failed).
    pub(super) done: usize,
    /// Slot, from the head, of the next packet to send.
    pub(super) cursor: usize,
    /// PSN of the next packet to send (meaningful when the cursor slot is
    /// started).
    pub(super) cursor_psn: Psn,
    /// PSN for the next work request to start.
    pub(super) next_psn: Psn,
    /// Oldest unacknowledged PSN.
    pub(super) una: Psn,
    /// One past the highest PSN sent (READ: its last response PSN).
    pub(super) sent_end: Psn,
    /// READ and atomic requests started and not finished.
    pub(super) rd_atomic: u8,
    pub(super) retry_left: u8,
    pub(super) rnr_left: u8,
    /// Waiting for the RNR timer: nothing is sent.
    pub(super) rnr_wait: bool,
    /// One past the newest PSN a packet that asked for an ACK covers; an
    /// ACK is still due for it while it lies in `(una, sent_end]`.
    pub(super) requested_end: Psn,
    /// Packets sent for the first time since the last that asked for an
    /// ACK (see [`RequesterConfig::ack_coalesce`]).
    pub(super) unrequested: u32,
    /// Messages whose last packet was among them.
    pub(super) unrequested_messages: u32,
    /// A signaled local operation was performed while packets before it
    /// were unacknowledged and unasked, up to this PSN: its completion
    /// waits for them, so they are asked about at once
    /// ([`SendQueueWith::ack_request_now`]).
    pub(super) local_waits_for: Option<Psn>,
    /// The next packet sent for the first time asks for an ACK
    /// ([`SendQueueWith::ask_with_next_packet`]).
    pub(super) ask_next: bool,
    /// A retransmission from `una` was started and no progress was made
    /// since: further NAKs for the same loss are ignored.
    pub(super) retrying: bool,
    /// A READ was re-requested from this PSN (in its middle): its first
    /// response may restart with First/Only.
    pub(super) read_resume: Option<Psn>,
    /// The QP is in the error state: nothing is sent, everything is
    /// flushed.
    pub(super) error: bool,
    /// A packet was taken back ([`SendQueueWith::hold`]): nothing is sent
    /// until [`SendQueueWith::resume`].
    pub(super) held: bool,
}

impl<const N: usize> SendQueue<N> {
    /// An empty send queue whose first packet will carry `initial_psn`
    /// (the QP's `sq_psn`).
    pub const fn new(cfg: RequesterConfig, initial_psn: Psn) -> Self {
        SendQueueWith::with_storage([None; N], cfg, initial_psn)
    }
}

impl<S: SlotStore> SendQueueWith<S> {
    /// An empty send queue whose first packet will carry `initial_psn`
    /// (the QP's `sq_psn`), holding as many work requests as `storage` has
    /// slots (which must all be `None`).
    pub const fn with_storage(storage: S, cfg: RequesterConfig, initial_psn: Psn) -> Self {
        let mut cfg = cfg;
        if cfg.max_unacked_psns == 0 {
            cfg.max_unacked_psns = 1;
        } else if cfg.max_unacked_psns > MessagePlan::MAX_PSNS {
            cfg.max_unacked_psns = MessagePlan::MAX_PSNS;
        }
        cfg.retry_cnt &= 7;
        cfg.rnr_retry &= 7;
        SendQueueWith {
            cfg,
            slots: storage,
            head: 0,
            len: 0,
            done: 0,
            cursor: 0,
            cursor_psn: initial_psn,
            next_psn: initial_psn,
            una: initial_psn,
            sent_end: initial_psn,
            rd_atomic: 0,
            retry_left: cfg.retry_cnt,
            rnr_left: cfg.rnr_retry,
            rnr_wait: false,
            requested_end: initial_psn,
            unrequested: 0,
            unrequested_messages: 0,
            local_waits_for: None,
            ask_next: false,
            retrying: false,
            read_resume: None,
            error: false,
            held: false,
        }
    }

    /// The configuration in use.
    pub const fn config(&self) -> &RequesterConfig {
        &self.cfg
    }

    /// Empties the queue in place and starts it again as
    /// [`SendQueueWith::with_storage`] would, keeping the storage.
    pub fn restart(&mut self, cfg: RequesterConfig, initial_psn: Psn)
    where
        S: Default,
    {
        let mut slots = core::mem::take(&mut self.slots);
        slots.as_mut().fill(None);
        *self = Self::with_storage(slots, cfg, initial_psn);
    }

    /// Changes the PSN window ([`RequesterConfig::max_unacked_psns`],
    /// clamped as when the queue was made); packets already sent stay
    /// sent, the next ones see the new limit.
    pub fn set_max_unacked_psns(&mut self, n: u32) {
        self.cfg.max_unacked_psns = n.clamp(1, MessagePlan::MAX_PSNS);
    }

    /// How many work requests the queue holds at most.
    pub fn capacity(&self) -> usize {
        self.slots.as_ref().len()
    }

    /// Posts a work request. Fails with [`Error::QueueFull`] when `N`
    /// requests are already held, [`Error::BadMessageLength`] (see
    /// [`MessagePlan::new`]), or [`Error::InvalidForTransport`] for an
    /// operation an unacknowledged (UC) queue does not carry. A request
    /// posted in the error state is accepted and completes with
    /// [`WcStatus::WrFlushErr`].
    pub fn post(&mut self, wqe: SendWqe) -> Result<(), Error> {
        if self.len >= self.capacity() {
            return Err(Error::QueueFull);
        }
        if !self.cfg.acknowledged && !wqe.op.is_unacknowledged_ok() {
            return Err(Error::InvalidForTransport);
        }
        let plan = MessagePlan::new(wqe.op, wqe.len, self.cfg.mtu)?;
        let i = self.ring(self.len);
        let slot = self.slots.as_mut().get_mut(i).ok_or(Error::QueueFull)?;
        *slot = Some(Slot {
            wqe,
            plan,
            first_psn: Psn::ZERO,
            started: false,
            status: None,
        });
        self.len = self.len.wrapping_add(1);
        Ok(())
    }

    /// Work requests held (posted and not yet popped).
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether no work request is held.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether another work request can be posted.
    pub fn has_room(&self) -> bool {
        self.len < self.capacity()
    }

    /// The oldest unacknowledged PSN.
    pub const fn una(&self) -> Psn {
        self.una
    }

    /// The PSN the next new work request will start at.
    pub const fn next_psn(&self) -> Psn {
        self.next_psn
    }

    /// Whether a posted request still has packets to send for the first
    /// time (the PSN window or a fence may hold them back).
    pub fn has_unsent(&self) -> bool {
        !self.error && self.cursor < self.len && !self.resending()
    }

    /// Whether the next packet [`SendQueue::next_packet`] gives is a
    /// retransmission (going back N).
    pub fn resending(&self) -> bool {
        // A request not started yet starts at its own first PSN, new.
        self.slot(self.cursor).is_some_and(|s| s.started)
            && self.cursor_psn.is_before(self.sent_end)
    }

    /// Whether packets are sent and not acknowledged: the transport
    /// (local ACK) timer should run exactly while this holds and
    /// [`SendQueue::waiting_rnr`] does not.
    pub fn has_unacked(&self) -> bool {
        !self.error && self.una != self.sent_end
    }

    /// Whether packets are sent and unacknowledged that no packet asking
    /// for an ACK covers (a stream of unsignaled messages paused before
    /// its next request asked): nothing will acknowledge them but a probe
    /// or the transport timer. The driver waits briefly for the stream to
    /// go on, then sends [`SendQueueWith::ack_request_packet`] again.
    pub fn wants_ack_request(&self) -> bool {
        self.cfg.acknowledged
            && self.has_unacked()
            && !self.rnr_wait
            && !self.resending()
            && !self.ack_request_in_flight()
    }

    /// What identifies the latest request for an ACK: it changes whenever
    /// a packet asks. The driver's wait before probing
    /// ([`SendQueueWith::wants_ack_request`]) runs from the first moment
    /// an ACK is wanted after the latest request, and new packets that do
    /// not ask never push it out (the probe must come well before the
    /// transport timer, which new packets do not restart either).
    pub fn ack_request_key(&self) -> Psn {
        self.requested_end
    }

    /// Whether an ACK is wanted at once, not after the driver's wait: a
    /// signaled local operation ([`SendQueueWith::take_local`]) completes
    /// only once the unasked packets before it are acknowledged.
    pub fn ack_request_now(&self) -> bool {
        self.local_waits_for
            .is_some_and(|end| self.una.is_before(end))
            && self.wants_ack_request()
    }

    /// The driver's wait for an ACK request is over: the next packet sent
    /// for the first time asks, which costs nothing if sending goes on;
    /// if none went out by the end of the pass
    /// ([`SendQueueWith::asks_with_next_packet`] still true),
    /// [`SendQueueWith::ack_request_packet`] resends the newest instead.
    pub fn ask_with_next_packet(&mut self) {
        self.ask_next = self.wants_ack_request();
    }

    /// The driver made the packet at `psn`, just sent for the first time,
    /// ask for an ACK although the engine did not (the multipath
    /// transport asks when a session's window fills): it is the latest
    /// request as if the engine had made it, so the wait before a probe
    /// ([`SendQueueWith::ack_request_key`]) starts over and no duplicate
    /// is sent for packets already asked about.
    pub fn asked_by_driver(&mut self, psn: Psn) {
        let end = psn.next();
        if !self.requested_end.is_before(end) {
            return;
        }
        self.requested_end = end;
        if end == self.sent_end {
            // Nothing unasked after it.
            self.unrequested = 0;
            self.unrequested_messages = 0;
        }
    }

    /// Whether [`SendQueueWith::ask_with_next_packet`] is still pending.
    pub const fn asks_with_next_packet(&self) -> bool {
        self.ask_next
    }

    /// Whether a packet that asked for an ACK lies beyond the oldest
    /// unacknowledged PSN, up to the newest sent.
    fn ack_request_in_flight(&self) -> bool {
        self.una.is_before(self.requested_end) && !self.sent_end.is_before(self.requested_end)
    }

    /// The newest packet sent, to send once more asking for an ACK when
    /// [`SendQueueWith::wants_ack_request`]: a duplicate, which a
    /// responder re-ACKs with its own PSN (sroce) or its newest (rxe),
    /// either way acknowledging everything sent if it all arrived. Counts
    /// as asked: the driver sends it (or the transport timer covers what
    /// it could not). `None` if no ACK is wanted or the newest packet
    /// cannot be sent alone (a READ's response PSN).
    pub fn ack_request_packet(&mut self) -> Option<RequestPacket> {
        self.ask_next = false;
        if !self.wants_ack_request() {
            return None;
        }
        let newest = self.sent_end.wrapping_add(Psn::MASK);
        let p = self.packet_at(newest)?;
        self.requested_end = self.sent_end;
        self.unrequested = 0;
        self.unrequested_messages = 0;
        self.local_waits_for = None;
        Some(p)
    }

    /// Changes [`RequesterConfig::ack_coalesce`] for the next packets.
    pub fn set_ack_coalesce(&mut self, n: u32) {
        self.cfg.ack_coalesce = n;
    }

    /// Whether sending is paused until [`SendQueue::on_rnr_timer`].
    pub const fn waiting_rnr(&self) -> bool {
        self.rnr_wait
    }

    /// Whether the QP's send side is in the error state.
    pub const fn is_error(&self) -> bool {
        self.error
    }

    /// Moves to the error state (e.g. the driver's local error, or a QP
    /// state change): nothing more is sent and every unfinished request
    /// completes with [`WcStatus::WrFlushErr`].
    pub fn set_error(&mut self) {
        self.error = true;
    }

    /// The next packet to send, or `None` if nothing can be sent now
    /// (nothing posted, waiting for RNR, the error state, the PSN window
    /// full, the `max_rd_atomic` limit or a fence).
    pub fn next_packet(&mut self) -> Option<RequestPacket> {
        if self.error || self.rnr_wait || self.held {
            return None;
        }
        loop {
            if self.cursor >= self.len {
                return None;
            }
            let idx = self.ring(self.cursor);
            let slot = (*self.slots.as_ref().get(idx)?)?;
            // Finished, or a local operation already performed (never
            // again, not even when going back to resend).
            if slot.status.is_some() || (slot.wqe.op.is_local() && slot.started) {
                self.advance_cursor();
                continue;
            }
            if slot.wqe.op.is_local() {
                // Its turn: the driver performs it first (`take_local`).
                return None;
            }
            let slot = if slot.started {
                slot
            } else {
                self.start(idx, slot)?
            };
            let index = slot.first_psn.distance_to(self.cursor_psn);
            let seg = slot.plan.segment(index, self.ack_interval())?;
            let next = slot.plan.next_index(index);
            let end = slot.first_psn.wrapping_add(next);
            let retransmit = self.cursor_psn.is_before(self.sent_end);
            if !retransmit && !self.window_allows(end) {
                return None;
            }
            let psn = self.cursor_psn;
            let ends_message = seg.operation.position().ends_message();
            let ack_req = (seg.ack_req
                && (retransmit
                    || slot.wqe.signaled
                    || slot.wqe.op.is_read_or_atomic()
                    || !ends_message
                    || self.unrequested_messages.wrapping_add(1) >= self.ack_coalesce()
                    || self.unrequested.wrapping_add(1) >= self.cfg.max_unacked_psns / 4))
                || (self.ask_next && !retransmit);
            if next >= slot.plan.psn_count() {
                self.advance_cursor();
            } else {
                self.cursor_psn = end;
            }
            if self.sent_end.is_before(end) {
                self.sent_end = end;
            }
            if ack_req {
                if self.requested_end.is_before(end) || !self.ack_request_in_flight() {
                    self.requested_end = end;
                }
                self.ask_next = false;
                self.unrequested = 0;
                self.unrequested_messages = 0;
            } else if !retransmit {
                self.unrequested = self.unrequested.wrapping_add(1);
                if ends_message {
                    self.unrequested_messages = self.unrequested_messages.wrapping_add(1);
                }
            }
            if !self.cfg.acknowledged {
                // Nobody will acknowledge it: it is done once handed out
                // (the last packet completes the request).
                let _ = self.ack_before(end);
            }
            return Some(RequestPacket {
                tag: slot.wqe.tag,
                psn,
                operation: seg.operation,
                ack_req,
                offset: seg.offset,
                payload_len: seg.payload_len,
                reth: seg.reth,
                retransmit,
            });
        }
    }

    /// Whether a READ or atomic that starts at or before `psn` waits for
    /// its responses (sent, not finished): an acknowledgement of `psn`
    /// passes it.
    pub fn response_pending_through(&self, psn: Psn) -> bool {
        (self.done..self.len).any(|k| {
            self.slot(k).is_some_and(|s| {
                s.started
                    && s.status.is_none()
                    && s.wqe.op.is_read_or_atomic()
                    && !psn.is_before(s.first_psn)
            })
        })
    }

    /// The request packet with PSN `psn`, to send once more on its own (a
    /// selective resend): one already sent and not yet acknowledged, of a
    /// SEND or WRITE (each of its PSNs is a packet) or the request of a
    /// READ or atomic (its first PSN). It asks for an ACK. `None` for any
    /// other PSN, or in the error state. Changes nothing: the send cursor
    /// and the window are those of [`SendQueueWith::next_packet`].
    pub fn packet_at(&self, psn: Psn) -> Option<RequestPacket> {
        if self.error || psn.is_before(self.una) || !psn.is_before(self.sent_end) {
            return None;
        }
        for k in self.done..self.len {
            let s = self.slot(k)?;
            if !s.started || s.status.is_some() || s.wqe.op.is_local() {
                continue;
            }
            if psn.is_before(s.first_psn) {
                return None;
            }
            let index = s.first_psn.distance_to(psn);
            if index >= s.plan.psn_count() {
                continue;
            }
            if s.wqe.op.is_read_or_atomic() && index != 0 {
                return None;
            }
            let seg = s.plan.segment(index, self.cfg.ack_interval)?;
            return Some(RequestPacket {
                tag: s.wqe.tag,
                psn,
                operation: seg.operation,
                ack_req: true,
                offset: seg.offset,
                payload_len: seg.payload_len,
                reth: seg.reth,
                retransmit: true,
            });
        }
        None
    }

    /// The driver could not send `p`, the packet
    /// [`SendQueueWith::next_packet`] just returned: its local data is not
    /// present (an on-demand paged region), or the local stack refused it
    /// (a full queue). It is taken back and nothing is sent until
    /// [`SendQueueWith::resume`], after which `next_packet` returns it
    /// again, asking for an ACK if it did (the ACK-request count is as if
    /// it had not been handed out). On an unacknowledged (UC) queue,
    /// which counted the packet as done when it handed it out, that is
    /// undone too: a request whose last packet it was is no longer
    /// complete. False (nothing changed) in the error state, or for a
    /// packet of no request held.
    pub fn hold(&mut self, p: &RequestPacket) -> bool {
        if self.error {
            return false;
        }
        // On UC the packet's request may be finished already (its last
        // packet), but not yet popped: look from the first unpopped one.
        let from = if self.cfg.acknowledged { self.done } else { 0 };
        let Some(k) = (from..self.len).find(|&k| {
            self.slot(k)
                .is_some_and(|s| s.started && s.wqe.tag == p.tag)
        }) else {
            return false;
        };
        if !self.cfg.acknowledged {
            // Nothing after it was handed out: it is the newest packet, and
            // its request the newest finished one, if it finished.
            self.una = p.psn;
            if k < self.done {
                if let Some(s) = self.slot_mut(k) {
                    s.status = None;
                }
                self.done = k;
            }
        }
        self.cursor = k;
        self.cursor_psn = p.psn;
        if !p.retransmit {
            // It was the newest packet: everything before it went out.
            self.sent_end = p.psn;
            if p.ack_req {
                // Its request went nowhere (`requested_end` now lies past
                // `sent_end`): made again when it goes out.
                self.ask_next = true;
            } else {
                self.unrequested = self.unrequested.saturating_sub(1);
                if p.operation.position().ends_message() {
                    self.unrequested_messages = self.unrequested_messages.saturating_sub(1);
                }
            }
        }
        self.held = true;
        true
    }

    /// Whether a packet is held ([`SendQueueWith::hold`]).
    pub const fn is_held(&self) -> bool {
        self.held
    }

    /// The page fault that held a packet is resolved: sending goes on,
    /// with that packet.
    pub fn resume(&mut self) {
        self.held = false;
    }

    /// The local operation whose turn it is, if any: every request posted
    /// before it has sent all its packets (and, with a fence, every earlier
    /// READ and atomic has completed), none after it has started. Returns
    /// its tag; the driver performs it now, before asking for more packets
    /// (a failure is the driver's local error: [`SendQueue::set_error`]). It
    /// completes, successfully, once everything before it has.
    pub fn take_local(&mut self) -> Option<u32> {
        if self.error || self.rnr_wait || self.held || self.cursor >= self.len {
            return None;
        }
        let idx = self.ring(self.cursor);
        let mut slot = (*self.slots.as_ref().get(idx)?)?;
        if !slot.wqe.op.is_local() || slot.started || slot.status.is_some() {
            return None;
        }
        if slot.wqe.fence && self.rd_atomic != 0 {
            return None;
        }
        slot.started = true;
        slot.first_psn = self.next_psn;
        *self.slots.as_mut().get_mut(idx)? = Some(slot);
        self.advance_cursor();
        self.settle_locals();
        if slot.wqe.signaled && self.wants_ack_request() {
            self.local_waits_for = Some(self.sent_end);
        }
        Some(slot.wqe.tag)
    }

    /// Finishes the performed local operations at the front of the
    /// unfinished requests: they wait for nothing but their predecessors.
    pub(super) fn settle_locals(&mut self) {
        while let Some(s) = self.slot(self.done) {
            if !(s.wqe.op.is_local() && s.started && s.status.is_none()) {
                break;
            }
            self.finish_one(WcStatus::Success);
        }
    }

    /// Takes the oldest finished work request's completion. Completions
    /// come in posting order; in the error state every unfinished request
    /// completes with [`WcStatus::WrFlushErr`].
    pub fn pop_completion(&mut self) -> Option<Completion> {
        if self.len == 0 {
            return None;
        }
        let head = self.head;
        let slot = (*self.slots.as_ref().get(head)?)?;
        let status = match slot.status {
            Some(s) => s,
            None if self.error => WcStatus::WrFlushErr,
            None => return None,
        };
        if let Some(s) = self.slots.as_mut().get_mut(head) {
            *s = None;
        }
        if slot.started && slot.status.is_none() && slot.wqe.op.is_read_or_atomic() {
            self.rd_atomic = self.rd_atomic.saturating_sub(1);
        }
        self.head = self.ring(1);
        self.len = self.len.wrapping_sub(1);
        self.done = self.done.saturating_sub(1);
        self.cursor = self.cursor.saturating_sub(1);
        Some(Completion {
            tag: slot.wqe.tag,
            op: slot.wqe.op,
            status,
            byte_len: slot.wqe.len,
        })
    }

    /// Starts the unstarted work request in ring slot `idx`: checks the
    /// fence, `max_rd_atomic` and the PSN window, then assigns its PSNs.
    fn start(&mut self, idx: usize, mut slot: Slot) -> Option<Slot> {
        let op = slot.wqe.op;
        if slot.wqe.fence && self.rd_atomic != 0 {
            return None;
        }
        if op.is_read_or_atomic() && self.rd_atomic >= self.cfg.max_rd_atomic {
            return None;
        }
        let end = self
            .next_psn
            .wrapping_add(slot.plan.next_index(0).min(slot.plan.psn_count()));
        if !self.window_allows(end) {
            return None;
        }
        slot.first_psn = self.next_psn;
        slot.started = true;
        self.next_psn = slot.end_psn();
        self.cursor_psn = slot.first_psn;
        if op.is_read_or_atomic() {
            self.rd_atomic = self.rd_atomic.saturating_add(1);
        }
        *self.slots.as_mut().get_mut(idx)? = Some(slot);
        Some(slot)
    }

    /// Whether a new packet whose PSNs end before `end` fits the window of
    /// unacknowledged PSNs (always, when nothing is unacknowledged).
    /// Packets between AckReqs in a long message: the configured interval,
    /// at most the PSN window (every window's worth asks for the
    /// acknowledgement that opens the next).
    fn ack_interval(&self) -> u32 {
        self.cfg.ack_interval.min(self.cfg.max_unacked_psns).max(1)
    }

    fn ack_coalesce(&self) -> u32 {
        let capacity = u32::try_from(self.capacity()).unwrap_or(u32::MAX);
        self.cfg.ack_coalesce.min(capacity / 2).max(1)
    }

    fn window_allows(&self, end: Psn) -> bool {
        self.una == self.sent_end || self.una.distance_to(end) <= self.cfg.max_unacked_psns
    }

    /// Moves the cursor to the start of the next slot.
    pub(super) fn advance_cursor(&mut self) {
        self.cursor = self.cursor.wrapping_add(1);
        if let Some(s) = self.slot(self.cursor) {
            if s.started {
                self.cursor_psn = s.first_psn;
            }
        }
    }

    /// Ring index of the slot `k` places after the head.
    pub(super) fn ring(&self, k: usize) -> usize {
        self.head
            .wrapping_add(k)
            .checked_rem(self.capacity())
            .unwrap_or(0)
    }

    /// The slot `k` places after the head.
    pub(super) fn slot(&self, k: usize) -> Option<Slot> {
        if k >= self.len {
            return None;
        }
        *self.slots.as_ref().get(self.ring(k))?
    }

    /// Mutable access to the slot `k` places after the head.
    pub(super) fn slot_mut(&mut self, k: usize) -> Option<&mut Slot> {
        if k >= self.len {
            return None;
        }
        let i = self.ring(k);
        self.slots.as_mut().get_mut(i)?.as_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::{vec, vec::Vec};

    fn wqe(tag: u32, op: WqeOp, len: u32) -> SendWqe {
        SendWqe {
            tag,
            op,
            len,
            fence: false,
            signaled: true,
        }
    }

    fn drain<S: SlotStore>(sq: &mut SendQueueWith<S>) -> Vec<RequestPacket> {
        core::iter::from_fn(|| sq.next_packet()).collect()
    }

    fn unsignaled(tag: u32, op: WqeOp, len: u32) -> SendWqe {
        SendWqe {
            signaled: false,
            ..wqe(tag, op, len)
        }
    }

    fn acked_through(sq: &mut SendQueue<8>, psn: u32) {
        use crate::roce::aeth::Syndrome;
        use crate::roce::completer::{Response, ResponseKind};
        let _ = sq.on_response(&Response {
            psn: Psn::new(psn),
            kind: ResponseKind::Ack(Syndrome::Ack { credits: 0x1f }),
        });
    }

    #[test]
    fn unsignaled_messages_share_an_ack_request() {
        let mut cfg = RequesterConfig::new(Mtu::Mtu256);
        cfg.ack_coalesce = 3;
        let mut sq = SendQueue::<8>::new(cfg, Psn::ZERO);
        // Unsignaled: every 3rd message asks; a signaled message and a
        // READ always ask.
        sq.post(unsignaled(0, WqeOp::Write, 10)).unwrap();
        sq.post(unsignaled(1, WqeOp::Send, 300)).unwrap();
        sq.post(unsignaled(2, WqeOp::Write, 10)).unwrap();
        sq.post(wqe(3, WqeOp::Send, 10)).unwrap();
        sq.post(unsignaled(4, WqeOp::Write, 10)).unwrap();
        let asks: Vec<bool> = drain(&mut sq).iter().map(|p| p.ack_req).collect();
        assert_eq!(asks, [false, false, false, true, true, false]);
        // The last WRITE (PSN 5) is left unrequested, but the ACK the
        // SEND asked for is still due.
        assert!(!sq.wants_ack_request());
        acked_through(&mut sq, 4);
        assert!(sq.wants_ack_request());
        let p = sq.ack_request_packet().unwrap();
        assert_eq!(
            (p.tag, p.psn, p.ack_req, p.retransmit),
            (4, Psn::new(5), true, true)
        );
        assert!(!sq.wants_ack_request(), "asked once");
        assert_eq!(sq.ack_request_packet(), None);
        acked_through(&mut sq, 5);
        assert!(!sq.has_unacked() && !sq.wants_ack_request());
        sq.post(unsignaled(5, WqeOp::Read, 10)).unwrap();
        sq.post(unsignaled(6, WqeOp::FetchAdd, 8)).unwrap();
        let asks: Vec<bool> = drain(&mut sq).iter().map(|p| p.ack_req).collect();
        assert_eq!(asks, [true], "max_rd_atomic 1: the atomic waits");
    }

    #[test]
    fn the_probe_key_changes_only_when_a_packet_asks() {
        let mut cfg = RequesterConfig::new(Mtu::Mtu256);
        cfg.ack_coalesce = 4;
        let mut sq = SendQueue::<8>::new(cfg, Psn::ZERO);
        let key0 = sq.ack_request_key();
        // Unasked packets going out one by one: an ACK is wanted from the
        // first, and the key stays (the driver's wait is not pushed out).
        for tag in 0..3 {
            sq.post(unsignaled(tag, WqeOp::Write, 10)).unwrap();
            assert_eq!(asking(&mut sq), Vec::<usize>::new());
            assert!(sq.wants_ack_request());
            assert_eq!(sq.ack_request_key(), key0);
        }
        // The fourth asks: nothing wanted while its ACK is due; then the
        // next unasked one wants it again, under a new key.
        sq.post(unsignaled(3, WqeOp::Write, 10)).unwrap();
        assert_eq!(asking(&mut sq), [0]);
        assert!(!sq.wants_ack_request());
        let key1 = sq.ack_request_key();
        assert_ne!(key1, key0);
        acked_through(&mut sq, 3);
        sq.post(unsignaled(4, WqeOp::Write, 10)).unwrap();
        let _ = drain(&mut sq);
        assert!(sq.wants_ack_request());
        assert_eq!(sq.ack_request_key(), key1);
        // The probe asks: a new key.
        assert!(sq.ack_request_packet().is_some());
        assert_ne!(sq.ack_request_key(), key1);
    }

    /// A queue whose unsignaled messages ask for an ACK every 16th time.
    fn coalescing_16() -> SendQueue<8> {
        let mut cfg = RequesterConfig::new(Mtu::Mtu256);
        cfg.ack_coalesce = 16;
        SendQueue::<8>::new(cfg, Psn::ZERO)
    }

    #[test]
    fn a_request_the_driver_made_is_the_latest() {
        let mut sq = coalescing_16();
        sq.post(unsignaled(0, WqeOp::Write, 10)).unwrap();
        sq.post(unsignaled(1, WqeOp::Write, 10)).unwrap();
        assert_eq!(asking(&mut sq), Vec::<usize>::new());
        let key = sq.ack_request_key();
        assert!(sq.wants_ack_request());
        // The driver asked on the second: nothing more is wanted, and the
        // wait starts over under a new key.
        sq.asked_by_driver(Psn::new(1));
        assert!(!sq.wants_ack_request());
        assert_ne!(sq.ack_request_key(), key);
        // An older packet asking changes nothing.
        let key = sq.ack_request_key();
        sq.asked_by_driver(Psn::new(0));
        assert_eq!(sq.ack_request_key(), key);
        // Acknowledged: the next unasked packet wants one again.
        acked_through(&mut sq, 1);
        sq.post(unsignaled(2, WqeOp::Write, 10)).unwrap();
        assert_eq!(asking(&mut sq), Vec::<usize>::new());
        assert!(sq.wants_ack_request());
    }

    #[test]
    fn a_packet_taken_back_goes_out_again_as_it_went() {
        // With 8 slots every 4th unsignaled message asks.
        let mut sq = coalescing_16();
        for tag in 0..4 {
            sq.post(unsignaled(tag, WqeOp::Write, 10)).unwrap();
        }
        let sent = drain(&mut sq);
        assert_eq!(
            sent.iter().map(|p| p.ack_req).collect::<Vec<_>>(),
            [false, false, false, true]
        );
        // The 4th is refused and taken back: its request is not in flight,
        // nothing goes out while held, then it asks again.
        assert!(sq.hold(&sent[3]));
        assert_eq!(sq.next_packet(), None);
        sq.resume();
        assert_eq!(sq.next_packet(), Some(sent[3]));
        assert!(!sq.wants_ack_request());
        // An unasked one taken back leaves the count as it was: the 4th
        // message still asks, not the 3rd sent again.
        acked_through(&mut sq, 3);
        for tag in 4..7 {
            sq.post(unsignaled(tag, WqeOp::Write, 10)).unwrap();
        }
        let sent = drain(&mut sq);
        assert!(sent.iter().all(|p| !p.ack_req));
        assert!(sq.hold(&sent[2]));
        sq.resume();
        assert_eq!(sq.next_packet(), Some(sent[2]));
        sq.post(unsignaled(7, WqeOp::Write, 10)).unwrap();
        assert_eq!(asking(&mut sq), [0]);
    }

    #[test]
    fn a_due_ack_request_rides_on_the_next_packet_if_one_goes() {
        let mut sq = coalescing_16();
        sq.post(unsignaled(0, WqeOp::Write, 10)).unwrap();
        assert_eq!(asking(&mut sq), Vec::<usize>::new());
        // Due while sending goes on: the next new packet (even one in a
        // message's middle) asks, no duplicate.
        sq.ask_with_next_packet();
        sq.post(unsignaled(1, WqeOp::Write, 600)).unwrap();
        assert_eq!(asking(&mut sq), [0]);
        assert!(!sq.asks_with_next_packet() && !sq.wants_ack_request());
        assert_eq!(sq.ack_request_packet(), None);
        // Due with nothing to send: still pending after the pass, so the
        // newest packet is resent asking.
        acked_through(&mut sq, 1);
        assert!(sq.wants_ack_request());
        sq.ask_with_next_packet();
        assert_eq!(asking(&mut sq), Vec::<usize>::new());
        assert!(sq.asks_with_next_packet());
        let p = sq.ack_request_packet().unwrap();
        assert_eq!((p.tag, p.psn, p.ack_req), (1, Psn::new(3), true));
        assert!(!sq.asks_with_next_packet());
        // Nothing wanted: nothing pending.
        acked_through(&mut sq, 3);
        sq.ask_with_next_packet();
        assert!(!sq.asks_with_next_packet());
    }

    #[test]
    fn a_signaled_local_operation_asks_at_once_for_what_it_waits_for() {
        let mut sq = coalescing_16();
        sq.post(unsignaled(0, WqeOp::Write, 10)).unwrap();
        sq.post(unsignaled(1, WqeOp::Write, 10)).unwrap();
        sq.post(unsignaled(2, WqeOp::Local, 0)).unwrap();
        sq.post(wqe(3, WqeOp::Local, 0)).unwrap();
        assert_eq!(asking(&mut sq), Vec::<usize>::new());
        // An unsignaled one completes unseen: no hurry.
        assert_eq!(sq.take_local(), Some(2));
        assert!(sq.wants_ack_request() && !sq.ack_request_now());
        // A signaled one's completion waits for the two WRITEs.
        assert_eq!(sq.take_local(), Some(3));
        assert!(sq.ack_request_now());
        let p = sq.ack_request_packet().unwrap();
        assert_eq!((p.tag, p.psn, p.ack_req), (1, Psn::new(1), true));
        assert!(!sq.ack_request_now());
        // Once they are acknowledged, nothing more.
        acked_through(&mut sq, 1);
        assert!(!sq.ack_request_now() && !sq.wants_ack_request());
        // With nothing unacknowledged, a signaled local operation asks for
        // nothing.
        sq.post(wqe(4, WqeOp::Local, 0)).unwrap();
        assert_eq!(sq.take_local(), Some(4));
        assert!(!sq.ack_request_now());
    }

    #[test]
    fn ack_requests_as_rxe_by_default() {
        let mut sq = SendQueue::<8>::new(RequesterConfig::new(Mtu::Mtu256), Psn::ZERO);
        for tag in 0..4 {
            sq.post(unsignaled(tag, WqeOp::Write, 10)).unwrap();
        }
        assert!(drain(&mut sq).iter().all(|p| p.ack_req));
        assert!(!sq.wants_ack_request());
    }

    /// The indices of the packets that ask for an ACK, of all sent now.
    fn asking<S: SlotStore>(sq: &mut SendQueueWith<S>) -> Vec<usize> {
        drain(sq)
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.ack_req.then_some(i))
            .collect()
    }

    #[test]
    fn ack_coalescing_is_bounded_by_the_queue_and_the_window() {
        // Half the queue's 8 slots.
        let mut cfg = RequesterConfig::new(Mtu::Mtu256);
        cfg.ack_coalesce = 100;
        let mut sq = SendQueue::<8>::new(cfg, Psn::ZERO);
        for tag in 0..8 {
            sq.post(unsignaled(tag, WqeOp::Write, 10)).unwrap();
        }
        assert_eq!(asking(&mut sq), [3, 7]);
        // A quarter of a window of 8 PSNs.
        cfg.max_unacked_psns = 8;
        let mut sq = SendQueue::<8>::new(cfg, Psn::ZERO);
        for tag in 0..4 {
            sq.post(unsignaled(tag, WqeOp::Write, 10)).unwrap();
        }
        let asks: Vec<bool> = drain(&mut sq).iter().map(|p| p.ack_req).collect();
        assert_eq!(asks, [false, true, false, true]);
        // Messages of 3 packets and a window of 16: a message asks once a
        // quarter of the window (4 packets) went unrequested.
        cfg.max_unacked_psns = 16;
        let mut sq = SendQueue::<8>::new(cfg, Psn::ZERO);
        for tag in 0..4 {
            sq.post(unsignaled(tag, WqeOp::Send, 600)).unwrap();
        }
        assert_eq!(asking(&mut sq), [5, 11]);
    }

    #[test]
    fn resent_packets_ask_and_a_paused_stream_waits_for_the_timer_while_resending() {
        let mut cfg = RequesterConfig::new(Mtu::Mtu256);
        cfg.ack_coalesce = 4;
        let mut sq = SendQueue::<8>::new(cfg, Psn::ZERO);
        for tag in 0..2 {
            sq.post(unsignaled(tag, WqeOp::Write, 10)).unwrap();
        }
        assert!(drain(&mut sq).iter().all(|p| !p.ack_req));
        assert!(sq.wants_ack_request());
        let _ = sq.on_timeout();
        assert!(!sq.wants_ack_request(), "going back N");
        let resent = drain(&mut sq);
        assert_eq!(resent.len(), 2);
        assert!(resent.iter().all(|p| p.retransmit && p.ack_req));
        assert!(!sq.wants_ack_request());
    }

    #[test]
    fn assigns_consecutive_psns_across_wqes() {
        let mut sq = SendQueue::<8>::new(RequesterConfig::new(Mtu::Mtu256), Psn::new(0xFF_FFFE));
        sq.post(wqe(1, WqeOp::Send, 600)).unwrap();
        sq.post(wqe(2, WqeOp::Read, 1000)).unwrap();
        sq.post(wqe(3, WqeOp::Write, 10)).unwrap();
        let p = drain(&mut sq);
        let psns: Vec<u32> = p.iter().map(|p| p.psn.value()).collect();
        // SEND: 3 PSNs, READ: 4 PSNs (one request), WRITE: 1.
        assert_eq!(psns, [0xFF_FFFE, 0xFF_FFFF, 0, 1, 5]);
        assert_eq!(p[3].operation, Operation::RdmaReadRequest);
        assert!(p.iter().all(|p| !p.retransmit));
        assert_eq!(sq.next_psn(), Psn::new(6));
        assert!(sq.has_unacked());
        assert_eq!(sq.pop_completion(), None);
    }

    #[test]
    fn rd_atomic_limit_and_fence() {
        let mut sq = SendQueue::<8>::new(RequesterConfig::new(Mtu::Mtu1024), Psn::ZERO);
        sq.post(wqe(1, WqeOp::Read, 8)).unwrap();
        sq.post(wqe(2, WqeOp::FetchAdd, 8)).unwrap();
        sq.post(wqe(3, WqeOp::Send, 8)).unwrap();
        // max_rd_atomic = 1: the atomic (and everything behind it) waits.
        assert_eq!(drain(&mut sq).len(), 1);
        let mut sq = SendQueue::<8>::new(RequesterConfig::new(Mtu::Mtu1024), Psn::ZERO);
        sq.post(wqe(1, WqeOp::Read, 8)).unwrap();
        sq.post(SendWqe {
            fence: true,
            signaled: true,
            ..wqe(2, WqeOp::Send, 8)
        })
        .unwrap();
        assert_eq!(drain(&mut sq).len(), 1);
    }

    #[test]
    fn psn_window_and_queue_full() {
        let mut cfg = RequesterConfig::new(Mtu::Mtu256);
        cfg.max_unacked_psns = 4;
        let mut sq = SendQueue::<2>::new(cfg, Psn::ZERO);
        // A message larger than the window is sent when it is alone...
        sq.post(wqe(1, WqeOp::Read, 256 * 10)).unwrap();
        sq.post(wqe(2, WqeOp::Send, 256 * 10)).unwrap();
        assert_eq!(sq.post(wqe(3, WqeOp::Send, 1)), Err(Error::QueueFull));
        let p = drain(&mut sq);
        // ...but the SEND behind it waits for acknowledgements.
        assert_eq!(p.len(), 1);
        assert_eq!(
            sq.post(wqe(3, WqeOp::CompareSwap, 7)),
            Err(Error::QueueFull)
        );
        let mut sq = SendQueue::<2>::new(cfg, Psn::ZERO);
        sq.post(wqe(1, WqeOp::Send, 256 * 10)).unwrap();
        assert_eq!(drain(&mut sq).len(), 4);
        assert_eq!(
            SendQueue::<2>::new(cfg, Psn::ZERO).post(wqe(3, WqeOp::CompareSwap, 7)),
            Err(Error::BadMessageLength)
        );
    }

    #[test]
    fn heap_storage_sets_capacity_and_restart_empties_in_place() {
        let cfg = RequesterConfig::new(Mtu::Mtu256);
        let mut sq = SendQueueWith::with_storage(vec![None; 3], cfg, Psn::new(10));
        assert_eq!(sq.capacity(), 3);
        for tag in 0..3 {
            sq.post(wqe(tag, WqeOp::Send, 1)).unwrap();
        }
        assert_eq!(sq.post(wqe(3, WqeOp::Send, 1)), Err(Error::QueueFull));
        let p = drain(&mut sq);
        assert_eq!(p.len(), 3);
        assert_eq!(p[2].psn, Psn::new(12));
        sq.restart(cfg, Psn::new(100));
        assert!(sq.is_empty() && sq.has_room() && !sq.has_unacked());
        assert_eq!(
            (sq.capacity(), sq.next_psn(), sq.una()),
            (3, Psn::new(100), Psn::new(100))
        );
        assert!(sq.pop_completion().is_none());
        sq.post(wqe(7, WqeOp::Send, 1)).unwrap();
        let p = drain(&mut sq);
        assert_eq!((p.len(), p[0].tag, p[0].psn), (1, 7, Psn::new(100)));
    }

    #[test]
    fn error_state_flushes() {
        let mut sq = SendQueue::<4>::new(RequesterConfig::new(Mtu::Mtu256), Psn::ZERO);
        sq.post(wqe(1, WqeOp::Send, 1)).unwrap();
        sq.post(wqe(2, WqeOp::Send, 1)).unwrap();
        assert!(sq.next_packet().is_some());
        sq.set_error();
        assert_eq!(sq.next_packet(), None);
        assert!(!sq.has_unacked());
        let c = sq.pop_completion().unwrap();
        assert_eq!((c.tag, c.status), (1, WcStatus::WrFlushErr));
        let c = sq.pop_completion().unwrap();
        assert_eq!((c.tag, c.status), (2, WcStatus::WrFlushErr));
        assert_eq!(sq.pop_completion(), None);
        assert!(sq.is_empty());
    }
}
