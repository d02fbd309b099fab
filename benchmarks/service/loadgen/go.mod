module gpu-admission.example/benchmarks/loadgen

go 1.26
