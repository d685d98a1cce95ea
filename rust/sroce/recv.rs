// SPDX-License-Identifier: GPL-2.0

//! What sroce does with a received, checked packet: counted by BTH opcode
//! and handed to the queue pair its BTH names.

use super::device::SroceDevice;
use super::io::{counters::Counter, RxPacket};
use super::rc::Queued;
use crate::rdma::device::Device;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::{prelude::*, sync::Arc};
use pin_init::init_array_from_fn;

/// Received packets per BTH opcode.
pub(crate) struct OpcodeCounts {
    counts: [AtomicU64; 256],
}

impl OpcodeCounts {
    /// All zero, in a new `Arc`, initialised in place: 2 KiB of counters
    /// do not belong on a kernel stack.
    pub(crate) fn new_arc() -> Result<Arc<Self>> {
        Arc::init(
            init!(Self {
                counts <- init_array_from_fn(|_| AtomicU64::new(0)),
            }),
            GFP_KERNEL,
        )
    }

    fn inc(&self, opcode: u8) {
        self.counts[usize::from(opcode)].fetch_add(1, Ordering::Relaxed);
    }

    /// `(opcode, count)` for every opcode seen at least once.
    pub(crate) fn nonzero(&self) -> impl Iterator<Item = (u8, u64)> + '_ {
        (0..=u8::MAX)
            .map(|op| (op, self.counts[usize::from(op)].load(Ordering::Relaxed)))
            .filter(|&(_, n)| n != 0)
    }
}

/// The transport engines' entry point for received packets: queued for
/// the destination QP, and handled at once if nothing was queued before;
/// a piece of a segmented datagram that more pieces `followed` waits for
/// the pass its last piece runs. Softirq context.
pub(crate) fn receive(dev: &Device<SroceDevice>, pkt: RxPacket, followed: bool) {
    // A checked packet has at least a BTH, whose first byte is the opcode.
    if let Some(&opcode) = pkt.head().first() {
        dev.data().rx_opcodes.inc(opcode);
    }
    let qp = pkt
        .head()
        .get(5..8)
        .map(|b| u32::from_be_bytes([0, b[0], b[1], b[2]]))
        .and_then(|qpn| dev.data().qp(qpn));
    let counters = &dev.data().io.counters;
    match qp {
        Some(qp) => match qp.queue_rx(pkt, followed) {
            Queued::Lone if qp.receive_now() => counters.inc(Counter::RcvdSoftirqPasses),
            Queued::Held => {
                counters.inc(Counter::RcvdSoftirqPasses);
                counters.inc(Counter::RcvdHeld);
            }
            Queued::Lone | Queued::Behind | Queued::HandedOff => {
                counters.inc(Counter::RcvdWorkerHandoffs)
            }
            Queued::Dropped => counters.inc(Counter::RcvdDropQpFull),
            Queued::Closed => counters.inc(Counter::RcvdDropNoQp),
        },
        None => {
            counters.inc(Counter::RcvdDropNoQp);
            // A drop, freed as one.
            drop(pkt);
        }
    }
}

/// A packet for QP `qpn` was dropped by the receive checks: pieces of a
/// segmented datagram held for it waiting for that one run their pass
/// now. Softirq context.
pub(crate) fn release_held(dev: &Device<SroceDevice>, qpn: u32) {
    if let Some(qp) = dev.data().qp(qpn) {
        // (The held pieces were counted when held.)
        if qp.release_held() {
            let _ = qp.receive_now();
        }
    }
}
