// SPDX-License-Identifier: GPL-2.0

//! Device and port attributes, as plain Rust values the driver fills in.
//!
//! The `rdma` layer copies them into the C `ib_device_attr` /
//! `ib_port_attr` the core hands to `query_device` / `query_port`.

use super::bindings;

/// `IB_DEVICE_*` capability bits a driver may claim.
pub(crate) mod cap {
    use super::bindings;
    /// Fast-registration MRs, local invalidate, SEND with invalidate.
    pub(crate) const MEM_MGT_EXTENSIONS: u64 =
        bindings::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS as u64;
    /// The responder sends RNR NAKs.
    pub(crate) const RC_RNR_NAK_GEN: u64 =
        bindings::ib_device_cap_flags_IB_DEVICE_RC_RNR_NAK_GEN as u64;
    /// Port active events are generated.
    pub(crate) const PORT_ACTIVE_EVENT: u64 =
        bindings::ib_device_cap_flags_IB_DEVICE_PORT_ACTIVE_EVENT as u64;
    /// Shared receive queues can be resized (`ibv_modify_srq` max_wr).
    pub(crate) const SRQ_RESIZE: u64 = bindings::ib_device_cap_flags_IB_DEVICE_SRQ_RESIZE as u64;
    /// RDMA ATOMIC WRITE (8 bytes stored at once, IBA 1.5).
    pub(crate) const ATOMIC_WRITE: u64 =
        bindings::ib_device_cap_flags_IB_DEVICE_ATOMIC_WRITE as u64;
    /// Memory windows (`ibv_alloc_mw`).
    pub(crate) const MEM_WINDOW: u64 = bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW as u64;
    /// Type 2 windows are type 2B: bound to one queue pair.
    pub(crate) const MEM_WINDOW_TYPE_2B: u64 =
        bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW_TYPE_2B as u64;
    /// The system image GUID is meaningful.
    pub(crate) const SYS_IMAGE_GUID: u64 =
        bindings::ib_device_cap_flags_IB_DEVICE_SYS_IMAGE_GUID as u64;
}

/// Limits and capabilities reported by `query_device` (`ibv_devinfo -v`).
#[derive(Clone, Copy, Default)]
pub(crate) struct DeviceAttr {
    /// System image GUID (network byte order value, as a `u64`).
    pub(crate) sys_image_guid_be: u64,
    /// Largest memory region, in bytes.
    pub(crate) max_mr_size: u64,
    /// Supported page sizes, as a bit mask of sizes.
    pub(crate) page_size_cap: u64,
    /// IEEE OUI of the vendor.
    pub(crate) vendor_id: u32,
    /// Queue pairs.
    pub(crate) max_qp: u32,
    /// Work requests per queue.
    pub(crate) max_qp_wr: u32,
    /// `IB_DEVICE_*` capability bits.
    pub(crate) device_cap_flags: u64,
    /// Scatter/gather entries per send and per receive work request.
    pub(crate) max_sge: u32,
    /// Scatter/gather entries per RDMA READ.
    pub(crate) max_sge_rd: u32,
    /// Completion queues.
    pub(crate) max_cq: u32,
    /// Entries per completion queue.
    pub(crate) max_cqe: u32,
    /// Memory regions.
    pub(crate) max_mr: u32,
    /// Protection domains.
    pub(crate) max_pd: u32,
    /// Outstanding RDMA READ/atomic per QP as responder and as initiator.
    pub(crate) max_qp_rd_atom: u32,
    /// Total responder resources for RDMA READ/atomic.
    pub(crate) max_res_rd_atom: u32,
    /// Shared receive queues.
    pub(crate) max_srq: u32,
    /// Work requests per shared receive queue.
    pub(crate) max_srq_wr: u32,
    /// Scatter/gather entries per shared receive queue work request.
    pub(crate) max_srq_sge: u32,
    /// Address handles.
    pub(crate) max_ah: u32,
    /// Memory windows.
    pub(crate) max_mw: u32,
    /// Pages in one fast-registration page list.
    pub(crate) max_fast_reg_page_list_len: u32,
    /// P_Key table size.
    pub(crate) max_pkeys: u16,
    /// Local CA ACK delay (log2 of 4.096 us units).
    pub(crate) local_ca_ack_delay: u8,
    /// Whether atomics are supported, and how (`IB_ATOMIC_*`).
    pub(crate) atomic_cap_hca: bool,
    /// Whether `rdma link delete` may remove the device.
    pub(crate) allow_user_unregister: bool,
    /// On-demand paging: regions registered with `IB_ACCESS_ON_DEMAND`
    /// for the operations of RC (SEND, receive, WRITE, READ, atomics,
    /// shared receive queues) and UD (SEND, receive). Only where the core
    /// has it (`CONFIG_INFINIBAND_ON_DEMAND_PAGING`).
    pub(crate) on_demand_paging: bool,
}

impl DeviceAttr {
    /// Copies the values into the C struct the core passed in.
    pub(super) fn write_to(&self, out: &mut bindings::ib_device_attr) {
        out.sys_image_guid = self.sys_image_guid_be;
        out.max_mr_size = self.max_mr_size;
        out.page_size_cap = self.page_size_cap;
        out.vendor_id = self.vendor_id;
        out.max_qp = self.max_qp;
        out.max_qp_wr = self.max_qp_wr;
        out.device_cap_flags = self.device_cap_flags;
        out.max_send_sge = self.max_sge;
        out.max_recv_sge = self.max_sge;
        out.max_sge_rd = self.max_sge_rd;
        out.max_cq = self.max_cq;
        out.max_cqe = self.max_cqe;
        out.max_mr = self.max_mr;
        out.max_pd = self.max_pd;
        out.max_qp_rd_atom = self.max_qp_rd_atom;
        out.max_qp_init_rd_atom = self.max_qp_rd_atom;
        out.max_res_rd_atom = self.max_res_rd_atom;
        out.max_srq = self.max_srq;
        out.max_srq_wr = self.max_srq_wr;
        out.max_srq_sge = self.max_srq_sge;
        out.max_ah = self.max_ah;
        out.max_mw = self.max_mw;
        out.max_fast_reg_page_list_len = self.max_fast_reg_page_list_len;
        out.max_pkeys = self.max_pkeys;
        out.local_ca_ack_delay = self.local_ca_ack_delay;
        out.atomic_cap = if self.atomic_cap_hca {
            bindings::ib_atomic_cap_IB_ATOMIC_HCA
        } else {
            bindings::ib_atomic_cap_IB_ATOMIC_NONE
        };
        if self.on_demand_paging && super::mr_odp::available() {
            out.kernel_cap_flags |= u64::from(bindings::ib_kernel_cap_flags_IBK_ON_DEMAND_PAGING);
            let odp = &mut out.odp_caps;
            odp.general_caps = u64::from(
                bindings::ib_odp_general_cap_bits_IB_ODP_SUPPORT
                    | bindings::ib_odp_general_cap_bits_IB_ODP_SUPPORT_IMPLICIT,
            );
            let send = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SEND;
            let recv = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_RECV;
            let rc = send
                | recv
                | bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_WRITE
                | bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_READ
                | bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_ATOMIC
                | bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SRQ_RECV;
            odp.per_transport_caps.rc_odp_caps = rc;
            odp.per_transport_caps.ud_odp_caps = send | recv;
        }
        if self.allow_user_unregister {
            out.kernel_cap_flags |= u64::from(bindings::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG);
        }
    }
}

/// Port state as the verbs report it.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) enum PortState {
    /// No usable link.
    #[default]
    Down,
    /// Link up and usable.
    Active,
}

/// Physical port state (`IB_PORT_PHYS_STATE_*`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) enum PhysState {
    /// Administratively down.
    #[default]
    Disabled,
    /// Up, waiting for carrier.
    Polling,
    /// Carrier present.
    LinkUp,
}

/// IB MTU values (`enum ib_mtu`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[repr(u32)]
pub(crate) enum IbMtu {
    /// 256 bytes.
    #[default]
    Mtu256 = 1,
    /// 512 bytes.
    Mtu512 = 2,
    /// 1024 bytes.
    Mtu1024 = 3,
    /// 2048 bytes.
    Mtu2048 = 4,
    /// 4096 bytes.
    Mtu4096 = 5,
}

impl IbMtu {
    /// From the C enum value.
    pub(crate) fn from_raw(v: u32) -> Option<Self> {
        Some(match v {
            1 => Self::Mtu256,
            2 => Self::Mtu512,
            3 => Self::Mtu1024,
            4 => Self::Mtu2048,
            5 => Self::Mtu4096,
            _ => return None,
        })
    }

    /// The largest IB MTU not above `bytes`, if any.
    pub(crate) fn at_most(bytes: u32) -> Option<Self> {
        Some(match bytes {
            4096.. => Self::Mtu4096,
            2048.. => Self::Mtu2048,
            1024.. => Self::Mtu1024,
            512.. => Self::Mtu512,
            256.. => Self::Mtu256,
            _ => return None,
        })
    }
}

/// Attributes reported by `query_port`.
#[derive(Clone, Copy, Default)]
pub(crate) struct PortAttr {
    /// Logical state.
    pub(crate) state: PortState,
    /// Physical state.
    pub(crate) phys_state: PhysState,
    /// Largest MTU the port supports.
    pub(crate) max_mtu: IbMtu,
    /// MTU in use.
    pub(crate) active_mtu: IbMtu,
    /// Underlying link MTU in bytes.
    pub(crate) phys_mtu: u32,
    /// GID table length.
    pub(crate) gid_tbl_len: u32,
    /// `IB_PORT_*` capability bits.
    pub(crate) port_cap_flags: u32,
    /// Largest message, in bytes.
    pub(crate) max_msg_sz: u32,
    /// P_Key table length.
    pub(crate) pkey_tbl_len: u16,
    /// Virtual lanes.
    pub(crate) max_vl_num: u8,
}

impl PortAttr {
    /// Copies the values into the C struct the core passed in.
    pub(super) fn write_to(&self, out: &mut bindings::ib_port_attr) {
        out.state = match self.state {
            PortState::Down => bindings::ib_port_state_IB_PORT_DOWN,
            PortState::Active => bindings::ib_port_state_IB_PORT_ACTIVE,
        };
        out.phys_state = match self.phys_state {
            PhysState::Disabled => bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED,
            PhysState::Polling => bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_POLLING,
            PhysState::LinkUp => bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP,
        } as u8;
        out.max_mtu = self.max_mtu as u32;
        out.active_mtu = self.active_mtu as u32;
        out.phys_mtu = self.phys_mtu;
        out.gid_tbl_len = i32::try_from(self.gid_tbl_len).unwrap_or(i32::MAX);
        out.port_cap_flags = self.port_cap_flags;
        out.max_msg_sz = self.max_msg_sz;
        out.pkey_tbl_len = self.pkey_tbl_len;
        out.max_vl_num = self.max_vl_num;
    }
}

/// What never changes about a port (`ib_port_immutable`).
#[derive(Clone, Copy, Default)]
pub(crate) struct PortImmutable {
    /// P_Key table length.
    pub(crate) pkey_tbl_len: u32,
    /// GID table length.
    pub(crate) gid_tbl_len: u32,
    /// Largest MAD the port handles.
    pub(crate) max_mad_size: u32,
    /// The port also speaks RoCE v1 (its GID table gets entries of both
    /// types).
    pub(crate) roce_v1: bool,
}
