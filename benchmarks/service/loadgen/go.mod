module gpu-admission.example/benchmarks/service/loadgen

go 1.26
