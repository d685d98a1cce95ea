// SPDX-License-Identifier: GPL-2.0

//! Address handles: a resolved destination, numbered so that userspace can
//! name it in a UD send WQE.

use super::device::SroceDevice;
use crate::rdma::{ah::Ah, av::AddressVector, device::Device, rxe_abi::CreateAhResp, udata::UData};
use kernel::prelude::*;

/// sroce's state of one address handle.
pub(crate) struct SroceAh {
    av: AddressVector,
    num: u32,
}

pub(crate) fn create(
    dev: &Device<SroceDevice>,
    av: AddressVector,
    udata: Option<UData>,
) -> Result<SroceAh> {
    let num = dev.data().alloc_ah_num()?;
    // User AHs are created in process context; kernel ones may not be.
    let gfp = if udata.is_some() {
        GFP_KERNEL
    } else {
        GFP_ATOMIC
    };
    if let Err(e) = dev.data().insert_ah(num, av, gfp) {
        dev.data().free_ah_num(num);
        return Err(e);
    }
    if let Some(udata) = udata {
        // Older provider libraries send no response buffer and put the
        // whole address into each WQE instead; both work.
        if udata.out_len() >= core::mem::size_of::<CreateAhResp>() {
            let resp = CreateAhResp {
                ah_num: num,
                reserved: 0,
            };
            if let Err(e) = udata.write(&resp) {
                dev.data().remove_ah(num);
                dev.data().free_ah_num(num);
                return Err(e);
            }
        }
    }
    Ok(SroceAh { av, num })
}

impl SroceAh {
    /// The number WQEs name the AH by.
    pub(crate) fn num(&self) -> u32 {
        self.num
    }
}

pub(crate) fn destroy(ah: &Ah<SroceDevice>) {
    ah.device().data().remove_ah(ah.data().num);
    ah.device().data().free_ah_num(ah.data().num);
}

pub(crate) fn address(ah: &Ah<SroceDevice>) -> AddressVector {
    ah.data().av
}
