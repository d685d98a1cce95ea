#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Handcrafted RoCEv2 packets for sroce's packet I/O tests (no QPs needed).

  roce_pkt.py send SRC DST [--sport N] [--len N] [--bad-icrc] [--short]
      Send one UD SEND-only packet to QP 1 (GSI Q_Key) from SRC to DST:4791
      through a raw IP socket (so this script knows every header byte the
      ICRC covers). --bad-icrc flips the ICRC; --short sends 8 bytes of
      transport (less than a BTH and an ICRC).
  roce_pkt.py capture IFACE COUNT [--timeout S] [--expect-len N]
      Capture COUNT RoCEv2 frames on IFACE (AF_PACKET), check each one's
      ICRC with the masked-header algorithm and the payload pattern
      0,1,2,... and print one line per frame:
      "frame v4|v6 SRC DST sport=N len=N icrc=ok|BAD payload=ok|BAD".
      Exits 1 unless COUNT good frames arrived.
  roce_pkt.py bind [PORT]
      Exit 0 iff UDP PORT (default 4791) can be bound on IPv4 and IPv6.
  roce_pkt.py hold [PORT]
      Bind UDP PORT on IPv4 and sleep (until killed).

ICRC (IBTA annex A17, as rxe computes it): CRC-32 (zlib's) over 8 bytes of
0xff, the IP header with TOS/TTL/checksum (v4) or traffic class/flow
label/hop limit (v6) set to ones, the UDP header with its checksum set to
ones, the BTH with byte 4 set to ones, then the rest up to the ICRC, which
is stored little-endian.
"""

import argparse
import ipaddress
import select
import socket
import struct
import sys
import time
import zlib

ROCE_PORT = 4791
ETH_P_ALL = 0x0003


def masked_ip(ip):
    m = bytearray(ip)
    if m[0] >> 4 == 4:
        m[1] = 0xFF
        m[8] = 0xFF
        m[10] = m[11] = 0xFF
    else:
        m[0] |= 0x0F
        m[1] = m[2] = m[3] = 0xFF
        m[7] = 0xFF
    return bytes(m)


def icrc(ip, udp, transport):
    """ICRC value over transport (BTH up to, not including, the ICRC)."""
    u = bytearray(udp)
    u[6] = u[7] = 0xFF
    t = bytearray(transport)
    t[4] = 0xFF
    return zlib.crc32(b"\xff" * 8 + masked_ip(ip) + bytes(u) + bytes(t)) & 0xFFFFFFFF


def transport(payload_len, psn=0):
    """UD SEND only to QP 1: BTH, DETH, payload 0,1,2,..., pad."""
    pad = (-payload_len) % 4
    bth = struct.pack(">BBHB3sB3s", 0x64, pad << 4, 0xFFFF, 0,
                      (1).to_bytes(3, "big"), 0, psn.to_bytes(3, "big"))
    deth = struct.pack(">II", 0x80010000, 1)
    return bth + deth + bytes(i & 0xFF for i in range(payload_len)) + b"\0" * pad


def ip_header(src, dst, payload_len):
    if src.version == 4:
        return struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + payload_len, 0x1234,
                           0x4000, 64, socket.IPPROTO_UDP, 0, src.packed, dst.packed)
    return struct.pack(">IHBB16s16s", 6 << 28, payload_len, socket.IPPROTO_UDP,
                       64, src.packed, dst.packed)


def cmd_send(a):
    src, dst = ipaddress.ip_address(a.src), ipaddress.ip_address(a.dst)
    if a.short:
        body = b"\x64" * 8
    else:
        t = transport(a.len, a.psn)
        body = t + b"\0" * 4
    udp = struct.pack(">HHHH", a.sport, ROCE_PORT, 8 + len(body), 0)
    ip = ip_header(src, dst, len(udp) + len(body))
    if not a.short:
        v = icrc(ip, udp, t)
        if a.bad_icrc:
            v ^= 0x1
        body = t + struct.pack("<I", v)
    family = socket.AF_INET if src.version == 4 else socket.AF_INET6
    s = socket.socket(family, socket.SOCK_RAW, socket.IPPROTO_RAW)
    if family == socket.AF_INET:
        s.setsockopt(socket.IPPROTO_IP, socket.IP_HDRINCL, 1)
    s.sendto(ip + udp + body, (str(dst), 0))
    print(f"sent {len(body)} transport bytes {src} -> {dst} sport={a.sport}")


def parse_frame(frame):
    """(version, ip, udp, transport_with_icrc) of a RoCEv2 frame, or None."""
    ethertype = struct.unpack(">H", frame[12:14])[0]
    l3 = frame[14:]
    if ethertype == 0x0800 and len(l3) >= 28 and l3[9] == socket.IPPROTO_UDP:
        ihl = (l3[0] & 0xF) * 4
        total = struct.unpack(">H", l3[2:4])[0]
        ip, rest = l3[:ihl], l3[ihl:total]
        version = 4
    elif ethertype == 0x86DD and len(l3) >= 48 and l3[6] == socket.IPPROTO_UDP:
        plen = struct.unpack(">H", l3[4:6])[0]
        ip, rest = l3[:40], l3[40:40 + plen]
        version = 6
    else:
        return None
    udp, body = rest[:8], rest[8:]
    if struct.unpack(">H", udp[2:4])[0] != ROCE_PORT:
        return None
    return version, ip, udp, body


def cmd_capture(a):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((a.iface, 0))
    good = 0
    deadline = time.monotonic() + a.timeout
    print("listening", flush=True)
    while good < a.count:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([s], [], [], left)[0]:
            break
        frame, addr = s.recvfrom(65536)
        if addr[2] == socket.PACKET_OUTGOING:
            continue
        p = parse_frame(frame)
        if p is None:
            continue
        version, ip, udp, body = p
        covered, trailer = body[:-4], body[-4:]
        ok_icrc = len(body) >= 16 and struct.unpack("<I", trailer)[0] == icrc(ip, udp, covered)
        # UD SEND only: BTH 12 + DETH 8, then the payload and the pad.
        pad = (covered[1] >> 4) & 3 if len(covered) > 1 else 0
        payload = covered[20:len(covered) - pad]
        ok_payload = payload == bytes(i & 0xFF for i in range(len(payload)))
        if a.expect_len is not None and len(payload) != a.expect_len:
            ok_payload = False
        if version == 4:
            srca, dsta = ipaddress.ip_address(ip[12:16]), ipaddress.ip_address(ip[16:20])
        else:
            srca, dsta = ipaddress.ip_address(ip[8:24]), ipaddress.ip_address(ip[24:40])
        sport = struct.unpack(">H", udp[0:2])[0]
        print(f"frame v{version} {srca} {dsta} sport={sport} len={len(payload)} "
              f"icrc={'ok' if ok_icrc else 'BAD'} payload={'ok' if ok_payload else 'BAD'}",
              flush=True)
        if ok_icrc and ok_payload:
            good += 1
    print(f"captured {good} good frames")
    return 0 if good >= a.count else 1


def cmd_bind(a):
    for family, addr in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        s = socket.socket(family, socket.SOCK_DGRAM)
        if family == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        try:
            s.bind((addr, a.port))
        except OSError as e:
            print(f"cannot bind {addr} port {a.port}: {e}")
            return 1
        finally:
            s.close()
    print(f"UDP port {a.port} is free")
    return 0


def cmd_hold(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", a.port))
    print(f"holding UDP port {a.port}", flush=True)
    while True:
        time.sleep(3600)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("send")
    s.add_argument("src")
    s.add_argument("dst")
    s.add_argument("--sport", type=int, default=0xC000)
    s.add_argument("--len", type=int, default=32)
    s.add_argument("--psn", type=int, default=0)
    s.add_argument("--bad-icrc", action="store_true")
    s.add_argument("--short", action="store_true")
    c = sub.add_parser("capture")
    c.add_argument("iface")
    c.add_argument("count", type=int)
    c.add_argument("--timeout", type=float, default=10)
    c.add_argument("--expect-len", type=int)
    b = sub.add_parser("bind")
    b.add_argument("port", type=int, nargs="?", default=ROCE_PORT)
    h = sub.add_parser("hold")
    h.add_argument("port", type=int, nargs="?", default=ROCE_PORT)
    a = p.parse_args()
    return {"send": cmd_send, "capture": cmd_capture, "bind": cmd_bind,
            "hold": cmd_hold}[a.cmd](a) or 0


if __name__ == "__main__":
    sys.exit(main())
