// SPDX-License-Identifier: GPL-2.0

//! Safe abstractions over the kernel's RDMA core for a software RoCE provider.
//!
//! C headers: `include/rdma/ib_verbs.h`, `include/rdma/rdma_netlink.h`.
//!
//! This is the only part of sroce that touches raw bindings or contains
//! `unsafe`. The driver (`crate::sroce`) sees typed values: [`device::Device`]
//! with its per-device data, [`netdev::NetDevice`] references, attribute
//! structs it fills in, and the link/notifier registrations it owns.

pub(crate) mod access;
pub(crate) mod ah;
pub(crate) mod attr;
pub(crate) mod av;
pub(crate) mod bh_lock;
pub(crate) mod bindings;
pub(crate) mod context_slot;
pub(crate) mod cq;
pub(crate) mod device;
pub(crate) mod devname;
pub(crate) mod key_slots;
pub(crate) mod kthread_worker;
pub(crate) mod kwr;
pub(crate) mod link;
pub(crate) mod mr;
pub(crate) mod mr_fast;
pub(crate) mod mr_memory;
pub(crate) mod mr_odp;
pub(crate) mod mr_odp_implicit;
pub(crate) mod mr_table;
pub(crate) mod mw;
pub(crate) mod netdev;
pub(crate) mod notifier;
pub(crate) mod object;
pub(crate) mod pd;
pub(crate) mod qp;
pub(crate) mod queue;
pub(crate) mod restrack;
pub(crate) mod rxe_abi;
pub(crate) mod srq;
pub(crate) mod stats;
pub(crate) mod ucontext;
pub(crate) mod udata;
pub(crate) mod umem;
pub(crate) mod wc;
pub(crate) mod work;
pub(crate) mod wqe;
