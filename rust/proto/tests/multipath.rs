//! The multipath transport (`roce::multipath`) end to end and by property.
//!
//! - A two-path simulation in the style of `simulation.rs`: a requester
//!   (SendQueue + completer) and a responder exchanging real packets over
//!   two one-way FIFO paths of different delay (sessions 0 and 1, the
//!   messages on each in turn) and a reply path, each with seeded loss.
//!   With multipath the responder holds out-of-order requests in a
//!   `ReorderBuffer` and answers each arrival batch with a SACK (a plain
//!   ACK when it holds nothing); the requester resends what its
//!   `Scoreboard` reports lost with `SendQueue::packet_at`. The same
//!   workload also runs with plain go-back-N (the engine alone).
//! - The same simulation with the sessions' congestion windows
//!   (`PathWindow`) used as the kernel uses them: new packets only where
//!   there is room, the session that drains first, deliveries and losses
//!   from the scoreboard feeding the windows (`run_windowed`), and with
//!   the sessions' own retransmit timers (`QuietTimer`) finding lost
//!   tails before the transport timer.
//! - Property tests of `ReorderBuffer` and `Scoreboard` against models
//!   (what it reports lost; its per-session in-flight and delivered
//!   counts against a scan), of `PathWindow` and of `QuietTimer`.
//! - The hello on the wire, as a plain responder sees it.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

mod common;
use common::Rng;
use proptest::prelude::*;

use sroce_proto::aeth::{NakCode, Syndrome};
use sroce_proto::multipath::ext::{self, Caps, ExtKind, ExtPacket, Sack, SackBits};
use sroce_proto::multipath::quiet::QuietTimer;
use sroce_proto::multipath::reorder::{Held, Offer, ReorderBuffer};
use sroce_proto::multipath::scoreboard::{Entry, Scoreboard};
use sroce_proto::multipath::window::{drain_time, PathWindow};
use sroce_proto::packet::{build, packet_len};
use sroce_proto::{
    Action, Aeth, AtomicAckEth, AtomicEth, Bth, Decision, ExtHeader, Headers, ImmDt, Mtu, Opcode,
    Operation, Outcome, Packet, Psn, Reply, Request, RequestPacket, RequesterConfig, Responder,
    ResponderConfig, Response, ResponseKind, Reth, SendQueue, SendWqe, Transport, WcStatus,
    WorkKind, WqeOp,
};

const QPN: u32 = 0x11;
const RKEY: u32 = 0xABCD;
const BASE: u64 = 0x7000_0000;
const MEM: usize = 32 * 1024;
/// Eight atomic counters at the end of the remote memory.
const COUNTERS: u64 = (MEM - 64) as u64;
/// The reorder window and the scoreboard's, in PSNs.
const W: usize = 128;
/// An ACK syndrome without credit information.
const ACK: Syndrome = Syndrome::Ack { credits: 0x1F };

// ---------------------------------------------------------------- workload

#[derive(Clone, Debug, Default)]
struct Op {
    op: Option<WqeOp>,
    /// SEND/WRITE source.
    local: Vec<u8>,
    len: u32,
    /// Offset in remote memory (WRITE, READ, atomic).
    remote: u64,
    imm: u32,
    swap_add: u64,
    compare: u64,
    fence: bool,
}

/// A workload and what a sequential execution of it gives.
#[derive(Default)]
struct Model {
    ops: Vec<Op>,
    received: Vec<(Vec<u8>, Option<u32>)>,
    reads: HashMap<u32, Vec<u8>>,
    atomics: HashMap<u32, u64>,
    mem: Vec<u8>,
}

fn initial_mem() -> Vec<u8> {
    (0..MEM).map(|i| (i * 7 % 251) as u8).collect()
}

/// SENDs and WRITEs (often several packets), READs and atomics.
fn workload(rng: &mut Rng, n: usize, max_len: u32) -> Model {
    let mut m = Model {
        mem: initial_mem(),
        ..Model::default()
    };
    // A WRITE overlapping an earlier READ is fenced: a READ replayed after
    // it would see its data (allowed, but not the sequential model).
    let mut read_ranges: Vec<(u64, u64)> = Vec::new();
    for tag in 0..n as u32 {
        let len = match rng.below(5) {
            0 => rng.below(64) as u32,
            1 => (rng.below(4) as u32 + 1) * (max_len / 4),
            _ => rng.below(u64::from(max_len) + 1) as u32,
        };
        let remote = rng.below(COUNTERS - u64::from(len) + 1);
        let mut o = Op {
            local: (0..len).map(|_| rng.next() as u8).collect(),
            len,
            remote,
            imm: rng.next() as u32,
            ..Op::default()
        };
        let r = remote as usize..remote as usize + len as usize;
        match rng.below(10) {
            0..=3 => {
                let imm = rng.chance(300).then_some(o.imm);
                o.op = Some(imm.map_or(WqeOp::Send, |_| WqeOp::SendWithImm));
                m.received.push((o.local.clone(), imm));
            }
            4..=6 => {
                o.op = Some(WqeOp::Write);
                let end = remote + u64::from(len);
                o.fence = read_ranges.iter().any(|&(b, e)| remote < e && b < end);
                m.mem[r].copy_from_slice(&o.local);
            }
            7..=8 => {
                o.op = Some(WqeOp::Read);
                m.reads.insert(tag, m.mem[r].to_vec());
                read_ranges.push((remote, remote + u64::from(len)));
            }
            _ => {
                o.len = 8;
                o.remote = COUNTERS + 8 * rng.below(8);
                let r = o.remote as usize..o.remote as usize + 8;
                let orig = u64::from_le_bytes(m.mem[r.clone()].try_into().unwrap());
                o.swap_add = rng.next() % 1000;
                o.compare = if rng.chance(600) { orig } else { rng.next() };
                let (op, new) = match rng.chance(500) {
                    true => (WqeOp::FetchAdd, orig.wrapping_add(o.swap_add)),
                    false if orig == o.compare => (WqeOp::CompareSwap, o.swap_add),
                    false => (WqeOp::CompareSwap, orig),
                };
                o.op = Some(op);
                m.mem[r].copy_from_slice(&new.to_le_bytes());
                m.atomics.insert(tag, orig);
            }
        }
        m.ops.push(o);
    }
    m
}

// ----------------------------------------------------------------- packets

fn build_pkt(h: &Headers, payload: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; packet_len(h.bth.opcode, payload.len()).unwrap()];
    assert_eq!(build(h, payload, &mut buf).unwrap(), buf.len());
    buf
}

fn request_bytes(w: &Op, p: &RequestPacket) -> Vec<u8> {
    let opcode = Opcode::new(Transport::Rc, p.operation);
    let mut bth = Bth::new(opcode, QPN, p.psn);
    bth.ack_req = p.ack_req;
    let mut h = Headers::new(bth);
    let (va, rkey) = (BASE + w.remote, RKEY);
    h.reth = p.reth.map(|r| Reth {
        va: va + u64::from(r.offset),
        rkey,
        dma_len: r.dma_len,
    });
    let ext = opcode.ext_headers();
    if ext.contains(ExtHeader::AtomicEth) {
        let (swap_add, compare) = (w.swap_add, w.compare);
        h.atomic_eth = Some(AtomicEth {
            va,
            rkey,
            swap_add,
            compare,
        });
    }
    if ext.contains(ExtHeader::ImmDt) {
        h.immdt = Some(ImmDt(w.imm.to_be_bytes()));
    }
    let (o, l) = (p.offset as usize, p.payload_len as usize);
    build_pkt(&h, if l == 0 { &[] } else { &w.local[o..o + l] })
}

fn response_bytes(
    op: Operation,
    psn: Psn,
    aeth: Option<Aeth>,
    orig: Option<u64>,
    data: &[u8],
) -> Vec<u8> {
    let mut h = Headers::new(Bth::new(Opcode::new(Transport::Rc, op), QPN, psn));
    h.aeth = aeth;
    h.atomic_ack_eth = orig.map(|orig| AtomicAckEth { orig });
    build_pkt(&h, data)
}

fn ack_bytes(psn: Psn, aeth: Aeth) -> Vec<u8> {
    response_bytes(Operation::Acknowledge, psn, Some(aeth), None, &[])
}

// ----------------------------------------------------------------- network

/// A one-way path: fixed delay, a packet every `gap` ticks, seeded loss,
/// first in first out.
struct Path {
    delay: u64,
    gap: u64,
    loss: u32,
    rng: Rng,
    free_at: u64,
    q: VecDeque<(u64, Vec<u8>)>,
}

impl Path {
    fn new((delay, gap, loss): (u64, u64, u32), seed: u64) -> Self {
        let (rng, free_at, q) = (Rng(seed), 0, VecDeque::new());
        Path {
            delay,
            gap,
            loss,
            rng,
            free_at,
            q,
        }
    }
    fn send(&mut self, now: u64, pkt: Vec<u8>) {
        let departs = self.free_at.max(now);
        self.free_at = departs + self.gap;
        if !self.rng.chance(self.loss) {
            self.q.push_back((departs + self.delay, pkt));
        }
    }
    fn next_time(&self) -> Option<u64> {
        self.q.front().map(|e| e.0)
    }
    fn due(&mut self, now: u64) -> VecDeque<Vec<u8>> {
        let n = self.q.iter().take_while(|e| e.0 <= now).count();
        self.q.drain(..n).map(|e| e.1).collect()
    }
}

// --------------------------------------------------------------- responder

/// Received request packets held by PSN.
type PacketBuffer = ReorderBuffer<Vec<u8>, Vec<Option<Held<Vec<u8>>>>>;

struct ResponderNode {
    resp: Responder<8>,
    /// Multipath: the reorder buffer. `None`: the engine alone.
    rb: Option<PacketBuffer>,
    /// Acknowledge as the driver does: a SACK only after a batch that
    /// held, released or met a duplicate; otherwise only the engine's
    /// ACKs (AckReq). Else a SACK or ACK after every batch.
    driver_acks: bool,
    mem: Vec<u8>,
    current: Option<Vec<u8>>,
    received: Vec<(Vec<u8>, Option<u32>)>,
    executed_atomics: usize,
    seq_naks: u32,
    sacks: u32,
}

impl ResponderNode {
    /// One arrival batch; then, with multipath, a SACK, or an ACK when
    /// nothing is held.
    fn run(&mut self, arrived: Vec<Vec<u8>>, out: &mut Vec<Vec<u8>>) {
        let mut batch = !arrived.is_empty();
        let mut changed = false;
        for b in arrived {
            let Some(rb) = self.rb.as_mut() else {
                self.handle(&b, out);
                continue;
            };
            let psn = Packet::parse(&b).unwrap().headers.bth.psn;
            let behind = psn.is_before(self.resp.epsn());
            match rb.offer(self.resp.epsn(), psn, b) {
                Offer::Held | Offer::Duplicate(_) => changed = true,
                Offer::Process(b) => {
                    changed |= behind;
                    self.handle(&b, out);
                    // The gap may be filled: the held requests in order.
                    while let Some(b) = self.rb.as_mut().unwrap().take(self.resp.epsn()) {
                        changed = true;
                        self.handle(&b, out);
                    }
                    let stale = self.rb.as_mut().unwrap().take_stale(self.resp.epsn());
                    assert!(stale.is_none(), "the engine passes no held request");
                }
                Offer::Beyond(_) => panic!("{psn:?} beyond the window (the requester's is <= W)"),
            }
        }
        if self.driver_acks {
            batch &= changed;
        }
        let (Some(rb), true) = (&self.rb, batch) else {
            return;
        };
        let expected = self.resp.epsn();
        let aeth = Aeth {
            syndrome: ACK,
            msn: self.resp.msn(),
        };
        if rb.is_empty() {
            out.push(ack_bytes(expected.wrapping_sub(1), aeth));
            return;
        }
        let held = rb.bitmap(expected);
        assert_eq!(held.count() as usize, rb.len());
        let mut buf = vec![0u8; ext::SACK_LEN];
        let sack = ExtPacket::sack(
            QPN,
            Sack {
                expected,
                aeth,
                held,
            },
        );
        assert_eq!(sack.write(&mut buf), Ok(ext::SACK_LEN));
        out.push(buf);
        self.sacks += 1;
    }

    fn handle(&mut self, bytes: &[u8], out: &mut Vec<Vec<u8>>) {
        let pkt = Packet::parse(bytes).unwrap();
        let req = Request::from_headers(&pkt.headers, pkt.payload.len()).unwrap();
        let reply = match self.resp.receive(&req, true) {
            Decision::Defer => panic!("READ responses are always sent at once"),
            Decision::Reply(r) => r,
            Decision::Execute(w) => {
                let outcome = self.execute(&w.kind, &pkt);
                self.resp.commit(&w, outcome)
            }
        };
        match reply {
            Reply::None => {}
            Reply::Ack { psn, aeth } => {
                self.seq_naks +=
                    u32::from(aeth.syndrome == Syndrome::Nak(NakCode::PsnSequenceError));
                out.push(ack_bytes(psn, aeth));
            }
            Reply::AtomicAck { psn, aeth, orig } => {
                let op = Operation::AtomicAcknowledge;
                out.push(response_bytes(op, psn, Some(aeth), Some(orig), &[]));
            }
            Reply::Read => {
                while let Some(p) = self.resp.next_read_response() {
                    let o = (p.va - BASE) as usize;
                    let data = &self.mem[o..o + p.len as usize];
                    out.push(response_bytes(p.operation, p.psn, p.aeth, None, data));
                }
            }
            r => panic!("unexpected reply {r:?}"),
        }
    }

    fn execute(&mut self, kind: &WorkKind, pkt: &Packet<'_>) -> Outcome {
        let at = |va: u64, len: u32| {
            assert!(va >= BASE && va - BASE + u64::from(len) <= MEM as u64);
            (va - BASE) as usize..(va - BASE) as usize + len as usize
        };
        match *kind {
            WorkKind::Send {
                offset,
                first,
                last,
                ..
            } => {
                if first {
                    assert!(self.current.replace(Vec::new()).is_none());
                }
                let cur = self.current.as_mut().unwrap();
                assert_eq!(cur.len(), offset as usize, "SEND data placed in order");
                cur.extend_from_slice(pkt.payload);
                if last {
                    let imm = pkt.headers.immdt.map(|i| u32::from_be_bytes(i.0));
                    self.received.push((self.current.take().unwrap(), imm));
                }
            }
            WorkKind::Write { va, rkey, len, .. } => {
                assert_eq!(rkey, RKEY);
                self.mem[at(va, len)].copy_from_slice(pkt.payload);
            }
            WorkKind::Read { va, rkey, len } => {
                assert_eq!(rkey, RKEY);
                at(va, len);
            }
            WorkKind::Atomic {
                va,
                compare_swap,
                swap_add,
                compare,
                ..
            } => {
                let r = at(va, 8);
                let orig = u64::from_le_bytes(self.mem[r.clone()].try_into().unwrap());
                let new = match compare_swap {
                    true if orig == compare => swap_add,
                    true => orig,
                    false => orig.wrapping_add(swap_add),
                };
                self.mem[r].copy_from_slice(&new.to_le_bytes());
                self.executed_atomics += 1;
                return Outcome::Atomic(orig);
            }
            ref k => panic!("not in the workload: {k:?}"),
        }
        Outcome::Done
    }
}

// --------------------------------------------------------------- requester

struct Setup {
    seed: u64,
    mtu: Mtu,
    /// Delay, ticks per packet and loss (per mille) of the paths of
    /// sessions 0 and 1, and of the reply path.
    paths: [(u64, u64, u32); 2],
    reply: (u64, u64, u32),
    initial_psn: Psn,
    max_unacked: u32,
    multipath: bool,
    rto: u64,
    /// The sessions' own retransmit timers (`run_windowed` only), with
    /// this RTO estimate in ticks; `None`: the transport timer alone.
    session_timers: Option<u64>,
}

/// A tick of the simulations, in µs (for the sessions' timers, whose
/// bounds are in µs): paths of 50 ticks are 5 ms, the RTO of 600 ticks
/// 60 ms.
const TICK_US: u64 = 100;

/// Request packets sent again, and why.
#[derive(Debug, Default)]
struct Resends {
    /// Every resend (go-back-N and selective).
    resent: u64,
    selective: u64,
    /// Selective resends of a PSN the responder had by then.
    needless: u64,
    /// Go-back-N resends skipped: the responder holds them.
    skipped: u64,
    timeouts: u64,
    /// Sessions' own timers that expired (their packets resent on the
    /// other session).
    session_timeouts: u64,
}

struct Run {
    completions: Vec<(u32, WcStatus)>,
    reads: HashMap<u32, Vec<u8>>,
    atomics: HashMap<u32, u64>,
    node: ResponderNode,
    n: Resends,
}

/// The requester's sending side: the paths and which one carried what.
struct Sender {
    paths: [Path; 2],
    board: Scoreboard<[Entry; W]>,
    /// Each session's own retransmit timer (run if the setup says so).
    timers: [QuietTimer; 2],
}

/// When something happens next (an arrival on a path or the reply path,
/// or the transport timer), after `now`.
fn next_event(paths: &[Path; 2], back: &Path, rtx: Option<u64>, now: u64) -> u64 {
    [
        paths[0].next_time(),
        paths[1].next_time(),
        back.next_time(),
        rtx,
    ]
    .into_iter()
    .flatten()
    .min()
    .expect("deadlock")
    .max(now + 1)
}

impl Sender {
    fn send(&mut self, now: u64, una: Psn, session: u8, p: &RequestPacket, op: &Op) {
        // Every PSN is tracked but an acknowledged one, which a go-back-N
        // resend still hands out when an ACK passed its cursor.
        let was_idle = self.board.in_flight(session) == 0;
        let tracked = self.board.record(una, p.psn, session);
        self.timers[usize::from(session)].on_sent(now * TICK_US, was_idle);
        assert!(
            tracked || p.psn.is_before(una),
            "{p:?} untracked, una {una:?}"
        );
        self.paths[usize::from(session)].send(now, request_bytes(op, p));
    }
}

/// The responder of `s` (with a reorder buffer when multipath).
fn responder_node(s: &Setup) -> ResponderNode {
    let rcfg = ResponderConfig {
        max_dest_rd_atomic: 4,
        ..ResponderConfig::new(s.mtu)
    };
    ResponderNode {
        resp: Responder::new(rcfg, s.initial_psn),
        rb: s
            .multipath
            .then(|| ReorderBuffer::with_storage(vec![None; W])),
        driver_acks: false,
        mem: initial_mem(),
        current: None,
        received: Vec::new(),
        executed_atomics: 0,
        seq_naks: 0,
        sacks: 0,
    }
}

fn run(s: &Setup, ops: &[Op]) -> Run {
    let (seed, mut cfg) = (s.seed, RequesterConfig::new(s.mtu));
    cfg.max_rd_atomic = 4;
    cfg.max_unacked_psns = s.max_unacked;
    cfg.ack_interval = 4;
    assert!(s.max_unacked as usize <= W);
    let mut sq: SendQueue<32> = SendQueue::new(cfg, s.initial_psn);
    let mut node = responder_node(s);
    let mut tx = Sender {
        paths: [
            Path::new(s.paths[0], seed ^ 0xA0),
            Path::new(s.paths[1], seed ^ 0xA1),
        ],
        board: Scoreboard::with_storage([Entry::default(); W]),
        timers: [QuietTimer::new(); 2],
    };
    let (mut back, mut mix) = (Path::new(s.reply, seed ^ 0xBA), Rng(seed ^ 0x313));
    let (mut reads, mut atomics, mut completions) = (HashMap::new(), HashMap::new(), Vec::new());
    let (mut now, mut next_post, mut rtx, mut n) = (0u64, 0usize, None, Resends::default());
    loop {
        assert!(
            now < 10_000_000,
            "seed {seed}: stuck, {} done",
            completions.len()
        );
        while next_post < ops.len() && sq.has_room() {
            let (tag, o) = (next_post as u32, &ops[next_post]);
            let (op, len, fence) = (o.op.unwrap(), o.len, o.fence);
            sq.post(SendWqe {
                tag,
                op,
                len,
                fence,
                signaled: true,
            })
            .unwrap();
            next_post += 1;
        }
        // New packets and go-back-N resends; a message's packets all go
        // on one session, the messages on each in turn.
        while let Some(p) = sq.next_packet() {
            if p.retransmit {
                if s.multipath && p.psn != sq.una() && tx.board.is_held(p.psn) {
                    n.skipped += 1;
                    continue;
                }
                n.resent += 1;
            }
            tx.send(now, sq.una(), (p.tag % 2) as u8, &p, &ops[p.tag as usize]);
        }
        if sq.has_unacked() && rtx.is_none() {
            rtx = Some(now + s.rto);
        }
        // Responder: the two paths' arrivals, interleaved at random.
        let (mut a, mut b) = (tx.paths[0].due(now), tx.paths[1].due(now));
        let mut arrived = Vec::new();
        while !a.is_empty() || !b.is_empty() {
            let from_a = b.is_empty() || (!a.is_empty() && mix.chance(500));
            arrived.extend(if from_a { a.pop_front() } else { b.pop_front() });
        }
        let mut out = Vec::new();
        node.run(arrived, &mut out);
        out.into_iter().for_each(|b| back.send(now, b));
        // Completer.
        let mut actions = Vec::new();
        for b in back.due(now) {
            if ext::is_ext(&b) {
                let ExtKind::Sack(sack) = ExtPacket::parse(&b).unwrap().kind else {
                    panic!("not a SACK")
                };
                // Its cumulative part is an ACK like any other.
                let psn = sack.expected.wrapping_sub(1);
                let kind = ResponseKind::Ack(sack.aeth.syndrome);
                actions.push(sq.on_response(&Response { psn, kind }));
                let mut lost = Vec::new();
                tx.board
                    .on_sack(sack.expected, &sack.held, |psn| lost.push(psn));
                for psn in lost {
                    let p = sq.packet_at(psn);
                    let p = p.unwrap_or_else(|| panic!("seed {seed}: no packet at lost {psn:?}"));
                    // Resent on the other session than the one that lost it.
                    let session = 1 - tx.board.session_of(psn).unwrap();
                    tx.send(now, sq.una(), session, &p, &ops[p.tag as usize]);
                    n.resent += 1;
                    n.selective += 1;
                    let ahead = psn.diff(node.resp.epsn());
                    let held = node.rb.as_ref().unwrap().bitmap(node.resp.epsn());
                    n.needless += u64::from(ahead < 0 || (ahead > 0 && held.is_set(ahead as u32)));
                }
                continue;
            }
            let pkt = Packet::parse(&b).unwrap();
            let a =
                sq.on_response(&Response::from_headers(&pkt.headers, pkt.payload.len()).unwrap());
            match a {
                Action::PlaceReadData { tag, offset, len } => {
                    let buf = reads
                        .entry(tag)
                        .or_insert_with(|| vec![0xEE; ops[tag as usize].len as usize]);
                    buf[offset as usize..(offset + len) as usize].copy_from_slice(pkt.payload);
                }
                Action::AtomicResult { tag, orig } => {
                    assert!(atomics.insert(tag, orig).is_none(), "atomic result twice");
                }
                Action::Fatal { .. } | Action::RnrWait { .. } => panic!("seed {seed}: {a:?}"),
                _ => {}
            }
            actions.push(a);
        }
        if rtx.is_some_and(|t| t <= now) {
            rtx = None;
            n.timeouts += 1;
            let a = sq.on_timeout();
            assert!(
                !matches!(a, Action::Fatal { .. }),
                "seed {seed}: retries exhausted"
            );
            actions.push(a);
        }
        let changed = actions.iter().any(|a| *a != Action::Ignore);
        if changed {
            rtx = sq.has_unacked().then_some(now + s.rto);
        }
        while let Some(c) = sq.pop_completion() {
            assert_eq!(c.tag as usize, completions.len(), "completions in order");
            completions.push((c.tag, c.status));
        }
        if completions.len() == ops.len() {
            return Run {
                completions,
                reads,
                atomics,
                node,
                n,
            };
        }
        if !changed {
            now = next_event(&tx.paths, &back, rtx, now);
        }
    }
}

fn check(seed: u64, m: &Model, r: &Run) {
    let want: Vec<_> = (0..m.ops.len() as u32)
        .map(|t| (t, WcStatus::Success))
        .collect();
    assert_eq!(r.completions, want, "seed {seed}");
    assert_eq!(r.node.received.len(), m.received.len(), "seed {seed}");
    for (i, (got, want)) in r.node.received.iter().zip(&m.received).enumerate() {
        assert!(got == want, "seed {seed}: SEND {i} delivered wrong");
    }
    for (tag, want) in &m.reads {
        assert!(
            r.reads.get(tag).cloned().unwrap_or_default() == *want,
            "seed {seed}: READ {tag}"
        );
    }
    assert_eq!(r.atomics, m.atomics, "seed {seed}");
    assert_eq!(
        r.node.executed_atomics,
        m.atomics.len(),
        "seed {seed}: atomics once"
    );
    assert!(r.node.mem == m.mem, "seed {seed}: remote memory");
    assert!(!r.node.resp.is_error(), "seed {seed}");
}

/// Runs the workload of `seed` over two paths (50 and 80 ticks, a packet
/// per tick each; replies 50 ticks) with go-back-N and with multipath;
/// returns the resends of both (multipath first).
fn compare(seed: u64, loss: [u32; 2], reply_loss: u32) -> (u64, u64) {
    let mut rng = Rng(seed);
    let mtu = [Mtu::Mtu256, Mtu::Mtu512, Mtu::Mtu1024][rng.below(3) as usize];
    let n = 150 + rng.below(100) as usize;
    let m = workload(&mut rng, n, 4 * mtu.bytes() + 100);
    let initial_psn = match seed % 2 {
        0 => Psn::new((1 << 24) - 1 - rng.below(100) as u32),
        _ => Psn::new(rng.next() as u32),
    };
    let mut resent = [0; 2];
    for multipath in [false, true] {
        let s = Setup {
            seed,
            mtu,
            paths: [(50, 1, loss[0]), (80, 1, loss[1])],
            reply: (50, 0, reply_loss),
            initial_psn,
            max_unacked: 32 + (seed % 97) as u32,
            multipath,
            rto: 600,
            session_timers: None,
        };
        let r = run(&s, &m.ops);
        check(seed, &m, &r);
        let (naks, sacks) = (r.node.seq_naks, r.node.sacks);
        if multipath {
            assert_eq!(naks, 0, "seed {seed}: no sequence NAK with multipath");
            assert!(sacks > 0, "seed {seed}: reordering held requests");
        }
        let mode = if multipath { "multipath" } else { "go-back-N" };
        eprintln!(
            "  seed {seed} {mode}: {:?}, seq NAKs {naks}, SACKs {sacks}",
            r.n
        );
        resent[usize::from(multipath)] = r.n.resent;
    }
    (resent[1], resent[0])
}

#[test]
fn two_paths_multipath_against_go_back_n() {
    let cases = [
        ("no loss", [0, 0], 0),
        ("no loss on the paths, 2% on replies", [0, 0], 20),
        ("1% on path 1", [0, 10], 0),
        ("1% on path 1, 1% on replies", [0, 10], 10),
        ("3% and 2% on the paths", [30, 20], 0),
        ("3% and 2% on the paths, 2% on replies", [30, 20], 20),
    ];
    for (case, (name, loss, reply_loss)) in (0..).zip(cases) {
        let (mut mp, mut gbn) = (0, 0);
        for seed in 100 * case..100 * case + 4 {
            let (m, g) = compare(seed, loss, reply_loss);
            assert!(
                m < g,
                "seed {seed} ({name}): multipath resent {m}, go-back-N {g}"
            );
            if loss == [0, 0] && reply_loss == 0 {
                assert_eq!(m, 0, "seed {seed}: reordering alone resends nothing");
            }
            (mp, gbn) = (mp + m, gbn + g);
        }
        eprintln!("{name}: resent multipath {mp}, go-back-N {gbn}");
    }
}

// ------------------------------------------------------ the reorder buffer

type TestBuffer = ReorderBuffer<u32, Vec<Option<Held<u32>>>>;

/// Offers `arrivals` (offsets from PSN `start`) to a buffer of `slots`
/// slots as a responder would, then the gap's PSN until all `n` are
/// through, checking each answer, `len` and `bitmap` against a model.
fn reorder_run(slots: usize, start: u32, n: u32, arrivals: &[u32]) -> Result<(), TestCaseError> {
    let (w, base) = (slots.min(W) as i64, Psn::new(start));
    let mut rb: TestBuffer = ReorderBuffer::with_storage(vec![None; slots]);
    prop_assert_eq!(rb.window() as i64, w);
    let (mut held, mut released, mut expected) = (BTreeSet::new(), Vec::new(), 0u32);
    let mut arrivals = arrivals.iter().copied();
    while let Some(off) = arrivals.next().or((expected < n).then_some(expected)) {
        let d = i64::from(off) - i64::from(expected);
        let want = match d {
            ..=0 => Offer::Process(off),
            _ if d >= w => Offer::Beyond(off),
            _ if held.contains(&off) => Offer::Duplicate(off),
            _ => Offer::Held,
        };
        let got = rb.offer(base.wrapping_add(expected), base.wrapping_add(off), off);
        prop_assert_eq!(got, want, "offset {} while expecting {}", off, expected);
        if got == Offer::Held {
            held.insert(off);
        }
        if d == 0 {
            // The engine takes it, then whatever is held after it.
            released.push(off);
            expected += 1;
            while let Some(x) = rb.take(base.wrapping_add(expected)) {
                prop_assert!(
                    held.remove(&x) && x == expected,
                    "took {} at {}",
                    x,
                    expected
                );
                released.push(x);
                expected += 1;
            }
            prop_assert!(!held.contains(&expected));
            prop_assert_eq!(rb.take_stale(base.wrapping_add(expected)), None);
        }
        prop_assert_eq!((rb.len(), rb.is_empty()), (held.len(), held.is_empty()));
        let bits = rb.bitmap(base.wrapping_add(expected));
        for i in 0..W as u32 {
            let set = bits.is_set(i);
            prop_assert_eq!(set, held.contains(&(expected + i)), "bit {}", i);
        }
    }
    prop_assert_eq!(released, (0..n).collect::<Vec<_>>());
    prop_assert!(rb.take_any().is_none());
    Ok(())
}

/// `0..n`, some of them twice, each moved up to `jitter` places on.
fn arrivals() -> impl Strategy<Value = (u32, Vec<u32>)> {
    (1u32..400, 1u32..300)
        .prop_flat_map(|(n, jitter)| {
            let dups = prop::collection::vec(0..n, 0..=n as usize / 2);
            (
                Just(n),
                dups,
                prop::collection::vec(0..jitter, 2 * n as usize),
            )
        })
        .prop_map(|(n, dups, noise)| {
            let mut keyed: Vec<(u32, u32)> = (0..n)
                .chain(dups)
                .zip(noise)
                .map(|(o, z)| (o + z, o))
                .collect();
            keyed.sort_unstable();
            (n, keyed.into_iter().map(|k| k.1).collect())
        })
}

/// A first PSN, often just before the 2^24 wrap.
fn start_psn() -> impl Strategy<Value = u32> {
    prop_oneof![0xFF_FE00u32..=0xFF_FFFF, 0u32..1 << 24]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Windows that divide 2^24 (see `window_not_dividing_2_24_...`), and
    /// storage beyond the largest window.
    #[test]
    fn reorder_buffer_releases_each_psn_once_in_order(
        slots in prop_oneof![(0u32..=7).prop_map(|k| 1usize << k), Just(200usize)],
        start in start_psn(),
        (n, arrivals) in arrivals(),
    ) {
        reorder_run(slots, start, n, &arrivals)?;
    }

    #[test]
    fn scoreboard_reports_exactly_the_overtaken_losses(
        sessions in 2usize..=4,
        start in start_psn(),
        n in 1u32..=120,
        loss in 0u32..400,
        seed in any::<u64>(),
    ) {
        scoreboard_run(sessions, start, n, loss, seed)?;
    }
}

/// A storage whose length does not divide 2^24 (not a power of two) is
/// used rounded down to a power of two, so two PSNs of one window never
/// share a slot across the PSN wrap. (With `psn mod 100`, PSNs 0xFF_FFF1
/// and 0x00_0001, 16 apart, once shared slot 1 and the first was lost.)
#[test]
fn window_not_dividing_2_24_is_rounded_to_a_power_of_two() {
    let e = Psn::new(0xFF_FFF0);
    let (a, b) = (e.wrapping_add(1), e.wrapping_add(17));
    let mut rb: TestBuffer = ReorderBuffer::with_storage(vec![None; 100]);
    assert_eq!(rb.offer(e, a, 1), Offer::Held);
    assert_eq!(rb.offer(e, b, 17), Offer::Held);
    let mut board = Scoreboard::with_storage(vec![Entry::default(); 100]);
    assert!(board.record(e, a, 0) && board.record(e, b, 1));
    assert_eq!(board.session_of(a), Some(0), "scoreboard forgot 0xFF_FFF1");
    assert_eq!(rb.len(), 2, "reorder buffer dropped 0xFF_FFF1");
    assert_eq!(rb.take(a), Some(1));
    assert_eq!(rb.window(), 64);
}

/// `take_stale` takes only a request the engine went past, never the one
/// at `expected` (it once did, with `diff <= 0`: a driver calling it before
/// `take` would have dropped a good request).
#[test]
fn take_stale_leaves_the_expected_request() {
    let mut rb: TestBuffer = ReorderBuffer::with_storage(vec![None; 8]);
    let e = Psn::new(5);
    assert_eq!(rb.offer(e, e.next(), 6), Offer::Held);
    assert_eq!(rb.take_stale(e.next()), None, "PSN 6 is not behind 6");
    assert_eq!(rb.take(e.next()), Some(6));
}

// ------------------------------------------------------------ the scoreboard

/// One transmission of a request packet (PSN offset `off`).
struct Tx {
    off: u32,
    session: usize,
    seq: u32,
    lost: bool,
}

/// Sessions (each in order, with loss) between a scoreboard and a
/// responder that SACKs, the SACKs taking their time.
struct Board {
    rng: Rng,
    una: Psn,
    loss: u32,
    board: Scoreboard<[Entry; W]>,
    txs: Vec<Tx>,
    /// Each PSN's latest transmission.
    latest: Vec<usize>,
    next_seq: Vec<u32>,
    /// Each session's transmissions in flight.
    flight: Vec<VecDeque<usize>>,
    delivered: BTreeSet<u32>,
    expected: u32,
    /// SACKs on their way: expected and held offsets.
    sacks: VecDeque<(u32, BTreeSet<u32>)>,
    reported: HashSet<usize>,
}

impl Board {
    fn transmit(&mut self, off: u32) {
        let session = self.rng.below(self.flight.len() as u64) as usize;
        let seq = self.next_seq[session];
        self.next_seq[session] += 1;
        self.latest[off as usize] = self.txs.len();
        self.flight[session].push_back(self.txs.len());
        let lost = self.rng.chance(self.loss);
        self.txs.push(Tx {
            off,
            session,
            seq,
            lost,
        });
        assert!(self
            .board
            .record(self.una, self.una.wrapping_add(off), session as u8));
    }

    fn deliver(&mut self, session: usize) {
        let Some(t) = self.flight[session].pop_front() else {
            return;
        };
        if !self.txs[t].lost {
            self.delivered.insert(self.txs[t].off);
            while self.delivered.contains(&self.expected) {
                self.expected += 1;
            }
        }
    }

    fn sack(&mut self) {
        let held: BTreeSet<u32> = self.delivered.range(self.expected..).copied().collect();
        if !held.is_empty() {
            self.sacks.push_back((self.expected, held));
        }
    }

    fn on_sack(&mut self) -> Result<(), TestCaseError> {
        let Some((expected, held)) = self.sacks.pop_front() else {
            return Ok(());
        };
        let mut bits = SackBits::EMPTY;
        for &h in &held {
            bits.set(h - expected);
        }
        let (una, mut lost) = (self.una, Vec::new());
        let count = self.board.on_sack(una.wrapping_add(expected), &bits, |p| {
            lost.push(una.distance_to(p))
        });
        prop_assert_eq!(count, lost.len());
        prop_assert!(
            lost.windows(2).all(|w| w[0] < w[1]),
            "PSN order: {:?}",
            lost
        );
        for &off in &lost {
            let t = self.latest[off as usize];
            prop_assert!(
                self.txs[t].lost && !self.delivered.contains(&off),
                "{} not lost",
                off
            );
            prop_assert!(self.reported.insert(t), "{} reported twice", off);
        }
        // Liveness: a missing PSN whose session delivered a later packet
        // (held, in this SACK) is reported, now or before.
        let highest = *held.last().unwrap();
        for off in (expected..highest).filter(|o| !held.contains(o)) {
            let t = self.latest[off as usize];
            let overtaken = held.iter().any(|&h| {
                let u = &self.txs[self.latest[h as usize]];
                u.session == self.txs[t].session && u.seq > self.txs[t].seq
            });
            prop_assert!(
                !overtaken || self.reported.contains(&t),
                "{} not reported",
                off
            );
        }
        lost.into_iter().for_each(|off| self.transmit(off));
        Ok(())
    }
}

fn scoreboard_run(
    sessions: usize,
    start: u32,
    n: u32,
    loss: u32,
    seed: u64,
) -> Result<(), TestCaseError> {
    let mut b = Board {
        rng: Rng(seed),
        una: Psn::new(start),
        loss,
        board: Scoreboard::with_storage([Entry::default(); W]),
        txs: Vec::new(),
        latest: vec![usize::MAX; n as usize],
        next_seq: vec![0; sessions],
        flight: vec![VecDeque::new(); sessions],
        delivered: BTreeSet::new(),
        expected: 0,
        sacks: VecDeque::new(),
        reported: HashSet::new(),
    };
    let mut next_new = 0;
    for _ in 0..1_000_000 {
        if b.expected == n {
            return Ok(());
        }
        match b.rng.below(8) {
            0 | 1 if next_new < n => {
                b.transmit(next_new);
                next_new += 1;
            }
            0..=3 => {
                let s = b.rng.below(sessions as u64) as usize;
                b.deliver(s);
            }
            4 => b.sack(),
            5 | 6 => b.on_sack()?,
            _ if next_new == n && b.sacks.is_empty() && b.flight.iter().all(|f| f.is_empty()) => {
                // The transport timer: every missing PSN again.
                let missing: Vec<u32> = (b.expected..n)
                    .filter(|o| !b.delivered.contains(o))
                    .collect();
                missing.into_iter().for_each(|o| b.transmit(o));
            }
            _ => {}
        }
    }
    Err(TestCaseError::fail("not everything delivered"))
}

// ------------------------------------- the scoreboard's in-flight counts

/// A tracked PSN's state in the model: on its way over its session, held
/// by the responder, or presumed lost (reported, gone back over, or no
/// longer held) since its last transmission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    Flying,
    Held,
    Lost,
}

#[derive(Clone, Copy, Debug)]
struct Tracked {
    session: u8,
    seq: u32,
    fate: Fate,
    reported: bool,
}

/// One step on a scoreboard; the numbers are taken relative to the
/// model's state (see [`BoardModel::step`]).
#[derive(Clone, Debug)]
enum BoardOp {
    /// A first transmission or a resend of PSN `una + ahead % (w + 4)`
    /// (`w` the window: some beyond it), `una` being the board's, or
    /// `lead` past it when `lead < 8` (the caller has not passed that
    /// acknowledgement on yet: an older entry in the slot goes).
    Record {
        ahead: u32,
        session: u8,
        lead: u32,
    },
    /// A resend of the `pick`-th tracked PSN (within the window).
    Resend {
        pick: u32,
        session: u8,
    },
    /// A SACK expecting `una + expected % 6 - 1`, holding each tracked
    /// PSN after it with probability `keep`/1000 and `noise` other PSNs.
    Sack {
        expected: u32,
        keep: u32,
        noise: u8,
        seed: u64,
    },
    /// Acknowledged through `una + ahead` (some jumps past the window).
    Ack {
        ahead: u32,
    },
    GoBack(bool),
    ForgetHeld,
    /// The requester restarts `delta` from `una`.
    Clear {
        delta: i32,
    },
    Take,
}

fn board_op() -> impl Strategy<Value = BoardOp> {
    prop_oneof![
        6 => (any::<u32>(), 0u8..3, 0u32..40)
            .prop_map(|(ahead, session, lead)| BoardOp::Record { ahead, session, lead }),
        2 => (any::<u32>(), 0u8..3).prop_map(|(pick, session)| BoardOp::Resend { pick, session }),
        4 => (any::<u32>(), 0u32..=1000, any::<u8>(), any::<u64>()).prop_map(
            |(expected, keep, noise, seed)| BoardOp::Sack { expected, keep, noise: noise % 8, seed }
        ),
        2 => prop_oneof![0u32..8, 0u32..300].prop_map(|ahead| BoardOp::Ack { ahead }),
        1 => any::<bool>().prop_map(BoardOp::GoBack),
        1 => Just(BoardOp::ForgetHeld),
        1 => (-300i32..300).prop_map(|delta| BoardOp::Clear { delta }),
        2 => Just(BoardOp::Take),
    ]
}

/// A model of a scoreboard's per-session flight: each tracked PSN by
/// absolute number (PSN `base + a` mod 2^24).
struct BoardModel {
    base: u32,
    /// The window (the storage's length rounded down to a power of two).
    w: u64,
    una: u64,
    tracked: std::collections::BTreeMap<u64, Tracked>,
    next_seq: [u32; 3],
    /// Deliveries not yet taken, per session.
    pending: [u32; 3],
    /// Transitions from in flight to delivered; those taken; those a
    /// `clear` dropped before they were taken.
    delivered: u64,
    taken: u64,
    dropped: u64,
}

const fn seq_before(a: u32, b: u32) -> bool {
    let d = b.wrapping_sub(a);
    d != 0 && d < 1 << 31
}

impl BoardModel {
    fn psn(&self, a: u64) -> Psn {
        Psn::new(((u64::from(self.base) + a) % (1 << 24)) as u32)
    }

    /// A packet of `session` delivered (it was in flight).
    fn deliver(&mut self, session: u8) {
        self.pending[usize::from(session)] += 1;
        self.delivered += 1;
    }

    fn record(&mut self, una: u64, a: u64, session: u8) -> bool {
        if a < una || a >= una + self.w {
            return false;
        }
        // An entry of an older window in the same slot goes (not
        // delivered: nobody said so).
        let w = self.w;
        self.tracked.retain(|&b, _| b == a || b % w != a % w);
        let seq = self.next_seq[usize::from(session)];
        self.next_seq[usize::from(session)] += 1;
        let fate = Fate::Flying;
        self.tracked.insert(
            a,
            Tracked {
                session,
                seq,
                fate,
                reported: false,
            },
        );
        true
    }

    /// The losses the SACK reveals, in PSN order.
    fn sack(&mut self, expected: u64, held: &BTreeSet<u64>) -> Vec<u64> {
        let span = self.w.min(u64::from(ext::SACK_SPAN));
        let (mut highest, mut newest) = (None, [None::<u32>; 3]);
        let mut newly = Vec::new();
        for (&a, t) in self.tracked.iter_mut() {
            if a < expected || a - expected >= span {
                continue;
            }
            if a == expected || !held.contains(&a) {
                if t.fate == Fate::Held {
                    t.fate = Fate::Lost;
                }
                continue;
            }
            if t.fate == Fate::Flying {
                newly.push(t.session);
            }
            t.fate = Fate::Held;
            highest = Some(a);
            let n = &mut newest[usize::from(t.session)];
            if n.map_or(true, |n| seq_before(n, t.seq)) {
                *n = Some(t.seq);
            }
        }
        newly.into_iter().for_each(|s| self.deliver(s));
        let Some(highest) = highest else {
            return Vec::new();
        };
        let mut lost = Vec::new();
        for (&a, t) in self.tracked.range_mut(expected..highest) {
            let overtaken = newest[usize::from(t.session)].is_some_and(|n| seq_before(t.seq, n));
            if t.fate != Fate::Held && !t.reported && overtaken {
                (t.fate, t.reported) = (Fate::Lost, true);
                lost.push(a);
            }
        }
        lost
    }

    fn acked_through(&mut self, una: u64) {
        let acked: Vec<u64> = self.tracked.range(..una).map(|(&a, _)| a).collect();
        for a in acked {
            let t = self.tracked.remove(&a).unwrap();
            if t.fate == Fate::Flying {
                self.deliver(t.session);
            }
        }
        self.una = una;
    }

    fn go_back(&mut self, forget_held: bool) -> u64 {
        let mut had = 0;
        for t in self.tracked.values_mut() {
            match t.fate {
                Fate::Flying => {
                    had |= 1 << t.session;
                    t.fate = Fate::Lost;
                }
                Fate::Held if forget_held => t.fate = Fate::Lost,
                _ => {}
            }
        }
        had
    }

    fn forget_held(&mut self) {
        for t in self.tracked.values_mut() {
            if t.fate == Fate::Held {
                t.fate = Fate::Lost;
            }
        }
    }

    fn in_flight(&self, session: u8) -> u32 {
        let flying = |t: &&Tracked| t.session == session && t.fate == Fate::Flying;
        self.tracked.values().filter(flying).count() as u32
    }

    /// Applies `op` to the model and to `board`, comparing the answers,
    /// then compares what the board tracks and counts with the model.
    fn step(
        &mut self,
        board: &mut Scoreboard<Vec<Entry>>,
        op: &BoardOp,
    ) -> Result<(), TestCaseError> {
        match *op {
            BoardOp::Record {
                ahead,
                session,
                lead,
            } => {
                let una = self.una + if lead < 8 { u64::from(lead) } else { 0 };
                let a = una + u64::from(ahead) % (self.w + 4);
                let want = self.record(una, a, session);
                let got = board.record(self.psn(una), self.psn(a), session);
                prop_assert_eq!(got, want, "record {} (una {})", a, una);
            }
            BoardOp::Resend { pick, session } => {
                // (One the board's `una` covers: not one recorded with a
                // `lead` past its window.)
                let ours: Vec<u64> = self
                    .tracked
                    .range(..self.una + self.w)
                    .map(|e| *e.0)
                    .collect();
                if !ours.is_empty() {
                    let a = ours[pick as usize % ours.len()];
                    prop_assert!(self.record(self.una, a, session));
                    prop_assert!(board.record(self.psn(self.una), self.psn(a), session));
                }
            }
            BoardOp::Sack {
                expected,
                keep,
                noise,
                seed,
            } => {
                let expected = (self.una + u64::from(expected % 6)).saturating_sub(1);
                let mut rng = Rng(seed);
                let mut held: BTreeSet<u64> = self
                    .tracked
                    .keys()
                    .copied()
                    .filter(|&a| a > expected && rng.chance(keep))
                    .collect();
                for _ in 0..noise {
                    held.insert(expected + 1 + rng.below(self.w + 8));
                }
                let mut bits = SackBits::EMPTY;
                held.iter().for_each(|&a| bits.set((a - expected) as u32));
                let want: Vec<Psn> = self
                    .sack(expected, &held)
                    .into_iter()
                    .map(|a| self.psn(a))
                    .collect();
                let mut got = Vec::new();
                let count = board.on_sack(self.psn(expected), &bits, |p| got.push(p));
                prop_assert_eq!(count, got.len());
                prop_assert_eq!(got, want, "SACK expecting {} holding {:?}", expected, held);
            }
            BoardOp::Ack { ahead } => {
                let una = self.una + u64::from(ahead);
                self.acked_through(una);
                board.acked_through(self.psn(una));
            }
            BoardOp::GoBack(forget_held) => {
                let want = self.go_back(forget_held);
                prop_assert_eq!(board.go_back(forget_held), want, "go_back");
                prop_assert!((0..3).all(|s| board.in_flight(s) == 0));
            }
            BoardOp::ForgetHeld => {
                self.forget_held();
                board.forget_held();
            }
            BoardOp::Clear { delta } => {
                let una = self.una.saturating_add_signed(i64::from(delta));
                self.tracked.clear();
                self.dropped += self.pending.iter().map(|&n| u64::from(n)).sum::<u64>();
                self.pending = [0; 3];
                self.una = una;
                board.clear(self.psn(una));
            }
            BoardOp::Take => {
                let mut got = [0u32; 3];
                board.take_delivered(|s, n| {
                    assert!(
                        n > 0 && got[usize::from(s)] == 0,
                        "session {s} twice or empty"
                    );
                    got[usize::from(s)] += n;
                });
                prop_assert_eq!(got, self.pending, "take_delivered");
                self.taken += got.iter().map(|&n| u64::from(n)).sum::<u64>();
                self.pending = [0; 3];
            }
        }
        // The oracle: a scan of the model.
        for s in 0..3u8 {
            prop_assert_eq!(
                board.in_flight(s),
                self.in_flight(s),
                "in_flight({}) after {:?}",
                s,
                op
            );
            prop_assert_eq!(board.next_seq(s), self.next_seq[usize::from(s)]);
        }
        prop_assert_eq!(board.in_flight(3), 0);
        for (&a, t) in &self.tracked {
            let p = self.psn(a);
            prop_assert_eq!(board.sent_as(p), Some((t.session, t.seq)), "PSN {}", a);
            prop_assert_eq!(board.session_of(p), Some(t.session));
            prop_assert_eq!(board.is_held(p), t.fate == Fate::Held, "PSN {} held", a);
        }
        for a in (self.una..self.una + self.w).filter(|a| !self.tracked.contains_key(a)) {
            prop_assert_eq!(board.sent_as(self.psn(a)), None, "PSN {} untracked", a);
        }
        Ok(())
    }
}

/// Runs `ops` on a scoreboard of `slots` entries whose PSNs start at
/// `start`, checking it against [`BoardModel`] after every step; at the
/// end, everything delivered was taken once (or dropped by a `clear`).
fn board_counts_run(slots: usize, start: u32, ops: &[BoardOp]) -> Result<(), TestCaseError> {
    let mut board = Scoreboard::with_storage(vec![Entry::default(); slots]);
    // The board starts at PSN 0 = `base + una`.
    let una = 1000u64;
    let mut m = BoardModel {
        base: start.wrapping_sub(una as u32) & 0xFF_FFFF,
        w: 1 << slots.ilog2(),
        una,
        tracked: Default::default(),
        next_seq: [0; 3],
        pending: [0; 3],
        delivered: 0,
        taken: 0,
        dropped: 0,
    };
    board.clear(m.psn(una));
    for op in ops {
        m.step(&mut board, op)?;
    }
    m.step(&mut board, &BoardOp::Take)?;
    prop_assert_eq!(m.taken + m.dropped, m.delivered);
    Ok(())
}

// ------------------------------------------------ the sessions' windows

#[derive(Clone, Debug)]
enum WindowOp {
    Start,
    /// `n` packets sent on the session.
    Send(u32),
    Delivered(u32),
    /// The loss of the packet sent `back + 1` packets ago.
    Loss(u32),
    Timeout,
}

fn window_op() -> impl Strategy<Value = WindowOp> {
    prop_oneof![
        1 => Just(WindowOp::Start),
        4 => prop_oneof![0u32..4, 0u32..300].prop_map(WindowOp::Send),
        4 => prop_oneof![0u32..4, 0u32..600, Just(u32::MAX)].prop_map(WindowOp::Delivered),
        4 => prop_oneof![0u32..8, 0u32..500].prop_map(WindowOp::Loss),
        1 => Just(WindowOp::Timeout),
    ]
}

/// Runs `ops` on a window whose session's sequence numbers start at
/// `seq0`, checking after each: within `MIN..=MAX` once started (all
/// `UNUSED` before), no growth on a loss or a timeout, a loss cuts (to
/// half, at least `MIN`) exactly when the lost packet was sent at or
/// after the last cut's recovery point, deliveries grow it by their
/// number up to the threshold (slow start), else by one per window,
/// `has_room` and
/// `drain_time` agree with the window.
fn window_run(seq0: u32, ops: &[WindowOp]) -> Result<(), TestCaseError> {
    let (min, max) = (PathWindow::MIN, PathWindow::MAX);
    let mut w = PathWindow::UNUSED;
    let (mut next, mut started, mut recover, mut cuts) = (seq0, false, None::<u32>, 0u32);
    for op in ops {
        let old = w;
        match *op {
            WindowOp::Start => {
                w.start();
                (started, recover) = (true, None);
                prop_assert_eq!(w.cwnd(), PathWindow::INITIAL);
                prop_assert_eq!(w.ssthresh(), max);
            }
            WindowOp::Send(n) => next = next.wrapping_add(n),
            WindowOp::Delivered(n) => {
                w.on_delivered(n);
                prop_assert!(w.cwnd() >= old.cwnd(), "shrank on delivery");
                prop_assert!(w.cwnd() - old.cwnd() <= n, "grew past {} packets", n);
                if started && old.cwnd() < old.ssthresh() {
                    // Slow start: a packet per packet, up to the threshold.
                    let want = old.cwnd().saturating_add(n).min(old.ssthresh());
                    prop_assert_eq!(w.cwnd(), want, "slow start by {}", n);
                } else if started {
                    // Congestion avoidance: a packet per window.
                    prop_assert!(w.cwnd() - old.cwnd() <= n / old.cwnd() + 1);
                }
                prop_assert_eq!(w.ssthresh(), old.ssthresh());
            }
            WindowOp::Loss(back) => {
                let seq = next.wrapping_sub(back).wrapping_sub(1);
                let episode = recover.is_some_and(|r| seq_before(seq, r));
                let cut = w.on_loss(seq, next);
                prop_assert_eq!(
                    cut,
                    started && !episode,
                    "loss of {} (recover {:?})",
                    seq,
                    recover
                );
                if cut {
                    let half = (old.cwnd() / 2).max(min);
                    prop_assert_eq!((w.cwnd(), w.ssthresh()), (half, half));
                    recover = Some(next);
                    cuts += 1;
                } else {
                    prop_assert_eq!(w, old, "no cut, no change");
                }
            }
            WindowOp::Timeout => {
                w.on_timeout(next);
                if started {
                    let half = (old.cwnd() / 2).max(min);
                    prop_assert_eq!((w.cwnd(), w.ssthresh()), (min, half));
                    recover = Some(next);
                    cuts += 1;
                } else {
                    prop_assert_eq!(w, old);
                }
            }
        }
        prop_assert_eq!(w.cuts(), cuts);
        prop_assert_eq!(w.is_active(), started);
        if started {
            prop_assert!((min..=max).contains(&w.cwnd()), "cwnd {}", w.cwnd());
            prop_assert!(
                (min..=max).contains(&w.ssthresh()),
                "ssthresh {}",
                w.ssthresh()
            );
        } else {
            prop_assert_eq!(w, PathWindow::UNUSED);
        }
        for k in [
            0,
            1,
            w.cwnd().saturating_sub(1),
            w.cwnd(),
            max,
            u32::MAX - 1,
        ] {
            prop_assert_eq!(w.has_room(k), !started || k < w.cwnd(), "room for {}", k);
            prop_assert!(drain_time(k, &w, 70, 100) <= drain_time(k + 1, &w, 70, 100));
            prop_assert!(drain_time(k, &w, 70, 100) <= drain_time(k, &w, 90, 100));
        }
    }
    // Whatever happened, deliveries alone bring it back to the maximum.
    for _ in 0..4 {
        w.on_delivered(1 << 20);
    }
    prop_assert_eq!(w.cwnd(), if started { max } else { 0 });
    Ok(())
}

// ------------------------------------------- two paths with the windows

/// What [`run_windowed`] saw besides the run.
struct WindowedRun {
    run: Run,
    /// First transmissions per session.
    new: [u64; 2],
    /// Each session's window at the end (its cut count: losses and
    /// timeouts), and the cuts for SACK-reported losses.
    windows: [PathWindow; 2],
    loss_cuts: [u32; 2],
    /// The largest window each session reached.
    max_cwnd: [u32; 2],
    /// Times no session had room for a new packet.
    blocked: u64,
    /// New packets `SendQueue::resending` announced as resends, and
    /// resends it announced as new.
    new_said_resend: u64,
    resend_said_new: u64,
    /// When the last request completed (ticks), and the loop's steps.
    end: u64,
    steps: u64,
}

/// The requester's windows as the kernel keeps them: one per session,
/// started at the agreement, the round-trip time of each path known.
struct Windows {
    w: [PathWindow; 2],
    srtt: [u64; 2],
}

impl Windows {
    fn has_room(&self, board: &Scoreboard<[Entry; W]>, s: u8) -> bool {
        self.w[usize::from(s)].has_room(board.in_flight(s))
    }

    /// The session a packet sent now would be delivered on first: among
    /// those with room (`room`), or all.
    fn best(&self, board: &Scoreboard<[Entry; W]>, room: bool) -> Option<u8> {
        let drain = |s: u8| {
            let i = usize::from(s);
            drain_time(board.in_flight(s), &self.w[i], self.srtt[i], 100)
        };
        (0..2u8)
            .filter(|&s| !room || self.has_room(board, s))
            .min_by_key(|&s| (drain(s), s))
    }
}

/// Ticks after which a windowed run counts as stuck.
const STUCK: u64 = 2_000_000;

/// [`run`] with multipath and the sessions' congestion windows: a new
/// packet goes out only when some session has room (go-back-N resends
/// and selective resends always go); a new message goes to the session
/// with room that drains first, and stays there while that session has
/// room; each response's acknowledgement and SACK feed the windows
/// (`acked_through`, `take_delivered`), each SACK-reported loss cuts the
/// window of the session that carried it (once per episode), a timeout
/// those of the sessions that had packets in flight.
/// Whether the next packet is new is asked of `SendQueue::resending`
/// before taking it, as the driver does; a packet that takes its session
/// past half its window asks for an acknowledgement, as the driver's do.
fn run_windowed(s: &Setup, ops: &[Op]) -> WindowedRun {
    assert!(s.multipath);
    let (seed, mut cfg) = (s.seed, RequesterConfig::new(s.mtu));
    cfg.max_rd_atomic = 4;
    cfg.max_unacked_psns = s.max_unacked;
    assert!(s.max_unacked as usize <= W);
    let mut sq: SendQueue<32> = SendQueue::new(cfg, s.initial_psn);
    let mut node = responder_node(s);
    node.driver_acks = true;
    let mut tx = Sender {
        paths: [
            Path::new(s.paths[0], seed ^ 0xA0),
            Path::new(s.paths[1], seed ^ 0xA1),
        ],
        board: Scoreboard::with_storage([Entry::default(); W]),
        timers: [QuietTimer::new(); 2],
    };
    let rtt = |p: (u64, u64, u32)| p.0 + s.reply.0;
    let mut win = Windows {
        w: [PathWindow::UNUSED; 2],
        srtt: [rtt(s.paths[0]), rtt(s.paths[1])],
    };
    win.w.iter_mut().for_each(PathWindow::start);
    // The session each message's new packets go on.
    let mut current: HashMap<u32, u8> = HashMap::new();
    let (mut reads, mut atomics, mut completions) = (HashMap::new(), HashMap::new(), Vec::new());
    let mut n = Resends::default();
    let (mut new, mut loss_cuts, mut max_cwnd) = ([0; 2], [0; 2], [PathWindow::INITIAL; 2]);
    let (mut blocked, mut steps) = (0, 0);
    let (mut new_said_resend, mut resend_said_new) = (0, 0);
    let (mut back, mut mix) = (Path::new(s.reply, seed ^ 0xBA), Rng(seed ^ 0x313));
    let (mut now, mut next_post, mut rtx) = (0u64, 0usize, None);
    // What the last timeout found (the kernel's rule for trusting held
    // marks once more).
    let (mut last_timeout_una, mut sacked_since_timeout) = (None, false);
    loop {
        steps += 1;
        assert!(
            now < STUCK,
            "seed {seed}: stuck, {} done, windows {:?}, in flight {:?}",
            completions.len(),
            win.w,
            [tx.board.in_flight(0), tx.board.in_flight(1)]
        );
        while next_post < ops.len() && sq.has_room() {
            let (tag, o) = (next_post as u32, &ops[next_post]);
            let (op, len, fence) = (o.op.unwrap(), o.len, o.fence);
            sq.post(SendWqe {
                tag,
                op,
                len,
                fence,
                signaled: true,
            })
            .unwrap();
            next_post += 1;
        }
        loop {
            let resending = sq.resending();
            if !resending && win.best(&tx.board, true).is_none() {
                blocked += 1;
                break;
            }
            let Some(p) = sq.next_packet() else {
                break;
            };
            if p.retransmit && !resending {
                resend_said_new += 1;
            }
            if !p.retransmit && resending {
                new_said_resend += 1;
                if win.best(&tx.board, true).is_none() {
                    // A new packet after all (see
                    // `resending_is_false_before_a_new_request`): taken
                    // back, to come again when a session has room.
                    assert!(sq.hold(&p), "seed {seed}: {p:?} not taken back");
                    sq.resume();
                    blocked += 1;
                    break;
                }
            }
            let session = if p.retransmit {
                if p.psn != sq.una() && tx.board.is_held(p.psn) {
                    n.skipped += 1;
                    continue;
                }
                n.resent += 1;
                win.best(&tx.board, false).unwrap()
            } else {
                let here = current.get(&p.tag).copied();
                let s = here
                    .filter(|&c| win.has_room(&tx.board, c))
                    .or_else(|| win.best(&tx.board, true))
                    .unwrap();
                let i = usize::from(s);
                assert!(
                    tx.board.in_flight(s) < win.w[i].cwnd(),
                    "seed {seed}: no room"
                );
                current.insert(p.tag, s);
                new[i] += 1;
                s
            };
            // As the driver: a packet that takes its session past half its
            // window asks for an acknowledgement (the requester asks only
            // at a message's end and every 64 packets).
            let mut p = p;
            let (flying, cwnd) = (
                tx.board.in_flight(session) + 1,
                win.w[usize::from(session)].cwnd(),
            );
            p.ack_req |= flying >= cwnd / 2;
            tx.send(now, sq.una(), session, &p, &ops[p.tag as usize]);
        }
        if sq.has_unacked() && rtx.is_none() {
            rtx = Some(now + s.rto);
        }
        let (mut a, mut b) = (tx.paths[0].due(now), tx.paths[1].due(now));
        let mut arrived = Vec::new();
        while !a.is_empty() || !b.is_empty() {
            let from_a = b.is_empty() || (!a.is_empty() && mix.chance(500));
            arrived.extend(if from_a { a.pop_front() } else { b.pop_front() });
        }
        let mut out = Vec::new();
        node.run(arrived, &mut out);
        out.into_iter().for_each(|b| back.send(now, b));
        // Completer.
        let mut actions = Vec::new();
        for b in back.due(now) {
            let mut lost = Vec::new();
            if ext::is_ext(&b) {
                let ExtKind::Sack(sack) = ExtPacket::parse(&b).unwrap().kind else {
                    panic!("not a SACK")
                };
                let psn = sack.expected.wrapping_sub(1);
                let kind = ResponseKind::Ack(sack.aeth.syndrome);
                actions.push(sq.on_response(&Response { psn, kind }));
                tx.board
                    .on_sack(sack.expected, &sack.held, |psn| lost.push(psn));
                sacked_since_timeout = true;
            } else {
                let pkt = Packet::parse(&b).unwrap();
                let resp = Response::from_headers(&pkt.headers, pkt.payload.len()).unwrap();
                let a = sq.on_response(&resp);
                match a {
                    Action::PlaceReadData { tag, offset, len } => {
                        let buf = reads
                            .entry(tag)
                            .or_insert_with(|| vec![0xEE; ops[tag as usize].len as usize]);
                        buf[offset as usize..(offset + len) as usize].copy_from_slice(pkt.payload);
                    }
                    Action::AtomicResult { tag, orig } => {
                        assert!(atomics.insert(tag, orig).is_none(), "atomic result twice");
                    }
                    Action::Fatal { .. } | Action::RnrWait { .. } => panic!("seed {seed}: {a:?}"),
                    _ => {}
                }
                actions.push(a);
            }
            // Acknowledged and held packets are delivered: the windows grow.
            tx.board.acked_through(sq.una());
            tx.board.take_delivered(|s, k| {
                win.w[usize::from(s)].on_delivered(k);
                tx.timers[usize::from(s)].on_delivered(now * TICK_US);
            });
            for psn in lost {
                // The loss is charged to the session that carried it, before
                // the resend takes a new place in some session's order.
                let (was, seq) = tx.board.sent_as(psn).unwrap_or_else(|| {
                    panic!("seed {seed}: lost {psn:?} untracked, una {:?}", sq.una())
                });
                let i = usize::from(was);
                if win.w[i].on_loss(seq, tx.board.next_seq(was)) {
                    loss_cuts[i] += 1;
                }
                let p = sq.packet_at(psn);
                let p = p.unwrap_or_else(|| panic!("seed {seed}: no packet at lost {psn:?}"));
                let to = win.best(&tx.board, false).unwrap();
                tx.send(now, sq.una(), to, &p, &ops[p.tag as usize]);
                n.resent += 1;
                n.selective += 1;
                let ahead = psn.diff(node.resp.epsn());
                let held = node.rb.as_ref().unwrap().bitmap(node.resp.epsn());
                n.needless += u64::from(ahead < 0 || (ahead > 0 && held.is_set(ahead as u32)));
            }
            for (m, w) in max_cwnd.iter_mut().zip(&win.w) {
                *m = (*m).max(w.cwnd());
            }
        }
        // The sessions' own timers, as the driver's pass: a session with
        // packets in flight that delivered nothing for its period has them
        // resent on the other one (not while going back N), its window
        // cut to the minimum.
        let qp_rto = Some(s.rto * TICK_US);
        for q in 0..2u8 {
            let (i, est) = (usize::from(q), s.session_timers.map(|e| e * TICK_US));
            if s.session_timers.is_none() || sq.resending() || tx.board.in_flight(q) == 0 {
                continue;
            }
            let Some(period) = tx.timers[i].period_us(est, qp_rto) else {
                continue;
            };
            if tx.timers[i].deadline_us(period) > now * TICK_US {
                continue;
            }
            let _ = tx.timers[i].on_expired(now * TICK_US, qp_rto);
            n.session_timeouts += 1;
            win.w[i].on_timeout(tx.board.next_seq(q));
            let mut lost = Vec::new();
            tx.board.strand(1 << q, |psn| lost.push(psn));
            for psn in lost {
                let p = sq.packet_at(psn).expect("a stranded packet");
                tx.send(now, sq.una(), 1 - q, &p, &ops[p.tag as usize]);
                n.resent += 1;
            }
        }
        if rtx.is_some_and(|t| t <= now) {
            rtx = None;
            n.timeouts += 1;
            let una = sq.una();
            let a = sq.on_timeout();
            assert!(
                !matches!(a, Action::Fatal { .. }),
                "seed {seed}: retries exhausted"
            );
            if matches!(a, Action::Retransmit { .. }) {
                // Held marks are trusted for one timeout after a SACK, and
                // never twice at the same oldest PSN.
                let forget = last_timeout_una == Some(una) || !sacked_since_timeout;
                (last_timeout_una, sacked_since_timeout) = (Some(una), false);
                let had = tx.board.go_back(forget);
                assert_eq!(had >> 2, 0, "seed {seed}: sessions {had:#b}");
                for s in 0..2u8 {
                    if had & 1 << s != 0 {
                        win.w[usize::from(s)].on_timeout(tx.board.next_seq(s));
                    }
                }
                assert_eq!([tx.board.in_flight(0), tx.board.in_flight(1)], [0, 0]);
            }
            actions.push(a);
        }
        let changed = actions.iter().any(|a| *a != Action::Ignore);
        if changed {
            rtx = sq.has_unacked().then_some(now + s.rto);
        }
        while let Some(c) = sq.pop_completion() {
            assert_eq!(c.tag as usize, completions.len(), "completions in order");
            completions.push((c.tag, c.status));
        }
        if completions.len() == ops.len() {
            return WindowedRun {
                run: Run {
                    completions,
                    reads,
                    atomics,
                    node,
                    n,
                },
                new,
                windows: win.w,
                loss_cuts,
                max_cwnd,
                blocked,
                new_said_resend,
                resend_said_new,
                end: now,
                steps,
            };
        }
        if !changed {
            let quiet = (0..2u8)
                .filter(|&q| s.session_timers.is_some() && tx.board.in_flight(q) > 0)
                .filter_map(|q| {
                    let t = &tx.timers[usize::from(q)];
                    let period =
                        t.period_us(s.session_timers.map(|e| e * TICK_US), Some(s.rto * TICK_US))?;
                    Some(t.deadline_us(period).div_ceil(TICK_US))
                })
                .min();
            let wake = [rtx, quiet].into_iter().flatten().min();
            now = next_event(&tx.paths, &back, wake, now);
        }
    }
}

/// The workload of `seed` (as [`compare`] makes it) over two paths of
/// `delay` ticks with `loss` per mille, replies `reply_loss`, with the
/// windows; checked against the sequential model.
fn windowed(seed: u64, delay: [u64; 2], loss: [u32; 2], reply_loss: u32, n: usize) -> WindowedRun {
    windowed_sized(seed, delay, loss, reply_loss, n, None)
}

/// [`windowed`] with messages of up to `packets` MTU-256 packets (random
/// MTU and short messages if `None`).
fn windowed_sized(
    seed: u64,
    delay: [u64; 2],
    loss: [u32; 2],
    reply_loss: u32,
    n: usize,
    packets: Option<u32>,
) -> WindowedRun {
    windowed_timed(seed, delay, loss, reply_loss, n, packets, None)
}

/// [`windowed_sized`] with the sessions' own retransmit timers if
/// `session_timers` (their RTO estimate, ticks).
fn windowed_timed(
    seed: u64,
    delay: [u64; 2],
    loss: [u32; 2],
    reply_loss: u32,
    n: usize,
    packets: Option<u32>,
    session_timers: Option<u64>,
) -> WindowedRun {
    let mut rng = Rng(seed);
    let (mtu, max_len) = match packets {
        Some(p) => (Mtu::Mtu256, p * 256),
        None => {
            let mtu = [Mtu::Mtu256, Mtu::Mtu512, Mtu::Mtu1024][rng.below(3) as usize];
            (mtu, 4 * mtu.bytes() + 100)
        }
    };
    let m = workload(&mut rng, n, max_len);
    let initial_psn = match seed % 2 {
        0 => Psn::new((1 << 24) - 1 - rng.below(100) as u32),
        _ => Psn::new(rng.next() as u32),
    };
    let s = Setup {
        seed,
        mtu,
        paths: [(delay[0], 1, loss[0]), (delay[1], 1, loss[1])],
        reply: (50, 0, reply_loss),
        initial_psn,
        // Large messages: the agreed window, as wide as the responder's
        // (the PSN window never stops them first).
        max_unacked: match packets {
            Some(_) => W as u32,
            None => 32 + (seed % 97) as u32,
        },
        multipath: true,
        rto: 600,
        session_timers,
    };
    let r = run_windowed(&s, &m.ops);
    check(seed, &m, &r.run);
    assert_eq!(r.run.node.seq_naks, 0, "seed {seed}: no sequence NAK");
    // Cuts come from SACK-reported losses (once per episode) and timeouts
    // (the transport timer's and the sessions' own).
    for i in 0..2 {
        let cuts = r.windows[i].cuts();
        let timeouts = (r.run.n.timeouts + r.run.n.session_timeouts) as u32;
        assert!(cuts <= r.loss_cuts[i] + timeouts, "seed {seed}: path {i}");
        assert!(u64::from(r.loss_cuts[i]) <= r.run.n.selective);
    }
    assert_eq!(r.resend_said_new, 0, "seed {seed}: a resend taken for new");
    assert_eq!(
        r.new_said_resend, 0,
        "seed {seed}: a new packet taken for a resend"
    );
    eprintln!(
        "  seed {seed} {delay:?} {loss:?} {reply_loss}: new {:?}, cuts {:?} ({:?} by loss), \
         largest windows {:?}, blocked {}, new packets announced as resends {}, {:?}, \
         done at {}",
        r.new,
        r.windows.map(|w| w.cuts()),
        r.loss_cuts,
        r.max_cwnd,
        r.blocked,
        r.new_said_resend,
        r.run.n,
        r.end
    );
    r
}

/// Loss on path 1 only: its window is cut and new packets go mostly over
/// path 0 (same delay); the workload completes as the model says.
#[test]
fn windows_move_new_packets_off_a_lossy_path() {
    for seed in 0..5 {
        let r = windowed(seed, [50, 50], [0, 20], 0, 300);
        let [new0, new1] = r.new;
        assert!(
            new1 * 2 < new0,
            "seed {seed}: path 1 carried {new1}, path 0 {new0}"
        );
        assert!(r.windows[1].cuts() > 0 && r.loss_cuts[1] > 0, "seed {seed}");
        // Path 0 is cut by timeouts only.
        assert_eq!(r.loss_cuts[0], 0, "seed {seed}");
    }
}

/// Clean paths: no window is ever cut; equal delays share the new
/// packets evenly, a shorter round trip gets more.
#[test]
fn windows_share_clean_paths_by_round_trip() {
    for seed in 0..5 {
        let r = windowed(seed, [50, 50], [0, 0], 0, 300);
        let [new0, new1] = r.new;
        let share = new0 * 100 / (new0 + new1);
        assert!((35..=65).contains(&share), "seed {seed}: {new0} and {new1}");
        assert_eq!(r.windows.map(|w| w.cuts()), [0, 0], "seed {seed}");
        assert_eq!((r.run.n.resent, r.run.n.timeouts), (0, 0), "seed {seed}");

        let r = windowed(seed, [50, 80], [0, 0], 0, 300);
        assert!(r.new[0] > r.new[1], "seed {seed}: {:?}", r.new);
        assert_eq!(r.windows.map(|w| w.cuts()), [0, 0], "seed {seed}");
    }
}

/// Messages of up to 64 packets, more than a session's first window: a
/// message moves on to the other session when its own is full, and the
/// packets in the upper half of a window ask for the acknowledgements that
/// open it again (the requester itself asks only at a message's end
/// and every 64 packets): clean paths never wait for the timer.
#[test]
fn messages_larger_than_a_window_keep_both_paths_busy() {
    for seed in 0..4 {
        // Path 0 a little faster: a message's later packets (on path 1)
        // arrive after its earlier ones, nothing is held, no SACK comes.
        let r = windowed_sized(seed, [40, 50], [0, 0], 0, 120, Some(64));
        assert_eq!((r.run.n.resent, r.run.n.timeouts), (0, 0), "seed {seed}");
        let [new0, new1] = r.new;
        let share = new0 * 100 / (new0 + new1);
        assert!((30..=70).contains(&share), "seed {seed}: {new0} and {new1}");
        // And with loss on one path, nothing stalls (bounded inside).
        let _ = windowed_sized(seed, [50, 70], [0, 20], 0, 120, Some(64));
    }
}

/// `SendQueue::resending` before `next_packet` says whether the packet
/// is a resend, also when the send cursor moved on to a work request not
/// started yet (its `cursor_psn` still at the previous message's last
/// packet, before `sent_end`): a driver gating new packets on it must not
/// let the first packet of each message past the windows.
#[test]
fn resending_is_false_before_a_new_request() {
    let mut sq: SendQueue<4> = SendQueue::new(RequesterConfig::new(Mtu::Mtu1024), Psn::new(7));
    for tag in 0..2 {
        let (op, len, fence) = (WqeOp::Send, 16, false);
        sq.post(SendWqe {
            tag,
            op,
            len,
            fence,
            signaled: true,
        })
        .unwrap();
    }
    assert!(!sq.resending());
    assert!(!sq.next_packet().unwrap().retransmit);
    let said = sq.resending();
    let p = sq.next_packet().unwrap();
    assert!(!p.retransmit && p.psn == Psn::new(8));
    assert!(!said, "resending() before the first packet of request 1");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn scoreboard_in_flight_and_deliveries_match_a_scan(
        slots in prop::sample::select(vec![4usize, 8, 16, 24, 128]),
        start in start_psn(),
        ops in prop::collection::vec(board_op(), 1..250),
    ) {
        board_counts_run(slots, start, &ops)?;
    }

    #[test]
    fn path_window_stays_in_bounds_and_cuts_once_per_episode(
        seq0 in prop_oneof![u32::MAX - 400..=u32::MAX, any::<u32>()],
        ops in prop::collection::vec(window_op(), 1..200),
    ) {
        window_run(seq0, &ops)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any seed, up to 5% loss on each path and on the replies: the
    /// windowed run completes as the model says, well before it would
    /// count as stuck.
    #[test]
    fn windowed_runs_never_stall(
        seed in any::<u64>(),
        delay1 in 30u64..=120,
        loss in [0u32..=50, 0u32..=50],
        reply_loss in 0u32..=50,
        n in 50usize..=200,
    ) {
        let r = windowed(seed, [50, delay1], loss, reply_loss, n);
        prop_assert!(r.end < 100 * n as u64 + 10_000, "done at {}", r.end);
        prop_assert!(r.steps < 20 * n as u64 + 2_000, "{} steps", r.steps);
    }
}

// -------------------------------------------------------------- the hello

fn request(op: Operation, psn: Psn, reth: Option<Reth>, payload: &[u8]) -> Vec<u8> {
    let mut bth = Bth::new(Opcode::new(Transport::Rc, op), QPN, psn);
    bth.ack_req = true;
    let mut h = Headers::new(bth);
    h.reth = reth;
    build_pkt(&h, payload)
}

/// A plain responder's answer to `bytes` (executed if new, READ responses
/// sent at once).
fn answer(resp: &mut Responder<4>, bytes: &[u8]) -> Reply {
    let pkt = Packet::parse(bytes).unwrap();
    let req = Request::from_headers(&pkt.headers, pkt.payload.len()).unwrap();
    let reply = match resp.receive(&req, true) {
        Decision::Execute(w) => resp.commit(&w, Outcome::Done),
        Decision::Reply(r) => r,
        Decision::Defer => panic!("deferred"),
    };
    while resp.next_read_response().is_some() {}
    reply
}

#[test]
fn hello_is_re_acked_like_a_duplicate_by_a_plain_responder() {
    let first = Psn::new(0xFF_FFFE);
    let (va, rkey) = (BASE, RKEY);
    let write = |psn, dma_len: u32| {
        let reth = Some(Reth { va, rkey, dma_len });
        request(
            Operation::RdmaWriteOnly,
            psn,
            reth,
            &vec![7; dma_len as usize],
        )
    };
    let send = |psn| request(Operation::SendOnly, psn, None, b"hi");
    let read = |psn| {
        request(
            Operation::RdmaReadRequest,
            psn,
            Some(Reth {
                va,
                rkey,
                dma_len: 9,
            }),
            &[],
        )
    };
    let ack = |psn, msn| Reply::Ack {
        psn,
        aeth: Aeth { syndrome: ACK, msn },
    };
    // What the responder received, the requester's oldest unacknowledged
    // PSN, a genuine duplicate of the PSN before it, the answer to both.
    let cases = [
        (
            vec![],
            first,
            write(first.wrapping_sub(1), 0),
            ack(first.wrapping_sub(1), 0),
        ),
        (
            vec![send(first), write(first.next(), 8)],
            first.wrapping_add(2),
            write(first.next(), 8),
            ack(Psn::MAX, 2),
        ),
        // A READ after it, its response under way: a duplicate before a
        // READ gets no answer (the READ's replay will acknowledge it).
        (
            vec![send(first), read(first.next())],
            first.next(),
            send(first),
            Reply::None,
        ),
    ];
    let cfg = ResponderConfig {
        max_dest_rd_atomic: 4,
        ..ResponderConfig::new(Mtu::Mtu1024)
    };
    for (history, una, duplicate, want) in cases {
        let mut resp = Responder::<4>::new(cfg, first);
        for b in &history {
            assert!(matches!(
                answer(&mut resp, b),
                Reply::Ack { .. } | Reply::Read
            ));
        }
        let hello_reth = Some(ext::hello_reth(Caps::ALL));
        let hello = request(
            Operation::RdmaWriteOnly,
            una.wrapping_sub(1),
            hello_reth,
            &[],
        );
        let pkt = Packet::parse(&hello).unwrap();
        let reth = pkt.headers.reth.unwrap();
        assert_eq!(
            ext::hello_caps(&reth, pkt.payload.len() as u32),
            Some(Caps::ALL)
        );
        let plain = Packet::parse(&duplicate).unwrap().headers.reth;
        assert_eq!(ext::hello_caps(&plain.unwrap_or_default(), 0), None);

        let mut twin = resp.clone();
        assert_eq!(answer(&mut resp, &hello), want, "the hello, una {una:?}");
        assert_eq!(answer(&mut twin, &duplicate), want, "a genuine duplicate");
        assert_eq!((resp.epsn(), resp.msn()), (twin.epsn(), twin.msn()));
        // The next request is taken as if there had been no hello.
        let next = write(resp.epsn(), 4);
        let got = answer(&mut resp, &next);
        assert!(matches!(got, Reply::Ack { psn, .. } if psn == twin.epsn()));
        assert_eq!(got, answer(&mut twin, &next));
    }
    // The requester ignores the re-ACK (a PSN before its oldest
    // unacknowledged one).
    let mut sq: SendQueue<4> = SendQueue::new(RequesterConfig::new(Mtu::Mtu1024), first);
    for tag in 0..3 {
        sq.post(SendWqe {
            tag,
            op: WqeOp::Send,
            len: 5,
            fence: false,
            signaled: true,
        })
        .unwrap();
    }
    while sq.next_packet().is_some() {}
    let ack = |psn| Response {
        psn,
        kind: ResponseKind::Ack(ACK),
    };
    assert_eq!(sq.on_response(&ack(first.next())), Action::Progress);
    assert_eq!(
        sq.on_response(&ack(sq.una().wrapping_sub(1))),
        Action::Ignore
    );
}

/// The sessions' own retransmit timers (`multipath::quiet`): with loss on
/// path 1, some of its losses are tails (nothing sent after them on path
/// 1 arrives to show them) that only a timer finds. With the sessions'
/// timers they are resent on path 0 after the session's period instead
/// of the QP's RTO: fewer transport timeouts, done sooner. On clean paths
/// no session timer ever expires.
#[test]
fn session_timers_resend_lost_tails_sooner() {
    // RTO estimate of the sessions: 250 ticks, about twice the longer
    // path's round trip (120 ticks) with no queue, as a session's
    // SRTT + 4 RTTVAR of message round trips is at least; 25 ms against
    // the RTO's 60.
    let est = Some(250);
    let (mut with, mut without) = ((0, 0, 0), (0, 0, 0));
    for seed in 0..6 {
        let a = windowed_timed(seed, [50, 70], [0, 60], 0, 300, None, None);
        let b = windowed_timed(seed, [50, 70], [0, 60], 0, 300, None, est);
        assert_eq!(a.run.n.session_timeouts, 0);
        eprintln!(
            "seed {seed}: transport timer alone: {} timeouts, done at {}; with session timers: \
             {} timeouts, {} session timeouts, done at {}",
            a.run.n.timeouts, a.end, b.run.n.timeouts, b.run.n.session_timeouts, b.end
        );
        without = (without.0 + a.run.n.timeouts, without.1 + a.end, without.2);
        with = (
            with.0 + b.run.n.timeouts,
            with.1 + b.end,
            with.2 + b.run.n.session_timeouts,
        );
        // Clean paths: a session's deliveries restart its timer in time.
        let c = windowed_timed(seed, [50, 80], [0, 0], 0, 300, None, est);
        assert_eq!(c.run.n.session_timeouts, 0, "seed {seed}: clean paths");
        let c = windowed_timed(seed, [40, 50], [0, 0], 0, 120, Some(64), est);
        assert_eq!(c.run.n.session_timeouts, 0, "seed {seed}: large messages");
    }
    eprintln!("timeouts, end, session timeouts: alone {without:?}, with session timers {with:?}");
    assert!(with.2 > 0, "no tail loss found by a session timer");
    assert!(
        with.0 < without.0,
        "transport timeouts {with:?} against {without:?}"
    );
    assert!(with.1 < without.1, "done at {with:?} against {without:?}");
}

/// An event of a session's timer: a send (was it idle), a delivery, a
/// charge by the transport timer, or time passing to its deadline (an
/// expiry) or by some ticks.
#[derive(Clone, Debug)]
enum TimerOp {
    Sent(bool),
    Delivered,
    Charged,
    Expire,
    Wait(u64),
}

fn timer_op() -> impl Strategy<Value = TimerOp> {
    prop_oneof![
        any::<bool>().prop_map(TimerOp::Sent),
        Just(TimerOp::Delivered),
        Just(TimerOp::Charged),
        Just(TimerOp::Expire),
        Just(TimerOp::Expire),
        (0u64..50_000).prop_map(TimerOp::Wait),
    ]
}

proptest! {
    /// Whatever happens, a session's timer: runs for a period within its
    /// bounds (at least the minimum, at most half the QP's RTO), or not at
    /// all when even its estimate is above that; charges
    /// a timeout only a whole QP RTO after the session's silence began or
    /// its last charge (by either timer), never sooner.
    #[test]
    fn session_timer_periods_and_charges_stay_in_bounds(
        est in proptest::option::of(0u64..200_000),
        rto in 1_000u64..2_000_000,
        ops in proptest::collection::vec(timer_op(), 1..200),
    ) {
        let mut t = QuietTimer::new();
        let (mut now, mut silent_from) = (0u64, 0u64);
        for op in ops {
            match op {
                TimerOp::Sent(idle) => {
                    if idle && t.backoff() == 0 {
                        silent_from = now;
                    }
                    t.on_sent(now, idle);
                }
                TimerOp::Delivered => {
                    t.on_delivered(now);
                    silent_from = now;
                }
                TimerOp::Charged => {
                    t.on_charged(now);
                    silent_from = now;
                }
                TimerOp::Wait(d) => now += d,
                TimerOp::Expire => {
                    let Some(p) = t.period_us(est, Some(rto)) else {
                        // No timer: the QP's RTO too short, or the
                        // session's round trips too long, for one.
                        prop_assert!(
                            rto / 2 < sroce_proto::multipath::quiet::MIN_PERIOD_US
                                || est.is_some_and(|e| e > rto / 2)
                        );
                        continue;
                    };
                    prop_assert!(p >= sroce_proto::multipath::quiet::MIN_PERIOD_US);
                    prop_assert!(p <= rto / 2);
                    now = now.max(t.deadline_us(p));
                    let charged = t.on_expired(now, Some(rto));
                    prop_assert_eq!(charged, now - silent_from >= rto);
                    if charged {
                        silent_from = now;
                    }
                }
            }
        }
    }
}
