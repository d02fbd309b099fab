"""One replica under slow, idle, stalled and huge clients, policy loops and floods
(`clients`, `payloads`): the latency others see and its memory (`run`); where to judge
the largest review (`offload`).
"""
