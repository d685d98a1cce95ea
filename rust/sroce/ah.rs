// SPDX-License-Identifier: GPL-2.0

//! Address handles: a resolved destination, numbered so that userspace can
//! name it in a UD send WQE.

use super::device::SroceDevice;
use crate::rdma::{
    ah::Ah, av::AddressVector, device::Device, pd::Pd, rxe_abi::CreateAhResp, udata::UData,
};
use kernel::prelude::*;

/// An address handle as WQEs find it by number: its address, usable only
/// by QPs of its protection domain (as on a NIC, a number alone grants
/// nothing).
#[derive(Clone, Copy)]
pub(crate) struct AhEntry {
    av: AddressVector,
    /// The PD's identity (its address), as memory regions record it.
    pd: usize,
}

impl AhEntry {
    /// The address, if `pd` is the AH's protection domain.
    pub(crate) fn address_for(&self, pd: &Pd<SroceDevice>) -> Option<AddressVector> {
        (self.pd == core::ptr::from_ref(pd) as usize).then_some(self.av)
    }
}

/// sroce's state of one address handle.
pub(crate) struct SroceAh {
    av: AddressVector,
    num: u32,
}

pub(crate) fn create(
    dev: &Device<SroceDevice>,
    pd: &Pd<SroceDevice>,
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
    let entry = AhEntry {
        av,
        pd: core::ptr::from_ref(pd) as usize,
    };
    if let Err(e) = dev.data().insert_ah(num, entry, gfp) {
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
