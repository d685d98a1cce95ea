//! The error type shared by every parser, builder and checker.

use core::fmt;

/// Why a header or packet could not be parsed, built or verified, or why a
/// transport engine refused an input.
///
/// Every fallible function in this module returns this type; none of them
/// panics on malformed input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Error {
    /// The input ends before a header (or the ICRC trailer) is complete.
    Truncated,
    /// The output buffer is too small for what is being written.
    BufferTooSmall,
    /// The BTH transport header version (TVer) is not 0.
    BadVersion,
    /// The BTH opcode is not one this implementation knows.
    UnknownOpcode,
    /// The opcode's operation is not allowed on its transport (for example
    /// an RDMA READ on UD), or the transport itself (RD) is not supported.
    InvalidForTransport,
    /// The BTH pad count is larger than the payload it pads.
    BadPad,
    /// Payload bytes are present for an opcode that carries no payload.
    UnexpectedPayload,
    /// Building: an extension header the opcode requires is missing.
    MissingHeader,
    /// Building: an extension header is set that the opcode does not carry.
    UnexpectedHeader,
    /// Building: a field value does not fit its on-wire width.
    ValueOutOfRange,
    /// ICRC: the IP header is not a supported IPv4 (no options) or IPv6
    /// (fixed 40-byte) header.
    BadIpHeader,
    /// ICRC: the UDP header is not exactly 8 bytes.
    BadUdpHeader,
    /// RoCE v1: the GRH's IPVer is not 6 or its NxtHdr is not 0x1B.
    BadGrh,
    /// ICRC: the computed ICRC does not match the packet's trailer.
    BadIcrc,
    /// Transport: a message is longer than the transport allows (2^31
    /// bytes, or more packets than fit in a safe PSN window), or an atomic
    /// operation's length is not 8.
    BadMessageLength,
    /// Transport: a fixed-capacity queue (send queue window) is full.
    QueueFull,
    /// Transport: the packet is not of the kind this engine handles (for
    /// example a request given to the completer).
    UnexpectedOpcode,
}

impl Error {
    /// A short, static, human-readable description.
    pub const fn as_str(self) -> &'static str {
        match self {
            Error::Truncated => "packet truncated",
            Error::BufferTooSmall => "output buffer too small",
            Error::BadVersion => "unsupported BTH transport version",
            Error::UnknownOpcode => "unknown BTH opcode",
            Error::InvalidForTransport => "opcode not valid for its transport",
            Error::BadPad => "pad count exceeds payload",
            Error::UnexpectedPayload => "payload present for opcode without payload",
            Error::MissingHeader => "required extension header missing",
            Error::UnexpectedHeader => "extension header not used by opcode",
            Error::ValueOutOfRange => "field value out of range",
            Error::BadIpHeader => "unsupported IP header",
            Error::BadGrh => "not a GRH followed by an IBA transport header",
            Error::BadUdpHeader => "bad UDP header",
            Error::BadIcrc => "ICRC mismatch",
            Error::BadMessageLength => "bad message length",
            Error::QueueFull => "queue full",
            Error::UnexpectedOpcode => "opcode not expected here",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    #[test]
    fn display_is_as_str() {
        for e in [
            Error::Truncated,
            Error::BufferTooSmall,
            Error::BadVersion,
            Error::UnknownOpcode,
            Error::InvalidForTransport,
            Error::BadPad,
            Error::UnexpectedPayload,
            Error::MissingHeader,
            Error::UnexpectedHeader,
            Error::ValueOutOfRange,
            Error::BadIpHeader,
            Error::BadUdpHeader,
            Error::BadGrh,
            Error::BadIcrc,
            Error::BadMessageLength,
            Error::QueueFull,
            Error::UnexpectedOpcode,
        ] {
            assert_eq!(e.to_string(), e.as_str());
            assert!(!e.as_str().is_empty());
        }
    }
}
