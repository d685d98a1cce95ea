//! The RC responder: PSN checking, opcode sequence and length validation,
//! duplicate detection and replay, MSN counting, ACK generation, and the
//! fixed ring of RDMA READ / atomic responder resources.
//!
//! Two steps per request packet:
//!
//! 1. [`Responder::receive`] checks the packet against the expected PSN and
//!    the message in progress and returns a [`Decision`]: either
//!    [`Work`] to do, a [`Reply`] to send right away (a replayed atomic
//!    response, a re-ACK, a sequence-error or RNR NAK, a fatal NAK, or
//!    nothing), or [`Decision::Defer`] while READ responses are queued. It
//!    changes no state except the NAK latch and the queued READ responses.
//! 2. For [`Decision::Execute`], the driver validates keys and moves the
//!    data (or executes the atomic), then calls [`Responder::commit`] with
//!    the [`Outcome`]; that advances the expected PSN and MSN and returns
//!    the [`Reply`] to send.
//!
//! READ responses, new or replayed, are queued in the resources and taken
//! one packet at a time ([`ResponderWith::next_read_response`], in
//! `read_response.rs`); duplicates are handled in `duplicate.rs`, the
//! validation of a request at the expected PSN in `check.rs`, the
//! unacknowledged (UC) service in `unacknowledged.rs`.

use super::aeth::{Aeth, NakCode, Syndrome, CREDITS_INVALID, MSN_MAX};
use super::atomic_eth::AtomicEth;
use super::error::Error;
use super::opcode::{Operation, Transport};
use super::packet::Headers;
use super::psn::Psn;
use super::reth::Reth;
use super::segment::{MessagePlan, Mtu, WqeOp};

mod check;
mod duplicate;
mod read_response;
mod unacknowledged;

pub use read_response::{ReadReply, ReadResponsePacket};

/// Responder parameters, from the QP attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ResponderConfig {
    /// Path MTU.
    pub mtu: Mtu,
    /// READ and atomic requests whose responses are kept for replay
    /// (`max_dest_rd_atomic`), at most the ring size `R`; 0 rejects READ
    /// and atomic requests.
    pub max_dest_rd_atomic: u8,
    /// RNR NAK timer code sent when no receive WQE is available
    /// (`min_rnr_timer`, 0..=31).
    pub min_rnr_timer: u8,
    /// Whether the service acknowledges (RC). Without (UC) nothing is ever
    /// sent back: a lost packet, a request that cannot be carried out or
    /// one finding no receive WQE drops its message ([`Reply::Dropped`]).
    pub acknowledged: bool,
}

impl ResponderConfig {
    /// Defaults: one READ/atomic resource, RNR timer code 12 (0.64 ms).
    pub const fn new(mtu: Mtu) -> Self {
        ResponderConfig {
            mtu,
            max_dest_rd_atomic: 1,
            min_rnr_timer: 12,
            acknowledged: true,
        }
    }
}

/// A request packet as the responder sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Request {
    /// PSN from the BTH.
    pub psn: Psn,
    /// RC opcode operation.
    pub operation: Operation,
    /// BTH AckReq.
    pub ack_req: bool,
    /// Payload bytes (without pad).
    pub payload_len: u32,
    /// RETH (WRITE First/Only, READ).
    pub reth: Option<Reth>,
    /// AtomicETH (CmpSwap, FetchAdd).
    pub atomic: Option<AtomicEth>,
}

impl Request {
    /// Extracts the request from parsed headers and the payload length.
    /// Fails with [`Error::UnexpectedOpcode`] for anything but an RC or UC
    /// request (the caller checks that the transport is the QP's),
    /// [`Error::ValueOutOfRange`] for a payload above 4 GiB.
    pub fn from_headers(h: &Headers, payload_len: usize) -> Result<Self, Error> {
        let operation = h.bth.opcode.operation();
        let transport = h.bth.opcode.transport();
        if !matches!(transport, Transport::Rc | Transport::Uc)
            || !operation.is_request()
            || !operation.valid_for(transport)
        {
            return Err(Error::UnexpectedOpcode);
        }
        Ok(Request {
            psn: h.bth.psn,
            operation,
            ack_req: h.bth.ack_req,
            payload_len: u32::try_from(payload_len).map_err(|_| Error::ValueOutOfRange)?,
            reth: h.reth,
            atomic: h.atomic_eth,
        })
    }
}

/// What a responder resource remembers to replay a duplicate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResourceKind {
    /// An RDMA READ: replayed by reading memory again.
    Read {
        /// Requested virtual address.
        va: u64,
        /// R_Key.
        rkey: u32,
        /// Requested length.
        len: u32,
    },
    /// An atomic: replayed from the saved original value, never executed
    /// again.
    Atomic {
        /// The remote data before the operation.
        orig: u64,
    },
    /// An atomic write: its response (an empty READ Response Only) is
    /// sent again, the write never done again.
    AtomicWrite,
}

/// One RDMA READ or atomic request kept for replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReadAtomicResource {
    /// The request's PSN.
    pub first_psn: Psn,
    /// PSNs it consumed (READ: one per response packet; atomic: 1).
    pub psn_count: u32,
    /// What to replay.
    pub kind: ResourceKind,
    /// A READ whose responses are queued: the PSN offset of the next one
    /// to send (see [`ResponderWith::next_read_response`]).
    pub next_response: Option<u32>,
}

/// Work the driver performs for an accepted request, then reports with
/// [`Responder::commit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Work {
    /// The request's PSN.
    pub psn: Psn,
    /// Whether the requester asked for an ACK.
    pub ack_req: bool,
    /// What to do.
    pub kind: WorkKind,
}

/// The memory work of a request. Failures are reported as a NAK code:
/// [`NakCode::RemoteAccessError`] for a bad R_Key, range or access right;
/// [`NakCode::InvalidRequest`] for a receive buffer too small;
/// [`NakCode::RemoteOperationalError`] for a local failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WorkKind {
    /// Copy the payload into the receive WQE at `offset`.
    Send {
        /// Byte offset within the message.
        offset: u32,
        /// Payload bytes.
        len: u32,
        /// SEND First/Only: take the next receive WQE.
        first: bool,
        /// SEND Last/Only: complete the receive WQE (with the immediate
        /// data or invalidation from the headers).
        last: bool,
    },
    /// Write the payload to `va` under `rkey`.
    Write {
        /// Target address (the RETH address plus the message offset).
        va: u64,
        /// R_Key from the message's RETH.
        rkey: u32,
        /// Payload bytes.
        len: u32,
        /// WRITE First/Only: check `rkey` for the whole RETH range
        /// (`dma_len` bytes from `va`; no check when `dma_len` is 0). Later
        /// packets are guaranteed to stay inside that range.
        first: bool,
        /// The message's DMA length (RETH).
        dma_len: u32,
        /// WRITE Last/Only with immediate: take and complete a receive
        /// WQE.
        imm: bool,
    },
    /// Check `rkey` for reading `len` bytes at `va`; the responses come
    /// from [`Responder::commit`].
    Read {
        /// Address.
        va: u64,
        /// R_Key.
        rkey: u32,
        /// Length.
        len: u32,
    },
    /// Execute an atomic on the 8 bytes at `va` and report the original
    /// value ([`Outcome::Atomic`]).
    Atomic {
        /// Address (8-byte aligned, checked).
        va: u64,
        /// R_Key.
        rkey: u32,
        /// Compare and swap (`true`) or fetch and add.
        compare_swap: bool,
        /// Swap data (compare and swap) or add data (fetch and add).
        swap_add: u64,
        /// Compare data (compare and swap).
        compare: u64,
    },
    /// Store the 8-byte payload at `va` at once; the response comes from
    /// [`Responder::commit`].
    AtomicWrite {
        /// Address (8-byte aligned, checked).
        va: u64,
        /// R_Key.
        rkey: u32,
    },
}

impl WorkKind {
    /// Whether the work takes a receive WQE: SEND First/Only, WRITE with
    /// immediate.
    pub const fn needs_recv(&self) -> bool {
        match *self {
            WorkKind::Send { first, .. } => first,
            WorkKind::Write { imm, .. } => imm,
            _ => false,
        }
    }
}

/// How the driver's work went, for [`Responder::commit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Done (SEND, WRITE, READ access check).
    Done,
    /// Atomic executed; the remote data before it.
    Atomic(u64),
    /// Failed: send this NAK and enter the error state.
    Failed(NakCode),
    /// The memory the work needs is not present (an on-demand paged
    /// region): nothing was done. The responder pauses
    /// ([`Reply::Paused`]) until the driver has faulted it in and calls
    /// [`ResponderWith::resume`]; the request is then offered again.
    PageFault,
}

/// What to send back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reply {
    /// Nothing (ACK coalesced, or the packet is dropped silently).
    None,
    /// An Acknowledge packet (ACK, RNR NAK or sequence-error NAK).
    Ack {
        /// BTH PSN.
        psn: Psn,
        /// AETH.
        aeth: Aeth,
    },
    /// An ATOMIC Acknowledge.
    AtomicAck {
        /// BTH PSN.
        psn: Psn,
        /// AETH.
        aeth: Aeth,
        /// AtomicAckETH original data.
        orig: u64,
    },
    /// RDMA READ responses were queued (or a queued replay restarted
    /// earlier): send them with [`ResponderWith::next_read_response`]. An
    /// atomic write's response is one of them (empty).
    Read,
    /// A NAK after which the QP enters the error state: send it, complete
    /// any receive WQE in use in error, move the QP to error.
    FatalNak {
        /// BTH PSN.
        psn: Psn,
        /// AETH.
        aeth: Aeth,
    },
    /// Unacknowledged service: the packet and the message it belongs to
    /// are dropped, silently; a receive WQE the message was using stays
    /// for the next message.
    Dropped,
    /// Unacknowledged service: a local error (a receive WQE too small, a
    /// local failure): complete the receive WQE in use in error and move
    /// the QP to error; nothing is sent.
    Fatal,
    /// The request hit a page fault ([`Outcome::PageFault`]): nothing is
    /// sent and the request is not taken; the driver keeps it, resolves
    /// the fault, calls [`ResponderWith::resume`] and offers it again.
    /// Until then every request gets [`Decision::Defer`], so nothing
    /// after it overtakes it (and the requester, seeing no NAK, neither
    /// fails nor resends before its own timer).
    Paused,
}

/// Result of [`Responder::receive`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Decision {
    /// A new request: do the work, then [`Responder::commit`].
    Execute(Work),
    /// Nothing to execute; send the reply (if any).
    Reply(Reply),
    /// READ responses are queued ahead of this request: send them first
    /// ([`ResponderWith::next_read_response`]), then offer the request
    /// again. Only duplicate READs are taken while responses are queued,
    /// so that no reply to a later request overtakes them. Also every
    /// request while the responder is paused on a page fault.
    Defer,
}

/// An ACK AETH with no credit information, as rxe sends.
const fn ack_aeth(msn: u32) -> Aeth {
    Aeth {
        syndrome: Syndrome::Ack {
            credits: CREDITS_INVALID,
        },
        msn,
    }
}

/// The message in progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum InMessage {
    Idle,
    Send {
        offset: u32,
    },
    Write {
        va: u64,
        rkey: u32,
        dma_len: u32,
        offset: u32,
    },
}

/// Why a request at the expected PSN is rejected.
type Reject = NakCode;

/// Where a responder keeps its READ/atomic resources: an array
/// ([`Responder`]), or a heap buffer in a kernel, where 128 of them (4 KiB)
/// should not be built on the stack.
pub trait ResourceStore:
    AsRef<[Option<ReadAtomicResource>]> + AsMut<[Option<ReadAtomicResource>]>
{
}

impl<T> ResourceStore for T where
    T: AsRef<[Option<ReadAtomicResource>]> + AsMut<[Option<ReadAtomicResource>]>
{
}

/// The responder side of an RC QP with a ring of READ/atomic resources in
/// `S` (all empty at the start).
#[derive(Clone, Debug)]
pub struct ResponderWith<S> {
    cfg: ResponderConfig,
    epsn: Psn,
    msn: u32,
    nak_latched: bool,
    msg: InMessage,
    resources: S,
    res_next: usize,
    /// Resources with queued READ responses.
    reads_queued: usize,
    /// Waiting for a page fault to be resolved ([`Reply::Paused`]).
    paused: bool,
    error: bool,
}

/// A responder with room for `R` READ/atomic resources in an array.
pub type Responder<const R: usize> = ResponderWith<[Option<ReadAtomicResource>; R]>;

impl<const R: usize> ResponderWith<[Option<ReadAtomicResource>; R]> {
    /// A responder expecting `initial_psn` (the QP's `rq_psn`).
    pub const fn new(cfg: ResponderConfig, initial_psn: Psn) -> Self {
        Self::with_storage([None; R], cfg, initial_psn)
    }
}

impl<S: ResourceStore> ResponderWith<S> {
    /// A responder expecting `initial_psn` (the QP's `rq_psn`), its
    /// resources kept in `storage`, whose slots must all be `None`.
    pub const fn with_storage(storage: S, cfg: ResponderConfig, initial_psn: Psn) -> Self {
        ResponderWith {
            cfg,
            epsn: initial_psn,
            msn: 0,
            nak_latched: false,
            msg: InMessage::Idle,
            resources: storage,
            res_next: 0,
            reads_queued: 0,
            paused: false,
            error: false,
        }
    }

    /// The expected PSN.
    pub const fn epsn(&self) -> Psn {
        self.epsn
    }

    /// The message sequence number: messages completed, modulo 2^24.
    pub const fn msn(&self) -> u32 {
        self.msn
    }

    /// Whether the responder is in the error state (everything dropped).
    pub const fn is_error(&self) -> bool {
        self.error
    }

    /// Enters the error state.
    pub fn set_error(&mut self) {
        self.error = true;
    }

    /// Whether the responder waits for a page fault to be resolved: no
    /// request is taken and no READ response handed out until
    /// [`ResponderWith::resume`].
    pub const fn is_paused(&self) -> bool {
        self.paused
    }

    /// The page fault that paused the responder is resolved: requests are
    /// taken again (the one that faulted first, as the driver kept it) and
    /// READ responses go on from the one that faulted.
    pub fn resume(&mut self) {
        self.paused = false;
    }

    /// Whether a multi-packet SEND is in progress (its receive WQE is in
    /// use).
    pub const fn send_in_progress(&self) -> bool {
        matches!(self.msg, InMessage::Send { .. })
    }

    /// The READ/atomic resources held, in no particular order.
    pub fn resources(&self) -> impl Iterator<Item = &ReadAtomicResource> {
        self.resources.as_ref().iter().flatten()
    }

    /// Checks a request packet. `recv_ready` says whether a receive WQE is
    /// available, needed by SEND First/Only and WRITE with immediate.
    pub fn receive(&mut self, req: &Request, recv_ready: bool) -> Decision {
        if self.error {
            return Decision::Reply(Reply::None);
        }
        if self.paused {
            return Decision::Defer;
        }
        if !self.cfg.acknowledged {
            return self.receive_unacknowledged(req, recv_ready);
        }
        let d = req.psn.diff(self.epsn);
        if self.reads_queued > 0 && (d >= 0 || req.operation != Operation::RdmaReadRequest) {
            return Decision::Defer;
        }
        if d < 0 {
            return Decision::Reply(self.duplicate(req));
        }
        if d > 0 {
            if self.nak_latched {
                return Decision::Reply(Reply::None);
            }
            self.nak_latched = true;
            return Decision::Reply(self.nak(NakCode::PsnSequenceError));
        }
        self.nak_latched = false;
        let kind = match self.check(req) {
            Ok(kind) => kind,
            Err(code) => {
                self.error = true;
                return Decision::Reply(Reply::FatalNak {
                    psn: self.epsn,
                    aeth: self.aeth(Syndrome::Nak(code)),
                });
            }
        };
        if kind.needs_recv() && !recv_ready {
            self.nak_latched = true;
            return Decision::Reply(Reply::Ack {
                psn: self.epsn,
                aeth: self.aeth(Syndrome::RnrNak {
                    timer: self.cfg.min_rnr_timer & 0x1F,
                }),
            });
        }
        Decision::Execute(Work {
            psn: req.psn,
            ack_req: req.ack_req,
            kind,
        })
    }

    /// Records the outcome of accepted work and returns the reply. Work
    /// that is not for the expected PSN (stale, or committed twice) is
    /// ignored ([`Reply::None`]).
    pub fn commit(&mut self, work: &Work, outcome: Outcome) -> Reply {
        if self.error || work.psn != self.epsn {
            return Reply::None;
        }
        if outcome == Outcome::PageFault {
            // Nothing changes: the same request executes again on resume.
            self.paused = true;
            return Reply::Paused;
        }
        if let Outcome::Failed(code) = outcome {
            if !self.cfg.acknowledged {
                return self.unacknowledged_failure(code);
            }
            return self.fail(code);
        }
        match work.kind {
            WorkKind::Send {
                offset, len, last, ..
            } => {
                self.epsn = self.epsn.next();
                self.msg = if last {
                    self.complete_message();
                    InMessage::Idle
                } else {
                    InMessage::Send {
                        offset: offset.saturating_add(len),
                    }
                };
            }
            WorkKind::Write {
                va,
                rkey,
                len,
                dma_len,
                ..
            } => {
                self.epsn = self.epsn.next();
                let (base, offset) = match self.msg {
                    InMessage::Write { va, offset, .. } => (va, offset),
                    _ => (va, 0),
                };
                let offset = offset.saturating_add(len);
                if offset >= dma_len {
                    self.complete_message();
                    self.msg = InMessage::Idle;
                } else {
                    self.msg = InMessage::Write {
                        va: base,
                        rkey,
                        dma_len,
                        offset,
                    };
                }
            }
            WorkKind::Read { va, rkey, len } => {
                let Ok(plan) = MessagePlan::new(WqeOp::Read, len, self.cfg.mtu) else {
                    return self.fail(NakCode::InvalidRequest);
                };
                self.store(ReadAtomicResource {
                    first_psn: self.epsn,
                    psn_count: plan.psn_count(),
                    kind: ResourceKind::Read { va, rkey, len },
                    next_response: Some(0),
                });
                self.reads_queued = self.reads_queued.saturating_add(1);
                self.epsn = self.epsn.wrapping_add(plan.psn_count());
                self.complete_message();
                return Reply::Read;
            }
            WorkKind::AtomicWrite { .. } => {
                self.store(ReadAtomicResource {
                    first_psn: self.epsn,
                    psn_count: 1,
                    kind: ResourceKind::AtomicWrite,
                    next_response: Some(0),
                });
                self.reads_queued = self.reads_queued.saturating_add(1);
                self.epsn = self.epsn.next();
                self.complete_message();
                return Reply::Read;
            }
            WorkKind::Atomic { .. } => {
                let Outcome::Atomic(orig) = outcome else {
                    return self.fail(NakCode::RemoteOperationalError);
                };
                let psn = self.epsn;
                self.store(ReadAtomicResource {
                    first_psn: psn,
                    psn_count: 1,
                    kind: ResourceKind::Atomic { orig },
                    next_response: None,
                });
                self.epsn = self.epsn.next();
                self.complete_message();
                return Reply::AtomicAck {
                    psn,
                    aeth: ack_aeth(self.msn),
                    orig,
                };
            }
        }
        if work.ack_req {
            Reply::Ack {
                psn: work.psn,
                aeth: ack_aeth(self.msn),
            }
        } else {
            Reply::None
        }
    }

    /// Stores a resource, replacing the oldest when `max_dest_rd_atomic`
    /// are held.
    fn store(&mut self, res: ReadAtomicResource) {
        let limit = self.res_limit();
        let i = self.res_next.checked_rem(limit).unwrap_or(0);
        if let Some(slot) = self.resources.as_mut().get_mut(i) {
            // A READ pushed out of the ring takes its queued responses
            // with it.
            if slot.is_some_and(|old| old.next_response.is_some()) {
                self.reads_queued = self.reads_queued.saturating_sub(1);
            }
            *slot = Some(res);
        }
        self.res_next = i.wrapping_add(1).checked_rem(limit).unwrap_or(0);
    }

    fn res_limit(&self) -> usize {
        usize::from(self.cfg.max_dest_rd_atomic).min(self.resources.as_ref().len())
    }

    fn complete_message(&mut self) {
        self.msn = self.msn.wrapping_add(1) & MSN_MAX;
    }

    fn aeth(&self, syndrome: Syndrome) -> Aeth {
        Aeth {
            syndrome,
            msn: self.msn,
        }
    }

    fn nak(&self, code: NakCode) -> Reply {
        Reply::Ack {
            psn: self.epsn,
            aeth: self.aeth(Syndrome::Nak(code)),
        }
    }

    fn fail(&mut self, code: NakCode) -> Reply {
        self.error = true;
        Reply::FatalNak {
            psn: self.epsn,
            aeth: self.aeth(Syndrome::Nak(code)),
        }
    }
}

#[cfg(test)]
mod tests;
