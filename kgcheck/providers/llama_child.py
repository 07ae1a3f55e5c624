"""Serve one GGUF model with llama.cpp's HTTP server (xllamacpp) until stdin closes.

Run by ``kgcheck.providers.llama_server`` as a child process, by path, so that it imports
nothing but xllamacpp: ``python llama_child.py MODEL PORT N_CTX THREADS``. Its first line
of standard input is the API key every request must carry (kept off the command line,
which other users of the machine can read). It prints ``ready <address>`` once the model is
loaded and the server listens, then waits for its standard input to close: the parent
closes it to stop the server, and a parent that dies (even by SIGKILL) closes it too, so no
server outlives its run.
"""

import os
import sys

# Spinning OpenMP workers starve other processes on shared cores (generation fell from
# about 50 to 2-5 tokens/s on 2 shared cores): wait passively.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

# The exit status that tells the parent llama.cpp refused to start (its log says why).
START_FAILED = 3
IMPORT_FAILED = 4


def main(argv: list[str]) -> int:
    """Start the server for ``argv`` = model, port, n_ctx, threads; serve until stdin closes."""
    model, port, n_ctx, threads = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    api_key = sys.stdin.buffer.readline().decode("ascii").strip()
    if not api_key:
        print("start failed: no API key on standard input", file=sys.stderr, flush=True)
        return START_FAILED
    try:
        import xllamacpp
    except ImportError as exc:
        print(f"import failed: {exc}", file=sys.stderr, flush=True)
        return IMPORT_FAILED
    params = xllamacpp.CommonParams()
    params.model.path = model
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_ctx = n_ctx
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    # Only kgcheck, which holds the key, may call it (/health stays open); no browser page
    # gets a CORS grant: no allowed origin, no credentials. No web UI, no slot listing.
    params.api_keys = [api_key]
    params.cors_origins = ""
    params.cors_origins_explicit = True
    params.cors_credentials = False
    params.ui = False
    params.endpoint_slots = False
    params.endpoint_props = False
    try:
        server = xllamacpp.Server(params)
    except RuntimeError as exc:
        print(f"start failed: {exc}", file=sys.stderr, flush=True)
        return START_FAILED
    print(f"ready {server.listening_address}", flush=True)
    sys.stdin.buffer.read()
    # Leave at once: the server's threads are not meant to be joined from Python.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
