// SPDX-License-Identifier: GPL-2.0

//! The RC (and UC) data path of one queue pair: the protocol core's requester and
//! responder engines driven by passes over the QP, packets in through
//! [`super::recv`] and out through [`super::io::send`].
//!
//! A pass over the QP runs under the QP's lock (a spinlock that disables
//! bottom halves) in one of three places: the receive softirq, for a
//! packet that finds the QP idle and nothing queued before it (as rxe
//! handles a lone packet in its softirq: no hop to a worker); the send
//! doorbell of the process; and the QP's pass thread
//! ([`super::pass_threads`]), which takes whatever the other two could
//! not (the QP was busy, packets queued up, budgets ran out). What may
//! sleep (page faults, session sockets) is the QP's work item's, on the
//! kernel's unbound workqueue, then a pass. The QP's timer
//! ([`super::rc_timers`]) only schedules a pass on the thread. Request
//! packets leave in order across CPUs
//! ([`delivery`]): a softirq pass with packets in flight leaves new ones
//! to process context, and a CPU delivering what its pass sent holds off
//! the other's.
//!
//! This file holds the QP's state and one pass over it (timers,
//! received packets, new send work, completions); the pass hands each job
//! to the module that does it, along the data's path as in rxe:
//! - [`requester`]: send WQEs out as request packets, go-back decisions;
//! - [`responder`]: requests in, their effects and replies out;
//! - [`completer`]: responses in, send completions out, the error state;
//! - [`payload`]: bytes between local buffers and packets (also for UD).

mod completer;
mod delivery;
mod multipath;
mod payload;
mod requester;
mod responder;

pub(crate) use completer::enter_error;
use completer::{complete_sends, on_response};
pub(crate) use delivery::PassContext;
pub(crate) use multipath::prepare as prepare_multipath;
pub(crate) use payload::{gather, scatter, send_packet, BufferError};
use requester::{count_action, go_back, request_ack, send, send_duplicate_probe};
pub(crate) use responder::inner_max_recv_sge;
use responder::{on_request, send_read_responses};

use super::{
    device::SroceDevice,
    engine_store::EngineStore,
    io,
    io::{counters::Counter, RxPacket},
    odp::Waiter,
    qp::QpInner,
    rc_sessions::{GoBack, Origin, QpSessions, SessionOverride},
    rc_timers::{Now, RcTimers},
};
use crate::net::addr::IpAddr;
use crate::rdma::kthread_worker::{impl_has_kthread_work, KthreadWork, KthreadWorkItem};
use crate::rdma::{
    av::AddressVector,
    bh_lock::{NoPreemption, SpinLockBhGuard},
    device::Device,
    qp::{Qp, QpLink, QpState, QpType},
    wc::WcStatus,
    wqe::{RecvWqe, SendWqe, WQE_ID_LEN},
};
use crate::roce::{
    opcode::Transport,
    packet::Headers,
    psn::Psn,
    requester::{RequesterConfig, SendQueueWith, Slot},
    responder::{ReadAtomicResource, ResponderConfig, ResponderWith},
    segment::Mtu,
    session::{FiveTuple, GroupConfig, NetAddr, ReceiveFilter},
};
use crate::sroce::pass_threads::PassThreadSeat;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::{
    alloc::KVBox,
    new_spinlock_irq, new_work,
    prelude::*,
    sync::{Arc, ArcBorrow, SpinLockIrq},
    time::{
        hrtimer::{HrTimer, HrTimerCallback, HrTimerCallbackContext, HrTimerRestart, RelativeMode},
        Instant, Monotonic,
    },
    workqueue::{Work, WorkItem},
};

/// Send work requests the requester engine holds at once (taken from the
/// ring, not yet completed).
const SQ_DEPTH: usize = 32;
/// RDMA READ/atomic responder resources: as many as the device promises
/// (`max_qp_rd_atom`), since initiators size their depth from it.
const RD_ATOM: usize = super::limits::MAX_QP_RD_ATOM as usize;

/// The requester engine over heap slots.
pub(crate) type Requester = SendQueueWith<EngineStore<Option<Slot>>>;

/// Received packets queued for a pass at most; more are dropped
/// (and counted), as a NIC's full receive FIFO would.
const RX_QUEUE_LEN: usize = 512;
/// Received packets an RC QP's pass takes; the rest wait for the next
/// pass, which it schedules (bounded time per pass: a peer's flood cannot
/// hold a pass thread, nor delay the QP's teardown).
const RX_PER_PASS: usize = 64;
/// Pieces of a segmented datagram from which a burst received in the
/// softirq is left to a pass thread on another CPU ([`QpShared::hand_off`]):
/// that CPU places the data and completes while this one, whose softirq
/// runs inside the sender's unlock, lets the sender go on to the next
/// burst (READ streams' responses 1.5x in one probe run), as rxe's
/// responder and completer tasks take what queued up behind a first
/// packet. Fewer pieces are not worth a wake-up, unless the QP streams
/// ([`QpShared::streaming`]).
const RX_BURST_HANDOFF: usize = 8;
/// RDMA READ response packets an RC QP sends per pass (its
/// own or replayed); the rest go in later passes.
const READ_RESPONSES_PER_PASS: u32 = 32;

/// Most packets of unsignaled SEND and WRITE messages sent before one asks
/// for an ACK: a stream of small unsignaled messages costs the responder
/// an ACK and the requester a pass every 16 packets instead of one each
/// (the engine also keeps it within a quarter of the PSN window and half
/// its slots).
const ACK_COALESCE: u32 = 16;

/// [`ACK_COALESCE`], within half the send queue the QP was created with:
/// unacknowledged WQEs hold their ring slots, and a full ring of them
/// would wait for the probe of [`rc_timers`](super::rc_timers).
fn ack_coalesce(a: &crate::rdma::qp::QpAttrs) -> u32 {
    ACK_COALESCE.min(a.caps.max_send_wr / 2).max(1)
}

/// How long a requester whose packet the local stack refused waits before
/// it tries again if nothing else runs a pass first, in µs: about what
/// veth's backlog of a few hundred packets takes to drain here.
const TX_REFUSED_RETRY_US: u64 = 200;

/// Refusals of the local stack in a row after which a refused packet is
/// counted lost instead of taken back (about 20 ms of wake-ups): a queue
/// that never drains (a qdisc dropping everything) then ends in the
/// transport timer's retries and their error, as a dead link does, instead
/// of the requester trying again forever.
pub(super) const TX_REFUSED_MAX: u32 = 100;

/// WQEs the requester holds from which a process's doorbell
/// ([`doorbell_leaves_pass`]) and the receive softirq ([`RcState::streams`])
/// count the QP as streaming: a ping-pong holds one or two.
const STREAM_WQES: usize = 4;

/// Largest payload of one packet (path MTU 4096).
const MAX_PAYLOAD: usize = 4096;

/// What the receive softirq, the pass thread and the work item share for
/// one QP; kept alive by the QP and by the device's QP table (and by a
/// queued pass or work item).
#[pin_data]
pub(crate) struct QpShared {
    #[pin]
    link: QpLink<SroceDevice>,
    /// Runs a pass on the QP's pass thread ([`pass_threads`]).
    ///
    /// [`pass_threads`]: crate::sroce::pass_threads
    #[pin]
    pass_work: KthreadWork<QpShared>,
    /// Runs a pass on the seat's partner thread: the hand-offs' choice
    /// when the QP's own thread runs on the handing CPU
    /// ([`QpShared::hand_off`]).
    #[pin]
    partner_work: KthreadWork<QpShared, 1>,
    /// The QP's place on that thread.
    _seat: PassThreadSeat,
    /// Runs, on the kernel's unbound workqueue, what may sleep (see
    /// [`run`]), then a pass.
    #[pin]
    work: Work<QpShared>,
    /// Schedules a pass when a requester deadline is due.
    #[pin]
    timer: HrTimer<QpShared>,
    /// Received packets; `closed` once the QP is being destroyed.
    #[pin]
    rx: SpinLockIrq<RxQueue>,
    /// A send doorbell found the QP's lock taken: whoever held it runs a
    /// pass for the new WQEs once it lets go (see [`answer_doorbell`]).
    /// Also raised by a pass that left its new packets to another CPU's
    /// delivery, which answers it when it is done.
    doorbell: AtomicBool,
    /// Which CPU is delivering what a pass sent, if any: passes elsewhere
    /// send nothing new until then (in order across CPUs).
    delivery: delivery::Delivery,
    /// The last pass found the QP streaming ([`RcState::streams`]): the
    /// receive softirq then leaves even a lone packet to a pass thread on
    /// another CPU, as a long burst ([`QpShared::queue_rx`]). A hint, set
    /// by every pass of an RC QP.
    streaming: AtomicBool,
}

/// Whether a pass sends its request packets ([`QpShared::leaves_requests`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Leave {
    /// It sends them.
    No,
    /// The pass of the CPU delivering answers the doorbell flag.
    ToDelivery,
    /// No pass in process context will come by itself: the pass thread.
    ToPassThread,
}

/// What became of a received packet offered to a QP.
pub(crate) enum Queued {
    /// Queued with nothing before it but pieces of its datagram: the
    /// caller handles them ([`QpShared::receive_now`]).
    Lone,
    /// A piece of a segmented datagram, queued for the pass of its last
    /// piece, which follows in the same softirq call.
    Held,
    /// Queued behind others, for the pass thread (scheduled).
    Behind,
    /// Handed to a pass thread on another CPU (scheduled): the last piece
    /// of a segmented datagram of [`RX_BURST_HANDOFF`] pieces or more, or
    /// a lone packet of a QP that streams.
    HandedOff,
    /// The queue was full: dropped.
    Dropped,
    /// The QP is being destroyed: dropped.
    Closed,
}

/// Packets waiting for a pass.
struct RxQueue {
    packets: KVVec<RxPacket>,
    /// An empty vector of the same capacity, swapped with `packets` when
    /// a pass takes a batch (and given back empty).
    spare: KVVec<RxPacket>,
    /// A batch a pass took but did not finish, in reverse arrival
    /// order (the next packet last); taken again before any new one.
    backlog: KVVec<RxPacket>,
    /// No more scheduling: the QP is going away.
    closed: bool,
    /// The queued packets are pieces of one segmented datagram whose last
    /// piece has not come yet (no pass is scheduled for them: that piece
    /// runs it, as a lone packet).
    held: bool,
}

kernel::impl_has_work! {
    impl HasWork<Self> for QpShared { self.work }
}

kernel::impl_has_hr_timer! {
    impl HasHrTimer<Self> for QpShared {
        mode: RelativeMode<Monotonic>,
        field: self.timer
    }
}

impl HrTimerCallback for QpShared {
    type Pointer<'a> = Arc<QpShared>;

    fn run(
        this: ArcBorrow<'_, QpShared>,
        _ctx: HrTimerCallbackContext<'_, Self>,
    ) -> HrTimerRestart {
        // Hard interrupt context: only schedule a pass, which checks the
        // deadlines under the QP's lock.
        Arc::<QpShared>::from(this).schedule();
        HrTimerRestart::NoRestart
    }
}

impl WorkItem for QpShared {
    type Pointer = Arc<QpShared>;

    fn run(this: Arc<QpShared>) {
        // A destroyed QP's work does nothing; its queued packets go with
        // the last reference.
        this.link.with(run);
    }
}

impl_has_kthread_work! {
    impl HasKthreadWork for QpShared { self.pass_work }
}

impl KthreadWorkItem for QpShared {
    fn run(this: Arc<QpShared>) {
        this.link.with(run_on_pass_thread);
    }
}

impl_has_kthread_work! {
    impl HasKthreadWork<1> for QpShared { self.partner_work }
}

impl KthreadWorkItem<1> for QpShared {
    fn run(this: Arc<QpShared>) {
        this.link.with(run_on_pass_thread);
    }
}

impl QpShared {
    /// Shared state for a new QP, whose passes run on `seat`'s thread.
    pub(crate) fn new(seat: PassThreadSeat) -> Result<Arc<Self>> {
        let worker = seat.worker();
        let partner = seat.partner_worker();
        Arc::pin_init(
            try_pin_init!(Self {
                link <- QpLink::new(),
                doorbell: AtomicBool::new(false),
                streaming: AtomicBool::new(false),
                delivery: delivery::Delivery::new(),
                pass_work <- KthreadWork::new(worker),
                partner_work <- KthreadWork::new(partner),
                _seat: seat,
                work <- new_work!("sroce::qp_work"),
                timer <- HrTimer::new(),
                rx <- new_spinlock_irq!(
                    RxQueue {
                        packets: KVVec::with_capacity(RX_QUEUE_LEN, GFP_KERNEL)?,
                        spare: KVVec::with_capacity(RX_QUEUE_LEN, GFP_KERNEL)?,
                        backlog: KVVec::new(),
                        closed: false,
                        held: false,
                    },
                    "sroce::qp_rx"
                ),
            }),
            GFP_KERNEL,
        )
    }

    /// The link the rdma layer attaches to the QP.
    pub(crate) fn link(&self) -> &QpLink<SroceDevice> {
        &self.link
    }

    /// Queues a received packet. A lone one (nothing queued before it but
    /// the pieces of its datagram) is left for the caller to handle at
    /// once ([`Queued::Lone`]); one that more pieces of its datagram
    /// `followed` waits for the last of them ([`Queued::Held`]): a burst
    /// costs one pass, not one per packet. Behind others it schedules a
    /// pass on the QP's thread, which is already due to run. The last
    /// piece of a long burst ([`RX_BURST_HANDOFF`]), or a lone packet of a
    /// QP that streams, is handed to a pass thread on another CPU if one
    /// is there ([`Queued::HandedOff`]): that CPU places and completes
    /// while this one, whose softirq runs inside the sender's unlock when
    /// both ends share a machine, lets the sender go on. A ping-pong's
    /// packets are taken here: a hop would add a wake-up to each round
    /// trip (2x the latency, measured). Any context.
    ///
    /// Pieces are held only while the next piece of the list is for the
    /// same QP; one that fails the receive checks releases them
    /// ([`QpShared::release_held`]). A held piece whose last piece never
    /// reaches sroce (dropped by the UDP layer) waits for the QP's next
    /// packet or pass, as a lost packet does for the requester's timer.
    pub(crate) fn queue_rx(self: &Arc<Self>, pkt: RxPacket, followed: bool) -> Queued {
        let mut q = self.rx.lock();
        if q.closed {
            drop(q);
            // The QP is going away: freed (as a drop) outside the lock.
            drop(pkt);
            return Queued::Closed;
        }
        let lone = q.held || (q.packets.is_empty() && q.backlog.is_empty());
        let refused = q.packets.push_within_capacity(pkt).err();
        let held = lone && followed && refused.is_none();
        q.held = held;
        // Under the lock, so that `close` cannot miss a queueing.
        let handed = lone
            && !held
            && (q.packets.len() >= RX_BURST_HANDOFF || self.streaming.load(Ordering::Relaxed))
            && self.hand_off_locked();
        if !lone || (refused.is_some() && !q.packets.is_empty()) {
            // Pieces held before a refused one go to the pass thread too.
            KthreadWork::<_, 0>::enqueue(self.clone());
        }
        drop(q);
        // A refused packet is freed outside the IRQ-disabling lock.
        let result = match (&refused, lone) {
            (Some(_), _) => Queued::Dropped,
            (None, true) if held => Queued::Held,
            (None, true) if handed => Queued::HandedOff,
            (None, true) => Queued::Lone,
            (None, false) => Queued::Behind,
        };
        drop(refused);
        result
    }

    /// Ends a hold ([`Queued::Held`]) whose last piece was dropped: whether
    /// pieces were held, which the caller handles as a lone packet
    /// ([`QpShared::receive_now`]).
    pub(crate) fn release_held(&self) -> bool {
        let mut q = self.rx.lock();
        core::mem::replace(&mut q.held, false) && !q.packets.is_empty()
    }

    /// Drops every packet queued (the QP was reset: they belong to its
    /// old connection). Process context.
    pub(crate) fn discard_rx(&self) {
        // An unfinished batch first, then what is queued (as a pass takes
        // them, so the vectors go on rotating).
        for _ in 0..2 {
            self.return_batch(self.take_backlog_or_batch());
        }
    }

    /// Handles a lone received packet now, in the receive softirq, if the
    /// QP is idle; else (another context holds it, it is going away)
    /// leaves it to the pass thread. Whether a pass ran here.
    pub(crate) fn receive_now(self: &Arc<Self>) -> bool {
        let ran = self.link.with(|qp| {
            let Some(mut inner) = qp.data().try_lock() else {
                return (false, false);
            };
            run_pass(qp, &mut inner, PassContext::Receive);
            let left = leaves_work(&inner);
            drop(inner);
            // A doorbell that rang meanwhile (a ping-pong's answer, posted
            // as its process saw this pass's completion) is answered here
            // while nothing of the QP's is in flight; else from process
            // context (`delivery`).
            answer_doorbell(qp, PassContext::Receive);
            (true, left)
        });
        let (ran, left) = ran.unwrap_or((false, false));
        if !ran || left {
            self.schedule();
        }
        ran
    }

    /// Raises the doorbell flag: a send doorbell that found the QP's lock
    /// taken (the caller also schedules a pass, in case the holder was not
    /// a pass), or a pass that left its request packets to another
    /// ([`QpShared::leaves_requests`]).
    pub(crate) fn ring_doorbell(&self) {
        self.doorbell.store(true, Ordering::SeqCst);
    }

    /// Whether a pass in `ctx` (with the QP locked) leaves the request
    /// packets it has (`waiting`) to another pass ([`delivery`]): from the
    /// receive softirq, to process context, unless nothing the QP sent is
    /// unacknowledged (`in_flight`) and no CPU is delivering (nothing to
    /// overtake: a ping-pong's next message); elsewhere, while another CPU
    /// delivers what a pass sent, to the pass that CPU runs when done. If
    /// so the doorbell flag is up for that pass.
    fn leaves_requests(&self, ctx: PassContext, waiting: bool, in_flight: bool) -> Leave {
        match ctx {
            PassContext::Receive if waiting && (in_flight || self.delivery.any()) => {
                self.ring_doorbell();
                // Checked with the flag up: a delivery that ended in
                // between may have looked at the flag before it was.
                if self.delivery.any() {
                    Leave::ToDelivery
                } else {
                    Leave::ToPassThread
                }
            }
            PassContext::Task | PassContext::Consumer if self.delivery.elsewhere() => {
                self.ring_doorbell();
                // Again with the flag up (as above): if it ended, this
                // pass sends, and the flag costs one more pass.
                if self.delivery.elsewhere() {
                    Leave::ToDelivery
                } else {
                    Leave::No
                }
            }
            _ => Leave::No,
        }
    }

    /// Schedules a pass on the QP's pass thread (no-op if one is already
    /// queued or the QP is going away). Any context.
    pub(crate) fn schedule(self: &Arc<Self>) {
        let q = self.rx.lock();
        if !q.closed {
            KthreadWork::<_, 0>::enqueue(self.clone());
        }
        drop(q);
    }

    /// Schedules a pass on a pass thread that would run on another CPU
    /// than this one, the QP's own or else its partner, if either would:
    /// whether one was (or the QP is going away). Any context.
    ///
    /// A QP's passes then may be queued on both threads at once; they run
    /// one at a time under its lock, and the second finds less to do. Its
    /// own thread alone would leave a CPU idle whenever that thread sits
    /// on the CPU of the process that posts (a thread that is not pinned
    /// stays where it last ran).
    pub(crate) fn hand_off(self: &Arc<Self>) -> bool {
        let q = self.rx.lock();
        let handed = q.closed || self.hand_off_locked();
        drop(q);
        handed
    }

    /// [`QpShared::hand_off`], with the receive queue locked and open.
    fn hand_off_locked(self: &Arc<Self>) -> bool {
        if self.pass_work.worker_elsewhere() {
            KthreadWork::<_, 0>::enqueue(self.clone());
        } else if self.partner_work.worker_elsewhere() {
            KthreadWork::<_, 1>::enqueue(self.clone());
        } else {
            return false;
        }
        true
    }

    /// Schedules the work item, which does what may sleep, then a pass
    /// (no-op if it is already queued or the QP is going away).
    fn schedule_sleeping_work(self: &Arc<Self>) {
        let q = self.rx.lock();
        if !q.closed {
            let _ = crate::rdma::work::system_dfl().enqueue(self.clone());
        }
        drop(q);
    }

    /// Stops scheduling, then waits for the pass thread and the work item
    /// to be done with the QP, so no execution is left once the QP (and
    /// possibly the module) is gone. Process context; the QP's locks must
    /// not be held.
    pub(crate) fn close(&self) {
        self.rx.lock().closed = true;
        // Neither can queue the other any more.
        self.pass_work.flush();
        self.partner_work.flush();
        crate::rdma::work::flush(&self.work);
    }

    /// Takes every queued packet at once (the receive path goes on
    /// queueing into the spare vector meanwhile); give the emptied vector
    /// back with [`QpShared::return_batch`].
    pub(crate) fn take_batch(&self) -> KVVec<RxPacket> {
        let mut q = self.rx.lock();
        q.held = false;
        let spare = core::mem::take(&mut q.spare);
        core::mem::replace(&mut q.packets, spare)
    }

    /// Takes the unfinished batch, or else every queued packet, in reverse
    /// arrival order (pop the next one); give it back with
    /// [`QpShared::keep_backlog`].
    pub(crate) fn take_backlog_or_batch(&self) -> KVVec<RxPacket> {
        let mut q = self.rx.lock();
        if !q.backlog.is_empty() {
            return core::mem::take(&mut q.backlog);
        }
        drop(q);
        let mut batch = self.take_batch();
        batch.reverse();
        batch
    }

    /// Gives back a batch from [`QpShared::take_backlog_or_batch`]: what
    /// is left is taken first next time; an empty one is the next spare.
    /// Whether packets are queued behind an emptied batch: those that
    /// arrived while a pass worked on a backlog found a pass
    /// scheduled already, so the pass that finishes it must schedule it
    /// again for them.
    pub(crate) fn keep_backlog(&self, batch: KVVec<RxPacket>) -> bool {
        if batch.is_empty() {
            self.give_back(batch)
        } else {
            self.rx.lock().backlog = batch;
            false
        }
    }

    /// Returns a batch's vector, emptied (packets are dropped outside the
    /// IRQ-disabling lock), as the next spare.
    pub(crate) fn return_batch(&self, batch: KVVec<RxPacket>) {
        let _ = self.give_back(batch);
    }

    /// [`QpShared::return_batch`]; whether packets are queued meanwhile
    /// (looked at under the same lock).
    fn give_back(&self, mut batch: KVVec<RxPacket>) -> bool {
        batch.clear();
        let mut q = self.rx.lock();
        let queued = !q.packets.is_empty();
        if q.spare.capacity() < batch.capacity() {
            q.spare = batch;
            return queued;
        }
        drop(q);
        queued
    }
}

/// The IP address of a GID (IPv4-mapped GIDs are IPv4).
pub(crate) fn gid_ip(gid: &[u8; 16]) -> IpAddr {
    IpAddr::from_gid(gid)
}

/// The connection and engines of an RC or UC QP from RTR on.
pub(crate) struct RcState {
    /// RC, or UC: the same engines without acknowledgements (see
    /// `roce::responder` and `roce::requester`), on one session.
    transport: Transport,
    sq: Requester,
    resp: ResponderWith<EngineStore<Option<ReadAtomicResource>>>,
    flow: io::Flow,
    dest_qpn: u32,
    /// Send WQEs taken from the ring, by tag modulo `SQ_DEPTH`.
    wqes: KVVec<Option<SendWqe>>,
    /// Tag of the next WQE taken (counts WQEs taken).
    next_tag: u32,
    /// The responder's expected PSN when the process last rang the send
    /// doorbell for an unsignaled WQE; `None` after a signaled one
    /// ([`doorbell_leaves_pass`]).
    unsignaled_doorbell: Option<Psn>,
    /// The last request message received over RC asked for no ACK: its
    /// requester does not wait for it (an sroce peer's stream of
    /// unsignaled messages, [`RcState::streams`]).
    peer_streams: bool,
    /// WQEs taken from the ring and not yet retired.
    pub(crate) taken: u32,
    /// Packets the requester may send before one asks for an ACK, when
    /// their messages are unsignaled ([`RequesterConfig::ack_coalesce`]).
    ack_coalesce: u32,
    /// A WQE that failed locally and the status it completes with.
    local_error: Option<(u32, WcStatus)>,
    /// The local stack refused a request packet: the requester holds it
    /// ([`crate::roce::requester::SendQueueWith::hold`]) and the next
    /// pass sends it first.
    tx_refused: bool,
    /// Packets refused in a row since one went out ([`TX_REFUSED_MAX`]).
    tx_refusals: u32,
    /// The status of the last WQE taken from the ring, which failed before
    /// the requester saw it (malformed, or refused by the requester): it
    /// completes with this status when the QP enters the error state.
    unposted_error: Option<WcStatus>,
    /// The receive WQE of the SEND being received (boxed: a WQE's
    /// scatter list is half a KiB, and the state is built on the stack).
    recv: KBox<Option<RecvWqe>>,
    /// Staging for one packet's payload.
    scratch: KVec<u8>,
    /// The transport and RNR timers.
    timers: RcTimers,
    /// The session group: which 5-tuple each message takes.
    pub(crate) sessions: KVBox<QpSessions<SQ_DEPTH>>,
    /// Origin of the sessions' microsecond clock.
    epoch: Now,
    /// The net device the last READ request came in through: its
    /// responses go out through it (see [`send_reply`]).
    read_ingress: i32,
    /// What arrived from the peer, counted per UDP source port it came
    /// from (the peer's sessions, as seen here).
    pub(crate) rx_flows: RxFlows,
    /// The multipath transport, once the peer agrees.
    pub(crate) mp: multipath::Multipath,
}

/// How many of a peer's flows a connection counts apart (the rest
/// together).
pub(crate) const RX_FLOWS: usize = 8;

/// A connection's received flows: one local and one peer address (the
/// connection's), up to [`RX_FLOWS`] peer source ports.
pub(crate) type RxFlows = ReceiveFilter<1, RX_FLOWS>;

impl RcState {
    /// A connection as the attributes at RTR describe it. Not inlined: its
    /// frame (the connection's parts built before they are boxed) stays
    /// out of `modify_qp`'s.
    #[inline(never)]
    pub(crate) fn new(
        dev: &Device<SroceDevice>,
        qpn: u32,
        a: &crate::rdma::qp::QpAttrs,
        ov: &SessionOverride,
    ) -> Result<KBox<Self>> {
        let av: AddressVector = a.av.ok_or(EINVAL)?;
        let mtu = Mtu::from_ib(a.path_mtu as u8).ok_or(EINVAL)?;
        let transport = match a.qp_type {
            Some(QpType::Uc) => Transport::Uc,
            _ => Transport::Rc,
        };
        let acknowledged = transport == Transport::Rc;
        let flow = io::Flow {
            src: gid_ip(&av.sgid),
            dst: gid_ip(&av.dgid),
            // A one-session group: the port every RoCEv2 stack (rxe, the
            // kernel's `rdma_get_udp_sport()`) would use.
            src_port: crate::roce::session::port_range::roce_v2_sport(
                av.flow_label,
                qpn,
                a.dest_qpn,
            ),
            tclass: av.traffic_class,
            hop_limit: av.hop_limit,
            out: io::OutPort::Device,
            encap: io::Encap::for_av(&av),
        };
        let defaults = *dev.data().sessions.lock();
        let epoch = Instant::<Monotonic>::now();
        let rto_us = crate::roce::timer::transport_timeout_ns(a.timeout).map(|ns| ns / 1000);
        let origin = Origin {
            qpn,
            flow0: flow,
            ports: defaults.ports,
            retry_cnt: a.retry_cnt,
            rto_us,
        };
        let mut group = ov.apply(defaults.group);
        if !acknowledged || av.roce_v1 {
            // Session health is judged from acknowledgements: UC has none.
            // RoCE v1 has no UDP source port to vary.
            group.size = 1;
        }
        let sessions = QpSessions::new(dev, origin, &group, 0)?;
        let mut rcfg = ResponderConfig::new(mtu);
        rcfg.acknowledged = acknowledged;
        rcfg.max_dest_rd_atomic = a.max_dest_rd_atomic.min(RD_ATOM as u8);
        rcfg.min_rnr_timer = a.min_rnr_timer;
        let resources = EngineStore::filled(RD_ATOM, None)?;
        let requests = EngineStore::filled(SQ_DEPTH, None)?;
        let mut scratch = KVec::with_capacity(MAX_PAYLOAD, GFP_KERNEL)?;
        scratch.resize(MAX_PAYLOAD, 0, GFP_KERNEL)?;
        let wqes = KVVec::from_elem(None, SQ_DEPTH, GFP_KERNEL)?;
        let recv = KBox::new(None, GFP_KERNEL)?;
        let sq = SendQueueWith::with_storage(
            requests,
            Self::requester_config(a, mtu, transport),
            Psn::new(a.sq_psn),
        );
        let resp = ResponderWith::with_storage(resources, rcfg, Psn::new(a.rq_psn));
        let mp = multipath::Multipath::new();
        // Written in place: the state is too large for a frame of its own.
        KBox::init(
            init!(Self {
                transport,
                sq,
                resp,
                flow,
                dest_qpn: a.dest_qpn,
                wqes,
                next_tag: 0,
                taken: 0,
                ack_coalesce: ack_coalesce(a),
                unsignaled_doorbell: None,
                peer_streams: false,
                local_error: None,
                tx_refused: false,
                tx_refusals: 0,
                unposted_error: None,
                recv,
                scratch,
                timers: RcTimers::new(a.timeout),
                sessions,
                epoch,
                read_ingress: 0,
                rx_flows: RxFlows::sroce(&[NetAddr(flow.src.gid())], &[NetAddr(flow.dst.gid())]),
                mp,
            }),
            GFP_KERNEL,
        )
    }

    fn requester_config(
        a: &crate::rdma::qp::QpAttrs,
        mtu: Mtu,
        transport: Transport,
    ) -> RequesterConfig {
        let mut cfg = RequesterConfig::new(mtu);
        cfg.max_rd_atomic = a.max_rd_atomic;
        cfg.retry_cnt = a.retry_cnt;
        cfg.rnr_retry = a.rnr_retry;
        cfg.acknowledged = transport == Transport::Rc;
        cfg
    }

    /// The connection's local address (its source GID's).
    pub(crate) fn local_addr(&self) -> IpAddr {
        self.flow.src
    }

    /// Whether the connection is RoCE v1.
    pub(crate) fn roce_v1(&self) -> bool {
        self.flow.encap.is_roce_v1()
    }

    /// Whether the peer acknowledges (RC, not UC).
    pub(crate) fn is_acknowledged(&self) -> bool {
        self.transport == Transport::Rc
    }

    /// The requester's next PSN, its oldest unacknowledged PSN and the
    /// responder's expected PSN.
    pub(crate) fn psns(&self) -> (u32, u32, u32) {
        (
            self.sq.next_psn().value(),
            self.sq.una().value(),
            self.resp.epsn().value(),
        )
    }

    /// Applies a changed session override now with the group `fresh`
    /// built for it (see [`QpSessions::reconfigure`]); returns the group
    /// to drop unlocked.
    pub(crate) fn reconfigure_sessions(
        &mut self,
        cfg: &GroupConfig,
        fresh: Option<KVBox<QpSessions<SQ_DEPTH>>>,
    ) -> Option<KVBox<QpSessions<SQ_DEPTH>>> {
        self.sessions.reconfigure(cfg, fresh)
    }

    /// What building a group for a changed override needs: the group's
    /// origin and size, and the sessions' clock now.
    pub(crate) fn sessions_origin(&self) -> (Origin, usize, u64) {
        let (origin, size) = self.sessions.origin_and_size();
        (origin, size, self.now_us(Instant::<Monotonic>::now()))
    }

    /// Microseconds since the connection began, the sessions' clock.
    fn now_us(&self, now: Now) -> u64 {
        u64::try_from((now - self.epoch).as_micros_ceil()).unwrap_or(0)
    }

    /// The page fault the responder waited for is resolved.
    pub(crate) fn resume_responder(&mut self) {
        self.resp.resume();
    }

    /// The page fault the requester waited for is resolved.
    pub(crate) fn resume_requester(&mut self) {
        self.sq.resume();
    }

    /// Whether the QP streams, for the receive softirq's hand-off
    /// ([`QpShared::queue_rx`]): the requester holds [`STREAM_WQES`] WQEs
    /// or more, some unacknowledged (the responses it receives are not
    /// waited for one by one), or the peer's last message asked for no
    /// ACK. A ping-pong holds one or two WQEs and signals every message.
    fn streams(&self) -> bool {
        (self.sq.len() >= STREAM_WQES && self.sq.has_unacked()) || self.peer_streams
    }

    /// Whether the requester may take more WQEs (its window has room).
    pub(crate) fn window_has_room(&self) -> bool {
        self.sq.has_room()
    }

    /// The QP enters RTS: the requester starts at `sq_psn`.
    pub(crate) fn ready_to_send(&mut self, a: &crate::rdma::qp::QpAttrs) {
        let mtu = self.sq.config().mtu;
        self.sq.restart(
            Self::requester_config(a, mtu, self.transport),
            Psn::new(a.sq_psn),
        );
        self.timers.set_timeout(a.timeout);
        self.mp.restart_requester(&mut self.sq);
        let rto_us = crate::roce::timer::transport_timeout_ns(a.timeout).map(|ns| ns / 1000);
        self.sessions.set_transport(a.retry_cnt, rto_us);
    }
}

/// Runs a pass now if the QP is idle; false if it was busy or the pass
/// left work (the caller schedules a pass on the QP's thread, which hands
/// what may sleep to the work item). Any context where bottom halves can
/// be disabled (a kernel consumer's doorbell: its context is not known,
/// so what the pass sends is not marked as delivering, see [`delivery`]).
pub(crate) fn try_pass(qp: &Qp<SroceDevice>) -> bool {
    let Some(mut inner) = qp.data().try_lock() else {
        return false;
    };
    run_pass(qp, &mut inner, PassContext::Consumer);
    let left = leaves_work(&inner);
    drop(inner);
    answer_doorbell(qp, PassContext::Consumer);
    !left
}

/// Packets the QP's device has sent so far: a pass that changed the count
/// sent (or another QP of the device did meanwhile: one needless mark).
pub(crate) fn sent_so_far(qp: &Qp<SroceDevice>) -> u64 {
    qp.device().data().io.counters.get(Counter::SentPkts)
}

/// Lets go of the QP after a pass in process context. If the device sent
/// since `sent_before` ([`sent_so_far`] before the pass), the QP is marked
/// as delivering from this CPU until the unlock, which runs this CPU's
/// softirqs, has returned (which delivers it unless the softirqs were
/// deferred to ksoftirqd: best effort): passes on other CPUs send nothing
/// new meanwhile ([`delivery`]); the caller answers them
/// ([`answer_doorbell`]).
pub(crate) fn unlock_after_pass(
    qp: &Qp<SroceDevice>,
    inner: SpinLockBhGuard<'_, QpInner>,
    sent_before: u64,
) {
    let shared = qp.data().shared();
    let Some(delivering) = (sent_so_far(qp) != sent_before)
        .then(|| shared.delivery.begin())
        .flatten()
    else {
        drop(inner);
        return;
    };
    // The mark is cleared on the CPU whose softirqs delivered, before
    // another task there could run with it still set.
    let pinned = NoPreemption::new();
    drop(inner);
    shared.delivery.end(delivering);
    drop(pinned);
}

/// After a pass let go of the QP: if a send doorbell found the lock taken
/// meanwhile, or a pass on another CPU left its new packets to this one's
/// delivery, runs one more pass for them at once, so they do not wait for
/// the pass thread. If the QP is taken again, the flag stays up for its
/// holder and a pass is scheduled (the holder may not be a pass).
/// `ctx`: the caller's (a task marks what its pass sent as delivering,
/// [`unlock_after_pass`]).
pub(crate) fn answer_doorbell(qp: &Qp<SroceDevice>, ctx: PassContext) {
    let shared = qp.data().shared();
    // A delivery under way answers the flag itself once it is over (it
    // clears its mark, then looks at the flag): taking it here would only
    // run a pass that leaves its packets and raises it again.
    let delivering = match ctx {
        PassContext::Receive => shared.delivery.any(),
        PassContext::Task | PassContext::Consumer => shared.delivery.elsewhere(),
    };
    if delivering || !shared.doorbell.swap(false, Ordering::SeqCst) {
        return;
    }
    let Some(mut inner) = qp.data().try_lock() else {
        shared.ring_doorbell();
        shared.schedule();
        return;
    };
    let sent_before = sent_so_far(qp);
    run_pass(qp, &mut inner, ctx);
    let left = leaves_work(&inner);
    if ctx == PassContext::Task {
        unlock_after_pass(qp, inner, sent_before);
    } else {
        drop(inner);
    }
    // Raised again during this pass or its delivery: the pass thread
    // answers (no loop here).
    if left || shared.doorbell.load(Ordering::SeqCst) {
        shared.schedule();
    }
}

/// Whether a process's send doorbell leaves its pass to a pass thread
/// (scheduled here, counted) instead of running it: the process streams
/// and the QP's thread, or else its partner, would run on another CPU
/// ([`QpShared::hand_off`]). That CPU then sends while the process goes on
/// posting (and, with both ends on one machine, runs the receiver's
/// softirq too), as rxe's requester work item does; a thread on the
/// process's own CPU would only preempt it for the same pass, so with both
/// threads there the doorbell runs it itself (sessions 32 and 35 in
/// `docs/performance.md`).
///
/// A process streams when the requester holds [`STREAM_WQES`] WQEs or
/// more, some unacknowledged (ACKs bring passes anyway), or when it rings
/// for a second unsignaled WQE with no request received since the first:
/// it does not wait for what it posts, nor for its peer. A READ or atomic
/// stream needs the second sign: each READ makes its whole round trip
/// inside the doorbell that posts it, so the requester never holds more
/// than one. A ping-pong receives its peer's message between its posts,
/// and a latency test signals each WQE. With the QP locked.
pub(crate) fn doorbell_leaves_pass(qp: &Qp<SroceDevice>, inner: &mut QpInner) -> bool {
    if inner.attrs.state != QpState::Rts {
        return false;
    }
    let unsignaled = !inner.attrs.signal_all && newest_send_unsignaled(&inner.rings.send);
    let Some(rc) = inner.rc.as_mut() else {
        return false;
    };
    let epsn = rc.resp.epsn();
    let posting_on = unsignaled && rc.unsignaled_doorbell == Some(epsn);
    rc.unsignaled_doorbell = unsignaled.then_some(epsn);
    let streams = posting_on || (rc.sq.len() >= STREAM_WQES && rc.sq.has_unacked());
    let leaves = streams && qp.data().shared().hand_off();
    if leaves {
        let counters = &qp.device().data().io.counters;
        counters.inc(Counter::DoorbellHandoffs);
    }
    leaves
}

/// Whether the newest WQE in the send ring leaves its completion to a
/// later one (a WQE that does not parse counts as signaled).
fn newest_send_unsignaled(ring: &crate::rdma::queue::UserProducerQueue) -> bool {
    let Some(newest) = ring.pending().checked_sub(1) else {
        return false;
    };
    let mut buf = [0u8; WQE_ID_LEN];
    ring.copy_pending(newest, &mut buf)
        .and_then(|n| SendWqe::asks_completion(&buf[..n]))
        .is_ok_and(|signaled| !signaled)
}

/// Whether a pass left work that may sleep, for the work item: a retired
/// connection to drop, a session group to build, a page to fault in.
fn leaves_work(inner: &QpInner) -> bool {
    inner.retired.is_some()
        || super::ud_sessions::wanted(inner)
        || inner.faults.any()
        || inner
            .rc
            .as_ref()
            .is_some_and(|rc| rc.sessions.replace_pending() || rc.mp.wants_work())
}

/// The work item's body: first what may sleep (page faults, session
/// groups and replacement ports, multipath state), then a pass, then
/// dropping what the pass retired.
fn run(qp: &Qp<SroceDevice>) {
    super::odp::resolve(qp);
    super::ud_sessions::build_wanted(qp);
    super::rc_sessions::replace_wanted(qp);
    prepare_multipath(qp);
    let sent_before = sent_so_far(qp);
    let mut guard = qp.data().lock();
    run_pass(qp, &mut guard, PassContext::Task);
    // The pass tried again what waited for a fault that failed.
    guard.faults.forget_failed();
    let retired = guard.take_retired();
    unlock_after_pass(qp, guard, sent_before);
    drop(retired);
    answer_doorbell(qp, PassContext::Task);
}

/// The pass thread's body: a pass, unless an earlier pass left work that
/// may sleep (which would hold up the thread's other QPs): the work item
/// does that, then the pass.
fn run_on_pass_thread(qp: &Qp<SroceDevice>) {
    let shared = qp.data().shared();
    let sent_before = sent_so_far(qp);
    let mut guard = qp.data().lock();
    if leaves_work(&guard) {
        drop(guard);
        shared.schedule_sleeping_work();
        return;
    }
    qp.device().data().io.counters.inc(Counter::ThreadPasses);
    run_pass(qp, &mut guard, PassContext::Task);
    let sleeping = leaves_work(&guard);
    unlock_after_pass(qp, guard, sent_before);
    if sleeping {
        shared.schedule_sleeping_work();
    }
    answer_doorbell(qp, PassContext::Task);
}

/// One pass over the QP, with it locked: due timers, received packets,
/// then new send work, completions and the timers for what is outstanding.
/// Bounded (see the budgets); what is left schedules another pass.
pub(crate) fn run_pass(qp: &Qp<SroceDevice>, inner: &mut QpInner, ctx: PassContext) {
    let shared = qp.data().shared();
    let counters = &qp.device().data().io.counters;
    super::qp::check_cq_overrun(qp, inner);
    // QP1 (GSI) is a UD QP with a fixed number.
    if matches!(inner.attrs.qp_type, Some(QpType::Ud | QpType::Gsi)) {
        super::ud::run(qp, inner, shared);
        return;
    }
    if inner.rc.is_none() {
        // Not connected (or reset): drop what arrived. Work a kernel
        // consumer posted in the error state completes flushed.
        shared.streaming.store(false, Ordering::Relaxed);
        shared.return_batch(shared.take_backlog_or_batch());
        if inner.attrs.state == QpState::Err {
            super::qp::flush(qp, &mut inner.rings);
        }
        return;
    }
    let now: Now = Instant::<Monotonic>::now();
    // Responses that arrived before this pass come first: when the work
    // item runs late (a busy machine), the ACKs waiting for it restart the
    // transport timer instead of a spurious timeout resending everything.
    let more = receive_batch(qp, inner, shared, now, ctx);
    if let Some(rc) = inner.rc.as_mut() {
        let rc: &mut RcState = rc;
        let now_us = rc.now_us(now);
        if rc.timers.expire(now, &mut rc.sq) {
            counters.inc(Counter::LocalAckTimeout);
            let cuts = rc.mp.on_timeout(rc.sq.una(), &mut rc.sessions, now_us);
            counters.add(Counter::MpWindowCuts, u64::from(cuts));
            let a = go_back(rc, GoBack::Timeout, now, |sq| sq.on_timeout());
            count_action(counters, &a);
            rc.timers.on_action(now, &a);
        }
        let oldest = rc.sq.oldest_tag();
        if rc.sessions.refresh_links(qp.device(), oldest, now_us) {
            // A session's link went down under unacknowledged requests:
            // resend them on a live one now rather than at the timeout.
            rc.mp.went_back();
            let a = rc.sq.go_back_now();
            count_action(counters, &a);
            rc.timers.on_action(now, &a);
        } else {
            // Packets of messages it does not hold may still be on it.
            multipath::resend_stranded(qp, inner, now_us);
            // And a session whose own timer expired.
            multipath::resend_quiet(qp, inner, now_us);
        }
    }
    // The wait for an ACK request is over: the next new packet asks if
    // this pass sends one (else the newest is resent asking, below).
    let asks_next = inner.rc.as_mut().is_some_and(|rc| {
        rc.timers.ack_request_due(now) && {
            rc.sq.ask_with_next_packet();
            rc.sq.asks_with_next_packet()
        }
    });
    // Completions first: the ACKs just received free send-queue slots that
    // this pass's `send` can fill from the ring at once.
    complete_sends(qp, inner, now);
    // Request packets leave in order across CPUs (`delivery`): perhaps
    // from another pass.
    let in_flight = inner.rc.as_ref().is_some_and(|rc| rc.sq.has_unacked());
    let leave = shared.leaves_requests(ctx, requests_waiting(inner), in_flight);
    if leave == Leave::No {
        send(qp, inner, now);
    }
    complete_sends(qp, inner, now);
    // Room freed after `send` looked (local operations performed, ACKs that
    // retired the whole window) would otherwise wait for a doorbell or a
    // packet that may never come: a process waiting for a completion of
    // work still in the ring posts nothing.
    // A page fault this pass stopped on is resolved by the work item.
    let mut more = more
        || leave == Leave::ToPassThread
        || (leave == Leave::No && sends_waiting(inner))
        || inner.faults.any()
        || inner
            .rc
            .as_ref()
            .is_some_and(|rc| rc.sessions.replace_pending() || rc.mp.wants_work());
    if let Some(rc) = inner.rc.as_mut() {
        let rc: &mut RcState = rc;
        let now_us = rc.now_us(now);
        let polled = rc.sessions.poll(rc.sq.oldest_tag(), now_us);
        if polled.resend {
            // A session stalled under unacknowledged requests and is down:
            // the next pass resends them on a live one.
            rc.mp.went_back();
            let a = rc.sq.go_back_now();
            count_action(counters, &a);
            rc.timers.on_action(now, &a);
            more = true;
        }
        if let Some(s) = polled.probe {
            if rc.sq.is_empty() && rc.is_acknowledged() {
                send_duplicate_probe(qp.device(), &mut inner.routes, rc, s);
            }
        }
        // Not while going back N or waiting out an RNR NAK (silence then
        // says nothing about a path; `resend_quiet` leaves it alone, and an
        // expired timer would schedule a pass at once, pass after pass):
        // the sessions' timers start again when it is over.
        let quiet_in = if rc.sq.resending() || rc.sq.waiting_rnr() {
            rc.mp.restart_quiet(now_us);
            None
        } else {
            rc.mp.quiet_wake_in(&rc.sessions, now_us)
        };
        // Nothing new went out to ask (or a signaled local operation
        // waits for the unasked packets): the newest is resent asking.
        // Not while a packet is held (refused by the stack, or waiting for
        // a page fault): it asks when it goes.
        let ask_now = rc.sq.asks_with_next_packet() || rc.sq.ack_request_now();
        if ask_now && !rc.sq.is_held() {
            // A request packet too: left as the others are.
            match shared.leaves_requests(ctx, true, true) {
                Leave::No => request_ack(qp, &mut inner.routes, rc),
                Leave::ToDelivery => {}
                Leave::ToPassThread => more = true,
            }
        } else if asks_next && !rc.sq.asks_with_next_packet() {
            // A new packet asked.
            counters.inc(Counter::AckRequests);
        }
        let wake_in = if rc.tx_refused {
            Some(quiet_in.map_or(TX_REFUSED_RETRY_US, |us| us.min(TX_REFUSED_RETRY_US)))
        } else {
            quiet_in
        };
        rc.timers
            .update(now, &rc.sq, polled.keep_polling, wake_in, shared);
        let policy = rc.sessions.policy();
        rc.sessions.state_changes(|id, s, f| {
            crate::sroce::session_events::report(
                qp.device(),
                qp.data().qpn(),
                policy,
                id,
                s,
                f,
                None,
            );
        });
    }
    if inner
        .rc
        .as_ref()
        .is_some_and(|rc| rc.sq.is_error() || rc.resp.is_error())
        && inner.attrs.state != QpState::Err
    {
        inner.attrs.state = QpState::Err;
        qp.data().publish_state(QpState::Err);
        enter_error(qp, inner);
    }
    let streams = inner.rc.as_ref().is_some_and(|rc| rc.streams());
    shared.streaming.store(streams, Ordering::Relaxed);
    if more {
        shared.schedule();
    }
}

/// Queued READ responses, then received packets until one must wait for
/// them, within this pass's budgets; true if work is left for another pass.
fn receive_batch(
    qp: &Qp<SroceDevice>,
    inner: &mut QpInner,
    shared: &Arc<QpShared>,
    now: Now,
    ctx: PassContext,
) -> bool {
    let mut budget = READ_RESPONSES_PER_PASS;
    let mut responses = |qp: &Qp<SroceDevice>, inner: &mut QpInner| {
        if responses_leave(inner, shared, ctx, budget) {
            send_read_responses(qp, inner, &mut budget);
        }
    };
    responses(qp, inner);
    // Held requests whose turn came while they waited behind READ
    // responses or a page fault.
    multipath::release(qp, inner, now);
    let mut batch = shared.take_backlog_or_batch();
    let mut taken = 0;
    while taken < RX_PER_PASS {
        let Some(pkt) = batch.pop() else { break };
        let Some(pkt) = multipath::intercept(qp, inner, pkt, now) else {
            taken += 1;
            continue;
        };
        if receive(qp, inner, &pkt, now) {
            pkt.consume();
            taken += 1;
            // The requests held behind it, now in order.
            multipath::release(qp, inner, now);
            continue;
        }
        // A request behind queued READ responses: they go first, then it
        // is offered again (next pass if the budget ran out).
        let _ = batch.push_within_capacity(pkt);
        responses(qp, inner);
        if reads_queued(inner) || receive_waits(inner) {
            break;
        }
    }
    responses(qp, inner);
    // Held requests that waited only for those READ responses.
    multipath::release(qp, inner, now);
    multipath::drop_stale(qp.device(), inner);
    multipath::flush_sack(qp.device(), inner);
    let more = !batch.is_empty() || reads_queued(inner);
    let queued = shared.keep_backlog(batch);
    more || queued
}

/// Whether a pass in `ctx` sends the queued READ responses now, with
/// `budget` packets left. A pass in the receive softirq sends into its
/// CPU's backlog, which is delivered later in that softirq: responses a
/// pass on another CPU sent meanwhile would overtake them, and the
/// requester, seeing a gap, asks for the READ again from there (a READ
/// stream of 64 KiB messages resent a tenth of its responses so). So the
/// softirq sends them only when all fit in its budget and no pass in
/// process context is delivering what it sent ([`delivery`]); else they
/// are left to the pass thread, which sends them all from one CPU. rxe
/// answers a READ whole in its responder task. Best effort, as the
/// delivery mark: a softirq pass that sent one READ's responses and then
/// leaves a later READ's to the thread can still be overtaken (no
/// duplicate READ in three 64 KiB streams, against 10-58 before).
fn responses_leave(inner: &QpInner, shared: &QpShared, ctx: PassContext, budget: u32) -> bool {
    ctx != PassContext::Receive
        || inner.rc.as_ref().is_none_or(|rc| {
            !rc.resp.read_responses_queued()
                || (rc.resp.read_responses_fit(budget) && !shared.delivery.any())
        })
}

/// Whether WQEs wait in the send ring while the send queue has room for
/// them (the QP sending).
fn sends_waiting(inner: &QpInner) -> bool {
    matches!(inner.attrs.state, QpState::Rts)
        && inner.rc.as_ref().is_some_and(|rc| {
            // A refused packet waits for the timer, not a pass at once.
            !rc.tx_refused
                && rc.sq.has_room()
                && !rc.sq.is_error()
                && inner.rings.send.pending() > rc.taken
        })
}

/// Whether the requester may have work for [`send`]: WQEs to take,
/// packets to send or resend, a local operation. Not while it waits (an
/// RNR wait, a held packet: a page fault, or a refused one, whose retry
/// timer schedules a pass); a full window still counts.
fn requests_waiting(inner: &QpInner) -> bool {
    sends_waiting(inner)
        || inner.rc.as_ref().is_some_and(|rc| {
            !rc.tx_refused
                && !rc.sq.waiting_rnr()
                && !rc.sq.is_held()
                && (rc.sq.has_unsent() || rc.sq.resending())
        })
}

/// Whether the receive side waits for a page fault to be resolved (the
/// responder on a request or READ response, the completer on a response's
/// buffer).
fn receive_waits(inner: &QpInner) -> bool {
    inner.faults.is_waiting(Waiter::Responder) || inner.faults.is_waiting(Waiter::Completer)
}

fn reads_queued(inner: &QpInner) -> bool {
    inner
        .rc
        .as_ref()
        .is_some_and(|rc| rc.resp.read_responses_queued())
}

/// Takes one received packet; false if it is a request that must wait for
/// queued READ responses (it is left untouched).
fn receive(qp: &Qp<SroceDevice>, inner: &mut QpInner, pkt: &RxPacket, now: Now) -> bool {
    // Packets wait, in order, behind one that waits for a page fault.
    if receive_waits(inner) {
        return false;
    }
    let Ok((h, rest)) = Headers::parse(pkt.head()) else {
        return true;
    };
    let header_len = pkt.head().len() - rest.len();
    let after = pkt.len() - header_len + crate::roce::icrc::ICRC_LEN;
    let Ok(payload_len) = h.payload_len(after) else {
        return true;
    };
    let op = h.bth.opcode.operation();
    // A connected QP only hears from its peer, over its own service.
    let from_peer = inner.rc.as_ref().is_some_and(|rc| {
        h.bth.opcode.transport() == rc.transport
            && pkt.src() == rc.flow.dst
            && pkt.dst() == rc.flow.src
            && pkt.is_roce_v1() == rc.flow.encap.is_roce_v1()
    });
    if !from_peer {
        return true;
    }
    let taken = if op.is_response() {
        on_response(qp, inner, &h, pkt, header_len, payload_len, now)
    } else if op.is_request() && inner.attrs.state != QpState::Init {
        on_request(qp, inner, &h, pkt, header_len, payload_len)
    } else {
        true
    };
    // Counted once, when taken (a deferred request is offered again).
    if let Some(rc) = inner.rc.as_mut().filter(|_| taken) {
        // UC asks for no ACK at all: only an RC peer's silence says it
        // does not wait.
        if op.is_request() && op.position().ends_message() {
            rc.peer_streams = rc.is_acknowledged() && !h.bth.ack_req;
        }
        let from = FiveTuple {
            src: NetAddr(pkt.src().gid()),
            dst: NetAddr(pkt.dst().gid()),
            sport: pkt.src_port(),
            dport: io::ROCE_V2_UDP_PORT,
        };
        // The addresses were checked above: this only counts.
        let _ = rc
            .rx_flows
            .accept(&from, (pkt.len() + crate::roce::icrc::ICRC_LEN) as u64);
    }
    taken
}
