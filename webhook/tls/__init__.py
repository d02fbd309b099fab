"""Certificates: the CA and serving certificates, their files, and when to renew them.

It owns issuing (``pki``), reading and writing key pairs, the development
certificates ``serve`` makes when given none, the state of the certificate
being served (``served``), and the rotation decision (``rotation``), which
reads and writes through a store it is given. It imports nothing of the
project; the Kubernetes Secret store lives in the kube
wing, reloading while serving in the service.
"""
