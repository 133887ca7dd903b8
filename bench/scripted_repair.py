#!/usr/bin/env python3
"""Scripted repair session on a real device (issue 28 item 5; the CPU twin is
tests/agent/repair_test.cpp).

A stand-in model behind an OpenAI-compatible endpoint (Python's standard library, on
127.0.0.1): its first kernel is the defect corpus's P7 kernel (kernels/rmsnorm/corpus/
p7_assumes_contiguous_rows: row r addressed at x + r * H, right only for packed rows). It
repairs the addressing (x + r * x_row_stride, the corpus's correct_simple control) only when
the prompt it receives shows a failing case whose row stride differs from H — the fact kloop's
feedback carries ("H 128, layout sliced_gaps: shape [4, 16, 128], strides [6144, 128, 1]").
`kloop optimize rmsnorm --provider openai --base-url http://127.0.0.1:PORT/v1 --no-stream`
drives it through the real loop, gates and device.

Pass: the first iteration fails the correctness gate, the model repaired from the feedback, and
a later iteration passed every device gate (correctness, sanitizer, benchmark, roofline).
Prints one JSON summary; exit 0 on pass, 1 on a failed check, 2 on a usage or run error.

usage: scripted_repair.py --kloop BIN --store DIR [--budget N] [--log FILE] [--lib DIR]
                          [-- extra kloop optimize args]
"""
import argparse
import http.server
import json
import os
import pathlib
import re
import subprocess
import sys
import threading

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "kernels" / "rmsnorm" / "corpus"
# The line kloop's feedback writes for a failing case's layout (feedback/sections.cpp).
CASE_LINE = re.compile(r"H (\d+), layout (\w+): shape \[[^\]]*\], strides \[(\d+),")
DEVICE_GATES = ("correctness", "sanitizer", "benchmark", "roofline")


def reply_text(repaired: bool) -> str:
    name = "correct_simple" if repaired else "p7_assumes_contiguous_rows"
    src = (CORPUS / name / "kernel.cu").read_text()
    # The corpus files say which verdict they expect in their first line; the model's reply
    # carries only the code.
    src = "\n".join(src.splitlines()[1:]) + "\n"
    manifest = (CORPUS / name / "manifest.json").read_text()
    note = "Rows addressed with x_row_stride." if repaired else "First version."
    return f"{note}\n\n```cuda\n{src}```\n\n```json\n{manifest}\n```\n"


class Model:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = []  # one dict per request: which reply it got and why

    def answer(self, body: dict) -> str:
        prompt = body["messages"][-1]["content"]
        m = CASE_LINE.search(prompt) if len(body["messages"]) > 1 else None
        knows = bool(m) and m.group(3) != m.group(1)
        with self.lock:
            self.requests.append({"messages": len(body["messages"]), "repaired": knows,
                                  "from": m.group(0) if knows else None})
        return reply_text(knows)


def serve(model: Model):
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            n = int(self.headers.get("Content-Length", "0"))
            try:
                body = json.loads(self.rfile.read(n))
                text = model.answer(body)
            except (ValueError, KeyError, IndexError, TypeError) as e:
                self.send_response(400)
                self.end_headers()
                self.wfile.write(json.dumps({"error": {"message": str(e)}}).encode())
                return
            out = {"id": f"scripted-{len(model.requests)}", "object": "chat.completion",
                   "model": body.get("model", "scripted"),
                   "choices": [{"index": 0, "finish_reason": "stop",
                                "message": {"role": "assistant", "content": text}}],
                   "usage": {"prompt_tokens": len(str(body)) // 4,
                             "completion_tokens": len(text) // 4,
                             "total_tokens": (len(str(body)) + len(text)) // 4}}
            data = json.dumps(out).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kloop", required=True)
    ap.add_argument("--store", required=True)
    ap.add_argument("--budget", type=int, default=3)
    ap.add_argument("--log", help="file for kloop's progress lines")
    ap.add_argument("--lib", help="LD_LIBRARY_PATH for kloop alone (a device bundle's lib/)")
    ap.add_argument("extra", nargs="*", help="more `kloop optimize` arguments (after --)")
    a = ap.parse_args()
    model = Model()
    server = serve(model)
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    cmd = [a.kloop, "optimize", "rmsnorm", "--provider", "openai", "--model", "scripted",
           "--base-url", url, "--no-stream", "--budget", str(a.budget), "--store", a.store,
           "--json", *a.extra]
    env = {**os.environ, "OPENAI_API_KEY": "scripted"}
    if a.lib:
        env["LD_LIBRARY_PATH"] = a.lib
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    server.shutdown()
    if a.log:
        pathlib.Path(a.log).write_text(p.stderr)
    try:
        result = json.loads(p.stdout)
    except ValueError:
        print(json.dumps({"error": "kloop printed no JSON", "exit": p.returncode,
                          "stderr_tail": p.stderr[-2000:]}))
        return 2
    its = result.get("iterations", [])
    first_fails = bool(its) and its[0]["gates"].get("correctness") == "fail"
    passing = [it["iteration"] for it in its
               if all(it["gates"].get(g) == "pass" for g in DEVICE_GATES)]
    repaired = [i for i, r in enumerate(model.requests) if r["repaired"]]
    checks = {"first_iteration_fails_correctness": first_fails,
              "model_repaired_from_feedback": bool(repaired),
              "a_later_iteration_passes_every_device_gate": bool(passing) and passing[0] > 1}
    print(json.dumps({"checks": checks, "kloop_exit": p.returncode,
                      "decision": result.get("decision"), "reason": result.get("reason"),
                      "iterations": [{"iteration": it["iteration"], "gates": it["gates"],
                                      "speedup": it["speedup"], "wall_s": it["wall_s"]}
                                     for it in its],
                      "requests": model.requests}, indent=1))
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
