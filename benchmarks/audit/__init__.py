"""The periodic audit of one replica under tenant-sized ReplicaSets: its memory (`run`)."""
