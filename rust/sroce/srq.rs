// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues: a ring of receive WQEs shared with the owning
//! process, consumed by whichever of its queue pairs receives a message.

use super::{device::SroceDevice, limits};
use crate::rdma::{
    device::Device,
    queue::UserProducerQueue,
    rxe_abi::{CreateSrqResp, RECV_WQE_HEADER, SGE_SIZE},
    srq::{Srq, SrqAttrs, SrqRequest},
};
use kernel::{new_mutex, prelude::*, sync::Mutex};

/// sroce's state of one shared receive queue.
#[pin_data]
pub(crate) struct SroceSrq {
    #[pin]
    attrs: Mutex<SrqAttrs>,
    ring: UserProducerQueue,
}

pub(crate) fn create(
    dev: &Device<SroceDevice>,
    req: SrqRequest<'_, SroceDevice>,
) -> Result<(impl PinInit<SroceSrq, Error>, SrqAttrs)> {
    // Kernel consumers post through `post_srq_recv`, which arrives with the
    // data path.
    let Some((uctx, udata)) = req.user.as_ref() else {
        return Err(EOPNOTSUPP);
    };
    let a = req.attrs;
    if a.max_wr == 0
        || a.max_wr > limits::MAX_SRQ_WR
        || a.max_sge > limits::MAX_SRQ_SGE
        || a.limit > a.max_wr
    {
        return Err(EINVAL);
    }
    if udata.out_len() < core::mem::size_of::<CreateSrqResp>() {
        return Err(EINVAL);
    }
    let sges = a.max_sge.max(1);
    let (ring, mi) = UserProducerQueue::new(
        a.max_wr,
        RECV_WQE_HEADER + sges as usize * SGE_SIZE,
        Some(*uctx),
    )?;
    let granted = SrqAttrs {
        max_wr: ring.capacity(),
        max_sge: (((ring.elem_size() - RECV_WQE_HEADER) / SGE_SIZE) as u32)
            .min(limits::MAX_SRQ_SGE),
        limit: a.limit,
    };
    dev.data().srqs.take()?;
    let resp = CreateSrqResp {
        mi: mi.into(),
        srq_num: 0,
        reserved: 0,
    };
    if let Err(e) = udata.write(&resp) {
        dev.data().srqs.give();
        return Err(e);
    }
    Ok((
        try_pin_init!(SroceSrq {
            attrs <- new_mutex!(granted, "sroce::srq"),
            ring,
        }),
        granted,
    ))
}

pub(crate) fn destroy(srq: &Srq<SroceDevice>) {
    srq.device().data().srqs.give();
}

pub(crate) fn set_limit(srq: &Srq<SroceDevice>, limit: u32) -> Result {
    if limit > srq.data().ring.capacity() {
        return Err(EINVAL);
    }
    srq.data().attrs.lock().limit = limit;
    Ok(())
}

pub(crate) fn attrs(srq: &Srq<SroceDevice>) -> SrqAttrs {
    *srq.data().attrs.lock()
}
