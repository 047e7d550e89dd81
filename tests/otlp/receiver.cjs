// A small OTLP/HTTP trace receiver for the tests: POST /v1/traces with a
// protobuf ExportTraceServiceRequest, decoded with OpenTelemetry's own OTLP
// definitions (@opentelemetry/otlp-transformer's protobufjs code, from
// package-lock.json). Prints {"port": N} once listening on 127.0.0.1, then
// one JSON line per span received (ids as hex, attributes as an object),
// or {"error": ...} for a request it could not decode (answered 400).
"use strict";
const http = require("http");
const root = require("@opentelemetry/otlp-transformer/build/src/generated/root");

const v1 = root.opentelemetry.proto.collector.trace.v1;
const Request = v1.ExportTraceServiceRequest;
const Response = v1.ExportTraceServiceResponse;

const hex = (b) => Buffer.from(b || []).toString("hex");
const value = (v) => (v ? v.stringValue ?? v.intValue ?? v.boolValue ?? v.doubleValue ?? null : null);
const attrs = (kvs) => Object.fromEntries((kvs || []).map((kv) => [kv.key, value(kv.value)]));

function spans(req) {
  const out = [];
  for (const rs of req.resourceSpans) {
    const resource = attrs(rs.resource && rs.resource.attributes);
    for (const ss of rs.scopeSpans)
      for (const s of ss.spans)
        out.push({
          traceId: hex(s.traceId), spanId: hex(s.spanId), parentSpanId: hex(s.parentSpanId),
          name: s.name, kind: s.kind,
          start: String(s.startTimeUnixNano), end: String(s.endTimeUnixNano),
          status: s.status ? { code: s.status.code, message: s.status.message } : null,
          attributes: attrs(s.attributes), resource, scope: ss.scope ? ss.scope.name : null,
        });
  }
  return out;
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    if (req.method !== "POST" || req.url !== "/v1/traces" ||
        req.headers["content-type"] !== "application/x-protobuf") {
      console.log(JSON.stringify({ error: `${req.method} ${req.url} ${req.headers["content-type"]}` }));
      res.writeHead(404).end();
      return;
    }
    let decoded;
    try {
      decoded = Request.decode(Buffer.concat(chunks));
    } catch (e) {
      console.log(JSON.stringify({ error: String(e) }));
      res.writeHead(400).end();
      return;
    }
    for (const s of spans(decoded))
      console.log(JSON.stringify(s));
    res.writeHead(200, { "Content-Type": "application/x-protobuf" });
    res.end(Buffer.from(Response.encode(Response.create({})).finish()));
  });
});
server.listen(0, "127.0.0.1", () => console.log(JSON.stringify({ port: server.address().port })));
