//! The RC completer: what a [`SendQueue`](super::requester::SendQueue)
//! does with each response (ACK, NAK, RDMA READ response, atomic ACK) and
//! with timer expiries.
//!
//! Rules (IBTA vol. 1, 9.7.5.1):
//! - Responses are valid only for PSNs in the window of sent, not yet
//!   completed requests; anything else (a ghost or a stale duplicate) is
//!   ignored.
//! - An ACK with PSN `p` acknowledges every request packet up to `p`
//!   (coalescing); a NAK, RNR NAK, READ response or atomic ACK with PSN
//!   `p` implicitly acknowledges every packet before `p`.
//! - Responses to READ and atomic requests are never implicit: if a
//!   response acknowledges PSNs beyond a READ or atomic whose response has
//!   not arrived, that response was lost (implicit NAK) and the requester
//!   retransmits from the oldest unacknowledged PSN.
//! - A PSN sequence error NAK, an implicit NAK or a transport timeout
//!   retransmits from the oldest unacknowledged PSN (go-back-N), using up
//!   one of `retry_cnt` retries; a retransmission already under way for
//!   the same PSN is not restarted by further NAKs.
//! - An RNR NAK pauses sending for the RNR timer, then retransmits, using
//!   one of `rnr_retry` retries (7: forever).
//! - An invalid request, remote access or remote operational error NAK
//!   completes its request with the matching error and moves the QP to
//!   the error state; so do exhausted retries and malformed responses
//!   (bad response error).
//! - Any progress resets both retry counters.

use super::aeth::{NakCode, Syndrome};
use super::error::Error;
use super::opcode::{Operation, Position, Transport};
use super::packet::Headers;
use super::psn::Psn;
use super::requester::{SendQueueWith, SlotStore};
use super::timer::{rnr_timer_usec, RNR_RETRY_INFINITE};
use super::wc::WcStatus;

/// The kind of an RC response packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResponseKind {
    /// Acknowledge: ACK, RNR NAK or NAK.
    Ack(Syndrome),
    /// RDMA READ response.
    ReadResponse {
        /// First, Middle, Last or Only.
        position: Position,
        /// The AETH syndrome (First, Last and Only carry one).
        syndrome: Option<Syndrome>,
        /// Payload bytes.
        payload_len: u32,
    },
    /// ATOMIC Acknowledge.
    AtomicAck {
        /// The AETH syndrome.
        syndrome: Syndrome,
        /// The remote data before the operation.
        orig: u64,
    },
}

/// A response as the completer sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Response {
    /// PSN from the BTH.
    pub psn: Psn,
    /// What it is.
    pub kind: ResponseKind,
}

impl Response {
    /// Extracts the response from parsed headers and the payload length.
    /// Fails with [`Error::UnexpectedOpcode`] for anything but an RC
    /// response, [`Error::MissingHeader`] if a required header is absent
    /// (never after [`Headers::parse`]), or [`Error::ValueOutOfRange`] for
    /// a payload above 4 GiB.
    pub fn from_headers(h: &Headers, payload_len: usize) -> Result<Self, Error> {
        let op = h.bth.opcode.operation();
        if h.bth.opcode.transport() != Transport::Rc || !op.is_response() {
            return Err(Error::UnexpectedOpcode);
        }
        let syndrome = h.aeth.map(|a| a.syndrome);
        let kind = match op {
            Operation::Acknowledge => ResponseKind::Ack(syndrome.ok_or(Error::MissingHeader)?),
            Operation::AtomicAcknowledge => ResponseKind::AtomicAck {
                syndrome: syndrome.ok_or(Error::MissingHeader)?,
                orig: h.atomic_ack_eth.ok_or(Error::MissingHeader)?.orig,
            },
            _ => ResponseKind::ReadResponse {
                position: op.position(),
                syndrome,
                payload_len: u32::try_from(payload_len).map_err(|_| Error::ValueOutOfRange)?,
            },
        };
        Ok(Response {
            psn: h.bth.psn,
            kind,
        })
    }
}

/// What the driver does after
/// [`SendQueue::on_response`](SendQueueWith::on_response),
/// [`SendQueue::on_timeout`](SendQueueWith::on_timeout) or
/// [`SendQueue::on_rnr_timer`](SendQueueWith::on_rnr_timer). In every case
/// it then drains [`SendQueue::pop_completion`](SendQueueWith::pop_completion),
/// restarts the transport timer if
/// [`SendQueue::has_unacked`](SendQueueWith::has_unacked) (stops it
/// otherwise), and resumes sending with
/// [`SendQueue::next_packet`](SendQueueWith::next_packet).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Nothing changed (duplicate, stale, ghost or reserved response):
    /// drop the packet, leave the timer alone.
    Ignore,
    /// Requests were acknowledged (completions may be ready).
    Progress,
    /// Copy the READ response payload into the READ's local buffer at
    /// `offset` (`len` bytes, already checked against the request).
    PlaceReadData {
        /// The READ work request's tag.
        tag: u32,
        /// Byte offset in the local buffer.
        offset: u32,
        /// Payload bytes.
        len: u32,
    },
    /// Store the 8-byte original remote value into the atomic's local
    /// buffer; the atomic has completed.
    AtomicResult {
        /// The atomic work request's tag.
        tag: u32,
        /// The remote data before the operation.
        orig: u64,
    },
    /// Packets from `from` on will be resent by
    /// [`SendQueue::next_packet`](SendQueueWith::next_packet).
    Retransmit {
        /// First PSN resent.
        from: Psn,
    },
    /// Stop the transport timer; start the RNR timer for `usec`
    /// microseconds and call
    /// [`SendQueue::on_rnr_timer`](SendQueueWith::on_rnr_timer) when it
    /// expires.
    RnrWait {
        /// RNR NAK timer, microseconds.
        usec: u32,
    },
    /// The QP's send side entered the error state: the first unfinished
    /// request completes with `status`, the rest are flushed. Move the QP
    /// to the error state.
    Fatal {
        /// Status of the failed request.
        status: WcStatus,
    },
}

/// Result of acknowledging PSNs before some point.
pub(super) enum Acked {
    /// Done; whether `una` moved.
    Done(bool),
    /// A READ or atomic response is missing before that point.
    ImplicitNak,
}

impl<S: SlotStore> SendQueueWith<S> {
    /// Processes one response. See [`Action`].
    pub fn on_response(&mut self, r: &Response) -> Action {
        if self.error || !self.in_window(r.psn) {
            return Action::Ignore;
        }
        let p = r.psn;
        match r.kind {
            ResponseKind::Ack(syndrome) => self.on_ack(p, syndrome),
            ResponseKind::ReadResponse {
                position,
                syndrome,
                payload_len,
            } => self.on_read_response(p, position, syndrome, payload_len),
            ResponseKind::AtomicAck { syndrome, orig } => self.on_atomic_ack(p, syndrome, orig),
        }
    }

    /// Where the data of response `r` goes, if [`SendQueueWith::on_response`]
    /// would take it now: `(tag, offset, len)` of a READ response's
    /// payload (as its [`Action::PlaceReadData`]) or of an atomic's 8-byte
    /// result (as its [`Action::AtomicResult`], offset 0). Changes
    /// nothing: a driver whose local memory may be absent (on-demand
    /// paging) places the data first and hands the response to the engine
    /// only once it is placed, so a page fault never leaves the engine
    /// ahead of the memory.
    pub fn placement(&self, r: &Response) -> Option<(u32, u32, u32)> {
        if matches!(r.kind, ResponseKind::Ack(_))
            || self.error
            || !self.in_window(r.psn)
            || r.psn.is_before(self.una)
        {
            return None;
        }
        let p = r.psn;
        let slot = self.slot(self.front_after_ack(p)?)?;
        if !slot.started {
            return None;
        }
        match r.kind {
            ResponseKind::AtomicAck { syndrome, .. } => {
                (syndrome.is_ack() && slot.wqe.op.is_atomic()).then_some((slot.wqe.tag, 0, 8))
            }
            ResponseKind::ReadResponse {
                position,
                syndrome,
                payload_len,
            } => {
                if !matches!(syndrome, None | Some(Syndrome::Ack { .. }))
                    || slot.wqe.op != super::segment::WqeOp::Read
                {
                    return None;
                }
                let offset = self.read_response_offset(&slot, p, position, payload_len)?;
                Some((slot.wqe.tag, offset, payload_len))
            }
            ResponseKind::Ack(_) => None,
        }
    }

    /// Where in READ `slot` the response at PSN `p` with `position` and
    /// `payload_len` bytes puts its data, if it is the response expected
    /// there (its position in the READ, or a First/Only restarting a READ
    /// re-requested from `p`, and the length the MTU gives).
    fn read_response_offset(
        &self,
        slot: &super::requester::Slot,
        p: Psn,
        position: Position,
        payload_len: u32,
    ) -> Option<u32> {
        let plan = slot.plan;
        let n = plan.psn_count();
        let i = slot.first_psn.distance_to(p);
        let rest = n.saturating_sub(i);
        let continuation = match (n, i) {
            (1, _) => Position::Only,
            (_, 0) => Position::First,
            _ if rest == 1 => Position::Last,
            _ => Position::Middle,
        };
        let restart = if rest == 1 {
            Position::Only
        } else {
            Position::First
        };
        let resumed = self.read_resume == Some(p);
        if position != continuation && !(resumed && position == restart) {
            return None;
        }
        let offset = plan.offset_of(i);
        let expected = plan.len().saturating_sub(offset).min(plan.mtu().bytes());
        (payload_len == expected).then_some(offset)
    }

    /// The slot (from the head) that would be the oldest unfinished one
    /// after acknowledging every PSN before `p`, if that makes `p` the
    /// oldest unacknowledged PSN without an implicit NAK (what
    /// `ack_before` does, without doing it).
    fn front_after_ack(&self, p: Psn) -> Option<usize> {
        let (mut una, mut k) = (self.una, self.done);
        while una.is_before(p) {
            let slot = self.slot(k)?;
            if !slot.started || slot.wqe.op.is_read_or_atomic() {
                return None;
            }
            let end = slot.end_psn();
            if p.is_before(end) {
                una = p;
                break;
            }
            una = end;
            k = k.wrapping_add(1);
            // `finish` settles the performed local operations after it.
            while self
                .slot(k)
                .is_some_and(|s| s.wqe.op.is_local() && s.started && s.status.is_none())
            {
                k = k.wrapping_add(1);
            }
        }
        (una == p).then_some(k)
    }

    /// The transport (local ACK) timer expired: retransmit from the oldest
    /// unacknowledged PSN, or fail with [`WcStatus::RetryExcErr`] when the
    /// retries are used up. Ignored when nothing is outstanding or while
    /// waiting for the RNR timer.
    pub fn on_timeout(&mut self) -> Action {
        if self.error || self.rnr_wait || self.una == self.sent_end {
            return Action::Ignore;
        }
        self.retrying = false;
        self.retry()
    }

    /// Resends everything unacknowledged, from the oldest unacknowledged
    /// PSN, now: the driver moved the traffic to another path (a link went
    /// down). No retry is charged. Ignored when nothing is outstanding or
    /// while waiting for the RNR timer.
    pub fn go_back_now(&mut self) -> Action {
        if self.error || self.rnr_wait || self.una == self.sent_end {
            return Action::Ignore;
        }
        self.retrying = true;
        self.rewind();
        Action::Retransmit { from: self.una }
    }

    /// Sets the transport retries left back to `retry_cnt`. A driver that
    /// spreads the QP over several paths calls it before each
    /// [`SendQueue::on_timeout`](SendQueueWith::on_timeout) when its own
    /// per-path budget says to go on, and ends the QP with
    /// [`SendQueue::abort`](SendQueueWith::abort) when that budget is spent.
    pub fn refill_retries(&mut self) {
        self.retry_left = self.cfg.retry_cnt;
    }

    /// Fails the oldest unfinished request with `status` and enters the
    /// error state (the rest are flushed). Returns the resulting
    /// [`Action::Fatal`] (or [`Action::Ignore`] if already in error).
    pub fn abort(&mut self, status: WcStatus) -> Action {
        if self.error {
            return Action::Ignore;
        }
        self.fail(status)
    }

    /// The tag of the oldest unfinished request: the one a timeout is
    /// charged to.
    pub fn oldest_tag(&self) -> Option<u32> {
        self.slot(self.done).map(|s| s.wqe.tag)
    }

    /// The RNR timer expired: resume sending (from the PSN that was RNR
    /// NAKed).
    pub fn on_rnr_timer(&mut self) -> Action {
        if !self.rnr_wait || self.error {
            return Action::Ignore;
        }
        self.rnr_wait = false;
        Action::Retransmit { from: self.una }
    }

    /// Whether `p` lies in the response window: from the first PSN of the
    /// oldest unfinished request to the last PSN sent.
    fn in_window(&self, p: Psn) -> bool {
        let lo = match self.slot(self.done) {
            Some(s) if s.started => s.first_psn,
            _ => self.una,
        };
        lo.distance_to(p) < lo.distance_to(self.sent_end)
    }

    fn on_ack(&mut self, p: Psn, syndrome: Syndrome) -> Action {
        match syndrome {
            Syndrome::Ack { .. } => {
                if p.is_before(self.una) {
                    return Action::Ignore;
                }
                match self.ack_before(p.next()) {
                    Acked::Done(true) => Action::Progress,
                    Acked::Done(false) => Action::Ignore,
                    Acked::ImplicitNak => self.retry(),
                }
            }
            Syndrome::RnrNak { timer } => {
                if p.is_before(self.una) || self.rnr_wait {
                    return Action::Ignore;
                }
                match self.ack_before(p) {
                    Acked::ImplicitNak => return self.retry(),
                    Acked::Done(_) if p != self.una => return self.retry(),
                    Acked::Done(_) => {}
                }
                if self.rnr_left == 0 {
                    return self.fail(WcStatus::RnrRetryExcErr);
                }
                if self.rnr_left != RNR_RETRY_INFINITE {
                    self.rnr_left = self.rnr_left.wrapping_sub(1);
                }
                self.rnr_wait = true;
                self.retrying = true;
                self.rewind();
                Action::RnrWait {
                    usec: rnr_timer_usec(timer),
                }
            }
            Syndrome::Nak(NakCode::PsnSequenceError) => {
                if p.is_before(self.una) {
                    return Action::Ignore;
                }
                let progress = match self.ack_before(p) {
                    Acked::ImplicitNak => false,
                    Acked::Done(progress) => progress,
                };
                if self.rnr_wait {
                    return if progress {
                        Action::Progress
                    } else {
                        Action::Ignore
                    };
                }
                self.retry()
            }
            Syndrome::Nak(code) => {
                // The NAK may name a PSN inside the oldest unfinished
                // request (e.g. a READ rejected at its first PSN).
                if self.una.is_before(p) {
                    match self.ack_before(p) {
                        Acked::ImplicitNak => return self.retry(),
                        Acked::Done(_) => {}
                    }
                }
                match WcStatus::from_nak(code) {
                    Some(status) => self.fail(status),
                    None => Action::Ignore,
                }
            }
            Syndrome::Reserved(_) => Action::Ignore,
        }
    }

    fn on_read_response(
        &mut self,
        p: Psn,
        position: Position,
        syndrome: Option<Syndrome>,
        payload_len: u32,
    ) -> Action {
        if p.is_before(self.una) {
            return Action::Ignore;
        }
        match self.ack_before(p) {
            Acked::ImplicitNak => return self.retry(),
            Acked::Done(_) if p != self.una => return self.retry(),
            Acked::Done(_) => {}
        }
        if !matches!(syndrome, None | Some(Syndrome::Ack { .. })) {
            return self.fail(WcStatus::BadRespErr);
        }
        let Some(slot) = self.slot(self.done) else {
            return Action::Ignore;
        };
        if slot.wqe.op == super::segment::WqeOp::AtomicWrite && slot.started {
            // Its response is an empty READ Response Only with an ACK.
            if position != Position::Only || payload_len != 0 || syndrome.is_none() {
                return self.fail(WcStatus::BadRespErr);
            }
            self.una = p.next();
            self.progress();
            self.finish(WcStatus::Success);
            return Action::Progress;
        }
        if slot.wqe.op != super::segment::WqeOp::Read || !slot.started {
            return self.fail(WcStatus::BadRespErr);
        }
        let Some(offset) = self.read_response_offset(&slot, p, position, payload_len) else {
            return self.fail(WcStatus::BadRespErr);
        };
        self.una = p.next();
        self.progress();
        if self.una == slot.end_psn() {
            self.finish(WcStatus::Success);
        }
        Action::PlaceReadData {
            tag: slot.wqe.tag,
            offset,
            len: payload_len,
        }
    }

    fn on_atomic_ack(&mut self, p: Psn, syndrome: Syndrome, orig: u64) -> Action {
        if p.is_before(self.una) {
            return Action::Ignore;
        }
        match self.ack_before(p) {
            Acked::ImplicitNak => return self.retry(),
            Acked::Done(_) if p != self.una => return self.retry(),
            Acked::Done(_) => {}
        }
        let Some(slot) = self.slot(self.done) else {
            return Action::Ignore;
        };
        if !syndrome.is_ack() || !slot.wqe.op.is_atomic() || !slot.started {
            return self.fail(WcStatus::BadRespErr);
        }
        self.una = p.next();
        self.progress();
        self.finish(WcStatus::Success);
        Action::AtomicResult {
            tag: slot.wqe.tag,
            orig,
        }
    }

    /// Acknowledges every PSN before `p`, completing SEND and WRITE
    /// requests that end before it. Stops with an implicit NAK at a READ
    /// or atomic whose response is missing.
    pub(super) fn ack_before(&mut self, p: Psn) -> Acked {
        let mut moved = false;
        while self.una.is_before(p) {
            let Some(slot) = self.slot(self.done) else {
                break;
            };
            if !slot.started {
                break;
            }
            if slot.wqe.op.is_read_or_atomic() {
                if moved {
                    self.progress();
                }
                return Acked::ImplicitNak;
            }
            let end = slot.end_psn();
            if p.is_before(end) {
                self.una = p;
                moved = true;
                break;
            }
            self.una = end;
            moved = true;
            self.finish(WcStatus::Success);
        }
        if moved {
            self.progress();
        }
        Acked::Done(moved)
    }

    /// Progress was made: reset the retry counters and the retry latch.
    fn progress(&mut self) {
        self.retry_left = self.cfg.retry_cnt;
        self.rnr_left = self.cfg.rnr_retry;
        self.retrying = false;
        self.read_resume = None;
    }

    /// Finishes the oldest unfinished request with `status`, and the
    /// performed local operations right after it.
    fn finish(&mut self, status: WcStatus) {
        self.finish_one(status);
        if !self.error {
            self.settle_locals();
        }
    }

    /// Finishes the oldest unfinished request with `status`.
    pub(super) fn finish_one(&mut self, status: WcStatus) {
        let k = self.done;
        let Some(slot) = self.slot_mut(k) else {
            return;
        };
        slot.status = Some(status);
        let rd_atomic = slot.wqe.op.is_read_or_atomic() && slot.started;
        if rd_atomic {
            self.rd_atomic = self.rd_atomic.saturating_sub(1);
        }
        self.done = self.done.wrapping_add(1);
        if self.cursor < self.done {
            self.cursor = self.done;
            if let Some(s) = self.slot(self.cursor) {
                if s.started {
                    self.cursor_psn = s.first_psn;
                }
            }
        }
    }

    /// Fails the oldest unfinished request and enters the error state.
    fn fail(&mut self, status: WcStatus) -> Action {
        self.finish_one(status);
        self.error = true;
        Action::Fatal { status }
    }

    /// Starts a go-back-N retransmission from `una`, unless one is already
    /// under way; fails when the retries are used up.
    fn retry(&mut self) -> Action {
        if self.retrying {
            return Action::Ignore;
        }
        if self.retry_left == 0 {
            return self.fail(WcStatus::RetryExcErr);
        }
        self.retry_left = self.retry_left.wrapping_sub(1);
        self.retrying = true;
        self.rewind();
        Action::Retransmit { from: self.una }
    }

    /// Points the send cursor back at `una`.
    fn rewind(&mut self) {
        self.cursor = self.done;
        self.cursor_psn = self.una;
        self.read_resume = match self.slot(self.done) {
            Some(s) if s.started && s.wqe.op.is_read_or_atomic() && s.first_psn != self.una => {
                Some(self.una)
            }
            _ => None,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::super::requester::{RequestPacket, RequesterConfig, SendQueue, SendWqe};
    use super::super::segment::{Mtu, WqeOp};
    use super::*;
    use std::vec::Vec;

    fn sq(psn: u32) -> SendQueue<8> {
        SendQueue::new(RequesterConfig::new(Mtu::Mtu256), Psn::new(psn))
    }

    fn post(q: &mut SendQueue<8>, tag: u32, op: WqeOp, len: u32) {
        q.post(SendWqe {
            tag,
            op,
            len,
            fence: false,
            signaled: true,
        })
        .unwrap();
    }

    fn drain(q: &mut SendQueue<8>) -> Vec<RequestPacket> {
        core::iter::from_fn(|| q.next_packet()).collect()
    }

    fn ack(psn: u32) -> Response {
        Response {
            psn: Psn::new(psn),
            kind: ResponseKind::Ack(Syndrome::Ack { credits: 0x1f }),
        }
    }

    fn nak(psn: u32, s: Syndrome) -> Response {
        Response {
            psn: Psn::new(psn),
            kind: ResponseKind::Ack(s),
        }
    }

    fn read_resp(psn: u32, position: Position, len: u32) -> Response {
        Response {
            psn: Psn::new(psn),
            kind: ResponseKind::ReadResponse {
                position,
                syndrome: (position != Position::Middle).then_some(Syndrome::Ack { credits: 0 }),
                payload_len: len,
            },
        }
    }

    fn completions(q: &mut SendQueue<8>) -> Vec<(u32, WcStatus)> {
        core::iter::from_fn(|| q.pop_completion())
            .map(|c| (c.tag, c.status))
            .collect()
    }

    #[test]
    fn atomic_write_completes_on_its_empty_read_response() {
        let mut q = sq(20);
        post(&mut q, 1, WqeOp::Send, 10);
        post(&mut q, 2, WqeOp::AtomicWrite, 8);
        let p = drain(&mut q);
        assert_eq!(p.len(), 2);
        assert_eq!(
            (p[1].operation, p[1].payload_len, p[1].psn),
            (Operation::AtomicWrite, 8, Psn::new(21))
        );
        // A plain ACK covering it is an implicit NAK: it needs its response.
        assert_eq!(
            q.on_response(&ack(21)),
            Action::Retransmit { from: Psn::new(21) }
        );
        assert_eq!(completions(&mut q), [(1, WcStatus::Success)]);
        assert_eq!(
            q.on_response(&read_resp(21, Position::Only, 0)),
            Action::Progress
        );
        assert_eq!(completions(&mut q), [(2, WcStatus::Success)]);
        assert!(!q.has_unacked());
        // A response carrying data is not one.
        let mut q = sq(0);
        post(&mut q, 3, WqeOp::AtomicWrite, 8);
        drain(&mut q);
        assert!(matches!(
            q.on_response(&read_resp(0, Position::Only, 8)),
            Action::Fatal { .. }
        ));
    }

    #[test]
    fn refilled_retries_never_run_out_and_abort_fails_the_oldest() {
        let mut cfg = RequesterConfig::new(Mtu::Mtu256);
        cfg.retry_cnt = 1;
        let mut q: SendQueue<8> = SendQueue::new(cfg, Psn::new(10));
        post(&mut q, 7, WqeOp::Send, 10);
        post(&mut q, 8, WqeOp::Send, 10);
        assert_eq!(drain(&mut q).len(), 2);
        assert_eq!(q.oldest_tag(), Some(7));
        // Many more timeouts than retry_cnt: each one retransmits.
        for _ in 0..5 {
            q.refill_retries();
            assert_eq!(q.on_timeout(), Action::Retransmit { from: Psn::new(10) });
            assert_eq!(drain(&mut q).len(), 2);
        }
        assert_eq!(
            q.abort(WcStatus::RetryExcErr),
            Action::Fatal {
                status: WcStatus::RetryExcErr
            }
        );
        assert_eq!(q.abort(WcStatus::RetryExcErr), Action::Ignore);
        assert_eq!(
            completions(&mut q),
            [(7, WcStatus::RetryExcErr), (8, WcStatus::WrFlushErr)]
        );
    }

    #[test]
    fn coalesced_ack_completes_everything_before() {
        let mut q = sq(0xFF_FFFF);
        post(&mut q, 1, WqeOp::Send, 600); // PSNs FFFFFF, 0, 1
        post(&mut q, 2, WqeOp::Write, 10); // 2
        post(&mut q, 3, WqeOp::Send, 10); // 3
        assert_eq!(drain(&mut q).len(), 5);
        // Partial ACK: no completion yet.
        assert_eq!(q.on_response(&ack(0)), Action::Progress);
        assert_eq!(completions(&mut q), []);
        assert_eq!(q.on_response(&ack(2)), Action::Progress);
        assert_eq!(
            completions(&mut q),
            [(1, WcStatus::Success), (2, WcStatus::Success)]
        );
        // Duplicate and ghost ACKs.
        assert_eq!(q.on_response(&ack(2)), Action::Ignore);
        assert_eq!(q.on_response(&ack(1)), Action::Ignore);
        assert_eq!(q.on_response(&ack(4)), Action::Ignore);
        assert_eq!(q.on_response(&ack(3)), Action::Progress);
        assert_eq!(completions(&mut q), [(3, WcStatus::Success)]);
        assert!(!q.has_unacked());
        assert_eq!(q.on_response(&ack(3)), Action::Ignore);
    }

    #[test]
    fn sequence_nak_retransmits_once() {
        let mut q = sq(10);
        post(&mut q, 1, WqeOp::Send, 256 * 4); // 10..=13
        assert_eq!(drain(&mut q).len(), 4);
        let seq = Syndrome::Nak(NakCode::PsnSequenceError);
        assert_eq!(
            q.on_response(&nak(12, seq)),
            Action::Retransmit { from: Psn::new(12) }
        );
        // Another NAK for the same loss is ignored.
        assert_eq!(q.on_response(&nak(12, seq)), Action::Ignore);
        let p = drain(&mut q);
        assert_eq!(p.len(), 2);
        assert!(p.iter().all(|p| p.retransmit));
        assert_eq!(p[0].operation, Operation::SendMiddle);
        assert_eq!(p[0].psn, Psn::new(12));
        assert_eq!(q.on_response(&ack(13)), Action::Progress);
        assert_eq!(completions(&mut q), [(1, WcStatus::Success)]);
    }

    #[test]
    fn implicit_nak_for_missing_read_response() {
        let mut q = sq(0);
        post(&mut q, 1, WqeOp::Read, 600); // 0..=2
        post(&mut q, 2, WqeOp::Send, 1); // 3
        assert_eq!(drain(&mut q).len(), 2);
        assert_eq!(
            q.on_response(&read_resp(0, Position::First, 256)),
            Action::PlaceReadData {
                tag: 1,
                offset: 0,
                len: 256
            }
        );
        // Response 1 lost; the ACK of the SEND implies it.
        assert_eq!(
            q.on_response(&ack(3)),
            Action::Retransmit { from: Psn::new(1) }
        );
        let p = drain(&mut q);
        assert_eq!(p[0].operation, Operation::RdmaReadRequest);
        assert_eq!(p[0].psn, Psn::new(1));
        assert_eq!(p[0].reth.unwrap().offset, 256);
        assert_eq!(p[0].reth.unwrap().dma_len, 344);
        assert_eq!(p[1].psn, Psn::new(3));
        // Responses restarted spec-style (First) are accepted at the
        // resume point.
        assert_eq!(
            q.on_response(&read_resp(1, Position::First, 256)),
            Action::PlaceReadData {
                tag: 1,
                offset: 256,
                len: 256
            }
        );
        // A skipped response (gap) is an implicit NAK.
        assert!(matches!(q.on_response(&ack(3)), Action::Retransmit { .. }));
        drain(&mut q);
        assert_eq!(
            q.on_response(&read_resp(2, Position::Last, 88)),
            Action::PlaceReadData {
                tag: 1,
                offset: 512,
                len: 88
            }
        );
        assert_eq!(q.on_response(&ack(3)), Action::Progress);
        assert_eq!(
            completions(&mut q),
            [(1, WcStatus::Success), (2, WcStatus::Success)]
        );
    }

    #[test]
    fn bad_read_response_is_fatal() {
        let mut q = sq(0);
        post(&mut q, 1, WqeOp::Read, 600);
        post(&mut q, 2, WqeOp::Send, 1);
        drain(&mut q);
        assert_eq!(
            q.on_response(&read_resp(0, Position::First, 255)),
            Action::Fatal {
                status: WcStatus::BadRespErr
            }
        );
        assert_eq!(
            completions(&mut q),
            [(1, WcStatus::BadRespErr), (2, WcStatus::WrFlushErr)]
        );
        let mut q = sq(0);
        post(&mut q, 1, WqeOp::Read, 600);
        drain(&mut q);
        assert_eq!(
            q.on_response(&read_resp(0, Position::Middle, 256)),
            Action::Fatal {
                status: WcStatus::BadRespErr
            }
        );
    }

    #[test]
    fn atomic_ack() {
        let mut q = sq(5);
        post(&mut q, 1, WqeOp::Send, 1);
        post(&mut q, 2, WqeOp::FetchAdd, 8);
        drain(&mut q);
        let r = Response {
            psn: Psn::new(6),
            kind: ResponseKind::AtomicAck {
                syndrome: Syndrome::Ack { credits: 0x1f },
                orig: 42,
            },
        };
        assert_eq!(q.on_response(&r), Action::AtomicResult { tag: 2, orig: 42 });
        assert_eq!(q.on_response(&r), Action::Ignore);
        assert_eq!(
            completions(&mut q),
            [(1, WcStatus::Success), (2, WcStatus::Success)]
        );
    }

    #[test]
    fn error_naks() {
        for (code, status) in [
            (NakCode::InvalidRequest, WcStatus::RemInvReqErr),
            (NakCode::RemoteAccessError, WcStatus::RemAccessErr),
            (NakCode::RemoteOperationalError, WcStatus::RemOpErr),
            (NakCode::InvalidRdRequest, WcStatus::RemInvRdReqErr),
        ] {
            let mut q = sq(0);
            post(&mut q, 1, WqeOp::Send, 1);
            post(&mut q, 2, WqeOp::Write, 1);
            post(&mut q, 3, WqeOp::Send, 1);
            drain(&mut q);
            assert_eq!(
                q.on_response(&nak(1, Syndrome::Nak(code))),
                Action::Fatal { status }
            );
            assert_eq!(q.next_packet(), None);
            assert_eq!(
                completions(&mut q),
                [
                    (1, WcStatus::Success),
                    (2, status),
                    (3, WcStatus::WrFlushErr)
                ]
            );
        }
        // Reserved syndromes are ignored.
        let mut q = sq(0);
        post(&mut q, 1, WqeOp::Send, 1);
        drain(&mut q);
        assert_eq!(
            q.on_response(&nak(0, Syndrome::Reserved(0x40))),
            Action::Ignore
        );
    }

    #[test]
    fn rnr_wait_and_exhaustion() {
        let mut cfg = RequesterConfig::new(Mtu::Mtu256);
        cfg.rnr_retry = 1;
        let mut q = SendQueue::<8>::new(cfg, Psn::ZERO);
        post(&mut q, 1, WqeOp::Send, 1);
        post(&mut q, 2, WqeOp::Send, 1);
        drain(&mut q);
        let rnr = Syndrome::RnrNak { timer: 12 };
        assert_eq!(q.on_response(&nak(0, rnr)), Action::RnrWait { usec: 640 });
        assert!(q.waiting_rnr());
        assert_eq!(q.next_packet(), None);
        // A sequence NAK while waiting does not restart sending.
        let seq = Syndrome::Nak(NakCode::PsnSequenceError);
        assert_eq!(q.on_response(&nak(0, seq)), Action::Ignore);
        assert_eq!(q.on_timeout(), Action::Ignore);
        assert_eq!(q.on_rnr_timer(), Action::Retransmit { from: Psn::ZERO });
        assert_eq!(drain(&mut q).len(), 2);
        assert_eq!(
            q.on_response(&nak(0, rnr)),
            Action::Fatal {
                status: WcStatus::RnrRetryExcErr
            }
        );
    }

    #[test]
    fn timeout_retries_then_fails() {
        let mut cfg = RequesterConfig::new(Mtu::Mtu256);
        cfg.retry_cnt = 2;
        let mut q = SendQueue::<8>::new(cfg, Psn::ZERO);
        assert_eq!(q.on_timeout(), Action::Ignore);
        post(&mut q, 1, WqeOp::Send, 300);
        drain(&mut q);
        for _ in 0..2 {
            assert_eq!(q.on_timeout(), Action::Retransmit { from: Psn::ZERO });
            assert_eq!(drain(&mut q).len(), 2);
        }
        // Progress resets the counter.
        assert_eq!(q.on_response(&ack(0)), Action::Progress);
        for _ in 0..2 {
            assert_eq!(q.on_timeout(), Action::Retransmit { from: Psn::new(1) });
            assert_eq!(drain(&mut q).len(), 1);
        }
        assert_eq!(
            q.on_timeout(),
            Action::Fatal {
                status: WcStatus::RetryExcErr
            }
        );
        assert_eq!(completions(&mut q), [(1, WcStatus::RetryExcErr)]);
    }

    #[test]
    fn from_headers() {
        use super::super::aeth::Aeth;
        use super::super::atomic_ack_eth::AtomicAckEth;
        use super::super::bth::Bth;
        use super::super::opcode::Opcode;
        let mut h = Headers::new(Bth::new(
            Opcode::new(Transport::Rc, Operation::AtomicAcknowledge),
            1,
            Psn::new(9),
        ));
        h.aeth = Some(Aeth {
            syndrome: Syndrome::Ack { credits: 1 },
            msn: 0,
        });
        h.atomic_ack_eth = Some(AtomicAckEth { orig: 7 });
        assert_eq!(
            Response::from_headers(&h, 0),
            Ok(Response {
                psn: Psn::new(9),
                kind: ResponseKind::AtomicAck {
                    syndrome: Syndrome::Ack { credits: 1 },
                    orig: 7
                }
            })
        );
        h.bth.opcode = Opcode::new(Transport::Rc, Operation::RdmaReadResponseMiddle);
        assert_eq!(
            Response::from_headers(&h, 256).unwrap().kind,
            ResponseKind::ReadResponse {
                position: Position::Middle,
                syndrome: Some(Syndrome::Ack { credits: 1 }),
                payload_len: 256
            }
        );
        h.bth.opcode = Opcode::new(Transport::Rc, Operation::SendOnly);
        assert_eq!(Response::from_headers(&h, 0), Err(Error::UnexpectedOpcode));
    }

    fn tags(q: &mut SendQueue<8>) -> Vec<(u32, WcStatus)> {
        core::iter::from_fn(|| q.pop_completion())
            .map(|c| (c.tag, c.status))
            .collect()
    }

    #[test]
    fn local_operation_waits_its_turn_and_completes_in_order() {
        let mut q = sq(10);
        post(&mut q, 1, WqeOp::Send, 1); // PSN 10
        post(&mut q, 2, WqeOp::Local, 0);
        post(&mut q, 3, WqeOp::Send, 1); // PSN 11

        // Nothing is due before the first SEND is out.
        assert_eq!(q.take_local(), None);
        let p = drain(&mut q);
        assert_eq!(p.len(), 1, "stops at the local operation");
        assert_eq!(q.take_local(), Some(2));
        assert_eq!(q.take_local(), None, "performed once");
        let p = drain(&mut q);
        assert_eq!((p.len(), p[0].tag, p[0].psn), (1, 3, Psn::new(11)));
        // Not complete before the SEND in front of it.
        assert!(tags(&mut q).is_empty());
        assert_eq!(q.on_response(&ack(10)), Action::Progress);
        assert_eq!(
            tags(&mut q),
            [(1, WcStatus::Success), (2, WcStatus::Success)]
        );
        q.on_response(&ack(11));
        assert_eq!(tags(&mut q), [(3, WcStatus::Success)]);
    }

    #[test]
    fn local_operation_alone_completes_at_once_and_is_not_redone() {
        let mut q = sq(0);
        post(&mut q, 1, WqeOp::Local, 0);
        assert!(drain(&mut q).is_empty());
        assert_eq!(q.take_local(), Some(1));
        assert_eq!(tags(&mut q), [(1, WcStatus::Success)]);

        post(&mut q, 2, WqeOp::Write, 1); // PSN 0
        post(&mut q, 3, WqeOp::Local, 0);
        post(&mut q, 4, WqeOp::Write, 1); // PSN 1
        drain(&mut q);
        assert_eq!(q.take_local(), Some(3));
        drain(&mut q);
        // Going back resends both WRITEs and performs nothing again.
        assert!(matches!(q.on_timeout(), Action::Retransmit { .. }));
        let again = drain(&mut q);
        assert_eq!(again.iter().map(|p| p.tag).collect::<Vec<_>>(), [2, 4]);
        assert_eq!(q.take_local(), None);
        q.on_response(&ack(1));
        assert_eq!(
            tags(&mut q),
            [
                (2, WcStatus::Success),
                (3, WcStatus::Success),
                (4, WcStatus::Success)
            ]
        );
        assert!(WqeOp::Local.is_local());
        assert!(crate::roce::segment::MessagePlan::new(WqeOp::Local, 1, Mtu::Mtu256).is_err());
    }

    #[test]
    fn fenced_local_operation_waits_for_reads() {
        let mut q = sq(0);
        post(&mut q, 1, WqeOp::Read, 8); // PSN 0
        q.post(SendWqe {
            tag: 2,
            op: WqeOp::Local,
            len: 0,
            fence: true,
            signaled: true,
        })
        .unwrap();
        drain(&mut q);
        assert_eq!(q.take_local(), None, "the READ is outstanding");
        q.on_response(&read_resp(0, Position::Only, 8));
        assert_eq!(q.take_local(), Some(2));
        assert_eq!(
            tags(&mut q),
            [(1, WcStatus::Success), (2, WcStatus::Success)]
        );
    }

    #[test]
    fn local_operation_after_a_failure_is_flushed() {
        let mut q = sq(0);
        post(&mut q, 1, WqeOp::Send, 1);
        post(&mut q, 2, WqeOp::Local, 0);
        drain(&mut q);
        assert_eq!(q.take_local(), Some(2));
        q.on_response(&nak(0, Syndrome::Nak(NakCode::RemoteAccessError)));
        assert_eq!(
            tags(&mut q),
            [(1, WcStatus::RemAccessErr), (2, WcStatus::WrFlushErr)]
        );
    }

    #[test]
    fn go_back_now_resends_without_charging_a_retry() {
        let mut q = sq(0);
        post(&mut q, 1, WqeOp::Write, 600); // PSNs 0..=2
        assert_eq!(drain(&mut q).len(), 3);
        assert_eq!(q.go_back_now(), Action::Retransmit { from: Psn::new(0) });
        let again = drain(&mut q);
        assert_eq!(again.len(), 3);
        assert!(again.iter().all(|p| p.retransmit));
        // Every retry is still there: seven timeouts resend, the eighth fails.
        for _ in 0..7 {
            assert!(matches!(q.on_timeout(), Action::Retransmit { .. }));
            drain(&mut q);
        }
        assert!(matches!(q.on_timeout(), Action::Fatal { .. }));
        // Nothing outstanding: nothing to do.
        let mut q = sq(0);
        assert_eq!(q.go_back_now(), Action::Ignore);
    }

    #[test]
    fn a_held_packet_is_sent_again_after_resume_and_nothing_before() {
        let mut q = sq(10);
        // 3 packets of 256 bytes, then a SEND.
        post(&mut q, 1, WqeOp::Write, 768);
        post(&mut q, 2, WqeOp::Send, 8);
        let p1 = q.next_packet().unwrap();
        let p2 = q.next_packet().unwrap();
        assert!(q.hold(&p2));
        assert!(q.is_held());
        assert_eq!(q.next_packet(), None, "nothing while held");
        // The ACK of what went out still counts.
        assert_eq!(q.on_response(&ack(p1.psn.value())), Action::Progress);
        q.resume();
        let rest = drain(&mut q);
        assert_eq!(rest.first(), Some(&p2));
        let psns: Vec<u32> = rest.iter().map(|p| p.psn.value()).collect();
        assert_eq!(psns, [11, 12, 13]);
        assert!(rest.iter().all(|p| !p.retransmit), "held, not resent");
    }

    #[test]
    fn placement_predicts_what_the_engine_takes() {
        let mut cfg = RequesterConfig::new(Mtu::Mtu256);
        cfg.max_rd_atomic = 2;
        let mut q: SendQueue<8> = SendQueue::new(cfg, Psn::new(10));
        post(&mut q, 1, WqeOp::Write, 256);
        post(&mut q, 2, WqeOp::Read, 512);
        post(&mut q, 3, WqeOp::FetchAdd, 8);
        let sent = drain(&mut q);
        assert_eq!(sent.len(), 3);
        // Out of order or wrong: no placement (and the engine takes none).
        assert_eq!(q.placement(&read_resp(12, Position::Last, 256)), None);
        assert_eq!(q.placement(&read_resp(11, Position::First, 100)), None);
        assert_eq!(q.placement(&ack(10)), None);
        // The READ's first response implicitly acknowledges the WRITE.
        let r = read_resp(11, Position::First, 256);
        assert_eq!(q.placement(&r), Some((2, 0, 256)));
        assert_eq!(
            q.on_response(&r),
            Action::PlaceReadData {
                tag: 2,
                offset: 0,
                len: 256
            }
        );
        let r = read_resp(12, Position::Last, 256);
        assert_eq!(q.placement(&r), Some((2, 256, 256)));
        q.on_response(&r);
        let r = Response {
            psn: Psn::new(13),
            kind: ResponseKind::AtomicAck {
                syndrome: Syndrome::Ack { credits: 0 },
                orig: 5,
            },
        };
        assert_eq!(q.placement(&r), Some((3, 0, 8)));
        assert_eq!(q.on_response(&r), Action::AtomicResult { tag: 3, orig: 5 });
        assert_eq!(q.placement(&r), None, "a duplicate places nothing");
    }

    #[test]
    fn an_unacknowledged_queue_holds_a_packet_and_its_request_waits() {
        let mut cfg = RequesterConfig::new(Mtu::Mtu256);
        cfg.acknowledged = false;
        let mut q: SendQueue<8> = SendQueue::new(cfg, Psn::new(0));
        // Two packets, then a one-packet SEND.
        post(&mut q, 1, WqeOp::Write, 512);
        post(&mut q, 2, WqeOp::Send, 8);
        let p0 = q.next_packet().unwrap();
        let p1 = q.next_packet().unwrap();
        assert!(q.hold(&p1), "the WRITE's last packet, which finished it");
        assert!(completions(&mut q).is_empty(), "not complete while held");
        assert_eq!(q.next_packet(), None);
        q.resume();
        assert_eq!(q.next_packet(), Some(p1));
        assert_eq!(completions(&mut q), [(1, WcStatus::Success)]);
        let p2 = q.next_packet().unwrap();
        assert!(q.hold(&p2));
        q.resume();
        assert_eq!(q.next_packet(), Some(p2));
        assert_eq!(completions(&mut q), [(2, WcStatus::Success)]);
        assert_eq!(p0.psn.value() + 1, p1.psn.value());
        assert_eq!(p2.psn.value(), 2);
    }
}
