// Preload (`node -r ./loopback.cjs ...`) that keeps every TCP server of the process on 127.0.0.1.
//
// kinesis-local binds 0.0.0.0 with no option to change it; tests must never listen beyond
// loopback, so `net.Server.prototype.listen` (which http/https servers inherit) is wrapped to
// rewrite the host of every TCP listen, whatever call form is used. Pipe and handle listens
// carry no host and pass through untouched.
//
// Ports the caller cannot know in advance: a requested port listed in the env var
// LOOPBACK_EPHEMERAL_PORTS (comma separated, e.g. "1,2") is replaced by 0 so the OS picks a
// free one, and every bound TCP listener is announced on stderr as
//   loopback-listening requested=<port asked for> port=<port bound>
// which lets the parent tell several listeners apart and read back the real ports without a
// bind-then-release race.
//
// With LOOPBACK_EXIT_ON_STDIN_EOF=1 the process also exits when its stdin closes: the parent
// holds the write end of a pipe, so a server never outlives a test process that was killed
// without running destructors.
'use strict';

const net = require('net');

const HOST = '127.0.0.1';
const ephemeral = new Set(
  (process.env.LOOPBACK_EPHEMERAL_PORTS || '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .map(Number),
);
const originalListen = net.Server.prototype.listen;

function isPipeName(value) {
  return typeof value === 'string' && !/^\s*\d+\s*$/.test(value);
}

// Returns [options, callback] for a TCP listen, or null when the call is not TCP (pipe/handle).
function normalize(args) {
  const rest = args.slice();
  const callback = typeof rest[rest.length - 1] === 'function' ? rest.pop() : undefined;
  const [first] = rest;
  if (first === undefined || first === null) {
    return [{ port: 0 }, callback]; // listen() or listen(cb): any port, every interface.
  }
  if (typeof first === 'object') {
    const isHandle = first._handle !== undefined || first.handle !== undefined || first.fd !== undefined;
    if (isHandle || first.path !== undefined) return null;
    return [Object.assign({}, first), callback];
  }
  if (isPipeName(first)) return null;
  // listen(port[, host][, backlog]): a backlog is the first number after the port.
  const options = { port: Number(first) };
  const backlog = rest.slice(1).find((arg) => typeof arg === 'number');
  if (backlog !== undefined) options.backlog = backlog;
  return [options, callback];
}

net.Server.prototype.listen = function listenOnLoopback(...args) {
  const normalized = normalize(args);
  if (normalized === null) return originalListen.apply(this, args);
  const [options, callback] = normalized;
  const requested = options.port === undefined ? 0 : Number(options.port);
  options.port = ephemeral.has(requested) ? 0 : requested;
  options.host = HOST;
  delete options.ipv6Only; // Meaningless for an IPv4 host.
  this.once('listening', () => {
    const address = this.address();
    if (address && typeof address === 'object') {
      process.stderr.write(`loopback-listening requested=${requested} port=${address.port}\n`);
    }
  });
  return callback === undefined
    ? originalListen.call(this, options)
    : originalListen.call(this, options, callback);
};

if (process.env.LOOPBACK_EXIT_ON_STDIN_EOF === '1') {
  process.stdin.on('data', () => {}); // Reading is what lets 'end' fire; the content is irrelevant.
  process.stdin.on('end', () => process.exit(0));
  process.stdin.on('error', () => process.exit(0));
}
