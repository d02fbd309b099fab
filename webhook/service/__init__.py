"""The service: a running `serve` replica.

It owns wiring the HTTP edge to uvicorn with TLS (``serve``), reloading the
policy and the certificates when their files change (``policy_reload``,
``certificate_reload``, ``file_poll``), the live inventory's readiness
(``inventory``), the namespace it runs in (``namespace``) and the logs. It may
import every wing but the CLI.
"""
