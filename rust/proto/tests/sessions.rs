//! Sessions: port allocation, the RoCEv2 source-port rule, policies,
//! health timing, receive filter, and a two-path transfer simulation with a
//! path failure and recovery.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashSet};

use proptest::prelude::*;
use sroce_proto::session::group::SessionSpec;
use sroce_proto::session::health::{
    failover_bound_us, probe_psn, probe_reply_matches, return_bound_us, HealthConfig,
};
use sroce_proto::session::port_range::{
    calc_flow_label, roce_v2_sport, DefaultPortAllocator, PortAllocator, PortRange,
};
use sroce_proto::session::{
    FiveTuple, GroupConfig, NetAddr, Policy, ReceiveFilter, SessionError, SessionGroup, SessionId,
    State, Verdict,
};
use sroce_proto::Psn;

// ---------------------------------------------------------------- ports

#[derive(Clone, Debug)]
enum PortOp {
    Alloc(usize, u32),
    Free(usize),
}

fn port_ops() -> impl Strategy<Value = Vec<PortOp>> {
    prop::collection::vec(
        prop_oneof![
            (1usize..70, any::<u32>()).prop_map(|(n, h)| PortOp::Alloc(n, h)),
            any::<usize>().prop_map(PortOp::Free),
        ],
        1..120,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Allocated ports are distinct, in range, never handed out twice,
    /// failures take nothing, and freeing everything leaves nothing in use.
    #[test]
    fn allocator_distinct_no_leaks(first in 49152u16..65000, span in 0u16..500, ops in port_ops()) {
        let last = first.saturating_add(span);
        let range = PortRange::new(first, last).unwrap();
        let mut a = PortAllocator::<16>::new(range).unwrap();
        let mut model: BTreeSet<u16> = BTreeSet::new();
        for op in ops {
            match op {
                PortOp::Alloc(n, hint) => {
                    let mut out = vec![0u16; n];
                    let before = a.in_use();
                    match a.allocate(&mut out, hint, &[]) {
                        Ok(()) => {
                            let set: HashSet<u16> = out.iter().copied().collect();
                            prop_assert_eq!(set.len(), n);
                            for p in out {
                                prop_assert!(range.contains(p));
                                prop_assert!(model.insert(p), "port {} handed out twice", p);
                            }
                        }
                        Err(e) => {
                            prop_assert_eq!(e, SessionError::PortsExhausted);
                            prop_assert_eq!(a.in_use(), before);
                            prop_assert!(n as u32 > a.available());
                        }
                    }
                }
                PortOp::Free(i) => {
                    if model.is_empty() {
                        prop_assert_eq!(a.free(first), Err(SessionError::NotAllocated));
                    } else {
                        let p = *model.iter().nth(i % model.len()).unwrap();
                        model.remove(&p);
                        prop_assert_eq!(a.free(p), Ok(()));
                        prop_assert_eq!(a.free(p), Err(SessionError::NotAllocated));
                    }
                }
            }
            prop_assert_eq!(a.in_use() as usize, model.len());
            for &p in &model {
                prop_assert!(a.is_allocated(p));
            }
        }
        let all: Vec<u16> = model.iter().copied().collect();
        prop_assert_eq!(a.free_all(&all) as usize, all.len());
        prop_assert_eq!(a.in_use(), 0);
        prop_assert_eq!(a.available(), range.len());
    }

    /// The RoCEv2 port rule: always in 0xC000..=0xFFFF, symmetric in the
    /// QPNs, equal to a literal transcription of the kernel's C.
    #[test]
    fn sport_rule(fl in prop_oneof![Just(0u32), any::<u32>()], l in any::<u32>(), r in any::<u32>()) {
        let p = roce_v2_sport(fl, l, r);
        prop_assert!(p >= 0xC000);
        prop_assert_eq!(p, roce_v2_sport(fl, r, l));
        let mut v: u64 = u64::from(l) * u64::from(r);
        v ^= v >> 20;
        v ^= v >> 40;
        let calc = (v as u32) & 0xFFFFF;
        prop_assert_eq!(calc_flow_label(l, r), calc);
        let f = if fl == 0 { calc } else { fl };
        let lo = (f & 0x3fff) ^ ((f & 0xFC000) >> 14);
        prop_assert_eq!(p, (lo as u16) | 0xC000);
    }
}

#[test]
fn exclude_and_exhaust() {
    let range = PortRange::new(61000, 61003).unwrap();
    let mut a = DefaultPortAllocator::new(range).unwrap();
    let mut out = [0u16; 3];
    a.allocate(&mut out, 0, &[61000]).unwrap();
    assert_eq!(out, [61001, 61002, 61003]);
    assert_eq!(a.allocate_one(7), Ok(61000));
    assert_eq!(a.allocate_one(0), Err(SessionError::PortsExhausted));
    assert_eq!(a.free(60999), Err(SessionError::NotAllocated));
    a.free(61002).unwrap();
    a.mark_used(61002).unwrap();
    assert_eq!(a.mark_used(61002), Err(SessionError::BadPort));
    assert_eq!(a.allocate_one(0), Err(SessionError::PortsExhausted));
}

// ---------------------------------------------------------------- policies

fn group(n: u8, policy: Policy, guard: bool, key: u32) -> SessionGroup<64> {
    let specs: Vec<SessionSpec> = (0..n)
        .map(|i| SessionSpec {
            src_port: 61000 + u16::from(i),
            local_addr: i, // one address per session, so links fail alone
        })
        .collect();
    let cfg = GroupConfig {
        size: n,
        policy,
        reorder_guard: guard,
        health: HealthConfig::DEFAULT,
    };
    SessionGroup::new(&cfg, &specs, key, Some(1000), 0).unwrap()
}

fn policy() -> impl Strategy<Value = Policy> {
    prop_oneof![
        Just(Policy::Hash),
        Just(Policy::RoundRobin),
        Just(Policy::LeastOutstanding),
        Just(Policy::Failover),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Only Up sessions are chosen while any is Up.
    #[test]
    fn policies_pick_only_up(n in 1u8..=64, down in any::<u64>(), p in policy(), guard in any::<bool>(),
                             key in any::<u32>(), sends in prop::collection::vec((any::<u8>(), 0u64..10_000), 0..40)) {
        let mut g = group(n, p, guard, key);
        for (s, b) in sends {
            g.on_send(SessionId(s % n), b, 1, false, 1).unwrap();
        }
        let mut t = 10;
        for i in 0..n {
            if down & (1 << i) != 0 {
                g.on_link(i, false, t);
                t += 1;
            }
        }
        for _ in 0..3 * usize::from(n) {
            let c = g.choose().unwrap();
            if g.up_mask() != 0 {
                prop_assert!(!c.fallback);
                prop_assert_eq!(g.session(c.session).unwrap().state(), State::Up);
            } else {
                prop_assert!(c.fallback);
                // Least recently failed: link i failed at time 10 + rank.
                prop_assert_eq!(c.session, SessionId(0));
            }
        }
    }

    /// Round robin visits every Up session equally (within one) per round.
    #[test]
    fn round_robin_fair(n in 1u8..=64, down in any::<u64>(), k in 1usize..500) {
        let mut g = group(n, Policy::RoundRobin, true, 0);
        for i in 1..n {
            if down & (1 << i) != 0 {
                g.on_link(i, false, 5);
            }
        }
        let mut count = vec![0usize; usize::from(n)];
        for _ in 0..k {
            count[g.choose().unwrap().session.index()] += 1;
        }
        let up: Vec<usize> = (0..usize::from(n)).filter(|&i| g.up_mask() & (1 << i) != 0).collect();
        let max = up.iter().map(|&i| count[i]).max().unwrap();
        let min = up.iter().map(|&i| count[i]).min().unwrap();
        prop_assert!(max - min <= 1, "{:?}", count);
        prop_assert_eq!(up.iter().map(|&i| count[i]).sum::<usize>(), k);
    }

    /// Least-outstanding picks an Up session with the minimum outstanding
    /// bytes.
    #[test]
    fn least_outstanding_min(n in 1u8..=64, down in any::<u64>(),
                             sends in prop::collection::vec((any::<u8>(), 0u64..100_000), 0..100)) {
        let mut g = group(n, Policy::LeastOutstanding, false, 0);
        for (s, b) in sends {
            g.on_send(SessionId(s % n), b, 1, false, 1).unwrap();
        }
        for i in 1..n {
            if down & (1 << i) != 0 {
                g.on_link(i, false, 5);
            }
        }
        let c = g.choose().unwrap();
        let min = g.sessions().iter().filter(|s| s.state() == State::Up).map(|s| s.outstanding_bytes()).min().unwrap();
        prop_assert_eq!(g.session(c.session).unwrap().outstanding_bytes(), min);
    }

    /// Hash is stable per QP and depends only on the key and the Up set.
    #[test]
    fn hash_stable(n in 1u8..=64, key in any::<u32>(), k in 1usize..50) {
        let mut g = group(n, Policy::Hash, false, key);
        let first = g.choose().unwrap().session;
        prop_assert_eq!(first.index(), key as usize % usize::from(n));
        for _ in 0..k {
            prop_assert_eq!(g.choose().unwrap().session, first);
        }
        let mut g2 = group(n, Policy::Hash, false, key);
        prop_assert_eq!(g2.choose().unwrap().session, first);
    }
}

#[test]
fn hash_spreads_qps() {
    let mut seen = HashSet::new();
    for lqpn in 17..81u32 {
        let mut g = group(4, Policy::Hash, true, calc_flow_label(lqpn, 0x99));
        seen.insert(g.choose().unwrap().session);
    }
    assert_eq!(seen.len(), 4);
}

#[test]
fn failover_policy_reverts_when_idle() {
    let mut g = group(3, Policy::Failover, true, 0);
    assert_eq!(g.choose().unwrap().session, SessionId(0));
    g.on_link(0, false, 10);
    assert_eq!(g.choose().unwrap().session, SessionId(1));
    g.on_link(0, true, 20);
    let r = g.poll(20);
    assert_eq!(r.duplicate_probes, 1);
    assert!(g.on_probe_reply(SessionId(0), 30).unwrap());
    assert_eq!(g.choose().unwrap().session, SessionId(0));
}

#[test]
fn reorder_guard_sticks_while_busy() {
    let mut g = group(4, Policy::RoundRobin, true, 0);
    let a = g.choose().unwrap().session;
    g.on_send(a, 100, 1, false, 0).unwrap();
    assert_eq!(g.choose().unwrap().session, a);
    g.forget(a, 100);
    g.on_ack(a, Some(10), 5).unwrap();
    assert_ne!(g.choose().unwrap().session, a);
}

/// RETRY_EXC only when every session has exhausted its budget: with
/// `retry_cnt` r and N sessions that never make progress, exactly
/// N x (r + 1) timeouts pass before the error.
#[test]
fn retry_exceeded_needs_every_session() {
    for n in 1u8..=4 {
        for r in 0u8..=3 {
            let mut cfg = GroupConfig::DEFAULT;
            cfg.health.retry_cnt = r;
            cfg.policy = Policy::Failover;
            let specs: Vec<SessionSpec> = (0..n)
                .map(|i| SessionSpec {
                    src_port: 61000 + u16::from(i),
                    local_addr: 0,
                })
                .collect();
            let mut g = SessionGroup::<8>::new(&cfg, &specs, 0, Some(100), 0).unwrap();
            let mut on = g.choose().unwrap().session;
            g.on_send(on, 1, 1, false, 0).unwrap();
            let mut t = 0;
            let mut timeouts = 0u32;
            loop {
                t += 100;
                timeouts += 1;
                match g.on_timeout(on, t) {
                    Ok(a) => {
                        on = a.resend_on;
                        assert!(!g.session(on).unwrap().health().is_exhausted());
                        g.on_send(on, 1, 1, true, t).unwrap();
                    }
                    Err(e) => {
                        assert_eq!(e, SessionError::RetryExceeded);
                        break;
                    }
                }
                assert!(timeouts < 1000);
            }
            assert_eq!(timeouts, u32::from(n) * (u32::from(r) + 1), "n {n} r {r}");
            assert!(g.retry_exceeded());
        }
    }
}

/// retry_cnt 7 never runs out (rxe semantics).
#[test]
fn retry_cnt_7_is_unlimited() {
    let mut g = group(1, Policy::Hash, true, 0);
    for i in 1..1000 {
        assert!(g.on_timeout(SessionId(0), i * 100).is_ok());
    }
}

// ---------------------------------------------------------------- timing

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Drive a two-session group's health machine with a QP timer that
    /// fires up to `tick` late: the failed session is charged until it goes
    /// Down, and the resend lands on the live session within 3 x RTO of the
    /// failure (defaults: threshold 2), for any RTT + 2 tick <= RTO.
    #[test]
    fn failover_within_three_rto(rto in 10u64..1_000_000, tick_frac in 0u64..=100, rtt_frac in 0u64..=100,
                                 fail_at in 0u64..10_000_000, late in prop::collection::vec(0u64..=100, 4)) {
        let tick = rto * tick_frac / 400; // <= rto / 4
        let rtt = (rto - 2 * tick) * rtt_frac / 100;
        prop_assume!(rtt + 2 * tick <= rto);
        let mut g = group(2, Policy::Failover, true, 0);
        // Traffic on session 0 up to the failure; the last ACK progress
        // (which re-arms the timer) is at most one RTT after it.
        g.on_send(SessionId(0), 4096, 4, false, fail_at.saturating_sub(rtt)).unwrap();
        let armed = fail_at + rtt;
        g.on_ack(SessionId(0), None, armed).unwrap();
        let mut deadline = armed + rto;
        let mut t;
        let mut i = 0;
        loop {
            t = deadline + tick * late[i % late.len()] / 100;
            i += 1;
            prop_assert!(g.poll(t).resend_on.is_none() || g.session(SessionId(0)).unwrap().state() != State::Up);
            let a = g.on_timeout(SessionId(0), t).unwrap();
            if a.failed_over {
                prop_assert_eq!(a.resend_on, SessionId(1));
                break;
            }
            g.on_send(a.resend_on, 4096, 4, true, t).unwrap();
            deadline = t + rto;
        }
        prop_assert!(t - fail_at <= failover_bound_us(rto, 2, tick, rtt));
        prop_assert!(t - fail_at <= 3 * rto, "failover {} > 3 x {}", t - fail_at, rto);
    }
}

#[test]
fn bounds() {
    assert_eq!(failover_bound_us(1000, 2, 100, 200), 2400);
    assert_eq!(return_bound_us(1000, 10_000, 200, 100), 11_400);
    assert_eq!(probe_psn(Psn::new(5)), Psn::new(4));
}

// ---------------------------------------------------------------- receiver

#[test]
fn sroce_peer_any_session() {
    let l = [
        NetAddr::from_v4([10, 0, 0, 1]),
        NetAddr::from_v4([10, 0, 1, 1]),
    ];
    let r = [
        NetAddr::from_v4([10, 0, 0, 2]),
        NetAddr::from_v4([10, 0, 1, 2]),
    ];
    let mut f = ReceiveFilter::<4, 2>::sroce(&l, &r);
    let t = |s: usize, d: usize, sport: u16| FiveTuple {
        src: r[s],
        dst: l[d],
        sport,
        dport: 4791,
    };
    assert_eq!(
        f.accept(&t(0, 0, 61000), 10),
        Verdict::Accept {
            rx_session: Some(0)
        }
    );
    assert_eq!(
        f.accept(&t(1, 1, 61001), 10),
        Verdict::Accept {
            rx_session: Some(1)
        }
    );
    assert_eq!(
        f.accept(&t(0, 0, 61000), 10),
        Verdict::Accept {
            rx_session: Some(0)
        }
    );
    // Table full: still accepted, counted apart.
    assert_eq!(
        f.accept(&t(1, 0, 61002), 10),
        Verdict::Accept { rx_session: None }
    );
    assert_eq!(f.rx_sessions()[0].packets, 2);
    assert_eq!(f.other_packets(), 1);
    let stranger = FiveTuple {
        src: NetAddr::from_v4([10, 9, 9, 9]),
        ..t(0, 0, 61000)
    };
    assert!(matches!(f.accept(&stranger, 1), Verdict::Reject(_)));
}

// ---------------------------------------------------------------- simulation

const RTO: u64 = 1000;
const TICK: u64 = 100;
const PKT: u64 = 1024;
const WINDOW: usize = 8;
const PSN0: u32 = 0xFF_FF00; // wraps during the run

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Pkt {
    /// A request packet of message `msg`.
    Data {
        psn: u32,
        last: bool,
        msg: usize,
    },
    /// Duplicate zero-length WRITE probe.
    Probe {
        psn: u32,
    },
    Ack {
        psn: u32,
    },
    Nak {
        psn: u32,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    ToResponder(usize, Pkt),
    ToRequester(usize, Pkt),
    Tick,
}

struct Msg {
    first: Psn,
    npkts: u32,
    session: SessionId,
    once: bool,
    sent_at: u64,
    post_at: u64,
}

impl Msg {
    fn last(&self) -> Psn {
        self.first + (self.npkts - 1)
    }
    fn bytes(&self) -> u64 {
        u64::from(self.npkts) * PKT
    }
}

struct Sim {
    now: u64,
    seq: u64,
    q: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    delay: [u64; 2],
    down: (u64, u64),
    group: SessionGroup<2>,
    msgs: Vec<Msg>,
    next: usize,
    oldest: usize,
    deadline: Option<u64>,
    started_retry: bool,
    probe: Option<(SessionId, Psn, u64)>,
    last_resend: Option<u64>,
    // responder
    epsn: Psn,
    nak_sent: bool,
    delivered: Vec<usize>,
    // observations
    failover_at: Option<u64>,
    s0_busy_at_fail: Option<u64>,
    s0_up_again: Option<u64>,
    canaries: u32,
    dup_probes: u32,
    link_notify: bool,
}

impl Sim {
    fn new(policy: Policy, guard: bool, link_notify: bool, steady: bool, nmsgs: usize) -> Sim {
        let cfg = GroupConfig {
            size: 2,
            policy,
            reorder_guard: guard,
            health: HealthConfig {
                probe_interval_us: 5_000,
                ..HealthConfig::DEFAULT
            },
        };
        let specs = [
            SessionSpec {
                src_port: roce_v2_sport(0, 0x11, 0x12),
                local_addr: 0,
            },
            SessionSpec {
                src_port: 61000,
                local_addr: 1,
            },
        ];
        let group = SessionGroup::new(&cfg, &specs, 0, Some(RTO), 0).unwrap();
        let mut msgs = Vec::new();
        let mut psn = Psn::new(PSN0);
        for i in 0..nmsgs {
            let npkts = 1 + (i as u32 * 7 % 4);
            // Bursts of 40 messages every 4 ms (busy and idle phases), or
            // one message every 60 us (never idle for long).
            let post_at = if steady {
                i as u64 * 60
            } else {
                (i as u64 / 40) * 4_000
            };
            msgs.push(Msg {
                first: psn,
                npkts,
                session: SessionId(0),
                once: true,
                sent_at: 0,
                post_at,
            });
            psn += npkts;
        }
        let mut s = Sim {
            now: 0,
            seq: 0,
            q: BinaryHeap::new(),
            delay: [50, 80],
            down: (20_200, 60_000),
            group,
            msgs,
            next: 0,
            oldest: 0,
            deadline: None,
            started_retry: false,
            probe: None,
            last_resend: None,
            epsn: Psn::new(PSN0),
            nak_sent: false,
            delivered: Vec::new(),
            failover_at: None,
            s0_busy_at_fail: None,
            s0_up_again: None,
            canaries: 0,
            dup_probes: 0,
            link_notify,
        };
        s.at(0, Ev::Tick);
        s
    }

    fn at(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        self.q.push(Reverse((t, self.seq, ev)));
    }

    fn path_up(&self, path: usize, t: u64) -> bool {
        path != 0 || t < self.down.0 || t >= self.down.1
    }

    /// Sends on path `path`: lost if the path is down at send or arrival.
    fn transmit(&mut self, path: usize, to_responder: bool, p: Pkt) {
        let arrive = self.now + self.delay[path];
        if self.path_up(path, self.now) && self.path_up(path, arrive) {
            let ev = if to_responder {
                Ev::ToResponder(path, p)
            } else {
                Ev::ToRequester(path, p)
            };
            self.at(arrive, ev);
        }
    }

    fn send_msg(&mut self, m: usize, on: SessionId, retransmit: bool) {
        let msg = &mut self.msgs[m];
        msg.session = on;
        if retransmit {
            msg.once = false;
        } else {
            msg.sent_at = self.now;
        }
        let (first, n, bytes) = (msg.first, msg.npkts, msg.bytes());
        for k in 0..n {
            let p = Pkt::Data {
                psn: (first + k).value(),
                last: k + 1 == n,
                msg: m,
            };
            self.transmit(on.index(), true, p);
        }
        self.group
            .on_send(on, bytes, n, retransmit, self.now)
            .unwrap();
        if self.deadline.is_none() {
            self.deadline = Some(self.now + RTO);
        }
    }

    fn go_back(&mut self, on: SessionId, failed_over: bool) {
        if failed_over
            && on != SessionId(0)
            && self.now >= self.down.0
            && self.failover_at.is_none()
        {
            self.failover_at = Some(self.now);
        }
        if self.oldest < self.next {
            self.last_resend = Some(self.now);
        }
        for m in self.oldest..self.next {
            self.send_msg(m, on, true);
        }
        self.deadline = Some(self.now + RTO);
    }

    fn send_new(&mut self) {
        while self.next < self.msgs.len()
            && self.next - self.oldest < WINDOW
            && self.msgs[self.next].post_at <= self.now
        {
            let c = self
                .group
                .choose()
                .expect("no RETRY_EXC while a path is alive");
            if c.canary {
                self.canaries += 1;
            }
            let m = self.next;
            self.next += 1;
            self.send_msg(m, c.session, false);
        }
    }

    fn complete_through(&mut self, upto: Psn, inclusive: bool) -> bool {
        let mut progress = false;
        while self.oldest < self.next {
            let last = self.msgs[self.oldest].last();
            let done = if inclusive {
                !last.is_after(upto)
            } else {
                last.is_before(upto)
            };
            if !done {
                break;
            }
            let m = &self.msgs[self.oldest];
            let rtt = m.once.then(|| (self.now - m.sent_at) as u32);
            let (s, b) = (m.session, m.bytes());
            self.group.forget(s, b);
            if self.group.on_ack(s, rtt, self.now).unwrap()
                && s == SessionId(0)
                && self.now >= self.down.1
            {
                self.s0_up_again.get_or_insert(self.now);
            }
            self.oldest += 1;
            progress = true;
        }
        if progress {
            self.started_retry = false;
            self.deadline = (self.oldest < self.next).then_some(self.now + RTO);
        }
        progress
    }

    fn responder(&mut self, path: usize, p: Pkt) {
        let (psn, last, msg) = match p {
            Pkt::Data { psn, last, msg } => (Psn::new(psn), last, Some(msg)),
            Pkt::Probe { psn } => (Psn::new(psn), true, None),
            _ => unreachable!(),
        };
        if let (true, Some(m)) = (psn == self.epsn, msg) {
            self.epsn = self.epsn.next();
            self.nak_sent = false;
            if last {
                self.delivered.push(m);
                self.transmit(path, false, Pkt::Ack { psn: psn.value() });
            }
        } else if psn.is_before(self.epsn) {
            // Duplicate (C9-105): re-ACKed with its own PSN, as sroce's
            // responder does (rxe re-ACKs the last PSN received).
            self.transmit(path, false, Pkt::Ack { psn: psn.value() });
        } else if !self.nak_sent {
            self.nak_sent = true;
            let e = self.epsn;
            self.transmit(path, false, Pkt::Nak { psn: e.value() });
        }
    }

    fn requester(&mut self, p: Pkt) {
        match p {
            Pkt::Ack { psn } => {
                let a = Psn::new(psn);
                if std::env::var("SIMTRACE").is_ok() && self.probe.is_some() {
                    eprintln!(
                        "t={} ack {:#x} probe {:?} out {}",
                        self.now,
                        psn,
                        self.probe,
                        self.group.has_outstanding()
                    );
                }
                self.complete_through(a, true);
                if let Some((s, pp, sent)) = self.probe {
                    let resend_near = self.last_resend.is_some_and(|r| r + RTO > sent);
                    if probe_reply_matches(pp, a, resend_near) {
                        self.probe = None;
                        if self.group.on_probe_reply(s, self.now).unwrap()
                            && s == SessionId(0)
                            && self.now >= self.down.1
                        {
                            self.s0_up_again.get_or_insert(self.now);
                        }
                    }
                }
            }
            Pkt::Nak { psn } => {
                let e = Psn::new(psn);
                self.complete_through(e, false);
                if self.oldest < self.next
                    && !self.started_retry
                    && self.msgs[self.oldest].first == e
                {
                    self.started_retry = true;
                    let s = self.msgs[self.oldest].session;
                    let a = self.group.on_sequence_nak(s, self.now).unwrap();
                    self.go_back(a.resend_on, a.failed_over || s != a.resend_on);
                }
            }
            _ => unreachable!(),
        }
        self.send_new();
    }

    fn tick(&mut self) {
        if self.now == self.down.0
            && self.group.session(SessionId(0)).unwrap().outstanding_msgs() > 0
        {
            self.s0_busy_at_fail = Some(self.now);
        }
        if self.link_notify && self.now == self.down.0 {
            let r = self.group.on_link(0, false, self.now);
            if let Some(on) = r.resend_on {
                self.go_back(on, true);
            }
        }
        if self.link_notify && self.now == self.down.1 {
            self.group.on_link(0, true, self.now);
        }
        let r = self.group.poll(self.now);
        if std::env::var("SIMTRACE").is_ok() && r != Default::default() {
            eprintln!(
                "t={} poll {:?} s0 {:?} out {}",
                self.now,
                r,
                self.group.session(SessionId(0)).unwrap().state(),
                self.group.has_outstanding()
            );
        }
        assert!(!r.retry_exceeded);
        if let Some(on) = r.resend_on {
            self.go_back(on, true);
        }
        for i in 0..2u8 {
            if r.duplicate_probes & (1 << i) != 0 {
                let base = if self.oldest < self.msgs.len() {
                    self.msgs[self.oldest].first
                } else {
                    self.msgs.last().unwrap().last().next()
                };
                let pp = probe_psn(base);
                self.probe = Some((SessionId(i), pp, self.now));
                self.dup_probes += 1;
                self.transmit(usize::from(i), true, Pkt::Probe { psn: pp.value() });
            }
        }
        if let Some(d) = self.deadline {
            if d <= self.now && self.oldest < self.next {
                let s = self.msgs[self.oldest].session;
                let a = self
                    .group
                    .on_timeout(s, self.now)
                    .expect("no RETRY_EXC while a path is alive");
                self.started_retry = false;
                self.go_back(a.resend_on, a.failed_over);
            }
        }
        self.send_new();
        if self.s0_up_again.is_none()
            && self.now >= self.down.1
            && self.group.session(SessionId(0)).unwrap().state() == State::Up
        {
            self.s0_up_again = Some(self.now);
        }
        if self.oldest < self.msgs.len() || self.now < self.down.1 + 20_000 {
            self.at(self.now + TICK, Ev::Tick);
        }
    }

    fn run(&mut self) {
        while let Some(Reverse((t, _, ev))) = self.q.pop() {
            assert!(t >= self.now);
            self.now = t;
            match ev {
                Ev::ToResponder(path, p) => self.responder(path, p),
                Ev::ToRequester(_, p) => self.requester(p),
                Ev::Tick => self.tick(),
            }
            assert!(self.now < 10_000_000, "simulation did not finish");
        }
    }
}

fn simulate(policy: Policy, guard: bool, link_notify: bool) -> Sim {
    simulate_with(policy, guard, link_notify, false, 1000)
}

fn simulate_with(policy: Policy, guard: bool, link_notify: bool, steady: bool, n: usize) -> Sim {
    let mut s = Sim::new(policy, guard, link_notify, steady, n);
    s.run();
    // Every message delivered exactly once, in order.
    assert_eq!(s.delivered, (0..n).collect::<Vec<_>>(), "{policy:?}");
    assert_eq!(s.oldest, n);
    let g = &s.group;
    let (c0, c1) = (
        *g.session(SessionId(0)).unwrap().counters(),
        *g.session(SessionId(1)).unwrap().counters(),
    );
    // Failover within 3 x RTO of the failure (when session 0 carried data).
    if s.s0_busy_at_fail.is_some() || link_notify {
        let f = s.failover_at.expect("failover happened");
        let limit = if link_notify { 0 } else { 3 * RTO };
        assert!(
            f - s.down.0 <= limit,
            "{policy:?}: failover after {} us",
            f - s.down.0
        );
        assert!(c0.downs >= 1);
    }
    // Session 0 returns after the path recovers, within the bound.
    let up = s.s0_up_again.expect("session 0 came back");
    let bound = return_bound_us(RTO, 5_000, 2 * s.delay[0], TICK);
    assert!(
        up - s.down.1 <= bound,
        "{policy:?}: back after {} us",
        up - s.down.1
    );
    assert_eq!(g.session(SessionId(0)).unwrap().state(), State::Up);
    assert_eq!(g.session(SessionId(1)).unwrap().state(), State::Up);
    // Counters moved.
    assert!(c1.tx_packets > 0 && c1.tx_bytes > 0 && c1.acked_messages > 0);
    assert!(c0.tx_packets > 0 && c0.acked_messages > 0);
    assert!(c0.retransmits + c1.retransmits > 0);
    assert!(c0.probes > 0, "{c0:?}");
    // Without link-state, the dead path is probed (and fails) meanwhile.
    assert!(link_notify || c0.probes_failed > 0, "{c0:?}");
    assert!(g.session(SessionId(0)).unwrap().rtt().samples() > 0);
    assert!(g.session(SessionId(1)).unwrap().rtt().samples() > 0);
    assert!(!g.has_outstanding());
    eprintln!(
        "{policy:?} guard {guard} link {link_notify}: busy {:?} failover +{:?} us, back +{} us, \
         canaries {}, dup probes {}, s0 {c0:?}, s1 {c1:?}",
        s.s0_busy_at_fail.is_some(),
        s.failover_at.map(|f| f - s.down.0),
        up - s.down.1,
        s.canaries,
        s.dup_probes
    );
    s
}

#[test]
fn sim_failover_policy() {
    let s = simulate(Policy::Failover, true, false);
    assert!(s.s0_busy_at_fail.is_some());
    assert!(s.dup_probes + s.canaries > 0);
}

#[test]
fn sim_hash_policy() {
    simulate(Policy::Hash, true, false);
}

#[test]
fn sim_round_robin_unguarded() {
    simulate(Policy::RoundRobin, false, false);
}

#[test]
fn sim_least_outstanding_unguarded() {
    simulate(Policy::LeastOutstanding, false, false);
}

#[test]
fn sim_round_robin_guarded() {
    simulate(Policy::RoundRobin, true, false);
}

#[test]
fn sim_link_down_immediate() {
    simulate(Policy::Failover, true, true);
}

/// Steady traffic: probes of the dead path are canaries (the QP is busy),
/// each lost canary is caught by a sequence NAK and resent on the live
/// session; the first canary after recovery brings session 0 back.
#[test]
fn sim_steady_canaries() {
    for (p, guard) in [
        (Policy::Failover, true),
        (Policy::RoundRobin, false),
        (Policy::LeastOutstanding, false),
    ] {
        let s = simulate_with(p, guard, false, true, 1500);
        assert!(s.canaries > 0, "{p:?}");
    }
}
