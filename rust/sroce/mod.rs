// SPDX-License-Identifier: GPL-2.0

//! The sroce provider: devices bound to net devices, presenting rxe's
//! userspace ABI so unmodified rdma-core drives them.

pub(crate) mod ah;
pub(crate) mod budget;
pub(crate) mod cq;
pub(crate) mod ctl;
pub(crate) mod debugfs;
pub(crate) mod device;
pub(crate) mod engine_store;
pub(crate) mod events;
pub(crate) mod guid;
pub(crate) mod io;
pub(crate) mod limits;
pub(crate) mod link;
pub(crate) mod mr;
pub(crate) mod odp;
pub(crate) mod pass_threads;
pub(crate) mod qp;
pub(crate) mod qp_res;
pub(crate) mod rc;
pub(crate) mod rc_sessions;
pub(crate) mod rc_timers;
pub(crate) mod recv;
pub(crate) mod session_events;
pub(crate) mod slot_table;
pub(crate) mod srq;
pub(crate) mod ud;
pub(crate) mod ud_sessions;
