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
//! - Property tests of `ReorderBuffer` and `Scoreboard` against models.
//! - The hello on the wire, as a plain responder sees it.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

mod common;
use common::Rng;
use proptest::prelude::*;

use sroce_proto::aeth::{NakCode, Syndrome};
use sroce_proto::multipath::ext::{self, Caps, ExtKind, ExtPacket, Sack, SackBits};
use sroce_proto::multipath::reorder::{Held, Offer, ReorderBuffer};
use sroce_proto::multipath::scoreboard::{Entry, Scoreboard};
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
        let batch = !arrived.is_empty();
        for b in arrived {
            let Some(rb) = self.rb.as_mut() else {
                self.handle(&b, out);
                continue;
            };
            let psn = Packet::parse(&b).unwrap().headers.bth.psn;
            match rb.offer(self.resp.epsn(), psn, b) {
                Offer::Held | Offer::Duplicate(_) => {}
                Offer::Process(b) => {
                    self.handle(&b, out);
                    // The gap may be filled: the held requests in order.
                    while let Some(b) = self.rb.as_mut().unwrap().take(self.resp.epsn()) {
                        self.handle(&b, out);
                    }
                    let stale = self.rb.as_mut().unwrap().take_stale(self.resp.epsn());
                    assert!(stale.is_none(), "the engine passes no held request");
                }
                Offer::Beyond(_) => panic!("{psn:?} beyond the window (the requester's is <= W)"),
            }
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
}

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
}

impl Sender {
    fn send(&mut self, now: u64, una: Psn, session: u8, p: &RequestPacket, op: &Op) {
        // Every PSN is tracked but an acknowledged one, which a go-back-N
        // resend still hands out when an ACK passed its cursor.
        let tracked = self.board.record(una, p.psn, session);
        assert!(
            tracked || p.psn.is_before(una),
            "{p:?} untracked, una {una:?}"
        );
        self.paths[usize::from(session)].send(now, request_bytes(op, p));
    }
}

fn run(s: &Setup, ops: &[Op]) -> Run {
    let (seed, mut cfg) = (s.seed, RequesterConfig::new(s.mtu));
    cfg.max_rd_atomic = 4;
    cfg.max_unacked_psns = s.max_unacked;
    cfg.ack_interval = 4;
    assert!(s.max_unacked as usize <= W);
    let mut sq: SendQueue<32> = SendQueue::new(cfg, s.initial_psn);
    let rcfg = ResponderConfig {
        max_dest_rd_atomic: 4,
        ..ResponderConfig::new(s.mtu)
    };
    let mut node = ResponderNode {
        resp: Responder::new(rcfg, s.initial_psn),
        rb: s
            .multipath
            .then(|| ReorderBuffer::with_storage(vec![None; W])),
        mem: initial_mem(),
        current: None,
        received: Vec::new(),
        executed_atomics: 0,
        seq_naks: 0,
        sacks: 0,
    };
    let mut tx = Sender {
        paths: [
            Path::new(s.paths[0], seed ^ 0xA0),
            Path::new(s.paths[1], seed ^ 0xA1),
        ],
        board: Scoreboard::with_storage([Entry::default(); W]),
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
            let next = [
                tx.paths[0].next_time(),
                tx.paths[1].next_time(),
                back.next_time(),
                rtx,
            ];
            now = next
                .into_iter()
                .flatten()
                .min()
                .expect("deadlock")
                .max(now + 1);
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
