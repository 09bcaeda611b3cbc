"""A local STS server for the tests: moto's, on 127.0.0.1 and a free port.

Announces its port on stderr as `loopback.cjs` does for the node servers
(`loopback-listening requested=1 port=<n>`, 1 being the harness's sentinel for "any free
port"), and stops when its stdin closes, so it never outlives the
test process that started it (even one killed without running destructors).
"""

import sys

from moto.server import ThreadedMotoServer


def main() -> None:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    _, port = server.get_host_and_port()
    print(f"loopback-listening requested=1 port={port}", file=sys.stderr, flush=True)
    sys.stdin.read()
    server.stop()


if __name__ == "__main__":
    main()
