// SPDX-License-Identifier: GPL-2.0

//! Address vectors: where a RoCE packet goes, taken from the core's
//! `rdma_ah_attr` (which the core has already resolved: source GID entry and
//! destination MAC).

use super::bindings;
use kernel::prelude::*;

/// A resolved RoCE destination.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct AddressVector {
    /// Destination GID (an IPv6 address, or an IPv4-mapped one).
    pub(crate) dgid: [u8; 16],
    /// Source GID.
    pub(crate) sgid: [u8; 16],
    /// Index of the source GID in the port's table.
    pub(crate) sgid_index: u8,
    /// IPv6 flow label (20 bits).
    pub(crate) flow_label: u32,
    /// IP TTL / hop limit.
    pub(crate) hop_limit: u8,
    /// IP traffic class / DSCP+ECN.
    pub(crate) traffic_class: u8,
    /// Destination MAC address.
    pub(crate) dmac: [u8; 6],
    /// Service level.
    pub(crate) sl: u8,
    /// RoCE v1 (the source GID is of that type): Ethernet frames with a
    /// GRH, no IP or UDP.
    pub(crate) roce_v1: bool,
}

impl AddressVector {
    /// Reads a RoCE address from the core's attribute.
    ///
    /// RoCE needs a GRH and a source GID of type RoCE v2 or (on a device
    /// that has them) RoCE v1; anything else is `EINVAL`.
    pub(super) fn from_ah_attr(a: &bindings::rdma_ah_attr) -> Result<Self> {
        if a.type_ != bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE
            || u32::from(a.ah_flags) & bindings::ib_ah_flags_IB_AH_GRH == 0
            || a.grh.sgid_attr.is_null()
        {
            return Err(EINVAL);
        }
        // SAFETY: the core holds a reference on the source GID entry for as
        // long as the attribute lives (our caller's scope).
        let sgid_attr = unsafe { &*a.grh.sgid_attr };
        let roce_v1 = match sgid_attr.gid_type {
            bindings::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP => false,
            bindings::ib_gid_type_IB_GID_TYPE_ROCE => true,
            _ => return Err(EINVAL),
        };
        // SAFETY: `ib_gid` is a union of byte views of the same 16 bytes.
        let (dgid, sgid) = unsafe { (a.grh.dgid.raw, sgid_attr.gid.raw) };
        // SAFETY: for RoCE attributes the `roce` member is the active one.
        let dmac = unsafe { a.__bindgen_anon_1.roce.dmac };
        Ok(Self {
            dgid,
            sgid,
            sgid_index: a.grh.sgid_index,
            flow_label: a.grh.flow_label,
            hop_limit: a.grh.hop_limit,
            traffic_class: a.grh.traffic_class,
            dmac,
            sl: a.sl,
            roce_v1,
        })
    }

    /// Writes the address back for a query (without a GID entry reference:
    /// queries report the index).
    pub(super) fn write_ah_attr(&self, port: u32, out: &mut bindings::rdma_ah_attr) {
        out.type_ = bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
        out.ah_flags = bindings::ib_ah_flags_IB_AH_GRH as u8;
        out.port_num = port;
        out.sl = self.sl;
        out.grh.dgid.raw = self.dgid;
        out.grh.sgid_index = self.sgid_index;
        out.grh.flow_label = self.flow_label;
        out.grh.hop_limit = self.hop_limit;
        out.grh.traffic_class = self.traffic_class;
        out.__bindgen_anon_1.roce.dmac = self.dmac;
    }
}
