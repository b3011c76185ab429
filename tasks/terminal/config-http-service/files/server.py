#!/usr/bin/env python3
"""A tiny HTTP service configured by config.json next to this script.

config.json keys:
  host      address to bind (string)
  port      TCP port (integer)
  greeting  text returned by GET /greet (string)
  log_file  request log, relative to this script's folder (string);
            its folder must already exist
Routes: GET /health -> "ok", GET /greet -> the greeting.
"""

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
REQUIRED = {"host": str, "port": int, "greeting": str, "log_file": str}


def load_config():
    with open(os.path.join(HERE, "config.json")) as fh:
        cfg = json.load(fh)
    for key, kind in REQUIRED.items():
        if not isinstance(cfg.get(key), kind):
            sys.exit(f"config.json: '{key}' must be a {kind.__name__}")
    log_path = os.path.join(HERE, cfg["log_file"])
    if not os.path.isdir(os.path.dirname(log_path)):
        sys.exit(f"config.json: folder of log_file does not exist: {os.path.dirname(log_path)}")
    cfg["log_path"] = log_path
    return cfg


CONFIG = load_config()


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        routes = {"/health": "ok", "/greet": CONFIG["greeting"]}
        body = routes.get(self.path)
        status = 200 if body is not None else 404
        data = (body if body is not None else "not found").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, fmt, *args):
        with open(CONFIG["log_path"], "a") as fh:
            fh.write(f"{self.address_string()} {fmt % args}\n")


if __name__ == "__main__":
    server = HTTPServer((CONFIG["host"], CONFIG["port"]), Handler)
    print(f"listening on {CONFIG['host']}:{CONFIG['port']}", flush=True)
    server.serve_forever()
