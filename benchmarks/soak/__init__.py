"""A memory soak of one replica under a million mixed reviews (`payloads`, `client`):
memory, descriptors and threads from /proc (`proc`) after warm-up against the end.
"""
