//! Work completion status codes and the mapping from NAK codes to the
//! status the requester reports.
//!
//! The discriminants are those of the kernel's `enum ib_wc_status`
//! (`include/rdma/ib_verbs.h`), which rdma-core's `enum ibv_wc_status`
//! mirrors value for value.

use super::aeth::{NakCode, Syndrome};

/// Completion status of a work request (`enum ib_wc_status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum WcStatus {
    /// The operation completed successfully.
    Success = 0,
    /// Local length error (e.g. a message larger than the receive buffer).
    LocLenErr = 1,
    /// Local QP operation error.
    LocQpOpErr = 2,
    /// Local EE context operation error (RD only).
    LocEecOpErr = 3,
    /// Local protection error (bad L_Key or access rights).
    LocProtErr = 4,
    /// Flushed: the QP was in the error state.
    WrFlushErr = 5,
    /// Memory window bind error.
    MwBindErr = 6,
    /// Bad response: unexpected opcode or length in a response.
    BadRespErr = 7,
    /// Local access error.
    LocAccessErr = 8,
    /// Remote invalid request error (NAK code 1).
    RemInvReqErr = 9,
    /// Remote access error (NAK code 2).
    RemAccessErr = 10,
    /// Remote operational error (NAK code 3).
    RemOpErr = 11,
    /// Transport retry counter exceeded.
    RetryExcErr = 12,
    /// RNR retry counter exceeded.
    RnrRetryExcErr = 13,
    /// Local RDD violation (RD only).
    LocRddViolErr = 14,
    /// Remote invalid RD request (NAK code 4).
    RemInvRdReqErr = 15,
    /// Remote aborted.
    RemAbortErr = 16,
    /// Invalid EE context number.
    InvEecnErr = 17,
    /// Invalid EE context state.
    InvEecStateErr = 18,
    /// Fatal error.
    FatalErr = 19,
    /// Response timeout.
    RespTimeoutErr = 20,
    /// General error.
    GeneralErr = 21,
}

impl WcStatus {
    /// The numeric value reported to verbs consumers.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// Whether this is [`WcStatus::Success`].
    pub const fn is_success(self) -> bool {
        matches!(self, WcStatus::Success)
    }

    /// The status a requester reports for a work request that received
    /// this NAK. A PSN sequence error is not an error of the request (it is
    /// retried), so it maps to `None`.
    pub const fn from_nak(code: NakCode) -> Option<Self> {
        match code {
            NakCode::PsnSequenceError => None,
            NakCode::InvalidRequest => Some(WcStatus::RemInvReqErr),
            NakCode::RemoteAccessError => Some(WcStatus::RemAccessErr),
            NakCode::RemoteOperationalError => Some(WcStatus::RemOpErr),
            NakCode::InvalidRdRequest => Some(WcStatus::RemInvRdReqErr),
        }
    }

    /// The requester's status for a terminal AETH syndrome: the NAK
    /// mapping of [`WcStatus::from_nak`]; `None` for ACKs, RNR NAKs and
    /// sequence-error NAKs (which are not terminal) and for reserved
    /// syndromes (which are ignored).
    pub const fn from_syndrome(s: Syndrome) -> Option<Self> {
        match s {
            Syndrome::Nak(code) => Self::from_nak(code),
            Syndrome::Ack { .. } | Syndrome::RnrNak { .. } | Syndrome::Reserved(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_match_ib_wc_status() {
        assert_eq!(WcStatus::Success.code(), 0);
        assert_eq!(WcStatus::WrFlushErr.code(), 5);
        assert_eq!(WcStatus::BadRespErr.code(), 7);
        assert_eq!(WcStatus::RemInvReqErr.code(), 9);
        assert_eq!(WcStatus::RemAccessErr.code(), 10);
        assert_eq!(WcStatus::RemOpErr.code(), 11);
        assert_eq!(WcStatus::RetryExcErr.code(), 12);
        assert_eq!(WcStatus::RnrRetryExcErr.code(), 13);
        assert_eq!(WcStatus::RemInvRdReqErr.code(), 15);
        assert_eq!(WcStatus::GeneralErr.code(), 21);
        assert!(WcStatus::Success.is_success() && !WcStatus::RemOpErr.is_success());
    }

    #[test]
    fn nak_mapping() {
        assert_eq!(WcStatus::from_nak(NakCode::PsnSequenceError), None);
        assert_eq!(
            WcStatus::from_nak(NakCode::InvalidRequest),
            Some(WcStatus::RemInvReqErr)
        );
        assert_eq!(
            WcStatus::from_nak(NakCode::RemoteAccessError),
            Some(WcStatus::RemAccessErr)
        );
        assert_eq!(
            WcStatus::from_nak(NakCode::RemoteOperationalError),
            Some(WcStatus::RemOpErr)
        );
        assert_eq!(
            WcStatus::from_nak(NakCode::InvalidRdRequest),
            Some(WcStatus::RemInvRdReqErr)
        );
        assert_eq!(
            WcStatus::from_syndrome(Syndrome::from_u8(0x62)),
            Some(WcStatus::RemAccessErr)
        );
        assert_eq!(WcStatus::from_syndrome(Syndrome::from_u8(0x1f)), None);
        assert_eq!(WcStatus::from_syndrome(Syndrome::from_u8(0x21)), None);
        assert_eq!(WcStatus::from_syndrome(Syndrome::from_u8(0x60)), None);
        assert_eq!(WcStatus::from_syndrome(Syndrome::from_u8(0x70)), None);
    }
}
