#!/usr/bin/env python3
"""Remote commands between the cluster's VMs (selftests/cluster.sh).

Every node runs `cluster-agent.py serve`; a test on node 0 runs commands on
the others with `cluster-agent.py run HOST SCRIPT`, which prints the remote
command's output (stdout and stderr, merged) as it comes and exits with its
status. Closing the connection (the client killed by a test's timeout, say)
kills the remote command's process group, so nothing outlives the test that
started it: the command's whole session is killed (what it started in
other process groups too, timeout(1)'s or MPI's ranks; not daemons that
left the session). MPI uses the client as its remote shell (plm_rsh_agent).
A client that cannot reach the agent exits with status 255.

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


def kill_session(sid):
    """SIGKILL every process of session `sid`: the command and whatever it
    started in other process groups (timeout(1), MPI's ranks), but not the
    daemons that left the session (setsid) on purpose. Called while the
    session's leader is not reaped, so its id cannot be reused meanwhile;
    repeated until a pass finds no member (a member may fork during one)."""
    while True:
        found = False
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                if os.getsid(int(entry)) == sid:
                    os.kill(int(entry), signal.SIGKILL)
                    found = True
            except OSError:
                pass
        if not found:
            return


def serve_one(conn):
    proc = None
    finished = False
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
        while True:
            ready, _, _ = select.select([out, conn], [], [])
            if conn in ready and not conn.recv(1):
                return  # the client went away: so does its command (finally)
            if out in ready:
                data = os.read(out, 65536)
                if not data:
                    break
                conn.sendall(frame(b"o", data))
        rc = proc.wait()
        finished = True
        # A command killed by a signal: the shell's convention.
        conn.sendall(frame(b"x", str(rc if rc >= 0 else 128 - rc).encode()))
    except (OSError, ValueError, KeyError):
        pass
    finally:
        if proc is not None:
            # The client went away or the connection failed: whatever the
            # command left in its session goes too, before the leader is
            # reaped (after a normal end, what stays was left on purpose).
            if not finished:
                kill_session(proc.pid)
            proc.wait()
            proc.stdout.close()
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
    try:
        sock = socket.create_connection((host, port), timeout=30)
    except OSError as err:
        sys.stderr.write(f"cluster-agent: cannot reach {host}:{port}: {err}\n")
        return 255
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
    except (EOFError, OSError):
        sys.stderr.write(f"cluster-agent: connection to {host} lost before the command ended\n")
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
    # Started in the background by a non-interactive shell, the agent has
    # SIGINT and SIGQUIT ignored, and its commands would inherit that.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
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
