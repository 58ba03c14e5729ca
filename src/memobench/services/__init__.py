"""Memory systems driven as variants: a running service over HTTP or MCP, or a
library in-process, held to the harness rules of every other variant. One
subpackage per concern (docs/architecture.md#memory-services-where-each-feature-lives):
``transport`` (the clients and server processes), ``definition`` (config to a
checked spec and its definition digest), ``sent`` (sessions, rendering, queries),
``operations`` (the API's operations and the reading of answers), ``ledger``
(what has been ingested), ``job`` (one retrieve job: namespaces, readiness,
searches, load, determinism), ``conformance`` (the check), ``reference_servers``
(``memobench serve``) and ``identity`` (what served a run). The retrieve job
enters through ``job/rank.py``, the catalog's row for ``system`` variants."""
