"""An OTLP/HTTP receiver for the tests: decodes each POST with
OpenTelemetry's own protocol package (`opentelemetry-proto`, PyPI) and
writes one JSON line per request to OUT: the path, the headers the test
looks for, and each span or log record with its ids in hex.

usage: otlp_receiver.py PORT_FILE OUT
Binds 127.0.0.1 on a free port and writes the port to PORT_FILE; answers
200 with an empty ExportTraceServiceResponse / ExportLogsServiceResponse.
A body that does not decode is answered 400 and written as an error line.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest, ExportLogsServiceResponse)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest, ExportTraceServiceResponse)

port_file, out_path = sys.argv[1], sys.argv[2]
out = open(out_path, "a", buffering=1)


def value_of(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def attrs(item):
    return {kv.key: value_of(kv.value) for kv in item.attributes}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        line = {"path": self.path, "content_type": self.headers.get("Content-Type"),
                "api_key": self.headers.get("api-key")}
        try:
            if self.path.endswith("/v1/traces"):
                request = ExportTraceServiceRequest.FromString(body)
                line["resource"] = attrs(request.resource_spans[0].resource)
                line["spans"] = [
                    {"trace_id": s.trace_id.hex(), "span_id": s.span_id.hex(),
                     "parent_span_id": s.parent_span_id.hex(), "name": s.name,
                     "kind": s.kind, "attributes": attrs(s), "status": s.status.code,
                     "start_ns": s.start_time_unix_nano, "end_ns": s.end_time_unix_nano,
                     "events": [e.name for e in s.events]}
                    for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
                reply = ExportTraceServiceResponse().SerializeToString()
            elif self.path.endswith("/v1/logs"):
                request = ExportLogsServiceRequest.FromString(body)
                line["logs"] = [
                    {"trace_id": r.trace_id.hex(), "span_id": r.span_id.hex(),
                     "body": value_of(r.body), "attributes": attrs(r),
                     "event_name": getattr(r, "event_name", "")}
                    for rl in request.resource_logs for sl in rl.scope_logs
                    for r in sl.log_records]
                reply = ExportLogsServiceResponse().SerializeToString()
            else:
                raise ValueError("unknown path")
        except Exception as error:  # a body OpenTelemetry's package cannot read
            line["error"] = str(error)
            out.write(json.dumps(line) + "\n")
            self.send_response(400)
            self.end_headers()
            return
        out.write(json.dumps(line) + "\n")
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


server = HTTPServer(("127.0.0.1", 0), Handler)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
