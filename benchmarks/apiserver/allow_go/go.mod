module gpu-admission.example/benchmarks/allow_go

go 1.26
