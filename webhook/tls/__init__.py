"""Certificates: the CA and serving certificates, their files and Secrets, and renewing them.

It owns issuing and reading certificates (``pki``), whether a key belongs to a
certificate (``key_match``), key pairs on disk (``files``), the development
certificates ``serve`` makes when given none (``dev``), the state of the certificate
being served (``served``), what the certificate Secrets hold (``secret_layout``), the
rotation decision (``rotation``) and the first certificates of an install
(``provision``); rotation and provisioning read and write through a store they are
given. It imports nothing of the project; the Kubernetes Secret store lives in the
kube wing, reloading while serving in the service.
"""
