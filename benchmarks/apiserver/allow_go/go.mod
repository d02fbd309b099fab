module gpu-admission.example/benchmarks/apiserver/allow_go

go 1.26
