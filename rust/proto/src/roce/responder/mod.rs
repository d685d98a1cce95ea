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
//! `read_response.rs`); duplicates are handled in `duplicate.rs`.

use super::aeth::{Aeth, NakCode, Syndrome, CREDITS_INVALID, MSN_MAX};
use super::atomic_eth::AtomicEth;
use super::error::Error;
use super::opcode::{Operation, Position, Transport};
use super::packet::Headers;
use super::psn::Psn;
use super::reth::Reth;
use super::segment::{MessagePlan, Mtu, WqeOp};

mod duplicate;
mod read_response;

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
}

impl ResponderConfig {
    /// Defaults: one READ/atomic resource, RNR timer code 12 (0.64 ms).
    pub const fn new(mtu: Mtu) -> Self {
        ResponderConfig {
            mtu,
            max_dest_rd_atomic: 1,
            min_rnr_timer: 12,
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
    /// Fails with [`Error::UnexpectedOpcode`] for anything but an RC
    /// request, [`Error::ValueOutOfRange`] for a payload above 4 GiB.
    pub fn from_headers(h: &Headers, payload_len: usize) -> Result<Self, Error> {
        let operation = h.bth.opcode.operation();
        if h.bth.opcode.transport() != Transport::Rc || !operation.is_request() {
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
    /// earlier): send them with [`ResponderWith::next_read_response`].
    Read,
    /// A NAK after which the QP enters the error state: send it, complete
    /// any receive WQE in use in error, move the QP to error.
    FatalNak {
        /// BTH PSN.
        psn: Psn,
        /// AETH.
        aeth: Aeth,
    },
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
    /// so that no reply to a later request overtakes them.
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
        let needs_recv = match kind {
            WorkKind::Send { first, .. } => first,
            WorkKind::Write { imm, .. } => imm,
            _ => false,
        };
        if needs_recv && !recv_ready {
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
        if let Outcome::Failed(code) = outcome {
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

    /// Validates a request at the expected PSN against the message in
    /// progress and the length rules, and describes its work.
    fn check(&self, req: &Request) -> Result<WorkKind, Reject> {
        use Operation as O;
        let mtu = self.cfg.mtu.bytes();
        let len = req.payload_len;
        let pos = req.operation.position();
        match (self.msg, req.operation) {
            (
                InMessage::Idle,
                O::SendFirst | O::SendOnly | O::SendOnlyWithImmediate | O::SendOnlyWithInvalidate,
            )
            | (
                InMessage::Send { .. },
                O::SendMiddle | O::SendLast | O::SendLastWithImmediate | O::SendLastWithInvalidate,
            ) => {
                let offset = match self.msg {
                    InMessage::Send { offset } => offset,
                    _ => 0,
                };
                check_payload(pos, len, mtu)?;
                match offset.checked_add(len) {
                    Some(total) if total <= MessagePlan::MAX_LEN => {}
                    _ => return Err(NakCode::InvalidRequest),
                }
                Ok(WorkKind::Send {
                    offset,
                    len,
                    first: pos.starts_message(),
                    last: pos.ends_message(),
                })
            }
            (
                InMessage::Idle,
                O::RdmaWriteFirst | O::RdmaWriteOnly | O::RdmaWriteOnlyWithImmediate,
            )
            | (
                InMessage::Write { .. },
                O::RdmaWriteMiddle | O::RdmaWriteLast | O::RdmaWriteLastWithImmediate,
            ) => {
                check_payload(pos, len, mtu)?;
                let (base, rkey, dma_len, offset) = match (self.msg, req.reth) {
                    (
                        InMessage::Write {
                            va,
                            rkey,
                            dma_len,
                            offset,
                        },
                        _,
                    ) => (va, rkey, dma_len, offset),
                    (_, Some(r)) => (r.va, r.rkey, r.dma_len, 0),
                    _ => return Err(NakCode::InvalidRequest),
                };
                let end = offset.checked_add(len).ok_or(NakCode::InvalidRequest)?;
                let fits = if pos.ends_message() {
                    end == dma_len
                } else {
                    end < dma_len
                };
                if !fits || dma_len > MessagePlan::MAX_LEN {
                    return Err(NakCode::InvalidRequest);
                }
                let va = base
                    .checked_add(u64::from(offset))
                    .ok_or(NakCode::RemoteAccessError)?;
                Ok(WorkKind::Write {
                    va,
                    rkey,
                    len,
                    first: pos.starts_message(),
                    dma_len,
                    imm: matches!(
                        req.operation,
                        O::RdmaWriteLastWithImmediate | O::RdmaWriteOnlyWithImmediate
                    ),
                })
            }
            (InMessage::Idle, O::RdmaReadRequest) => {
                let r = req.reth.ok_or(NakCode::InvalidRequest)?;
                if self.res_limit() == 0
                    || MessagePlan::new(WqeOp::Read, r.dma_len, self.cfg.mtu).is_err()
                {
                    return Err(NakCode::InvalidRequest);
                }
                Ok(WorkKind::Read {
                    va: r.va,
                    rkey: r.rkey,
                    len: r.dma_len,
                })
            }
            (InMessage::Idle, O::CompareSwap | O::FetchAdd) => {
                let a = req.atomic.ok_or(NakCode::InvalidRequest)?;
                if self.res_limit() == 0 || a.va & 7 != 0 {
                    return Err(NakCode::InvalidRequest);
                }
                Ok(WorkKind::Atomic {
                    va: a.va,
                    rkey: a.rkey,
                    compare_swap: req.operation == O::CompareSwap,
                    swap_add: a.swap_add,
                    compare: a.compare,
                })
            }
            // Missing First/Last, unsupported (FLUSH, ATOMIC WRITE) or
            // response opcodes.
            _ => Err(NakCode::InvalidRequest),
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

/// Payload length rules: First and Middle carry exactly one MTU, Last
/// 1..=MTU bytes, Only 0..=MTU bytes.
fn check_payload(pos: Position, len: u32, mtu: u32) -> Result<(), Reject> {
    let ok = match pos {
        Position::First | Position::Middle => len == mtu,
        Position::Last => len != 0 && len <= mtu,
        Position::Only => len <= mtu,
    };
    if ok {
        Ok(())
    } else {
        Err(NakCode::InvalidRequest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;
    use Operation as O;

    const MTU: Mtu = Mtu::Mtu256;

    fn resp() -> Responder<4> {
        Responder::new(
            ResponderConfig {
                mtu: MTU,
                max_dest_rd_atomic: 2,
                min_rnr_timer: 12,
            },
            Psn::new(100),
        )
    }

    fn req(psn: u32, operation: Operation, payload_len: u32) -> Request {
        Request {
            psn: Psn::new(psn),
            operation,
            ack_req: operation.position().ends_message(),
            payload_len,
            reth: None,
            atomic: None,
        }
    }

    /// `q` with a RETH for `len` bytes at `va` under rkey 1.
    fn with_reth(mut q: Request, va: u64, len: u32) -> Request {
        q.reth = Some(Reth {
            va,
            rkey: 1,
            dma_len: len,
        });
        q
    }

    fn exec(r: &mut Responder<4>, q: &Request) -> Reply {
        match r.receive(q, true) {
            Decision::Execute(w) => {
                let o = match w.kind {
                    WorkKind::Atomic { swap_add, .. } => Outcome::Atomic(swap_add * 10),
                    _ => Outcome::Done,
                };
                r.commit(&w, o)
            }
            d => panic!("not executed: {d:?}"),
        }
    }

    /// Every queued READ response, in the order they go out.
    fn drain(r: &mut Responder<4>) -> Vec<ReadResponsePacket> {
        let mut out = Vec::new();
        while let Some(p) = r.next_read_response() {
            out.push(p);
        }
        assert!(!r.read_responses_queued());
        out
    }

    fn read_req(psn: u32, va: u64, len: u32) -> Request {
        let mut q = req(psn, O::RdmaReadRequest, 0);
        q.reth = Some(Reth {
            va,
            rkey: 9,
            dma_len: len,
        });
        q
    }

    #[test]
    fn read_responses_are_taken_one_at_a_time_and_later_requests_wait() {
        let mut r = resp();
        // 10 packets of 256 bytes.
        assert_eq!(exec(&mut r, &read_req(100, 0x1000, 2560)), Reply::Read);
        assert_eq!(r.epsn(), Psn::new(110));
        let first = r.next_read_response().unwrap();
        assert_eq!(
            (first.psn, first.va, first.rkey),
            (Psn::new(100), 0x1000, 9)
        );
        // A new request, an out-of-sequence one and a duplicate SEND wait
        // until the responses are out: no reply may overtake them.
        for q in [
            req(110, O::SendOnly, 1),
            req(115, O::SendOnly, 1),
            req(99, O::SendOnly, 1),
        ] {
            assert_eq!(r.receive(&q, true), Decision::Defer);
        }
        let rest = drain(&mut r);
        assert_eq!(rest.len(), 9);
        assert_eq!(rest[8].psn, Psn::new(109));
        assert_eq!(exec(&mut r, &req(110, O::SendOnly, 1)), acked(110, 2));
    }

    #[test]
    fn duplicate_reads_coalesce_with_queued_responses() {
        let mut r = resp();
        assert_eq!(exec(&mut r, &read_req(100, 0x1000, 2560)), Reply::Read);
        let mut sent = drain(&mut r).len();
        assert_eq!(sent, 10);
        // A hundred duplicates of the whole READ arriving together: one
        // replay.
        for _ in 0..100 {
            assert_eq!(
                r.receive(&read_req(100, 0x1000, 2560), true),
                Decision::Reply(Reply::Read)
            );
        }
        sent += drain(&mut r).len();
        assert_eq!(sent, 20);
        // A duplicate for a later PSN while the replay is queued: no
        // second stream.
        r.receive(&read_req(100, 0x1000, 2560), true);
        for _ in 0..4 {
            r.next_read_response();
        }
        r.receive(&read_req(107, 0x1000 + 7 * 256, 768), true);
        assert_eq!(drain(&mut r).len(), 6);
        // One for an earlier PSN restarts the queued stream there.
        r.receive(&read_req(100, 0x1000, 2560), true);
        for _ in 0..6 {
            r.next_read_response();
        }
        r.receive(&read_req(102, 0x1000 + 2 * 256, 2048), true);
        let p = drain(&mut r);
        assert_eq!(p.len(), 8);
        assert_eq!(p[0].psn, Psn::new(102));
        assert_eq!(p[0].operation, O::RdmaReadResponseMiddle);
    }

    #[test]
    fn queued_replays_are_bounded_by_the_resources_and_go_oldest_first() {
        let mut r = resp();
        assert_eq!(exec(&mut r, &read_req(100, 0x1000, 512)), Reply::Read);
        drain(&mut r);
        assert_eq!(exec(&mut r, &read_req(102, 0x2000, 512)), Reply::Read);
        drain(&mut r);
        // Duplicates for the newer READ, then the older, many times over.
        for _ in 0..50 {
            r.receive(&read_req(102, 0x2000, 512), true);
            r.receive(&read_req(100, 0x1000, 512), true);
        }
        let p = drain(&mut r);
        let psns: Vec<u32> = p.iter().map(|p| p.psn.value()).collect();
        assert_eq!(psns, [100, 101, 102, 103]);
        // No new READ is taken while responses are queued, so none can
        // push a queued one out of the ring.
        r.receive(&read_req(100, 0x1000, 512), true);
        assert_eq!(r.receive(&read_req(104, 0x3000, 0), true), Decision::Defer);
        drain(&mut r);
        assert_eq!(exec(&mut r, &read_req(104, 0x3000, 0)), Reply::Read);
        let p: Vec<u32> = drain(&mut r).iter().map(|p| p.psn.value()).collect();
        assert_eq!(p, [104]);
        // The error state drops what is queued.
        r.receive(&read_req(102, 0x2000, 512), true);
        r.set_error();
        assert_eq!(r.next_read_response(), None);
    }

    fn acked(psn: u32, msn: u32) -> Reply {
        Reply::Ack {
            psn: Psn::new(psn),
            aeth: ack_aeth(msn),
        }
    }

    #[test]
    fn multi_packet_send_and_coalescing() {
        let mut r = resp();
        assert_eq!(exec(&mut r, &req(100, O::SendFirst, 256)), Reply::None);
        assert!(r.send_in_progress());
        assert_eq!(exec(&mut r, &req(101, O::SendMiddle, 256)), Reply::None);
        assert_eq!(exec(&mut r, &req(102, O::SendLast, 3)), acked(102, 1));
        assert_eq!(r.epsn(), Psn::new(103));
        // AckReq on a middle packet gets an ACK with the old MSN.
        let mut q = req(103, O::SendFirst, 256);
        q.ack_req = true;
        assert_eq!(exec(&mut r, &q), acked(103, 1));
    }

    #[test]
    fn sequence_errors_are_naked_once() {
        let mut r = resp();
        let nak = Reply::Ack {
            psn: Psn::new(100),
            aeth: Aeth {
                syndrome: Syndrome::Nak(NakCode::PsnSequenceError),
                msn: 0,
            },
        };
        assert_eq!(
            r.receive(&req(101, O::SendOnly, 1), true),
            Decision::Reply(nak)
        );
        assert_eq!(
            r.receive(&req(102, O::SendOnly, 1), true),
            Decision::Reply(Reply::None)
        );
        assert_eq!(exec(&mut r, &req(100, O::SendOnly, 1)), acked(100, 1));
        assert_eq!(exec(&mut r, &req(101, O::SendOnly, 1)), acked(101, 2));
        // The latch was released by the expected PSN.
        assert!(matches!(
            r.receive(&req(105, O::SendOnly, 1), true),
            Decision::Reply(Reply::Ack { .. })
        ));
        // Duplicates are re-ACKed with the last PSN received.
        assert_eq!(
            r.receive(&req(100, O::SendOnly, 1), true),
            Decision::Reply(acked(101, 2))
        );
    }

    #[test]
    fn opcode_sequence_and_lengths() {
        let cases: [(&[(Operation, u32)], bool); 9] = [
            (&[(O::SendMiddle, 256)], false),
            (&[(O::SendLast, 1)], false),
            (&[(O::SendFirst, 255)], false),
            (&[(O::SendOnly, 257)], false),
            (&[(O::SendFirst, 256), (O::SendLast, 0)], false),
            (&[(O::SendFirst, 256), (O::SendOnly, 1)], false),
            (&[(O::SendFirst, 256), (O::RdmaWriteMiddle, 256)], false),
            (
                &[(O::SendFirst, 256), (O::SendLastWithInvalidate, 256)],
                true,
            ),
            (&[(O::Flush, 0)], false),
        ];
        for (seq, ok) in cases {
            let mut r = resp();
            let mut last = None;
            for (i, &(op, len)) in seq.iter().enumerate() {
                last = Some(match r.receive(&req(100 + i as u32, op, len), true) {
                    Decision::Execute(w) => r.commit(&w, Outcome::Done),
                    Decision::Reply(rep) => rep,
                    Decision::Defer => panic!("no READ queued"),
                });
            }
            let fatal = matches!(
                last,
                Some(Reply::FatalNak {
                    aeth: Aeth {
                        syndrome: Syndrome::Nak(NakCode::InvalidRequest),
                        ..
                    },
                    ..
                })
            );
            assert_eq!(!fatal, ok, "{seq:?}");
            assert_eq!(r.is_error(), !ok);
        }
    }

    #[test]
    fn write_length_must_match_reth() {
        let write = |ops: &[(Operation, u32)], dma_len: u32| -> bool {
            let mut r = resp();
            for (i, &(op, len)) in ops.iter().enumerate() {
                let mut q = req(100 + i as u32, op, len);
                if i == 0 {
                    q.reth = Some(Reth {
                        va: 0x1000,
                        rkey: 7,
                        dma_len,
                    });
                }
                match r.receive(&q, true) {
                    Decision::Execute(w) => {
                        r.commit(&w, Outcome::Done);
                    }
                    Decision::Reply(_) | Decision::Defer => return false,
                }
            }
            !r.is_error()
        };
        assert!(write(&[(O::RdmaWriteOnly, 10)], 10));
        assert!(!write(&[(O::RdmaWriteOnly, 10)], 11));
        assert!(write(&[(O::RdmaWriteOnly, 0)], 0));
        assert!(write(
            &[(O::RdmaWriteFirst, 256), (O::RdmaWriteLast, 5)],
            261
        ));
        assert!(!write(
            &[(O::RdmaWriteFirst, 256), (O::RdmaWriteLast, 5)],
            262
        ));
        assert!(!write(&[(O::RdmaWriteFirst, 256)], 256));
        assert!(!write(
            &[(O::RdmaWriteFirst, 256), (O::RdmaWriteMiddle, 256)],
            512
        ));
        // Address of a middle packet.
        let mut r = resp();
        let mut q = req(100, O::RdmaWriteFirst, 256);
        q.reth = Some(Reth {
            va: 0x1000,
            rkey: 7,
            dma_len: 600,
        });
        exec(&mut r, &q);
        let Decision::Execute(w) = r.receive(&req(101, O::RdmaWriteMiddle, 256), true) else {
            panic!()
        };
        assert_eq!(
            w.kind,
            WorkKind::Write {
                va: 0x1100,
                rkey: 7,
                len: 256,
                first: false,
                dma_len: 600,
                imm: false
            }
        );
    }

    #[test]
    fn rnr_when_no_receive_wqe() {
        let mut r = resp();
        let d = r.receive(&req(100, O::SendOnly, 1), false);
        assert_eq!(
            d,
            Decision::Reply(Reply::Ack {
                psn: Psn::new(100),
                aeth: Aeth {
                    syndrome: Syndrome::RnrNak { timer: 12 },
                    msn: 0
                }
            })
        );
        // Packets after it are dropped silently until PSN 100 comes back.
        assert_eq!(
            r.receive(&req(101, O::SendOnly, 1), false),
            Decision::Reply(Reply::None)
        );
        // WRITE without immediate needs no receive WQE.
        let mut q = req(100, O::RdmaWriteOnly, 1);
        q.reth = Some(Reth {
            va: 0,
            rkey: 1,
            dma_len: 1,
        });
        assert!(matches!(r.receive(&q, false), Decision::Execute(_)));
        let mut q = req(100, O::RdmaWriteOnlyWithImmediate, 1);
        q.reth = Some(Reth {
            va: 0,
            rkey: 1,
            dma_len: 1,
        });
        assert!(matches!(
            r.receive(&q, false),
            Decision::Reply(Reply::Ack { .. })
        ));
    }

    #[test]
    fn read_and_replay() {
        let mut r = resp();
        let mut q = req(100, O::RdmaReadRequest, 0);
        q.reth = Some(Reth {
            va: 0x2000,
            rkey: 9,
            dma_len: 600,
        });
        assert_eq!(exec(&mut r, &q), Reply::Read);
        assert_eq!(r.epsn(), Psn::new(103));
        let p = drain(&mut r);
        assert_eq!(p.len(), 3);
        assert_eq!(
            p.iter().map(|p| p.operation).collect::<Vec<_>>(),
            [
                O::RdmaReadResponseFirst,
                O::RdmaReadResponseMiddle,
                O::RdmaReadResponseLast
            ]
        );
        assert_eq!((p[2].psn, p[2].va, p[2].len), (Psn::new(102), 0x2200, 88));
        assert_eq!(p[1].aeth, None);
        assert_eq!(p[0].aeth.unwrap().msn, 1);
        // Replay of the whole READ, and from its middle.
        assert_eq!(r.receive(&q, true), Decision::Reply(Reply::Read));
        assert_eq!(drain(&mut r), p);
        let mut mid = req(101, O::RdmaReadRequest, 0);
        mid.reth = Some(Reth {
            va: 0x2100,
            rkey: 9,
            dma_len: 344,
        });
        assert_eq!(r.receive(&mid, true), Decision::Reply(Reply::Read));
        assert_eq!(drain(&mut r), p[1..]);
        // Inconsistent duplicates are dropped.
        mid.reth = Some(Reth {
            va: 0x2100,
            rkey: 9,
            dma_len: 345,
        });
        assert_eq!(r.receive(&mid, true), Decision::Reply(Reply::None));
        // Zero-length READ: one Only response.
        let mut z = req(103, O::RdmaReadRequest, 0);
        z.reth = Some(Reth {
            va: 0,
            rkey: 9,
            dma_len: 0,
        });
        assert_eq!(exec(&mut r, &z), Reply::Read);
        let zp = drain(&mut r);
        assert_eq!(zp.len(), 1);
        assert_eq!((zp[0].operation, zp[0].len), (O::RdmaReadResponseOnly, 0));
    }

    #[test]
    fn duplicate_write_before_a_later_atomic_is_not_acked() {
        let mut r = resp();
        let w = with_reth(req(100, O::RdmaWriteOnly, 8), 0x3000, 8);
        exec(&mut r, &w);
        let mut a = req(101, O::FetchAdd, 0);
        a.atomic = Some(AtomicEth {
            va: 0x3000,
            rkey: 1,
            swap_add: 1,
            compare: 0,
        });
        exec(&mut r, &a);
        exec(&mut r, &req(102, O::SendOnly, 1));
        // The WRITE again: no plain ACK, neither over the atomic (whose
        // response the requester may have lost) nor from before it (stale
        // for a requester already taking later responses); the atomic's
        // replay acknowledges the WRITE.
        assert_eq!(r.receive(&w, true), Decision::Reply(Reply::None));
        // The SEND after the atomic again: everything.
        let Decision::Reply(Reply::Ack { psn, .. }) = r.receive(&req(102, O::SendOnly, 1), true)
        else {
            panic!()
        };
        assert_eq!(psn, Psn::new(102));
    }

    #[test]
    fn duplicate_write_before_a_later_read_is_not_acked() {
        // WRITE 100, READ 101..=104, SEND 105; the WRITE comes again (the
        // requester went back): no plain ACK, which rxe could take while
        // it receives the READ's responses; the READ's replay acks it.
        let mut r = resp();
        let w = with_reth(req(100, O::RdmaWriteOnly, 8), 0x3000, 8);
        exec(&mut r, &w);
        let rd = with_reth(req(101, O::RdmaReadRequest, 0), 0x1000, 4 * 256);
        assert_eq!(exec(&mut r, &rd), Reply::Read);
        drain(&mut r);
        exec(&mut r, &req(105, O::SendOnly, 1));
        assert_eq!(r.receive(&w, true), Decision::Reply(Reply::None));
        // The READ again: replayed.
        assert_eq!(r.receive(&rd, true), Decision::Reply(Reply::Read));
    }

    #[test]
    fn atomics_are_not_executed_twice() {
        let mut r = resp();
        let mut q = req(100, O::FetchAdd, 0);
        q.atomic = Some(AtomicEth {
            va: 0x3000,
            rkey: 1,
            swap_add: 5,
            compare: 0,
        });
        assert_eq!(
            exec(&mut r, &q),
            Reply::AtomicAck {
                psn: Psn::new(100),
                aeth: ack_aeth(1),
                orig: 50
            }
        );
        // The duplicate is answered from the resource.
        assert_eq!(
            r.receive(&q, true),
            Decision::Reply(Reply::AtomicAck {
                psn: Psn::new(100),
                aeth: ack_aeth(1),
                orig: 50
            })
        );
        // Two more atomics push it out of the ring (max_dest_rd_atomic 2).
        for psn in [101, 102] {
            let mut a = q;
            a.psn = Psn::new(psn);
            exec(&mut r, &a);
        }
        assert_eq!(r.resources().count(), 2);
        assert_eq!(r.receive(&q, true), Decision::Reply(Reply::None));
        // Misaligned atomics are invalid requests.
        let mut m = q;
        m.psn = Psn::new(103);
        m.atomic = Some(AtomicEth {
            va: 0x3004,
            rkey: 1,
            swap_add: 5,
            compare: 0,
        });
        assert!(matches!(
            r.receive(&m, true),
            Decision::Reply(Reply::FatalNak { .. })
        ));
    }

    #[test]
    fn failures_are_fatal() {
        let mut r = resp();
        let mut q = req(100, O::RdmaWriteOnly, 4);
        q.reth = Some(Reth {
            va: 0,
            rkey: 1,
            dma_len: 4,
        });
        let Decision::Execute(w) = r.receive(&q, true) else {
            panic!()
        };
        assert_eq!(
            r.commit(&w, Outcome::Failed(NakCode::RemoteAccessError)),
            Reply::FatalNak {
                psn: Psn::new(100),
                aeth: Aeth {
                    syndrome: Syndrome::Nak(NakCode::RemoteAccessError),
                    msn: 0
                }
            }
        );
        assert!(r.is_error());
        assert_eq!(r.receive(&q, true), Decision::Reply(Reply::None));
        assert_eq!(r.commit(&w, Outcome::Done), Reply::None);
        // Committing twice does nothing the second time.
        let mut r = resp();
        let Decision::Execute(w) = r.receive(&req(100, O::SendOnly, 0), true) else {
            panic!()
        };
        assert_ne!(r.commit(&w, Outcome::Done), Reply::None);
        assert_eq!(r.commit(&w, Outcome::Done), Reply::None);
        assert_eq!(r.epsn(), Psn::new(101));
    }
}
