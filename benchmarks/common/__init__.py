"""What several benchmark families share, written once.

- `cluster`: a control plane of etcd and kube-apiserver alone, and a small client of it
  (`Api`, `apiserver_only`, `wait_until`): apiserver, audit, attack --audit, scale;
- `replica`: one real `serve` replica's test PKI, port, health, stop and memory
  (`make_pki`, `free_port`, `wait_until_healthy`, `stop_server`, `process_tree`):
  attack, service, soak, audit;
- `connection`: the raw HTTP/1.1 client over TLS the replica checks and attackers use;
- `processes`: CPU time of a process tree from /proc: apiserver, service;
- `report`: statistics, markdown tables, the machine and the arm order of a report;
- `go_program`: build a Go program once per version of its source (allow_go, loadgen);
- `stub_webhook`: the constant-allow (or fixed-patch) webhook server: apiserver, service.
"""
