#!/usr/bin/python3
"""A worker for the control-plane tests: serves torch 2.x's WorkerServer
protocol on $TORCH_WORKER_SERVER_SOCKET (as torch.distributed.elastic's
worker_main() does), with the Python standard library only.

  GET  /                    the WorkerServer index
  GET  /handler/            ["ping", "dump_traceback", "echo", "fail", "sleep"]
  POST /handler/ping        "pong"
  POST /handler/dump_traceback  faulthandler.dump_traceback of every thread
  POST /handler/echo        JSON: method, path, query (name -> [values]), body, content_type, rank
  POST /handler/fail        500 "Handler fail failed: boom"
  POST /handler/sleep?seconds=S  sleeps, then "slept"
  unknown names             404 "Handler <name> not found: Failed to find handler <name>"

The worker itself: prints "line <i> of rank <r>" for i in 0..$CTL_WORKER_LINES-1
on stdout, writes $CTL_WORKER_DIR/rank<r>.pid, writes $CTL_WORKER_DIR/usr1.<r>
on SIGUSR1, exits $CTL_WORKER_EXIT after $CTL_WORKER_EXIT_AFTER seconds when
set, else sleeps in train_loop() until killed (SIGTERM exits 0). With
$CTL_WORKER_NO_SERVER set it serves nothing (a worker without worker_main());
with $CTL_WORKER_HANG set its dump_traceback never answers. With
$CTL_WORKER_TRACE set to a handler name (fr_trace_json, dump_nccl_trace_json)
the listing has it too and it answers a flight recorder's JSON dump, as
torch's: {"version": ..., "pg_config": ..., "entries": [...]} with this
rank's "rank" and "handler"."""

import faulthandler
import http.server
import json
import os
import signal
import socketserver
import sys
import tempfile
import threading
import time
import urllib.parse

RANK = os.environ.get("LOCAL_RANK", "?")
HANDLERS = ["ping", "dump_traceback", "echo", "fail", "sleep"]
TRACE = os.environ.get("CTL_WORKER_TRACE")
if TRACE:
    HANDLERS.append(TRACE)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # client_address is '' on a Unix socket
        pass

    def reply(self, status, ctype, body):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/":
            self.reply(200, "text/html", '<h1>torch.distributed.WorkerServer</h1>\n'
                       '<a href="/handler/">Handler names</a>\n')
        elif self.path == "/handler/":
            self.reply(200, "application/json", json.dumps(HANDLERS, separators=(",", ":")))
        else:
            self.reply(404, "text/plain", "")

    def do_POST(self):
        url = urllib.parse.urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if not url.path.startswith("/handler/"):
            self.reply(404, "text/plain", "")
            return
        name = url.path[len("/handler/"):]
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        if name == "ping":
            self.reply(200, "text/plain", "pong")
        elif name == "dump_traceback":
            if os.environ.get("CTL_WORKER_HANG"):
                time.sleep(3600)
            with tempfile.TemporaryFile() as f:
                faulthandler.dump_traceback(f, all_threads=True)
                f.seek(0)
                self.reply(200, "text/plain", f.read())
        elif name == "echo":
            self.reply(200, "application/json", json.dumps({
                "method": self.command, "path": url.path, "query": query,
                "body": body.decode("utf-8", "replace"),
                "content_type": self.headers.get("Content-Type"), "rank": RANK}))
        elif name == "fail":
            self.reply(500, "text/plain", "Handler fail failed: boom")
        elif TRACE and name == TRACE:
            self.reply(200, "application/json", json.dumps({
                "version": "2.4", "pg_config": {"0": {"name": "0", "desc": "default_pg"}},
                "entries": [{"record_id": 7, "profiling_name": "gloo:all_reduce",
                             "state": "started"}],
                "rank": RANK, "handler": name}))
        elif name == "sleep":
            time.sleep(float(query.get("seconds", ["1"])[0]))
            self.reply(200, "text/plain", "slept")
        else:
            self.reply(404, "text/plain",
                       "Handler %s not found: Failed to find handler %s" % (name, name))


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def serve(path):
    if os.path.exists(path):  # as torch's WorkerServer
        raise RuntimeError("%s already exists" % path)
    server = Server(path, Handler)
    threading.Thread(target=server.serve_forever, name="pt_workerserver", daemon=True).start()
    return server


def train_loop(deadline):
    while deadline is None or time.monotonic() < deadline:
        time.sleep(0.05)


def main():
    d = os.environ.get("CTL_WORKER_DIR")
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    if d:
        def usr1(*a):
            with open(os.path.join(d, "usr1.%s" % RANK), "w") as f:
                f.write("%d\n" % os.getpid())
        signal.signal(signal.SIGUSR1, usr1)
    path = os.environ.get("TORCH_WORKER_SERVER_SOCKET")
    if path and not os.environ.get("CTL_WORKER_NO_SERVER"):
        serve(path)
    for i in range(int(os.environ.get("CTL_WORKER_LINES", "0"))):
        print("line %d of rank %s" % (i, RANK))
    sys.stdout.flush()
    if d:
        tmp = os.path.join(d, "rank%s.pid.tmp" % RANK)
        with open(tmp, "w") as f:
            f.write("%d %s\n" % (os.getpid(), path or ""))
        os.rename(tmp, os.path.join(d, "rank%s.pid" % RANK))
    after = os.environ.get("CTL_WORKER_EXIT_AFTER")
    train_loop(time.monotonic() + float(after) if after else None)
    sys.exit(int(os.environ.get("CTL_WORKER_EXIT", "0")))


if __name__ == "__main__":
    main()
