"""The HTTP side of `lunlat serve`: /metrics, the landing page, health, readiness and reload.

- `server`: the listening server and the request handler (endpoints, content negotiation, TLS handshake);
- `limits`: what one client may cost and the bookkeeping that holds it to that (connection table,
  bounded head reader, write deadline, open-file limit);
- `head`: a request head, once read within those limits, parsed by h11;
- `threads`: the pool of threads that answer connections;
- `config`: `--web.config.file`, the exporter-toolkit's TLS and basic-auth file.

The design, and where each limit's number comes from, is on the docs site's page docs/web.md.
"""
