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
  roce_pkt.py v1send IFACE DMAC SGID DGID [--len N] [--bad-icrc]
                    [--next-header N]
      Send the same UD SEND-only packet as RoCE v1 (IBA annex A16): an
      Ethernet frame (Ethertype 0x8915) with a GRH from GID SGID to DGID
      (written as IPv6 addresses, IPv4-mapped for IPv4) out of IFACE to
      DMAC, through an AF_PACKET socket. --next-header sets the GRH's NxtHdr
      (0x1B unless given).
  roce_pkt.py v1capture IFACE COUNT [--timeout S]
      Capture COUNT RoCE v1 frames arriving on IFACE, check each one's GRH
      (IPVer 6, NxtHdr 0x1B, PayLen within the frame) and ICRC (8 bytes of
      0xff, the GRH with traffic class/flow label/hop limit set to ones, the
      BTH with byte 4 set to ones, the rest) and print one line per frame:
      "v1frame SGID DGID opcode=0xNN len=N icrc=ok|BAD". Exits 1 unless
      COUNT good frames arrived.
  roce_pkt.py bind [PORT]
      Exit 0 iff UDP PORT (default 4791) can be bound on IPv4 and IPv6.
  roce_pkt.py hold [PORT]
      Bind UDP PORT on IPv4 and sleep (until killed).
  roce_pkt.py dupread SRC DST --qpn N --psn N --va N --rkey N --len N
                      [--count N] [--mtu N]
      Send COUNT forged duplicates of an RDMA READ request (its first PSN,
      address, R_Key and length) to QP N at DST, back to back.
  roce_pkt.py fuzz SRC DST --qpn N --epsn N [--count N] [--seed N]
                   [--read-psn N --va N --rkey N --len N] [--mtu N] [--kill N]
      Send COUNT malformed and semi-valid RC packets to DST, most aimed at
      live QP N whose responder expects PSN EPSN: truncated headers, bad and
      reserved opcodes, bad pad counts, PSNs outside the window, READs with
      huge lengths, ACKs and READ responses for PSNs never sent, forged
      QPNs, random bytes, duplicates (some inconsistent) of the READ given,
      10% with a bad ICRC. The last KILL packets (default 1000) are garbage
      at EPSN itself, which may legitimately move the QP to the error state.
      Prints the number sent and the seconds it took.

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
    if len(t) > 4:
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


def capture(iface, ethertype, count, timeout, judge):
    """Reads frames of ethertype arriving on iface until count of them were
    judged good or timeout seconds passed; judge(frame) returns (line, good)
    or None to skip a frame. Prints the lines; returns how many were good."""
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ethertype))
    s.bind((iface, 0))
    good = 0
    deadline = time.monotonic() + timeout
    print("listening", flush=True)
    while good < count:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([s], [], [], left)[0]:
            break
        frame, addr = s.recvfrom(65536)
        if addr[2] == socket.PACKET_OUTGOING:
            continue
        verdict = judge(frame)
        if verdict is None:
            continue
        line, ok = verdict
        print(line, flush=True)
        if ok:
            good += 1
    return good


def judge_v2(a, frame):
    """(line, good) for a RoCEv2 frame of cmd_send's kind, None for others."""
    p = parse_frame(frame)
    if p is None:
        return None
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
    line = (f"frame v{version} {srca} {dsta} sport={sport} len={len(payload)} "
            f"icrc={'ok' if ok_icrc else 'BAD'} payload={'ok' if ok_payload else 'BAD'}")
    return line, ok_icrc and ok_payload


def cmd_capture(a):
    good = capture(a.iface, ETH_P_ALL, a.count, a.timeout, lambda f: judge_v2(a, f))
    print(f"captured {good} good frames")
    return 0 if good >= a.count else 1


ETH_P_ROCE_V1 = 0x8915
GRH_NEXT_HEADER_IBA = 0x1B


def icrc_v1(grh, transport):
    """RoCE v1 ICRC value over transport (BTH up to, not including, the ICRC)."""
    t = bytearray(transport)
    if len(t) > 4:
        t[4] = 0xFF
    return zlib.crc32(b"\xff" * 8 + masked_ip(grh) + bytes(t)) & 0xFFFFFFFF


def cmd_v1send(a):
    sgid, dgid = ipaddress.ip_address(a.sgid), ipaddress.ip_address(a.dgid)
    t = transport(a.len)
    grh = struct.pack(">IHBB16s16s", 6 << 28, len(t) + 4, a.next_header, 64,
                      sgid.packed, dgid.packed)
    v = icrc_v1(grh, t)
    if a.bad_icrc:
        v ^= 0x1
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ROCE_V1))
    s.bind((a.iface, 0))
    smac = s.getsockname()[4]
    dmac = bytes.fromhex(a.dmac.replace(":", ""))
    eth = dmac + smac + struct.pack(">H", ETH_P_ROCE_V1)
    s.send(eth + grh + t + struct.pack("<I", v))
    print(f"sent {len(t) + 4} RoCE v1 transport bytes {sgid} -> {dgid} on {a.iface}")


def judge_v1(frame):
    """(line, good) for a RoCE v1 frame: GRH sane and ICRC right."""
    if len(frame) < 14 + 40 + 12 + 4:
        return f"v1frame short len={len(frame)}", False
    grh, rest = frame[14:54], frame[54:]
    plen = struct.unpack(">H", grh[4:6])[0]
    sane = grh[0] >> 4 == 6 and grh[6] == GRH_NEXT_HEADER_IBA and 16 <= plen <= len(rest)
    body = rest[:plen]
    covered, trailer = body[:-4], body[-4:]
    ok = sane and struct.unpack("<I", trailer)[0] == icrc_v1(grh, covered)
    sgid, dgid = ipaddress.ip_address(grh[8:24]), ipaddress.ip_address(grh[24:40])
    line = (f"v1frame {sgid} {dgid} opcode=0x{covered[0]:02x} len={len(body)} "
            f"icrc={'ok' if ok else 'BAD'}")
    return line, ok


def cmd_v1capture(a):
    good = capture(a.iface, ETH_P_ROCE_V1, a.count, a.timeout, judge_v1)
    print(f"captured {good} good RoCE v1 frames")
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


def raw_socket(src):
    family = socket.AF_INET if src.version == 4 else socket.AF_INET6
    s = socket.socket(family, socket.SOCK_RAW, socket.IPPROTO_RAW)
    if family == socket.AF_INET:
        s.setsockopt(socket.IPPROTO_IP, socket.IP_HDRINCL, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
    return s


def rc_packet(src, dst, transport_bytes, sport=0xC000, bad_icrc=False, cut=None):
    """IP + UDP + transport + ICRC; CUT truncates the transport part
    (before the ICRC is appended, so the ICRC covers what is sent)."""
    t = transport_bytes if cut is None else transport_bytes[:cut]
    udp = struct.pack(">HHHH", sport, ROCE_PORT, 8 + len(t) + 4, 0)
    ip = ip_header(src, dst, len(udp) + len(t) + 4)
    v = icrc(ip, udp, t) ^ (1 if bad_icrc else 0)
    return ip + udp + t + struct.pack("<I", v)


def bth(opcode, qpn, psn, pad=0, ack_req=False, pkey=0xFFFF):
    return struct.pack(">BBHB3sB3s", opcode & 0xFF, (pad & 3) << 4, pkey, 0,
                       (qpn & 0xFFFFFF).to_bytes(3, "big"), 0x80 if ack_req else 0,
                       (psn & 0xFFFFFF).to_bytes(3, "big"))


def reth(va, rkey, length):
    return struct.pack(">QII", va & (2**64 - 1), rkey & 0xFFFFFFFF, length & 0xFFFFFFFF)


def read_request(qpn, psn, va, rkey, length):
    return bth(12, qpn, psn, ack_req=True) + reth(va, rkey, length)


def cmd_dupread(a):
    src, dst = ipaddress.ip_address(a.src), ipaddress.ip_address(a.dst)
    pkt = rc_packet(src, dst, read_request(a.qpn, a.psn, a.va, a.rkey, a.len))
    s = raw_socket(src)
    for _ in range(a.count):
        s.sendto(pkt, (str(dst), 0))
    print(f"sent {a.count} duplicate READ requests psn={a.psn} len={a.len}")


# RC opcodes and the extension headers their payload begins with.
RC_WITH_RETH = (6, 10, 11, 12)
RC_REQUESTS = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 19, 20, 22, 23)
RC_RESPONSES = (13, 14, 15, 16, 17, 18)


def fuzz_transport(r, a, epsn_mode):
    """One malformed or semi-valid transport part (no ICRC) and whether to
    truncate it."""
    qpn = a.qpn
    if epsn_mode:
        psn = a.epsn
    else:
        # Outside the window: ahead of the expected PSN, or far behind.
        psn = (a.epsn + r.choice((1, 2, 7, r.randrange(1, 1 << 23),
                                  -r.randrange(1 << 22, 1 << 23)))) & 0xFFFFFF
    kind = r.randrange(12)
    if kind == 0:  # reserved RC opcodes, other transports, CNP, garbage
        op = r.choice((0x15, 0x18, 0x1C, 0x1D, 0x1E, 0x1F, 0x24, 0x48, 0x7F, 0x81, 0xE0, 0xFF))
        return bth(op, qpn, psn) + r.randbytes(r.randrange(0, 64))
    if kind == 1:  # a request whose pad count disagrees with its payload
        op = r.choice((0, 2, 4, 8, 10))
        body = reth(0x1000, 1, 4) if op in RC_WITH_RETH else b""
        n = r.randrange(0, 8)
        return bth(op, qpn, psn, pad=r.randrange(1, 4)) + body + bytes(n)
    if kind == 2:  # RDMA READ with a huge length
        length = r.choice((0x80000000, 0x80000001, 0xFFFFFFFF, 0x7FFFFFFF,
                           r.randrange(1 << 24, 1 << 32)))
        return read_request(qpn, psn, r.getrandbits(64), r.getrandbits(32), length)
    if kind == 3:  # ACK / NAK / RNR NAK / READ response / atomic ACK, unsent PSN
        op = r.choice(RC_RESPONSES)
        aeth = struct.pack(">B3s", r.choice((0x1F, 0x00, 0x20, 0x60, 0x61, 0x63, 0x64, 0xFF)),
                           r.getrandbits(24).to_bytes(3, "big"))
        rpsn = r.choice((r.getrandbits(24), a.epsn, (a.epsn - 1) & 0xFFFFFF))
        body = b"" if op == 14 else aeth
        if op == 18:
            body += r.randbytes(8)
        if op in (13, 14, 15, 16):
            body += r.randbytes(r.choice((0, 1, 4, 1024, 1100)))
        return bth(op, qpn, rpsn) + body
    if kind == 4:  # forged QPNs: QP0, QP1, none, the largest
        op = r.choice(RC_REQUESTS + RC_RESPONSES)
        q = r.choice((0, 1, 2, 0xFFFFFF, r.getrandbits(24), qpn + 1, qpn - 1))
        return bth(op, q, psn) + r.randbytes(r.randrange(0, 48))
    if kind == 5 and a.len is not None:  # duplicates of the real READ, some inconsistent
        mtu = a.mtu
        n = max(1, (a.len + mtu - 1) // mtu)
        i = r.randrange(n)
        va, length = a.va + i * mtu, a.len - i * mtu
        if r.randrange(4) == 0:
            length += r.choice((1, -1, 4096))
        return read_request(qpn, (a.read_psn + i) & 0xFFFFFF, va, a.rkey, length)
    if kind == 6:  # atomics, misaligned or with bad keys
        op = r.choice((19, 20))
        return bth(op, qpn, psn, ack_req=True) + struct.pack(
            ">QIQQ", r.getrandbits(64), r.getrandbits(32), r.getrandbits(64), r.getrandbits(64))
    if kind == 7:  # random bytes after a plausible first byte
        return bytes([r.choice(RC_REQUESTS)]) + r.randbytes(r.randrange(0, 80))
    if kind == 8:  # SEND / WRITE with oversized payloads
        op = r.choice((0, 1, 2, 4, 6, 7, 8, 10))
        body = reth(r.getrandbits(64), r.getrandbits(32), r.getrandbits(32))             if op in RC_WITH_RETH else b""
        return bth(op, qpn, psn, ack_req=r.random() < 0.5) + body +             bytes(r.choice((0, 1, 1023, 1025, 4097)))
    if kind == 9:  # a bad P_Key or transport version
        t = bytearray(bth(r.choice(RC_REQUESTS), qpn, psn) + bytes(16))
        if r.random() < 0.5:
            t[2:4] = r.getrandbits(16).to_bytes(2, "big")
        else:
            t[1] |= r.randrange(1, 16)
        return bytes(t)
    # Plain requests with ordinary headers.
    op = r.choice(RC_REQUESTS)
    body = reth(r.getrandbits(64), r.getrandbits(32), r.randrange(0, 8192))         if op in RC_WITH_RETH else b""
    if op in (19, 20):
        body = bytes(28)
    if op in (22, 23):
        body = r.randbytes(4)
    return bth(op, qpn, psn, ack_req=True) + body + bytes(r.choice((0, 4, 64)))


def cmd_fuzz(a):
    import random
    src, dst = ipaddress.ip_address(a.src), ipaddress.ip_address(a.dst)
    r = random.Random(a.seed)
    # A pool of distinct packets, sent in shuffled rounds (building each
    # of 10^5 packets in Python is slower than sending it).
    pool_n = min(a.count - a.kill, 8192)
    pool = []
    for _ in range(pool_n):
        t = fuzz_transport(r, a, False)
        cut = r.randrange(0, len(t) + 1) if r.random() < 0.15 else None
        pool.append(rc_packet(src, dst, t, sport=r.randrange(0xC000, 0x10000),
                              bad_icrc=r.random() < 0.1, cut=cut))
    kill = [rc_packet(src, dst, fuzz_transport(r, a, True)) for _ in range(a.kill)]
    s = raw_socket(src)
    addr = (str(dst), 0)
    sent = 0
    t0 = time.monotonic()
    while sent < a.count - a.kill:
        r.shuffle(pool)
        for p in pool[:a.count - a.kill - sent]:
            try:
                s.sendto(p, addr)
            except OSError:
                # Socket buffer full: the packet is lost, as on a wire.
                pass
            sent += 1
    for p in kill:
        try:
            s.sendto(p, addr)
        except OSError:
            pass
        sent += 1
    print(f"fuzz sent {sent} packets in {time.monotonic() - t0:.1f} s")


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
    v = sub.add_parser("v1send")
    v.add_argument("iface")
    v.add_argument("dmac")
    v.add_argument("sgid")
    v.add_argument("dgid")
    v.add_argument("--len", type=int, default=32)
    v.add_argument("--bad-icrc", action="store_true")
    v.add_argument("--next-header", type=lambda x: int(x, 0), default=GRH_NEXT_HEADER_IBA)
    vc = sub.add_parser("v1capture")
    vc.add_argument("iface")
    vc.add_argument("count", type=int)
    vc.add_argument("--timeout", type=float, default=10)
    b = sub.add_parser("bind")
    b.add_argument("port", type=int, nargs="?", default=ROCE_PORT)
    h = sub.add_parser("hold")
    h.add_argument("port", type=int, nargs="?", default=ROCE_PORT)
    num = lambda x: int(x, 0)  # noqa: E731
    d = sub.add_parser("dupread")
    d.add_argument("src")
    d.add_argument("dst")
    for k in ("--qpn", "--psn", "--va", "--rkey", "--len"):
        d.add_argument(k, type=num, required=True)
    d.add_argument("--count", type=int, default=100)
    f = sub.add_parser("fuzz")
    f.add_argument("src")
    f.add_argument("dst")
    f.add_argument("--qpn", type=num, required=True)
    f.add_argument("--epsn", type=num, required=True)
    f.add_argument("--count", type=int, default=100000)
    f.add_argument("--kill", type=int, default=1000)
    f.add_argument("--seed", type=int, default=1)
    f.add_argument("--read-psn", type=num, default=0)
    f.add_argument("--va", type=num, default=0)
    f.add_argument("--rkey", type=num, default=0)
    f.add_argument("--len", type=num)
    f.add_argument("--mtu", type=int, default=1024)
    a = p.parse_args()
    return {"send": cmd_send, "capture": cmd_capture, "bind": cmd_bind,
            "hold": cmd_hold, "dupread": cmd_dupread, "fuzz": cmd_fuzz,
            "v1send": cmd_v1send, "v1capture": cmd_v1capture}[a.cmd](a) or 0


if __name__ == "__main__":
    sys.exit(main())
