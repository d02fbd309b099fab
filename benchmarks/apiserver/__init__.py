"""Pod CREATE throughput through a real kube-apiserver, one arm per admission setup
(`arms`: none, ours, allow-python, allow-go from `allow_go/`, patch-floor, cel from
`cel`); `load` creates the pods, `metrics` reads kube-apiserver, `profile` its CPU.
"""
