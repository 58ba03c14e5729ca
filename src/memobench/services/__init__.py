"""Memory systems as services, seen from the client side: the HTTP API a
system variant speaks, as config states it (:mod:`.api`: operations, request
templates, where ids sit in a response), and the client that times every
call (:mod:`.client`). The system variant is retrieval/system.py; the
reference server, retrieval/reference/server.py (``memobench serve``).
Imports nothing of the package above core."""
