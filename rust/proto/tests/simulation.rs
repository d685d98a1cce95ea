//! End-to-end simulation: a requester (SendQueue + completer) and a
//! responder exchanging real RoCE packets (built with `packet::build`,
//! parsed with `Packet::parse`) over a seeded lossy, reordering and
//! duplicating channel, with retransmit and RNR timers.
//!
//! Checked per run: every work request completes successfully and in
//! order; every SEND (and WRITE with immediate) is delivered exactly once,
//! in order, byte for byte; READs return exactly the data a sequential
//! model predicts; atomics return the model's original values and
//! execute exactly once (final memory equals the model); and
//! failure paths (retry and RNR exhaustion, remote access errors) complete
//! with the right status and flush the rest.
//!
//! Page faults (on-demand paging): with `faults` set, memory accesses on
//! both sides find their page absent at random, as after an invalidation.
//! The responder pauses on the request (or READ response) that faulted and
//! resumes once the fault is resolved some ticks later; the requester
//! holds the request packet it could not build, and the completer places a
//! response's data before handing the response to the engine, deferring
//! it while its page is absent. Everything above must hold unchanged, and
//! no request may fail or be retried for a fault.

use std::collections::HashMap;

mod common;
use common::Rng;

use sroce_proto::aeth::{NakCode, Syndrome};
use sroce_proto::packet::{build, packet_len};
use sroce_proto::{
    Action, Aeth, AtomicAckEth, AtomicEth, Bth, Decision, ExtHeader, Headers, Ieth, ImmDt, Mtu,
    Opcode, Operation, Outcome, Packet, Psn, Reply, Request, RequestPacket, RequesterConfig,
    Responder, ResponderConfig, Response, Reth, SendQueue, SendWqe, Transport, WcStatus, WorkKind,
    WqeOp,
};

const QPN: u32 = 0x11;
const RKEY: u32 = 0xABCD;
const BASE: u64 = 0x7000_0000;
const MEM: usize = 64 * 1024;
const COUNTERS: u64 = (MEM - 64) as u64; // 8 atomic counters at the end

#[derive(Clone, Copy)]
struct ChannelCfg {
    loss: u32,
    dup: u32,
    delay: u64,
    jitter: u64,
}

/// One direction of the network.
struct Channel {
    cfg: ChannelCfg,
    q: Vec<(u64, u64, Vec<u8>)>,
    seq: u64,
    sent: u64,
}

impl Channel {
    fn new(cfg: ChannelCfg) -> Self {
        Channel {
            cfg,
            q: Vec::new(),
            seq: 0,
            sent: 0,
        }
    }
    fn send(&mut self, now: u64, pkt: Vec<u8>, rng: &mut Rng) {
        self.sent += 1;
        if rng.chance(self.cfg.loss) {
            return;
        }
        let copies = if rng.chance(self.cfg.dup) { 2 } else { 1 };
        for _ in 0..copies {
            let at = now + self.cfg.delay + rng.below(self.cfg.jitter + 1);
            self.seq += 1;
            self.q.push((at, self.seq, pkt.clone()));
        }
    }
    fn next_time(&self) -> Option<u64> {
        self.q.iter().map(|e| e.0).min()
    }
    fn due(&mut self, now: u64) -> Vec<Vec<u8>> {
        let mut due: Vec<_> = Vec::new();
        let mut i = 0;
        while i < self.q.len() {
            if self.q[i].0 <= now {
                due.push(self.q.swap_remove(i));
            } else {
                i += 1;
            }
        }
        due.sort_by_key(|e| (e.0, e.1));
        due.into_iter().map(|e| e.2).collect()
    }
}

#[derive(Clone, Debug)]
struct Op {
    op: WqeOp,
    /// Local data (SEND/WRITE source; READ destination).
    local: Vec<u8>,
    len: u32,
    /// Offset into remote memory (WRITE/READ/atomic).
    remote: u64,
    rkey: u32,
    imm: u32,
    swap_add: u64,
    compare: u64,
    fence: bool,
    /// Whether its completion is wanted (the requester may leave the ACK
    /// of an unsignaled SEND or WRITE to a later packet or a probe).
    signaled: bool,
}

fn build_pkt(h: &Headers, payload: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; packet_len(h.bth.opcode, payload.len()).unwrap()];
    let n = build(h, payload, &mut buf).unwrap();
    assert_eq!(n, buf.len());
    buf
}

fn request_bytes(w: &Op, p: &RequestPacket) -> Vec<u8> {
    let opcode = Opcode::new(Transport::Rc, p.operation);
    let mut bth = Bth::new(opcode, QPN, p.psn);
    bth.ack_req = p.ack_req;
    let mut h = Headers::new(bth);
    let va = BASE + w.remote;
    if let Some(r) = p.reth {
        h.reth = Some(Reth {
            va: va + u64::from(r.offset),
            rkey: w.rkey,
            dma_len: r.dma_len,
        });
    }
    let ext = opcode.ext_headers();
    if ext.contains(ExtHeader::AtomicEth) {
        h.atomic_eth = Some(AtomicEth {
            va,
            rkey: w.rkey,
            swap_add: w.swap_add,
            compare: w.compare,
        });
    }
    if ext.contains(ExtHeader::ImmDt) {
        h.immdt = Some(ImmDt(w.imm.to_be_bytes()));
    }
    if ext.contains(ExtHeader::Ieth) {
        h.ieth = Some(Ieth { rkey: w.imm });
    }
    let (o, l) = (p.offset as usize, p.payload_len as usize);
    let payload = if l == 0 { &[][..] } else { &w.local[o..o + l] };
    build_pkt(&h, payload)
}

fn response_bytes(
    op: Operation,
    psn: Psn,
    aeth: Option<Aeth>,
    orig: Option<u64>,
    payload: &[u8],
) -> Vec<u8> {
    let mut h = Headers::new(Bth::new(Opcode::new(Transport::Rc, op), QPN, psn));
    h.aeth = aeth;
    h.atomic_ack_eth = orig.map(|orig| AtomicAckEth { orig });
    build_pkt(&h, payload)
}

/// What the receiving side saw complete.
#[derive(Clone, Debug, PartialEq)]
enum Received {
    Send {
        data: Vec<u8>,
        imm: Option<u32>,
        inv: Option<u32>,
    },
    WriteImm {
        imm: u32,
    },
}

struct ResponderNode {
    resp: Responder<8>,
    mem: Vec<u8>,
    recv_credits: u32,
    current: Option<Vec<u8>>,
    received: Vec<Received>,
    executed_atomics: u32,
    executed_atomic_writes: u32,
    rnr_sent: u32,
    replayed_atomics: u32,
    replayed_reads: u32,
    seq_naks: u32,
    /// Requests received and not yet taken (the driver's rx queue).
    backlog: std::collections::VecDeque<Vec<u8>>,
    /// Page faults: chance per access (per mille), how long one takes to
    /// resolve, the resolution pending, and how many there were.
    faults: Faults,
}

/// Random page faults of one side's memory.
struct Faults {
    rng: Rng,
    per_mille: u32,
    delay: u64,
    until: Option<u64>,
    count: u32,
}

impl Faults {
    fn new(seed: u64, per_mille: u32, delay: u64) -> Self {
        Faults {
            rng: Rng(seed),
            per_mille,
            delay,
            until: None,
            count: 0,
        }
    }

    /// Whether an access now finds its page absent; if so the fault is
    /// resolved `delay` ticks from `now`.
    fn hit(&mut self, now: u64) -> bool {
        if self.per_mille == 0 || !self.rng.chance(self.per_mille) {
            return false;
        }
        self.count += 1;
        self.until = Some(now + self.delay);
        true
    }

    /// Whether a pending fault was resolved by `now` (then it is gone).
    fn resolved(&mut self, now: u64) -> bool {
        if self.until.is_some_and(|t| t <= now) {
            self.until = None;
            return true;
        }
        false
    }
}

/// READ response packets the node sends per pass, and requests it takes
/// per pass, as the driver's work item does (small, so that duplicates
/// arrive while responses are queued).
const RESPONSES_PER_PASS: u32 = 3;
const REQUESTS_PER_PASS: u32 = 4;

impl ResponderNode {
    fn range_ok(&self, va: u64, rkey: u32, len: u32) -> bool {
        rkey == RKEY && va >= BASE && va - BASE + u64::from(len) <= MEM as u64
    }

    /// Whether a pass has work: queued responses or requests.
    fn busy(&self) -> bool {
        self.resp.read_responses_queued() || !self.backlog.is_empty() || self.faults.until.is_some()
    }

    /// One pass of the driver's work item: queued READ responses, then
    /// requests until one must wait for responses, within the budgets.
    fn run(&mut self, now: u64, arrived: Vec<Vec<u8>>, out: &mut Vec<Vec<u8>>) {
        self.backlog.extend(arrived);
        if self.faults.resolved(now) {
            assert!(self.resp.is_paused());
            self.resp.resume();
        }
        let mut budget = RESPONSES_PER_PASS;
        self.send_read_responses(now, &mut budget, out);
        let mut taken = 0;
        while taken < REQUESTS_PER_PASS {
            let Some(b) = self.backlog.pop_front() else {
                break;
            };
            if self.handle(now, &b, out) {
                taken += 1;
                continue;
            }
            // It waits for the queued responses (send them, then offer it
            // again, next pass if the budget ran out) or for a page fault.
            self.backlog.push_front(b);
            self.send_read_responses(now, &mut budget, out);
            if self.resp.read_responses_queued() || self.resp.is_paused() {
                break;
            }
        }
        self.send_read_responses(now, &mut budget, out);
    }

    fn send_read_responses(&mut self, now: u64, budget: &mut u32, out: &mut Vec<Vec<u8>>) {
        while *budget > 0 {
            let Some(p) = self.resp.next_read_response() else {
                break;
            };
            if p.len > 0 && self.faults.hit(now) {
                self.resp.hold_read_response(&p);
                assert!(self.resp.is_paused());
                break;
            }
            *budget -= 1;
            // An empty response (an atomic write's) reads nothing.
            let data = if p.len == 0 {
                &[][..]
            } else {
                let o = (p.va - BASE) as usize;
                &self.mem[o..o + p.len as usize]
            };
            out.push(response_bytes(p.operation, p.psn, p.aeth, None, data));
        }
    }

    /// Takes one request; false if it must wait for queued responses.
    fn handle(&mut self, now: u64, bytes: &[u8], out: &mut Vec<Vec<u8>>) -> bool {
        let pkt = Packet::parse(bytes).unwrap();
        let req = Request::from_headers(&pkt.headers, pkt.payload.len()).unwrap();
        let reply = match self.resp.receive(&req, self.recv_credits > 0) {
            Decision::Defer => return false,
            Decision::Reply(r) => {
                match r {
                    Reply::AtomicAck { .. } => self.replayed_atomics += 1,
                    Reply::Read => self.replayed_reads += 1,
                    Reply::Ack { aeth, .. }
                        if aeth.syndrome == Syndrome::Nak(NakCode::PsnSequenceError) =>
                    {
                        self.seq_naks += 1
                    }
                    _ => {}
                }
                r
            }
            Decision::Execute(w) => {
                // Memory is touched by everything but a READ request
                // (whose data is read per response packet).
                let touches = !matches!(w.kind, WorkKind::Read { .. });
                let outcome = if touches && self.faults.hit(now) {
                    Outcome::PageFault
                } else {
                    self.execute(&w.kind, &pkt)
                };
                let reply = self.resp.commit(&w, outcome);
                if reply == Reply::Paused {
                    return false;
                }
                reply
            }
        };
        self.send_reply(reply, out);
        true
    }

    fn execute(&mut self, kind: &WorkKind, pkt: &Packet<'_>) -> Outcome {
        let h = &pkt.headers;
        match *kind {
            WorkKind::Send {
                offset,
                first,
                last,
                ..
            } => {
                if first {
                    assert!(self.current.is_none());
                    assert!(self.recv_credits > 0);
                    self.recv_credits -= 1;
                    self.current = Some(Vec::new());
                }
                let cur = self.current.as_mut().unwrap();
                assert_eq!(cur.len(), offset as usize, "SEND data placed in order");
                cur.extend_from_slice(pkt.payload);
                if last {
                    let data = self.current.take().unwrap();
                    self.received.push(Received::Send {
                        data,
                        imm: h.immdt.map(|i| u32::from_be_bytes(i.0)),
                        inv: h.ieth.map(|i| i.rkey),
                    });
                }
                Outcome::Done
            }
            WorkKind::Write {
                va,
                rkey,
                len,
                first,
                dma_len,
                imm,
            } => {
                if first && !self.range_ok(va, rkey, dma_len) {
                    return Outcome::Failed(NakCode::RemoteAccessError);
                }
                if !self.range_ok(va, rkey, len) {
                    return Outcome::Failed(NakCode::RemoteAccessError);
                }
                let o = (va - BASE) as usize;
                self.mem[o..o + len as usize].copy_from_slice(pkt.payload);
                if imm {
                    assert!(self.recv_credits > 0);
                    self.recv_credits -= 1;
                    self.received.push(Received::WriteImm {
                        imm: u32::from_be_bytes(h.immdt.unwrap().0),
                    });
                }
                Outcome::Done
            }
            WorkKind::Read { va, rkey, len } => {
                if self.range_ok(va, rkey, len) {
                    Outcome::Done
                } else {
                    Outcome::Failed(NakCode::RemoteAccessError)
                }
            }
            WorkKind::Atomic {
                va,
                rkey,
                compare_swap,
                swap_add,
                compare,
            } => {
                if !self.range_ok(va, rkey, 8) {
                    return Outcome::Failed(NakCode::RemoteAccessError);
                }
                let o = (va - BASE) as usize;
                let orig = u64::from_le_bytes(self.mem[o..o + 8].try_into().unwrap());
                let new = if compare_swap {
                    if orig == compare {
                        swap_add
                    } else {
                        orig
                    }
                } else {
                    orig.wrapping_add(swap_add)
                };
                self.mem[o..o + 8].copy_from_slice(&new.to_le_bytes());
                self.executed_atomics += 1;
                Outcome::Atomic(orig)
            }
            WorkKind::AtomicWrite { va, rkey } => {
                if !self.range_ok(va, rkey, 8) {
                    return Outcome::Failed(NakCode::RemoteAccessError);
                }
                let o = (va - BASE) as usize;
                self.mem[o..o + 8].copy_from_slice(pkt.payload);
                self.executed_atomic_writes += 1;
                Outcome::Done
            }
        }
    }

    fn send_reply(&mut self, reply: Reply, out: &mut Vec<Vec<u8>>) {
        match reply {
            Reply::None => {}
            Reply::Ack { psn, aeth } | Reply::FatalNak { psn, aeth } => {
                if matches!(aeth.syndrome, Syndrome::RnrNak { .. }) {
                    self.rnr_sent += 1;
                }
                out.push(response_bytes(
                    Operation::Acknowledge,
                    psn,
                    Some(aeth),
                    None,
                    &[],
                ))
            }
            Reply::AtomicAck { psn, aeth, orig } => out.push(response_bytes(
                Operation::AtomicAcknowledge,
                psn,
                Some(aeth),
                Some(orig),
                &[],
            )),
            // Sent by the pass, within its budget.
            Reply::Read => {}
            Reply::Dropped | Reply::Fatal | Reply::Paused => {
                panic!("an RC responder answered {reply:?}")
            }
        }
    }
}

struct Scenario {
    seed: u64,
    mtu: Mtu,
    ops: Vec<Op>,
    req_ch: ChannelCfg,
    resp_ch: ChannelCfg,
    cfg: RequesterConfig,
    max_dest_rd_atomic: u8,
    min_rnr_timer: u8,
    initial_psn: Psn,
    /// Receive WQEs granted at start, then one every `credit_every` ticks
    /// (0: `initial_credits` only).
    initial_credits: u32,
    credit_every: u64,
    rto: u64,
    /// Ticks a pause in sending leaves packets unrequested before the
    /// driver probes for their ACK.
    ack_delay: u64,
    max_time: u64,
    /// Page faults per mille of memory accesses on each side (0: none).
    faults: u32,
}

struct Outcome2 {
    completions: Vec<(u32, WcStatus)>,
    reads: HashMap<u32, Vec<u8>>,
    atomics: HashMap<u32, u64>,
    responder: ResponderNode,
    time: u64,
    retransmits: u64,
    /// Probes sent for the ACK of unrequested packets.
    ack_probes: u64,
    /// New packets that asked because the wait for a request was over.
    ack_riders: u64,
    /// Packets from the responder to the requester.
    responses: u64,
    /// READ requests retried from the middle of the READ.
    read_resumes: u64,
    packets: u64,
    /// Page faults of the requester's packets.
    requester_faults: u32,
    /// Page faults of the completer's placements.
    completer_faults: u32,
}

fn run(s: &Scenario) -> Outcome2 {
    let mut rng = Rng(s.seed ^ 0x5EED);
    let mut sq: SendQueue<16> = SendQueue::new(s.cfg, s.initial_psn);
    let mut node = ResponderNode {
        resp: Responder::new(
            ResponderConfig {
                mtu: s.mtu,
                max_dest_rd_atomic: s.max_dest_rd_atomic,
                min_rnr_timer: s.min_rnr_timer,
                acknowledged: true,
            },
            s.initial_psn,
        ),
        mem: (0..MEM).map(|i| (i * 7 % 251) as u8).collect(),
        recv_credits: s.initial_credits,
        current: None,
        received: Vec::new(),
        executed_atomics: 0,
        executed_atomic_writes: 0,
        rnr_sent: 0,
        replayed_atomics: 0,
        replayed_reads: 0,
        seq_naks: 0,
        backlog: Default::default(),
        faults: Faults::new(s.seed ^ 0xFA17, s.faults, 5),
    };
    let mut local_faults = Faults::new(s.seed ^ 0x10CA1, s.faults, 5);
    let mut completer_faults = Faults::new(s.seed ^ 0xC0DE, s.faults, 5);
    // Responses waiting for their page (the completer's deferred ones).
    let mut deferred: std::collections::VecDeque<Vec<u8>> = Default::default();
    let mut to_resp = Channel::new(s.req_ch);
    let mut to_req = Channel::new(s.resp_ch);
    let mut reads: HashMap<u32, Vec<u8>> = HashMap::new();
    let mut atomics = HashMap::new();
    let mut completions = Vec::new();
    let mut next_post = 0usize;
    let mut rtx: Option<u64> = None;
    let mut rnr: Option<u64> = None;
    let mut ack_request_at: Option<u64> = None;
    let mut ack_probes = 0u64;
    let mut ack_riders = 0u64;
    let mut next_credit = if s.credit_every == 0 {
        u64::MAX
    } else {
        s.credit_every
    };
    let mut retransmits = 0u64;
    let mut read_resumes = 0u64;
    let mut now = 0u64;
    let mut fatal = false;

    while completions.len() < s.ops.len() {
        assert!(
            now <= s.max_time,
            "seed {}: stuck at t={now}, {} of {} complete",
            s.seed,
            completions.len(),
            s.ops.len()
        );
        // Post.
        while next_post < s.ops.len() && sq.has_room() {
            let o = &s.ops[next_post];
            sq.post(SendWqe {
                tag: next_post as u32,
                op: o.op,
                len: o.len,
                fence: o.fence,
                signaled: o.signaled,
            })
            .unwrap();
            next_post += 1;
        }
        // The wait for an ACK request is over: the next new packet asks
        // (the driver's pass; if none goes out, the probe below).
        let mut asks_next = false;
        if sq.wants_ack_request() && ack_request_at.is_some_and(|t| t <= now) {
            ack_request_at = None;
            sq.ask_with_next_packet();
            asks_next = true;
        }
        // Send.
        if local_faults.resolved(now) {
            assert!(sq.is_held());
            sq.resume();
        }
        while let Some(p) = sq.next_packet() {
            // A packet with data read from local memory may fault.
            let reads_local = p.payload_len > 0 && !p.operation.is_response();
            if reads_local && local_faults.hit(now) {
                assert!(sq.hold(&p), "an RC queue holds a packet");
                assert!(sq.next_packet().is_none(), "nothing is sent while held");
                break;
            }
            if p.retransmit {
                retransmits += 1;
            }
            if p.reth.is_some_and(|r| r.offset > 0) {
                read_resumes += 1;
            }
            let w = &s.ops[p.tag as usize];
            to_resp.send(now, request_bytes(w, &p), &mut rng);
        }
        // Packets no ACK was asked for: a probe when no new packet asked
        // (none while a packet is held: it asks when it goes).
        if sq.asks_with_next_packet() && sq.wants_ack_request() && !sq.is_held() {
            let p = sq.ack_request_packet().expect("the newest packet");
            assert!(p.ack_req && p.retransmit);
            assert!(!sq.wants_ack_request(), "a probe asks for everything sent");
            ack_probes += 1;
            to_resp.send(now, request_bytes(&s.ops[p.tag as usize], &p), &mut rng);
        } else if asks_next && !sq.asks_with_next_packet() {
            ack_riders += 1;
        }
        // The wait runs from the first moment an ACK is wanted; packets
        // that do not ask leave it as it is.
        if !sq.wants_ack_request() {
            ack_request_at = None;
        } else if ack_request_at.is_none() {
            ack_request_at = Some(now + s.ack_delay);
        }
        if sq.has_unacked() && !sq.waiting_rnr() && rtx.is_none() {
            rtx = Some(now + s.rto);
        }
        // Responder.
        let mut out = Vec::new();
        node.run(now, to_resp.due(now), &mut out);
        for b in out {
            to_req.send(now, b, &mut rng);
        }
        // Completer.
        let mut actions = Vec::new();
        let _ = completer_faults.resolved(now);
        deferred.extend(to_req.due(now));
        while let Some(b) = deferred.pop_front() {
            if completer_faults.until.is_some() {
                // Waiting for a page: this one and all after it.
                deferred.push_front(b);
                break;
            }
            let pkt = Packet::parse(&b).unwrap();
            let r = Response::from_headers(&pkt.headers, pkt.payload.len()).unwrap();
            // The data is placed before the engine takes the response.
            let placed = sq.placement(&r);
            if placed.is_some() && completer_faults.hit(now) {
                deferred.push_front(b);
                break;
            }
            if let Some((tag, offset, len)) = placed {
                if let Some(orig) = pkt.headers.atomic_ack_eth.map(|a| a.orig) {
                    assert_eq!((offset, len), (0, 8));
                    assert!(atomics.insert(tag, orig).is_none(), "atomic result twice");
                } else {
                    let buf = reads
                        .entry(tag)
                        .or_insert_with(|| vec![0xEE; s.ops[tag as usize].len as usize]);
                    buf[offset as usize..(offset + len) as usize].copy_from_slice(pkt.payload);
                }
            }
            let a = sq.on_response(&r);
            // The engine's decision is the one `placement` predicted.
            let took = match a {
                Action::PlaceReadData { tag, offset, len } => Some((tag, offset, len)),
                Action::AtomicResult { tag, .. } => Some((tag, 0, 8)),
                _ => None,
            };
            assert_eq!(took, placed, "seed {}: placement of {r:?}", s.seed);
            match a {
                Action::RnrWait { usec } => rnr = Some(now + u64::from(usec)),
                Action::Fatal { .. } => fatal = true,
                _ => {}
            }
            actions.push(a);
        }
        // Timers.
        if rtx.is_some_and(|t| t <= now) {
            rtx = None;
            actions.push(sq.on_timeout());
            if matches!(actions.last(), Some(Action::Fatal { .. })) {
                fatal = true;
            }
        }
        if rnr.is_some_and(|t| t <= now) {
            rnr = None;
            actions.push(sq.on_rnr_timer());
        }
        if actions.iter().any(|a| *a != Action::Ignore) {
            rtx = if sq.has_unacked() && !sq.waiting_rnr() {
                Some(now + s.rto)
            } else {
                None
            };
        }
        if next_credit <= now {
            node.recv_credits += 1;
            next_credit = now + s.credit_every;
        }
        while let Some(c) = sq.pop_completion() {
            assert_eq!(c.tag as usize, completions.len(), "completions in order");
            completions.push((c.tag, c.status));
        }
        if fatal {
            // Nothing more will succeed; flush everything not yet posted.
            while next_post < s.ops.len() && sq.has_room() {
                let o = &s.ops[next_post];
                sq.post(SendWqe {
                    tag: next_post as u32,
                    op: o.op,
                    len: o.len,
                    fence: o.fence,
                    signaled: o.signaled,
                })
                .unwrap();
                next_post += 1;
            }
            while let Some(c) = sq.pop_completion() {
                completions.push((c.tag, c.status));
            }
            if next_post < s.ops.len() {
                continue;
            }
        }
        if completions.len() == s.ops.len() {
            break;
        }
        // Advance time to the next event.
        // Acknowledgements may have unblocked sending (window, fence,
        // max_rd_atomic): go round again at the same time.
        let changed = actions.iter().any(|a| *a != Action::Ignore);
        let can_send = changed || (next_post < s.ops.len() && sq.has_room());
        let next = [
            to_resp.next_time(),
            to_req.next_time(),
            rtx,
            rnr,
            ack_request_at,
            (s.credit_every != 0).then_some(next_credit),
            node.busy().then_some(now + 1),
            local_faults.until,
            completer_faults.until,
            (!deferred.is_empty()).then_some(now + 1),
        ]
        .into_iter()
        .flatten()
        .min();
        now = if can_send {
            now
        } else {
            match next {
                Some(t) => t.max(now + 1),
                None => panic!(
                    "seed {}: deadlock at t={now}: nothing pending, {} of {} complete: {:#?}",
                    s.seed,
                    completions.len(),
                    s.ops.len(),
                    sq
                ),
            }
        };
    }
    Outcome2 {
        completions,
        reads,
        atomics,
        responder: node,
        time: now,
        retransmits,
        ack_probes,
        ack_riders,
        responses: to_req.sent,
        read_resumes,
        packets: to_resp.sent + to_req.sent,
        requester_faults: local_faults.count,
        completer_faults: completer_faults.count,
    }
}

/// A random workload with a sequential model of the remote memory.
struct Model {
    ops: Vec<Op>,
    expected_reads: HashMap<u32, Vec<u8>>,
    expected_atomics: HashMap<u32, u64>,
    expected_received: Vec<Received>,
    final_mem: Vec<u8>,
}

fn workload(rng: &mut Rng, n: usize, max_len: u32) -> Model {
    let mut mem: Vec<u8> = (0..MEM).map(|i| (i * 7 % 251) as u8).collect();
    let mut ops = Vec::new();
    let mut expected_reads = HashMap::new();
    let mut expected_atomics = HashMap::new();
    let mut expected_received = Vec::new();
    // READ ranges seen so far: a later WRITE or atomic overlapping one is
    // fenced, since a READ replayed after it would see its data (allowed
    // RC semantics, but not what a sequential model predicts).
    let mut read_ranges: Vec<(u64, u64)> = Vec::new();
    let pick_len = |rng: &mut Rng| -> u32 {
        match rng.below(6) {
            0 => 0,
            1 => rng.below(64) as u32,
            2 => (rng.below(8) as u32 + 1) * 256,
            _ => rng.below(u64::from(max_len) + 1) as u32,
        }
    };
    for tag in 0..n {
        let kind = rng.below(10);
        let mut o = Op {
            op: WqeOp::Send,
            local: Vec::new(),
            len: 0,
            remote: 0,
            rkey: RKEY,
            imm: rng.next() as u32,
            swap_add: 0,
            compare: 0,
            fence: false,
            signaled: true,
        };
        let overlaps =
            |a: u64, l: u64, rr: &Vec<(u64, u64)>| rr.iter().any(|&(b, m)| a < b + m && b < a + l);
        match kind {
            0..=3 => {
                o.op = [WqeOp::Send, WqeOp::SendWithImm, WqeOp::SendWithInv][rng.below(3) as usize];
                o.len = pick_len(rng);
                o.local = (0..o.len).map(|_| rng.next() as u8).collect();
                expected_received.push(Received::Send {
                    data: o.local.clone(),
                    imm: (o.op == WqeOp::SendWithImm).then_some(o.imm),
                    inv: (o.op == WqeOp::SendWithInv).then_some(o.imm),
                });
            }
            4..=5 => {
                o.op = if rng.chance(300) {
                    WqeOp::WriteWithImm
                } else {
                    WqeOp::Write
                };
                o.len = pick_len(rng);
                o.remote = rng.below(COUNTERS - u64::from(o.len) + 1);
                o.local = (0..o.len).map(|_| rng.next() as u8).collect();
                o.fence = overlaps(o.remote, u64::from(o.len), &read_ranges);
                let r = o.remote as usize;
                mem[r..r + o.len as usize].copy_from_slice(&o.local);
                if o.op == WqeOp::WriteWithImm {
                    expected_received.push(Received::WriteImm { imm: o.imm });
                }
            }
            6..=7 => {
                o.op = WqeOp::Read;
                o.len = pick_len(rng);
                // Sometimes read the counters too.
                o.remote = if rng.chance(200) {
                    COUNTERS
                } else {
                    rng.below(MEM as u64 - u64::from(o.len) + 1)
                };
                if o.remote + u64::from(o.len) > MEM as u64 {
                    o.remote = MEM as u64 - u64::from(o.len);
                }
                let r = o.remote as usize;
                expected_reads.insert(tag as u32, mem[r..r + o.len as usize].to_vec());
                read_ranges.push((o.remote, u64::from(o.len)));
            }
            _ => {
                o.len = 8;
                o.remote = COUNTERS + 8 * rng.below(8);
                o.fence = overlaps(o.remote, 8, &read_ranges);
                let r = o.remote as usize;
                if rng.chance(250) {
                    // An atomic write: the 8 bytes it carries, once.
                    o.op = WqeOp::AtomicWrite;
                    o.local = rng.next().to_le_bytes().to_vec();
                    mem[r..r + 8].copy_from_slice(&o.local);
                    ops.push(o);
                    continue;
                }
                let orig = u64::from_le_bytes(mem[r..r + 8].try_into().unwrap());
                let new = if rng.chance(500) {
                    o.op = WqeOp::FetchAdd;
                    o.swap_add = rng.below(1000) + 1;
                    orig.wrapping_add(o.swap_add)
                } else {
                    o.op = WqeOp::CompareSwap;
                    o.compare = if rng.chance(600) { orig } else { rng.next() };
                    o.swap_add = rng.next();
                    if orig == o.compare {
                        o.swap_add
                    } else {
                        orig
                    }
                };
                mem[r..r + 8].copy_from_slice(&new.to_le_bytes());
                expected_atomics.insert(tag as u32, orig);
            }
        }
        ops.push(o);
    }
    Model {
        ops,
        expected_reads,
        expected_atomics,
        expected_received,
        final_mem: mem,
    }
}

fn scenario(seed: u64, lossy: bool, rnr: bool) -> (Scenario, Model) {
    let mut rng = Rng(seed);
    let mtu = Mtu::ALL[rng.below(5) as usize];
    let n = 60 + rng.below(60) as usize;
    let model = workload(&mut rng, n, 3 * mtu.bytes() + 100);
    let ch = |rng: &mut Rng| ChannelCfg {
        loss: if lossy { rng.below(120) as u32 } else { 0 },
        dup: if lossy { rng.below(100) as u32 } else { 0 },
        delay: 2 + rng.below(5),
        jitter: if lossy { rng.below(30) } else { 0 },
    };
    let mut cfg = RequesterConfig::new(mtu);
    cfg.max_rd_atomic = 1 + rng.below(4) as u8;
    cfg.retry_cnt = 7;
    cfg.rnr_retry = 7;
    cfg.max_unacked_psns = 4 + rng.below(64) as u32;
    cfg.ack_interval = rng.below(8) as u32;
    // Half the scenarios leave ACKs of unsignaled messages to later ones.
    if rng.chance(500) {
        cfg.ack_coalesce = 1 + rng.below(20) as u32;
    }
    let mut model = model;
    for o in &mut model.ops {
        o.signaled = rng.chance(300);
    }
    let initial_psn = if rng.chance(500) {
        Psn::new((1 << 24) - 1 - rng.below(40) as u32)
    } else {
        Psn::new(rng.next() as u32)
    };
    let s = Scenario {
        seed,
        mtu,
        ops: model.ops.clone(),
        req_ch: ch(&mut rng),
        resp_ch: ch(&mut rng),
        cfg,
        max_dest_rd_atomic: cfg.max_rd_atomic + rng.below(3) as u8,
        min_rnr_timer: 1 + rng.below(6) as u8,
        initial_psn,
        initial_credits: if rnr { 0 } else { 1_000_000 },
        credit_every: if rnr { 20 + rng.below(100) } else { 0 },
        rto: 200,
        ack_delay: 5 + rng.below(60),
        max_time: 50_000_000,
        faults: 0,
    };
    (s, model)
}

fn check(s: &Scenario, m: &Model, o: &Outcome2) {
    let seed = s.seed;
    for (i, &(tag, st)) in o.completions.iter().enumerate() {
        assert_eq!(tag as usize, i, "seed {seed}");
        assert_eq!(
            st,
            WcStatus::Success,
            "seed {seed}: wr {tag} {:?}",
            s.ops[i].op
        );
    }
    assert_eq!(
        o.responder.received.len(),
        m.expected_received.len(),
        "seed {seed}"
    );
    for (i, (got, want)) in o
        .responder
        .received
        .iter()
        .zip(&m.expected_received)
        .enumerate()
    {
        assert_eq!(got, want, "seed {seed}: message {i}");
    }
    for (tag, want) in &m.expected_reads {
        let got = o
            .reads
            .get(tag)
            .cloned()
            .unwrap_or_else(|| vec![0xEE; want.len()]);
        let first_bad = got.iter().zip(want).position(|(a, b)| a != b);
        assert!(
            got.len() == want.len() && first_bad.is_none(),
            "seed {seed}: READ {tag}: {} bytes, want {}, first difference at {first_bad:?}",
            got.len(),
            want.len()
        );
    }
    assert_eq!(o.atomics, m.expected_atomics, "seed {seed}");
    assert_eq!(
        o.responder.executed_atomics as usize,
        m.expected_atomics.len(),
        "seed {seed}: atomics executed exactly once"
    );
    assert_eq!(
        o.responder.executed_atomic_writes as usize,
        m.ops.iter().filter(|w| w.op == WqeOp::AtomicWrite).count(),
        "seed {seed}: atomic writes executed exactly once"
    );
    assert!(o.responder.mem == m.final_mem, "seed {seed}: remote memory");
    assert!(!o.responder.resp.is_error(), "seed {seed}");
}

#[test]
fn reliable_channel() {
    for seed in 0..15 {
        let (s, m) = scenario(seed, false, false);
        let o = run(&s);
        check(&s, &m, &o);
        assert_eq!(
            o.retransmits, 0,
            "seed {seed}: no retransmissions without loss"
        );
    }
}

#[test]
fn lossy_reordering_duplicating_channel() {
    let (mut rtx, mut pkts, mut atomics, mut reads, mut naks, mut resumes) = (0, 0, 0, 0, 0, 0);
    for seed in 100..180 {
        let (s, m) = scenario(seed, true, false);
        let o = run(&s);
        check(&s, &m, &o);
        rtx += o.retransmits;
        pkts += o.packets;
        atomics += o.responder.replayed_atomics;
        reads += o.responder.replayed_reads;
        naks += o.responder.seq_naks;
        resumes += o.read_resumes;
    }
    println!(
        "packets {pkts} retransmitted {rtx} seq NAKs {naks} replayed READs {reads} \
         (resumed mid-READ {resumes}) atomics {atomics}"
    );
    assert!(rtx > 1000, "the channel should force retransmissions");
    assert!(pkts > 10_000);
    assert!(naks > 100, "sequence-error NAKs");
    assert!(reads > 20, "duplicate READs replayed");
    assert!(resumes > 10, "READs retried from their middle");
    assert!(
        atomics > 20,
        "duplicate atomics answered from responder resources"
    );
}

#[test]
fn page_faults_pause_and_resume() {
    let (mut faults, mut requester, mut completer) = (0, 0, 0);
    for seed in 300..340 {
        let lossy = seed % 2 == 1;
        let (mut s, m) = scenario(seed, lossy, seed % 5 == 0);
        s.faults = 20 + (seed % 7) as u32 * 20;
        let o = run(&s);
        check(&s, &m, &o);
        if !lossy && s.credit_every == 0 {
            assert_eq!(
                o.retransmits, 0,
                "seed {seed}: a page fault is a pause, never a retransmission"
            );
        }
        faults += o.responder.faults.count;
        requester += o.requester_faults;
        completer += o.completer_faults;
    }
    assert!(
        faults > 500,
        "responder page faults should occur ({faults})"
    );
    assert!(
        requester > 100 && completer > 100,
        "requester ({requester}) and completer ({completer}) page faults should occur"
    );
}

#[test]
fn receiver_not_ready() {
    let mut rnrs = 0;
    for seed in 200..225 {
        let (s, m) = scenario(seed, seed % 2 == 0, true);
        let o = run(&s);
        check(&s, &m, &o);
        rnrs += o.responder.rnr_sent;
    }
    assert!(rnrs > 50, "RNR NAKs should occur ({rnrs})");
}

fn simple(ops: Vec<Op>, tweak: impl FnOnce(&mut Scenario)) -> Outcome2 {
    let mut s = Scenario {
        seed: 7,
        mtu: Mtu::Mtu1024,
        ops,
        req_ch: ChannelCfg {
            loss: 0,
            dup: 0,
            delay: 3,
            jitter: 0,
        },
        resp_ch: ChannelCfg {
            loss: 0,
            dup: 0,
            delay: 3,
            jitter: 0,
        },
        cfg: RequesterConfig::new(Mtu::Mtu1024),
        max_dest_rd_atomic: 4,
        min_rnr_timer: 1,
        initial_psn: Psn::new(0xFF_FFF0),
        initial_credits: 1000,
        credit_every: 0,
        rto: 100,
        ack_delay: 20,
        max_time: 10_000_000,
        faults: 0,
    };
    tweak(&mut s);
    run(&s)
}

fn send_op(len: u32) -> Op {
    Op {
        op: WqeOp::Send,
        local: vec![0x5A; len as usize],
        len,
        remote: 0,
        rkey: RKEY,
        imm: 0,
        swap_add: 0,
        compare: 0,
        fence: false,
        signaled: true,
    }
}

#[test]
fn retry_exhaustion() {
    let o = simple(vec![send_op(3000), send_op(1)], |s| {
        s.req_ch.loss = 1000;
        s.cfg.retry_cnt = 3;
    });
    assert_eq!(
        o.completions,
        [(0, WcStatus::RetryExcErr), (1, WcStatus::WrFlushErr)]
    );
    // One original transmission plus three retries of the first message
    // (3 packets each at MTU 1024), and of the second.
    assert!(o.retransmits >= 3 * 3);
    assert!(o.time >= 4 * 100);
    // Lost ACKs alone also exhaust the retries.
    let o = simple(vec![send_op(10)], |s| {
        s.resp_ch.loss = 1000;
        s.cfg.retry_cnt = 1;
    });
    assert_eq!(o.completions, [(0, WcStatus::RetryExcErr)]);
    assert_eq!(
        o.responder.received.len(),
        1,
        "delivered once despite retries"
    );
}

#[test]
fn rnr_retry_exhaustion_and_infinite() {
    let o = simple(vec![send_op(10), send_op(10)], |s| {
        s.initial_credits = 0;
        s.cfg.rnr_retry = 2;
    });
    assert_eq!(
        o.completions,
        [(0, WcStatus::RnrRetryExcErr), (1, WcStatus::WrFlushErr)]
    );
    assert_eq!(o.responder.rnr_sent, 3);
    // rnr_retry 7 waits as long as it takes.
    let o = simple(vec![send_op(10), send_op(5000)], |s| {
        s.initial_credits = 0;
        s.credit_every = 5000;
        s.cfg.rnr_retry = 7;
        s.min_rnr_timer = 3; // 30 us
    });
    assert_eq!(
        o.completions,
        [(0, WcStatus::Success), (1, WcStatus::Success)]
    );
    assert!(o.responder.rnr_sent > 100);
}

#[test]
fn remote_access_error_flushes() {
    let mut bad = send_op(100);
    bad.op = WqeOp::Write;
    bad.rkey = RKEY + 1;
    let mut read = send_op(0);
    read.op = WqeOp::Read;
    read.len = 100;
    read.rkey = RKEY + 1;
    for (op, status) in [
        (bad, WcStatus::RemAccessErr),
        (read, WcStatus::RemAccessErr),
    ] {
        let o = simple(vec![send_op(10), op, send_op(10)], |_| {});
        assert_eq!(
            o.completions,
            [
                (0, WcStatus::Success),
                (1, status),
                (2, WcStatus::WrFlushErr)
            ]
        );
        assert!(o.responder.resp.is_error());
        assert_eq!(o.responder.received.len(), 1);
    }
    // A misaligned atomic is an invalid request.
    let mut a = send_op(0);
    a.op = WqeOp::FetchAdd;
    a.len = 8;
    a.remote = 4;
    let o = simple(vec![a], |_| {});
    assert_eq!(o.completions, [(0, WcStatus::RemInvReqErr)]);
}

fn write_op(len: u32, signaled: bool) -> Op {
    Op {
        op: WqeOp::Write,
        signaled,
        ..send_op(len)
    }
}

#[test]
fn unsignaled_writes_share_acks() {
    // 60 one-packet WRITEs, only the 40th signaled, a queue of 16: every
    // 8th packet asks for an ACK (half the queue), and the signaled one;
    // the 4 after the last that asked get their ACK from one probe. Every
    // WRITE completes, none is resent.
    let ops: Vec<Op> = (0..60).map(|i| write_op(64, i == 39)).collect();
    let o = simple(ops, |s| s.cfg.ack_coalesce = 100);
    assert_eq!(o.completions.len(), 60);
    assert!(o.completions.iter().all(|&(_, st)| st == WcStatus::Success));
    assert_eq!(o.retransmits, 0);
    assert_eq!(o.ack_probes, 1, "only the tail after the last request");
    assert_eq!(o.ack_riders, 0, "no wait ran out while the stream went on");
    assert_eq!(o.responses, 60 / 8 + 1, "one ACK per request and the probe");
    // As rxe: every message asks.
    let ops: Vec<Op> = (0..60).map(|i| write_op(64, i == 39)).collect();
    let o = simple(ops, |_| {});
    assert_eq!((o.responses, o.ack_probes), (60, 0));
}

#[test]
fn unrequested_tail_is_acknowledged_before_the_timeout() {
    // Three unsignaled WRITEs and nothing after them: the probe, not the
    // transport timer, brings their ACK.
    let ops: Vec<Op> = (0..3).map(|_| write_op(100, false)).collect();
    let o = simple(ops, |s| {
        s.cfg.ack_coalesce = 16;
        s.rto = 1000;
    });
    assert_eq!(o.completions.len(), 3);
    assert_eq!((o.retransmits, o.ack_probes, o.responses), (0, 1, 1));
    assert!(o.time < 1000, "done at t={}", o.time);
}
