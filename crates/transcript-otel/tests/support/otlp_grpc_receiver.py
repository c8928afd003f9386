"""A real OTLP/gRPC trace receiver for the tests: the official OTLP service definitions
(PyPI `opentelemetry-proto`) served by gRPC's own server (PyPI `grpcio`), on 127.0.0.1.

Usage: otlp_grpc_receiver.py OUT_DIR [--tls CERT KEY] [--require-header NAME VALUE]
                             [--reject-spans N MESSAGE]

Binds a free loopback port and prints it on the first line of stdout. Every Export request is
written to OUT_DIR/<n>.bin (the serialized ExportTraceServiceRequest, then its metadata in
<n>.meta as `name: value` lines) before it is answered, so when the client has its answer the
request is on disk. A required header that is missing or wrong is UNAUTHENTICATED and nothing
is written. With --reject-spans, every answer is a partial success rejecting N spans with
MESSAGE (what a backend answers to spans over its limits). Stops on SIGTERM or when stdin
closes.
"""

import os
import signal
import sys
import threading
from concurrent import futures

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc


class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, out_dir, required, reject):
        self.out_dir = out_dir
        self.required = required
        self.reject = reject
        self.count = 0
        self.lock = threading.Lock()

    def Export(self, request, context):
        metadata = list(context.invocation_metadata())
        if self.required is not None:
            name, value = self.required
            if (name, value) not in [(k, v) for k, v in metadata]:
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong " + name)
        with self.lock:
            self.count += 1
            n = self.count
        base = os.path.join(self.out_dir, str(n))
        with open(base + ".meta", "w") as f:
            for k, v in metadata:
                if isinstance(v, str):
                    f.write(f"{k}: {v}\n")
        with open(base + ".bin.tmp", "wb") as f:
            f.write(request.SerializeToString())
        os.rename(base + ".bin.tmp", base + ".bin")
        if self.reject is not None:
            partial = trace_service_pb2.ExportTracePartialSuccess(
                rejected_spans=self.reject[0], error_message=self.reject[1]
            )
            return trace_service_pb2.ExportTraceServiceResponse(partial_success=partial)
        return trace_service_pb2.ExportTraceServiceResponse()


def main():
    args = sys.argv[1:]
    out_dir = args.pop(0)
    tls = None
    required = None
    reject = None
    while args:
        flag = args.pop(0)
        if flag == "--tls":
            tls = (args.pop(0), args.pop(0))
        elif flag == "--require-header":
            required = (args.pop(0), args.pop(0))
        elif flag == "--reject-spans":
            reject = (int(args.pop(0)), args.pop(0))
        else:
            sys.exit("unknown argument " + flag)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Receiver(out_dir, required, reject), server)
    if tls is None:
        port = server.add_insecure_port("127.0.0.1:0")
    else:
        with open(tls[0], "rb") as c, open(tls[1], "rb") as k:
            credentials = grpc.ssl_server_credentials([(k.read(), c.read())])
        port = server.add_secure_port("127.0.0.1:0", credentials)
    server.start()
    print(port, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    stop.wait()
    server.stop(0)


if __name__ == "__main__":
    main()
