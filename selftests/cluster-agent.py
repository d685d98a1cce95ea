#!/usr/bin/env python3
"""Remote commands between the cluster's VMs (selftests/cluster.sh).

Every node runs `cluster-agent.py serve`; a test on node 0 runs commands on
the others with `cluster-agent.py run HOST SCRIPT`, which prints the remote
command's output (stdout and stderr, merged) as it comes and exits with its
status. Closing the connection (the client killed by a test's timeout, say)
kills the remote command's process group, so nothing outlives the test that
started it. MPI uses the client as its remote shell (plm_rsh_agent).

Wire (TCP, the cluster's private segment only): the client sends one JSON
line {"script": "..."}; the server answers with frames of one type byte and
a 4-byte big-endian length: b"o" output bytes, then one b"x" whose payload
is the exit status in ASCII.
"""

import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

PORT = 7999


def frame(kind, data):
    return kind + struct.pack(">I", len(data)) + data


def serve_one(conn):
    try:
        line = b""
        while not line.endswith(b"\n"):
            chunk = conn.recv(65536)
            if not chunk:
                return
            line += chunk
        script = json.loads(line)["script"]
        proc = subprocess.Popen(
            ["bash", "-c", script],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        out = proc.stdout.fileno()
        open_out = True
        while open_out:
            ready, _, _ = select.select([out, conn], [], [])
            if conn in ready and not conn.recv(1):
                # The client went away: so does its command.
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return
            if out in ready:
                data = os.read(out, 65536)
                if data:
                    conn.sendall(frame(b"o", data))
                else:
                    open_out = False
        rc = proc.wait()
        conn.sendall(frame(b"x", str(rc).encode()))
    except (OSError, ValueError, KeyError):
        pass
    finally:
        conn.close()


def serve(port):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(64)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve_one, args=(conn,), daemon=True).start()


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def run(host, script, port):
    sock = socket.create_connection((host, port), timeout=30)
    sock.settimeout(None)
    sock.sendall(json.dumps({"script": script}).encode() + b"\n")
    stdout = sys.stdout.buffer
    try:
        while True:
            head = recv_exact(sock, 5)
            body = recv_exact(sock, struct.unpack(">I", head[1:])[0])
            if head[:1] == b"o":
                stdout.write(body)
                stdout.flush()
            else:
                return int(body)
    except EOFError:
        sys.stderr.write(f"cluster-agent: connection to {host} closed before the command ended\n")
        return 255


def wait(host, seconds, port):
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection((host, port), timeout=2).close()
            return 0
        except OSError:
            if time.monotonic() > deadline:
                return 1
            time.sleep(0.5)


def main(argv):
    # A remote shell's caller (MPI) may kill it with SIGTERM: exit so the
    # connection closes and the remote command dies with it.
    signal.signal(signal.SIGTERM, lambda *_: os._exit(143))
    port = int(os.environ.get("SROCE_AGENT_PORT", PORT))
    if len(argv) == 2 and argv[1] == "serve":
        serve(port)
    elif len(argv) >= 4 and argv[1] == "run":
        return run(argv[2], " ".join(argv[3:]), port)
    elif len(argv) == 4 and argv[1] == "wait":
        return wait(argv[2], float(argv[3]), port)
    sys.stderr.write("usage: cluster-agent.py serve | run HOST SCRIPT... | wait HOST SECONDS\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
