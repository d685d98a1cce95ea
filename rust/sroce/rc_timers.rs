// SPDX-License-Identifier: GPL-2.0

//! The requester timers of an RC QP: the transport (local ACK) timer, from
//! the QP's `timeout` attribute; the RNR timer, from an RNR NAK; and the
//! ACK request, for packets of unsignaled messages that no packet asked to
//! have acknowledged when sending paused.
//!
//! Both are deadlines kept here and checked by the QP's passes; one
//! high-resolution timer per QP only schedules a pass on its thread. The timer is
//! armed lazily: it is restarted only when a deadline comes earlier than
//! the armed expiry (or none is armed); a wake-up before a deadline finds
//! nothing due and re-arms. So an ACK that restarts the transport timer
//! costs no timer operation, which matters at one ACK per few packets.

use super::rc::QpShared;
use crate::roce::{
    completer::Action,
    psn::Psn,
    requester::{SendQueueWith, SlotStore},
    timer,
};
use kernel::{
    sync::Arc,
    time::{
        hrtimer::{ArcHrTimerHandle, HrTimerPointer},
        Delta, Instant, Monotonic,
    },
};

/// A point on the clock the timers use.
pub(crate) type Now = Instant<Monotonic>;

/// Whether `a` is not later than `b`. (`Instant` of a clock has no
/// ordering of its own in 7.3: its derive needs the clock type ordered.)
fn not_after(a: Now, b: Now) -> bool {
    !(b - a).is_negative()
}

/// How often a QP with a session not Up wakes up to check its sessions'
/// health (probes, stalls), in µs.
const SESSION_POLL_US: i64 = 10_000;

/// How long sending must pause before packets left without an ACK request
/// are asked about, in µs (at most half the transport timer's period):
/// long enough that a stream of unsignaled messages reaches its next
/// request first, short against any timeout a user would set.
const ACK_REQUEST_DELAY_US: i64 = 1_000;

/// The requester's deadlines and the QP's wake-up timer.
pub(crate) struct RcTimers {
    /// Transport timer period; `None` when the `timeout` attribute is 0
    /// (wait forever).
    period: Option<Delta>,
    /// When the transport timer expires, while packets are unacknowledged.
    transport_at: Option<Now>,
    /// When the RNR wait ends.
    rnr_at: Option<Now>,
    /// When the session health is next polled.
    poll_at: Option<Now>,
    /// When to ask for the ACK of packets none asked for, and the send
    /// queue's ACK-request key when that was decided (a packet that asks
    /// ends the wait; one that does not leaves it as it is).
    ack_request_at: Option<(Now, Psn)>,
    /// Expiry the wake-up timer was last started with.
    armed_at: Option<Now>,
    /// The started wake-up timer; dropping it cancels the timer (and waits
    /// for a running callback, which only schedules a pass).
    handle: Option<ArcHrTimerHandle<QpShared>>,
}

impl RcTimers {
    /// Timers for the `timeout` attribute (4.096 µs × 2^timeout, 0 =
    /// infinite); none running.
    pub(crate) fn new(timeout: u8) -> Self {
        Self {
            period: Self::period_of(timeout),
            transport_at: None,
            rnr_at: None,
            poll_at: None,
            ack_request_at: None,
            armed_at: None,
            handle: None,
        }
    }

    fn period_of(timeout: u8) -> Option<Delta> {
        timer::transport_timeout_ns(timeout)
            .map(|ns| Delta::from_nanos(i64::try_from(ns).unwrap_or(i64::MAX)))
    }

    /// The `timeout` attribute changed (RTS); running deadlines stay.
    pub(crate) fn set_timeout(&mut self, timeout: u8) {
        self.period = Self::period_of(timeout);
    }

    /// Takes the deadlines that are due at `now`: ends a due RNR wait in
    /// the send queue, and returns whether the transport timer expired
    /// (the caller goes back, see [`super::rc`]).
    pub(crate) fn expire<S: SlotStore>(&mut self, now: Now, sq: &mut SendQueueWith<S>) -> bool {
        if self.rnr_at.is_some_and(|t| not_after(t, now)) {
            self.rnr_at = None;
            let _ = sq.on_rnr_timer();
        }
        if self.poll_at.is_some_and(|t| not_after(t, now)) {
            self.poll_at = None;
        }
        if self.transport_at.is_some_and(|t| not_after(t, now)) {
            self.transport_at = None;
            return sq.has_unacked() && !sq.waiting_rnr();
        }
        false
    }

    /// Whether the ACK request is due at `now` (taken: the caller asks,
    /// `rc::requester::request_ack`).
    pub(crate) fn ack_request_due(&mut self, now: Now) -> bool {
        if self.ack_request_at.is_some_and(|(t, _)| not_after(t, now)) {
            self.ack_request_at = None;
            return true;
        }
        false
    }

    /// The completer reported `action` for a response received at `now`.
    pub(crate) fn on_action(&mut self, now: Now, action: &Action) {
        match *action {
            Action::Ignore | Action::Fatal { .. } => {}
            // Progress (or a retransmission starting) restarts the
            // transport timer: `update` sets it afresh.
            Action::Progress
            | Action::PlaceReadData { .. }
            | Action::AtomicResult { .. }
            | Action::Retransmit { .. } => self.transport_at = None,
            Action::RnrWait { usec } => {
                self.transport_at = None;
                self.rnr_at = Some(now + Delta::from_micros(i64::from(usec)));
            }
        }
    }

    /// After a pass at `now`: starts or stops the deadlines
    /// as the send queue's state asks (and the session poll if `poll`),
    /// and makes sure the wake-up timer fires no later than the earliest,
    /// or than `wake_in_us` from now (a session's own retransmit timer,
    /// which the pass checks itself).
    pub(crate) fn update<S: SlotStore>(
        &mut self,
        now: Now,
        sq: &SendQueueWith<S>,
        poll: bool,
        wake_in_us: Option<u64>,
        shared: &Arc<QpShared>,
    ) {
        if !poll {
            self.poll_at = None;
        } else if self.poll_at.is_none() {
            self.poll_at = Some(now + Delta::from_micros(SESSION_POLL_US));
        }
        if sq.waiting_rnr() {
            self.transport_at = None;
        } else {
            self.rnr_at = None;
            if !sq.has_unacked() {
                self.transport_at = None;
            } else if self.transport_at.is_none() {
                self.transport_at = self.period.map(|p| now + p);
            }
        }
        if !sq.wants_ack_request() {
            self.ack_request_at = None;
        } else {
            // From the first moment an ACK is wanted since the latest
            // request: unasked packets sent meanwhile do not push it out,
            // so the probe comes within half the transport timer's period
            // of the oldest of them (which they do not restart either).
            let key = sq.ack_request_key();
            if self.ack_request_at.is_none_or(|(_, k)| k != key) {
                let half = self.period.map_or(i64::MAX, |p| p.as_nanos() / 2);
                let delay = Delta::from_nanos((ACK_REQUEST_DELAY_US * 1000).min(half));
                self.ack_request_at = Some((now + delay, key));
            }
        }
        let earliest = |a: Option<Now>, b: Option<Now>| match (a, b) {
            (Some(a), Some(b)) => Some(if not_after(a, b) { a } else { b }),
            (a, b) => a.or(b),
        };
        let wake_at =
            wake_in_us.map(|us| now + Delta::from_micros(i64::try_from(us).unwrap_or(i64::MAX)));
        let due = earliest(
            earliest(self.transport_at, self.rnr_at),
            earliest(
                earliest(self.poll_at, wake_at),
                self.ack_request_at.map(|(t, _)| t),
            ),
        );
        let Some(due) = due else {
            // A wake-up left armed finds nothing due: harmless.
            return;
        };
        if self
            .armed_at
            .is_some_and(|armed| !not_after(armed, now) && not_after(armed, due))
        {
            // Fires in time (early is fine: it re-arms).
            return;
        }
        // Cancel first: dropping a handle after `start` would cancel the
        // timer just started.
        self.handle = None;
        let delay = due - now;
        let delay = if delay.is_negative() {
            Delta::from_nanos(0)
        } else {
            delay
        };
        self.handle = Some(shared.clone().start(delay));
        self.armed_at = Some(due);
    }
}
